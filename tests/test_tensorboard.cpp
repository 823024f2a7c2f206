// The TensorBoard callback: event files framed as TFRecords with CRC-32C,
// their Events read back, and a run on the embedded sample whose event files
// hold log.csv's values (and, where Python's tensorboard package is installed,
// TensorBoard's own reader agrees).
#include <catch2/catch.hpp>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "core/error.h"
#include "io/event_file.h"
#include "io/tensorboard_event.pb.h"
#include "process_testing.h"
#include "train/tensorboard.h"

namespace fs = std::filesystem;
using namespace trainer;
using namespace trainer::testing;

namespace {

/// n little-endian bytes at p as an unsigned integer.
uint64_t little_endian(const char* p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | uint8_t(p[i]);
  return v;
}

/// The Events of the event file at path, each record's two CRCs checked.
std::vector<tensorboard::Event> read_events(const fs::path& path) {
  const std::string bytes = slurp(path);
  std::vector<tensorboard::Event> events;
  size_t at = 0;
  while (at < bytes.size()) {
    REQUIRE(at + 12 <= bytes.size());
    const uint64_t n = little_endian(&bytes[at], 8);
    CHECK(little_endian(&bytes[at + 8], 4) == masked_crc32c(&bytes[at], 8));
    REQUIRE(at + 12 + n + 4 <= bytes.size());
    CHECK(little_endian(&bytes[at + 12 + n], 4) == masked_crc32c(&bytes[at + 12], n));
    tensorboard::Event e;
    REQUIRE(e.ParseFromString(bytes.substr(at + 12, n)));
    events.push_back(e);
    at += 12 + n + 4;
  }
  return events;
}

/// The single event file in folder (other files aside).
fs::path event_file_in(const fs::path& folder) {
  std::vector<fs::path> files;
  for (const auto& f : fs::directory_iterator(folder))
    if (f.path().filename().string().rfind("events.out.tfevents.", 0) == 0) files.push_back(f.path());
  REQUIRE(files.size() == 1);
  return files[0];
}

/// tag -> (step -> value) of the scalars in the event file at path.
std::map<std::string, std::map<int64_t, float>> scalars(const fs::path& path) {
  std::map<std::string, std::map<int64_t, float>> out;
  for (const auto& e : read_events(path))
    if (e.has_summary())
      for (const auto& v : e.summary().value())
        if (v.value_case() == tensorboard::Summary::Value::kSimpleValue) out[v.tag()][e.step()] = v.simple_value();
  return out;
}

/// The rows of a log.csv: column name -> values in epoch order.
std::map<std::string, std::vector<double>> csv_columns(const fs::path& path) {
  std::ifstream in(path);
  std::string line, cell;
  std::getline(in, line);
  std::vector<std::string> names;
  for (std::istringstream h(line); std::getline(h, cell, ',');) names.push_back(cell);
  std::map<std::string, std::vector<double>> cols;
  while (std::getline(in, line)) {
    std::istringstream row(line);
    for (size_t i = 0; std::getline(row, cell, ','); ++i) cols[names.at(i)].push_back(std::stod(cell));
  }
  return cols;
}

}  // namespace

TEST_CASE("tensorboard: the records' checksum is TFRecord's masked CRC-32C", "[tensorboard]") {
  // CRC-32C's check value (RFC 3720's polynomial) over "123456789" is 0xE3069283; TFRecord masks it.
  const uint32_t crc = 0xE3069283u;
  CHECK(masked_crc32c("123456789", 9) == uint32_t(((crc >> 15) | (crc << 17)) + 0xa282ead8u));
  // RFC 3720, B.4: 32 bytes of zeros give 0x8A9136AA.
  const char zeros[32] = {};
  const uint32_t z = 0x8A9136AAu;
  CHECK(masked_crc32c(zeros, 32) == uint32_t(((z >> 15) | (z << 17)) + 0xa282ead8u));
}

