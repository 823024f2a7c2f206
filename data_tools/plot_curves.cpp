// plot_curves: draws a training log (Keras CSVLogger format, the trainer's
// log.csv) as one PNG: losses and metrics per epoch. Thin main: flags
// (CLI11), then read_training_log (lib/train/) and plot_training_curves (lib/viz/) and an
// atomic write.
// Exit codes: 0 done, 2 user error (flags, missing or bad log), 1 internal error.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <optional>
#include <string>

#include "core/exit_codes.h"
#include "io/atomic_file.h"
#include "viz/curves_plot.h"
#include "train/training_log.h"

int main(int argc, char** argv) {
  CLI::App app{"plot_curves: draws the training log (epoch,<metrics> CSV, as Keras's CSVLogger writes it) as "
               "one PNG: loss and val_loss on the left, every other column on the right.\nExit codes: 0 done, "
               "2 user error, 1 internal error."};
  std::string log_path, output, title;
  app.add_option("--log", log_path, "Training log (log.csv in training.output_dir)")->required();
  app.add_option("--output,-o", output, "PNG file to write")->required();
  app.add_option("--title", title, "Title over the panels (default: the log's path)");
  if (const std::optional<int> code = trainer::parse_command_line(app, argc, argv)) return *code;
  return trainer::run_guarded([&] {
    trainer::check_output_path(output, "--output", "curves.png");
    const trainer::TrainingLog log = trainer::read_training_log(log_path);
    const cv::Mat img = trainer::viz::plot_training_curves(log, title.empty() ? log_path : title);
    trainer::write_png_atomic(output, img);
    std::printf("Wrote %s (%zu epochs, %zu columns)\n", output.c_str(), log.epochs.size(), log.columns.size());
    return 0;
  });
}
