// Tests of Input, Rescaling, Cropping2D, ZeroPadding2D, UpSampling2D, Concatenate, Add, Activation,
// BatchNormalization (plain and synchronized) and Dropout: hand-computed
// forward values, finite-difference gradient checks, shape errors, Keras
// moving-statistics semantics, dropout mask determinism across tower splits,
// and synchronized BN on 2 and 3 towers (one empty) against one tower.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>

#include "core/error.h"
#include "dist/communicator.h"
#include "layer_testing.h"
#include "nn/activation.h"

using namespace trainer;
using namespace trainer::testing;

namespace {

Tensor run_forward(Layer& l, const Context& ctx, const std::vector<const Tensor*>& x) {
  Tensor y;
  l.forward(ctx, x, y);
  return y;
}

/// Samples [begin, begin + n) of t.
Tensor slice(const Tensor& t, int begin, int n) {
  Tensor out(t.shape().with_batch(n));
  if (n) std::memcpy(out.data(), t.sample(begin), out.numel() * sizeof(float));
  return out;
}

Context training() {
  Context c;
  c.training = true;
  return c;
}

/// Moves every element at least margin away from 0 (relu's kink) keeping its sign.
Tensor away_from_zero(Tensor t, float margin) {
  for (size_t i = 0; i < t.numel(); ++i) t.data()[i] += t.data()[i] >= 0 ? margin : -margin;
  return t;
}

/// In-process communicator for the test: every collective meets at a barrier,
/// each rank sums all ranks' buffers in rank order, meets again, writes back.
class ThreadComm : public Communicator {
 public:
  explicit ThreadComm(int n) : n_(n), ptrs_(size_t(n)) {}
  int size() const override { return n_; }
  void all_reduce_sum(int rank, float* d, size_t n) override { reduce(rank, d, n); }
  void all_reduce_sum(int rank, double* d, size_t n) override { reduce(rank, d, n); }
  void broadcast(int rank, float* d, size_t n, int root) override {
    ptrs_[size_t(rank)] = d;
    barrier();
    std::vector<float> v(static_cast<float*>(ptrs_[size_t(root)]), static_cast<float*>(ptrs_[size_t(root)]) + n);
    barrier();
    std::copy(v.begin(), v.end(), d);
  }

 private:
  template <class T>
  void reduce(int rank, T* d, size_t n) {
    ptrs_[size_t(rank)] = d;
    barrier();
    std::vector<T> sum(n, T(0));
    for (int r = 0; r < n_; ++r)
      for (size_t i = 0; i < n; ++i) sum[i] += static_cast<T*>(ptrs_[size_t(r)])[i];
    barrier();
    std::copy(sum.begin(), sum.end(), d);
  }
  void barrier() {
    std::unique_lock<std::mutex> lk(m_);
    const size_t gen = gen_;
    if (++waiting_ == n_) {
      waiting_ = 0;
      ++gen_;
      cv_.notify_all();
    } else {
      cv_.wait(lk, [&] { return gen != gen_; });
    }
  }
  int n_;
  std::vector<void*> ptrs_;
  std::mutex m_;
  std::condition_variable cv_;
  int waiting_ = 0;
  size_t gen_ = 0;
};

/// |a - b| <= tol * max(1, |a|, |b|) element-wise.
void require_close(const float* a, const float* b, size_t n, double tol) {
  for (size_t i = 0; i < n; ++i) {
    double scale = std::max({1.0, std::abs(double(a[i])), std::abs(double(b[i]))});
    INFO("element " << i << ": " << a[i] << " vs " << b[i]);
    REQUIRE(std::abs(double(a[i]) - b[i]) <= tol * scale);
  }
}

}  // namespace

TEST_CASE("Input returns its configured shape and takes no inputs", "[layers]") {
  auto l = layer_from_yaml("{type: Input, shape: [32, 48, 3]}");
  Shape s = l->infer({});
  CHECK(s.hwc() == "[32, 48, 3]");
  CHECK_THROWS_AS(l->infer({Shape{0, 1, 1, 1}}), UserError);
  CHECK_THROWS_AS(layer_from_yaml("{type: Input, shape: [32, 0, 3]}"), UserError);
  CHECK_THROWS_AS(layer_from_yaml("{type: Input, shape: [32, 32]}"), UserError);
}

TEST_CASE("Rescaling computes x * scale + offset and its gradient", "[layers]") {
  auto l = layer_from_yaml("{type: Rescaling, scale: 0.5, offset: -1}");
  auto w = bind_random(*l, {Shape{0, 1, 2, 2}}, 1);
  Tensor x = make_tensor({1, 1, 2, 2}, {0, 2, 4, -6});
  Tensor y = run_forward(*l, {}, {&x});
  CHECK(std::vector<float>(y.data(), y.data() + 4) == std::vector<float>{-1, 0, 1, -4});
  auto r = gradcheck(*l, w, {random_tensor({2, 3, 4, 5}, 2)}, {});
  CHECK(r.max_rel_error_inputs < 1e-3);
  CHECK_THROWS_AS(layer_from_yaml("{type: Rescaling}"), UserError);
}

