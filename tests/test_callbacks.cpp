// EarlyStopping / ModelCheckpoint / ReduceLROnPlateau decisions, filepath
// formatting, and CsvLogger continuing a log.
#include <catch2/catch.hpp>
#include <sys/resource.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>

#include "config/sections.h"
#include "core/error.h"
#include "train/callbacks.h"
#include "train/csv_logger.h"

using namespace trainer;

namespace {

EarlyStoppingConfig es(const std::string& monitor, int patience, double min_delta = 0,
                       MonitorMode mode = MonitorMode::Auto) {
  EarlyStoppingConfig c;
  c.enabled = true;
  c.monitor = monitor;
  c.patience = patience;
  c.min_delta = min_delta;
  c.mode = mode;
  return c;
}

/// The epoch (1-based, values[0] is epoch 1) at which on_epoch_end first returns true, or -1.
int stop_epoch(EarlyStopping& e, const std::vector<double>& values) {
  for (size_t i = 0; i < values.size(); ++i)
    if (e.on_epoch_end(int(i) + 1, values[i])) return int(i) + 1;
  return -1;
}

}  // namespace

TEST_CASE("monitor_is_max resolves auto like Keras, explicit modes win", "[callbacks]") {
  CHECK_FALSE(monitor_is_max("val_loss", MonitorMode::Auto));
  CHECK_FALSE(monitor_is_max("loss", MonitorMode::Auto));
  CHECK(monitor_is_max("val_accuracy", MonitorMode::Auto));
  CHECK(monitor_is_max("acc", MonitorMode::Auto));
  CHECK(monitor_is_max("val_mean_iou", MonitorMode::Auto));
  CHECK(monitor_is_max("dice", MonitorMode::Auto));
  CHECK_FALSE(monitor_is_max("val_dice_loss", MonitorMode::Auto));
  for (const std::string& m : metric_names()) {  // every metric is better higher (Keras's _direction "up")
    INFO(m);
    CHECK(monitor_is_max(m, MonitorMode::Auto));
    CHECK(monitor_is_max("val_" + m, MonitorMode::Auto));
  }
  CHECK(monitor_is_max("val_loss", MonitorMode::Max));
  CHECK_FALSE(monitor_is_max("val_mean_iou", MonitorMode::Min));
}

TEST_CASE("EarlyStopping with patience on a loss", "[callbacks]") {
  EarlyStopping e(es("val_loss", 2));
  CHECK(stop_epoch(e, {1.0, 0.9, 0.95, 0.92, 0.91, 0.5}) == 4);
  CHECK(e.best() == 0.9);
  CHECK(e.best_epoch() == 2);
  CHECK(e.wait() == 2);
  CHECK_FALSE(e.improved());
}

TEST_CASE("EarlyStopping min_delta: gains not larger than min_delta do not count", "[callbacks]") {
  EarlyStopping e(es("val_loss", 1, 0.05));
  CHECK_FALSE(e.on_epoch_end(1, 1.0));
  CHECK(e.improved());
  CHECK_FALSE(e.on_epoch_end(2, 0.94));  // 0.06 better: improvement
  CHECK(e.improved());
  CHECK(e.best() == 0.94);
  CHECK(e.on_epoch_end(3, 0.90));        // only 0.04 better: wait 1 >= patience 1
  CHECK(e.best() == 0.94);
  CHECK(e.best_epoch() == 2);
}

TEST_CASE("EarlyStopping in max mode (auto on mean_iou and explicit)", "[callbacks]") {
  for (MonitorMode mode : {MonitorMode::Auto, MonitorMode::Max}) {
    EarlyStopping e(es("val_mean_iou", 2, 0.0, mode));
    CHECK(stop_epoch(e, {0.1, 0.3, 0.2, 0.35, 0.35, 0.34, 0.9}) == 6);
    CHECK(e.best() == 0.35);
    CHECK(e.best_epoch() == 4);
  }
  // The same values watched as a loss stop early: 0.3 > 0.1 is worse.
  EarlyStopping m(es("val_mean_iou", 2, 0.0, MonitorMode::Min));
  CHECK(stop_epoch(m, {0.1, 0.3, 0.2, 0.35}) == 3);
}

