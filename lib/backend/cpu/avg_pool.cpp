// AveragePooling2D forward / backward on the CPU (OpenMP over output or input
// rows), the windows through backend/elementwise_math.h's pool_window and
// pool_outputs, the sums in the order the CUDA kernels take.
#include "backend/device_ops.h"

namespace trainer::cpu {

void avg_pool_forward(const Device&, const float* x, Shape xs, Pool2DParams p, PadPair pad_h, PadPair pad_w,
                      float* y, Shape ys) {
  const int C = xs.c;
#pragma omp parallel for collapse(2) schedule(static)
  for (int n = 0; n < ys.n; ++n)
    for (int oh = 0; oh < ys.h; ++oh) {
      int h0, h1;
      pool_window(oh, p.ph, p.stride_h, pad_h.before, xs.h, h0, h1);
      for (int ow = 0; ow < ys.w; ++ow) {
        int w0, w1;
        pool_window(ow, p.pw, p.stride_w, pad_w.before, xs.w, w0, w1);
        const float count = float((h1 - h0) * (w1 - w0));
        float* out = y + ((size_t(n) * ys.h + oh) * ys.w + ow) * C;
        for (int c = 0; c < C; ++c) {
          float sum = 0.f;
          for (int i = h0; i < h1; ++i)
            for (int j = w0; j < w1; ++j) sum += x[((size_t(n) * xs.h + i) * xs.w + j) * C + c];
          out[c] = sum / count;
        }
      }
    }
}

void avg_pool_backward(const Device&, const float* dy, Shape ys, Pool2DParams p, PadPair pad_h, PadPair pad_w,
                       float* dx, Shape xs) {
  const int C = xs.c;
#pragma omp parallel for collapse(2) schedule(static)
  for (int n = 0; n < xs.n; ++n)
    for (int i = 0; i < xs.h; ++i) {
      int o0, o1;
      pool_outputs(i, p.ph, p.stride_h, pad_h.before, ys.h, o0, o1);
      for (int j = 0; j < xs.w; ++j) {
        int q0, q1;
        pool_outputs(j, p.pw, p.stride_w, pad_w.before, ys.w, q0, q1);
        float* out = dx + ((size_t(n) * xs.h + i) * xs.w + j) * C;
        for (int c = 0; c < C; ++c) {
          float sum = 0.f;
          for (int oh = o0; oh < o1; ++oh) {
            int h0, h1;
            pool_window(oh, p.ph, p.stride_h, pad_h.before, xs.h, h0, h1);
            for (int ow = q0; ow < q1; ++ow) {
              int w0, w1;
              pool_window(ow, p.pw, p.stride_w, pad_w.before, xs.w, w0, w1);
              sum += dy[((size_t(n) * ys.h + oh) * ys.w + ow) * C + c] / float((h1 - h0) * (w1 - w0));
            }
          }
          out[c] = sum;
        }
      }
    }
}

}  // namespace trainer::cpu