TEST_CASE("Cropping2D takes Keras's three forms, crops the window and puts gradients back in it", "[layers]") {
  // x[n, i, j, c] = 1000 n + 100 i + 10 j + c on [2, 5, 6, 2]
  std::vector<float> v;
  for (int n = 0; n < 2; ++n)
    for (int i = 0; i < 5; ++i)
      for (int j = 0; j < 6; ++j)
        for (int c = 0; c < 2; ++c) v.push_back(float(1000 * n + 100 * i + 10 * j + c));
  const Tensor x = make_tensor({2, 5, 6, 2}, v);
  struct Form {
    const char* yaml;
    int top, bottom, left, right;
  };
  for (const Form& f : {Form{"{type: Cropping2D, cropping: [[1, 2], [0, 3]]}", 1, 2, 0, 3},
                        Form{"{type: Cropping2D, cropping: [2, 1]}", 2, 2, 1, 1},
                        Form{"{type: Cropping2D, cropping: 1}", 1, 1, 1, 1},
                        Form{"{type: Cropping2D}", 0, 0, 0, 0}}) {
    INFO(f.yaml);
    auto l = layer_from_yaml(f.yaml);
    const int ho = 5 - f.top - f.bottom, wo = 6 - f.left - f.right;
    CHECK(l->infer({Shape{0, 5, 6, 2}}).hwc() == Shape{0, ho, wo, 2}.hwc());
    Tensor y = run_forward(*l, {}, {&x});
    REQUIRE(y.shape().nhwc() == Shape{2, ho, wo, 2}.nhwc());
    bool all = true;
    for (int n = 0; n < 2; ++n)
      for (int i = 0; i < ho; ++i)
        for (int j = 0; j < wo; ++j)
          for (int c = 0; c < 2; ++c)
            all = all && y.data()[((size_t(n) * ho + i) * wo + j) * 2 + c] ==
                             float(1000 * n + 100 * (i + f.top) + 10 * (j + f.left) + c);
    CHECK(all);
    auto w = bind_random(*l, {Shape{0, 5, 6, 2}}, 1);
    auto r = gradcheck(*l, w, {random_tensor({2, 5, 6, 2}, 12)}, {}, 1e-2f);
    CHECK(r.max_rel_error_inputs < 1e-3);
    // backward overwrites all of dx: the window with dy, the border with 0
    Tensor dy(y.shape());
    for (size_t i = 0; i < dy.numel(); ++i) dy.data()[i] = 1.f;
    Tensor dx(x.shape());
    for (size_t i = 0; i < dx.numel(); ++i) dx.data()[i] = 7.f;
    l->backward({}, {&x}, y, dy, {&dx});
    double sum = 0;
    for (size_t i = 0; i < dx.numel(); ++i) sum += dx.data()[i];
    CHECK(sum == double(dy.numel()));
  }
  auto message = [](const std::string& yaml) -> std::string {
    try {
      auto l = layer_from_yaml(yaml);
      l->infer({Shape{0, 5, 6, 2}});
    } catch (const UserError& e) {
      return e.what();
    }
    return "accepted";
  };
  CHECK_THAT(message("{type: Cropping2D, cropping: [[3, 2], [0, 0]]}"),
             Catch::Contains("removes 5 rows") && Catch::Contains("[5, 6, 2]") && Catch::Contains("lower"));
  CHECK_THAT(message("{type: Cropping2D, cropping: -1}"), Catch::Contains("integer >= 0"));
  CHECK_THAT(message("{type: Cropping2D, cropping: [1, 2, 3]}"), Catch::Contains("[[top, bottom], [left, right]]"));
  CHECK_THAT(message("{type: Cropping2D, cropping: [[1, 2], 3]}"), Catch::Contains("[height, width]"));
  CHECK_THAT(message("{type: Cropping2D, cropping: ((1, 1), (2, 2))}"),
             Catch::Contains("write it as a list, e.g. [[1, 1], [2, 2]]") && Catch::Contains("inside { }"));
  CHECK_THAT(message("{type: Cropping2D, data_format: channels_first}"), Catch::Contains("channels_last"));
}

TEST_CASE("ZeroPadding2D pads with zeros (Keras's default 1 on each side), the inverse of Cropping2D", "[layers]") {
  const Tensor x = random_tensor({2, 3, 4, 2}, 13);
  auto pad = layer_from_yaml("{type: ZeroPadding2D, padding: [[1, 2], [0, 3]]}");
  CHECK(pad->infer({Shape{0, 3, 4, 2}}).hwc() == Shape{0, 6, 7, 2}.hwc());
  Tensor y = run_forward(*pad, {}, {&x});
  REQUIRE(y.shape().nhwc() == Shape{2, 6, 7, 2}.nhwc());
  double border = 0;
  int inside = 0;
  for (int n = 0; n < 2; ++n)
    for (int i = 0; i < 6; ++i)
      for (int j = 0; j < 7; ++j)
        for (int c = 0; c < 2; ++c) {
          const float v = y.data()[((size_t(n) * 6 + i) * 7 + j) * 2 + c];
          if (i >= 1 && i < 4 && j < 4)
            inside += v == x.data()[((size_t(n) * 3 + i - 1) * 4 + j) * 2 + c];
          else
            border += std::abs(v);
        }
  CHECK(inside == 2 * 3 * 4 * 2);
  CHECK(border == 0.0);
  // Cropping the same border gives x back.
  auto crop = layer_from_yaml("{type: Cropping2D, cropping: [[1, 2], [0, 3]]}");
  Tensor back = run_forward(*crop, {}, {&y});
  CHECK(std::vector<float>(back.data(), back.data() + back.numel()) ==
        std::vector<float>(x.data(), x.data() + x.numel()));
  for (const char* yaml : {"{type: ZeroPadding2D, padding: [[1, 2], [0, 3]]}", "{type: ZeroPadding2D}",
                           "{type: ZeroPadding2D, padding: [2, 0]}"}) {
    INFO(yaml);
    auto l = layer_from_yaml(yaml);
    auto w = bind_random(*l, {Shape{0, 3, 4, 2}}, 1);
    auto r = gradcheck(*l, w, {random_tensor({2, 3, 4, 2}, 14)}, {}, 1e-2f);
    CHECK(r.max_rel_error_inputs < 1e-3);
  }
  CHECK(layer_from_yaml("{type: ZeroPadding2D}")->infer({Shape{0, 3, 4, 2}}).hwc() == Shape{0, 5, 6, 2}.hwc());
  CHECK_THROWS_WITH(layer_from_yaml("{type: ZeroPadding2D, padding: [1, 2, 3]}"),
                    Catch::Contains("padding") && Catch::Contains("[[top, bottom], [left, right]]"));
}

TEST_CASE("UpSampling2D repeats pixels and sums gradients over blocks", "[layers]") {
  auto l = layer_from_yaml("{type: UpSampling2D, size: [2, 3]}");
  auto w = bind_random(*l, {Shape{0, 2, 2, 1}}, 1);
  Tensor x = make_tensor({1, 2, 2, 1}, {1, 2, 3, 4});
  Tensor y = run_forward(*l, {}, {&x});
  REQUIRE(y.shape() == Shape{1, 4, 6, 1});
  std::vector<float> want = {1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4, 3, 3, 3, 4, 4, 4};
  CHECK(std::vector<float>(y.data(), y.data() + y.numel()) == want);

  Tensor dy(y.shape());
  for (size_t i = 0; i < dy.numel(); ++i) dy.data()[i] = float(i);
  Tensor dx;
  l->backward({}, {&x}, y, dy, {&dx});
  // Block of pixel (0, 0): rows 0-1, cols 0-2 -> 0+1+2+6+7+8.
  CHECK(std::vector<float>(dx.data(), dx.data() + 4) == std::vector<float>{24, 42, 96, 114});

  auto l2 = layer_from_yaml("{type: UpSampling2D}");
  auto w2 = bind_random(*l2, {Shape{0, 3, 2, 4}}, 1);
  CHECK(gradcheck(*l2, w2, {random_tensor({2, 3, 2, 4}, 3)}, {}).max_rel_error_inputs < 1e-3);

  CHECK_THROWS_WITH(layer_from_yaml("{type: UpSampling2D, interpolation: bicubic}"),
                    Catch::Contains("'bicubic' is not supported") && Catch::Contains("'bilinear'"));
  CHECK_THROWS_WITH(layer_from_yaml("{type: UpSampling2D, interpolation: linear}"), Catch::Contains("unknown value"));
}

