// Optimizers: a few steps against Keras 3's formulas (tf.keras 2.11+'s agree) written out in
// double here, including nesterov, momentum and decay; state names.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <tuple>
#include <vector>

#include "backend/train_math.h"
#include "core/error.h"
#include "train/lr_schedule.h"
#include "train/optimizer.h"
#include "train/resume_check.h"

using namespace trainer;

namespace {

const std::vector<std::vector<float>> kGrads = {{0.5f, -1.f, 2.f}, {0.25f, 0.5f, -1.5f}, {-0.75f, 1.f, 0.1f}};
const std::vector<float> kStart = {1.f, -2.f, 0.5f};

std::vector<float> run(const OptimizerConfig& cfg) {
  auto opt = make_optimizer(cfg, kStart.size(), Device{});
  std::vector<float> w = kStart;
  for (const auto& g : kGrads) opt->step(w.data(), g.data());
  CHECK(opt->iterations() == int64_t(kGrads.size()));
  return w;
}

void check_close(const std::vector<float>& got, const std::vector<double>& want) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == Approx(want[i]).epsilon(1e-5).margin(1e-6));
}

double decayed(const OptimizerConfig& c, int it) { return c.learning_rate / (1 + c.decay * it); }

}  // namespace

TEST_CASE("SGD without momentum: w -= lr_t g with Keras 2 decay", "[optimizer]") {
  OptimizerConfig c;
  c.type = OptimizerKind::SGD;
  c.learning_rate = 0.1;
  c.decay = 0.5;
  // Hand value of one step: 1 - 0.1 * 0.5 = 0.95.
  auto one = make_optimizer(c, 1, Device{});
  float w = 1.f, g = 0.5f;
  one->step(&w, &g);
  CHECK(w == Approx(0.95f));
  CHECK(one->current_learning_rate() == Approx(0.1 / 1.5));

  std::vector<double> want(kStart.begin(), kStart.end());
  for (int t = 0; t < 3; ++t)
    for (size_t i = 0; i < want.size(); ++i) want[i] -= decayed(c, t) * kGrads[t][i];
  check_close(run(c), want);
}

TEST_CASE("SGD momentum and nesterov follow keras.optimizers.SGD", "[optimizer]") {
  for (bool nesterov : {false, true}) {
    OptimizerConfig c;
    c.type = OptimizerKind::SGD;
    c.learning_rate = 0.05;
    c.momentum = 0.9;
    c.nesterov = nesterov;
    c.decay = 0.1;
    std::vector<double> want(kStart.begin(), kStart.end()), vel(3, 0.0);
    for (int t = 0; t < 3; ++t) {
      const double lr = decayed(c, t);
      for (size_t i = 0; i < 3; ++i) {
        vel[i] = c.momentum * vel[i] - lr * kGrads[t][i];
        want[i] += nesterov ? c.momentum * vel[i] - lr * kGrads[t][i] : vel[i];
      }
    }
    INFO("nesterov " << nesterov);
    check_close(run(c), want);
  }
}

/// Adam's weights after kGrads, in double (tf.keras 2.x; with Keras 3's
/// decoupled weight decay by the learning rate, not lr_t, before each update;
/// with amsgrad TensorFlow's ApplyAdamWithAmsgrad: the running maximum of v).
static std::vector<double> adam_reference(const OptimizerConfig& c) {
  std::vector<double> want(kStart.begin(), kStart.end()), m(3, 0.0), v(3, 0.0), v_hat(3, 0.0);
  for (int t = 0; t < 3; ++t) {
    const double lr = decayed(c, t);
    const double lr_t = lr * std::sqrt(1 - std::pow(c.beta_2, t + 1)) / (1 - std::pow(c.beta_1, t + 1));
    for (size_t i = 0; i < 3; ++i) {
      want[i] -= lr * c.weight_decay * want[i];  // Keras: variable * wd * learning_rate
      const double g = kGrads[t][i];
      m[i] = c.beta_1 * m[i] + (1 - c.beta_1) * g;
      v[i] = c.beta_2 * v[i] + (1 - c.beta_2) * g * g;
      v_hat[i] = std::max(v_hat[i], v[i]);
      want[i] -= lr_t * m[i] / (std::sqrt(c.amsgrad ? v_hat[i] : v[i]) + c.epsilon);
    }
  }
  return want;
}

