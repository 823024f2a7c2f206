// data.augmentation's random affine transform and brightness (Keras's
// ImageDataGenerator arguments): the config keys and their errors, the
// matrix against exact pixel moves (a shift, a zoom, a quarter turn), the
// fill modes, masks kept to their values by nearest neighbour, the draws'
// ranges and determinism, and on a real DSB image that the nuclei stay under
// the transformed mask.
#include <catch2/catch.hpp>

#include <array>
#include <cmath>
#include <opencv2/imgcodecs.hpp>
#include <set>

#include "config/config.h"
#include "core/error.h"
#include "data/affine_augmentation.h"
#include "data/augmentation.h"
#include "data/dataset.h"
#include "data/image_decode.h"
#include "dsb_testing.h"
#include "tiny_model.h"
#include "data_testing.h"

using namespace trainer;
using namespace trainer::testing;

namespace {

AugmentationConfig parse_augmentation(const std::string& a) {
  std::string text = testing::tiny_config(true);
  const std::string data = "data: {images: unused, masks: unused";
  REQUIRE(text.find(data) != std::string::npos);
  text.replace(text.find(data), data.size(), data + ", augmentation: " + a);
  return parse_config(text, "tiny.yaml").data.augmentation;
}

std::string error_of(const std::string& a) {
  try {
    parse_augmentation(a);
  } catch (const UserError& e) {
    return e.what();
  }
  return "(no error)";
}

/// [h, w, c] with value 10 * y + x + 100 * channel.
std::vector<float> grid(int h, int w, int c) {
  std::vector<float> g(size_t(h * w * c));
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      for (int k = 0; k < c; ++k) g[size_t((y * w + x) * c + k)] = float(10 * y + x + 100 * k);
  return g;
}

AugmentationConfig with_fill(FillMode fill_mode, double cval = 0) {
  AugmentationConfig a;
  a.rotation_range = 1;  // affine(): the warp runs
  a.fill_mode = fill_mode;
  a.cval = cval;
  return a;
}

/// A draw with the given angles (degrees), shifts (pixels) and zooms.
AffineDraw draw_of(double theta, double shift_x, double shift_y, double shear, double zoom_x, double zoom_y) {
  AffineDraw d;
  d.theta = theta;
  d.shift_x = shift_x;
  d.shift_y = shift_y;
  d.shear = shear;
  d.zoom_x = zoom_x;
  d.zoom_y = zoom_y;
  return d;
}

}  // namespace

TEST_CASE("augmentation takes ImageDataGenerator's affine keys, and bad values name the fix", "[augmentation][config]") {
  const AugmentationConfig a = parse_augmentation(
      "{rotation_range: 30, width_shift_range: 0.1, height_shift_range: 5, shear_range: 10, zoom_range: 0.2, "
      "fill_mode: reflect, cval: 3, brightness_range: [0.5, 1.5]}");
  CHECK(a.rotation_range == 30);
  CHECK(a.width_shift_range == 0.1);
  CHECK(a.height_shift_range == 5);
  CHECK(a.shear_range == 10);
  CHECK(a.zoom_low == Approx(0.8));
  CHECK(a.zoom_high == Approx(1.2));
  CHECK(a.fill_mode == FillMode::Reflect);
  CHECK(a.cval == 3);
  CHECK(a.brightness_low == 0.5);
  CHECK(a.brightness_high == 1.5);
  CHECK(a.affine());
  CHECK(a.brightness());
  const AugmentationConfig z = parse_augmentation("{zoom_range: [0.9, 1.1]}");
  CHECK(z.zoom_low == 0.9);
  CHECK(z.zoom_high == 1.1);
  CHECK_FALSE(parse_augmentation("{zoom_range: 0, rotation_range: 0}").any());
  CHECK(parse_augmentation("{}").fill_mode == FillMode::Nearest);  // Keras's default

  CHECK_THAT(error_of("{zoom_range: 1.5}"), Catch::Contains("tiny.yaml:") && Catch::Contains("'zoom_range'") &&
                                                Catch::Contains("[0, 1)"));
  CHECK_THAT(error_of("{zoom_range: [1.2, 0.8]}"), Catch::Contains("0 < low <= high"));
  CHECK_THAT(error_of("{zoom_range: (0.8, 1.2)}"), Catch::Contains("a Python tuple is a YAML list"));
  CHECK_THAT(error_of("{brightness_range: 0.2}"), Catch::Contains("a list [low, high]"));
  CHECK_THAT(error_of("{fill_mode: mirror}"), Catch::Contains("constant, nearest, reflect, wrap"));
  CHECK_THAT(error_of("{rotation_range: -5}"), Catch::Contains("'rotation_range'"));
  CHECK_THAT(error_of("{shear_range: 90}"), Catch::Contains("'shear_range'"));
  CHECK_THAT(error_of("{channel_shift_range: 10}"),
             Catch::Contains("'channel_shift_range' is an ImageDataGenerator argument that is not supported"));
  CHECK_THAT(error_of("{rescale: 0.0039}"), Catch::Contains("Rescaling layer"));
  CHECK_THAT(error_of("{zoom_rang: 0.2}"), Catch::Contains("did you mean 'zoom_range'"));
  CHECK_THAT(error_of("{brightnes_range: [0.8, 1.2]}"), Catch::Contains("did you mean 'brightness_range'"));
  CHECK_THAT(error_of("{width_shift_range: [-10, 10]}"), Catch::Contains("list of pixel choices is not supported"));
  CHECK_THAT(error_of("{cval: 300}"), Catch::Contains("'cval'"));
}