TEST_CASE("Concatenate joins channels in input order", "[layers]") {
  auto l = layer_from_yaml("{type: Concatenate, axis: -1}");
  std::vector<Shape> in = {{0, 3, 2, 2}, {0, 3, 2, 1}, {0, 3, 2, 3}};
  auto w = bind_random(*l, in, 1);
  Tensor a = make_tensor({1, 1, 1, 2}, {1, 2}), b = make_tensor({1, 1, 1, 1}, {3}),
         c = make_tensor({1, 1, 1, 3}, {4, 5, 6});
  Tensor y = run_forward(*l, {}, {&a, &b, &c});
  CHECK(std::vector<float>(y.data(), y.data() + 6) == std::vector<float>{1, 2, 3, 4, 5, 6});
  CHECK(l->infer(in).c == 6);
  auto r = gradcheck(*l, w, {random_tensor({2, 3, 2, 2}, 4), random_tensor({2, 3, 2, 1}, 5),
                             random_tensor({2, 3, 2, 3}, 6)},
                     {});
  CHECK(r.max_rel_error_inputs < 1e-3);
}

TEST_CASE("an Input shape with Keras's batch dimension names the fix", "[layers]") {
  for (const char* batch : {"null", "None", "~"})
    CHECK_THROWS_WITH(layer_from_yaml(std::string("{type: Input, shape: [") + batch + ", 96, 96, 1]}"),
                      Catch::Contains("'shape' must be a list of 3 integers") &&
                          Catch::Contains("(leave out Keras's batch dimension: [96, 96, 1])"));
  // Four sizes without a batch placeholder get no such hint.
  CHECK_THROWS_WITH(layer_from_yaml("{type: Input, shape: [2, 96, 96, 1]}"), !Catch::Contains("batch dimension"));
  CHECK_THROWS_WITH(layer_from_yaml("{type: Input, shape: [None, None, 3]}"),
                    Catch::Contains("no None: every size is fixed; images are resized to the Input's height"));
  // Python's tuple, as a block value and cut short by the commas of a flow mapping.
  CHECK_THROWS_WITH(layer_from_yaml("type: Input\nshape: (96, 96, 1)"),
                    Catch::Contains("got (96, 96, 1) (a Python tuple is a YAML list: [96, 96, 1], not (96, 96, 1))"));
  CHECK_THROWS_WITH(layer_from_yaml("{type: Input, shape: (96, 96, 1)}"),
                    Catch::Contains("got (96 (a Python tuple is a YAML list: [a, b], not (a, b); inside { }"));
  // A size that takes an integer or a pair says both.
  CHECK_THROWS_WITH(layer_from_yaml("type: MaxPooling2D\npool_size: (2, 2)"),
                    Catch::Contains("'pool_size' must be an integer or a list of 2 integers in [1, ") &&
                        Catch::Contains("got '(2, 2)' (a Python tuple is a YAML list: [2, 2], not (2, 2))"));
}

TEST_CASE("Concatenate and Add name both shapes when heights or widths differ", "[layers]") {
  auto l = layer_from_yaml("{type: Concatenate}");
  try {
    l->infer({Shape{0, 32, 32, 64}, Shape{0, 31, 31, 64}});
    FAIL("mismatch accepted");
  } catch (const UserError& e) {
    CHECK(std::string(e.what()) ==
          "Concatenate needs inputs of the same height and width; got [32, 32, 64] and [31, 31, 64]; "
          "check the padding and the pooling/upsampling sizes: 'valid' padding shrinks a convolution's output by "
          "kernel_size - 1 (use padding: same, as the seed U-Net, or crop the larger input with a Cropping2D "
          "layer), and an odd size before a pooling loses a row (use an input size divisible by 2 to the number "
          "of poolings)");
  }
  CHECK_THROWS_AS(l->infer({Shape{0, 4, 4, 1}}), UserError);
  // Add gives the same hint for heights or widths, not for channels.
  auto add = layer_from_yaml("{type: Add}");
  CHECK_THROWS_WITH(add->infer({Shape{0, 32, 32, 16}, Shape{0, 33, 33, 16}}),
                    Catch::Contains("got [32, 32, 16] and [33, 33, 16]; check the padding and the pooling"));
  CHECK_THROWS_WITH(add->infer({Shape{0, 8, 8, 16}, Shape{0, 8, 8, 8}}),
                    !Catch::Contains("pooling/upsampling"));
  CHECK_THROWS_AS(layer_from_yaml("{type: Concatenate, axis: 1}"), UserError);
}

TEST_CASE("Add sums inputs of one shape", "[layers]") {
  auto l = layer_from_yaml("{type: Add}");
  // The values' shape first (AddressSanitizer: inferred for [2, 3, 4], the forward read 24 floats of 2).
  auto small = bind_random(*l, {Shape{0, 1, 1, 2}, Shape{0, 1, 1, 2}, Shape{0, 1, 1, 2}}, 1);
  Tensor a = make_tensor({1, 1, 1, 2}, {1, 2}), b = make_tensor({1, 1, 1, 2}, {10, 20}),
         c = make_tensor({1, 1, 1, 2}, {100, 200});
  Tensor y = run_forward(*l, {}, {&a, &b, &c});
  CHECK(y.shape() == Shape{1, 1, 1, 2});
  CHECK(std::vector<float>(y.data(), y.data() + 2) == std::vector<float>{111, 222});
  auto w = bind_random(*l, {Shape{0, 2, 3, 4}, Shape{0, 2, 3, 4}, Shape{0, 2, 3, 4}}, 1);
  auto r = gradcheck(*l, w, {random_tensor({2, 2, 3, 4}, 7), random_tensor({2, 2, 3, 4}, 8),
                             random_tensor({2, 2, 3, 4}, 9)},
                     {});
  CHECK(r.max_rel_error_inputs < 1e-3);
  try {
    l->infer({Shape{0, 2, 3, 4}, Shape{0, 2, 3, 5}});
    FAIL("mismatch accepted");
  } catch (const UserError& e) {
    CHECK_THAT(e.what(), Catch::Contains("[2, 3, 4]") && Catch::Contains("[2, 3, 5]"));
  }
}