TEST_CASE("Adam follows keras.optimizers.Adam with bias-corrected lr_t", "[optimizer]") {
  for (double decay : {0.0, 0.2}) {
    OptimizerConfig c;
    c.type = OptimizerKind::Adam;
    c.learning_rate = 0.01;
    c.decay = decay;
    INFO("decay " << decay);
    check_close(run(c), adam_reference(c));
  }
}

TEST_CASE("AdamW and weight_decay: w -= lr_t * weight_decay * w before the update, as Keras 3", "[optimizer]") {
  for (double decay : {0.0, 0.2}) {
    OptimizerConfig c;
    c.type = OptimizerKind::AdamW;
    c.learning_rate = 0.01;
    c.decay = decay;
    c.weight_decay = 0.5;  // large, so that a decay by the wrong rate shows
    INFO("decay " << decay);
    check_close(run(c), adam_reference(c));
  }
  // SGD with weight_decay, applied by buckets as the towers do.
  OptimizerConfig c;
  c.type = OptimizerKind::SGD;
  c.learning_rate = 0.1;
  c.weight_decay = 0.2;
  auto opt = make_optimizer(c, kStart.size(), Device{});
  std::vector<float> w = kStart;
  opt->update(w.data(), kGrads[0].data(), 1, 3);
  opt->update(w.data(), kGrads[0].data(), 0, 1);
  opt->finish_step();
  std::vector<double> want;
  for (size_t i = 0; i < 3; ++i) want.push_back(kStart[i] * (1 - 0.1 * 0.2) - 0.1 * kGrads[0][i]);
  check_close(w, want);
}

TEST_CASE("every optimizer applied by buckets, in two orders and with empty ones, equals step() bit for bit", "[optimizer]") {
  // The towers apply each gradient bucket as its all-reduce completes: every slot must be offset by the
  // bucket's first element.
  struct Variant {
    const char* name;
    OptimizerKind type;
    double momentum;
    bool nesterov, amsgrad, centered;
  };
  for (const Variant& v : {Variant{"SGD", OptimizerKind::SGD, 0, false, false, false}, Variant{"SGD momentum", OptimizerKind::SGD, 0.9, false, false, false},
                           Variant{"SGD nesterov", OptimizerKind::SGD, 0.9, true, false, false},
                           Variant{"Adam", OptimizerKind::Adam, 0, false, false, false}, Variant{"Adam amsgrad", OptimizerKind::Adam, 0, false, true, false},
                           Variant{"AdamW amsgrad", OptimizerKind::AdamW, 0, false, true, false},
                           Variant{"RMSprop", OptimizerKind::RMSprop, 0, false, false, false},
                           Variant{"RMSprop momentum", OptimizerKind::RMSprop, 0.9, false, false, false},
                           Variant{"RMSprop centered", OptimizerKind::RMSprop, 0, false, false, true},
                           Variant{"RMSprop centered momentum", OptimizerKind::RMSprop, 0.9, false, false, true}}) {
    INFO(v.name);
    OptimizerConfig c;
    c.type = v.type;
    c.learning_rate = 0.01;
    c.momentum = v.momentum;
    c.nesterov = v.nesterov;
    c.amsgrad = v.amsgrad;
    c.centered = v.centered;
    c.beta_2 = 0.5;  // so that amsgrad's maximum differs from v
    c.weight_decay = 0.1;
    auto whole = make_optimizer(c, kStart.size(), Device{}), buckets = make_optimizer(c, kStart.size(), Device{});
    std::vector<float> a = kStart, b = kStart;
    for (size_t t = 0; t < kGrads.size(); ++t) {
      const float* g = kGrads[t].data();
      whole->step(a.data(), g);
      if (t % 2 == 0) {  // the towers' order: the last bucket first
        buckets->update(b.data(), g, 3, 3);
        buckets->update(b.data(), g, 1, 3);
        buckets->update(b.data(), g, 0, 1);
      } else {
        buckets->update(b.data(), g, 0, 2);
        buckets->update(b.data(), g, 0, 0);
        buckets->update(b.data(), g, 2, 3);
      }
      buckets->finish_step();
    }
    CHECK(a == b);
    CHECK(a != kStart);
    const auto sa = whole->state(), sb = buckets->state();
    REQUIRE(sa.size() == sb.size());
    for (size_t i = 0; i < sa.size(); ++i) CHECK(sa[i].second->to_host() == sb[i].second->to_host());
  }
}

