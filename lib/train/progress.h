#pragma once
// Keras-style per-epoch output on stdout. With a terminal: a progress bar
// redrawn in place ("12/52 [=====>......] - loss: 0.4123"); otherwise (logs,
// CI) plain lines only. Each epoch ends with one line:
//   Epoch 3/30 - 52 steps - 35.2s - 11.8 images/s - loss: 0.4123 - val_loss: 0.3512 ...
// or, in JSON mode (for scripts), one JSON object per epoch:
//   {"epoch": 3, "epochs": 30, "steps": 52, "seconds": 35.2, "images_per_s": 11.8, "loss": 0.4123, ...}
// Without a bar, an epoch longer than a minute also logs its progress on
// stderr once a minute, so that a log (or a CI job that ends a job after
// minutes without output) sees the run go on.
#include <chrono>
#include <map>
#include <string>
#include <vector>

namespace trainer {

class Progress {
 public:
  /// bar: redraw a progress bar (ignored with json); json: JSON lines instead
  /// of text; metrics: the config's, in its order (format_logs); quiet_limit:
  /// without a bar, the longest time an epoch goes on without a line on
  /// stderr ("epoch 3/30: step 40/52, loss 0.4123").
  Progress(bool bar, bool json, int epochs, int steps, std::vector<std::string> metrics = {},
           std::chrono::steady_clock::duration quiet_limit = std::chrono::minutes(1))
      : bar_(bar && !json), json_(json), epochs_(epochs), steps_(steps), metrics_(std::move(metrics)),
        quiet_limit_(quiet_limit) {}
  void start_epoch(int epoch);
  /// After step (1-based) of the epoch; loss: running mean over the epoch.
  void step(int step, double loss);
  /// logs in Keras order: loss, metrics, val_loss, val_metrics. seconds: epoch
  /// wall time; images_per_second: training samples over training time.
  void end_epoch(const std::map<std::string, double>& logs, double seconds, double images_per_second);

 private:
  bool bar_, json_;
  int epochs_, steps_, epoch_ = 0;
  std::vector<std::string> metrics_;
  std::chrono::steady_clock::duration quiet_limit_;
  std::chrono::steady_clock::time_point last_line_;  ///< The epoch's start or its last stderr line.
};

/// "loss: 0.4123 - mean_iou: 0.5012 - val_loss: ..." as Keras prints them: the
/// training entries, loss first, then the metrics in metrics' order (the
/// config's), then the val_ entries alike, then learning_rate.
std::string format_logs(const std::map<std::string, double>& logs, const std::vector<std::string>& metrics);

}  // namespace trainer
