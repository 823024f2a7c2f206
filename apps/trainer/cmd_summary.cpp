// trainer summary --config FILE: validate a config and print its model table
// (once, under an MPI launcher).
#include <iostream>

#include "commands.h"
#include "dist/process_group.h"
#include "nn/model.h"

namespace trainer::cli {

Command add_summary(CLI::App& app) {
  auto path = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand("summary", "Validate a config and print its model summary");
  cmd->add_option("--config,-c", *path, "Run configuration (YAML)")->required()->check(non_empty_path());
  return {cmd, [path] {
            name_launched_process();
            Config config = load_config(*path);
            Model model(config.model, config.path);
            // Under mpirun or srun each process checks its copy of the config; the first prints the table.
            if (detect_launch().rank == 0) std::cout << model.summary();
            validate_for_training(config, model);
            return 0;
          }};
}

}  // namespace trainer::cli