TEST_CASE("tensorboard: an event file holds framed Events of scalars and histograms", "[tensorboard]") {
  TempDir dir("tb_file");
  std::string path;
  {
    EventFileWriter w((dir.root / "a" / "train").string());  // parents are made
    path = w.path();
    w.scalar("epoch_loss", 0.25, 3);
    w.histogram("c1/kernel/histogram", {-1.0f, 0.0f, 0.5f, 1.0f, 1.0f, NAN}, 3, 4);
    w.histogram("c1/bias/histogram", {0.5f, 0.5f}, 4);
    w.histogram("empty/histogram", {}, 5);
  }
  CHECK(fs::path(path).parent_path() == dir.root / "a" / "train");
  const std::vector<tensorboard::Event> events = read_events(path);
  REQUIRE(events.size() == 5);
  CHECK(events[0].file_version() == "brain.Event:2");
  CHECK(events[0].wall_time() > 1.6e9);  // seconds since 1970

  REQUIRE(events[1].summary().value_size() == 1);
  CHECK(events[1].step() == 3);
  CHECK(events[1].summary().value(0).tag() == "epoch_loss");
  CHECK(events[1].summary().value(0).simple_value() == 0.25f);

  const tensorboard::HistogramProto& h = events[2].summary().value(0).histo();
  CHECK(events[2].summary().value(0).tag() == "c1/kernel/histogram");
  CHECK(h.min() == -1.0);
  CHECK(h.max() == 1.0);
  CHECK(h.num() == 5);  // the NaN is left out
  CHECK(h.sum() == 1.5);
  CHECK(h.sum_squares() == 3.25);
  // Four buckets of width 0.5 from -1: (-1, -0.5], (-0.5, 0], (0, 0.5], (0.5, 1].
  REQUIRE(h.bucket_limit_size() == 4);
  CHECK(h.bucket_limit(0) == -0.5);
  CHECK(h.bucket_limit(3) == 1.0);
  CHECK(std::vector<double>(h.bucket().begin(), h.bucket().end()) == std::vector<double>{1, 1, 1, 2});

  const tensorboard::HistogramProto& c = events[3].summary().value(0).histo();  // all values equal: one bucket
  CHECK(c.min() == 0.5);
  CHECK(c.max() == 0.5);
  REQUIRE(c.bucket_size() == 1);
  CHECK(c.bucket(0) == 2);
  CHECK(c.bucket_limit(0) == 0.5);

  const tensorboard::HistogramProto& e = events[4].summary().value(0).histo();
  CHECK(e.num() == 0);
  CHECK(e.bucket_size() == 0);

  // read_event_records: a cut last record and a zero-filled tail (a power loss) end the file; a checksum that
  // fails is damage.
  const std::string bytes = slurp(path);
  bool damaged = true;
  CHECK(read_event_records(path, &damaged).size() == 5);
  CHECK_FALSE(damaged);
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes.substr(0, bytes.size() - 3);
  CHECK(read_event_records(path, &damaged).size() == 4);
  CHECK_FALSE(damaged);
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes << std::string(4096, '\0');
  CHECK(read_event_records(path, &damaged).size() == 5);
  CHECK_FALSE(damaged);
  std::string flipped = bytes;
  flipped[bytes.size() - 10] = char(flipped[bytes.size() - 10] ^ 1);
  std::ofstream(path, std::ios::binary | std::ios::trunc) << flipped;
  CHECK(read_event_records(path, &damaged).size() == 4);
  CHECK(damaged);
}

TEST_CASE("tensorboard: the validation folder is made at once, and other runs' event folders are found",
          "[tensorboard]") {
  TempDir dir("tb_folders");
  TensorBoardConfig cfg;
  cfg.enabled = true;
  fs::create_directories(dir.root / "logs");
  std::ofstream(dir.root / "logs" / "validation") << "a file in the way";
  CHECK_THROWS_WITH(TensorBoardLogger((dir.root / "logs").string(), cfg, {}),
                    Catch::Contains("cannot create the TensorBoard folder '" + (dir.root / "logs" / "validation").string()));
  fs::remove(dir.root / "logs" / "validation");
  { TensorBoardLogger tb((dir.root / "logs").string(), cfg, {}); }
  CHECK(fs::is_directory(dir.root / "logs" / "validation"));
  { EventFileWriter w((dir.root / "fit" / "20240101" / "train").string()); }
  TrainingConfig t;
  CHECK(other_event_folders(dir.root.string(), t) ==
        std::vector<std::string>{(dir.root / "fit" / "20240101" / "train").string(), (dir.root / "logs" / "train").string()});
  t.tensorboard = cfg;
  CHECK(other_event_folders(dir.root.string(), t) ==
        std::vector<std::string>{(dir.root / "fit" / "20240101" / "train").string()});
}

