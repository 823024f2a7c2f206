#pragma once
// Communicator: collective operations among the towers (replicas) of one run.
// Every rank calls each collective, in the same order, with the same count;
// a call returns when all ranks have contributed. Results are bitwise identical
// on every rank (the sum is formed once, in rank order), so replicas that apply
// the same update stay identical.
#include <cstddef>

namespace trainer {

class Communicator {
 public:
  virtual ~Communicator() = default;
  /// Number of ranks (towers).
  virtual int size() const = 0;
  /// In place: data[i] <- sum over ranks of data[i]. n elements.
  virtual void all_reduce_sum(int rank, float* data, size_t n) = 0;
  /// Double-precision variant for counts that exceed float's 2^24 exact range
  /// (pixel counts of a validation set, loss sums).
  virtual void all_reduce_sum(int rank, double* data, size_t n) = 0;
  /// In place: every rank receives root's data. n elements.
  virtual void broadcast(int rank, float* data, size_t n, int root) = 0;
};

}  // namespace trainer
