// trainer: trains an image-segmentation network described in a YAML file on
// every device of the machine. Thin main: flags (CLI11), config, data, run.
// Exit codes: 0 done, 2 user error (flags, config, data), 1 internal error.
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <vector>

#include "commands.h"
#include "core/error.h"

using namespace trainer;

int main(int argc, char** argv) {
  spdlog::set_default_logger(spdlog::stderr_color_mt("trainer"));
  spdlog::set_pattern("[%H:%M:%S] %^%l%$: %v");

  CLI::App app{"trainer: trains image-segmentation networks described in YAML on every GPU "
               "of a machine (or on CPU towers).\nExit codes: 0 done, 2 user error, 1 internal error."};
  app.set_version_flag("--version", "trainer 0.1.0");
  const cli::Runner train = cli::add_train(app);
  const std::vector<cli::Command> commands = {
      cli::add_summary(app),
      cli::add_predict(app),
      cli::add_evaluate(app),
      cli::add_export(app),
  };
  app.require_subcommand(0, 1);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "error: %s; run 'trainer --help' for usage\n", e.what());
    return 2;
  }
  try {
    for (const auto& command : commands)
      if (*command.app) return command.run();
    return train();
  } catch (const UserError& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  } catch (const std::bad_alloc&) {
    std::fflush(stdout);
    std::fprintf(stderr, "error: out of memory: the model, batch or data set does not fit in this machine's "
                         "memory; lower training.batch_size or the input size\n");
    return 2;
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "internal error: %s\n", e.what());
    return 1;
  }
}