TEST_CASE("tensorboard: a folder that cannot be made is an error naming it", "[tensorboard]") {
  TempDir dir("tb_blocked");
  std::ofstream(dir.root / "logs") << "a file where the folder would go";
  CHECK_THROWS_AS(EventFileWriter((dir.root / "logs" / "train").string()), UserError);
  CHECK_THROWS_WITH(EventFileWriter((dir.root / "logs" / "train").string()),
                    Catch::Contains("cannot create the TensorBoard folder '" + (dir.root / "logs" / "train").string()) &&
                        Catch::Contains("set the TensorBoard callback's log_dir to another folder"));
}

TEST_CASE("tensorboard: the callback splits training and validation values as Keras does", "[tensorboard]") {
  TempDir dir("tb_logger");
  TensorBoardConfig cfg;
  cfg.enabled = true;
  cfg.update_freq = 2;
  cfg.histogram_freq = 2;
  cfg.write_steps_per_second = true;
  const std::vector<WeightRecord> weights = {{"c1", "kernel", {1, 1, 1, 2}, {0.5f, -0.5f}}, {"c1", "bias", {2}, {0, 1}}};
  {
    TensorBoardLogger tb(dir.root.string(), cfg, {});
    for (int64_t it = 1; it <= 3; ++it) tb.on_train_batch_end(it, {{"loss", 1.0 / double(it)}}, 0.25);
    CHECK(tb.wants_weights(1));
    CHECK_FALSE(tb.wants_weights(2));
    CHECK(tb.wants_weights(3));
    tb.on_epoch_end(1, 3, {{"loss", 0.5}, {"dice", 0.25}, {"val_loss", 0.75}, {"learning_rate", 0.1}}, 0.01, 4.0,
                    weights);
    tb.on_epoch_end(2, 6, {{"loss", 0.4}, {"val_loss", 0.7}}, 0.001, 5.0, {});
  }
  const auto train = scalars(event_file_in(dir.root / "train"));
  CHECK(train.at("batch_loss") == std::map<int64_t, float>{{2, 0.5f}});  // every second step only
  CHECK(train.at("batch_steps_per_second") == std::map<int64_t, float>{{2, 4.0f}});
  CHECK(train.at("epoch_loss") == std::map<int64_t, float>{{0, 0.5f}, {1, 0.4f}});  // epochs counted from 0
  CHECK(train.at("epoch_dice") == std::map<int64_t, float>{{0, 0.25f}});
  // The rate given, not the logs' learning_rate: fit decides which.
  CHECK(train.at("epoch_learning_rate") == std::map<int64_t, float>{{0, 0.01f}, {1, 0.001f}});
  CHECK(train.at("epoch_steps_per_second") == std::map<int64_t, float>{{0, 4.0f}, {1, 5.0f}});
  CHECK(train.count("learning_rate") == 0);
  CHECK(train.count("epoch_val_loss") == 0);
  const auto validation = scalars(event_file_in(dir.root / "validation"));
  CHECK(validation.size() == 2);
  CHECK(validation.at("epoch_loss") == std::map<int64_t, float>{{0, 0.75f}, {1, 0.7f}});  // val_ dropped
  CHECK(validation.at("evaluation_loss_vs_iterations") == std::map<int64_t, float>{{3, 0.75f}, {6, 0.7f}});
  std::vector<std::string> histograms;
  for (const auto& e : read_events(event_file_in(dir.root / "train")))
    for (const auto& v : e.summary().value())
      if (v.has_histo()) histograms.push_back(v.tag() + "@" + std::to_string(e.step()));
  CHECK(histograms == std::vector<std::string>{"c1/kernel/histogram@0", "c1/bias/histogram@0"});
}