TEST_CASE("Adam and AdamW with amsgrad divide by the running maximum of v", "[optimizer]") {
  for (OptimizerKind type : {OptimizerKind::Adam, OptimizerKind::AdamW}) {
    OptimizerConfig c;
    c.type = type;
    c.learning_rate = 0.01;
    c.beta_2 = 0.5;  // v falls when a gradient is smaller than the last (kGrads' first element)
    c.weight_decay = type == OptimizerKind::AdamW ? 0.004 : 0.0;
    c.amsgrad = true;
    INFO(optimizer_name(type));
    const std::vector<float> got = run(c);
    check_close(got, adam_reference(c));
    c.amsgrad = false;
    REQUIRE(std::abs(got[0] - run(c)[0]) > 1e-4);  // the maximum changed the step
  }
}

TEST_CASE("RMSprop follows keras.optimizers.RMSprop, with and without momentum, centered or not", "[optimizer]") {
  for (bool centered : {false, true})
    for (double momentum : {0.0, 0.8}) {
      OptimizerConfig c;
      c.type = OptimizerKind::RMSprop;
      c.learning_rate = 0.001;
      c.momentum = momentum;
      c.decay = 0.05;
      c.centered = centered;
      c.epsilon = 0.05;  // large, so that epsilon inside the root (Keras 3) differs from outside (tf.keras 2.10)
      std::vector<double> want(kStart.begin(), kStart.end()), rms(3, 0.0), mom(3, 0.0), mg(3, 0.0);
      for (int t = 0; t < 3; ++t) {
        const double lr = decayed(c, t);
        for (size_t i = 0; i < 3; ++i) {
          const double g = kGrads[t][i];
          rms[i] = c.rho * rms[i] + (1 - c.rho) * g * g;
          mg[i] = c.rho * mg[i] + (1 - c.rho) * g;
          const double s = centered ? rms[i] - mg[i] * mg[i] : rms[i];  // Keras 3's velocity - average_grad^2
          const double increment = lr * g / std::sqrt(s + c.epsilon);
          if (momentum == 0) {
            want[i] -= increment;
          } else {
            mom[i] = momentum * mom[i] + increment;
            want[i] -= mom[i];
          }
        }
      }
      INFO("momentum " << momentum << " centered " << centered);
      check_close(run(c), want);
    }
}

TEST_CASE("centered RMSprop takes rms - mg^2 as at least 0, where a root of a negative would give NaN", "[optimizer]") {
  // Slots where the mean gradient's square exceeds rms (exact arithmetic never
  // gets there; rounding, or a damaged checkpoint, can): the step divides by
  // sqrt(epsilon), finite, instead of by NaN.
  float w = 1.f, rms = 0.f, mg = 2.f;
  rmsprop_update(w, rms, &mg, 2.f, 1e-3f, 0.5f, 1e-7f);  // rms 2, mg 2: 2 - 4 < 0
  CHECK(rms == 2.f);
  CHECK(mg == 2.f);
  CHECK(w == Approx(1.0 - 1e-3 * 2 / std::sqrt(1e-7)));
  float w2 = 1.f, rms2 = 0.f, mg2 = 2.f, mom = 0.f;
  rmsprop_momentum_update(w2, rms2, &mg2, mom, 2.f, 1e-3f, 0.5f, 0.9f, 1e-7f);
  CHECK(mom == Approx(1e-3 * 2 / std::sqrt(1e-7)));
  CHECK(std::isfinite(w2));
}

