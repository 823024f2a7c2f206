#include "train/run_announcement.h"

#include <spdlog/spdlog.h>

#include <string>
#include <vector>

#include "train/loss.h"
#include "train/lr_schedule.h"
#include "train/trainer.h"

namespace trainer {

namespace {

/// "random left-right flips, rotations up to 20 degrees, ...": the augmentations a turns on.
std::string augmentation_text(const AugmentationConfig& a) {
  std::vector<std::string> kinds;
  if (a.horizontal_flip) kinds.push_back("random left-right flips");
  if (a.vertical_flip) kinds.push_back("random up-down flips");
  if (a.rotate_90) kinds.push_back("random quarter turns");
  if (a.rotation_range > 0) kinds.push_back(fmt::format("rotations up to {:g} degrees", a.rotation_range));
  if (a.width_shift_range > 0 || a.height_shift_range > 0)
    kinds.push_back(fmt::format("shifts up to {:g} x {:g} (width x height; below 1 a fraction)",
                                a.width_shift_range, a.height_shift_range));
  if (a.shear_range > 0) kinds.push_back(fmt::format("shears up to {:g} degrees", a.shear_range));
  if (a.zoom_low != 1 || a.zoom_high != 1)
    kinds.push_back(fmt::format("zooms in [{:g}, {:g}]", a.zoom_low, a.zoom_high));
  if (a.affine())
    kinds.push_back(std::string("fill_mode ") + fill_mode_name(a.fill_mode) +
                    (a.fill_mode == FillMode::Constant ? fmt::format(" (cval {:g})", a.cval) : ""));
  if (a.brightness()) kinds.push_back(fmt::format("brightness in [{:g}, {:g}]", a.brightness_low, a.brightness_high));
  return fmt::format("{}", fmt::join(kinds, ", "));
}

}  // namespace

void announce_run(const Config& config, const Trainer& trainer, size_t train_samples, size_t val_samples) {
  const TrainingConfig& tc = trainer.config().training;
  const int towers = trainer.world_towers();
  spdlog::info("training on {} samples, validating on {}; global batch {} over {} tower(s){}", train_samples,
               val_samples, tc.batch_size, towers,
               tc.batch_size_per_device ? fmt::format(" ({} per device)", tc.batch_size_per_device) : "");
  if (tc.batch_size < towers)  // cpu:16 with batch 8 leaves 8 towers idle: said
    spdlog::warn("global batch {} is smaller than the {} towers: {} of them get no sample each step; raise "
                 "training.batch_size to at least {}, or use fewer towers",
                 tc.batch_size, towers, towers - tc.batch_size, towers);
  if (const std::vector<std::string> unreached = trainer.model().unreached_layers(); !unreached.empty())
    spdlog::warn("{}: layer(s) {} do not lead to the output (the last layer): nothing they compute reaches the "
                 "loss, so they are computed every step and saved with weights that never change (Keras's "
                 "Model(inputs, outputs) leaves them out); remove them, or feed them into the output's inputs",
                 config.path, fmt::join(unreached, ", "));
  if (const size_t fixed = trainer.model().num_frozen(); fixed > 0)
    spdlog::info("frozen layers (trainable: false), their {} weight values kept as they are: {}", fixed,
                 fmt::join(trainer.model().frozen_layers(), ", "));
  if (const LearningRateSchedule& ls = tc.optimizer.schedule; ls.type != ScheduleKind::None)
    spdlog::info("learning rate schedule {} over the optimizer's steps; log.csv's learning_rate is the rate of the "
                 "update after each epoch", schedule_text(ls));
  if (const size_t regularized = trainer.regularized_weights())
    spdlog::info("weight regularizers on {} weight(s): their penalty ({:.6g} at these weights) is part of loss and "
                 "val_loss, as in Keras",
                 regularized, trainer.regularization_penalty());
  if (const LossConfig& lc = tc.loss;
      lc.kind == LossKind::BinaryFocalCrossentropy && lc.alpha_given && !lc.apply_class_balancing)
    spdlog::warn("{}: alpha {:g} weighs nothing without apply_class_balancing: true (as in Keras); add it to weigh "
                 "the foreground by alpha and the background by 1 - alpha",
                 lc.where, lc.alpha);
  if (!tc.class_weight.empty()) {
    const std::vector<float> table = class_weight_table(tc.class_weight, trainer.classes());
    std::vector<std::string> weights;  // every class's
    for (size_t c = 0; c < table.size(); ++c) weights.push_back(fmt::format("{}: {:g}", c, table[c]));
    spdlog::info("class weights {{{}}} on the training loss (by mask class); val_loss is unweighted, as in Keras",
                 fmt::join(weights, ", "));
  }
  if (const OptimizerConfig& o = tc.optimizer; o.clipnorm > 0)
    spdlog::info("gradient clipping: each weight's gradient to an L2 norm of at most {:g} (clipnorm)", o.clipnorm);
  else if (o.global_clipnorm > 0)
    spdlog::info("gradient clipping: all gradients to an L2 norm of at most {:g} together (global_clipnorm)",
                 o.global_clipnorm);
  else if (o.clipvalue > 0)
    spdlog::info("gradient clipping: each gradient element to [-{0:g}, {0:g}] (clipvalue)", o.clipvalue);
  if (const auto& c = config.data.crop) {
    const Shape in = trainer.model().input_shape();
    spdlog::info("training on crops of {}x{} (the model's input) from the images at {}, {} per image per epoch "
                 "({} a pass), {:.0f}% of them centred on a foreground pixel; validating on whole images in tiles "
                 "(overlap {:g}, {} blend)",
                 in.w, in.h, c->scale == 1 ? std::string("their own size") : fmt::format("{:g} times their size", c->scale),
                 c->per_image, train_samples * size_t(c->per_image), 100 * c->foreground, c->tile_overlap,
                 c->tile_blend);
  }
  if (const AugmentationConfig& a = config.data.augmentation; a.any())
    spdlog::info("augmenting training batches (each image with its mask): {}", augmentation_text(a));
}

}  // namespace trainer