TEST_CASE("tensorboard: a resumed run carries its checkpoint's events, a new run starts empty", "[tensorboard]") {
  TempDir dir("tb_resume");
  TensorBoardConfig cfg;
  cfg.enabled = true;
  cfg.update_freq = 1;
  const fs::path run = dir.root / "run";
  {
    TensorBoardLogger tb(run.string(), cfg, {});
    for (int epoch = 1; epoch <= 3; ++epoch) {
      for (int64_t it = 2 * epoch - 1; it <= 2 * epoch; ++it) tb.on_train_batch_end(it, {{"loss", double(it)}}, 0);
      tb.on_epoch_end(epoch, 2 * epoch, {{"loss", double(epoch)}, {"val_loss", 10.0 * epoch}}, 0.01, 1, {});
    }
  }
  // A crash while the last record was written: TensorBoard's readers stop there, and so does the carrying.
  std::ofstream(event_file_in(run / "train"), std::ios::app | std::ios::binary) << std::string("\x20\0\0\0", 4);
  const fs::path old_train = event_file_in(run / "train"), old_validation = event_file_in(run / "validation");

  // In place from a checkpoint of epoch 1 taken at step 3 (a stop within epoch 2): epoch 1's values and the
  // steps up to 3 stay, in one new file per folder; the rest (a branch drops it, a crash would repeat it) goes.
  {
    TensorBoardLogger tb(run.string(), cfg, {run.string(), 1, 3});
    tb.on_train_batch_end(4, {{"loss", 40.0}}, 0);
  }
  CHECK_FALSE(fs::exists(old_train));
  CHECK_FALSE(fs::exists(old_validation));
  const fs::path train_file = event_file_in(run / "train");
  CHECK(read_events(train_file)[0].file_version() == "brain.Event:2");
  const auto train = scalars(train_file);
  CHECK(train.at("batch_loss") == std::map<int64_t, float>{{1, 1.f}, {2, 2.f}, {3, 3.f}, {4, 40.f}});
  CHECK(train.at("epoch_loss") == std::map<int64_t, float>{{0, 1.f}});
  CHECK(train.at("epoch_learning_rate") == std::map<int64_t, float>{{0, 0.01f}});
  const auto validation = scalars(event_file_in(run / "validation"));
  CHECK(validation.at("epoch_loss") == std::map<int64_t, float>{{0, 10.f}});
  CHECK(validation.at("evaluation_loss_vs_iterations") == std::map<int64_t, float>{{2, 10.f}});

  // Elsewhere: the run's events up to the checkpoint are copied; the other folder's own are replaced.
  const fs::path branch = dir.root / "branch";
  fs::create_directories(branch / "train");
  std::ofstream(branch / "train" / "events.out.tfevents.1.host.1.v2") << "another run's";
  std::ofstream(branch / "train" / "notes.txt") << "not an event file";
  { TensorBoardLogger tb(branch.string(), cfg, {run.string(), 1, 2}); }
  CHECK(fs::exists(branch / "train" / "notes.txt"));
  CHECK(scalars(event_file_in(branch / "train")).at("batch_loss") == std::map<int64_t, float>{{1, 1.f}, {2, 2.f}});
  CHECK(event_files_in((run / "train").string()).size() == 1);  // the source is left as it was

  // A copy left beside the run's file (a resume that failed while carrying, or files an older trainer added
  // side by side): each value is carried once. Histograms are kept by epoch, also of a layer named batch_....
  const fs::path copy = run / "train" / "events.out.tfevents.9999999999.host.1.0.v2";
  fs::copy_file(event_file_in(run / "train"), copy);
  {
    EventFileWriter w((run / "train").string());
    w.histogram("batch_normalization_1/gamma/histogram", {1.f}, 0);
    w.histogram("batch_normalization_1/gamma/histogram", {1.f}, 1);
  }
  { TensorBoardLogger tb(run.string(), cfg, {run.string(), 1, 3}); }
  std::map<std::string, int> values;
  for (const auto& e : read_events(event_file_in(run / "train")))
    for (const auto& v : e.summary().value()) ++values[v.tag() + "@" + std::to_string(e.step())];
  CHECK(values == std::map<std::string, int>{{"batch_loss@1", 1}, {"batch_loss@2", 1}, {"batch_loss@3", 1},
                                             {"epoch_loss@0", 1}, {"epoch_learning_rate@0", 1},
                                             {"batch_normalization_1/gamma/histogram@0", 1}});

  // A record that fails its checksum in the middle (not a crash's cut): carried up to it, warned, and the file kept
  // Out of TensorBoard's way (the values after it vanished with the file).
  {
    const fs::path f = event_file_in(run / "train");
    std::string bytes = slurp(f);
    bytes[bytes.size() / 2] = char(bytes[bytes.size() / 2] ^ 0x5a);
    std::ofstream(f, std::ios::binary | std::ios::trunc) << bytes;
    { TensorBoardLogger tb(run.string(), cfg, {run.string(), 1, 3}); }
    CHECK(fs::exists(run / "train" / fs::path(f).filename().string().replace(0, 19, "events.out.tf-events-damaged")));
    CHECK(event_files_in((run / "train").string()).size() == 1);  // the new file alone is read
  }

  // A new run: the earlier run's event files go, others stay.
  { TensorBoardLogger tb(branch.string(), cfg, {}); }
  CHECK(read_events(event_file_in(branch / "train")).size() == 1);  // its version alone
  CHECK(fs::exists(branch / "train" / "notes.txt"));
  CHECK(fs::is_empty(branch / "validation"));
}