TEST_CASE("Multiply: same shapes, or a one-channel map broadcast over the channels", "[layers]") {
  auto l = layer_from_yaml("{type: Multiply}");
  CHECK(l->infer({Shape{0, 2, 3, 4}, Shape{0, 2, 3, 4}}) == Shape{0, 2, 3, 4});
  Tensor a = make_tensor({1, 1, 2, 2}, {1, 2, 3, 4}), b = make_tensor({1, 1, 2, 2}, {10, 20, 30, 40});
  Tensor y = run_forward(*l, {}, {&a, &b});
  CHECK(std::vector<float>(y.data(), y.data() + 4) == std::vector<float>{10, 40, 90, 160});
  auto w = bind_random(*l, {Shape{0, 2, 3, 4}, Shape{0, 2, 3, 4}}, 1);
  auto r = gradcheck(*l, w, {random_tensor({2, 2, 3, 4}, 7), random_tensor({2, 2, 3, 4}, 8)}, {});
  CHECK(r.max_rel_error_inputs < 1e-3);

  // A [H, W, 1] map, first or second: every channel of a pixel times its value.
  for (const bool map_first : {false, true}) {
    INFO("map first " << map_first);
    auto m = layer_from_yaml("{type: Multiply}");
    const Shape wide{0, 2, 3, 4}, narrow{0, 2, 3, 1};
    CHECK(m->infer(map_first ? std::vector<Shape>{narrow, wide} : std::vector<Shape>{wide, narrow}) == wide);
    Tensor f = make_tensor({1, 1, 2, 3}, {1, 2, 3, 4, 5, 6}), g = make_tensor({1, 1, 2, 1}, {10, -1});
    m->infer({map_first ? Shape{0, 1, 2, 1} : Shape{0, 1, 2, 3}, map_first ? Shape{0, 1, 2, 3} : Shape{0, 1, 2, 1}});
    Tensor yb = map_first ? run_forward(*m, {}, {&g, &f}) : run_forward(*m, {}, {&f, &g});
    CHECK(std::vector<float>(yb.data(), yb.data() + 6) == std::vector<float>{10, 20, 30, -4, -5, -6});
    auto wb = bind_random(*m, map_first ? std::vector<Shape>{narrow, wide} : std::vector<Shape>{wide, narrow}, 1);
    Tensor xw = random_tensor({2, 2, 3, 4}, 9), xn = random_tensor({2, 2, 3, 1}, 10);
    auto rb = gradcheck(*m, wb, map_first ? std::vector<Tensor>{xn, xw} : std::vector<Tensor>{xw, xn}, {});
    CHECK(rb.max_rel_error_inputs < 1e-3);
    CHECK(m->describe().broadcast_input == (map_first ? 0 : 1));
    CHECK(m->describe().output.c == 4);
  }
  CHECK(l->describe().broadcast_input == -1);
  CHECK_THROWS_WITH(l->infer({Shape{0, 2, 3, 4}, Shape{0, 2, 3, 2}}),
                    Catch::Contains("same shape, or one broadcast over the other") && Catch::Contains("[2, 3, 2]"));
  CHECK_THROWS_WITH(l->infer({Shape{0, 2, 3, 4}, Shape{0, 2, 4, 4}}), Catch::Contains("padding"));
  CHECK_THROWS_WITH(l->infer({Shape{0, 2, 3, 4}, Shape{0, 1, 1, 2}}), Catch::Contains("1x1 pixels"));
  CHECK_THROWS_WITH(l->infer({Shape{0, 2, 3, 4}, Shape{0, 2, 3, 4}, Shape{0, 2, 3, 4}}),
                    Catch::Contains("chain Multiply layers"));
}

TEST_CASE("PReLU: a learned slope per element, or shared over Keras's shared_axes", "[layers]") {
  struct Case {
    const char* axes;
    std::vector<int> alpha;
  };
  const Case cases[] = {{"null", {3, 4, 2}}, {"[1, 2]", {1, 1, 2}}, {"3", {3, 4, 1}}, {"[2]", {3, 1, 2}}};
  for (const Case& c : cases) {
    INFO("shared_axes " << c.axes);
    auto l = layer_from_yaml(std::string("{type: PReLU, shared_axes: ") + c.axes + "}");
    CHECK(l->infer({Shape{0, 3, 4, 2}}) == Shape{0, 3, 4, 2});
    const auto specs = l->param_specs();
    REQUIRE(specs.size() == 1);
    CHECK(specs[0].name == "alpha");
    CHECK(specs[0].shape == c.alpha);
    CHECK(specs[0].initializer == "zeros");  // Keras's default: a relu at first
    auto w = bind_random(*l, {Shape{0, 3, 4, 2}}, 3);
    // Away from 0, where the kink would spoil the finite differences.
    auto r = gradcheck(*l, w, {away_from_zero(random_tensor({2, 3, 4, 2}, 11), 0.05f)}, {}, 1e-2f);
    CHECK(r.max_rel_error_inputs < 1e-3);
    CHECK(r.max_rel_error_params < 1e-3);
  }
  // y = x for x > 0, else alpha x, with one slope per channel.
  auto l = layer_from_yaml("{type: PReLU, shared_axes: [1, 2]}");
  l->infer({Shape{0, 1, 2, 2}});
  std::vector<float> alpha = {0.5f, -2.f}, dalpha(2);
  l->bind({alpha.data()}, {dalpha.data()});
  Tensor x = make_tensor({1, 1, 2, 2}, {-1, -1, 3, -4});
  Tensor y = run_forward(*l, {}, {&x});
  CHECK(std::vector<float>(y.data(), y.data() + 4) == std::vector<float>{-0.5f, 2.f, 3.f, 8.f});
  CHECK_THROWS_WITH(layer_from_yaml("{type: PReLU, shared_axes: 0}"), Catch::Contains("'shared_axes' must be in [1, 3]"));
  CHECK_THROWS_WITH(layer_from_yaml("{type: PReLU, shared_axes: [1, 1]}"), Catch::Contains("names axis 1 twice"));
  CHECK_THROWS_WITH(layer_from_yaml("{type: PReLU, alpha_initializer: constant}"), Catch::Contains("use one of"));
  auto reg = layer_from_yaml("{type: PReLU, alpha_regularizer: l2}");
  reg->infer({Shape{0, 3, 4, 2}});
  CHECK(reg->param_specs()[0].regularizer.l2 == Approx(0.01));
  auto fans = layer_from_yaml("{type: PReLU}");
  fans->infer({Shape{0, 3, 4, 2}});
  CHECK(fans->param_specs()[0].fan_in == 12);  // Keras's fans of [3, 4, 2]: receptive 3
  CHECK(fans->param_specs()[0].fan_out == 6);
  CHECK_THROWS_WITH(layer_from_yaml("{type: PReLU, shared_axes: {a: 1}}"), Catch::Contains("or a list of them"));
}

TEST_CASE("Activation: every activation's gradient, and strip_output_activation", "[layers]") {
  for (const std::string& act : activation_names()) {
    auto l = layer_from_yaml("{type: Activation, activation: " + act + "}");
    auto w = bind_random(*l, {Shape{0, 3, 3, 2}}, 1);
    auto r = gradcheck(*l, w, {away_from_zero(random_tensor({2, 3, 3, 2}, 10), 0.05f)}, {}, 1e-2f);
    INFO(act);
    CHECK(r.max_rel_error_inputs < 2e-3);
  }
  auto relu = layer_from_yaml("{type: Activation, activation: relu}");
  CHECK(relu->strip_output_activation() == OutputActivation::None);

  auto sig = layer_from_yaml("{type: Activation, activation: sigmoid}");
  Tensor x = make_tensor({1, 1, 1, 2}, {0, 2});
  Tensor y = run_forward(*sig, {}, {&x});
  CHECK(y.data()[0] == Approx(0.5f));
  CHECK(y.data()[1] == Approx(1 / (1 + std::exp(-2.0))));
  CHECK(sig->strip_output_activation() == OutputActivation::Sigmoid);
  y = run_forward(*sig, {}, {&x});
  CHECK(y.data()[1] == 2.f);
  CHECK(sig->strip_output_activation() == OutputActivation::None);
  CHECK_THROWS_AS(layer_from_yaml("{type: Activation}"), UserError);
  CHECK_THROWS_AS(layer_from_yaml("{type: Activation, activation: relu7}"), UserError);
}

