// The public element-wise ops (backend/elementwise_ops.h): each calls the CPU
// or the CUDA implementation by the device's kind.
#include "backend/dispatch.h"

namespace trainer {

void activation_forward(const Device& d, Activation a, float* y, size_t n) {
  TRAINER_DISPATCH(d, activation_forward(d, a, y, n));
}
void softmax_channels(const Device& d, float* x, size_t n, int k) {
  TRAINER_DISPATCH(d, softmax_channels(d, x, n, k));
}
void activation_backward(const Device& d, Activation a, const float* v, const float* dy, float* dx, size_t n) {
  TRAINER_DISPATCH(d, activation_backward(d, a, v, dy, dx, n));
}
void scale_shift_forward(const Device& d, const float* x, float scale, float offset, float* y, size_t n) {
  TRAINER_DISPATCH(d, scale_shift_forward(d, x, scale, offset, y, n));
}
void scale_backward(const Device& d, const float* dy, float scale, float* dx, size_t n) {
  TRAINER_DISPATCH(d, scale_backward(d, dy, scale, dx, n));
}
void avg_pool_forward(const Device& d, const float* x, Shape xs, Pool2DParams p, PadPair pad_h, PadPair pad_w,
                      float* y, Shape ys) {
  TRAINER_DISPATCH(d, avg_pool_forward(d, x, xs, p, pad_h, pad_w, y, ys));
}
void avg_pool_backward(const Device& d, const float* dy, Shape ys, Pool2DParams p, PadPair pad_h, PadPair pad_w,
                       float* dx, Shape xs) {
  TRAINER_DISPATCH(d, avg_pool_backward(d, dy, ys, p, pad_h, pad_w, dx, xs));
}
void prelu_forward(const Device& d, const float* x, Shape xs, const float* alpha, PReLUShape a, float* y) {
  TRAINER_DISPATCH(d, prelu_forward(d, x, xs, alpha, a, y));
}
void prelu_backward(const Device& d, const float* x, Shape xs, const float* alpha, PReLUShape a, const float* dy,
                    float* dx, float* dalpha) {
  TRAINER_DISPATCH(d, prelu_backward(d, x, xs, alpha, a, dy, dx, dalpha));
}
void multiply_forward(const Device& d, const float* a, const float* b, int cb, long long P, int C, float* y) {
  TRAINER_DISPATCH(d, multiply_forward(d, a, b, cb, P, C, y));
}
void multiply_backward(const Device& d, const float* a, const float* b, int cb, long long P, int C, const float* dy,
                       float* da, float* db) {
  TRAINER_DISPATCH(d, multiply_backward(d, a, b, cb, P, C, dy, da, db));
}
void add_channels_forward(const Device& d, const float* x, const float* s, Shape xs, float* y) {
  TRAINER_DISPATCH(d, add_channels_forward(d, x, s, xs, y));
}
void channel_sums(const Device& d, const float* x, Shape xs, float* out) {
  TRAINER_DISPATCH(d, channel_sums(d, x, xs, out));
}
void global_avg_pool_forward(const Device& d, const float* x, Shape xs, float* y) {
  TRAINER_DISPATCH(d, global_avg_pool_forward(d, x, xs, y));
}
void global_avg_pool_backward(const Device& d, const float* dy, Shape xs, float* dx) {
  TRAINER_DISPATCH(d, global_avg_pool_backward(d, dy, xs, dx));
}
void global_max_pool_forward(const Device& d, const float* x, Shape xs, float* y) {
  TRAINER_DISPATCH(d, global_max_pool_forward(d, x, xs, y));
}
void global_max_pool_backward(const Device& d, const float* x, Shape xs, const float* y, const float* dy, float* dx) {
  TRAINER_DISPATCH(d, global_max_pool_backward(d, x, xs, y, dy, dx));
}
void scale_channels_forward(const Device& d, const float* x, const float* s, Shape xs, float* y) {
  TRAINER_DISPATCH(d, scale_channels_forward(d, x, s, xs, y));
}
void scale_channels_backward(const Device& d, const float* x, const float* s, Shape xs, const float* dy, float* dx,
                             float* ds) {
  TRAINER_DISPATCH(d, scale_channels_backward(d, x, s, xs, dy, dx, ds));
}
void add_forward(const Device& d, const float* const* xs, size_t k, float* y, size_t n) {
  TRAINER_DISPATCH(d, add_forward(d, xs, k, y, n));
}
// The typed ops: the CUDA backend takes both types, the CPU's fp32 only.
void accumulate(const Device& d, DType t, void* y, const void* x, size_t n) {
#if defined(TRAINER_WITH_CUDA)
  if (d.is_cuda()) return cuda::accumulate(d, t, y, x, n);
#endif
  const Device& cpu_device = detail::require_cpu(d);  // a build without CUDA says so first
  require_f32(t, "accumulate on the CPU");
  cpu::accumulate(cpu_device, static_cast<float*>(y), static_cast<const float*>(x), n);
}
void concat_channels_forward(const Device& d, DType t, const void* const* xs, const int* cs, size_t k, long long P,
                             void* y, int cy) {
#if defined(TRAINER_WITH_CUDA)
  if (d.is_cuda()) return cuda::concat_channels_forward(d, t, xs, cs, k, P, y, cy);
#endif
  const Device& cpu_device = detail::require_cpu(d);
  require_f32(t, "Concatenate on the CPU");
  cpu::concat_channels_forward(cpu_device, reinterpret_cast<const float* const*>(xs), cs, k, P,
                               static_cast<float*>(y), cy);
}
void concat_channels_backward(const Device& d, DType t, const void* dy, int cy, long long P, const int* cs, size_t k,
                              void* const* dxs) {
#if defined(TRAINER_WITH_CUDA)
  if (d.is_cuda()) return cuda::concat_channels_backward(d, t, dy, cy, P, cs, k, dxs);
#endif
  const Device& cpu_device = detail::require_cpu(d);
  require_f32(t, "Concatenate on the CPU");
  cpu::concat_channels_backward(cpu_device, static_cast<const float*>(dy), cy, P, cs, k,
                                reinterpret_cast<float* const*>(dxs));
}
void crop_forward(const Device& d, DType t, const void* x, Shape xs, Crop2DParams p, void* y) {
  TRAINER_DISPATCH(d, crop_forward(d, t, x, xs, p, y));
}
void crop_backward(const Device& d, DType t, const void* dy, Shape xs, Crop2DParams p, void* dx) {
  TRAINER_DISPATCH(d, crop_backward(d, t, dy, xs, p, dx));
}
void upsample_bilinear_forward(const Device& d, const float* x, Shape xs, UpSample2DParams p, float* y) {
  TRAINER_DISPATCH(d, upsample_bilinear_forward(d, x, xs, p, y));
}
void upsample_bilinear_backward(const Device& d, const float* dy, Shape xs, UpSample2DParams p, float* dx) {
  TRAINER_DISPATCH(d, upsample_bilinear_backward(d, dy, xs, p, dx));
}
void upsample_nearest_forward(const Device& d, const float* x, Shape xs, UpSample2DParams p, float* y) {
  TRAINER_DISPATCH(d, upsample_nearest_forward(d, x, xs, p, y));
}
void upsample_nearest_backward(const Device& d, const float* dy, Shape xs, UpSample2DParams p, float* dx) {
  TRAINER_DISPATCH(d, upsample_nearest_backward(d, dy, xs, p, dx));
}
void dropout_forward(const Device& d, const float* x, Shape s, uint64_t step_key, long long sample_offset,
                     DropoutParams p, float* y, uint8_t* mask) {
  TRAINER_DISPATCH(d, dropout_forward(d, x, s, step_key, sample_offset, p, y, mask));
}
void dropout_backward(const Device& d, const float* dy, const uint8_t* mask, float scale, float* dx, size_t n) {
  TRAINER_DISPATCH(d, dropout_backward(d, dy, mask, scale, dx, n));
}
void group_norm_stats(const Device& d, const float* x, Shape s, int groups, double epsilon, double* sums,
                      float* mean, float* istd) {
  TRAINER_DISPATCH(d, group_norm_stats(d, x, s, groups, epsilon, sums, mean, istd));
}
void group_norm_apply(const Device& d, const float* x, Shape s, int groups, const float* mean, const float* istd,
                      const float* gamma, const float* beta, float* y) {
  TRAINER_DISPATCH(d, group_norm_apply(d, x, s, groups, mean, istd, gamma, beta, y));
}
void group_norm_backward(const Device& d, const float* x, const float* dy, Shape s, int groups, const float* mean,
                         const float* istd, const float* gamma, double* sums, float* coef, float* dgamma,
                         float* dbeta, float* dx) {
  TRAINER_DISPATCH(d, group_norm_backward(d, x, dy, s, groups, mean, istd, gamma, sums, coef, dgamma, dbeta, dx));
}
void layer_norm_stats(const Device& d, const float* x, size_t rows, int C, double epsilon, float* mean,
                      float* istd) {
  TRAINER_DISPATCH(d, layer_norm_stats(d, x, rows, C, epsilon, mean, istd));
}
void layer_norm_backward(const Device& d, const float* x, const float* dy, size_t rows, int C, const float* mean,
                         const float* istd, const float* gamma, float* dgamma, float* dbeta, float* dx) {
  TRAINER_DISPATCH(d, layer_norm_backward(d, x, dy, rows, C, mean, istd, gamma, dgamma, dbeta, dx));
}

}  // namespace trainer
