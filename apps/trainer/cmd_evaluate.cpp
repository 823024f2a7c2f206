// trainer evaluate --checkpoint CKPT --images DIR (--masks DIR | --labels DIR | --native DIR):
// pixel metrics and the 2018 Data Science Bowl instance score.
#include <spdlog/fmt/fmt.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "commands.h"
#include "core/error.h"
#include "io/atomic_file.h"
#include "io/checkpoint.h"
#include "train/evaluate.h"
#include "train/predict.h"

namespace trainer::cli {

namespace {

struct EvaluateFlags {
  bool gpus_given = false;  ///< --gpus on the command line
  std::string checkpoint, images, masks, labels, native, csv, gpus = "all";
  std::string mask_suffix, labels_suffix = "_labels";
  double threshold = 0.5;
  bool threshold_given = false;  ///< --threshold on the command line
  std::optional<long long> max_image_pixels;  ///< --max-image-pixels; default: the checkpoint's data.max_image_pixels
  int boundary_width = 2;
  bool boundary_width_given = false;  ///< --boundary-width on the command line
  bool tta = false;
  TileFlags tiles;
  double split_depth = InstanceSplit{}.min_depth;
  bool split_given = false;  ///< --split-depth on the command line
  std::optional<int> threads, batch_size;
};

const char* kind_name(TruthKind k) {
  return k == TruthKind::kMasks ? "masks" : k == TruthKind::kLabels ? "label images" : "DSB 2018 mask folders";
}

/// UserError, before any work, when --csv cannot be written or names an
/// existing file other than an earlier --csv of evaluate (whose first line
/// is kScoresCsvHeader): a mistyped --csv must not replace the checkpoint
/// being evaluated, a config or an image.
void check_csv_output(const std::string& csv) {
  check_output_path(csv, "--csv", "scores.csv");
  refuse_to_replace_checkpoint(csv, "--csv writes the per-image scores as CSV; choose another --csv, e.g. scores.csv");
  std::error_code ec;
  if (!std::filesystem::exists(csv, ec)) return;
  std::ifstream in(csv, std::ios::binary);  // a regular file (check_output_path); its first line, bounded
  std::string first(std::strlen(kScoresCsvHeader) + 1, '\0');
  in.read(first.data(), std::streamsize(first.size()));
  first.resize(size_t(in.gcount()));
  if (first.find('\n') != std::string::npos) first.resize(first.find('\n'));
  if (!first.empty() && first.back() == '\r') first.pop_back();
  if (first != kScoresCsvHeader)
    throw UserError("--csv '" + csv + "' exists and is not an earlier evaluate --csv (its first line is not '" +
                    kScoresCsvHeader + "'), which evaluate would replace: choose another --csv, e.g. scores.csv, or "
                    "delete the file first");
}

/// Prints evaluate's figures: the truth evaluated, the pixel metrics (where they were taken), a K-class model's
/// per-class IoU, and for one-channel and boundary models the instance score and how the nuclei were found.
void print_result(const EvalResult& r, const EvalOptions& o, int classes, const Shape& in) {
  const std::string where = o.tiles ? "at each image's own size, in tiles"
                                    : fmt::format("at the model's input ({}x{})", in.w, in.h);
  std::printf("Evaluated %zu image(s) against %s in %s\n", r.samples.size(), kind_name(o.kind), o.truth_dir.c_str());
  const MetricCounts& c = r.pixel.counts;
  if (classes > 0) {
    std::printf("pixel metrics %s: loss: %.4f - mean_iou: %.4f - dice: %.4f - accuracy: %.4f\n", where.c_str(),
                r.pixel.loss(), c.mean_iou(), c.dice(), c.accuracy());
    std::printf("per-class IoU (class: TP / (TP + FP + FN); - where the class is in neither truth nor prediction):");
    for (int k = 0; k < classes; ++k) {
      const double iou = c.class_iou(k);
      if (std::isnan(iou))
        std::printf(" %d: -", k);
      else
        std::printf(" %d: %.4f", k, iou);
    }
    std::printf("\n");
  } else {
    std::printf("pixel metrics %s: loss: %.4f - mean_iou: %.4f - dice: %.4f - accuracy: "
                "%.4f - precision: %.4f - recall: %.4f - binary_iou: %.4f%s\n",
                where.c_str(), r.pixel.loss(), c.mean_iou(), c.dice(), c.accuracy(), c.precision(), c.recall(),
                c.binary_iou(), c.has_auc() ? fmt::format(" - auc: {:.4f}", c.auc()).c_str() : "");
  }
  if (classes != 0 && !scores_boundary_instances(classes, o.kind)) return;
  const std::string objects =
      classes == 0 ? fmt::format("mask = probability > {:g}, touching nuclei {}", o.threshold,
                                 o.split.min_depth > 0 ? fmt::format("split at depth {:g}", o.split.min_depth)
                                                       : std::string("not split (--split-depth 0)"))
                   : "objects = interior components grown into the boundary; truth classes at --boundary-width " +
                         std::to_string(o.boundary_width);
  std::printf("instance score (DSB 2018: mean over images of the mean precision at IoU 0.50..0.95; %s): %.4f\n",
              objects.c_str(), r.score);
}

int run_evaluate(const EvaluateFlags& f) {
  require_one_process("evaluate");
  check_threshold(f.threshold, "--threshold");
  EvalOptions o;
  if (!f.masks.empty()) {
    o = {TruthKind::kMasks, f.images, f.masks, f.mask_suffix, "--masks", f.threshold, 1};
  } else if (!f.labels.empty()) {
    o = {TruthKind::kLabels, f.images, f.labels, f.labels_suffix, "--labels", f.threshold, 1};
  } else if (!f.native.empty()) {
    o = {TruthKind::kNative, "", f.native, "", "--native", f.threshold, 1};
  } else {
    throw UserError("evaluate needs the ground truth: --masks DIR, --labels DIR or --native DIR");
  }
  if (o.kind != TruthKind::kNative && f.images.empty())
    throw UserError(std::string("evaluate ") + o.flag + " needs --images DIR (the images the truth belongs to)");
  if (!f.csv.empty()) check_csv_output(f.csv);  // before the work, not after it

  const Towers towers = resolve_towers(f.gpus, f.threads, f.gpus_given, list_gpus());
  LoadedModel m = load_model(f.checkpoint, towers);
  apply_image_pixel_limit(f.max_image_pixels, m);
  const int classes = m.trainer->classes();
  refuse_threshold_for_classes(f.threshold_given, m, f.checkpoint);
  refuse_split_depth(f.split_given, true, classes);
  const bool boundary = scores_boundary_instances(classes, o.kind);
  const bool instances = classes == 0 || boundary;
  if (f.boundary_width_given && !boundary)
    throw UserError("--boundary-width makes the pixel truth of a 3-class boundary model from --labels or --native; '" +
                    f.checkpoint + "' is " + (classes == 0 ? "a one-channel model" : "a model of " +
                    std::to_string(classes) + " classes") + " evaluated against " + kind_name(o.kind) +
                    ": drop --boundary-width");
  if (!instances && !f.csv.empty())
    throw UserError("--csv writes the per-image DSB 2018 instance scores, which need instance truth (--labels or "
                    "--native) and a one-channel (sigmoid) or 3-class boundary model; '" + f.checkpoint +
                    "' is a model of " + std::to_string(classes) + " classes evaluated against " +
                    kind_name(o.kind) + ": drop --csv");
  if (o.kind == TruthKind::kMasks && f.mask_suffix.empty()) o.suffix = m.config->data.mask_suffix;
  o.image_mask_suffix = f.mask_suffix.empty() ? m.config->data.mask_suffix : f.mask_suffix;
  o.batch_size = f.batch_size ? *f.batch_size : m.config->training.batch_size;
  o.tta = f.tta;
  o.tiles = f.tiles.options(m.config->data.crop, f.checkpoint);
  o.split.min_depth = f.split_depth;
  o.boundary_width = f.boundary_width;
  const EvalResult r = evaluate_images(*m.trainer, o);

  print_result(r, o, classes, m.trainer->model().input_shape());
  if (!instances) return 0;
  if (!f.csv.empty()) {
    write_scores_csv(r, f.csv);
    std::printf("per-image scores: %s\n", f.csv.c_str());
  }
  return 0;
}

}  // namespace

Command add_evaluate(CLI::App& app) {
  auto f = std::make_shared<EvaluateFlags>();
  CLI::App* cmd = app.add_subcommand(
      "evaluate", "Pixel metrics of a checkpoint on images with ground truth, and for one-channel (sigmoid) "
                  "models and 3-class boundary models the DSB 2018 instance score");
  cmd->add_option("--checkpoint", f->checkpoint, "Checkpoint (.h5) written by training")
      ->required()
      ->check(non_empty_path());
  CLI::Option* images =
      cmd->add_option("--images", f->images, "Folder of images (with --masks or --labels)")->check(non_empty_path());
  CLI::Option* masks = cmd->add_option("--masks", f->masks,
                                       "Folder of masks <stem><mask-suffix>.png (binary, or class indices for a "
                                       "model of K classes)")
                             ->check(non_empty_path());
  CLI::Option* labels =
      cmd->add_option("--labels", f->labels, "Folder of 8- or 16-bit label images <stem><labels-suffix>.png (0, 1..N)")
                            ->check(non_empty_path());
  CLI::Option* native =
      cmd->add_option("--native", f->native, "DSB 2018 folder: <id>/images/<id>.png and <id>/masks/*.png")
                            ->check(non_empty_path());
  masks->excludes(labels)->excludes(native);
  labels->excludes(native);
  images->excludes(native);  // --native holds its images: an --images beside it was ignored
  cmd->add_option("--mask-suffix", f->mask_suffix, "Mask name suffix (default: the checkpoint config's data.mask_suffix)");
  cmd->add_option("--labels-suffix", f->labels_suffix, "Label image name suffix")->capture_default_str();
  cmd->add_option("--csv", f->csv, "Write per-image scores here (image, n_true, n_pred, score, precision_50, "
                                   "precision_75)")
      ->check(non_empty_path());
  cmd->add_option("--threshold", f->threshold, "Predicted mask = probability > threshold, in (0, 1)")
      ->capture_default_str()
      ->each([f](const std::string&) { f->threshold_given = true; });
  cmd->add_option("--max-image-pixels", f->max_image_pixels,
                  "Refuse images whose header declares more pixels (width x height; 0: no limit); default: the "
                  "checkpoint's data.max_image_pixels")
      ->check(CLI::Range(0LL, 1LL << 40));
  cmd->add_flag("--tta", f->tta, "Test-time augmentation, as predict --tta");
  add_tile_flags(cmd, f->tiles);
  cmd->add_option("--split-depth", f->split_depth, kSplitDepthHelp)
      ->check(CLI::Range(0.0, 1000.0))
      ->capture_default_str()
      ->each([f](const std::string&) { f->split_given = true; });
  cmd->add_option("--boundary-width", f->boundary_width,
                  "A 3-class boundary model against --labels or --native: the truth's boundary class width, as "
                  "labels_to_classes --boundary-width")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str()
      ->each([f](const std::string&) { f->boundary_width_given = true; });
  cmd->add_option("--gpus", f->gpus, "Devices, one tower each: all, GPU indices such as 0,2, cpu, or cpu:N")
      ->capture_default_str()
      ->each([f](const std::string&) { f->gpus_given = true; });
  cmd->add_option("--threads", f->threads, "CPU threads in all (default: every core)")->check(CLI::Range(1, 4096));
  cmd->add_option("--batch-size", f->batch_size, "Images per batch over all towers (default: the config's)")
      ->check(CLI::Range(1, 1000000));
  return {cmd, [f] { return run_evaluate(*f); }};
}

}  // namespace trainer::cli
