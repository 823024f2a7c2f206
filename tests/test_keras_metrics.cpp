// training.metrics against Keras's own metric classes on the same values:
// logits and masks built here go to tests/keras/keras_metrics.py, which
// updates keras.metrics.BinaryAccuracy, Precision, Recall, BinaryIoU, AUC,
// MeanIoU(sparse_y_pred=False) and SparseCategoricalAccuracy batch by batch,
// and the values must match trainer's counts summed over the same batches.
// Keras comes from the Python that TRAINER_KERAS_PYTHON names (.ci/run makes
// a venv with it); without it the test says so and checks nothing.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <fstream>

#include "layer_testing.h"
#include "process_testing.h"
#include "train/metrics.h"

using namespace trainer;
namespace fs = std::filesystem;

namespace {

void write_floats(const fs::path& file, const Tensor& t) {
  std::ofstream out(file, std::ios::binary);
  out.write(reinterpret_cast<const char*>(t.data()), std::streamsize(t.numel() * sizeof(float)));
  REQUIRE(out.good());
}

/// Counts of logits z against targets y, added batch by batch (`batches` batches of whole samples).
MetricCounts counted(const Tensor& z, const Tensor& y, MetricCounts counts, int batches) {
  const int per = z.shape().n / batches;
  for (int b = 0; b < batches; ++b) {
    Tensor zb(z.shape().with_batch(per)), yb(y.shape().with_batch(per));
    std::copy(z.sample(b * per), z.sample(b * per) + zb.numel(), zb.data());
    std::copy(y.sample(b * per), y.sample(b * per) + yb.numel(), yb.data());
    accumulate_metrics(zb, yb, counts);
  }
  return counts;
}

}  // namespace

TEST_CASE("training.metrics give Keras's own values on the same logits and masks", "[keras][metrics]") {
  const fs::path dir = testing::temp_dir("keras_metrics");
  const std::string python = testing::keras_python(dir);
  if (python.empty()) {
    WARN("not checked against Keras: no Python with keras and tensorflow (set TRAINER_KERAS_PYTHON to one; "
         ".ci/run makes it)");
    return;
  }
  constexpr int kBatches = 3, kClasses = 4;
  // Binary: logits with some skill (the foreground's raised), so that every metric is away from 0 and 1.
  const Shape s{6, 23, 29, 1};
  Tensor z = testing::random_tensor(s, 71, -4.f, 4.f), y = testing::random_tensor(s, 72, 0.f, 1.f);
  for (size_t i = 0; i < y.numel(); ++i) {
    y.data()[i] = y.data()[i] > 0.7f ? 1.f : 0.f;
    z.data()[i] += 1.5f * y.data()[i];
  }
  // Categorical: class labels 0..K-1, the true class's logit raised.
  const Shape sc{6, 11, 13, kClasses};
  Tensor zc = testing::random_tensor(sc, 73, -2.f, 2.f), labels = testing::random_tensor(Shape{sc.n, sc.h, sc.w, 1}, 74, 0.f, 1.f);
  for (size_t i = 0; i < labels.numel(); ++i) {
    const int c = std::min(kClasses - 1, int(labels.data()[i] * kClasses));
    labels.data()[i] = float(c);
    zc.data()[i * kClasses + size_t(c)] += 1.f;
  }
  write_floats(dir / "binary_logits.f32", z);
  write_floats(dir / "binary_targets.f32", y);
  write_floats(dir / "classes_logits.f32", zc);
  write_floats(dir / "classes_labels.f32", labels);
  std::ofstream(dir / "classes.txt") << kClasses;
  const testing::Run r = testing::run(python, std::string(TRAINER_SOURCE_DIR) + "/tests/keras/keras_metrics.py " +
                                                  dir.string() + " " + std::to_string(kBatches),
                                      testing::fresh_subdir(dir, "keras"));
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  const nlohmann::json keras = nlohmann::json::parse(r.out);

  const MetricCounts binary = counted(z, y, MetricCounts(0, true), kBatches);
  for (const auto& [name, value] : keras["binary"].items()) {
    INFO(name);
    CHECK(value.get<double>() > 0.05);
    CHECK(value.get<double>() < 0.95);
    CHECK(binary.value(name) == Approx(value.get<double>()).margin(2e-5));
  }
  CHECK(keras["binary"].size() == 5);
  const MetricCounts classes = counted(zc, labels, MetricCounts(kClasses), kBatches);
  CHECK(classes.value("mean_io_u") == Approx(keras["classes"]["mean_io_u"].get<double>()).margin(2e-5));
  CHECK(classes.value("accuracy") == Approx(keras["classes"]["accuracy"].get<double>()).margin(2e-5));
  fs::remove_all(dir);
}