TEST_CASE("EarlyStopping patience 0 stops at the first epoch without improvement, and NaN never improves",
          "[callbacks]") {
  EarlyStopping e(es("val_loss", 0));
  CHECK(stop_epoch(e, {3.0, 2.0, 1.0, 1.5}) == 4);
  EarlyStopping n(es("val_loss", 1));
  CHECK_FALSE(n.on_epoch_end(1, 1.0));
  CHECK(n.on_epoch_end(2, std::nan("")));
  CHECK_FALSE(n.improved());
  // As Keras 3 (checked with its EarlyStopping on all-NaN values), the first watched epoch counts as an
  // improvement, even a NaN: it never stops and resets the wait, so patience p stops at watched epoch
  // max(p, 1) + 1.
  for (int start : {0, 3})
    for (int patience : {0, 1, 2, 3}) {
      EarlyStoppingConfig c = es("val_loss", patience);
      c.start_from_epoch = start;
      EarlyStopping f(c);
      INFO("start_from_epoch " << start << " patience " << patience);
      int stop = 0;
      for (int epoch = 1; epoch <= 10 && !stop; ++epoch)
        if (f.on_epoch_end(epoch, std::nan(""))) stop = epoch;
      CHECK(stop == start + std::max(patience, 1) + 1);
      CHECK_FALSE(f.improved());
      CHECK(f.best_epoch() == -1);
    }
}

TEST_CASE("EarlyStopping start_from_epoch: the first epochs are not watched, as Keras 3", "[callbacks]") {
  EarlyStoppingConfig c = es("val_loss", 1);
  c.start_from_epoch = 2;  // Keras's epochs 0 and 1: the log's 1 and 2
  EarlyStopping e(c);
  CHECK_FALSE(e.on_epoch_end(1, 0.5));
  CHECK_FALSE(e.on_epoch_end(2, 0.4));
  CHECK_FALSE(e.improved());
  CHECK(e.best_epoch() == -1);
  CHECK(e.wait() == 0);
  // Epoch 3 (0.9, worse than either unwatched epoch) is the first best, epoch 4 the first wait.
  CHECK(stop_epoch(e, {0.5, 0.4, 0.9, 0.95}) == 4);
  CHECK(e.best() == 0.9);
  CHECK(e.best_epoch() == 3);
  // Without start_from_epoch the same values stop at epoch 3.
  EarlyStopping plain(es("val_loss", 1));
  CHECK(stop_epoch(plain, {0.5, 0.4, 0.9, 0.95}) == 3);
}

TEST_CASE("EarlyStopping watching from a later epoch takes that epoch's value as the first best", "[callbacks]") {
  // A run from initial_epoch 4, or a val_* monitor that validation_freq first gives at epoch 5: Keras's
  // best starts as None, so the first value seen never stops the run, a NaN included.
  EarlyStopping e(es("val_loss", 1));
  e.watch_from(5);
  CHECK_FALSE(e.on_epoch_end(5, std::nan("")));
  CHECK(e.wait() == 0);
  CHECK(e.on_epoch_end(7, 1.0) == false);  // the first real value improves on the NaN's unset best
  CHECK(e.on_epoch_end(9, 2.0));
}