/// y = layer(x) for a [1, 1, 1, n] input of the values xs.
static std::vector<float> activate(const std::string& yaml, const std::vector<float>& xs) {
  auto l = layer_from_yaml(yaml);
  const BoundWeights weights = bind_random(*l, {Shape{0, 1, 1, int(xs.size())}}, 1);
  Tensor x = make_tensor({1, 1, 1, int(xs.size())}, xs);
  Tensor y = run_forward(*l, {}, {&x});
  return std::vector<float>(y.data(), y.data() + y.numel());
}

TEST_CASE("Activations tanh, elu, selu, softplus, leaky_relu give Keras's values", "[layers]") {
  using Catch::Matchers::Approx;  // relative 1e-5 of each value
  const std::vector<float> x = {-2.f, -0.5f, 0.f, 1.5f};
  auto approx = [](std::vector<float> v) { return Approx(v).epsilon(1e-5).margin(1e-7); };
  // The values by the formulas of keras.activations, in double.
  std::vector<float> tanh_v, elu_v, selu_v, softplus_v;
  for (double v : x) {
    tanh_v.push_back(float(std::tanh(v)));
    elu_v.push_back(float(v > 0 ? v : std::exp(v) - 1));
    selu_v.push_back(float(1.0507009873554805 * (v > 0 ? v : 1.6732632423543772 * (std::exp(v) - 1))));
    softplus_v.push_back(float(std::log1p(std::exp(v))));
  }
  CHECK_THAT(activate("{type: Activation, activation: tanh}", x), approx(tanh_v));
  CHECK_THAT(activate("{type: Activation, activation: elu}", x), approx(elu_v));
  CHECK_THAT(activate("{type: Activation, activation: selu}", x), approx(selu_v));
  CHECK_THAT(activate("{type: Activation, activation: softplus}", x), approx(softplus_v));
  CHECK_THAT(activate("{type: Activation, activation: leaky_relu}", x), approx({-0.4f, -0.1f, 0.f, 1.5f}));
  // softplus neither overflows nor loses its tiny values
  const std::vector<float> extremes = activate("{type: Activation, activation: softplus}", {200.f, -80.f});
  CHECK(extremes[0] == 200.f);
  CHECK(extremes[1] == Catch::Detail::Approx(std::exp(-80.0)).epsilon(1e-5));  // relative: 0 fails
  // The layers with Keras's defaults and with their parameter.
  CHECK_THAT(activate("{type: LeakyReLU}", x), approx({-0.6f, -0.15f, 0.f, 1.5f}));
  CHECK_THAT(activate("{type: LeakyReLU, negative_slope: 0.1}", x), approx({-0.2f, -0.05f, 0.f, 1.5f}));
  CHECK_THAT(activate("{type: LeakyReLU, alpha: 0.1}", x), approx({-0.2f, -0.05f, 0.f, 1.5f}));  // Keras 2
  CHECK_THAT(activate("{type: ELU}", x), approx(elu_v));
  const float e2 = float(std::exp(-2.0) - 1), e05 = float(std::exp(-0.5) - 1);
  CHECK_THAT(activate("{type: ELU, alpha: 0.5}", x), approx({0.5f * e2, 0.5f * e05, 0.f, 1.5f}));
  CHECK_THAT(activate("{type: ReLU}", x), approx({0.f, 0.f, 0.f, 1.5f}));
  CHECK_THAT(activate("{type: ReLU, negative_slope: 0.5}", x), approx({-1.f, -0.25f, 0.f, 1.5f}));
  CHECK(layer_from_yaml("{type: LeakyReLU}")->type() == "LeakyReLU");
  CHECK(layer_from_yaml("{type: ReLU}")->type() == "ReLU");
  // relu6, hard_sigmoid (Keras 3's relu6(x + 3) / 6), softsign, exponential; ReLU's max_value.
  const std::vector<float> w = {-4.f, -2.f, -0.5f, 0.f, 1.5f, 3.5f, 7.f};
  std::vector<float> hard, soft, expo;
  for (double v : w) {
    hard.push_back(float(std::min(std::max(v + 3, 0.0), 6.0) / 6));
    soft.push_back(float(v / (1 + std::abs(v))));
    expo.push_back(float(std::exp(v)));
  }
  CHECK_THAT(activate("{type: Activation, activation: relu6}", w), approx({0, 0, 0, 0, 1.5f, 3.5f, 6.f}));
  CHECK_THAT(activate("{type: Activation, activation: hard_sigmoid}", w), approx(hard));
  CHECK_THAT(activate("{type: Activation, activation: softsign}", w), approx(soft));
  CHECK_THAT(activate("{type: Activation, activation: exponential}", w), approx(expo));
  CHECK_THAT(activate("{type: ReLU, max_value: 6}", w), approx({0, 0, 0, 0, 1.5f, 3.5f, 6.f}));
  CHECK_THAT(activate("{type: ReLU, max_value: 2, negative_slope: 0.5}", w),
             approx({-2.f, -1.f, -0.25f, 0.f, 1.5f, 2.f, 2.f}));
}

