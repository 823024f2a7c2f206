#include "train/memory_plan.h"

#include <cstdio>

#include "core/error.h"
#include "train/optimizer.h"

namespace trainer {

namespace {
/// Slots `optimizer` keeps a float of per parameter (the optimizer's own
/// rule, asked of one built for one parameter on the CPU).
size_t optimizer_slots(const OptimizerConfig& optimizer) {
  return make_optimizer(optimizer, 1, Device{})->state().size();
}

std::string mib(size_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MiB", double(bytes) / double(1 << 20));
  return buf;
}
}  // namespace

DeviceMemoryPlan plan_device_memory(Model& model, int batch, Precision precision, const OptimizerConfig& optimizer) {
  if (batch < 1) throw UserError("a memory plan needs a batch of at least 1 sample, got " + std::to_string(batch));
  const bool bf16 = precision == Precision::BF16;
  model.use_logits_output();  // as a training tower does: its losses take the last layer's logits
  model.set_activation_type(bf16 ? DType::BF16 : DType::F32);
  DeviceMemoryPlan p;
  p.batch = batch;
  p.precision = precision;
  p.weights = (model.num_params() + model.num_state()) * sizeof(float);
  p.gradients = model.num_params() * sizeof(float);
  p.optimizer = optimizer_slots(optimizer) * model.num_params() * sizeof(float);
  const Shape in = model.input_shape().with_batch(batch);
  const size_t pixels = size_t(batch) * in.h * in.w;
  p.batch_buffers = (pixels + in.numel() + pixels) * sizeof(float);
  p.activations = model.planned_activation_bytes(batch);
  const LayerMemory layers = model.layer_memory(batch, bf16);
  p.layer_kept = layers.kept;
  p.layer_transient = layers.transient;
  p.workspace = layers.workspace;
  return p;
}

std::string memory_plan_hint(const Config& config, int batch) {
  try {
    Model model(config.model, config.path);
    const DeviceMemoryPlan p = plan_device_memory(model, batch, config.training.precision, config.training.optimizer);
    const std::string precision = precision_name(p.precision);
    return "The memory plan for " + std::to_string(batch) + " sample(s) a tower in " + precision + " is " +
           mib(p.total()) + " besides cuDNN's and NCCL's own (trainer summary --config " + config.path +
           " --batch-size " + std::to_string(batch) + " --precision " + precision + " lists its parts)";
  } catch (const std::exception&) {
    return "";
  }
}

std::string memory_plan_text(const DeviceMemoryPlan& p) {
  const std::pair<const char*, size_t> parts[] = {
      {"weights (parameters and state)", p.weights},
      {"weight gradients", p.gradients},
      {"optimizer slots", p.optimizer},
      {"masks and upload staging", p.batch_buffers},
      {"layer outputs and their gradients", p.activations},
      {"kept by layers", p.layer_kept},
      {"one layer's backward", p.layer_transient},
      {"workspace", p.workspace},
      {"total", p.total()},
  };
  std::string s = "Planned device memory of one GPU tower, training " + std::to_string(p.batch) + " sample(s) a step in " +
                  precision_name(p.precision) + ":\n";
  for (const auto& [name, bytes] : parts) {
    char line[96];
    std::snprintf(line, sizeof line, "  %-34s %12s\n", name, mib(bytes).c_str());
    s += line;
  }
  s += "  not counted: cuDNN's algorithm workspace (up to 512 MiB a call, chosen at the first step), the first "
       "step's algorithm search, NCCL's own buffers, the CUDA context, SeparableConv2D's and padded "
       "MaxPooling2D's own copies, the normalization layers' statistics\n";
  return s;
}

}  // namespace trainer
