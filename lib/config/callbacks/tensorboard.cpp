#include <algorithm>
#include <optional>

#include "config/callbacks/callback_reader.h"

namespace trainer {

namespace {

/// update_freq: 'epoch' (the default), 'batch' (every step) or a number of steps.
void read_update_freq(ParamReader& p, TensorBoardConfig& c) {
  if (!p.has_optional("update_freq") || !p.given("update_freq")) return;
  const YAML::Node v = p.get_node("update_freq");
  const std::string text = v.IsScalar() ? v.Scalar() : YAML::Dump(v);
  if (text == "batch") {
    c.update_freq = 1;
  } else if (text != "epoch") {
    int n = 0;
    if (!v.IsScalar() || !YAML::convert<int>::decode(v, n))
      p.fail("update_freq", "is '" + text + "'; use 'epoch' (values at each epoch's end), 'batch' (every step) or "
                            "a number of steps, e.g. 100");
    c.update_freq = p.get_int("update_freq", std::nullopt, 1);
  }
}

/// profile_batch: profiling is not supported; Keras's 0 (and a range of zeros) is accepted.
void refuse_profiling(ParamReader& p) {
  if (!p.has_optional("profile_batch") || !p.given("profile_batch")) return;
  const YAML::Node v = p.get_node("profile_batch");
  // Keras disables profiling with 0, and with a range of zeros: [0, 0] or its legacy string "0,0".
  std::string text = v.IsScalar() ? v.Scalar() : "";
  text.erase(std::remove(text.begin(), text.end(), ' '), text.end());  // "0, 0" as "0,0"
  const bool zeros = v.IsScalar() ? (text == "0" || text == "0,0")
                                  : v.IsSequence() && v.size() == 2 && v[0].IsScalar() && v[0].Scalar() == "0" &&
                                        v[1].IsScalar() && v[1].Scalar() == "0";
  if (!zeros)
    p.fail("profile_batch", "is " + YAML::Dump(v) + "; profiling through TensorBoard is not supported (0, Keras's "
                            "default, only): bench/unet_throughput's --profile and --trace time each "
                            "layer and kernel (docs/gpu.md, Measuring); remove profile_batch");
}

}  // namespace

void read_tensorboard(const CallbackInput& in, TrainingConfig& t) {
  ParamReader& p = in.p;
  TensorBoardConfig& c = only_one(in, t.tensorboard, "TensorBoard");
  c.where = p.where("log_dir") + ": " + p.what();
  c.log_dir = p.get_path("log_dir", c.log_dir);
  if (c.log_dir.empty()) p.fail("log_dir", "must not be empty; e.g. 'logs'");
  require_inside_output_dir(p, "log_dir", c.log_dir, "'logs' or 'tensorboard/run1'");
  read_update_freq(p, c);
  c.histogram_freq = p.get_int("histogram_freq", c.histogram_freq, 0);
  c.write_steps_per_second = p.get_bool("write_steps_per_second", c.write_steps_per_second);
  if (p.has("write_grads"))
    p.fail("write_grads", "is Keras 2's gradient histograms, which TensorFlow 2's Keras dropped; it is not supported: "
                          "remove it (histogram_freq gives the weights' histograms)");
  c.write_graph = p.get_bool("write_graph", c.write_graph);
  if (p.get_bool("write_images", false))
    p.fail("write_images", "is true, which draws each weight as an image; that is not supported: the weights' "
                           "histograms are (histogram_freq); remove write_images");
  refuse_profiling(p);
  if (p.get_int("embeddings_freq", 0, 0) != 0)
    p.fail("embeddings_freq", "must be 0: the Projector's embeddings need an Embedding layer, which segmentation "
                              "models here do not have; remove embeddings_freq");
  if (p.has_optional("embeddings_metadata") && p.given("embeddings_metadata"))
    p.fail("embeddings_metadata", "is for the Projector's embeddings, which are not written; remove it");
}

}  // namespace trainer