TEST_CASE("Activation layers' gradients match finite differences, their parameters too", "[layers]") {
  for (const char* yaml : {"{type: LeakyReLU}", "{type: LeakyReLU, negative_slope: 0}", "{type: ELU, alpha: 0.5}",
                           "{type: ELU, alpha: 2}", "{type: ReLU, negative_slope: 0.05}", "{type: ReLU}",
                           "{type: Activation, activation: relu6}", "{type: Activation, activation: softsign}",
                           "{type: Activation, activation: exponential}"}) {
    INFO(yaml);
    auto l = layer_from_yaml(yaml);
    auto w = bind_random(*l, {Shape{0, 3, 3, 2}}, 1);
    auto r = gradcheck(*l, w, {away_from_zero(random_tensor({2, 3, 3, 2}, 11), 0.05f)}, {}, 1e-2f);
    CHECK(r.max_rel_error_inputs < 2e-3);
  }
  // hard_sigmoid's corners at -3 and 3 lie outside [-1, 1]: inputs in (-3, 3) and beyond it.
  auto hard = layer_from_yaml("{type: Activation, activation: hard_sigmoid}");
  auto hw = bind_random(*hard, {Shape{0, 3, 3, 2}}, 1);
  Tensor wide = random_tensor({2, 3, 3, 2}, 12, -5.f, 5.f);
  for (size_t i = 0; i < wide.numel(); ++i)
    if (std::abs(std::abs(wide.data()[i]) - 3.f) < 0.05f) wide.data()[i] = 0.f;  // off the corners
  CHECK(gradcheck(*hard, hw, {wide}, {}, 1e-2f).max_rel_error_inputs < 2e-3);
  // A cap at 0.6 over inputs in [-1, 1]: some clipped (gradient 0), away from the corner.
  auto capped = layer_from_yaml("{type: ReLU, max_value: 0.6, negative_slope: 0.2}");
  auto cw = bind_random(*capped, {Shape{0, 3, 3, 2}}, 1);
  Tensor x = away_from_zero(random_tensor({2, 3, 3, 2}, 13), 0.05f);
  for (size_t i = 0; i < x.numel(); ++i)
    if (std::abs(x.data()[i] - 0.6f) < 0.05f) x.data()[i] = 0.3f;
  CHECK(gradcheck(*capped, cw, {x}, {}, 1e-2f).max_rel_error_inputs < 2e-3);
}

TEST_CASE("Activations trainer lacks and bad activation parameters are config errors with a fix", "[layers]") {
  auto message = [](const std::string& yaml) -> std::string {
    try {
      layer_from_yaml(yaml);
    } catch (const UserError& e) {
      return e.what();
    }
    return "accepted";
  };
  CHECK(message("{type: Activation, activation: softmax}") == "accepted");  // the last layer's (test_categorical)
  CHECK_THAT(message("{type: Activation, activation: log_softmax}"),
             Catch::Contains("is 'log_softmax', which is not supported") && Catch::Contains("'softmax'"));
  CHECK(message("{type: Conv2D, filters: 1, kernel_size: 1, activation: gelu}") == "accepted");
  CHECK_THAT(message("{type: Conv2D, filters: 1, kernel_size: 1, activation: celu}"),
             Catch::Contains("swish") && Catch::Contains("mish"));  // the names list the aliases
  CHECK(message("{type: ReLU, max_value: 6}") == "accepted");
  CHECK_THAT(message("{type: ReLU, max_value: 0}"), Catch::Contains("max_value") && Catch::Contains("> 0"));
  CHECK(message("{type: ReLU, max_value: null}") == "accepted");  // Keras's get_config() writes the default
  CHECK_THAT(message("{type: ReLU, threshold: 0.5}"), Catch::Contains("threshold"));
  CHECK_THAT(message("{type: ELU, alpha: 0}"), Catch::Contains("alpha") && Catch::Contains("> 0"));
  CHECK_THAT(message("{type: LeakyReLU, negative_slope: -0.1}"), Catch::Contains("negative_slope"));
  CHECK_THAT(message("{type: LeakyReLU, alpha: 0.1, negative_slope: 0.1}"),
             Catch::Contains("Keras 2's name of 'negative_slope'"));
}

TEST_CASE("BatchNormalization training forward matches a hand computation", "[layers]") {
  auto l = layer_from_yaml("{type: BatchNormalization, momentum: 0.9, epsilon: 0.01}");
  auto w = bind_random(*l, {Shape{0, 1, 2, 2}}, 1);
  REQUIRE(w.specs.size() == 4);
  CHECK(w.specs[0].name == "gamma");
  CHECK(w.specs[1].name == "beta");
  CHECK(w.specs[2].name == "moving_mean");
  CHECK_FALSE(w.specs[2].trainable);
  CHECK(w.specs[3].name == "moving_variance");
  CHECK(w.specs[3].initializer == "ones");
  w.params[0] = {2, 1};        // gamma
  w.params[1] = {0.5f, 0};     // beta
  w.params[2] = {0, 10};       // moving_mean
  w.params[3] = {1, 4};        // moving_variance
  // Two samples of 1x2 pixels, 2 channels. Channel 0: 1, 2, 3, 6 (mean 3, biased
  // var 3.5, unbiased 14/3); channel 1: all 5 (mean 5, var 0).
  Tensor x = make_tensor({2, 1, 2, 2}, {1, 5, 2, 5, 3, 5, 6, 5});
  Tensor y = run_forward(*l, training(), {&x});
  const double istd = 1 / std::sqrt(3.5 + 0.01);
  const double want0[] = {-2, -1, 0, 3};
  for (int i = 0; i < 4; ++i) {
    CHECK(y.data()[2 * i] == Approx(2 * want0[i] * istd + 0.5));
    CHECK(y.data()[2 * i + 1] == Approx(0).margin(1e-6));
  }
  // Keras: moving = moving * momentum + batch * (1 - momentum), unbiased batch variance.
  CHECK(w.params[2][0] == Approx(0 * 0.9 + 3 * 0.1));
  CHECK(w.params[2][1] == Approx(10 * 0.9 + 5 * 0.1));
  CHECK(w.params[3][0] == Approx(1 * 0.9 + 14.0 / 3 * 0.1));
  CHECK(w.params[3][1] == Approx(4 * 0.9 + 0 * 0.1));

  // Inference uses the moving statistics and leaves them alone.
  std::vector<float> mm = w.params[2], mv = w.params[3];
  Tensor yi = run_forward(*l, {}, {&x});
  for (int i = 0; i < 4; ++i)
    for (int c = 0; c < 2; ++c) {
      const float* g = w.params[0].data();
      const float* b = w.params[1].data();
      double want = g[c] * (x.data()[2 * i + c] - mm[size_t(c)]) / std::sqrt(mv[size_t(c)] + 0.01) + b[c];
      CHECK(yi.data()[2 * i + c] == Approx(want));
    }
  CHECK(w.params[2] == mm);
  CHECK(w.params[3] == mv);
}

TEST_CASE("BatchNormalization gradients (training and inference, with and without center/scale)", "[layers]") {
  for (const char* yaml : {"{type: BatchNormalization}", "{type: BatchNormalization, center: false, scale: false}",
                           "{type: BatchNormalization, synchronized: true}"}) {
    INFO(yaml);
    auto l = layer_from_yaml(yaml);
    auto w = bind_random(*l, {Shape{0, 3, 4, 3}}, 11);
    Tensor x = random_tensor({2, 3, 4, 3}, 12, -2.f, 2.f);
    auto r = gradcheck(*l, w, {x}, training(), 1e-2f);
    CHECK(r.max_rel_error_inputs < 5e-3);
    CHECK(r.max_rel_error_params < 5e-3);
    auto ri = gradcheck(*l, w, {x}, {}, 1e-2f);
    CHECK(ri.max_rel_error_inputs < 5e-3);
    CHECK(ri.max_rel_error_params < 5e-3);
  }
  CHECK_THROWS_AS(layer_from_yaml("{type: BatchNormalization, axis: 1}"), UserError);
  CHECK_THROWS_AS(layer_from_yaml("{type: BatchNormalization, beta_initializer: nonsense}"), UserError);
}