TEST_CASE("optimizer state carries Keras slot names and restores iterations", "[optimizer]") {
  auto names = [](Optimizer& o) {
    std::vector<std::string> n;
    for (auto& kv : o.state()) {
      CHECK(kv.second->size() == o.size());
      n.push_back(kv.first);
    }
    return n;
  };
  OptimizerConfig c;
  c.type = OptimizerKind::SGD;
  CHECK(names(*make_optimizer(c, 4, Device{})).empty());
  c.momentum = 0.9;
  CHECK(names(*make_optimizer(c, 4, Device{})) == std::vector<std::string>{"momentum"});
  c.type = OptimizerKind::Adam;
  CHECK(names(*make_optimizer(c, 4, Device{})) == std::vector<std::string>{"m", "v"});
  c.amsgrad = true;
  CHECK(names(*make_optimizer(c, 4, Device{})) == std::vector<std::string>{"m", "v", "vhat"});
  c.type = OptimizerKind::RMSprop;
  CHECK(names(*make_optimizer(c, 4, Device{})) == std::vector<std::string>{"rms", "momentum"});
  c.centered = true;
  CHECK(names(*make_optimizer(c, 4, Device{})) == std::vector<std::string>{"rms", "momentum", "mg"});
  c.momentum = 0;
  CHECK(names(*make_optimizer(c, 4, Device{})) == std::vector<std::string>{"rms", "mg"});
  c.centered = false;
  CHECK(names(*make_optimizer(c, 4, Device{})) == std::vector<std::string>{"rms"});

  c.type = OptimizerKind::SGD;
  c.decay = 1.0;
  auto opt = make_optimizer(c, 1, Device{});
  opt->set_iterations(4);
  CHECK(opt->iterations() == 4);
  CHECK(opt->current_learning_rate() == Approx(c.learning_rate / 5));
}

TEST_CASE("Adam resumed from saved state continues identically", "[optimizer]") {
  OptimizerConfig c;
  c.type = OptimizerKind::Adam;
  c.amsgrad = GENERATE(false, true);
  c.beta_2 = 0.5;
  INFO("amsgrad " << c.amsgrad);
  auto a = make_optimizer(c, 3, Device{});
  std::vector<float> w = kStart;
  a->step(w.data(), kGrads[0].data());
  auto b = make_optimizer(c, 3, Device{});
  auto sa = a->state(), sb = b->state();
  for (size_t i = 0; i < sa.size(); ++i) *sb[i].second = *sa[i].second;
  b->set_iterations(a->iterations());
  std::vector<float> wa = w, wb = w;
  a->step(wa.data(), kGrads[1].data());
  b->step(wb.data(), kGrads[1].data());
  CHECK(wa == wb);
}

namespace {

LearningRateSchedule schedule(ScheduleKind type) {
  LearningRateSchedule s;
  s.type = type;
  s.initial_learning_rate = 0.1;
  s.decay_steps = 10;
  return s;
}

}  // namespace