TEST_CASE("EarlyStopping baseline: improving without beating it does not reset the wait, as Keras 3", "[callbacks]") {
  EarlyStoppingConfig c = es("val_loss", 2);
  c.baseline = 0.5;
  {
    // Each epoch improves on the best, none beats 0.5: the wait grows anyway;
    // an improving epoch never stops, so the run ends at the first that does not improve.
    EarlyStopping e(c);
    CHECK(stop_epoch(e, {0.9, 0.8, 0.7, 0.75}) == 4);
    CHECK(e.best() == 0.7);
    CHECK(e.best_epoch() == 3);
    CHECK(e.wait() == 4);
    CHECK(e.below_baseline());
  }
  {
    // Beating the baseline resets the wait like any improvement without one.
    EarlyStopping e(c);
    // (Had epoch 3's 0.4 not reset it, epoch 4 would stop with a wait of 4.)
    CHECK(stop_epoch(e, {0.9, 0.8, 0.4, 0.45, 0.3, 0.35, 0.36}) == 7);
    CHECK(e.best_epoch() == 5);
    CHECK_FALSE(e.below_baseline());
  }
  {
    // min_delta applies to the baseline too (Keras's _is_improvement): 0.48 is not below 0.5 - 0.05.
    EarlyStoppingConfig d = c;
    d.min_delta = 0.05;
    d.patience = 1;
    EarlyStopping e(d);
    CHECK_FALSE(e.on_epoch_end(1, 0.48));
    CHECK(e.improved());
    CHECK(e.wait() == 1);
    CHECK(e.below_baseline());
    CHECK(e.on_epoch_end(2, 0.47));  // not 0.05 better than 0.48: wait 2 >= 1
  }
  {
    // In max mode the baseline is a floor to rise above.
    EarlyStoppingConfig m = es("val_mean_iou", 1);
    m.baseline = 0.6;
    EarlyStopping e(m);
    CHECK_FALSE(e.on_epoch_end(1, 0.5));
    CHECK(e.wait() == 1);
    CHECK_FALSE(e.on_epoch_end(2, 0.65));
    CHECK(e.wait() == 0);
    CHECK_FALSE(e.below_baseline());
  }
}

TEST_CASE("CheckpointPolicy saves every epoch or only on improvement", "[callbacks]") {
  ModelCheckpointConfig c;
  c.monitor = "val_loss";
  CheckpointPolicy every(c);
  CHECK(every.should_save(1.0));
  CHECK(every.should_save(2.0));
  CHECK(every.best() == 1.0);

  c.save_best_only = true;
  CheckpointPolicy best(c);
  CHECK(best.should_save(1.0));
  CHECK_FALSE(best.should_save(1.0));  // equal is no improvement
  CHECK(best.should_save(0.999));
  CHECK_FALSE(best.should_save(2.0));
  CHECK(best.best() == 0.999);

  c.monitor = "val_dice";
  CheckpointPolicy maxp(c);
  CHECK(maxp.should_save(0.2));
  CHECK_FALSE(maxp.should_save(0.1));
  CHECK(maxp.should_save(0.3));
}

TEST_CASE("format_filepath follows Python str.format for the supported specs", "[callbacks]") {
  const std::map<std::string, double> logs = {{"val_loss", 0.123456}, {"val_mean_iou", 0.87654}, {"loss", 1.0}};
  CHECK(format_filepath("w.{epoch:03d}-{val_loss:.4f}.h5", 7, logs) == "w.007-0.1235.h5");
  CHECK(format_filepath("e{epoch}", 12, logs) == "e12");
  CHECK(format_filepath("{val_mean_iou:.3f}", 1, logs) == "0.877");
  CHECK(format_filepath("{loss}", 1, logs) == "1.0");
  CHECK(format_filepath("{val_loss}", 1, logs) == "0.123456");
  CHECK(format_filepath("{epoch:.2f}", 3, logs) == "3.00");
  CHECK(format_filepath("{epoch:4d}|{val_loss:8.3f}|{val_loss:08.3f}", 5, logs) == "   5|   0.123|0000.123");
  CHECK(format_filepath("{{epoch}}", 5, logs) == "{epoch}");
  CHECK(format_filepath("ep{epoch:02}-{epoch:3}", 7, logs) == "ep07-  7");  // an int's type d may be left out
  CHECK(format_filepath("plain.h5", 5, logs) == "plain.h5");
}

