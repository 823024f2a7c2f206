// trainer: trains an image-segmentation network described in a YAML file on
// every device of the machine. Thin main: flags (CLI11), config, data, run.
// Exit codes: 0 done, 2 user error (flags, config, data), 1 internal error.
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <optional>
#include <thread>

#include "backend/gpu_info.h"
#include "config/config.h"
#include "core/error.h"
#include "data/dataset.h"
#include "dist/device_plan.h"
#include "nn/model.h"
#include "train/fit.h"
#include "train/trainer.h"

using namespace trainer;

namespace {

struct Flags {
  std::string config, gpus = "all", output, images, masks;
  std::optional<int> epochs, batch_size, threads;
  std::optional<uint64_t> seed;
};

void apply_overrides(Config& config, const Flags& f) {
  if (f.epochs) config.training.epochs = *f.epochs;
  if (f.batch_size) config.training.batch_size = *f.batch_size;
  if (f.seed) config.training.seed = *f.seed;
  if (!f.output.empty()) config.training.output_dir = f.output;
  if (!f.images.empty()) config.data.images = f.images;
  if (!f.masks.empty()) config.data.masks = f.masks;
}

int run_summary(const std::string& path) {
  Config config = load_config(path);
  Model model(config.model, config.path);
  std::cout << model.summary();
  validate_for_training(config, model);
  return 0;
}

int run_train(const Flags& f) {
  Config config = load_config(f.config);
  apply_overrides(config, f);
  const DevicePlan plan = plan_devices(f.gpus, list_gpus(), /*cuda_training=*/false);
  Model model(config.model, config.path);  // validates layers and shapes before any work
  std::cout << model.summary() << std::flush;
  validate_for_training(config, model);
  for (const auto& w : plan.warnings) spdlog::warn("{}", w);
  const int cores = f.threads ? *f.threads : int(std::max(1u, std::thread::hardware_concurrency()));
  const int per_tower = std::max(1, cores / plan.towers());
  spdlog::info("devices: {} ({} CPU thread(s) each)", plan.describe(), per_tower);

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

  Trainer trainer(config, plan.towers(), per_tower);
  FitOptions fit_options;
  fit_options.progress_bar = isatty(fileno(stdout));
  const FitResult result = fit(config, trainer, data, fit_options);
  std::printf("Done: %d epoch(s)%s. Files:\n", result.epochs_run,
              result.stopped_early ? " (early stopping)" : "");
  for (const auto& file : result.files) std::printf("  %s\n", file.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  spdlog::set_default_logger(spdlog::stderr_color_mt("trainer"));
  spdlog::set_pattern("[%H:%M:%S] %^%l%$: %v");

  CLI::App app{"trainer: trains image-segmentation networks described in YAML on every GPU "
               "of a machine (or on CPU towers).\nExit codes: 0 done, 2 user error, 1 internal error."};
  app.set_version_flag("--version", "trainer 0.1.0");
  Flags f;
  app.add_option("--config,-c", f.config, "Run configuration (YAML: model, data, training)");
  app.add_option("--gpus", f.gpus,
                 "Devices, one tower each: all (every GPU; CPU if none), GPU indices such as 0,2,5, "
                 "cpu, or cpu:N (N CPU towers)")
      ->capture_default_str();
  app.add_option("--epochs", f.epochs, "Override training.epochs")->check(CLI::Range(1, 1000000));
  app.add_option("--batch-size", f.batch_size, "Override training.batch_size (global batch)")
      ->check(CLI::Range(1, 1000000));
  app.add_option("--seed", f.seed, "Override training.seed");
  app.add_option("--output,-o", f.output, "Override training.output_dir");
  app.add_option("--images", f.images, "Override data.images (folder of images)");
  app.add_option("--masks", f.masks, "Override data.masks (folder of masks)");
  app.add_option("--threads", f.threads, "CPU threads in all (default: every core)")->check(CLI::Range(1, 4096));
  std::string summary_config;
  CLI::App* summary = app.add_subcommand("summary", "Validate a config and print its model summary");
  summary->add_option("--config,-c", summary_config, "Run configuration (YAML)")->required();
  app.require_subcommand(0, 1);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "error: %s; run 'trainer --help' for usage\n", e.what());
    return 2;
  }
  try {
    if (*summary) return run_summary(summary_config);
    if (f.config.empty()) throw UserError("--config is required; run 'trainer --help' for usage");
    return run_train(f);
  } catch (const UserError& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  } catch (const std::bad_alloc&) {
    std::fflush(stdout);
    std::fprintf(stderr, "error: out of memory: the model, batch or data set does not fit in this machine's "
                         "memory; lower training.batch_size or the input size\n");
    return 2;
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "internal error: %s\n", e.what());
    return 1;
  }
}
