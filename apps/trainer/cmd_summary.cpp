// trainer summary --config FILE: validate a config and print its model table
// (once, under an MPI launcher).
#include <iostream>
#include <optional>

#include "commands.h"
#include "dist/process_group.h"
#include "nn/model.h"
#include "train/callbacks/registry.h"
#include "world_checks.h"

namespace trainer::cli {

Command add_summary(CLI::App& app) {
  auto path = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand("summary", "Validate a config and print its model summary");
  cmd->add_option("--config,-c", *path, "Run configuration (YAML)")->required()->check(non_empty_path());
  return {cmd, [path] {
            name_launched_process();
            // Under mpirun or srun each process checks its copy of the config; rank 0 prints the table, and
            // an error once.
            const ConfigInWorld in = load_config_in_world(*path, "trainer summary");
            std::optional<Model> model;
            check_together(in.world.get(), [&] { model.emplace(in.config.model, in.config.path); });
            // Each process validates its own copy: they must be alike, as for training (else different configs
            // would pass, and rank 0's table alone be shown).
            if (in.world) require_same_settings(*in.world, in.config, false);
            if (!in.world || in.world->rank() == 0) std::cout << model->summary() << std::flush;
            check_together(in.world.get(), [&] {
              validate_for_training(in.config, *model);
              check_callback_files(in.config);
            });
            return 0;
          }};
}

}  // namespace trainer::cli
