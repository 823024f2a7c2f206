// trainer summary --config FILE [--batch-size B] [--precision P]: validate a
// config and print its model table (once, under an MPI launcher), and with
// either option the planned device memory of a GPU tower (train/memory_plan.h).
#include <iostream>
#include <optional>

#include "commands.h"
#include "dist/process_group.h"
#include "nn/model.h"
#include "train/memory_plan.h"
#include "train/callbacks/registry.h"
#include "world_checks.h"

namespace trainer::cli {

namespace {
/// The memory plan for the options (0 and "": the config's batch and precision).
DeviceMemoryPlan plan_memory(const Config& config, Model& model, int batch, const std::string& precision) {
  const TrainingConfig& t = config.training;
  if (!batch) batch = t.batch_size_per_device ? t.batch_size_per_device : t.batch_size;
  return plan_device_memory(model, batch, precision.empty() ? t.precision : precision_named(precision), t.optimizer);
}
}  // namespace

Command add_summary(CLI::App& app) {
  auto path = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand("summary", "Validate a config and print its model summary");
  cmd->add_option("--config,-c", *path, "Run configuration (YAML)")->required()->check(non_empty_path());
  auto batch = std::make_shared<int>(0);
  auto precision = std::make_shared<std::string>();
  cmd->add_option("--batch-size", *batch,
                  "Also print the device memory one GPU tower plans for training this many samples a step (its "
                  "share of training.batch_size; default with --precision: training.batch_size_per_device, else "
                  "training.batch_size)")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--precision", *precision, "Also print that plan for this precision (default: training.precision)")
      ->check(CLI::IsMember({"fp32", "tf32", "bf16"}));
  return {cmd, [path, batch, precision] {
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
            if ((*batch || !precision->empty()) && (!in.world || in.world->rank() == 0))
              std::cout << "\n" << memory_plan_text(plan_memory(in.config, *model, *batch, *precision)) << std::flush;
            return 0;
          }};
}

}  // namespace trainer::cli
