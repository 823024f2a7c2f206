#!/usr/bin/env bash
# Validation mean_iou of bf16 beside fp32 on real images, epoch by epoch:
# configs/unet_small_dsb.yaml (596 DSB 2018 images, ../shared/data/dsb2018)
# trained on one CPU tower in fp32 and in bf16 with the same seeds, for a
# fixed number of epochs (its EarlyStopping and ModelCheckpoint removed, so
# every run has every epoch). Prints per epoch the mean over the seeds of
# each precision, their difference, and the spread between the fp32 seeds
# (what one precision gives from run to run), then the largest differences
# from FROM_EPOCH on. Runs go to $OUT (default /tmp/dsb_precision).
#   bash bench/dsb_precision.sh [epochs (30)] [seeds ("42 43 44")]
# Environment: FROM_EPOCH (10), OUT, TRAINER (build/trainer).
set -euo pipefail
cd "$(dirname "$0")/.."
epochs=${1:-30}
seeds=${2:-42 43 44}
from=${FROM_EPOCH:-10}
out=${OUT:-/tmp/dsb_precision}
trainer=${TRAINER:-build/trainer}
[ -x "$trainer" ] || { echo "build first: bash scripts/setup.sh" >&2; exit 2; }
[ -d ../shared/data/dsb2018/flat/train_im ] || { echo "the DSB images are missing: ../shared/data/dsb2018/flat" >&2; exit 2; }
mkdir -p "$out"
config="$out/unet_small_dsb_fixed.yaml"
# The config without its callbacks (the key and its indented list): every run trains all epochs.
awk '/^  callbacks:/ {skip = 1; next} skip && /^    / {next} {skip = 0; print}' configs/unet_small_dsb.yaml > "$config"
grep -q callbacks "$config" && { echo "could not remove the callbacks from configs/unet_small_dsb.yaml" >&2; exit 2; }
for seed in $seeds; do
  for precision in fp32 bf16; do
    run="$out/$precision-$seed-$epochs"
    [ -f "$run/final.h5" ] && continue  # done in an earlier call
    echo "seed $seed $precision" >&2
    "$trainer" --config "$config" --gpus cpu --precision "$precision" --seed "$seed" --epochs "$epochs" \
      --output "$run" --overwrite > "$run.log" 2>&1
  done
done
python3 - "$out" "$from" "$epochs" $seeds <<'PY'
import csv, statistics, sys
out, start, planned, seeds = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4:]
def curve(run):
    with open(f"{out}/{run}/log.csv") as f:
        return [float(r["val_mean_iou"]) for r in csv.DictReader(f)]
c = {p: [curve(f"{p}-{s}-{planned}") for s in seeds] for p in ("fp32", "bf16")}
epochs = min(len(v) for runs in c.values() for v in runs)
print(f"validation mean_iou, mean of seeds {' '.join(seeds)}")
print(f"{'epoch':>5} {'fp32':>7} {'bf16':>7} {'bf16-fp32':>10} {'fp32 seed spread':>17}")
diffs, spreads = [], []
for e in range(epochs):
    f = statistics.mean(v[e] for v in c["fp32"])
    b = statistics.mean(v[e] for v in c["bf16"])
    spread = max(v[e] for v in c["fp32"]) - min(v[e] for v in c["fp32"])
    print(f"{e + 1:>5} {f:7.4f} {b:7.4f} {b - f:+10.4f} {spread:17.4f}")
    if e + 1 >= start:
        diffs.append(abs(b - f)), spreads.append(spread)
if not diffs:
    sys.exit(f"no epoch from {start} on: FROM_EPOCH is past the {epochs} epochs run")
print(f"epochs {start}..{epochs}: largest |bf16 - fp32| of the means {max(diffs):.4f} (mean {statistics.mean(diffs):.4f}); "
      f"largest fp32 seed spread {max(spreads):.4f} (mean {statistics.mean(spreads):.4f})")
PY
