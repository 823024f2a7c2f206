// boundary_objects: the nuclei of a boundary model's class map, from small
// maps built here and from real DSB 2018 label images encoded with
// boundary_classes and decoded again.
#include <catch2/catch.hpp>

#include <filesystem>
#include <opencv2/imgcodecs.hpp>
#include <stdexcept>

#include "core/error.h"
#include "data/boundary_classes.h"
#include "data/boundary_objects.h"
#include "data/image_files.h"
#include "dsb_testing.h"
#include "train/instance_metrics.h"

using namespace trainer;

TEST_CASE("boundary_objects keeps touching nuclei apart and grows each into its boundary", "[data_tools]") {
  // Two 4x4 nuclei side by side: boundary_classes(1) leaves each a 2-pixel interior column pair.
  cv::Mat labels(6, 8, CV_16UC1, cv::Scalar(0));
  labels(cv::Rect(0, 1, 4, 4)).setTo(1);
  labels(cv::Rect(4, 1, 4, 4)).setTo(2);
  const cv::Mat objects = boundary_objects(boundary_classes(labels, 1));
  REQUIRE(objects.type() == CV_32SC1);
  cv::Mat truth;
  labels.convertTo(truth, CV_32S);
  CHECK(cv::countNonZero(objects != truth) == 0);  // the same two objects, pixel for pixel
  // Their union as one binary object is one component: the boundary is what separates them.
  CHECK(instance_score(truth, connected_objects(labels != 0)).n_pred == 1);
  CHECK(instance_score(truth, objects).score == Approx(1.0));

  // A blob of boundary only (no interior seed) is no object; other values count as background.
  cv::Mat classes(5, 5, CV_8UC1, cv::Scalar(kBackground));
  classes(cv::Rect(1, 1, 2, 2)).setTo(kBoundary);
  classes.at<uint8_t>(4, 4) = 7;
  CHECK(cv::countNonZero(boundary_objects(classes)) == 0);
  CHECK_THROWS_AS(boundary_objects(cv::Mat(2, 2, CV_16UC1, cv::Scalar(0))), InternalError);
}

TEST_CASE("boundary_objects recovers real DSB nuclei from their boundary classes better than their union does",
          "[data_tools]") {
  TRAINER_REQUIRE_DSB();
  const std::string dir = std::string(TRAINER_SOURCE_DIR) + "/../shared/data/dsb2018/flat/labels";
  const std::vector<std::string> files = list_image_files(dir, "labels");
  REQUIRE(files.size() >= 20);
  double decoded = 0, merged = 0;
  for (size_t i = 0; i < 20; ++i) {
    const cv::Mat labels = cv::imread(files[i], cv::IMREAD_UNCHANGED);
    REQUIRE(labels.type() == CV_16UC1);
    decoded += instance_score(labels, boundary_objects(boundary_classes(labels, 1))).score / 20;
    merged += instance_score(labels, connected_objects(labels != 0)).score / 20;
  }
  // Width 1 loses the nuclei too small for an interior pixel and shrinks none: most nuclei come back whole.
  INFO("decoded " << decoded << ", union " << merged);
  CHECK(decoded > 0.9);
  CHECK(decoded > merged);
}