TEST_CASE("format_filepath errors name the placeholder", "[callbacks]") {
  const std::map<std::string, double> logs = {{"val_loss", 0.5}};
  CHECK_THROWS_WITH(format_filepath("m-{val_iou:.2f}.h5", 1, logs),
                    Catch::Contains("{val_iou:.2f}") && Catch::Contains("known: epoch, val_loss"));
  CHECK_THROWS_WITH(format_filepath("{val_loss:d}", 1, logs), Catch::Contains("{val_loss:d}"));
  CHECK_THROWS_WITH(format_filepath("{epoch:x}", 1, logs), Catch::Contains("unsupported format spec 'x'"));
  CHECK_THROWS_WITH(format_filepath("{val_loss:.3}", 1, logs), Catch::Contains("unsupported format spec '.3'"));
  CHECK_THROWS_WITH(format_filepath("{epoch:.2}", 1, logs), Catch::Contains("unsupported format spec '.2'"));
  CHECK_THROWS_WITH(format_filepath("{epoch:.f}", 1, logs), Catch::Contains("{epoch:.f}"));
  CHECK_THROWS_WITH(format_filepath("{epoch:+d}", 1, logs), Catch::Contains("{epoch:+d}"));
  CHECK_THROWS_WITH(format_filepath("m-{epoch", 1, logs), Catch::Contains("never closed"));
  CHECK_THROWS_WITH(format_filepath("m-}", 1, logs), Catch::Contains("single '}'"));
  CHECK_THROWS_AS(format_filepath("{}", 1, logs), UserError);
}

namespace {

ReduceLROnPlateauConfig plateau(double factor, int patience, int cooldown, double min_lr, double min_delta = 0) {
  ReduceLROnPlateauConfig c;
  c.enabled = true;
  c.factor = factor;
  c.patience = patience;
  c.cooldown = cooldown;
  c.min_lr = min_lr;
  c.min_delta = min_delta;
  return c;
}

/// The learning rate after each epoch's on_epoch_end, starting from lr.
std::vector<double> rates(ReduceLROnPlateau& r, double lr, const std::vector<double>& values) {
  std::vector<double> out;
  for (double v : values) out.push_back(lr = r.on_epoch_end(v, lr));
  return out;
}

}  // namespace

// Expected sequences worked through Keras 3.x's ReduceLROnPlateau.on_epoch_end
// (reduce_lr_on_plateau.py) by hand.
TEST_CASE("ReduceLROnPlateau follows Keras: patience, cooldown, min_lr", "[callbacks]") {
  // Improves twice, then flat: reduces every 2 epochs (the last cooldown epoch
  // counts again), halving down to min_lr 0.1, then stays there.
  ReduceLROnPlateau r(plateau(0.5, 2, 1, 0.1));
  const std::vector<double> got = rates(r, 1.0, {1.0, 0.9, 0.95, 0.95, 0.95, 0.95, 0.95, 0.95, 0.95, 0.95, 0.95, 0.95});
  const std::vector<double> want = {1.0, 1.0, 1.0, 0.5, 0.5, 0.25, 0.25, 0.125, 0.125, 0.1, 0.1, 0.1};
  CHECK(got == want);
  CHECK(r.best() == 0.9);
  CHECK(r.wait() == 2);  // at min_lr nothing is reduced, so the count goes on
  // patience 0 reduces at the first epoch without improvement.
  ReduceLROnPlateau p0(plateau(0.1, 0, 0, 0));
  const std::vector<double> zero = rates(p0, 0.01, {3, 2, 2, 1.5});
  CHECK(zero[0] == 0.01);
  CHECK(zero[1] == 0.01);
  CHECK(zero[2] == Approx(0.001));
  CHECK(zero[3] == Approx(0.001));
  // cooldown 2: one quiet epoch after each reduction (the second ends the cooldown and counts).
  ReduceLROnPlateau cd(plateau(0.5, 1, 2, 0));
  CHECK(rates(cd, 1.0, {1, 1, 1, 1, 1, 1, 1}) == std::vector<double>{1.0, 0.5, 0.5, 0.25, 0.25, 0.125, 0.125});
}