TEST_CASE("the affine matrix moves pixels as a shift, a zoom about the centre and a quarter turn", "[augmentation]") {
  const int h = 7, w = 9;
  // No draw: the identity.
  const std::array<double, 6> id = affine_matrix(AffineDraw{}, h, w);
  CHECK(id == std::array<double, 6>{1, 0, 0, 0, 1, 0});

  const AugmentationConfig constant = with_fill(FillMode::Constant, -1);
  std::vector<float> img = grid(h, w, 2), mask = grid(h, w, 1);
  AffineDraw shift;
  shift.shift_x = 2;
  apply_affine(constant, shift, img.data(), mask.data(), h, w, 2);
  const std::vector<float> src = grid(h, w, 2);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      for (int k = 0; k < 2; ++k) {
        INFO("y " << y << " x " << x << " channel " << k);
        const float want = x + 2 < w ? src[size_t((y * w + x + 2) * 2 + k)] : -1.f;  // cval beyond the edge
        CHECK(img[size_t((y * w + x) * 2 + k)] == Approx(want).margin(1e-4));
        if (k == 0) CHECK(mask[size_t(y * w + x)] == (x + 2 < w ? float(10 * y + x + 2) : 0.f));  // masks fill 0
      }

  // Zoom 2 across: the output's column x samples column 4 + 2 (x - 4) (the centre column 4 stays).
  std::vector<float> z = grid(h, w, 1);
  AffineDraw zoom;
  zoom.zoom_x = 2;
  apply_affine(with_fill(FillMode::Nearest), zoom, z.data(), nullptr, h, w, 1);
  for (int x = 2; x <= 6; ++x) CHECK(z[size_t(3 * w + x)] == Approx(30 + 4 + 2 * (x - 4)).margin(1e-4));
  CHECK(z[size_t(3 * w + 0)] == Approx(30).margin(1e-4));  // beyond the left edge: nearest is the edge pixel

  // A turn by 90 degrees of a square sample is one of the exact quarter turns.
  const int n = 8;
  std::vector<float> turned = grid(n, n, 3);
  AffineDraw quarter;
  quarter.theta = 90;
  apply_affine(with_fill(FillMode::Constant), quarter, turned.data(), nullptr, n, n, 3);
  const std::vector<float> square = grid(n, n, 3);
  int matches = 0;
  for (Symmetry s = 0; s < 8; ++s) {
    std::vector<float> exact(square.size());
    apply_symmetry(s, square.data(), exact.data(), n, n, 3);
    double worst = 0;
    for (size_t i = 0; i < exact.size(); ++i) worst = std::max(worst, double(std::abs(exact[i] - turned[i])));
    matches += worst < 1e-3;
  }
  CHECK(matches == 1);
}

