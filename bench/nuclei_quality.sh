#!/usr/bin/env bash
# The DSB 2018 instance score on held-out images of configs/nuclei_native.yaml
# (crops at the images' own resolution, tiled prediction, touching nuclei
# split) beside configs/unet_small_dsb.yaml (every image resized to 128x128),
# each trained for the same wall time on this machine:
#
#   1. A fixed split of ../shared/data/dsb2018/flat: the last HOLDOUT images
#      in name order (60 of 596) are held out; the others train, each config
#      taking its own validation_split of them for its best.h5.
#   2. Each config trains for at most MINUTES minutes (timeout sends SIGTERM:
#      the run stops after its step); a config that stops earlier by its
#      EarlyStopping keeps its time.
#   3. Each best.h5 is evaluated on the held-out images against their label
#      images: pixel mean_iou and the instance score with touching nuclei
#      split (--split-depth 2) and as connected components (0), then the
#      instance score per image kind (bench/image_kinds: fluorescence,
#      brightfield, histology).
#
#   bash bench/nuclei_quality.sh [minutes (60)]
# Environment: OUT (/tmp/nuclei_quality), TRAINER (build/trainer), GPUS (cpu),
# HOLDOUT (60). Runs that finished in an earlier call are kept.
set -euo pipefail
cd "$(dirname "$0")/.."
minutes=${1:-60}
out=${OUT:-/tmp/nuclei_quality}
trainer=${TRAINER:-build/trainer}
kinds=build/bench/image_kinds
gpus=${GPUS:-cpu}
holdout=${HOLDOUT:-60}
flat=../shared/data/dsb2018/flat
[ -x "$trainer" ] && [ -x "$kinds" ] || { echo "build first: bash scripts/setup.sh" >&2; exit 2; }
[ -d "$flat/train_im" ] || { echo "the DSB images are missing: $flat" >&2; exit 2; }
flat=$(cd "$flat" && pwd)
mkdir -p "$out"

split="$out/split"
if [ ! -d "$split/test/labels" ]; then
  mkdir -p "$split/train/images" "$split/train/masks" "$split/test/images" "$split/test/labels"
  ls "$flat/train_im" | sort > "$out/all.txt"
  n=$(wc -l < "$out/all.txt")
  head -n $((n - holdout)) "$out/all.txt" | while read -r f; do
    ln -s "$flat/train_im/$f" "$split/train/images/$f"
    ln -s "$flat/train_mask/${f%.png}_mask.png" "$split/train/masks/${f%.png}_mask.png"
  done
  tail -n "$holdout" "$out/all.txt" | while read -r f; do
    ln -s "$flat/train_im/$f" "$split/test/images/$f"
    ln -s "$flat/labels/${f%.png}_labels.png" "$split/test/labels/${f%.png}_labels.png"
  done
fi
"$kinds" "$split"/test/images/*.png > "$out/kinds.csv"

# train NAME CONFIG: at most $minutes minutes; exit 143 is the trainer stopped by the timeout's SIGTERM.
train() {
  local name=$1 config=$2
  [ -f "$out/$name/best.h5" ] && [ -f "$out/$name.done" ] && return
  echo "training $name ($config) for at most $minutes min" >&2
  local rc=0
  timeout --preserve-status --signal=TERM "${minutes}m" "$trainer" --config "$config" --gpus "$gpus" --images "$split/train/images" \
    --masks "$split/train/masks" --output "$out/$name" --overwrite > "$out/$name.log" 2>&1 || rc=$?
  [ "$rc" = 0 ] || [ "$rc" = 143 ] || { echo "$name: training failed (exit $rc), see $out/$name.log" >&2; exit 1; }
  touch "$out/$name.done"
}
train native configs/nuclei_native.yaml
train resized configs/unet_small_dsb.yaml

for name in native resized; do
  for depth in 2 0; do
    "$trainer" evaluate --checkpoint "$out/$name/best.h5" --images "$split/test/images" \
      --labels "$split/test/labels" --split-depth "$depth" --csv "$out/$name-$depth.csv" --gpus "$gpus" \
      > "$out/$name-$depth.txt" 2> "$out/$name-$depth.err"
  done
done

python3 - "$out" "$minutes" <<'PY'
import csv, re, statistics, sys
out, minutes = sys.argv[1], sys.argv[2]
kinds = dict(line.strip().split(",") for line in open(f"{out}/kinds.csv"))
def printed(name, depth, pattern):
    m = re.search(pattern, open(f"{out}/{name}-{depth}.txt").read())
    return float(m.group(1)) if m else float("nan")
def epochs(name):
    rows = list(csv.DictReader(open(f"{out}/{name}/log.csv")))
    return len(rows)
print(f"held-out DSB images: {len(kinds)} ({', '.join(f'{k} {list(kinds.values()).count(k)}' for k in sorted(set(kinds.values())))}); "
      f"training: at most {minutes} min each")
print(f"{'config':<10} {'epochs':>6} {'pixel mean_iou':>15} {'instances':>10} {'components':>11}   per kind (instances)")
for name in ("native", "resized"):
    scores = {r["image"]: float(r["score"]) for r in csv.DictReader(open(f"{out}/{name}-2.csv"))}
    per_kind = {k: statistics.mean(s for i, s in scores.items() if kinds[i] == k) for k in sorted(set(kinds.values()))}
    print(f"{name:<10} {epochs(name):>6} {printed(name, 2, r'mean_iou: ([0-9.]+)'):>15.4f} "
          f"{printed(name, 2, r'instance score .*: ([0-9.]+)'):>10.4f} {printed(name, 0, r'instance score .*: ([0-9.]+)'):>11.4f}   "
          + ", ".join(f"{k} {v:.4f}" for k, v in per_kind.items()))
PY
