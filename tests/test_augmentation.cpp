// data.augmentation: the symmetries each setting allows, their pixel maps
// (checked as a group: four clockwise quarter turns are the identity), the
// draws, and through the Trainer that image and mask move together, that
// validation is never augmented and that the towers still agree.
#include <catch2/catch.hpp>

#include <map>
#include <set>

#include "config/config.h"
#include "core/error.h"
#include "data/augmentation.h"
#include "tiny_model.h"
#include "train/trainer.h"

using namespace trainer;

namespace {

AugmentationConfig aug(bool h, bool v, bool r) {
  AugmentationConfig a;
  a.horizontal_flip = h;
  a.vertical_flip = v;
  a.rotate_90 = r;
  return a;
}

std::set<Symmetry> allowed(const AugmentationConfig& a) {
  Symmetry s[8];
  const int n = allowed_symmetries(a, s);
  return std::set<Symmetry>(s, s + n);
}

// [h, w, c] with value 100 * y + 10 * x + channel.
std::vector<float> grid(int h, int w, int c) {
  std::vector<float> g(size_t(h * w * c));
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      for (int k = 0; k < c; ++k) g[size_t((y * w + x) * c + k)] = float(100 * y + 10 * x + k);
  return g;
}

std::vector<float> apply(Symmetry s, const std::vector<float>& src, int h, int w, int c) {
  std::vector<float> dst(src.size());
  apply_symmetry(s, src.data(), dst.data(), h, w, c);
  return dst;
}

}  // namespace

TEST_CASE("every symmetry moves each pixel with all its channels as the grid definition says", "[augmentation]") {
  // OpenCV's flip and transpose for most channel counts, the per-pixel copy for 5 and 7.
  for (int c : {1, 2, 3, 4, 5, 6, 7, 8}) {
    const int n = 5;
    const std::vector<float> g = grid(n, n, c);
    for (Symmetry s = 0; s < 8; ++s) {
      INFO("channels " << c << ", symmetry " << s);
      const std::vector<float> got = apply(s, g, n, n, c);
      bool same = true;
      for (int y = 0; y < n; ++y)
        for (int x = 0; x < n; ++x) {
          int sy = (s & 2) ? n - 1 - y : y, sx = (s & 1) ? n - 1 - x : x;
          if (s & 4) std::swap(sy, sx);
          for (int k = 0; k < c; ++k) same = same && got[size_t((y * n + x) * c + k)] == g[size_t((sy * n + sx) * c + k)];
        }
      CHECK(same);
    }
  }
}

TEST_CASE("augmentation settings allow the symmetries they name", "[augmentation]") {
  CHECK(allowed(aug(false, false, false)) == std::set<Symmetry>{0});
  CHECK(allowed(aug(true, false, false)) == std::set<Symmetry>{0, 1});
  CHECK(allowed(aug(false, true, false)) == std::set<Symmetry>{0, 2});
  CHECK(allowed(aug(true, true, false)) == std::set<Symmetry>{0, 1, 2, 3});
  CHECK(allowed(aug(false, false, true)) == std::set<Symmetry>{0, 3, 5, 6});  // the four quarter turns
  CHECK(allowed(aug(true, false, true)).size() == 8);
  CHECK(allowed(aug(false, true, true)).size() == 8);
}

