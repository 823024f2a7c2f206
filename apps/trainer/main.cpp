// trainer: trains an image-segmentation network described in a YAML file on
// every device of the machine. Thin main: flags (CLI11), config, data, run.
// Exit codes: 0 done, 2 user error (flags, config, data), 1 internal error, 128 + signal when stopped by
// SIGINT/SIGTERM/SIGHUP.
#include <opencv2/core.hpp>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "commands.h"
#include "core/build_id.h"
#include "core/exit_codes.h"

using namespace trainer;

int main(int argc, char** argv) {
  cli::ignore_file_size_signal();
  // OpenCV's own thread pool stays off: trainer decodes, resizes and augments
  // on its threads (data.threads, the towers' OpenMP threads), where a pool
  // per OpenCV call would compete with them for the same cores.
  cv::setNumThreads(0);
  // NO_COLOR (no-color.org): present and not empty, no colour even on a terminal.
  const char* no_color = std::getenv("NO_COLOR");
  spdlog::set_default_logger(spdlog::stderr_color_mt(
      "trainer", no_color && *no_color ? spdlog::color_mode::never : spdlog::color_mode::automatic));
  spdlog::set_pattern("[%H:%M:%S] %^%l%$: %v");

  CLI::App app{"trainer: trains image-segmentation networks described in YAML on every GPU "
               "of a machine (or on CPU towers).\nExit codes: 0 done, 2 user error, 1 internal error, 130/143/129 stopped by SIGINT/SIGTERM/SIGHUP (after writing last.h5)."};
  app.set_version_flag("--version", std::string("trainer ") + build_id());
  const cli::Runner train = cli::add_train(app, std::vector<std::string>(argv, argv + argc));
  const std::vector<cli::Command> commands = {
      cli::add_summary(app),
      cli::add_predict(app),
      cli::add_evaluate(app),
      cli::add_export(app),
      cli::add_import(app),
  };
  app.require_subcommand(0, 1);

  app.failure_message([&app](const CLI::App* failed, const CLI::Error& e) {
    // `trainer --config C summary` fails as "--config is required": the flag sits before the command.
    if (const std::string misplaced = cli::misplaced_flags(app); !misplaced.empty()) return "error: " + misplaced + "\n";
    const std::string what =
        (dynamic_cast<const CLI::ExtrasError*>(&e) && failed ? cli::unexpected_arguments(*failed) : e.what()) +
        (failed ? cli::config_without_flag(*failed) : "");
    const std::vector<CLI::App*> chosen = app.get_subcommands();  // the command's own usage when one was given
    const std::string help = chosen.empty() ? "trainer --help" : "trainer " + chosen.front()->get_name() + " --help";
    return "error: " + what + "; run '" + help + "' for usage\n";
  });
  std::string usage = cli::single_dash_long_flag(app, argc, argv);  // a command-line error, else ""
  if (usage.empty()) {
    std::ostringstream parse_error;  // "error: <what>\n" (the failure message above)
    if (const std::optional<int> code = parse_command_line(app, argc, argv, parse_error)) {
      if (*code != kExitUserError) return *code;  // --help, --version
      usage = parse_error.str();
      usage = usage.substr(usage.rfind("error: ", 0) == 0 ? 7 : 0);
      usage.erase(usage.find_last_not_of('\n') + 1);
    } else {
      usage = cli::misplaced_flags(app);
    }
  }
  if (!usage.empty()) return cli::report_usage_error(usage);
  return run_guarded(
      [&] {
        for (const auto& command : commands)
          if (*command.app) return command.run();
        return train();
      },
      "out of memory: the model, batch or data set does not fit in this machine's memory; lower "
      "training.batch_size or the input size");
}
