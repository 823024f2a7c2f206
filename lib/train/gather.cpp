// Trainer::gather: a tower's shard of a batch from the held samples
// (data/held_samples.h), augmented as its training step draws: on a CPU
// tower into its input and labels; on a GPU tower as held values uploaded
// and augmented on the device (augment_batch), or, where that cannot be
// (float32 samples, pixels counted on the host), as float32 gathered on the
// host and uploaded.
#include <chrono>
#include <cstring>
#include <exception>
#include <optional>
#include <vector>

#include "backend/elementwise_ops.h"
#include "backend/train_ops.h"
#include "core/error.h"
#include "data/training_sample.h"
#include "train/loss.h"
#include "train/trainer.h"

namespace trainer {

namespace {

/// What Trainer::gather copies: held samples (data/held_samples.h), the
/// batch's sample order from position lo, and the augmentation of a
/// training step (none without augment_step).
struct GatherSource {
  const Tensor& images;
  const Tensor* masks;
  const std::vector<int>& indices;
  int lo;
  std::optional<uint64_t> augment_step;
  const AugmentationConfig& augmentation;
  uint64_t seed;
  Shape in;  ///< The model's input (one sample).
};

/// Sample indices[lo + k] as float32 into image_to (and its mask into
/// mask_to, unless nullptr), augmented as the step draws for position lo + k
/// (data/training_sample.h).
/// The augmentation of sample k of s: none without a step, else as the step draws for position lo + k.
SampleAugmentation augmentation_of(const GatherSource& s, int k) {
  if (!s.augment_step) return {};
  return draw_sample_augmentation(s.augmentation, s.seed, *s.augment_step, uint64_t(s.lo + k), s.in.h, s.in.w);
}

void copy_sample(const GatherSource& s, int k, float* image_to, float* mask_to) {
  augmented_sample_to_float(s.augmentation, augmentation_of(s, k), s.images, s.masks, s.indices[size_t(s.lo + k)],
                            image_to, mask_to);
}

/// Whether a GPU tower can take its shard as the held values and augment it
/// on the device (augment_batch): images and masks held as 8- or 16-bit
/// values, and no counting of the masks' pixels on the host.
bool gathers_held(const GatherSource& s, bool count) {
  const auto integer = [](DType t) { return t == DType::U8 || t == DType::U16; };
  return !count && integer(s.images.dtype()) && (!s.masks || integer(s.masks->dtype()));
}

/// Bytes rounded up to a multiple of 16 (the alignment of what follows in the staging buffer).
size_t aligned(size_t bytes) { return (bytes + 15) / 16 * 16; }

/// A GPU tower's n samples of s as their held values, and each one's
/// SampleWarp, in pinned memory, uploaded into staged on the copy stream,
/// then augmented into x (and y, with masks) on the compute stream: the
/// bytes a batch moves over the bus are the held ones (a quarter of fp32's
/// for 8-bit files), and the host only copies.
void gather_held_on_device(const GatherSource& s, int n, const Device& d, Buffer<float>& staged, Tensor& x,
                           Tensor* y) {
  const int pixel = int(dtype_size(s.images.dtype())), mask = s.masks ? int(dtype_size(s.masks->dtype())) : 0;
  const size_t img = s.in.sample_numel() * size_t(pixel), msk = size_t(s.in.h) * size_t(s.in.w) * size_t(mask);
  const size_t masks_at = aligned(size_t(n) * img), warps_at = masks_at + aligned(size_t(n) * msk);
  const size_t bytes = warps_at + size_t(n) * sizeof(SampleWarp);
  char* pinned = static_cast<char*>(d.ctx->pinned_staging(bytes));
  auto* warps = reinterpret_cast<SampleWarp*>(pinned + warps_at);
  std::exception_ptr failure;  // an error leaves the loop after it, never from a thread
#pragma omp parallel for schedule(static)
  for (int k = 0; k < n; ++k) {
    try {
      const int i = s.indices[size_t(s.lo + k)];
      std::memcpy(pinned + size_t(k) * img, s.images.raw_sample(i), img);
      if (mask) std::memcpy(pinned + masks_at + size_t(k) * msk, s.masks->raw_sample(i), msk);
      warps[k] = sample_warp(augmentation_of(s, k), s.in.h, s.in.w, pixel);
    } catch (...) {
#pragma omp critical(gather_held_failure)
      if (!failure) failure = std::current_exception();
    }
  }
  if (failure) std::rethrow_exception(failure);
  const float* before = staged.data();
  staged.resize((bytes + 3) / 4);
  // A new block may come from the allocator's cache, freed by compute work still queued (upload_gathered).
  if (staged.data() != before) d.ctx->input_consumed();
  d.ctx->upload_staged(staged.data(), bytes);
  const char* on_device = reinterpret_cast<const char*>(staged.data());
  AugmentBatch b;
  b.n = n, b.h = s.in.h, b.w = s.in.w, b.c = s.in.c;
  b.images = on_device, b.pixel_bytes = pixel;
  b.masks = mask ? on_device + masks_at : nullptr, b.mask_bytes = mask;
  b.warps = reinterpret_cast<const SampleWarp*>(on_device + warps_at);
  set_fill(s.augmentation, pixel, b);
  b.image_out = x.data(), b.mask_out = y ? y->data() : nullptr;
  augment_batch(d, b);
  d.ctx->input_consumed();
}

}  // namespace

void Trainer::gather(Tower& t, const Tensor& images, const Tensor* masks, const std::vector<int>& indices,
                     int lo, int hi, std::optional<uint64_t> augment_step) {
  const auto start = std::chrono::steady_clock::now();
  const Shape in = t.model.input_shape();
  if (!images.shape().same_sample(in))
    throw InternalError("images " + images.shape().hwc() + " do not match the model input " + in.hwc());
  const int n = hi - lo;
  const size_t img = in.sample_numel(), msk = masks ? masks->shape().sample_numel() : 0;
  const GatherSource source{images, masks, indices, lo, augment_step, config_.data.augmentation,
                            config_.training.seed, in};
  // With an ignored class, the shard's counted pixels as the loss sees them (after augmentation).
  const bool count = masks && ignores_pixels();
  const auto copy = [&](int k, float* image_to, float* mask_to) -> size_t {
    copy_sample(source, k, image_to, mask_to);
    return count ? counted_pixels(mask_to, msk, classes_) : 0;
  };
  size_t counted = 0;
  Tensor& x = t.model.input_buffer();
  x.resize(in.with_batch(n));
  if (masks) t.y.resize(masks->shape().with_batch(n));
  if (t.device.is_cuda() && gathers_held(source, count)) {
    gather_held_on_device(source, n, t.device, t.staged, x, masks ? &t.y : nullptr);
    t.counted_pixels = 0;
    return;
  }
  if (t.device.is_cuda()) {
    // Gather into pinned memory, upload on the copy stream, then unpack on the compute stream.
    float* pinned = static_cast<float*>(t.device.ctx->pinned_staging(size_t(n) * (img + msk) * sizeof(float)));
    // The tower's OpenMP threads copy samples in parallel (a 256x256x3 batch of 32 is 25 MB); an error
    // leaves the loop as an exception after it, never from a thread.
    std::exception_ptr failure;
#pragma omp parallel for schedule(static) reduction(+ : counted)
    for (int k = 0; k < n; ++k) {
      try {
        counted += copy(k, pinned + size_t(k) * img, masks ? pinned + size_t(n) * img + size_t(k) * msk : nullptr);
      } catch (...) {
#pragma omp critical(gather_failure)
        if (!failure) failure = std::current_exception();
      }
    }
    if (failure) std::rethrow_exception(failure);
    t.counted_pixels = double(counted);
    upload_gathered(t, n, img, msk);
    return;
  }
  // A CPU tower's input and labels are host memory.
  for (int k = 0; k < n; ++k) counted += copy(k, x.sample(k), masks ? t.y.sample(k) : nullptr);
  t.counted_pixels = double(counted);
  t.input_wait += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void Trainer::upload_gathered(Tower& t, int n, size_t img, size_t msk) {
  DeviceContext& ctx = *t.device.ctx;
  const size_t floats = size_t(n) * (img + msk);
  const float* before = t.staged.data();
  t.staged.resize(floats);
  // A new block may come from the allocator's cache, freed by compute work
  // still queued: the copy stream must wait for all of it, not only for the
  // last input's use.
  if (t.staged.data() != before) ctx.input_consumed();
  ctx.upload_staged(t.staged.data(), floats * sizeof(float));
  device_copy(t.device, t.model.input_buffer().data(), t.device, t.staged.data(), size_t(n) * img * sizeof(float));
  if (msk) device_copy(t.device, t.y.data(), t.device, t.staged.data() + size_t(n) * img, size_t(n) * msk * sizeof(float));
  ctx.input_consumed();
}

}  // namespace trainer