TEST_CASE("ReduceLROnPlateau: min_delta, max mode, NaN, restore", "[callbacks]") {
  // Keras's default min_delta 1e-4: a gain of 5e-5 is no improvement.
  ReduceLROnPlateau r(plateau(0.5, 1, 0, 0, 1e-4));
  CHECK(rates(r, 1.0, {1.0, 0.99995, 0.5}) == std::vector<double>{1.0, 0.5, 0.5});
  ReduceLROnPlateauConfig c = plateau(0.5, 1, 0, 0);
  c.monitor = "val_mean_iou";  // auto: maximised
  ReduceLROnPlateau up(c);
  CHECK(rates(up, 1.0, {0.2, 0.3, 0.25}) == std::vector<double>{1.0, 1.0, 0.5});
  ReduceLROnPlateau nan(plateau(0.5, 1, 0, 0));
  CHECK(rates(nan, 1.0, {1.0, std::nan("")}) == std::vector<double>{1.0, 0.5});
  // A restored state continues where it was saved.
  ReduceLROnPlateau a(plateau(0.5, 3, 0, 0)), b(plateau(0.5, 3, 0, 0));
  rates(a, 1.0, {1.0, 2.0, 2.0});
  b.restore(a.best(), a.wait(), a.cooldown_left());
  CHECK(b.on_epoch_end(2.0, 1.0) == 0.5);
}

TEST_CASE("CsvLogger continuing a log with other columns keeps every earlier value", "[callbacks]") {
  // Adding ReduceLROnPlateau on resume started log.csv anew,
  // dropping the finished epochs' rows.
  const std::string dir = "/tmp/trainer_csv_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/log.csv";
  {
    CsvLogger first(path);
    first.log(1, {{"loss", 0.5}, {"val_loss", 0.6}});
    first.log(2, {{"loss", 0.4}, {"val_loss", 0.55}});
  }
  {
    CsvLogger resumed(path, 2, path);
    resumed.log(3, {{"learning_rate", 0.001}, {"loss", 0.3}});  // val_loss gone, learning_rate new
  }
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), {});
  CHECK(text == "epoch,learning_rate,loss,val_loss\n0,NA,0.5,0.6\n1,NA,0.4,0.55\n2,0.001,0.3,NA\n");
  {
    CsvLogger same(path, 3, path);  // the same columns again: rows carried as they are
    same.log(4, {{"learning_rate", 0.0005}, {"loss", 0.2}});
  }
  std::ifstream again(path);
  CHECK(std::string((std::istreambuf_iterator<char>(again)), {}) == text + "3,0.0005,0.2,NA\n");
  std::filesystem::remove_all(dir);
}

TEST_CASE("CsvLogger takes val_* columns that first appear after epochs without validation", "[callbacks]") {
  // With validation_freq the first row may have no val_* value; the column comes with the first that has.
  const std::string dir = "/tmp/trainer_csv_grow_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/log.csv";
  {
    CsvLogger log(path, 2, "", {}, 2);  // initial_epoch 2: no earlier rows expected
    log.log(3, {{"loss", 0.5}});
    log.log(4, {{"loss", 0.4}, {"val_loss", 0.45}});
    log.log(5, {{"loss", 0.3}});
  }
  std::ifstream in(path);
  CHECK(std::string((std::istreambuf_iterator<char>(in)), {}) ==
        "epoch,loss,val_loss\n2,0.5,NA\n3,0.4,0.45\n4,0.3,NA\n");
  std::filesystem::remove_all(dir);
}

