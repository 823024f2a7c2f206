// trainer import MODEL --output CONFIG.yaml: a Keras model file (.keras, .h5
// model, model.to_json() text) as a trainer config and, when it holds
// weights, a checkpoint of them that the config's initial_weights names.
#include <spdlog/spdlog.h>

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <unistd.h>

#include "commands.h"
#include "core/error.h"
#include "io/atomic_file.h"
#include "io/checkpoint.h"
#include "keras/keras_import.h"

namespace trainer::cli {

namespace {

/// CONFIG.yaml -> CONFIG_weights.h5 beside it (not .weights.h5: Keras 3's load_weights takes a file of
/// that name for its own format, while it reads a trainer checkpoint of another .h5 name as a legacy one).
std::string default_weights_path(const std::string& config) {
  std::filesystem::path p(config);
  return (p.parent_path() / (p.stem().string() + "_weights.h5")).string();
}

/// UserError when two of the files (the model read, the config and the weights written) are one.
void check_distinct(const std::string& model, const std::string& config, const std::string& weights) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const auto same = [&](const std::string& a, const std::string& b) {
    return fs::weakly_canonical(a, ec) == fs::weakly_canonical(b, ec);
  };
  if (same(config, weights))
    throw UserError("--output and --weights both name '" + config + "'; give the weights another file, e.g. " +
                    default_weights_path(config));
  for (const std::string& out : {config, weights})
    if (same(out, model))
      throw UserError("'" + out + "' is the Keras model being imported; write the config and weights elsewhere");
}

/// Writes the weights (when there are any) and then the config, each complete under a staged name first,
/// so that a failure leaves neither half written; a config that cannot be committed takes the new
/// weights file away again unless one was there before.
void write_outputs(const ImportedModel& m, const std::string& config, const std::string& weights) {
  const std::string staged = weights + ".staged-" + std::to_string(::getpid());
  const std::string staged_config = config + ".staged-" + std::to_string(::getpid());
  if (!m.weights.empty()) {
    Checkpoint ckpt;
    ckpt.config_yaml = m.yaml;
    ckpt.weights = m.weights;
    save_checkpoint(staged, ckpt);
  }
  try {
    write_file_atomic(staged_config, m.yaml);
    std::error_code ec;
    const bool had_weights = std::filesystem::exists(weights, ec);
    if (!m.weights.empty()) commit_temp(staged, weights);
    try {
      commit_temp(staged_config, config);
    } catch (const UserError&) {
      if (!m.weights.empty() && !had_weights) std::filesystem::remove(weights, ec);
      throw;
    }
  } catch (const UserError&) {
    std::error_code ec;
    std::filesystem::remove(staged, ec);
    std::filesystem::remove(staged_config, ec);
    throw;
  }
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
    bool overwrite = false, no_compile = false;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* cmd = app.add_subcommand("import", "Write a Keras model (.keras, .h5 model, or model.to_json() text) as "
                                               "a trainer config, and its weights as a checkpoint the config starts from");
  cmd->add_option("model", f->model, "Keras model file")->required()->check(non_empty_path());
  cmd->add_option("--output,-o", f->output, "Config file to write (YAML)")->required()->check(non_empty_path());
  cmd->add_option("--weights", f->weights, "Weights file to write (default: the config's name, _weights.h5)")
      ->check(non_empty_path());
  cmd->add_flag("--overwrite", f->overwrite, "Replace output files that exist (else an error before any is written)");
  cmd->add_flag("--no-compile", f->no_compile,
                "Leave model.compile's arguments out (a loss or metric of your own): the config gets "
                "binary_crossentropy (categorical_crossentropy after a softmax) and no metrics, to set there");
  return {cmd, [f] {
            require_one_process("import");
            install_exit_handlers();  // Ctrl-C leaves no temporary file
            const std::string weights = f->weights.empty() ? default_weights_path(f->output) : f->weights;
            check_new_file(f->output, "--output", f->overwrite);
            check_distinct(f->model, f->output, weights);
            KerasModelFile file = read_keras_file(f->model);
            if (f->no_compile) file.compile = nullptr;
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
            write_outputs(m, f->output, weights);
            std::printf("Wrote %s (%s)%s\n", f->output.c_str(), keras_format_name(file.format),
                        m.weights.empty() ? "; the file holds no weights"
                                          : (" and its weights to " + weights).c_str());
            std::printf("Fill in its data section, then train: trainer --config %s --gpus all\n", f->output.c_str());
            return 0;
          }};
}

}  // namespace trainer::cli