TEST_CASE("the affine matrix is rotation @ shift @ shear @ zoom about the centre, on a non-square sample",
          "[augmentation]") {
  // The 3x3 product offset(c) R(theta) T(t) Sh(s) Z(zx, zy) offset(-c), in (x, y), written out independently.
  using M3 = std::array<std::array<double, 3>, 3>;
  const auto mul = [](const M3& a, const M3& b) {
    M3 r{};
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 3; ++j)
        for (int k = 0; k < 3; ++k) r[i][j] += a[i][k] * b[k][j];
    return r;
  };
  const int h = 10, w = 17;
  const AffineDraw d = draw_of(23, 3.5, -2.25, 12, 1.15, 0.9);
  const double t = d.theta * M_PI / 180, s = d.shear * M_PI / 180, cx = (w - 1) / 2.0, cy = (h - 1) / 2.0;
  const M3 offset{{{1, 0, cx}, {0, 1, cy}, {0, 0, 1}}}, reset{{{1, 0, -cx}, {0, 1, -cy}, {0, 0, 1}}};
  const M3 rotation{{{std::cos(t), -std::sin(t), 0}, {std::sin(t), std::cos(t), 0}, {0, 0, 1}}};
  const M3 shift{{{1, 0, d.shift_x}, {0, 1, d.shift_y}, {0, 0, 1}}};
  const M3 shear{{{1, -std::sin(s), 0}, {0, std::cos(s), 0}, {0, 0, 1}}};
  const M3 zoom{{{d.zoom_x, 0, 0}, {0, d.zoom_y, 0}, {0, 0, 1}}};
  const M3 want = mul(mul(mul(mul(mul(offset, rotation), shift), shear), zoom), reset);
  const std::array<double, 6> got = affine_matrix(d, h, w);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j) CHECK(got[size_t(3 * i + j)] == Approx(want[size_t(i)][size_t(j)]).margin(1e-12));
  // A vertical shift moves rows (height_shift_range is vertical, as its name says).
  AffineDraw down;
  down.shift_y = 2;
  std::vector<float> g = grid(h, w, 1);
  apply_affine(with_fill(FillMode::Nearest), down, g.data(), nullptr, h, w, 1);
  CHECK(g[size_t(4 * w + 5)] == Approx(10 * 6 + 5).margin(1e-4));  // row 4 samples row 6
}

TEST_CASE("fill modes reach beyond the edge: constant, nearest, reflect, wrap", "[augmentation]") {
  const int h = 1, w = 6;
  AffineDraw d;
  d.shift_x = -2;  // output column x samples column x - 2: columns 0 and 1 fall outside
  const auto first_two = [&](const AugmentationConfig& a) {
    std::vector<float> row = {10, 11, 12, 13, 14, 15};
    apply_affine(a, d, row.data(), nullptr, h, w, 1);
    return std::vector<float>{row[0], row[1], row[2]};
  };
  const auto near = [](std::vector<float> got, std::vector<float> want) {
    for (size_t i = 0; i < got.size(); ++i)
      if (std::abs(got[i] - want[i]) > 1e-4) return false;
    return true;
  };
  CHECK(near(first_two(with_fill(FillMode::Constant, 5)), {5, 5, 10}));
  CHECK(near(first_two(with_fill(FillMode::Nearest)), {10, 10, 10}));
  CHECK(near(first_two(with_fill(FillMode::Reflect)), {11, 10, 10}));  // ... b a | a b c ...
  CHECK(near(first_two(with_fill(FillMode::Wrap)), {14, 15, 10}));
}

TEST_CASE("masks keep their values under random transforms, and brightness changes the image only", "[augmentation]") {
  AugmentationConfig a = parse_augmentation("{rotation_range: 40, width_shift_range: 0.2, height_shift_range: 0.2, "
                                            "shear_range: 20, zoom_range: 0.3, brightness_range: [0.5, 2.0]}");
  const int h = 16, w = 16;
  const Dataset data = testing::tiny_ignored_class_data();
  std::set<float> values;
  for (size_t i = 0; i < data.masks.numel(); ++i) values.insert(data.masks.data()[i]);
  REQUIRE(values == std::set<float>{kIgnoredPixel, 0, 1, 2});
  int changed = 0;
  for (int s = 0; s < data.size(); ++s) {
    std::vector<float> img(data.images.sample(s), data.images.sample(s) + h * w * 3);
    std::vector<float> mask(data.masks.sample(s), data.masks.sample(s) + h * w);
    const AffineDraw d = draw_affine(a, 7, 3, uint64_t(s), h, w);
    apply_affine(a, d, img.data(), mask.data(), h, w, 3);
    for (float v : mask) REQUIRE(values.count(v) == 1);
    for (float v : img) REQUIRE((v >= 0.f && v <= 255.f));
    changed += !std::equal(mask.begin(), mask.end(), data.masks.sample(s));
  }
  CHECK(changed >= data.size() - 1);
  // Brightness alone scales the image and leaves the mask.
  AugmentationConfig b;
  b.brightness_low = b.brightness_high = 0.5;
  std::vector<float> img = {10, 100, 255}, mask = {1, 0, 1};
  AffineDraw d = draw_affine(b, 1, 1, 1, 1, 1);
  CHECK(d.brightness == 0.5);
  apply_affine(b, d, img.data(), mask.data(), 1, 1, 3);
  CHECK(img == std::vector<float>{5, 50, 127.5});
  CHECK(mask == std::vector<float>{1, 0, 1});
  d.brightness = 3;
  apply_affine(b, d, img.data(), nullptr, 1, 1, 3);
  CHECK(img == std::vector<float>{15, 150, 255});  // 382.5 clipped to 255
}

