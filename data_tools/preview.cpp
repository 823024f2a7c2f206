// preview: writes one PNG grid of image/mask pairs with the masks overlaid,
// and with --checkpoint a trained model's predictions beside them. Thin main:
// flags (CLI11), then render_preview (lib/viz/preview.h) and an atomic write.
// Exit codes: 0 done, 2 user error (flags, missing or bad files), 1 internal error.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <optional>
#include <string>

#include "core/exit_codes.h"
#include "io/atomic_file.h"
#include "viz/preview.h"

int main(int argc, char** argv) {
  CLI::App app{"preview: writes one PNG grid of the first --count image/mask pairs (paired as the trainer "
               "pairs data.images and data.masks), masks overlaid in green; with --checkpoint, the model's "
               "predictions (magenta) in a second panel beside each.\nExit codes: 0 done, 2 user error, "
               "1 internal error."};
  trainer::viz::PreviewOptions o;
  std::string output;
  app.add_option("--images", o.images_dir, "Folder of images (data.images)")->required();
  app.add_option("--masks", o.masks_dir, "Folder of masks (data.masks)")->required();
  app.add_option("--mask-suffix", o.mask_suffix, "Mask of <stem>.<ext> is <stem><suffix>.<ext2> (data.mask_suffix)")
      ->capture_default_str();
  app.add_option("--count", o.count, "Number of pairs, the first in image-name order")->capture_default_str();
  app.add_option("--size", o.size, "Side of each panel in pixels (32..2048); images keep their aspect")
      ->capture_default_str();
  app.add_option("--output,-o", output, "PNG file to write")->required();
  auto* ckpt = app.add_option("--checkpoint", o.checkpoint, "Checkpoint (.h5) whose predictions to show beside the masks");
  app.add_option("--threshold", o.threshold, "Prediction = probability > threshold, in (0, 1)")
      ->capture_default_str()
      ->needs(ckpt);
  if (const std::optional<int> code = trainer::parse_command_line(app, argc, argv)) return *code;
  return trainer::run_guarded([&] {
    trainer::check_output_path(output, "--output", "preview.png");
    const cv::Mat grid = trainer::viz::render_preview(o);
    trainer::write_png_atomic(output, grid);
    std::printf("Wrote %s (%d x %d)\n", output.c_str(), grid.cols, grid.rows);
    return 0;
  });
}
