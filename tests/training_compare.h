#pragma once
// Comparing training runs of one small network on different devices or in
// different precisions: the same batches of tiny_data() on fresh Trainers,
// then the losses per step and each weight tensor's change against a
// reference run (the CPU in fp32).
#include <string>
#include <vector>

#include "core/device.h"
#include "dist/device_plan.h"
#include "dist/process_group.h"
#include "train/trainer.h"

namespace trainer::testing {

/// Tolerances of the training comparisons (fp32): loss per step relative to
/// the reference's, weights |got - ref| / max(1, |ref|). Five SGD steps carry
/// the convolutions' ~1e-6 summation-order differences forward; 1e-3 leaves
/// room for a ReLU or a pooling maximum that flips on a near tie.
constexpr double kLossTolFp32 = 1e-3, kWeightTolFp32 = 1e-3;
/// Loss per step in reduced precision: tf32 and bf16 round the convolutions'
/// inputs by up to 2^-11 and 2^-8 relative, and a bf16 tower also stores the
/// activations between its bf16-capable layers in bf16 (2^-8 each); the
/// loss, metrics, weights and optimizer stay fp32.
constexpr double kLossTolTf32 = 1e-2, kLossTolBf16 = 5e-2;
/// A weight tensor's change over the five bf16 steps against the reference's,
/// relative to its largest change (check_weight_changes): the roundings above
/// give a few percent; a lost or misrouted gradient gives tens of percent.
constexpr double kWeightChangeTolBf16 = 0.1;

/// Every layer type of the U-Net, plus synchronized BN and Dropout (tiny_model.h).
extern const std::string kTinyConfig;

/// Batches of tiny_data(): 5, 5 (uneven over 2 towers), a short one of 3,
/// one of 2 (a sample per tower), and a shuffled one.
extern const std::vector<std::vector<int>> kBatches;

/// The devices of spec, as --gpus takes it.
DevicePlan plan(const std::string& spec);

/// Every weight value of a trainer, in model order.
std::vector<float> all_weights(const Trainer& t);

struct TrainRun {
  std::vector<double> losses;
  std::vector<float> weights;
  std::vector<WeightRecord> records;  ///< The same weights per tensor.
};

/// kBatches on a fresh Trainer of `yaml` over the devices of
/// spec (as --gpus), convolutions in precision p.
TrainRun train_run(const std::string& spec, Precision p, const std::string& yaml = kTinyConfig,
                   ProcessGroup* world = nullptr);

/// Per trainable weight tensor: the change over training against the
/// reference's, max |dgot - dref| / max |dref| (d = trained - initial), at
/// most tol. Unlike the losses, this sees a gradient that goes to the wrong
/// tensor or is lost (a skip connection's sum), which moves that tensor's
/// change by a large fraction of itself.
void check_weight_changes(const std::vector<WeightRecord>& got, const std::vector<WeightRecord>& ref,
                          const std::vector<WeightRecord>& initial, double tol);

/// Each loss finite and within tol of the reference's, relative.
void check_losses(const std::vector<double>& got, const std::vector<double>& ref, double tol);

}  // namespace trainer::testing