namespace {

struct TowerResult {
  Tensor y, dx;
  std::vector<std::vector<float>> params, grads;
};

/// Runs synchronized BN forward + backward on towers holding `split` samples of
/// x (dy likewise), each in its own thread; identical initial weights (seed 21).
std::vector<TowerResult> run_towers(const std::string& yaml, const Tensor& x, const Tensor& dy,
                                    const std::vector<int>& split) {
  const int towers = int(split.size());
  ThreadComm comm(towers);
  std::vector<TowerResult> out(static_cast<size_t>(towers));
  std::vector<std::unique_ptr<Layer>> layers;
  std::vector<BoundWeights> weights;
  for (int t = 0; t < towers; ++t) {
    layers.push_back(layer_from_yaml(yaml));
    weights.push_back(bind_random(*layers.back(), {x.shape()}, 21));
  }
  std::vector<std::thread> threads;
  int offset = 0;
  for (int t = 0; t < towers; ++t) {
    threads.emplace_back([&, t, offset] {
      Context ctx = training();
      ctx.comm = &comm;
      ctx.rank = t;
      ctx.sample_offset = offset;
      ctx.global_batch = x.shape().n;
      Tensor xs = slice(x, offset, split[size_t(t)]), gs = slice(dy, offset, split[size_t(t)]);
      layers[size_t(t)]->forward(ctx, {&xs}, out[size_t(t)].y);
      layers[size_t(t)]->backward(ctx, {&xs}, out[size_t(t)].y, gs, {&out[size_t(t)].dx});
      out[size_t(t)].params = weights[size_t(t)].params;
      out[size_t(t)].grads = weights[size_t(t)].grads;
    });
    offset += split[size_t(t)];
  }
  for (auto& th : threads) th.join();
  return out;
}

}  // namespace

TEST_CASE("Synchronized BatchNormalization on N towers equals one tower on the whole batch", "[layers]") {
  const std::string yaml = "{type: BatchNormalization, synchronized: true, momentum: 0.5}";
  REQUIRE(layer_from_yaml(yaml)->collective());
  Tensor x = random_tensor({5, 3, 4, 6}, 30, -1.f, 3.f);
  Tensor dy = random_tensor({5, 3, 4, 6}, 31);
  const TowerResult ref = run_towers(yaml, x, dy, {5})[0];
  const size_t per = x.shape().sample_numel();

  for (std::vector<int> split : {std::vector<int>{3, 2}, std::vector<int>{2, 0, 3}}) {
    INFO("towers: " << split.size());
    auto res = run_towers(yaml, x, dy, split);
    int offset = 0;
    for (size_t t = 0; t < split.size(); ++t) {
      const size_t n = size_t(split[t]) * per;
      REQUIRE(res[t].y.shape().n == split[t]);
      require_close(res[t].y.data(), ref.y.data() + size_t(offset) * per, n, 1e-5);
      require_close(res[t].dx.data(), ref.dx.data() + size_t(offset) * per, n, 1e-5);
      // Moving statistics (params 2, 3) are identical on every tower and equal the reference.
      for (size_t k = 2; k < 4; ++k)
        require_close(res[t].params[k].data(), ref.params[k].data(), ref.params[k].size(), 1e-5);
      offset += split[t];
    }
    // Parameter gradients are per-tower sums; their sum over towers is the reference.
    for (size_t k = 0; k < 2; ++k) {
      std::vector<float> total(ref.grads[k].size(), 0.f);
      for (auto& r : res)
        for (size_t i = 0; i < total.size(); ++i) total[i] += r.grads[k][i];
      require_close(total.data(), ref.grads[k].data(), total.size(), 1e-5);
    }
  }

  // Without synchronization the first tower normalises with its own statistics,
  // so it differs from the reference (the comparison above can fail).
  auto local = run_towers("{type: BatchNormalization, momentum: 0.5}", x, dy, {3, 2});
  double diff = 0;
  for (size_t i = 0; i < 3 * per; ++i) diff = std::max(diff, double(std::abs(local[0].y.data()[i] - ref.y.data()[i])));
  CHECK(diff > 1e-2);
}

TEST_CASE("Dropout masks depend on the global sample index, not the tower split", "[layers]") {
  const std::string yaml = "{type: Dropout, rate: 0.5}";
  auto l = layer_from_yaml(yaml, "drop");
  const BoundWeights weights = bind_random(*l, {Shape{0, 4, 4, 3}}, 1);
  Tensor x = random_tensor({4, 4, 4, 3}, 40, 0.5f, 1.5f);
  Context ctx = training();
  ctx.seed = 99;
  ctx.step = 7;
  Tensor whole = run_forward(*l, ctx, {&x});
  const size_t per = x.shape().sample_numel();
  for (std::vector<int> split : {std::vector<int>{1, 3}, std::vector<int>{2, 2}, std::vector<int>{3, 0, 1}}) {
    int offset = 0;
    for (int n : split) {
      auto part = layer_from_yaml(yaml, "drop");
      Tensor xs = slice(x, offset, n);
      Context c = ctx;
      c.sample_offset = offset;
      Tensor ys = run_forward(*part, c, {&xs});
      CHECK(std::equal(ys.data(), ys.data() + ys.numel(), whole.data() + size_t(offset) * per));
      offset += n;
    }
  }
  // Another step, another run seed or another layer name gives another mask.
  for (int which = 0; which < 3; ++which) {
    Context c = ctx;
    if (which == 0) c.step = 8;
    if (which == 1) c.seed = 100;
    auto other = layer_from_yaml(yaml, which == 2 ? "drop2" : "drop");
    Tensor y2 = run_forward(*other, c, {&x});
    CHECK_FALSE(std::equal(y2.data(), y2.data() + y2.numel(), whole.data()));
  }
  // An explicit seed replaces the name hash.
  auto s1 = layer_from_yaml("{type: Dropout, rate: 0.5, seed: 3}", "a");
  auto s2 = layer_from_yaml("{type: Dropout, rate: 0.5, seed: 3}", "b");
  Tensor ya = run_forward(*s1, ctx, {&x}), yb = run_forward(*s2, ctx, {&x});
  CHECK(std::equal(ya.data(), ya.data() + ya.numel(), yb.data()));
}

TEST_CASE("Dropout's rate outside 0 (included) to 1 is refused as written", "[layers]") {
  // "got 1.200000".
  CHECK_THROWS_WITH(layer_from_yaml("{type: Dropout, rate: 1.2}"),
                    Catch::Contains("would drop everything), got 1.2") && !Catch::Contains("1.200000"));
  CHECK_THROWS_WITH(layer_from_yaml("{type: SpatialDropout2D, rate: -0.25}"), Catch::Contains("got -0.25"));
}

