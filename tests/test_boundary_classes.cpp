// boundary_classes and labels_to_classes' conversion: three-class masks
// (background, interior, boundary) from a small label image built here and
// from real DSB 2018 label images.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <opencv2/imgcodecs.hpp>
#include <stdexcept>

#include "core/error.h"
#include "data/boundary_classes.h"
#include "dsb_testing.h"
#include "process_testing.h"

namespace fs = std::filesystem;
using namespace trainer;
using trainer::testing::TempDir;

namespace {

const std::string kLabels = std::string(TRAINER_SOURCE_DIR) + "/../shared/data/dsb2018/flat/labels";

}  // namespace

TEST_CASE("boundary_classes splits touching objects and marks their edges", "[data_tools]") {
  TRAINER_REQUIRE_DSB();
  // Two 4x4 objects side by side in an 8x6 label image with a background row above and below.
  cv::Mat labels(6, 8, CV_16UC1, cv::Scalar(0));
  labels(cv::Rect(0, 1, 4, 4)).setTo(1);
  labels(cv::Rect(4, 1, 4, 4)).setTo(2);
  const cv::Mat c = boundary_classes(labels, 1);
  REQUIRE(c.type() == CV_8UC1);
  for (int x = 0; x < 8; ++x) CHECK((c.at<uint8_t>(0, x) == kBackground && c.at<uint8_t>(5, x) == kBackground));
  for (int x = 0; x < 8; ++x) CHECK((c.at<uint8_t>(1, x) == kBoundary && c.at<uint8_t>(4, x) == kBoundary));
  CHECK((c.at<uint8_t>(2, 3) == kBoundary && c.at<uint8_t>(2, 4) == kBoundary));  // where the objects touch
  CHECK((c.at<uint8_t>(2, 0) == kInterior && c.at<uint8_t>(3, 7) == kInterior));  // the image edge is no boundary
  CHECK((c.at<uint8_t>(2, 2) == kInterior && c.at<uint8_t>(3, 5) == kInterior));
  CHECK(boundary_classes(labels, 2).at<uint8_t>(2, 2) == kBoundary);  // within 2 pixels of the other object
  CHECK_THROWS_AS(boundary_classes(labels, 0), InternalError);

  // Real DSB label images: every nucleus pixel is interior or boundary, and both occur.
  TempDir dir("boundary_dsb");
  fs::create_directories(dir.root / "labels");
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(kLabels)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  REQUIRE(names.size() > 3);
  for (size_t i = 0; i < 3; ++i) fs::copy_file(fs::path(kLabels) / names[i], dir.root / "labels" / names[i]);
  const auto written = convert_labels_to_classes((dir.root / "labels").string(), (dir.root / "out").string(),
                                                 "_labels", "_mask", 2);
  REQUIRE(written.size() == 3);
  for (size_t i = 0; i < 3; ++i) {
    const cv::Mat l = cv::imread((dir.root / "labels" / names[i]).string(), cv::IMREAD_UNCHANGED);
    const cv::Mat m = cv::imread(written[i], cv::IMREAD_UNCHANGED);
    REQUIRE(fs::path(written[i]).filename().string() == names[i].substr(0, names[i].size() - 11) + "_mask.png");
    REQUIRE(m.type() == CV_8UC1);
    CHECK(cv::countNonZero(m != 0) == cv::countNonZero(l != 0));
    CHECK(cv::countNonZero(m == kInterior) > 0);
    CHECK(cv::countNonZero(m == kBoundary) > 0);
    CHECK(cv::countNonZero(m > kBoundary) == 0);
  }
  CHECK_THROWS_WITH(convert_labels_to_classes((dir.root / "labels").string(), (dir.root / "o2").string(), "_lab",
                                              "_mask", 2),
                    Catch::Contains("does not end in the labels suffix '_lab'"));
  // Masks that exist are not replaced (nothing is written) unless overwrite.
  const std::string out = (dir.root / "out").string();
  cv::imwrite(written[1], cv::Mat(4, 4, CV_8UC1, cv::Scalar(255)));  // stands for a binary mask written there before
  const auto untouched = fs::last_write_time(written[0]);
  CHECK_THROWS_WITH(convert_labels_to_classes((dir.root / "labels").string(), out, "_labels", "_mask", 2),
                    Catch::Contains("'" + out + "' already holds 3 of the 3 masks to write") &&
                        Catch::Contains("nothing was written: pass another --output, or --overwrite"));
  CHECK(fs::last_write_time(written[0]) == untouched);
  CHECK(cv::imread(written[1], cv::IMREAD_UNCHANGED).rows == 4);
  REQUIRE(convert_labels_to_classes((dir.root / "labels").string(), out, "_labels", "_mask", 2, true).size() == 3);
  CHECK(cv::imread(written[1], cv::IMREAD_UNCHANGED).rows > 4);
  // A binary mask (0/255 or 0/1) given as label images: refused before any file is written, since its touching
  // nuclei would be one object; a real label image sorts before it.
  fs::create_directories(dir.root / "binary");
  fs::copy_file(dir.root / "labels" / names[0], dir.root / "binary" / names[0]);
  for (const int value : {255, 1}) {
    INFO("binary value " << value);
    cv::Mat binary(8, 8, CV_8UC1, cv::Scalar(0));
    binary(cv::Rect(1, 1, 3, 2)).setTo(value);
    binary(cv::Rect(5, 5, 2, 2)).setTo(value);  // a second object of the same value
    cv::imwrite((dir.root / "binary" / "zz_labels.png").string(), binary);
    CHECK_THROWS_WITH(convert_labels_to_classes((dir.root / "binary").string(), (dir.root / "o3").string(), "_labels",
                                                "_mask", 2),
                      Catch::Contains("zz_labels.png' holds one value, " + std::to_string(value) +
                                      ", for several separate objects: a binary mask") &&
                          Catch::Contains("nothing was written"));
    CHECK_FALSE(fs::exists(dir.root / "o3"));
  }
  cv::Mat one(8, 8, CV_8UC1, cv::Scalar(0));  // one object of one value: a label image of one nucleus
  one(cv::Rect(1, 1, 3, 2)).setTo(255);
  cv::imwrite((dir.root / "binary" / "zz_labels.png").string(), one);
  CHECK(convert_labels_to_classes((dir.root / "binary").string(), (dir.root / "o3").string(), "_labels", "_mask", 2)
            .size() == 2);
  // A colour image or a damaged file among the label images: named, nothing written.
  const std::string bad = (dir.root / "binary" / "zz_labels.png").string();
  cv::imwrite(bad, cv::Mat(8, 8, CV_8UC3, cv::Scalar(0, 1, 2)));
  CHECK_THROWS_WITH(convert_labels_to_classes((dir.root / "binary").string(), (dir.root / "o4").string(), "_labels",
                                              "_mask", 2),
                    Catch::Contains("label image '" + bad + "' has 3 channels"));
  std::ofstream(bad, std::ios::binary | std::ios::trunc) << "\x89PNG cut short";
  CHECK_THROWS_WITH(convert_labels_to_classes((dir.root / "binary").string(), (dir.root / "o4").string(), "_labels",
                                              "_mask", 2),
                    Catch::Contains("cannot decode '" + bad + "' (corrupt, truncated or not an image)"));
  CHECK_FALSE(fs::exists(dir.root / "o4"));
}
