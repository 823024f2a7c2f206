#pragma once
// The per-device implementations behind the backend interface (ops.h,
// elementwise_ops.h, train_ops.h): namespace cpu (backend/cpu/, always built)
// and namespace cuda (backend/cuda/, built when TRAINER_WITH_CUDA). Both
// declare the same functions with the same contracts as the public ones
// (TRAINER_DEVICE_OPS), except the ops that take bf16 activations on a GPU,
// which the CPU declares for fp32 only; the dispatch files call one or the
// other by d.kind. Internal to lib/backend.
#include <memory>

#include "backend/elementwise_ops.h"
#include "backend/ops.h"
#include "backend/train_ops.h"

#define TRAINER_DEVICE_OPS                                                                                  \
  std::unique_ptr<ConvBackend> make_conv2d(const Device& d, Conv2DParams p);                                \
  std::unique_ptr<ConvBackend> make_conv2d_transpose(const Device& d, Conv2DParams p);                      \
  std::unique_ptr<PoolBackend> make_max_pool2d(const Device& d, Pool2DParams p);                            \
  std::unique_ptr<BatchNormBackend> make_batch_norm(const Device& d);                                       \
  void activation_forward(const Device& d, Activation a, float* y, size_t n);                               \
  void activation_backward(const Device& d, Activation a, const float* v, const float* dy, float* dx,        \
                           size_t n);                                                                       \
  void scale_shift_forward(const Device& d, const float* x, float scale, float offset, float* y, size_t n); \
  void scale_backward(const Device& d, const float* dy, float scale, float* dx, size_t n);                  \
  void add_forward(const Device& d, const float* const* xs, size_t k, float* y, size_t n);                  \
  void add_channels_forward(const Device& d, const float* x, const float* s, Shape xs, float* y);           \
  void channel_sums(const Device& d, const float* x, Shape xs, float* out);                                 \
  void avg_pool_forward(const Device& d, const float* x, Shape xs, Pool2DParams p, PadPair pad_h,         \
                        PadPair pad_w, float* y, Shape ys);                                                 \
  void avg_pool_backward(const Device& d, const float* dy, Shape ys, Pool2DParams p, PadPair pad_h,       \
                         PadPair pad_w, float* dx, Shape xs);                                               \
  void global_avg_pool_forward(const Device& d, const float* x, Shape xs, float* y);                        \
  void global_avg_pool_backward(const Device& d, const float* dy, Shape xs, float* dx);                     \
  void global_max_pool_forward(const Device& d, const float* x, Shape xs, float* y);                        \
  void global_max_pool_backward(const Device& d, const float* x, Shape xs, const float* y, const float* dy, \
                                float* dx);                                                                 \
  void prelu_forward(const Device& d, const float* x, Shape xs, const float* alpha, PReLUShape a,          \
                     float* y);                                                                             \
  void prelu_backward(const Device& d, const float* x, Shape xs, const float* alpha, PReLUShape a,         \
                      const float* dy, float* dx, float* dalpha);                                           \
  void multiply_forward(const Device& d, const float* a, const float* b, int cb, long long P, int C,       \
                        float* y);                                                                          \
  void multiply_backward(const Device& d, const float* a, const float* b, int cb, long long P, int C,      \
                         const float* dy, float* da, float* db);                                            \
  void scale_channels_forward(const Device& d, const float* x, const float* s, Shape xs, float* y);         \
  void scale_channels_backward(const Device& d, const float* x, const float* s, Shape xs, const float* dy,  \
                               float* dx, float* ds);                                                       \
  void upsample_nearest_forward(const Device& d, const float* x, Shape xs, UpSample2DParams p, float* y);   \
  void upsample_nearest_backward(const Device& d, const float* dy, Shape xs, UpSample2DParams p,            \
                                 float* dx);                                                                \
  void upsample_bilinear_forward(const Device& d, const float* x, Shape xs, UpSample2DParams p, float* y);  \
  void upsample_bilinear_backward(const Device& d, const float* dy, Shape xs, UpSample2DParams p,           \
                                  float* dx);                                                               \
  void crop_forward(const Device& d, DType t, const void* x, Shape xs, Crop2DParams p, void* y);            \
  void crop_backward(const Device& d, DType t, const void* dy, Shape xs, Crop2DParams p, void* dx);         \
  void dropout_forward(const Device& d, const float* x, Shape s, uint64_t step_key, long long sample_offset, \
                       DropoutParams p, float* y, uint8_t* mask);                                           \
  void dropout_backward(const Device& d, const float* dy, const uint8_t* mask, float scale, float* dx,      \
                        size_t n);                                                                          \
  void group_norm_stats(const Device& d, const float* x, Shape s, int groups, double epsilon, double* sums, \
                        float* mean, float* istd);                                                          \
  void group_norm_apply(const Device& d, const float* x, Shape s, int groups, const float* mean,            \
                        const float* istd, const float* gamma, const float* beta, float* y);                \
  void group_norm_backward(const Device& d, const float* x, const float* dy, Shape s, int groups,           \
                           const float* mean, const float* istd, const float* gamma, double* sums,          \
                           float* coef, float* dgamma, float* dbeta, float* dx);                            \
  void layer_norm_stats(const Device& d, const float* x, size_t rows, int C, double epsilon, float* mean,   \
                        float* istd);                                                                       \
  void layer_norm_backward(const Device& d, const float* x, const float* dy, size_t rows, int C,           \
                           const float* mean, const float* istd, const float* gamma, float* dgamma,         \
                           float* dbeta, float* dx);                                                        \
  void segmentation_sums(const Device& d, const float* z, const float* y, int n, size_t m, bool need_bce,   \
                         bool need_dice, double* sums_host);                                                \
  void segmentation_loss_grad(const Device& d, const float* z, const float* y, int n, size_t m,             \
                              const float* coef_host, float* g);                                            \
  double softmax_loss_sum(const Device& d, const float* z, const float* y, size_t n, int k,                  \
                          CrossEntropyForm f);                                                              \
  void softmax_loss_grad(const Device& d, const float* z, const float* y, size_t n, int k,                  \
                         CrossEntropyForm f, float scale, float* g);                                        \
  double sigmoid_focal_sum(const Device& d, const float* z, const float* y, size_t n, CrossEntropyForm f);  \
  void sigmoid_focal_grad(const Device& d, const float* z, const float* y, size_t n, CrossEntropyForm f,    \
                          float scale, float* g);                                                           \
  void class_confusion(const Device& d, const float* z, const float* y, size_t n, int k,                  \
                       int64_t* confusion_host);                                                          \
  void softmax_channels(const Device& d, float* x, size_t n, int k);                                      \
  void logit_histogram(const Device& d, const float* z, const float* y, size_t n, const float* thr_host,    \
                       int64_t* hist_host);                                                                 \
  void abs_and_square_sums(const Device& d, const float* const* ws, const size_t* ns, size_t k,             \
                           double* sums_host);                                                              \
  void regularizer_grad(const Device& d, const float* w, float* g, size_t n, float l1, float l2);          \
  void clip_by_value(const Device& d, float* g, size_t n, float limit);                                    \
  void clip_by_norm(const Device& d, float* const* gs, const size_t* ns, size_t k, double limit,            \
                    bool global);                                                                          \
  void sgd_step(const Device& d, float* w, const float* g, size_t n, float lr);                             \
  void sgd_momentum_step(const Device& d, float* w, float* velocity, const float* g, size_t n, float lr,    \
                         float momentum, bool nesterov);                                                    \
  void adam_step(const Device& d, float* w, float* m, float* v, float* v_hat, const float* g, size_t n,    \
                 float lr_t, float b1, float b2, float epsilon);                                            \
  void rmsprop_step(const Device& d, float* w, float* rms, float* mg, const float* g, size_t n, float lr,   \
                    float rho, float epsilon);                                                              \
  void rmsprop_momentum_step(const Device& d, float* w, float* rms, float* mg, float* mom, const float* g,  \
                             size_t n, float lr, float rho, float momentum, float epsilon);

namespace trainer {
namespace cpu {
TRAINER_DEVICE_OPS
// fp32 only: the dispatch checks the public functions' DType.
void accumulate(const Device& d, float* y, const float* x, size_t n);
void concat_channels_forward(const Device& d, const float* const* xs, const int* cs, size_t k, long long P, float* y,
                             int cy);
void concat_channels_backward(const Device& d, const float* dy, int cy, long long P, const int* cs, size_t k,
                              float* const* dxs);
}  // namespace cpu
#if defined(TRAINER_WITH_CUDA)
namespace cuda {
TRAINER_DEVICE_OPS
// Both types, as the public functions.
void accumulate(const Device& d, DType t, void* y, const void* x, size_t n);
void concat_channels_forward(const Device& d, DType t, const void* const* xs, const int* cs, size_t k, long long P,
                             void* y, int cy);
void concat_channels_backward(const Device& d, DType t, const void* dy, int cy, long long P, const int* cs, size_t k,
                              void* const* dxs);
}  // namespace cuda
#endif
}  // namespace trainer
