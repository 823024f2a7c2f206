// Tests of convert_dsb_to_flat (lib/data/dsb_layout.h): the 12 native DSB 2018
// examples against the shared flat layout, the overlap rule, and user errors.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <set>
#include <string>

#include "core/error.h"
#include "data/dsb_layout.h"
#include "dsb_testing.h"
#include "process_testing.h"

namespace {

namespace fs = std::filesystem;
using trainer::convert_dsb_to_flat;
using trainer::testing::TempDir;

const std::string kDsb = TRAINER_SOURCE_DIR "/../shared/data/dsb2018";

std::string bytes_of(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

cv::Mat read(const fs::path& p) {
  cv::Mat m = cv::imread(p.string(), cv::IMREAD_UNCHANGED);
  INFO(p.string());
  REQUIRE(!m.empty());
  return m;
}

bool equal(const cv::Mat& a, const cv::Mat& b) {
  return a.size() == b.size() && a.type() == b.type() && cv::countNonZero(a != b) == 0;
}

// Distinct nonzero values of a 16-bit label map.
std::set<uint16_t> labels_in(const cv::Mat& m) {
  std::set<uint16_t> s;
  for (int y = 0; y < m.rows; ++y)
    for (int x = 0; x < m.cols; ++x)
      if (m.at<uint16_t>(y, x)) s.insert(m.at<uint16_t>(y, x));
  return s;
}

// Writes one id folder <root>/<id> with an image of w x h and the given masks.
void make_id(const fs::path& root, const std::string& id, int w, int h, const std::vector<cv::Mat>& masks) {
  fs::create_directories(root / id / "images");
  fs::create_directories(root / id / "masks");
  REQUIRE(cv::imwrite((root / id / "images" / (id + ".png")).string(), cv::Mat(h, w, CV_8UC3, cv::Scalar(10, 20, 30))));
  for (size_t k = 0; k < masks.size(); ++k)
    REQUIRE(cv::imwrite((root / id / "masks" / ("m" + std::to_string(k) + ".png")).string(), masks[k]));
}

std::string error_of(const fs::path& input, const fs::path& output) {
  try {
    convert_dsb_to_flat(input.string(), output.string(), "_mask");
  } catch (const trainer::UserError& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("dsb_to_flat: the 12 native examples match the flat layout", "[data_tools]") {
  TRAINER_REQUIRE_DSB();
  TempDir out("test_dsb");
  const fs::path native = kDsb + "/native", flat = kDsb + "/flat";
  convert_dsb_to_flat(native.string(), out.root.string(), "_mask");
  int ids = 0;
  for (const auto& e : fs::directory_iterator(native)) {
    const std::string id = e.path().filename().string();
    INFO(id);
    ++ids;
    CHECK(bytes_of(out.root / "train_im" / (id + ".png")) == bytes_of(native / id / "images" / (id + ".png")));

    const cv::Mat mask = read(out.root / "train_mask" / (id + "_mask.png"));
    CHECK(mask.type() == CV_8UC1);
    CHECK(equal(mask, read(flat / "train_mask" / (id + "_mask.png"))));

    const cv::Mat labels = read(out.root / "labels" / (id + "_labels.png"));
    const cv::Mat want = read(flat / "labels" / (id + "_labels.png"));
    REQUIRE(labels.type() == CV_16UC1);
    REQUIRE(want.type() == CV_16UC1);
    const std::set<uint16_t> got_set = labels_in(labels);
    CHECK(got_set.size() == labels_in(want).size());
    const auto n_masks = std::distance(fs::directory_iterator(native / id / "masks"), fs::directory_iterator());
    CHECK(long(*got_set.rbegin()) <= long(n_masks));
    CHECK(equal(labels > 0, want > 0));
    CHECK(equal(labels > 0, mask));
  }
  CHECK(ids == 12);
  CHECK(std::distance(fs::directory_iterator(out.root / "labels"), fs::directory_iterator()) == 12);  // no temp files left
}

TEST_CASE("dsb_to_flat: labels follow sorted mask order, later masks win overlaps", "[data_tools]") {
  TempDir in("test_dsb"), out("test_dsb");
  cv::Mat a = cv::Mat::zeros(4, 6, CV_8UC1), b = cv::Mat::zeros(4, 6, CV_8UC1), c = cv::Mat::zeros(4, 6, CV_8UC1);
  a(cv::Rect(0, 0, 3, 2)) = 255;  // columns 0..2, rows 0..1
  b(cv::Rect(2, 0, 2, 2)) = 255;  // columns 2..3, overlaps a at column 2
  c.at<uchar>(3, 5) = 255;
  make_id(in.root, "x", 6, 4, {a, b, c});
  convert_dsb_to_flat(in.root.string(), out.root.string(), "_m");
  const cv::Mat labels = read(out.root / "labels" / "x_labels.png");
  CHECK(labels.at<uint16_t>(0, 0) == 1);
  CHECK(labels.at<uint16_t>(1, 2) == 2);  // the overlap goes to the later mask m1.png
  CHECK(labels.at<uint16_t>(0, 3) == 2);
  CHECK(labels.at<uint16_t>(3, 5) == 3);
  CHECK(labels.at<uint16_t>(3, 0) == 0);
  const cv::Mat mask = read(out.root / "train_mask" / "x_m.png");
  CHECK(cv::countNonZero(mask) == 6 + 4 - 2 + 1);  // a + b - overlap + c
  CHECK(equal(mask, (a | b | c)));
}

TEST_CASE("dsb_to_flat: user errors name the file and the fix", "[data_tools]") {
  TempDir in("test_dsb"), out("test_dsb");
  SECTION("missing input folder") {
    const std::string msg = error_of(in.root / "nope", out.root);
    CHECK_THAT(msg, Catch::Contains((in.root / "nope").string()) && Catch::Contains("does not exist"));
  }
  SECTION("id folder without images/") {
    make_id(in.root, "good", 4, 4, {cv::Mat(4, 4, CV_8UC1, cv::Scalar(255))});
    fs::create_directories(in.root / "bad" / "masks");
    const std::string msg = error_of(in.root, out.root);
    CHECK_THAT(msg, Catch::Contains((in.root / "bad" / "images" / "bad.png").string()) &&
                        Catch::Contains("add the image or remove the folder"));
    CHECK_FALSE(fs::exists(out.root / "train_im" / "good.png"));  // layout errors stop before any write
  }
  SECTION("mask of the wrong size") {
    make_id(in.root, "x", 4, 4, {cv::Mat(4, 4, CV_8UC1, cv::Scalar(255)), cv::Mat(5, 4, CV_8UC1, cv::Scalar(255))});
    const std::string msg = error_of(in.root, out.root);
    CHECK_THAT(msg, Catch::Contains((in.root / "x" / "masks" / "m1.png").string()) && Catch::Contains("is 4x5") &&
                        Catch::Contains("is 4x4") && Catch::Contains("must have its image's size"));
    CHECK_FALSE(fs::exists(out.root / "labels" / "x_labels.png"));
  }
  SECTION("output inside the layout") {
    // From fuzzing: -o equal to -i wrote train_im/ and the rest into the layout, spoiling it.
    make_id(in.root, "x", 4, 4, {cv::Mat(4, 4, CV_8UC1, cv::Scalar(255))});
    for (const fs::path& o : {in.root, in.root / "flat", in.root / "x" / ".." / "flat"}) {
      CHECK_THAT(error_of(in.root, o), Catch::Contains("lies in the DSB layout") &&
                                           Catch::Contains("pass an --output outside it"));
      CHECK_FALSE(fs::exists(in.root / "train_im"));
      CHECK_FALSE(fs::exists(in.root / "flat"));
    }
    CHECK(error_of(in.root, out.root) == "(no error)");  // beside it is fine
  }
  SECTION("unreadable mask PNG") {
    make_id(in.root, "x", 4, 4, {});
    std::ofstream(in.root / "x" / "masks" / "broken.png") << "not a png";
    const std::string msg = error_of(in.root, out.root);
    CHECK_THAT(msg, Catch::Contains((in.root / "x" / "masks" / "broken.png").string()) &&
                        Catch::Contains("cannot be decoded"));
  }
}