TEST_CASE("learning-rate schedules give keras.optimizers.schedules' values", "[optimizer]") {
  // Values worked out by hand from the formulas of Keras 3's learning_rate_schedule.py.
  LearningRateSchedule e = schedule(ScheduleKind::ExponentialDecay);
  e.decay_rate = 0.5;
  CHECK(scheduled_learning_rate(e, 0) == Approx(0.1));
  CHECK(scheduled_learning_rate(e, 5) == Approx(0.1 * std::sqrt(0.5)));
  e.staircase = true;
  CHECK(scheduled_learning_rate(e, 15) == Approx(0.05));
  CHECK(scheduled_learning_rate(e, 20) == Approx(0.025));

  LearningRateSchedule i = schedule(ScheduleKind::InverseTimeDecay);
  i.decay_rate = 1;
  CHECK(scheduled_learning_rate(i, 10) == Approx(0.05));
  CHECK(scheduled_learning_rate(i, 5) == Approx(0.1 / 1.5));
  i.staircase = true;
  CHECK(scheduled_learning_rate(i, 19) == Approx(0.05));

  LearningRateSchedule p = schedule(ScheduleKind::PolynomialDecay);
  p.end_learning_rate = 0.01;
  p.power = 2;
  CHECK(scheduled_learning_rate(p, 5) == Approx(0.09 * 0.25 + 0.01));
  CHECK(scheduled_learning_rate(p, 20) == Approx(0.01));  // held after decay_steps
  p.cycle = true;
  CHECK(scheduled_learning_rate(p, 0) == Approx(0.1));
  CHECK(scheduled_learning_rate(p, 15) == Approx(0.09 * 0.0625 + 0.01));  // over 20 steps

  LearningRateSchedule w;
  w.type = ScheduleKind::PiecewiseConstantDecay;
  w.boundaries = {10, 20};
  w.values = {1, 0.5, 0.1};
  CHECK(scheduled_learning_rate(w, 10) == 1);
  CHECK(scheduled_learning_rate(w, 11) == 0.5);
  CHECK(scheduled_learning_rate(w, 20) == 0.5);
  CHECK(scheduled_learning_rate(w, 21) == 0.1);

  LearningRateSchedule c = schedule(ScheduleKind::CosineDecay);
  c.decay_steps = 100;
  c.alpha = 0.1;
  CHECK(scheduled_learning_rate(c, 0) == Approx(0.1));
  CHECK(scheduled_learning_rate(c, 50) == Approx(0.1 * (0.9 * 0.5 + 0.1)));
  CHECK(scheduled_learning_rate(c, 200) == Approx(0.01));
  c.initial_learning_rate = 0;
  c.alpha = 0;
  c.warmup = true;
  c.warmup_target = 0.1;
  c.warmup_steps = 10;
  CHECK(scheduled_learning_rate(c, 5) == Approx(0.05));
  CHECK(scheduled_learning_rate(c, 10) == Approx(0.1));
  CHECK(scheduled_learning_rate(c, 60) == Approx(0.05));
  CHECK(scheduled_learning_rate(c, 1000) == Approx(0.0).margin(1e-15));

  // SGDR with Keras's defaults t_mul 2, m_mul 1: periods of 10, 20, 40 steps.
  LearningRateSchedule r = schedule(ScheduleKind::CosineDecayRestarts);
  CHECK(scheduled_learning_rate(r, 0) == Approx(0.1));
  CHECK(scheduled_learning_rate(r, 5) == Approx(0.05));
  CHECK(scheduled_learning_rate(r, 9) == Approx(0.05 * (1 + std::cos(M_PI * 0.9))));
  CHECK(scheduled_learning_rate(r, 10) == Approx(0.1));  // the first restart
  CHECK(scheduled_learning_rate(r, 20) == Approx(0.05));
  CHECK(scheduled_learning_rate(r, 30) == Approx(0.1));  // the second, after 10 + 20
  CHECK(scheduled_learning_rate(r, 70) == Approx(0.1));  // the third, after 10 + 20 + 40
  CHECK(scheduled_learning_rate(r, 69) == Approx(0.05 * (1 + std::cos(M_PI * 39 / 40))));
  r.t_mul = 1;
  r.m_mul = 0.5;
  r.alpha = 0.2;
  CHECK(scheduled_learning_rate(r, 25) == Approx(0.1 * (0.8 * 0.25 * 0.5 + 0.2)));  // restart 2, halfway
  CHECK(scheduled_learning_rate(r, 40) == Approx(0.1 * (0.8 * 0.0625 + 0.2)));  // restart 4
  r.t_mul = 3;  // periods of 10, 30, 90: restarts at 10, 40, 130, 400, 1210
  r.m_mul = 1;
  r.alpha = 0;
  for (int64_t start : {10, 40, 130, 400, 1210, 3640}) {
    INFO("restart at step " << start);
    CHECK(scheduled_learning_rate(r, start) == Approx(0.1));
    CHECK(scheduled_learning_rate(r, start - 1) < 0.0025);  // the end of the period before
  }
  CHECK(schedule_text(c) ==
        "CosineDecay(initial_learning_rate=0, decay_steps=100, alpha=0, warmup_target=0.1, warmup_steps=10)");
}

