// labels_to_classes: writes three-class masks (0 background, 1 interior,
// 2 boundary) from instance label images, for training a categorical U-Net
// that separates touching nuclei. Thin main: flags (CLI11), then
// convert_labels_to_classes (lib/data/boundary_classes.h).
// Exit codes: 0 done, 2 user error (flags, missing or bad files), 1 internal error.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <optional>
#include <string>

#include "core/exit_codes.h"
#include "data/boundary_classes.h"

int main(int argc, char** argv) {
  CLI::App app{"labels_to_classes: writes <stem><mask-suffix>.png masks of 3 classes (0 background, 1 nucleus "
               "interior, 2 nucleus boundary) from label images <stem><labels-suffix>.png (0 background, 1..N one "
               "nucleus each).\nExit codes: 0 done, 2 user error, 1 internal error."};
  std::string input, output, labels_suffix = "_labels", mask_suffix = "_mask";
  int width = 2;
  app.add_option("--input,-i", input, "Folder of label images (8- or 16-bit)")->required();
  app.add_option("--output,-o", output, "Folder to write the class masks into (created if missing)")->required();
  app.add_option("--labels-suffix", labels_suffix, "Suffix of the label images' names")->capture_default_str();
  app.add_option("--mask-suffix", mask_suffix, "Suffix of the masks' names (data.mask_suffix)")->capture_default_str();
  app.add_option("--boundary-width", width,
                 "Pixels of a nucleus within this distance of another value (background or another nucleus) are "
                 "boundary")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  bool overwrite = false;
  app.add_flag("--overwrite", overwrite, "Replace masks that exist in --output (otherwise nothing is written)");
  if (const std::optional<int> code = trainer::parse_command_line(app, argc, argv)) return *code;
  return trainer::run_guarded([&] {
    const auto files = trainer::convert_labels_to_classes(input, output, labels_suffix, mask_suffix, width, overwrite);
    std::printf("Done: wrote %zu class mask(s) to %s\n", files.size(), output.c_str());
    return 0;
  });
}
