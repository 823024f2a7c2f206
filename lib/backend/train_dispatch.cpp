// The public training-loop ops (backend/train_ops.h): each calls the CPU or
// the CUDA implementation by the device's kind.
#include "backend/dispatch.h"

namespace trainer {

void segmentation_sums(const Device& d, const float* z, const float* y, int n, size_t m, bool need_bce,
                       bool need_dice, double* sums_host) {
  TRAINER_DISPATCH(d, segmentation_sums(d, z, y, n, m, need_bce, need_dice, sums_host));
}
void segmentation_loss_grad(const Device& d, const float* z, const float* y, int n, size_t m,
                            const float* coef_host, float* g) {
  TRAINER_DISPATCH(d, segmentation_loss_grad(d, z, y, n, m, coef_host, g));
}
double softmax_loss_sum(const Device& d, const float* z, const float* y, size_t n, int k, CrossEntropyForm f) {
  TRAINER_DISPATCH(d, softmax_loss_sum(d, z, y, n, k, f));
}
void softmax_loss_grad(const Device& d, const float* z, const float* y, size_t n, int k, CrossEntropyForm f,
                       float scale, float* g) {
  TRAINER_DISPATCH(d, softmax_loss_grad(d, z, y, n, k, f, scale, g));
}
double sigmoid_focal_sum(const Device& d, const float* z, const float* y, size_t n, CrossEntropyForm f) {
  TRAINER_DISPATCH(d, sigmoid_focal_sum(d, z, y, n, f));
}
void sigmoid_focal_grad(const Device& d, const float* z, const float* y, size_t n, CrossEntropyForm f, float scale,
                        float* g) {
  TRAINER_DISPATCH(d, sigmoid_focal_grad(d, z, y, n, f, scale, g));
}
void class_confusion(const Device& d, const float* z, const float* y, size_t n, int k, int64_t* confusion_host) {
  TRAINER_DISPATCH(d, class_confusion(d, z, y, n, k, confusion_host));
}
void logit_histogram(const Device& d, const float* z, const float* y, size_t n, const float* thr_host,
                     int64_t* hist_host) {
  TRAINER_DISPATCH(d, logit_histogram(d, z, y, n, thr_host, hist_host));
}
void abs_and_square_sums(const Device& d, const float* const* ws, const size_t* ns, size_t k, double* sums_host) {
  TRAINER_DISPATCH(d, abs_and_square_sums(d, ws, ns, k, sums_host));
}
void regularizer_grad(const Device& d, const float* w, float* g, size_t n, float l1, float l2) {
  TRAINER_DISPATCH(d, regularizer_grad(d, w, g, n, l1, l2));
}
void clip_by_value(const Device& d, float* g, size_t n, float limit) {
  TRAINER_DISPATCH(d, clip_by_value(d, g, n, limit));
}
void clip_by_norm(const Device& d, float* const* gs, const size_t* ns, size_t k, double limit, bool global) {
  TRAINER_DISPATCH(d, clip_by_norm(d, gs, ns, k, limit, global));
}
void sgd_step(const Device& d, float* w, const float* g, size_t n, float lr) {
  TRAINER_DISPATCH(d, sgd_step(d, w, g, n, lr));
}
void sgd_momentum_step(const Device& d, float* w, float* velocity, const float* g, size_t n, float lr,
                       float momentum, bool nesterov) {
  TRAINER_DISPATCH(d, sgd_momentum_step(d, w, velocity, g, n, lr, momentum, nesterov));
}
void adam_step(const Device& d, float* w, float* m, float* v, float* v_hat, const float* g, size_t n, float lr_t,
               float b1, float b2, float epsilon) {
  TRAINER_DISPATCH(d, adam_step(d, w, m, v, v_hat, g, n, lr_t, b1, b2, epsilon));
}
void rmsprop_step(const Device& d, float* w, float* rms, float* mg, const float* g, size_t n, float lr, float rho,
                  float epsilon) {
  TRAINER_DISPATCH(d, rmsprop_step(d, w, rms, mg, g, n, lr, rho, epsilon));
}
void rmsprop_momentum_step(const Device& d, float* w, float* rms, float* mg, float* mom, const float* g, size_t n,
                           float lr, float rho, float momentum, float epsilon) {
  TRAINER_DISPATCH(d, rmsprop_momentum_step(d, w, rms, mg, mom, g, n, lr, rho, momentum, epsilon));
}

}  // namespace trainer
