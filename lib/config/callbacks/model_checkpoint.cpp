#include <filesystem>
#include <optional>

#include "config/callbacks/callback_reader.h"

namespace trainer {

namespace {

/// filepath: a file name inside the output folder, an HDF5 file.
void read_filepath(const CallbackInput& in, ModelCheckpointConfig& c) {
  ParamReader& p = in.p;
  if (p.has("filepath")) c.where = p.where("filepath") + ": " + in.what;
  c.filepath = p.get_path("filepath", std::nullopt);
  if (c.filepath.empty()) p.fail("filepath", "must not be empty; e.g. 'best.h5'");
  require_inside_output_dir(p, "filepath", c.filepath, "'best.h5' or 'ck/best.h5'");
  const std::filesystem::path fp(c.filepath);
  if (fp.extension() == ".keras")
    p.fail("filepath", "'" + c.filepath + "': checkpoints are HDF5 files (docs/checkpoint.md), not Keras 3's "
                       ".keras archives; name it '" + std::filesystem::path(fp).replace_extension(".h5").string() +
                       "'");
  const std::filesystem::path leaf = fp.lexically_normal().filename();
  if (leaf.empty() || leaf == ".")
    p.fail("filepath", "'" + c.filepath + "' names a folder; end it with a file name, e.g. '" +
                           (fp.lexically_normal().parent_path() / "best-{epoch:02d}.h5").string() + "'");
}

/// period and save_freq: every epoch, which is all there is.
void read_frequency(ParamReader& p) {
  // Keras 2's every-N-epochs: its default 1 is what is done here.
  if (p.has("period") && p.get_int("period", std::nullopt, 0) != 1)
    p.fail("period", "is Keras 2's ModelCheckpoint(period=...), saving every N epochs, which is not supported: "
                     "checkpoints are written after every epoch (period 1, save_freq: epoch); remove period");
  p.skip("save_freq");
  if (!p.given("save_freq")) return;
  const YAML::Node v = p.get_node("save_freq");  // Keras's default 'epoch', or a number of batches
  if (!v.IsScalar() || v.Scalar() != "epoch")
    p.fail("save_freq", "is " + YAML::Dump(v) + "; only 'epoch' (Keras's default) is supported: checkpoints "
                        "are written at the end of each epoch (last.h5 too, which --resume continues from "
                        "mid-run); remove save_freq");
}

}  // namespace

void read_model_checkpoint(const CallbackInput& in, TrainingConfig& t) {
  ParamReader& p = in.p;
  auto& c = only_one(in, t.model_checkpoint, "ModelCheckpoint");
  read_filepath(in, c);
  c.save_best_only = p.get_bool("save_best_only", c.save_best_only);
  c.save_weights_only = p.get_bool("save_weights_only", c.save_weights_only);
  read_frequency(p);
  // Without save_best_only the monitor is unused: its default needs no validation data.
  if (c.save_best_only || p.has_optional("monitor"))
    c.monitor = read_monitor(in);
  else
    p.skip("monitor");
  read_mode(in, c.mode, c.mode_where);
}

}  // namespace trainer
