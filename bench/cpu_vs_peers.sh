#!/usr/bin/env bash
# Training images/s on this machine's CPU cores of trainer (one CPU tower),
# Keras 3 with TensorFlow (the seed's framework; ../shared/bench/keras_unet.py)
# and PyTorch (../shared/bench/torch_unet.py, channels_last), in fp32 and in
# bf16 (Keras's mixed_bfloat16, PyTorch's autocast, trainer's --precision
# bf16), for the small U-Net (width 16, 128x128, batch 8) and the seed U-Net
# (width 64, 256x256, batch 4). The runs alternate (trainer, Keras, PyTorch)
# for `rounds` rounds; each cell is the median, and the last columns are
# trainer's ratio to each peer (of the medians), followed by the range of
# each round's own trainer / Keras ratio. The bf16 rows are left out on a CPU
# without AVX512-BF16 or AMX, where trainer computes in fp32. Needs a build (scripts/setup.sh) and installs
# the peers from PyPI into a venv ($TRAINER_PEERS_VENV, default
# ~/.cache/trainer/peers-venv) when they are missing.
#   bash bench/cpu_vs_peers.sh [rounds] [steps] [models: "small seed" (default), "small" or "seed"]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
steps=${2:-10}
models=${3:-small seed}
shared=../shared/bench
[ -x build/bench/unet_throughput ] || { echo "build first: bash scripts/setup.sh" >&2; exit 2; }
[ -f "$shared/keras_unet.py" ] || { echo "the peers' scripts are missing: $shared (../shared/bench)" >&2; exit 2; }
venv=${TRAINER_PEERS_VENV:-$HOME/.cache/trainer/peers-venv}
if ! "$venv/bin/python" -c "import tensorflow, keras, torch" 2>/dev/null; then
  echo "installing tensorflow-cpu and torch into $venv (once)" >&2
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --upgrade pip
  "$venv/bin/pip" install -q tensorflow-cpu torch
fi
py="$venv/bin/python"
results=$(mktemp)
trap 'rm -f "$results"' EXIT
precisions="fp32 bf16"
# name width size batch config
for model in "small 16 128 8 configs/unet_small.yaml" "seed 64 256 4 configs/unet.yaml"; do
  read -r name width size batch config <<<"$model"
  [[ " $models " == *" $name "* ]] || continue
  for round in $(seq "$rounds"); do
    for precision in $precisions; do
      echo "$name $precision round $round/$rounds" >&2
      # The JSON line is the last; a warning may come before it.
      ours=$(build/bench/unet_throughput --config "$config" --batch "$batch" --steps "$steps" --gpus cpu \
        --precision "$precision" | grep '^{' | tail -n 1)
      if [[ $precision == bf16 && $ours != *'"precision": "bf16"'* ]]; then
        echo "this CPU has neither AVX512-BF16 nor AMX: trainer computes bf16 in fp32, so the bf16 rows are left out" >&2
        precisions=fp32
        continue
      fi
      keras=$(TF_CPP_MIN_LOG_LEVEL=3 "$py" "$shared/keras_unet.py" --width "$width" --size "$size" --batch "$batch" --steps "$steps" \
        --precision "$precision" | grep '^{' | tail -n 1)
      torch=$("$py" "$shared/torch_unet.py" --width "$width" --size "$size" --batch "$batch" --steps "$steps" \
        --device cpu --channels-last --precision "$precision" | grep '^{' | tail -n 1)
      printf '%s\n' "$name $precision trainer $ours" "$name $precision keras $keras" \
        "$name $precision torch $torch" >> "$results"
    done
  done
done
"$py" - "$results" <<'PY'
import json, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    name, precision, peer, js = line.split(" ", 3)
    rows.setdefault((name, precision), {}).setdefault(peer, []).append(json.loads(js)["images_per_s"])
import keras, tensorflow, torch
print(f"images/s, median of {len(next(iter(rows.values()))['trainer'])} alternating rounds "
      f"(Keras {keras.__version__} / TensorFlow {tensorflow.__version__}, PyTorch {torch.__version__})")
print(f"{'model':8}{'precision':>10}{'trainer':>10}{'Keras':>10}{'PyTorch':>10}{'vs Keras':>10}{'vs PyTorch':>12}")
for (name, precision), r in rows.items():
    m = {k: statistics.median(v) for k, v in r.items()}
    print(f"{name:8}{precision:>10}{m['trainer']:>10.2f}{m['keras']:>10.2f}{m['torch']:>10.2f}"
          f"{m['trainer'] / m['keras']:>9.2f}x{m['trainer'] / m['torch']:>11.2f}x")
# Each round's own ratios (a round's runs follow each other, the rounds
# spread over the whole run): how far the machine's drift moves them.
print("per-round trainer / Keras ratios (min, median, max):")
for (name, precision), r in rows.items():
    q = [t / k for t, k in zip(r["trainer"], r["keras"])]
    print(f"  {name} {precision}: {min(q):.2f}x {statistics.median(q):.2f}x {max(q):.2f}x")
PY
