#include "dist/local_communicator.h"

#include <cstring>

#include "core/buffer.h"
#include "core/error.h"

namespace trainer {

LocalCommunicator::LocalCommunicator(int size, std::vector<Device> devices)
    : size_(size),
      slots_(size_t(size), nullptr),
      bytes_(size_t(size), 0),
      devices_(devices.empty() ? std::vector<Device>(size_t(size)) : std::move(devices)),
      staging_(size_t(size)) {
  if (devices_.size() != size_t(size))
    throw InternalError("LocalCommunicator of " + std::to_string(size) + " ranks given " +
                        std::to_string(devices_.size()) + " devices");
}

template <typename T>
T* LocalCommunicator::host_view(int rank, T* data, size_t n, bool fill) {
  const Device& d = devices_[size_t(rank)];
  if (!d.is_cuda()) return data;
  std::vector<char>& buf = staging_[size_t(rank)];
  if (buf.size() < n * sizeof(T)) buf.resize(n * sizeof(T));
  T* host = reinterpret_cast<T*>(buf.data());
  if (fill) device_copy(Device{}, host, d, data, n * sizeof(T));
  return host;
}

template <typename T>
void LocalCommunicator::write_back(int rank, T* data, const T* host, size_t n) {
  const Device& d = devices_[size_t(rank)];
  if (d.is_cuda()) device_copy(d, data, Device{}, host, n * sizeof(T));
}

void LocalCommunicator::check_sizes() const {
  for (int r = 1; r < size_; ++r)
    if (bytes_[size_t(r)] != bytes_[0])
      throw InternalError("collective mismatch: rank 0 passed " + std::to_string(bytes_[0]) + " bytes, rank " +
                          std::to_string(r) + " passed " + std::to_string(bytes_[size_t(r)]));
}

void LocalCommunicator::abort(const std::string& reason) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!aborted_) reason_ = reason;
  aborted_ = true;
  cv_.notify_all();
}

void LocalCommunicator::barrier() {
  std::unique_lock<std::mutex> lock(mu_);
  if (aborted_) throw InternalError("collective aborted: " + reason_);
  unsigned long gen = generation_;
  if (++arrived_ == size_) {
    arrived_ = 0;
    ++generation_;
    cv_.notify_all();
    return;
  }
  cv_.wait(lock, [&] { return generation_ != gen || aborted_; });
  if (generation_ == gen) throw InternalError("collective aborted: " + reason_);
}

template <typename T>
void LocalCommunicator::reduce(int rank, T* device_data, size_t n) {
  if (size_ == 1) return;
  T* data = host_view(rank, device_data, n, true);
  std::vector<T>& sum = [this]() -> std::vector<T>& {
    if constexpr (std::is_same_v<T, float>) return fsum_;
    else return dsum_;
  }();
  slots_[size_t(rank)] = data;
  bytes_[size_t(rank)] = n * sizeof(T);
  if (rank == 0 && sum.size() < n) sum.resize(n);
  barrier();
  check_sizes();
  const size_t lo = n * size_t(rank) / size_t(size_), hi = n * size_t(rank + 1) / size_t(size_);
  for (size_t i = lo; i < hi; ++i) {
    T s = static_cast<T*>(slots_[0])[i];
    for (int r = 1; r < size_; ++r) s += static_cast<T*>(slots_[size_t(r)])[i];
    sum[i] = s;
  }
  barrier();
  std::memcpy(data, sum.data(), n * sizeof(T));
  barrier();
  write_back(rank, device_data, data, n);
}

void LocalCommunicator::all_reduce_sum(int rank, float* data, size_t n) { reduce(rank, data, n); }
void LocalCommunicator::all_reduce_sum(int rank, double* data, size_t n) { reduce(rank, data, n); }

void LocalCommunicator::broadcast(int rank, float* device_data, size_t n, int root) {
  if (size_ == 1) return;
  float* data = host_view(rank, device_data, n, rank == root);
  slots_[size_t(rank)] = data;
  bytes_[size_t(rank)] = n * sizeof(float) + 1;  // differs from every reduce of the same count
  barrier();
  check_sizes();
  if (rank != root) std::memcpy(data, slots_[size_t(root)], n * sizeof(float));
  barrier();
  if (rank != root) write_back(rank, device_data, data, n);
}

}  // namespace trainer