TEST_CASE("tensorboard: a run on real images writes log.csv's values as TensorBoard's scalars", "[tensorboard][e2e]") {
  TempDir dir("tb_run");
  std::ofstream(dir.root / "unet.yaml") << sample_unet_config(dir.root / "run", R"(  epochs: 2
  batch_size: 8
  metrics: [mean_iou]
  callbacks:
    - {type: TensorBoard, update_freq: batch, histogram_freq: 1}
    - {type: ReduceLROnPlateau, patience: 0, min_delta: 100, factor: 0.5}
)");
  const Run r = run_trainer("--config " + (dir.root / "unet.yaml").string() + " --gpus cpu --threads 1", dir.root);
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.err + r.out, Catch::Contains("TensorBoard: event files in " + (dir.root / "run" / "logs").string()));
  CHECK_THAT(r.out, Catch::Contains((dir.root / "run" / "logs").string()));  // among the files written
  const auto csv = csv_columns(dir.root / "run" / "log.csv");
  const fs::path train_file = event_file_in(dir.root / "run" / "logs" / "train");
  const auto train = scalars(train_file);
  const auto validation = scalars(event_file_in(dir.root / "run" / "logs" / "validation"));
  for (const char* name : {"loss", "mean_iou"}) {
    INFO(name);
    const std::vector<double>& column = csv.at(name);
    const std::vector<double>& val_column = csv.at(std::string("val_") + name);
    REQUIRE(column.size() == 2);
    for (int epoch = 0; epoch < 2; ++epoch) {
      CHECK(train.at(std::string("epoch_") + name).at(epoch) == float(column[size_t(epoch)]));
      CHECK(validation.at(std::string("epoch_") + name).at(epoch) == float(val_column[size_t(epoch)]));
    }
  }
  // ReduceLROnPlateau halves the rate after epoch 2 (epoch 1 is its first best): TensorBoard's learning rate is
  // Log.csv's, the rate each epoch trained with (one name, two values, was confusing).
  CHECK(csv.at("learning_rate") == std::vector<double>{0.01, 0.01});
  CHECK(train.at("epoch_learning_rate") == std::map<int64_t, float>{{0, 0.01f}, {1, 0.01f}});
  // 32 training pairs in batches of 8: steps 1 to 8, the epoch's last step's batch_loss its epoch_loss.
  const auto& batch_loss = train.at("batch_loss");
  REQUIRE(batch_loss.size() == 8);
  CHECK(batch_loss.begin()->first == 1);
  CHECK(batch_loss.at(4) == train.at("epoch_loss").at(0));
  CHECK(batch_loss.at(8) == train.at("epoch_loss").at(1));
  int histograms = 0;
  for (const auto& e : read_events(train_file))
    for (const auto& v : e.summary().value()) histograms += v.has_histo() && v.tag() == "out/kernel/histogram";
  CHECK(histograms == 2);
  // write_graph (Keras's default): the layers as a graph, the skip connection an edge into cat.
  std::map<std::string, tensorboard::NodeDef> nodes;
  int graphs = 0;
  for (const auto& e : read_events(train_file)) {
    if (e.graph_def().empty()) continue;
    ++graphs;
    tensorboard::GraphDef g;
    REQUIRE(g.ParseFromString(e.graph_def()));
    for (const auto& n : g.node()) nodes[n.name()] = n;
  }
  CHECK(graphs == 1);
  CHECK(nodes.size() == 9);
  REQUIRE(nodes.count("cat"));
  CHECK(nodes.at("cat").op() == "Concatenate");
  CHECK(std::vector<std::string>(nodes.at("cat").input().begin(), nodes.at("cat").input().end()) ==
        std::vector<std::string>{"u1", "c1"});
  CHECK(nodes.at("out").input_size() == 1);
  CHECK(nodes.at("out").input(0) == "c3");
  CHECK(nodes.at("input").input_size() == 0);
  const auto& c2 = nodes.at("c2").attr();
  CHECK(c2.at("filters").s() == "16");
  CHECK(c2.at("activation").s() == "relu");
  CHECK(c2.at("params").i() == 3 * 3 * 8 * 16 + 16);
  CHECK_FALSE(c2.count("type"));
  std::vector<int64_t> dims;
  for (const auto& d : c2.at("_output_shapes").list().shape(0).dim()) dims.push_back(d.size());
  CHECK(dims == std::vector<int64_t>{-1, 32, 32, 16});

  // TensorBoard's own reader, where Python's tensorboard package is installed (TRAINER_TENSORBOARD_PYTHON
  // names a Python that has it; else python3).
  const char* env = std::getenv("TRAINER_TENSORBOARD_PYTHON");
  const std::string python = env && *env ? env : "python3";
  if (run(python, "-c 'import tensorboard'", fresh_subdir(dir.root, "probe")).code != 0) {
    WARN("not checked with TensorBoard's reader: " << python << " has no tensorboard package");
    return;
  }
  const std::string script = R"(
