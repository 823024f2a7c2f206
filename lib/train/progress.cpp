#include "train/progress.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>

#include "core/json_text.h"

namespace trainer {

std::string format_logs(const std::map<std::string, double>& logs, const std::vector<std::string>& metrics) {
  std::string out;
  char buf[96];
  const auto add = [&](const std::string& k, double v) {
    std::snprintf(buf, sizeof buf, "%s%s: %.4f", out.empty() ? "" : " - ", k.c_str(), v);
    out += buf;
  };
  for (const std::string prefix : {"", "val_"}) {
    // loss first within each group, then the metrics in the config's order, then any others by name
    std::vector<std::string> order = {prefix + "loss"};
    for (const auto& m : metrics) order.push_back(prefix + m);
    for (const auto& k : order)
      if (const auto it = logs.find(k); it != logs.end()) add(k, it->second);
    for (const auto& [k, v] : logs)
      if (k != "learning_rate" && (k.rfind("val_", 0) == 0) == !prefix.empty() &&
          std::find(order.begin(), order.end(), k) == order.end())
        add(k, v);
  }
  // Last, as Keras 3 prints it; %g, since 1e-05 would read 0.0000.
  if (auto lr = logs.find("learning_rate"); lr != logs.end()) {
    std::snprintf(buf, sizeof buf, "%slearning_rate: %.4g", out.empty() ? "" : " - ", lr->second);
    out += buf;
  }
  return out;
}

void Progress::start_epoch(int epoch) {
  epoch_ = epoch;
  last_line_ = std::chrono::steady_clock::now();
  if (bar_) std::printf("Epoch %d/%d\n", epoch, epochs_);
  std::fflush(stdout);
}

void Progress::step(int step, double loss) {
  if (!bar_) {
    const auto now = std::chrono::steady_clock::now();
    if (step < steps_ && now - last_line_ >= quiet_limit_) {
      spdlog::info("epoch {}/{}: step {}/{}, loss {:.4f}", epoch_, epochs_, step, steps_, loss);
      last_line_ = now;
    }
    return;
  }
  const int width = 30, done = step * width / steps_;
  std::string bar(size_t(done), '=');
  if (done < width) bar += '>' + std::string(size_t(width - done - 1), '.');
  std::printf("\r%d/%d [%s] - loss: %.4f", step, steps_, bar.c_str(), loss);
  std::fflush(stdout);
}

void Progress::end_epoch(const std::map<std::string, double>& logs, double seconds, double images_per_second) {
  if (json_) {
    std::printf("{\"epoch\": %d, \"epochs\": %d, \"steps\": %d, \"seconds\": %s, \"images_per_s\": %s", epoch_,
                epochs_, steps_, json_number(seconds).c_str(), json_number(images_per_second).c_str());
    for (const auto& [k, v] : logs) std::printf(", %s: %s", json_string(k).c_str(), json_number(v).c_str());
    std::printf("}\n");
    std::fflush(stdout);
    return;
  }
  if (bar_) std::printf("\r\033[K");
  std::printf("Epoch %d/%d - %d step%s - %.1fs - %.1f images/s - %s\n", epoch_, epochs_, steps_,
              steps_ == 1 ? "" : "s", seconds, images_per_second, format_logs(logs, metrics_).c_str());
  std::fflush(stdout);
}

}  // namespace trainer
