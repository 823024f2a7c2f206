// trainer predict --checkpoint CKPT --input FILE_OR_DIR --output DIR: masks at each image's own size.
#include <spdlog/spdlog.h>

#include <cstdio>
#include <filesystem>

#include "commands.h"
#include "data/image_files.h"
#include "train/predict.h"

namespace trainer::cli {

namespace {

struct PredictFlags {
  bool gpus_given = false;  ///< --gpus on the command line
  std::string checkpoint, input, gpus = "all";
  std::optional<std::string> mask_suffix;  ///< --mask-suffix; default: the checkpoint's data.mask_suffix
  std::optional<int> threads, batch_size;
  std::optional<long long> max_image_pixels;  ///< --max-image-pixels; default: the checkpoint's data.max_image_pixels
  PredictOptions options;
  bool threshold_given = false;  ///< --threshold on the command line
  TileFlags tiles;
  bool split_given = false;  ///< --split-depth on the command line
};

int run_predict(const PredictFlags& f) {
  require_one_process("predict");
  check_threshold(f.options.threshold, "--threshold");
  std::vector<std::string> images = without_prediction_outputs(list_image_files(f.input, "--input"),
                                                               f.options.output_dir);
  const Towers towers = resolve_towers(f.gpus, f.threads, f.gpus_given, list_gpus());
  LoadedModel m = load_model(f.checkpoint, towers);
  apply_image_pixel_limit(f.max_image_pixels, m);
  // A folder of images and their masks, as training takes it: the masks are left out, not predicted.
  if (std::error_code ec; std::filesystem::is_directory(f.input, ec)) {
    const std::string suffix = f.mask_suffix ? *f.mask_suffix : m.config->data.mask_suffix;
    const std::vector<std::string> kept = without_masks(images, suffix);
    if (kept.size() < images.size())
      spdlog::info("left out the {} mask(s) beside their images in '{}' (<stem>{}.*, {})", images.size() - kept.size(),
                   f.input, suffix, f.mask_suffix ? "--mask-suffix" : "the checkpoint's data.mask_suffix");
    images = kept;
  }
  refuse_threshold_for_classes(f.threshold_given, m, f.checkpoint);
  refuse_split_depth(f.split_given, f.options.instances, m.trainer->classes());
  PredictOptions options = f.options;
  options.batch_size = f.batch_size ? *f.batch_size : m.config->training.batch_size;
  options.tiles = f.tiles.options(m.config->data.crop, f.checkpoint);
  const std::vector<std::string> files = predict_files(*m.trainer, images, options);
  std::printf("Predicted %zu image(s): %zu file(s) in %s\n", images.size(), files.size(),
              options.output_dir.c_str());
  return 0;
}

}  // namespace

Command add_predict(CLI::App& app) {
  auto f = std::make_shared<PredictFlags>();
  CLI::App* cmd = app.add_subcommand(
      "predict", "Write <stem>_mask.png (0/255, or class indices 0..K-1 for a model of K classes; the image's own "
                 "size) for an image or a folder of images");
  cmd->add_option("--checkpoint", f->checkpoint, "Checkpoint (.h5) written by training")->required()->check(non_empty_path());
  cmd->add_option("--input,-i", f->input, "Image file or folder of images (.png, .jpg, .jpeg, .tif, .tiff)")
      ->required()
      ->check(non_empty_path());
  cmd->add_option("--output,-o", f->options.output_dir, "Output folder (created if missing)")
      ->required()
      ->check(non_empty_path());
  cmd->add_option("--threshold", f->options.threshold, "Mask = probability > threshold, in (0, 1)")
      ->capture_default_str()
      ->each([f](const std::string&) { f->threshold_given = true; });
  cmd->add_option("--max-image-pixels", f->max_image_pixels,
                  "Refuse images whose header declares more pixels (width x height; 0: no limit); default: the "
                  "checkpoint's data.max_image_pixels")
      ->check(CLI::Range(0LL, 1LL << 40));
  CLI::Option* probabilities = cmd->add_flag("--probabilities", f->options.probabilities,
                                             "Also write the probability map: <stem>_prob.png (8-bit, 255 * p); a model of K "
                                             "classes writes one per class, <stem>_prob_<class>.png");
  cmd->add_option("--probability-format", f->options.probability_format,
                  "png (8-bit, 255 * p) or tiff (<stem>_prob.tif, float32 p in [0, 1])")
      ->check(CLI::IsMember({"png", "tiff"}))
      ->needs(probabilities)
      ->capture_default_str();
  cmd->add_flag("--tta", f->options.tta,
                "Test-time augmentation: average the predictions of the input's 8 symmetries (flips and quarter "
                "turns; the 4 flips for a non-square input), 8 (4) times the work");
  add_tile_flags(cmd, f->tiles);
  cmd->add_flag("--overlay", f->options.overlay, "Also write <stem>_overlay.png (mask contours on the image)");
  cmd->add_option("--split-depth", f->options.split.min_depth, kSplitDepthHelp)
      ->check(CLI::Range(0.0, 1000.0))
      ->capture_default_str()
      ->each([f](const std::string&) { f->split_given = true; });
  cmd->add_flag("--instances", f->options.instances,
                "Also write <stem>_instances.png: a 16-bit label image (0 background, 1..N one per nucleus), touching "
                "nuclei split by a watershed of the mask's distance transform (a 3-class boundary model: its "
                "interior grown into its boundary)");
  cmd->add_option("--mask-suffix", f->mask_suffix,
                  "In a folder --input, files <stem><suffix>.* beside image <stem> are masks, left out (default: "
                  "the checkpoint's data.mask_suffix; '' leaves out none)");
  cmd->add_flag("--overwrite", f->options.overwrite, "Replace output files that exist (else an error before any is written)");
  cmd->add_option("--gpus", f->gpus, "Devices, one tower each: all, GPU indices such as 0,2, cpu, or cpu:N")
      ->capture_default_str()
      ->each([f](const std::string&) { f->gpus_given = true; });
  cmd->add_option("--threads", f->threads, "CPU threads in all (default: every core)")->check(CLI::Range(1, 4096));
  cmd->add_option("--batch-size", f->batch_size, "Images per batch over all towers (default: the config's)")
      ->check(CLI::Range(1, 1000000));
  return {cmd, [f] {
            install_exit_handlers();  // Ctrl-C leaves no temporary file
            return run_predict(*f);
          }};
}

}  // namespace trainer::cli
