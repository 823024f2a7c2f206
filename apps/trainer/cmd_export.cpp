// trainer export --checkpoint CKPT --output FILE.onnx | FILE.keras: the
// trained network as ONNX, final sigmoid included (docs/export.md), or as a
// Keras 3 .keras file (--format keras; docs/from_keras.md).
#include <spdlog/spdlog.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "commands.h"
#include "core/ascii.h"
#include "core/error.h"
#include "core/file_kind.h"
#include "io/atomic_file.h"
#include "io/checkpoint.h"
#include "keras/keras_export.h"
#include "keras/keras_file.h"
#include "nn/model.h"
#include "nn/onnx_export.h"

namespace trainer::cli {

namespace {

/// Whether path starts as the ONNX files export writes: ModelProto's
/// ir_version (field 1), then producer_name (field 2) "trainer".
bool is_our_onnx(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char head[11] = {};
  in.read(head, sizeof head);
  return in.gcount() == sizeof head && head[0] == 0x08 && head[2] == 0x12 && head[3] == 0x07 &&
         std::string(head + 4, 7) == "trainer";
}

/// UserError when output names a folder, ends in .h5 or .hdf5, or names an
/// existing file that neither ends in .onnx (any case) nor is an earlier
/// export (a config, a log, an image: a mistyped --output must not destroy
/// it); a warning for a file of another name. HDF5 files are
/// refuse_to_replace_checkpoint's.
void check_output(const std::string& output) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory(output, ec))
    throw UserError("--output '" + output + "' is a folder; name the ONNX file to write, e.g. " +
                    (fs::path(output) / "unet.onnx").string());
  refuse_to_replace_checkpoint(output, "export writes an ONNX file; choose another --output, e.g. unet.onnx");
  const std::string ext = ascii_lower(fs::path(output).extension().string());
  if (ext == ".onnx") return;
  // An ONNX file named like a checkpoint or a Keras .h5 model would be taken for one.
  if (ext == ".h5" || ext == ".hdf5")
    throw UserError("--output '" + output + "' ends in " + ext + ", the name of checkpoints and Keras's legacy "
                    "models, but export writes ONNX (.onnx) or Keras 3 (.keras); name it e.g. unet.keras (which "
                    "keras.models.load_model opens) or unet.onnx");
  if (fs::exists(output, ec) && !is_our_onnx(output))
    throw UserError("--output '" + output + "' exists, is not an earlier export and does not end in .onnx: export "
                    "would replace it with the ONNX file; choose an --output ending in .onnx, e.g. unet.onnx, or "
                    "delete the file first");
  spdlog::warn("--output '{}' does not end in .onnx; the file is ONNX whatever its name", output);
}

/// The .keras file's output: Keras's load_model opens only names ending in .keras. An existing file is
/// replaced when an earlier export wrote it, or with overwrite.
void check_keras_output(const std::string& output, bool overwrite) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory(output, ec))
    throw UserError("--output '" + output + "' is a folder; name the Keras file to write, e.g. " +
                    (fs::path(output) / "unet.keras").string());
  if (ascii_lower(fs::path(output).extension().string()) != ".keras")
    throw UserError("--output '" + output + "' does not end in .keras, which keras.models.load_model requires; "
                    "name it e.g. unet.keras");
  if (!overwrite && fs::exists(output, ec) && !written_by_trainer_export(output))
    throw UserError("--output '" + output + "' exists and is not an earlier export (a Keras model of your own?): "
                    "export would replace it; choose another name, or add --overwrite");
}

/// "onnx" or "keras": the flag's, or the output's extension (.keras) when the flag is not given.
std::string export_format(const std::string& flag, const std::string& output) {
  if (!flag.empty()) return flag;
  return ascii_lower(std::filesystem::path(output).extension().string()) == ".keras" ? "keras" : "onnx";
}

}  // namespace

Command add_export(CLI::App& app) {
  struct Flags {
    std::string checkpoint, output, format;
    bool overwrite = false;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* cmd = app.add_subcommand("export", "Write a checkpoint's network as a Keras .keras file (--format keras) or as ONNX (input 'image' [N, C, H, W] "
                                               "with pixel values 0..255, output 'probability' [N, 1, H, W], or [N, K, H, W] "
                                               "for K classes)");
  cmd->add_option("--checkpoint", f->checkpoint, "Checkpoint (.h5) written by training")->required()->check(non_empty_path());
  cmd->add_option("--output,-o", f->output, "File to write: ONNX, or a Keras .keras file")
      ->required()
      ->check(non_empty_path());
  cmd->add_option("--format", f->format, "onnx or keras (Keras 3's .keras, which keras.models.load_model opens); "
                                         "default: keras for an --output ending in .keras, else onnx")
      ->check(CLI::IsMember({"onnx", "keras"}));
  cmd->add_flag("--overwrite", f->overwrite, "Replace an existing .keras file that no earlier export wrote");
  return {cmd, [f] {
            require_one_process("export");
            install_exit_handlers();  // Ctrl-C leaves no temporary file
            const bool keras = export_format(f->format, f->output) == "keras";
            if (!std::filesystem::is_directory(f->output))  // a folder gets its own message, with a file name
              require_plain_file(f->output, "--output", std::string("name a file to write, e.g. unet.") +
                                                            (keras ? "keras" : "onnx"));
            if (keras) check_keras_output(f->output, f->overwrite);
            else check_output(f->output);
            Towers one;
            one.plan.cpu_towers = 1;
            // Checks the checkpoint against its stored config (UserError for a foreign one).
            const LoadedModel loaded = load_model(f->checkpoint, one);
            // A fresh model keeps its final sigmoid (the trainer's towers output logits).
            const Model model(loaded.config->model, loaded.config->path);
            // A model trained from_logits outputs logits: the graph adds its loss's sigmoid or softmax.
            const OutputActivation append =
                !loaded.config->training.loss.from_logits ? OutputActivation::None
                : loaded.trainer->classes() > 0          ? OutputActivation::Softmax
                                                         : OutputActivation::Sigmoid;
            const Shape in = model.input_shape(), out = model.output_shape();
            if (keras) {
              write_file_durable(f->output, keras_file_bytes(loaded.config->model, model, loaded.trainer->weights(),
                                                             append));
              std::printf("Wrote %s: keras.models.load_model opens it; input [N, %d, %d, %d] (pixel values 0..255), "
                          "output [N, %d, %d, %d] probabilities\n",
                          f->output.c_str(), in.h, in.w, in.c, out.h, out.w, out.c);
              return 0;
            }
            export_onnx(model, loaded.trainer->weights(), f->output, append);
            std::printf("Wrote %s: input 'image' [N, %d, %d, %d] (pixel values 0..255), output 'probability' "
                        "[N, %d, %d, %d]\n",
                        f->output.c_str(), in.c, in.h, in.w, out.c, out.h, out.w);
            return 0;
          }};
}

}  // namespace trainer::cli
