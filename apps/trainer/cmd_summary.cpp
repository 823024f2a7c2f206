// trainer summary --config FILE: validate a config and print its model table.
#include <iostream>

#include "commands.h"
#include "nn/model.h"

namespace trainer::cli {

Command add_summary(CLI::App& app) {
  auto path = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand("summary", "Validate a config and print its model summary");
  cmd->add_option("--config,-c", *path, "Run configuration (YAML)")->required()->check(non_empty_path());
  return {cmd, [path] {
            Config config = load_config(*path);
            Model model(config.model, config.path);
            std::cout << model.summary();
            validate_for_training(config, model);
            return 0;
          }};
}

}  // namespace trainer::cli
