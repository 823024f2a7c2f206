// Training (the default command): trainer --config FILE --gpus SPEC [overrides].
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstdio>
#include <iostream>

#include "commands.h"
#include "core/error.h"
#include "data/dataset.h"
#include "nn/model.h"
#include "train/fit.h"

namespace trainer::cli {

namespace {

struct TrainFlags {
  std::string config, gpus = "all", output, images, masks;
  std::optional<int> epochs, batch_size, threads;
  std::optional<uint64_t> seed;
};

void apply_overrides(Config& config, const TrainFlags& f) {
  if (f.epochs) config.training.epochs = *f.epochs;
  if (f.batch_size) config.training.batch_size = *f.batch_size;
  if (f.seed) config.training.seed = *f.seed;
  if (!f.output.empty()) config.training.output_dir = f.output;
  if (!f.images.empty()) config.data.images = f.images;
  if (!f.masks.empty()) config.data.masks = f.masks;
}

int run_train(const TrainFlags& f) {
  if (f.config.empty()) throw UserError("--config is required; run 'trainer --help' for usage");
  Config config = load_config(f.config);
  apply_overrides(config, f);
  const Towers towers = resolve_towers(f.gpus, f.threads);  // a bad --gpus fails before any output
  Model model(config.model, config.path);                   // validates layers and shapes before any work
  std::cout << model.summary() << std::flush;
  validate_for_training(config, model);

  DataOptions opt;
  opt.images_dir = config.data.images;
  opt.masks_dir = config.data.masks;
  opt.mask_suffix = config.data.mask_suffix;
  opt.height = model.input_shape().h;
  opt.width = model.input_shape().w;
  opt.channels = model.input_shape().c;
  opt.skip_bad_files = config.data.skip_bad_files;
  opt.threads = config.data.loader_threads;
  // Messages name where the folders came from: the config, or the flags.
  opt.config_path = f.images.empty() && f.masks.empty() ? config.path : "--images/--masks";
  const Dataset data = load_dataset(opt);

  Trainer trainer(config, towers.plan.towers(), towers.threads_per_tower);
  FitOptions fit_options;
  fit_options.progress_bar = isatty(fileno(stdout));
  const FitResult result = fit(config, trainer, data, fit_options);
  std::printf("Done: %d epoch(s)%s. Files:\n", result.epochs_run, result.stopped_early ? " (early stopping)" : "");
  for (const auto& file : result.files) std::printf("  %s\n", file.c_str());
  return 0;
}

}  // namespace

Runner add_train(CLI::App& app) {
  auto f = std::make_shared<TrainFlags>();
  app.add_option("--config,-c", f->config, "Run configuration (YAML: model, data, training)");
  app.add_option("--gpus", f->gpus,
                 "Devices, one tower each: all (every GPU; CPU if none), GPU indices such as 0,2,5, "
                 "cpu, or cpu:N (N CPU towers)")
      ->capture_default_str();
  app.add_option("--epochs", f->epochs, "Override training.epochs")->check(CLI::Range(1, 1000000));
  app.add_option("--batch-size", f->batch_size, "Override training.batch_size (global batch)")
      ->check(CLI::Range(1, 1000000));
  app.add_option("--seed", f->seed, "Override training.seed");
  app.add_option("--output,-o", f->output, "Override training.output_dir");
  app.add_option("--images", f->images, "Override data.images (folder of images)");
  app.add_option("--masks", f->masks, "Override data.masks (folder of masks)");
  app.add_option("--threads", f->threads, "CPU threads in all (default: every core)")->check(CLI::Range(1, 4096));
  return [f] { return run_train(*f); };
}

}  // namespace trainer::cli