import sys
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
ea = EventAccumulator(sys.argv[1], size_guidance={"scalars": 0, "histograms": 0})
ea.Reload()
print(" ".join("%s@%d=%.9g" % (t, e.step, e.value) for t in ["epoch_loss"] for e in ea.Scalars(t)))
print("histograms", len(ea.Histograms("out/kernel/histogram")))
print("graph", " ".join("%s:%s<%s" % (n.name, n.op, ",".join(n.input)) for n in ea.Graph().node))
)";
  std::ofstream(dir.root / "read.py") << script;
  const Run tb = run(python, (dir.root / "read.py").string() + " " + (dir.root / "run" / "logs" / "train").string(),
                     fresh_subdir(dir.root, "tb"));
  INFO(tb.out << tb.err);
  REQUIRE(tb.code == 0);
  char expected[128];
  std::snprintf(expected, sizeof expected, "epoch_loss@0=%.9g epoch_loss@1=%.9g", double(train.at("epoch_loss").at(0)),
                double(train.at("epoch_loss").at(1)));
  CHECK_THAT(tb.out, Catch::Contains(expected) && Catch::Contains("histograms 2") &&
                        Catch::Contains("graph input:Input< scale:Rescaling<input ") &&
                        Catch::Contains(" cat:Concatenate<u1,c1 "));
}

