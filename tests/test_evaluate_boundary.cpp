// evaluate_images with a 3-class model against label images: read as a
// boundary model's classes (labels_to_classes), its ignore_class left out of
// the pixel truth, and other class counts refused; on real DSB 2018 images.
#include <catch2/catch.hpp>

#include <filesystem>

#include "config/config.h"
#include "core/error.h"
#include "dsb_testing.h"
#include "process_testing.h"
#include "tiny_model.h"
#include "train/evaluate.h"

namespace fs = std::filesystem;
using namespace trainer;

namespace {

// The confusion counts of true class t (pixels of t predicted as any class).
double true_class_pixels(const MetricCounts& c, int t) {
  double n = 0;
  for (int p = 0; p < c.classes(); ++p) n += c.v[size_t(MetricCounts::kSize + t * c.classes() + p)];
  return n;
}

}  // namespace

TEST_CASE("a 3-class model against label images is a boundary model, its ignore_class stays out, 4 classes are "
          "refused",
          "[evaluate][categorical]") {
  TRAINER_REQUIRE_DSB();
  const std::string flat = std::string(TRAINER_SOURCE_DIR) + "/../shared/data/dsb2018/flat";
  const fs::path dir = testing::temp_dir("evaluate_boundary");
  fs::create_directories(dir / "images");
  fs::create_directories(dir / "labels");
  int linked = 0;
  for (const auto& e : fs::directory_iterator(flat + "/train_im")) {
    const std::string id = e.path().stem().string();
    fs::create_symlink(e.path(), dir / "images" / (id + ".png"));
    fs::create_symlink(flat + "/labels/" + id + "_labels.png", dir / "labels" / (id + "_labels.png"));
    if (++linked == 2) break;
  }
  EvalOptions o;
  o.kind = TruthKind::kLabels;
  o.images_dir = (dir / "images").string();
  o.truth_dir = (dir / "labels").string();
  o.suffix = "_labels";
  o.flag = "--labels";
  o.batch_size = 2;

  Trainer plain(parse_config(testing::tiny_classes_config(3), "b.yaml"), 1, 2);
  const EvalResult r = evaluate_images(plain, o);
  CHECK(r.scores.size() == 2);  // an instance score per image
  CHECK(true_class_pixels(r.pixel.counts, 1) > 0);
  CHECK(true_class_pixels(r.pixel.counts, 2) > 0);  // boundary pixels in the truth

  Trainer ignoring(parse_config(testing::tiny_classes_config(3, "{type: SparseCategoricalCrossentropy, ignore_class: 2}"),
                                "i.yaml"),
                   1, 2);
  const EvalResult ri = evaluate_images(ignoring, o);
  CHECK(true_class_pixels(ri.pixel.counts, 2) == 0);  // left out, as decode_class_mask leaves them out
  CHECK(true_class_pixels(ri.pixel.counts, 1) == true_class_pixels(r.pixel.counts, 1));

  Trainer four(parse_config(testing::tiny_classes_config(4), "f.yaml"), 1, 2);
  CHECK_THROWS_WITH(evaluate_images(four, o), Catch::Contains("3-class boundary models (labels_to_classes); this "
                                                              "model has 4 classes: evaluate it with --masks DIR"));
  fs::remove_all(dir);
}
