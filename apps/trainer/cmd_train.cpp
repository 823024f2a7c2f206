// The training command's flags (the default command): trainer --config FILE --gpus SPEC [overrides].
// run_train (train_run.cpp) runs it.
#include <cerrno>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "commands.h"
#include "train_flags.h"

namespace trainer::cli {

Runner add_train(CLI::App& app, const std::vector<std::string>& args) {
  auto f = std::make_shared<TrainFlags>();
  f->command_line = args;
  app.add_option("--config,-c", f->config, "Run configuration (YAML: model, data, training)")->check(non_empty_path());
  app.add_option("--gpus", f->gpus,
                 "Devices, one tower each: all (every GPU; CPU if none), GPU indices such as 0,2,5 or 2 "
                 "(indices, not a count; 0,0 puts two towers on GPU 0), cpu, cpu:N (N CPU towers, N <= 64), or "
                 "local (under mpirun or srun: the GPU of the process's rank on its host)")
      ->capture_default_str()
      ->each([f](const std::string&) { f->gpus_given = true; });
  app.add_option("--epochs", f->epochs, "Override training.epochs")->check(CLI::Range(1, 1000000));
  app.add_option("--batch-size", f->batch_size, "Override training.batch_size (global batch)")
      ->check(CLI::Range(1, 1000000));
  // CLI11 saturates 2^64 to 2^64 - 1 and takes -1 as 2^64 - 1; the config rejects both, so must the flag.
  app.add_option("--seed", f->seed, "Override training.seed (an integer in [0, 2^64 - 1])")
      ->check(CLI::Validator(
          [](std::string& v) {
            errno = 0;
            char* end = nullptr;
            const bool digits = !v.empty() && v.find_first_not_of("0123456789") == std::string::npos;
            (void)std::strtoull(v.c_str(), &end, 10);
            return digits && errno != ERANGE ? std::string()
                                             : "'" + v + "' is not an integer in [0, 18446744073709551615]";
          },
          "", "seed"));
  app.add_option("--output,-o", f->output, "Override training.output_dir")->check(non_empty_path());
  app.add_option("--images", f->images, "Override data.images (folder of images)")->check(non_empty_path());
  app.add_option("--masks", f->masks, "Override data.masks (folder of masks)")->check(non_empty_path());
  app.add_option("--precision", f->precision,
                 "Override training.precision (convolutions; bf16 on GPUs and on CPUs with AVX512-BF16 or AMX): "
                 "fp32, tf32, bf16")
      ->check(CLI::IsMember({"fp32", "tf32", "bf16"}));
  app.add_option("--threads", f->threads,
                 "CPU threads in all, divided among the towers, at least 1 each (default: every core)")
      ->check(CLI::Range(1, 4096));
  app.add_option("--resume", f->resume,
                 "Continue the run saved in this checkpoint (last.h5, or a ModelCheckpoint file) with --config")
      ->check(non_empty_path());
  app.add_option("--initial-weights", f->initial_weights,
                 "Override training.initial_weights: start a new run from this checkpoint's weights (a model of "
                 "the same layers; Keras's load_weights before fit), with a fresh optimizer")
      ->check(non_empty_path());
  app.add_flag("--overwrite", f->overwrite,
               "Train into an output folder that holds another run (a new run there, or one resumed from "
               "elsewhere): its last.h5, final.h5 and fixed-name ModelCheckpoint file are removed and its log.csv "
               "emptied when the run starts; other checkpoints are replaced as this run writes its own");
  app.add_option("--log-format", f->log_format,
                 "text: Keras-style lines; json: one JSON object per epoch on stdout (the model summary goes "
                 "to stderr)")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  return [f] { return run_train(*f); };
}

}  // namespace trainer::cli