TEST_CASE("CsvLogger replaces the file at once: a replaced run's rows do not outlive this run's start",
          "[callbacks]") {
  // An --overwrite run stopped in its first epoch left the old run's rows in log.csv.
  const std::string dir = "/tmp/trainer_csv_start_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/log.csv";
  const auto read = [&] {
    std::ifstream in(path);
    return std::string((std::istreambuf_iterator<char>(in)), {});
  };
  {
    CsvLogger old(path);
    for (int e = 1; e <= 3; ++e) old.log(e, {{"loss", 1.0 / e}});
  }
  REQUIRE(read() == "epoch,loss\n0,1\n1,0.5\n2,0.333333333\n");
  {
    CsvLogger rewound(path, 1, path);  // resumed from epoch 1's checkpoint: epochs 2 and 3 go now
    CHECK(read() == "epoch,loss\n0,1\n");
  }
  {
    CsvLogger fresh(path);  // a new run: nothing of the old one stays
    CHECK_FALSE(std::filesystem::exists(path));
    fresh.log(1, {{"loss", 0.25}});
  }
  CHECK(read() == "epoch,loss\n0,0.25\n");
  std::filesystem::remove_all(dir);
}

TEST_CASE("CsvLogger writes a resumed checkpoint's missing last row from its logs, and warns of other gaps",
          "[callbacks]") {
  // From a batch-job trial: a process killed between last.h5 and its log row, or a run moved without its
  // log.csv, went on with rows missing and not a word.
  const std::string dir = "/tmp/trainer_csv_missing_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/log.csv", moved = dir + "/moved.csv";
  const auto read = [](const std::string& p) {
    std::ifstream in(p);
    return std::string((std::istreambuf_iterator<char>(in)), {});
  };
  {
    CsvLogger first(path);
    first.log(1, {{"loss", 0.5}, {"val_loss", 0.6}});
    first.log(2, {{"loss", 0.4}, {"val_loss", 0.55}});
  }
  {
    CsvLogger resumed(path, 3, path, {{"loss", 0.3}, {"val_loss", 0.5}});  // epoch 3's row was never written
    CHECK(read(path) == "epoch,loss,val_loss\n0,0.5,0.6\n1,0.4,0.55\n2,0.3,0.5\n");
  }
  {
    CsvLogger same(path, 3, path, {{"loss", 0.3}, {"val_loss", 0.5}});  // nothing missing: nothing added
    CHECK(read(path) == "epoch,loss,val_loss\n0,0.5,0.6\n1,0.4,0.55\n2,0.3,0.5\n");
  }
  {
    CsvLogger fresh(moved, 3, "", {{"loss", 0.3}});  // no earlier log: the checkpoint's row alone
    CHECK(read(moved) == "epoch,loss\n2,0.3\n");
  }
  {
    std::ofstream(path) << "epoch,loss,val_loss\n0,0.5,0.6\n1,0.4,0.55\n2,0.3";  // the last row cut short
    CsvLogger cut(path, 3, path, {{"loss", 0.3}, {"val_loss", 0.5}});
    CHECK(read(path) == "epoch,loss,val_loss\n0,0.5,0.6\n1,0.4,0.55\n2,0.3,0.5\n");
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("CsvLogger says so when a row cannot be written, instead of dropping every later row", "[callbacks]") {
  // Once an append failed (a full disk, a file-size limit), the stream's error stuck and the run
  // went on without a log and without a word. A file-size limit of 100 bytes (SIGXFSZ ignored, as the trainer
  // does) stands for the full disk here.
  const std::string dir = "/tmp/trainer_csv_full_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  rlimit before{};
  REQUIRE(getrlimit(RLIMIT_FSIZE, &before) == 0);
  rlimit small = before;
  small.rlim_cur = 100;
  REQUIRE(setrlimit(RLIMIT_FSIZE, &small) == 0);
  std::string error;
  {
    CsvLogger log(dir + "/log.csv");
    try {
      for (int e = 1; e <= 20; ++e) log.log(e, {{"loss", 0.123456789}});
    } catch (const UserError& e) {
      error = e.what();
    }
  }
  setrlimit(RLIMIT_FSIZE, &before);
  std::signal(SIGXFSZ, old_handler);
  CHECK_THAT(error, Catch::Contains("cannot write the training log '" + dir + "/log.csv' (is the disk full?)"));
  std::filesystem::remove_all(dir);
}
