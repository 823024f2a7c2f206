// dsb_to_flat: converts the 2018 Data Science Bowl layout (<id>/images/<id>.png,
// <id>/masks/*.png, one mask per nucleus) into the flat layout the trainer reads
// (train_im/, train_mask/, labels/). Thin main: flags (CLI11), then
// convert_dsb_to_flat (lib/data/dsb_layout.h).
// Exit codes: 0 done, 2 user error (flags, missing or bad files), 1 internal error.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <optional>
#include <string>

#include "core/exit_codes.h"
#include "data/dsb_layout.h"

int main(int argc, char** argv) {
  CLI::App app{"dsb_to_flat: converts the DSB 2018 layout (<id>/images/<id>.png, <id>/masks/*.png) into "
               "train_im/<id>.png, train_mask/<id><suffix>.png (0/255 union) and labels/<id>_labels.png "
               "(16-bit instance labels).\nExit codes: 0 done, 2 user error, 1 internal error."};
  std::string input, output, mask_suffix = "_mask";
  app.add_option("--input,-i", input, "Folder of DSB 2018 id folders")->required();
  app.add_option("--output,-o", output, "Folder to write train_im/, train_mask/ and labels/ into")->required();
  app.add_option("--mask-suffix", mask_suffix, "Suffix of the union-mask file names (data.mask_suffix)")
      ->capture_default_str();
  if (const std::optional<int> code = trainer::parse_command_line(app, argc, argv)) return *code;
  return trainer::run_guarded([&] {
    trainer::convert_dsb_to_flat(input, output, mask_suffix);
    std::printf("Done: wrote %s/train_im, %s/train_mask and %s/labels\n", output.c_str(), output.c_str(),
                output.c_str());
    return 0;
  });
}