TEST_CASE("Dropout keeps 1 - rate of the elements, scaled, and identity in inference", "[layers]") {
  auto l = layer_from_yaml("{type: Dropout, rate: 0.3}");
  auto w = bind_random(*l, {Shape{0, 64, 64, 64}}, 1);
  Tensor x = random_tensor({1, 64, 64, 64}, 41, 0.5f, 1.5f);
  Context ctx = training();
  ctx.seed = 5;
  Tensor y = run_forward(*l, ctx, {&x});
  size_t kept = 0;
  for (size_t i = 0; i < x.numel(); ++i) {
    if (y.data()[i] == 0.f) continue;
    ++kept;
    REQUIRE(y.data()[i] == Approx(x.data()[i] / 0.7f));
  }
  // Binomial standard deviation here is about 0.0009: 0.005 is over 5 of them.
  CHECK(double(kept) / double(x.numel()) == Approx(0.7).margin(0.005));

  Tensor yi = run_forward(*l, {}, {&x});
  CHECK(std::equal(yi.data(), yi.data() + yi.numel(), x.data()));

  auto r = gradcheck(*l, w, {random_tensor({2, 3, 3, 4}, 42)}, ctx);
  CHECK(r.max_rel_error_inputs < 1e-3);
  CHECK_THROWS_AS(layer_from_yaml("{type: Dropout, rate: 1.0}"), UserError);
  CHECK_THROWS_AS(layer_from_yaml("{type: Dropout}"), UserError);
}

TEST_CASE("SpatialDropout2D drops whole channels per sample, as Keras's noise shape (N, 1, 1, C)", "[layers]") {
  auto l = layer_from_yaml("{type: SpatialDropout2D, rate: 0.4}", "sdrop");
  auto w = bind_random(*l, {Shape{0, 5, 6, 200}}, 1);
  Tensor x = random_tensor({3, 5, 6, 200}, 43, 0.5f, 1.5f);  // no zeros: a zero output was dropped
  Context ctx = training();
  ctx.seed = 11;
  Tensor y = run_forward(*l, ctx, {&x});
  const Shape s = x.shape();
  size_t kept = 0;
  bool samples_differ = false;
  for (int n = 0; n < s.n; ++n)
    for (int c = 0; c < s.c; ++c) {
      const bool keep = y.data()[size_t(n) * s.sample_numel() + size_t(c)] != 0.f;  // pixel (0, 0)
      kept += keep;
      if (n > 0) samples_differ |= keep != (y.data()[size_t(c)] != 0.f);
      for (int p = 0; p < s.h * s.w; ++p) {  // every pixel of the map as its first
        const size_t i = (size_t(n) * s.h * s.w + size_t(p)) * s.c + size_t(c);
        REQUIRE((y.data()[i] != 0.f) == keep);
        if (keep) REQUIRE(y.data()[i] == Approx(x.data()[i] / 0.6f));
      }
    }
  CHECK(samples_differ);  // a draw per sample, not one per channel for the batch
  size_t kept_in_first = 0;  // and one per channel, not one per sample
  for (int c = 0; c < s.c; ++c) kept_in_first += y.data()[size_t(c)] != 0.f;
  CHECK(kept_in_first > 0);
  CHECK(kept_in_first < size_t(s.c));
  // 600 maps: the binomial standard deviation of the kept fraction is 0.02.
  CHECK(double(kept) / double(s.n * s.c) == Approx(0.6).margin(0.08));

  // Another split of the batch over towers: the same maps.
  auto part = layer_from_yaml("{type: SpatialDropout2D, rate: 0.4}", "sdrop");
  Tensor tail = slice(x, 1, 2);
  Context c = ctx;
  c.sample_offset = 1;
  Tensor yt = run_forward(*part, c, {&tail});
  CHECK(std::equal(yt.data(), yt.data() + yt.numel(), y.data() + s.sample_numel()));

  Tensor yi = run_forward(*l, {}, {&x});
  CHECK(std::equal(yi.data(), yi.data() + yi.numel(), x.data()));
  CHECK(l->describe().kind == LayerKind::Identity);
  auto r = gradcheck(*l, w, {random_tensor({2, 3, 3, 4}, 44)}, ctx);
  CHECK(r.max_rel_error_inputs < 1e-3);
  CHECK_THROWS_WITH(layer_from_yaml("{type: SpatialDropout2D, rate: 0.2, data_format: channels_first}"),
                    Catch::Contains("channels_last"));
  // Keras's get_config() has data_format on every 2-D layer (unknown on Conv2D and pooling).
  for (const char* layer :
       {"{type: Conv2D, filters: 2, kernel_size: 3", "{type: Conv2DTranspose, filters: 2, kernel_size: 2",
        "{type: MaxPooling2D", "{type: AveragePooling2D", "{type: UpSampling2D"}) {
    INFO(layer);
    CHECK_NOTHROW(layer_from_yaml(std::string(layer) + ", data_format: channels_last}"));
    CHECK_NOTHROW(layer_from_yaml(std::string(layer) + ", data_format: null}"));
    CHECK_THROWS_WITH(layer_from_yaml(std::string(layer) + ", data_format: channels_first}"),
                      Catch::Contains("'data_format' must be channels_last (tensors here are [N, H, W, C]"));
  }
  CHECK_THROWS_WITH(layer_from_yaml("{type: SpatialDropout2D, rate: 1}"), Catch::Contains("'rate' must be in [0, 1)"));
  CHECK_THROWS_WITH(layer_from_yaml("{type: SpatialDropout2D, rate: -0.1}"), Catch::Contains("must be in [0, 1)"));
  CHECK_THROWS_WITH(layer_from_yaml("{type: SpatialDropout2D, rate: 0.1, seedd: 7}"),
                    Catch::Contains("did you mean 'seed'"));
  CHECK_THROWS_WITH(layer_from_yaml("{type: SpatialDropout2D, name: sd}"),
                    Catch::Contains("'rate' is required") && !Catch::Contains("did you mean"));
}

TEST_CASE("output-based gradients stay >= 0 for outputs rounded past their range (bf16 storage)", "[layers]") {
  // tanh's y may round to just above 1, elu's and selu's to just below their
  // lower bounds; the true derivatives there are 0, never negative.
  CHECK(activation_dx(Activation{ActivationKind::Tanh}, 1.001f, 1.f) == 0.f);
  CHECK(activation_dx(Activation{ActivationKind::Elu, 0.3f}, -0.3004f, 1.f) == 0.f);
  CHECK(activation_dx(Activation{ActivationKind::Selu}, -kSeluScale * kSeluAlpha - 0.001f, 1.f) == 0.f);
  CHECK(activation_dx(Activation{ActivationKind::Elu, 1.f}, -0.5f, 2.f) == Approx(1.f));  // in range: dy (y + alpha)
}
