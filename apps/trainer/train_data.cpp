#include "train_data.h"

#include <spdlog/spdlog.h>

#include <filesystem>
#include <string>
#include <vector>

#include "commands.h"
#include "core/memory_limit.h"
#include "train/host_memory.h"

namespace trainer::cli {

namespace {

/// Warns for each class with no pixel in the training masks: its channel only
/// learns "not this class". With ignore_class, binary 0/255 masks lose all
/// their foreground that way, which the metrics then do not show. counts:
/// each class's pixels over the training masks; masks: how many there are.
void warn_missing_classes(const std::vector<size_t>& counts, int masks, const DataOptions& opt) {
  if (opt.classes == 0) return;
  std::vector<int> missing;
  for (int c = 0; c < opt.classes; ++c)
    if (counts[size_t(c)] == 0) missing.push_back(c);
  if (missing.empty()) return;
  std::string list;
  for (int c : missing) list += (list.empty() ? "" : ", ") + std::to_string(c);
  const bool only_background = int(missing.size()) == opt.classes - 1 && counts[0] > 0;
  spdlog::warn("class{} {} of {} occur{} in none of the {} training masks in '{}': the model never learns {}{}",
               missing.size() > 1 ? "es" : "", list, opt.classes, missing.size() > 1 ? "" : "s", masks,
               opt.masks_dir, missing.size() > 1 ? "them" : "it",
               only_background && opt.ignore_class >= 0
                   ? "; only class 0 is left besides the ignored value " + std::to_string(opt.ignore_class) +
                         ": binary 0/" + std::to_string(opt.ignore_class) + " masks? Train them with loss: "
                         "binary_crossentropy, or give the foreground its class index"
                   : "");
}

}  // namespace

TrainData data_options(const Config& config, const Model& model, bool folders_from_flags) {
  TrainData d;
  DataOptions& opt = d.train;
  opt.images_dir = config.data.images;
  opt.masks_dir = config.data.masks;
  opt.mask_suffix = config.data.mask_suffix;
  opt.height = model.input_shape().h;
  opt.width = model.input_shape().w;
  opt.channels = model.input_shape().c;
  opt.ignore_class = config.training.loss.ignore_class;
  opt.skip_bad_files = config.data.skip_bad_files;
  opt.threads = config.data.loader_threads;
  opt.config_path = folders_from_flags ? "--images/--masks" : config.path;
  if (config.data.crop) opt.native_scale = config.data.crop->scale;  // each pair at its own size, for crops
  DataOptions& vopt = d.validation_options = opt;
  vopt.images_dir = config.data.validation_images;
  vopt.masks_dir = config.data.validation_masks;
  vopt.config_path = config.path;
  vopt.key_prefix = "validation_";
  d.has_validation = !config.data.validation_images.empty();
  return d;
}

void check_pairs_match(const TrainData& d) {
  find_image_pairs(d.train);
  if (d.has_validation) find_image_pairs(d.validation_options);
}

void require_memory_for_data(TrainData& d, const Trainer& trainer, bool alone) {
  const std::optional<MemoryLimit> limit = cgroup_memory_limit();
  if (!limit) return;
  DataOptions &opt = d.train, &vopt = d.validation_options;
  opt.classes = vopt.classes = trainer.classes();
  HostMemoryPlan plan;
  if (alone) {
    d.pairs = find_image_pairs(opt);
    if (d.has_validation) d.validation_pairs = find_image_pairs(vopt);
    plan.training = held_bytes(d.pairs, opt);
    plan.validation = held_bytes(d.validation_pairs, vopt);
    plan.pairs = int(d.pairs.size());
    plan.validation_pairs = int(d.validation_pairs.size());
  }
  plan.batch = trainer.config().training.batch_size;
  plan.activations = trainer.host_activation_bytes(plan.batch);
  require_host_memory(plan, *limit, opt.config_path);
}

void load_training_data(TrainData& d, int classes, ProcessGroup* world) {
  DataOptions &opt = d.train, &vopt = d.validation_options;
  opt.classes = vopt.classes = classes;
  std::error_code ec;
  if (d.has_validation && std::filesystem::equivalent(vopt.images_dir, opt.images_dir, ec))
    spdlog::warn("data.validation_images is the training images' folder '{}': the run validates on pairs it "
                 "trains on", opt.images_dir);
  if (!world || world->size() == 1) {
    d.data = d.pairs.empty() ? load_dataset(opt) : load_dataset(opt, d.pairs);
    if (d.has_validation)
      d.validation = d.validation_pairs.empty() ? load_dataset(vopt) : load_dataset(vopt, d.validation_pairs);
    if (opt.classes > 0) warn_missing_classes(class_pixel_counts(d.data, opt.classes), d.data.size(), opt);
    return;
  }
  if (opt.native_scale > 0)
    throw UserError(opt.config_path + ": data.crop trains one process (with any number of towers: --gpus all) and "
                    "this run has " + std::to_string(world->size()) + " processes; start one process per machine "
                    "with all its GPUs, or remove data.crop");
  if (opt.threads == 0)  // this process's cores (as its towers'): they decode while the towers train
    opt.threads = vopt.threads = process_cores(world->local_size());
  d.stream = open_world_pairs(*world, opt);
  d.data.names = d.stream.stream->names();
  warn_missing_classes(d.stream.class_pixels, d.data.size(), opt);
  if (d.has_validation) {
    d.validation_stream = open_world_pairs(*world, vopt);
    d.validation.names = d.validation_stream.stream->names();
  }
}

}  // namespace trainer::cli
