#!/usr/bin/env bash
# How much of the gradient all-reduce our backward hides on an N-GPU machine,
# measured on one GPU (docs/gpu.md, "Scaling to 8 GPUs"). One real tower on
# GPU 0 reduces through NCCL over a world of one process (unet_throughput
# --nccl-alone) with the tests' NCCL stand-in in place of libnccl
# (tests/nccl_standin), which delays every all-reduce, after the tower has
# queued it, by the time NCCL's ring would take over N GPUs of a named
# interconnect: bytes x 2(N-1)/N / bus bandwidth + latency, and by nothing
# else. The same run without the delays is the baseline. Per row:
#   efficiency   step time without the delays / with them (1.00: all hidden)
#   comm ms      the modeled all-reduce time per step (the stand-in's report)
#   exposed ms   step time with the delays - without
#   hidden       1 - exposed / comm
# With SYNC_BN=1 the network is CONFIG with synchronized BatchNormalization
# between each 3x3 convolution (then without bias) and its relu, as Keras
# U-Nets often have, and every row is measured twice: the gradient buckets'
# all-reduces started during backward (overlap, the default) and only after it
# (held, unet_throughput --hold-buckets). The BN layers' small all-reduces run
# on NCCL's second communicator. One rank stands for N here, and real NCCL
# runs no kernel for a communicator of one rank: the stand-in's delays are
# what makes the BN sums meet the buckets, so a real run on N GPUs is the
# measure to trust.
# Assumed bus bandwidths (nccl-tests' "busbw" of an all-reduce) and latencies:
#   nvswitch  370 GB/s, 10 us  H100/H200 SXM through NVSwitch (NVLink 4: 450 GB/s per direction per GPU;
#                              NCCL's ring reaches about 370, NVLink SHARP about 480)
#   pcie5      28 GB/s, 20 us  GPUs on PCIe 5 x16 without NVLink, through the host's root complexes
#   ib400      45 GB/s, 30 us  one 400 Gb/s InfiniBand NIC per GPU between nodes (50 GB/s line rate)
# usage (on a GPU machine, from the repository root):
#   bash bench/scaling.sh [BIN [STANDIN]]      defaults: build/bench/unet_throughput build/tests/libnccl_standin.so
#   RUN="bash .devbundle/run.sh" bash bench/scaling.sh .devbundle/bin/unet_throughput .devbundle/bin/libnccl_standin.so
# Environment: CONFIG (configs/unet.yaml), PRECISION (bf16), BATCHES ("4 32": images per GPU),
# RANKS ("2 8": the N modeled), INTERCONNECTS ("nvswitch pcie5 ib400": which of the three), SYNC_BN (0),
# STEPS (8), WARMUP (3), RUN (a command prefix, split at spaces).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
bin=${1:-build/bench/unet_throughput}
standin=$(realpath "${2:-build/tests/libnccl_standin.so}")
config=${CONFIG:-configs/unet.yaml}
precision=${PRECISION:-bf16}
batches=${BATCHES:-4 32}
ranks=${RANKS:-2 8}
steps=${STEPS:-8}
warmup=${WARMUP:-3}
read -r -a run_prefix <<< "${RUN:-}"
declare -A links=([nvswitch]="370 10" [pcie5]="28 20" [ib400]="45 30")
work=$(mktemp -d /tmp/scaling.XXXXXX)
modes=(overlap)
if [ "${SYNC_BN:-0}" = 1 ]; then
  modes=(overlap held)
  # conv -> conv_conv without bias, conv_bn (synchronized), conv (relu): the skip connections keep their names.
  awk '/type: Conv2D/ && /kernel_size: 3/ && /activation: relu/ {
         match($0, /name: [a-z0-9_]+/); name = substr($0, RSTART + 6, RLENGTH - 6)
         line = $0; sub(/name: [a-z0-9_]+/, "name: " name "_conv", line); sub(/activation: relu, /, "", line)
         sub(/}$/, ", use_bias: false}", line); indent = substr($0, 1, index($0, "-") - 1)
         print line
         print indent "- {type: BatchNormalization, name: " name "_bn, synchronized: true}"
         print indent "- {type: Activation, name: " name ", activation: relu}"
         next }
       { print }' "$config" > "$work/sync_bn.yaml"
  config=$work/sync_bn.yaml
fi

# measure MODE BATCH [GBPS LATENCY_US N]: prints "images_per_s ring_ms_per_step" of one run.
measure() {
  local mode=$1 batch=$2 report=$work/report.$RANDOM
  shift 2
  local knobs=(TRAINER_NCCL_STANDIN_REPORT="$report") flags=()
  [ $# -gt 0 ] && knobs+=(TRAINER_NCCL_STANDIN_BUS_GBPS="$1" TRAINER_NCCL_STANDIN_LATENCY_US="$2"
                          TRAINER_NCCL_STANDIN_MODEL_RANKS="$3")
  [ "$mode" = held ] && flags+=(--hold-buckets)
  local line
  line=$(${run_prefix[@]+"${run_prefix[@]}"} env LD_PRELOAD="$standin" "${knobs[@]}" "$bin" --config "$config" --batch "$batch" \
         --gpus 0 --nccl-alone --precision "$precision" --steps "$steps" --warmup "$warmup" \
         ${flags[@]+"${flags[@]}"} 2>>"$work/stderr.log" | tail -n 1)
  local ips ring
  ips=$(sed -n 's/.*"images_per_s": \([0-9.]*\).*/\1/p' <<< "$line")
  # A line per NCCL communicator (the gradient buckets' and the urgent collectives').
  ring=$(awk -v s=$((steps + warmup)) '/^allreduces/ {t += $4} END {printf "%.3f", t / s}' "$report" 2>/dev/null)
  echo "${ips:--} ${ring:-0}"  # "-": the run gave no figure
}

printf '%-9s %-7s %3s %6s %10s %10s %10s %8s %11s %7s\n' interconnect buckets N batch base_ips with_ips \
  efficiency comm_ms exposed_ms hidden
for b in $batches; do
  read -r base _ < <(measure overlap "$b")  # without delays, holding changes nothing worth a second baseline
  for name in ${INTERCONNECTS:-nvswitch pcie5 ib400}; do
    [ -n "${links[$name]:-}" ] || { echo "unknown interconnect '$name' (nvswitch, pcie5 or ib400)" >&2; exit 2; }
    read -r gbps lat <<< "${links[$name]}"
    for n in $ranks; do
      for mode in "${modes[@]}"; do
        read -r with comm < <(measure "$mode" "$b" "$gbps" "$lat" "$n")
        awk -v name="$name" -v mode="$mode" -v n="$n" -v b="$b" -v base="$base" -v with="$with" -v comm="$comm" 'BEGIN {
          if (base == "-" || with == "-" || base + 0 <= 0 || with + 0 <= 0) { printf "%-9s %-7s %3d %6d %10s %10s  (a run failed: see the log)\n", name, mode, n, b, base, with; exit }
          t0 = 1000 * b / base; t1 = 1000 * b / with; exposed = t1 - t0
          printf "%-9s %-7s %3d %6d %10.1f %10.1f %10.3f %8.2f %11.2f %6.0f%%\n", name, mode, n, b, base, with, t0 / t1,
                 comm, exposed, (comm > 0 ? 100 * (1 - exposed / comm) : 0) }'
      done
    done
  done
done
if [ -s "$work/stderr.log" ] && grep -q "error" "$work/stderr.log"; then
  echo "errors (first 5):"; grep "error" "$work/stderr.log" | head -n 5
fi
rm -rf "$work"