TEST_CASE("an optimizer with a schedule takes each step's rate from it (iterations = steps done)", "[optimizer]") {
  OptimizerConfig c;
  c.type = OptimizerKind::SGD;
  c.schedule.type = ScheduleKind::PiecewiseConstantDecay;
  c.schedule.boundaries = {0, 1};
  c.schedule.values = {0.1, 0.01, 0.001};  // steps 0, 1, 2
  c.learning_rate = 0.1;
  std::vector<double> want(kStart.begin(), kStart.end());
  const double rates[] = {0.1, 0.01, 0.001};
  for (size_t t = 0; t < kGrads.size(); ++t)
    for (size_t k = 0; k < 3; ++k) want[k] -= rates[t] * kGrads[t][k];
  check_close(run(c), want);
}

TEST_CASE("resume refuses a change of which optimizer slots exist, in either direction", "[optimizer][resume]") {
  // (type, the setting, its value with the slot, without it): each changed way is refused with the fix,
  // naming the checkpoint's value.
  auto with = [](Config c, OptimizerKind type, const std::string& key, bool on) {
    OptimizerConfig& o = c.training.optimizer;
    o.type = type;
    if (key == "amsgrad") o.amsgrad = on;
    if (key == "centered") o.centered = on;
    if (key == "momentum") o.momentum = on ? 0.9 : 0;
    return c;
  };
  for (const auto& [type, key, on_text, off_text] :
       {std::tuple<OptimizerKind, std::string, std::string, std::string>{OptimizerKind::Adam, "amsgrad", "true",
                                                                          "false"},
        {OptimizerKind::AdamW, "amsgrad", "true", "false"},
        {OptimizerKind::RMSprop, "centered", "true", "false"},
        {OptimizerKind::SGD, "momentum", "0.9", "0"},
        {OptimizerKind::RMSprop, "momentum", "0.9", "0"}})
    for (bool then_on : {false, true}) {
      INFO(optimizer_name(type) << " " << key << " then " << then_on);
      const Config then = with(Config{}, type, key, then_on), now = with(Config{}, type, key, !then_on);
      const std::string then_text = then_on ? on_text : off_text, now_text = then_on ? off_text : on_text;
      CHECK_THROWS_WITH(resume_differences(now, then, "last.h5"),
                        Catch::StartsWith("last.h5 was trained with " + key + " " + then_text +
                                          ", the config says " + now_text) &&
                            Catch::EndsWith("cannot carry over: set training.optimizer." + key + " to " + then_text +
                                            " to resume"));
      CHECK(resume_differences(then, then, "last.h5").empty());
    }
  // Another momentum above 0 keeps the slot: a warning only.
  Config then = with(Config{}, OptimizerKind::SGD, "momentum", true), now = then;
  now.training.optimizer.momentum = 0.5;
  CHECK(resume_differences(now, then, "last.h5") ==
        std::vector<std::string>{"training.optimizer.momentum is 0.5 (the checkpoint's run used 0.9)"});
}
