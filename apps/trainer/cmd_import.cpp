// trainer import MODEL --output CONFIG.yaml: a Keras model file (.keras, .h5
// model, model.to_json() text) as a trainer config and, when it holds
// weights, a checkpoint of them that the config's initial_weights names.
#include <spdlog/spdlog.h>

#include <cstdio>
#include <filesystem>
#include <iostream>

#include "commands.h"
#include "core/error.h"
#include "io/atomic_file.h"
#include "io/checkpoint.h"
#include "keras/keras_import.h"

namespace trainer::cli {

namespace {

/// CONFIG.yaml -> CONFIG.weights.h5 beside it (Keras's name for a weights file).
std::string default_weights_path(const std::string& config) {
  std::filesystem::path p(config);
  return (p.parent_path() / (p.stem().string() + ".weights.h5")).string();
}

/// UserError when path exists and overwrite is off, or names a folder.
void check_new_file(const std::string& path, const std::string& flag, bool overwrite) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw UserError(flag + " '" + path + "' is a folder; name the file to write");
  if (!overwrite && std::filesystem::exists(path, ec))
    throw UserError(flag + " '" + path + "' exists; choose another name, or add --overwrite to replace it");
  check_output_path(path, flag, flag == "--output" ? "unet.yaml" : "unet.weights.h5");
}

}  // namespace

Command add_import(CLI::App& app) {
  struct Flags {
    std::string model, output, weights;
    bool overwrite = false;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* cmd = app.add_subcommand("import", "Write a Keras model (.keras, .h5 model, or model.to_json() text) as "
                                               "a trainer config, and its weights as a checkpoint the config starts from");
  cmd->add_option("model", f->model, "Keras model file")->required()->check(non_empty_path());
  cmd->add_option("--output,-o", f->output, "Config file to write (YAML)")->required()->check(non_empty_path());
  cmd->add_option("--weights", f->weights, "Weights file to write (default: the config's name, .weights.h5)")
      ->check(non_empty_path());
  cmd->add_flag("--overwrite", f->overwrite, "Replace output files that exist (else an error before any is written)");
  return {cmd, [f] {
            require_one_process("import");
            install_exit_handlers();  // Ctrl-C leaves no temporary file
            const std::string weights = f->weights.empty() ? default_weights_path(f->output) : f->weights;
            check_new_file(f->output, "--output", f->overwrite);
            const KerasModelFile file = read_keras_file(f->model);
            if (!file.weights.empty()) check_new_file(weights, "--weights", f->overwrite);
            const ImportedModel m = import_keras_model(file, {f->model, f->output, weights});
            for (const std::string& note : m.notes) spdlog::info("{}", note);
            if (!m.problems.empty()) {
              std::fflush(stdout);
              std::cerr << "error: " << f->model << " cannot be imported as it is (" << m.problems.size()
                        << (m.problems.size() == 1 ? " problem" : " problems") << "; nothing was written):\n";
              for (const std::string& p : m.problems) std::cerr << "  " << p << "\n";
              throw ReportedUserError(f->model + " cannot be imported");
            }
            if (!m.weights.empty()) {
              Checkpoint ckpt;
              ckpt.config_yaml = m.yaml;
              ckpt.weights = m.weights;
              save_checkpoint(weights, ckpt);
            }
            write_file_atomic(f->output, m.yaml);
            std::printf("Wrote %s (%s)%s\n", f->output.c_str(), keras_format_name(file.format),
                        m.weights.empty() ? "; the file holds no weights"
                                          : (" and its weights to " + weights).c_str());
            std::printf("Fill in its data section, then train: trainer --config %s --gpus all\n", f->output.c_str());
            return 0;
          }};
}

}  // namespace trainer::cli
