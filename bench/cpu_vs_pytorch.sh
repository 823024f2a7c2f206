#!/usr/bin/env bash
# Training images/s of the small U-Net (width 16, 128x128x3, batch 8) in trainer
# and in PyTorch (../shared/bench/torch_unet.py), on this machine's CPU cores,
# printed side by side. Needs a build (scripts/setup.sh) and Debian's
# python3-torch (installed here if missing).
#   bash bench/cpu_vs_pytorch.sh [steps]
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-10}
peer=../shared/bench/torch_unet.py
[ -x build/bench/unet_throughput ] || { echo "build first: bash scripts/setup.sh" >&2; exit 2; }
if ! /usr/bin/python3 -c "import torch" 2>/dev/null; then
  apt-get install -y -qq python3-torch >/dev/null
fi
ours=$(build/bench/unet_throughput --config configs/unet_small.yaml --batch 8 --steps "$steps" --gpus cpu)
theirs=$(/usr/bin/python3 "$peer" --width 16 --size 128 --batch 8 --steps "$steps")
/usr/bin/python3 - "$ours" "$theirs" <<'PY'
import json, sys
a, b = json.loads(sys.argv[1]), json.loads(sys.argv[2])
print(f"{'':24}{'trainer':>12}{b['peer']:>20}")
print(f"{'images/s':24}{a['images_per_s']:>12.2f}{b['images_per_s']:>20.2f}")
print(f"{'threads':24}{a['threads']:>12}{b['threads']:>20}")
print(f"{'params':24}{a['params']:>12}{b['params']:>20}")
print(f"ratio trainer/pytorch: {a['images_per_s'] / b['images_per_s']:.2f}x")
PY