TEST_CASE("affine draws stay in their ranges and are fixed by seed, step and position", "[augmentation]") {
  const AugmentationConfig a = parse_augmentation(
      "{rotation_range: 30, width_shift_range: 0.25, height_shift_range: 3, shear_range: 10, zoom_range: [0.8, 1.1], "
      "brightness_range: [0.9, 1.2]}");
  double theta_sum = 0, theta_max = 0, sx_max = 0, sy_max = 0;
  const int draws = 2000;
  for (int i = 0; i < draws; ++i) {
    const AffineDraw d = draw_affine(a, 11, uint64_t(i / 8), uint64_t(i % 8), 20, 40);
    REQUIRE(std::abs(d.theta) <= 30);
    REQUIRE(std::abs(d.shift_x) <= 10);  // 0.25 of the width 40
    REQUIRE(std::abs(d.shift_y) <= 3);   // pixels
    REQUIRE(std::abs(d.shear) <= 10);
    REQUIRE((d.zoom_x >= 0.8 && d.zoom_x <= 1.1 && d.zoom_y >= 0.8 && d.zoom_y <= 1.1));
    REQUIRE((d.brightness >= 0.9 && d.brightness <= 1.2));
    theta_sum += d.theta;
    theta_max = std::max(theta_max, std::abs(d.theta));
    sx_max = std::max(sx_max, std::abs(d.shift_x));
    sy_max = std::max(sy_max, std::abs(d.shift_y));
  }
  CHECK(std::abs(theta_sum / draws) < 1.5);  // U(-30, 30): mean 0, standard error 0.39
  CHECK(theta_max > 29);
  CHECK(sx_max > 9.5);
  CHECK(sy_max > 2.9);
  const AffineDraw x = draw_affine(a, 11, 5, 2, 20, 40), y = draw_affine(a, 11, 5, 2, 20, 40);
  CHECK(x.theta == y.theta);
  CHECK(x.zoom_y == y.zoom_y);
  CHECK(draw_affine(a, 11, 5, 3, 20, 40).theta != x.theta);
  CHECK(draw_affine(a, 11, 6, 2, 20, 40).theta != x.theta);
  CHECK(draw_affine(a, 12, 5, 2, 20, 40).theta != x.theta);
}

TEST_CASE("on a real DSB image the nuclei stay under the transformed mask", "[augmentation]") {
  TRAINER_REQUIRE_DSB();
  const std::string flat = std::string(TRAINER_SOURCE_DIR) + "/../shared/data/dsb2018/flat/";
  const std::string id = "00071198d059ba7f5914a526d124d28e6d010c92466da21d4a04cd5413362552";
  const int n = 128;
  std::vector<float> img(size_t(n * n)), mask(size_t(n * n));
  decode_image(flat + "train_im/" + id + ".png", n, n, 1, img.data());
  decode_mask(flat + "train_mask/" + id + "_mask.png", n, n, mask.data());
  // Mean intensity of the nuclei over that of the background: far above 1 when image and mask agree.
  const auto contrast = [&](const std::vector<float>& im, const std::vector<float>& m) {
    double fg = 0, bg = 0, nf = 0, nb = 0;
    for (size_t i = 0; i < im.size(); ++i) (m[i] > 0.5f ? fg : bg) += im[i], (m[i] > 0.5f ? nf : nb) += 1;
    return (fg / nf) / (bg / nb);
  };
  const double before = contrast(img, mask);
  REQUIRE(before > 3);
  const AugmentationConfig a = parse_augmentation(
      "{rotation_range: 45, width_shift_range: 0.2, height_shift_range: 0.2, shear_range: 15, zoom_range: 0.3, "
      "fill_mode: reflect}");
  for (uint64_t s = 0; s < 6; ++s) {
    std::vector<float> im = img, m = mask;
    const AffineDraw d = draw_affine(a, 1, s, 0, n, n);
    apply_affine(a, d, im.data(), m.data(), n, n, 1);
    INFO("draw " << s << ": theta " << d.theta << ", shift " << d.shift_x << ", " << d.shift_y);
    CHECK(!std::equal(m.begin(), m.end(), mask.begin()));
    CHECK(contrast(im, m) > 0.8 * before);
  }
  // A transform that moves the nuclei far: the untransformed mask no longer covers them.
  const AffineDraw far = draw_of(30, 12, -9, 10, 1.2, 0.85);
  std::vector<float> im = img, m = mask;
  apply_affine(a, far, im.data(), m.data(), n, n, 1);
  CHECK(contrast(im, m) > 0.8 * before);
  CHECK(contrast(im, mask) < 0.6 * contrast(im, m));
}
