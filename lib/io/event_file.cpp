#include "io/event_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <boost/crc.hpp>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "core/error.h"
#include "io/tensorboard_event.pb.h"

namespace trainer {

namespace {

/// Seconds since the Unix epoch, as Event.wall_time holds them.
double wall_time() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

/// This machine's name for the file name ("localhost" when gethostname fails); '/' would make a folder of it.
std::string host_name() {
  char name[256] = {};
  std::string host = gethostname(name, sizeof name - 1) == 0 && name[0] ? name : "localhost";
  std::replace(host.begin(), host.end(), '/', '_');
  return host;
}

/// n as little-endian bytes.
template <typename T>
std::string little_endian(T n) {
  std::string bytes(sizeof(T), '\0');
  for (size_t i = 0; i < sizeof(T); ++i) bytes[i] = char((n >> (8 * i)) & 0xff);
  return bytes;
}

/// The n-byte little-endian unsigned integer at p.
uint64_t from_little_endian(const char* p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | uint8_t(p[i]);
  return v;
}

}  // namespace

uint32_t masked_crc32c(const void* data, size_t n) {
  boost::crc_optimal<32, 0x1EDC6F41, 0xFFFFFFFF, 0xFFFFFFFF, true, true> crc;
  crc.process_bytes(data, n);
  const uint32_t c = crc.checksum();
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

std::vector<std::string> read_event_records(const std::string& path, bool* damaged) {
  std::ifstream in(path, std::ios::binary);
  std::vector<std::string> events;
  bool bad = false;
  char head[12];
  while (in.read(head, sizeof head)) {
    const uint64_t n = from_little_endian(head, 8);
    // Zeros where a record would start: a file system's zero-filled tail after a power loss, an end, not damage.
    if (std::all_of(head, head + sizeof head, [](char c) { return c == 0; })) break;
    if (from_little_endian(head + 8, 4) != masked_crc32c(head, 8) || n > (uint64_t(1) << 30)) {  // a damaged length: nothing after it is sure
      bad = true;
      break;
    }
    std::string event(size_t(n), '\0');
    char tail[4];
    if (!in.read(event.data(), std::streamsize(n)) || !in.read(tail, sizeof tail)) break;  // cut short by the end
    if (from_little_endian(tail, 4) != masked_crc32c(event.data(), event.size())) {
      bad = true;
      break;
    }
    events.push_back(std::move(event));
  }
  if (damaged) *damaged = bad;
  return events;
}

std::vector<std::string> event_files_in(const std::string& dir) {
  std::vector<std::string> files;
  std::error_code ec;
  for (const auto& f : std::filesystem::directory_iterator(dir, ec))
    if (f.path().filename().string().rfind("events.out.tfevents.", 0) == 0) files.push_back(f.path().string());
  std::sort(files.begin(), files.end());
  return files;
}

EventFileWriter::EventFileWriter(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec || !std::filesystem::is_directory(dir))
    throw UserError("cannot create the TensorBoard folder '" + dir + "': " +
                    (ec ? ec.message() : std::string("a file of that name is in the way")) +
                    "; make its parent folder writable, or set the TensorBoard callback's log_dir to another folder");
  static std::atomic<int> writers{0};
  const long seconds = long(wall_time());
  path_ = (std::filesystem::path(dir) / ("events.out.tfevents." + std::to_string(seconds) + "." + host_name() + "." +
                                         std::to_string(getpid()) + "." + std::to_string(writers++) + ".v2"))
              .string();
  out_.open(path_, std::ios::binary | std::ios::trunc);
  if (!out_)
    throw UserError("cannot create the TensorBoard event file '" + path_ + "': " + std::strerror(errno) +
                    "; make the folder writable, or set the TensorBoard callback's log_dir to another folder");
  tensorboard::Event first;
  first.set_wall_time(wall_time());
  first.set_file_version("brain.Event:2");
  write_record(first.SerializeAsString());
}

void EventFileWriter::scalar(const std::string& tag, double value, int64_t step) {
  tensorboard::Event e;
  e.set_wall_time(wall_time());
  e.set_step(step);
  tensorboard::Summary::Value* v = e.mutable_summary()->add_value();
  v->set_tag(tag);
  v->set_simple_value(float(value));
  write_record(e.SerializeAsString());
}

void EventFileWriter::graph(const std::string& graph_def) {
  tensorboard::Event e;
  e.set_wall_time(wall_time());
  e.set_step(0);
  e.set_graph_def(graph_def);
  write_record(e.SerializeAsString());
}

void EventFileWriter::histogram(const std::string& tag, const std::vector<float>& values, int64_t step,
                                int buckets) {
  tensorboard::Event e;
  e.set_wall_time(wall_time());
  e.set_step(step);
  tensorboard::Summary::Value* v = e.mutable_summary()->add_value();
  v->set_tag(tag);
  tensorboard::HistogramProto* h = v->mutable_histo();
  double lo = INFINITY, hi = -INFINITY, num = 0, sum = 0, squares = 0;
  for (float x : values) {
    if (!std::isfinite(x)) continue;
    lo = std::min(lo, double(x));
    hi = std::max(hi, double(x));
    num += 1;
    sum += x;
    squares += double(x) * x;
  }
  if (num > 0) {
    const int k = hi > lo ? std::max(buckets, 1) : 1;
    const double width = (hi - lo) / k;
    std::vector<double> counts(size_t(k), 0.0);
    for (float x : values) {
      if (!std::isfinite(x)) continue;
      // Bucket i holds (lo + width i, lo + width (i + 1)]; the minimum goes into the first.
      const int i = k > 1 ? std::clamp(int(std::ceil((x - lo) / width)) - 1, 0, k - 1) : 0;
      counts[size_t(i)] += 1;
    }
    h->set_min(lo);
    h->set_max(hi);
    for (int i = 0; i < k; ++i) {
      h->add_bucket_limit(i + 1 < k ? lo + width * (i + 1) : hi);  // the last edge exactly the maximum
      h->add_bucket(counts[size_t(i)]);
    }
  }
  h->set_num(num);
  h->set_sum(sum);
  h->set_sum_squares(squares);
  write_record(e.SerializeAsString());
}

void EventFileWriter::sync() {
  const int fd = ::open(path_.c_str(), O_RDONLY);
  const bool ok = fd >= 0 && ::fsync(fd) == 0;
  const int err = errno;
  if (fd >= 0) ::close(fd);
  if (!ok)
    throw UserError("cannot write the TensorBoard event file '" + path_ + "' to disk: " + std::strerror(err) +
                    "; free some disk space, or set the TensorBoard callback's log_dir to another folder");
}

void EventFileWriter::write_record(const std::string& event) {
  const std::string length = little_endian<uint64_t>(event.size());
  out_ << length << little_endian(masked_crc32c(length.data(), length.size())) << event
       << little_endian(masked_crc32c(event.data(), event.size()));
  out_.flush();
  if (!out_)
    throw UserError("cannot write the TensorBoard event file '" + path_ + "': " + std::strerror(errno) +
                    "; free some disk space, or set the TensorBoard callback's log_dir to another folder (the "
                    "checkpoints written so far are kept)");
}

}  // namespace trainer