TEST_CASE("tensorboard: a resumed run's event files continue as its log.csv does", "[tensorboard][e2e]") {
  TempDir dir("tb_resume_run");
  std::ofstream(dir.root / "unet.yaml") << sample_unet_config(dir.root / "run", R"(  epochs: 2
  batch_size: 8
  callbacks:
    - {type: TensorBoard, update_freq: batch}
)");
  const std::string args = "--config " + (dir.root / "unet.yaml").string() + " --gpus cpu --threads 1";
  REQUIRE(run_trainer(args, dir.root).code == 0);
  const Run r = run_trainer(args + " --epochs 3 --resume " + (dir.root / "run" / "last.h5").string(), dir.root);
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  // 8 batch_loss, 2 epoch_loss and 2 epoch_learning_rate in train/, 2 epoch_loss and 2 evaluation_loss in validation/.
  CHECK_THAT(r.err, Catch::Contains("TensorBoard: 16 value(s) of the first 2 epoch(s) carried over from"));
  const auto csv = csv_columns(dir.root / "run" / "log.csv");
  const auto train = scalars(event_file_in(dir.root / "run" / "logs" / "train"));  // one file: the runs joined
  REQUIRE(csv.at("loss").size() == 3);
  REQUIRE(train.at("epoch_loss").size() == 3);
  for (int epoch = 0; epoch < 3; ++epoch) CHECK(train.at("epoch_loss").at(epoch) == float(csv.at("loss")[size_t(epoch)]));
  const auto& batch_loss = train.at("batch_loss");  // 4 steps an epoch, each once
  CHECK(batch_loss.size() == 12);
  CHECK(batch_loss.rbegin()->first == 12);
  CHECK(scalars(event_file_in(dir.root / "run" / "logs" / "validation")).at("epoch_loss").size() == 3);

  // --overwrite with a config without the callback leaves those files, and says so.
  std::ofstream(dir.root / "plain.yaml") << sample_unet_config(dir.root / "run", "  epochs: 1\n  batch_size: 8\n");
  const Run plain = run_trainer("--config " + (dir.root / "plain.yaml").string() + " --gpus cpu --threads 1 --overwrite",
                                dir.root);
  INFO(plain.out << plain.err);
  CHECK(plain.code == 0);
  CHECK_THAT(plain.err, Catch::Contains("--overwrite keeps the TensorBoard event files in " +
                                        (dir.root / "run" / "logs" / "train").string() + " and 1 more folder(s)"));
}

TEST_CASE("tensorboard: a resume carries no event files of another run, told from log.csv's losses",
          "[tensorboard]") {
  // A run with --overwrite and no TensorBoard callback left the replaced run's event files, and
  // its resume carried them as its own history.
  TempDir dir("tb_foreign");
  TensorBoardConfig cfg;
  cfg.enabled = true;
  const fs::path run = dir.root / "run";
  {
    TensorBoardLogger tb(run.string(), cfg, {});
    for (int epoch = 1; epoch <= 2; ++epoch)
      tb.on_epoch_end(epoch, 2 * epoch, {{"loss", 0.5 * epoch}, {"val_loss", 0.25 * epoch}}, 0.01, 1, {});
  }
  TensorBoardStart same{run.string(), 2, 4, {{0, 0.5}, {1, 1.0000001}}};  // log.csv's decimals
  { TensorBoardLogger tb(run.string(), cfg, same); }
  CHECK(scalars(event_file_in(run / "train")).at("epoch_loss") == std::map<int64_t, float>{{0, 0.5f}, {1, 1.f}});
  TensorBoardStart other{run.string(), 2, 4, {{0, 0.5}, {1, 1.5}}};  // the resumed run's epoch 2 had loss 1.5
  { TensorBoardLogger tb(run.string(), cfg, other); }
  CHECK(scalars(event_file_in(run / "train")).count("epoch_loss") == 0);
  CHECK(event_files_in((run / "validation").string()).empty());  // the other run's removed, none carried
}