TEST_CASE("symmetries move pixels as flips and quarter turns", "[augmentation]") {
  // 2 x 3, 2 channels: a left-right flip mirrors x, an up-down flip mirrors y.
  const std::vector<float> g = grid(2, 3, 2);
  const std::vector<float> lr = apply(1, g, 2, 3, 2), ud = apply(2, g, 2, 3, 2);
  CHECK(lr[0] == 20);     // (0, 0) <- (0, 2), channel 0
  CHECK(lr[1] == 21);     // channel 1 travels with it
  CHECK(lr[2 * 3 + 0] == 120);  // (1, 0) <- (1, 2)
  CHECK(ud[0] == 100);    // (0, 0) <- (1, 0)
  CHECK(apply(1, lr, 2, 3, 2) == g);  // each flip undoes itself
  CHECK_THROWS_AS(apply(5, g, 2, 3, 2), InternalError);  // a transpose needs a square
  // 4 x 4: all 8 symmetries differ; 5 is a clockwise quarter turn:
  // dst(y, x) = src(3 - x, y), and four of them are the identity.
  const std::vector<float> sq = grid(4, 4, 1);
  std::set<std::vector<float>> distinct;
  for (Symmetry s = 0; s < 8; ++s) distinct.insert(apply(s, sq, 4, 4, 1));
  CHECK(distinct.size() == 8);
  const std::vector<float> cw = apply(5, sq, 4, 4, 1);
  for (int y = 0; y < 4; ++y)
    for (int x = 0; x < 4; ++x) CHECK(cw[size_t(y * 4 + x)] == sq[size_t((3 - x) * 4 + y)]);
  CHECK(apply(5, cw, 4, 4, 1) == apply(3, sq, 4, 4, 1));  // two turns: 180 degrees
  CHECK(apply(5, apply(5, apply(5, cw, 4, 4, 1), 4, 4, 1), 4, 4, 1) == sq);
  CHECK(apply(6, cw, 4, 4, 1) == sq);  // 6 turns back
}

TEST_CASE("each sample's draw is fixed by seed, step and position, and uniform", "[augmentation]") {
  const AugmentationConfig all = aug(true, true, true), flips = aug(true, false, false);
  std::map<Symmetry, int> seen;
  for (uint64_t p = 0; p < 8000; ++p) {
    const Symmetry s = draw_symmetry(all, 7, 3, p);
    CHECK(s == draw_symmetry(all, 7, 3, p));
    ++seen[s];
    CHECK(draw_symmetry(flips, 7, 3, p) <= 1);
  }
  REQUIRE(seen.size() == 8);
  for (const auto& [s, count] : seen) CHECK(std::abs(count - 1000) < 150);
  int same_step = 0, same_seed = 0;
  for (uint64_t p = 0; p < 64; ++p) {
    same_step += draw_symmetry(all, 7, 3, p) == draw_symmetry(all, 7, 4, p);
    same_seed += draw_symmetry(all, 7, 3, p) == draw_symmetry(all, 8, 3, p);
  }
  CHECK(same_step < 20);  // about 8 of 64 by chance
  CHECK(same_seed < 20);
}

namespace {

// The tiny model's config with data.augmentation set to `a` (YAML flow mapping).
Config augmented(const std::string& a) {
  std::string text = trainer::testing::tiny_config(true);
  const std::string data = "data: {images: unused, masks: unused";
  REQUIRE(text.find(data) != std::string::npos);
  text.replace(text.find(data), data.size(), data + ", augmentation: " + a);
  return parse_config(text, "tiny.yaml");
}

// A per-pixel model (each output pixel sees only its own input pixel): its
// loss is a sum over (image pixel, mask pixel) pairs, so it is the same when
// image and mask move together and changes when only one of them moves.
Config pointwise(const std::string& a) {
  return parse_config("model:\n  layers:\n    - {type: Input, shape: [16, 16, 3]}\n"
                      "    - {type: Rescaling, scale: 0.00392156862745098}\n"
                      "    - {type: Conv2D, filters: 1, kernel_size: 1, activation: sigmoid}\n"
                      "data: {images: unused, masks: unused, augmentation: " + a + "}\n"
                      "training: {batch_size: 5, seed: 7, loss: binary_crossentropy}\n",
                      "pointwise.yaml");
}

}  // namespace

