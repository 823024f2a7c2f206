// Decoding a chosen part of the pairs (what a process of a multi-process run
// does): check_pairs and usable_pairs give load_dataset's verdicts,
// decode_pairs and SampleStream give its samples, on data/sample.
#include <catch2/catch.hpp>

#include <cstring>

#include <filesystem>
#include <fstream>
#include <numeric>

#include "core/error.h"
#include "data/dataset.h"
#include "data/sample_stream.h"
#include "process_testing.h"

using namespace trainer;
using namespace trainer::testing;
namespace fs = std::filesystem;

namespace {

DataOptions sample_options(const fs::path& root) {
  DataOptions o;
  o.images_dir = (root / "images").string();
  o.masks_dir = (root / "masks").string();
  o.height = 40, o.width = 48, o.channels = 3;
  o.threads = 3;
  return o;
}

const fs::path kSample = fs::path(TRAINER_SOURCE_DIR) / "data" / "sample";

/// Whether sample k of a is sample i of b, bit for bit (image, mask and name).
bool same_sample(const Dataset& a, int k, const Dataset& b, int i) {
  return a.names[size_t(k)] == b.names[size_t(i)] && a.images.dtype() == b.images.dtype() &&
         a.masks.dtype() == b.masks.dtype() &&
         std::memcmp(a.images.raw_sample(k), b.images.raw_sample(i), a.images.sample_bytes()) == 0 &&
         std::memcmp(a.masks.raw_sample(k), b.masks.raw_sample(i), a.masks.sample_bytes()) == 0;
}

std::vector<int> all_of(int n) {
  std::vector<int> v(size_t(n), 0);
  std::iota(v.begin(), v.end(), 0);
  return v;
}

}  // namespace

TEST_CASE("decode_pairs and SampleStream give load_dataset's samples, in the order asked", "[data]") {
  const DataOptions o = sample_options(kSample);
  const Dataset whole = load_dataset(o);
  const std::vector<ImagePair> pairs = find_image_pairs(o);
  REQUIRE(int(pairs.size()) == whole.size());
  Dataset some;
  decode_pairs(pairs, {7, 0, 31}, o, some);
  REQUIRE(some.size() == 3);
  CHECK(same_sample(some, 0, whole, 7));
  CHECK(same_sample(some, 1, whole, 0));
  CHECK(same_sample(some, 2, whole, 31));

  SampleStream stream(pairs, o);
  CHECK(stream.size() == whole.size());
  CHECK(stream.names() == whole.names);
  stream.prefetch({5, 6});
  const Dataset prefetched = stream.take({5, 6});
  CHECK((same_sample(prefetched, 0, whole, 5) && same_sample(prefetched, 1, whole, 6)));
  stream.prefetch({1});
  const Dataset other = stream.take({2, 3});  // not what was prefetched: decoded now
  REQUIRE(other.size() == 2);
  CHECK((same_sample(other, 0, whole, 2) && same_sample(other, 1, whole, 3)));
  CHECK(stream.take({}).size() == 0);
}

TEST_CASE("check_pairs over shares of the pairs finds what load_dataset finds", "[data]") {
  TempDir tmp("stream_check");
  fs::copy(kSample, tmp.root, fs::copy_options::recursive);
  DataOptions o = sample_options(tmp.root);
  const std::vector<ImagePair> pairs = find_image_pairs(o);
  const int n = int(pairs.size());
  std::ofstream(pairs[3].image, std::ios::binary | std::ios::trunc) << "not a png";

  // Two shares, as two processes check them, merged: the bad pair is the only error.
  std::vector<int> even, odd;
  for (int i = 0; i < n; ++i) (i % 2 ? odd : even).push_back(i);
  const PairCheck a = check_pairs(pairs, even, o), b = check_pairs(pairs, odd, o);
  CHECK(a.errors.empty());
  REQUIRE(b.errors.size() == 1);
  CHECK(b.errors.begin()->first == 3);
  CHECK_THAT(b.errors.begin()->second, Catch::Contains(pairs[3].image));
  PairCheck all = a;
  all.errors = b.errors;

  // load_dataset's verdicts: an error naming the file, or (skip_bad_files) every other pair in order.
  std::string why;
  try {
    usable_pairs(all, n, o);
  } catch (const UserError& e) {
    why = e.what();
  }
  CHECK_THAT(why, Catch::Contains("1 of 40 image/mask pairs cannot be used") && Catch::Contains(pairs[3].image) &&
                      Catch::Contains("data.skip_bad_files: true"));
  o.skip_bad_files = true;
  std::vector<int> expected = all_of(n);
  expected.erase(expected.begin() + 3);
  CHECK(usable_pairs(all, n, o) == expected);
  CHECK(load_dataset(o).size() == n - 1);

  // A file that breaks after the check: taking it is a UserError naming it.
  o.skip_bad_files = false;
  SampleStream stream(pairs, o);
  CHECK_THROWS_WITH(stream.take({2, 3}), Catch::Contains("cannot decode '" + pairs[3].image) &&
                                             Catch::Contains("the file has changed since"));
}

TEST_CASE("check_pairs counts each class's pixels over the checked masks, as class_pixel_counts does", "[data]") {
  DataOptions o = sample_options(kSample);
  o.classes = 3;  // the sample's 0/255 masks: 255 is no class of three, so ignore it to read them
  o.ignore_class = 255;
  const Dataset whole = load_dataset(o);
  const std::vector<ImagePair> pairs = find_image_pairs(o);
  const PairCheck found = check_pairs(pairs, all_of(int(pairs.size())), o);
  CHECK(found.errors.empty());
  CHECK(found.class_pixels == class_pixel_counts(whole.masks, 3));
  CHECK(found.class_pixels[0] > 0);
}