TEST_CASE("augmented training moves image and mask together, leaves validation alone, towers agree",
          "[augmentation]") {
  const std::string all = "{horizontal_flip: true, vertical_flip: true, rotate_90: true}";
  const Config plain = augmented("{}"), flipped = augmented(all);
  REQUIRE(flipped.data.augmentation.rotate_90);
  Dataset data = trainer::testing::tiny_data();
  const std::vector<int> batch = {0, 1, 2, 3, 4};
  // Evaluation is never augmented: the same weights give the same sums.
  Trainer a(plain, 1, 1), b(flipped, 1, 1);
  CHECK(a.evaluate(data, batch, 5).loss_sum == b.evaluate(data, batch, 5).loss_sum);
  // A training step sees transformed samples: another loss than without.
  CHECK(a.train_step(data, batch).loss() != Approx(b.train_step(data, batch).loss()).epsilon(1e-4));
  // Image and mask move together: the per-pixel model's loss does not change.
  const Config pixel_plain = pointwise("{}"), pixel_flipped = pointwise(all);  // Trainer keeps a reference
  Trainer p(pixel_plain, 1, 1), q(pixel_flipped, 1, 1);
  for (const auto& bt : std::vector<std::vector<int>>{{0, 1, 2, 3, 4}, {5, 6, 7, 8, 9}, {10, 11, 12}})
    CHECK(q.train_step(data, bt).loss() == Approx(p.train_step(data, bt).loss()).epsilon(1e-6));
  // Two towers draw the same transforms for the same global positions.
  Trainer one(flipped, 1, 1), two(flipped, 2, 1);
  for (const auto& bt : std::vector<std::vector<int>>{{0, 1, 2, 3, 4}, {5, 6, 7, 8, 9}, {10, 11, 12}})
    CHECK(two.train_step(data, bt).loss() == Approx(one.train_step(data, bt).loss()).epsilon(1e-5));
  CHECK(two.params(0) == two.params(1));
}

TEST_CASE("affine-augmented training changes the batches, not validation, and towers agree", "[augmentation]") {
  const Config plain = augmented("{}"),
               warped = augmented("{rotation_range: 30, width_shift_range: 0.1, height_shift_range: 0.1, "
                                  "shear_range: 10, zoom_range: 0.2, brightness_range: [0.8, 1.2]}");
  REQUIRE(warped.data.augmentation.affine());
  const Dataset data = trainer::testing::tiny_data();
  const Dataset before = data;
  const std::vector<int> batch = {0, 1, 2, 3, 4};
  Trainer a(plain, 1, 1), b(warped, 1, 1);
  CHECK(a.evaluate(data, batch, 5).loss_sum == b.evaluate(data, batch, 5).loss_sum);
  CHECK(a.train_step(data, batch).loss() != Approx(b.train_step(data, batch).loss()).epsilon(1e-4));
  CHECK(std::equal(data.images.data(), data.images.data() + data.images.numel(), before.images.data()));
  CHECK(std::equal(data.masks.data(), data.masks.data() + data.masks.numel(), before.masks.data()));
  Trainer one(warped, 1, 1), three(warped, 3, 1);
  for (const auto& bt : std::vector<std::vector<int>>{{0, 1, 2, 3, 4}, {5, 6, 7, 8, 9}, {10, 11, 12}})
    CHECK(three.train_step(data, bt).loss() == Approx(one.train_step(data, bt).loss()).epsilon(1e-5));
  CHECK(three.params(0) == three.params(2));
}

TEST_CASE("quarter turns of a non-square input are rejected before training", "[augmentation]") {
  const Config c = parse_config("model:\n  layers:\n    - {type: Input, shape: [16, 24, 3]}\n"
                                "    - {type: Conv2D, filters: 1, kernel_size: 1, activation: sigmoid}\n"
                                "data:\n  images: a\n  masks: b\n  augmentation: {rotate_90: true}\n"
                                "training: {epochs: 1}\n",
                                "r.yaml");
  CHECK_THROWS_WITH(Trainer(c, 1, 1), Catch::Contains("r.yaml:8:17: data.augmentation: rotate_90 turns samples by "
                                                      "90 degrees, which needs a square input; the Input shape is "
                                                      "[16, 24, 3]"));
  CHECK_THROWS_WITH(parse_config("model:\n  layers:\n    - {type: Input, shape: [16, 16, 3]}\n"
                                 "data: {images: a, masks: b, augmentation: {horizontal_flips: true}}\n"
                                 "training: {epochs: 1}\n",
                                 "u.yaml"),
                    Catch::Contains("unknown key 'horizontal_flips' (did you mean 'horizontal_flip'?)"));
}
