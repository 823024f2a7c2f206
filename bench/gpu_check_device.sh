#!/usr/bin/env bash
# The GPU check of issue #3, run ON the lent GPU machine from the repository
# root of the travelling tree, after bench/gpu_check.sh (on the development
# machine) has built and packed the binaries into .devbundle/:
#
#   device run, carry [".devbundle"], command:  bash bench/gpu_check_device.sh
#
# Our binaries run through .devbundle/run.sh (bundled libraries); the PyTorch
# peer runs on the machine's own python3 outside it, so that the bundle's
# libraries cannot shadow torch's. Steps, each under its own `timeout` and all
# within a budget of GPU_CHECK_BUDGET_S seconds (default 345, so the whole
# script ends in under 6 minutes); a failing step does not stop the others:
#   snapshot       nvidia-smi -q and nvidia-smi topo -m
#   unpack         run.sh unpacks the bundled libraries and lists what is missing
#   gpu_tests      unit_tests "[gpu]~[gpu_training]" (every other GPU test: op parity)
#   gpu_training   unit_tests "[gpu_training]" (collectives, CPU-vs-GPU training)
#   standin_tests  unit_tests "[standin]" under LD_PRELOAD of the NCCL stand-in
#                  (tests/nccl_standin): 2, 4 and 8 NCCL ranks on GPU 0 against
#                  the CPU, random delays, ncclInProgress, the fault knobs
#   scaling        bench/scaling.sh: the share of the modeled NCCL ring time of
#                  an 8-GPU machine that backward hides, seed U-Net, bf16
#   scaling_bn     the same with synchronized BatchNormalization (SYNC_BN=1),
#                  8 images per GPU over PCIe 5: buckets overlapping backward
#                  (BN sums on NCCL's second communicator) against held until
#                  backward ends (these three run after the headline pairs below)
#   ours_<p>, torch_<q>  the headline pairs first, bf16 then tf32:
#                  unet_throughput of configs/unet.yaml (256x256x3), batch 32,
#                  GPU 0, precision p, 5 warm-up + 20 timed steps, beside
#                  ../shared/bench/torch_unet.py, batch 32, 256x256, channels-last,
#                  q = bf16 / fp32 (PyTorch's fp32 runs convolutions in TF32:
#                  torch.backends.cudnn.allow_tf32 is True by default)
#   torch_compiled_bf16  bench/torch_compiled.py: the PyTorch peer's bf16 step under
#                  torch.compile(mode="max-autotune"), channels-last, compile time apart
#   ours_bf16_augment  the bf16 run with --augment (flips, quarter turns, affine,
#                  brightness, on the GPU) and --threads 1: the data wait of one core
#   ours_bf16_graphs  the bf16 run with --cuda-graphs (training.cuda_graphs: the
#                  forward and backward recorded once and replayed)
#   trace_bf16     unet_throughput --trace: unsynchronized bf16 steps recorded
#                  with CUPTI (GPU busy / idle per step, kernel time, top kernels)
#   torch_profile_bf16  bench/torch_profile.py: the PyTorch bf16 step's GPU
#                  kernel time (convolutions and the rest) and its top kernels
#   train_gpu0     trainer on data/sample, configs/unet_small.yaml, 3 epochs, --gpus 0,
#                  --precision fp32 (IEEE, so that the two runs below compare closely)
#   train_gpu00    the same on two towers sharing GPU 0 (--gpus 0,0)
#   train_gpu0_tf32  the same on GPU 0 in the default precision, tf32
#   train_gpu0_bf16  the same on GPU 0 with --precision bf16 (bf16 activations)
#   profile_bf16   unet_throughput --profile: a bf16 step's time per layer and phase
#   ours_fp32      IEEE fp32 throughput (1 + 3 steps: an order of magnitude slower)
# After a crash or hang of a test step its cases run one by one, 45 s in all.
# nvidia-smi samples utilization, memory, power and SM clock every 500 ms in
# the background during each throughput run.
#
# Results (at most 8 files come back from $OUT):
#   $OUT/summary.txt        rc and seconds per step, test totals, the side-by-side table
#   $OUT/gpu_tests.txt      both unit_tests logs
#   $OUT/train_sample.txt   both training logs and their log.csv
#   $OUT/throughput.txt     throughput logs (JSON lines and stderr)
#   $OUT/smi_samples.csv    the nvidia-smi samples, one block per throughput run
#   $OUT/nvidia_smi.txt     nvidia-smi -q and the topology matrix
#   $OUT/all_logs.tar.gz    every log and training output except checkpoints
# summary.txt is printed last, so the run's output tail carries it.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2

OUT=${OUT:-$PWD/gpu_check_out}
mkdir -p "$OUT"
budget_s=${GPU_CHECK_BUDGET_S:-345}
reserve_s=15                    # kept for the summary and the archive
bundle=.devbundle
bin=$bundle/bin
run_sh=(bash "$bundle/run.sh")
work=$(mktemp -d /tmp/gpu_check.XXXXXX)
steps_file=$work/steps.txt
declare -A rc_of

# Peak rates of one H200 SXM (NVIDIA's datasheet, dense, no sparsity), TFLOP/s,
# and the training work of one 256x256x3 image through the seed U-Net
# (forward + backward, 2 FLOP per multiply-add), GFLOP.
peak_bf16=989
peak_tf32=495
peak_fp32=67
gflop_per_image=289

printf '%-18s %5s %6s  %s\n' step rc secs note > "$steps_file"

# record LINE: appends a step's line to the table, prints it (progress in the
# run's output) and keeps a copy in $OUT/summary.txt until the full summary
# replaces it (what comes back if the whole call is cut short).
record() {
  echo "$1" | tee -a "$steps_file"
  cp "$steps_file" "$OUT/summary.txt"
}

# step NAME LIMIT_S CMD...: runs CMD with stdout and stderr into $work/NAME.log
# under timeout min(LIMIT_S, what the budget has left); records rc and seconds.
step() {
  local name=$1 limit=$2
  shift 2
  local left=$((budget_s - SECONDS - reserve_s))
  if ((left < 10)); then
    record "$(printf '%-18s %5s %6s  %s' "$name" skip - "budget of ${budget_s}s spent")"
    rc_of[$name]=skip
    return 0
  fi
  ((limit > left)) && limit=$left
  local t0=$SECONDS rc note=""
  timeout -k 5 "$limit" "$@" > "$work/$name.log" 2>&1
  rc=$?
  ((rc == 124 || rc == 137)) && note="timed out (limit ${limit}s)"
  record "$(printf '%-18s %5s %6s  %s' "$name" "$rc" "$((SECONDS - t0))" "$note")"
  rc_of[$name]=$rc
  return 0
}

# Tests compiled on the development machine look for data and binaries under
# its source and build paths: point those at this tree and the bundle.
if [ -f "$bundle/source_dir" ]; then
  src=$(cat "$bundle/source_dir")
  if [ "$src" != "$PWD" ] && [ ! -e "$src" ]; then
    mkdir -p "$(dirname "$src")" && ln -s "$PWD" "$src"
  fi
fi
if [ ! -e build-gpu/trainer ]; then
  mkdir -p build-gpu && ln -s "$PWD/$bin/trainer" build-gpu/trainer
fi

step snapshot 20 bash -c 'nvidia-smi -q; echo; echo "== nvidia-smi topo -m"; nvidia-smi topo -m'
step unpack 60 "${run_sh[@]}" true
export DEVBUNDLE_QUIET=1

# isolate NAME FILTER: after a crash or a hang of step NAME, runs each test case
# of FILTER in its own process (20 s each, isolate_s in all, so that the
# throughput steps keep their time), so one crash cannot hide the rest;
# appends one line per case to NAME's log.
isolate_s=45
isolate() {
  local name=$1 filter=$2 rc=${rc_of[$1]}
  [[ $rc =~ ^[0-9]+$ ]] && ((rc == 124 || rc == 137 || rc >= 128)) || return 0
  echo "==== $name crashed or hung (rc $rc): each case alone" >> "$work/$name.log"
  local until=$((SECONDS + isolate_s))
  "${run_sh[@]}" "$bin/unit_tests" "$filter" --list-test-names-only 2>/dev/null | grep -v '^$' |
    while IFS= read -r case_name; do
      ((SECONDS >= until || budget_s - SECONDS - reserve_s < 60)) && { echo "(${isolate_s}s for single cases spent)"; break; }
      # Catch2 reads ',' in a test spec as "or": escape it.
      timeout -k 2 20 "${run_sh[@]}" "$bin/unit_tests" "${case_name//,/\\,}" -r compact > "$work/case.log" 2>&1
      echo "rc $? : $case_name : $(grep -E 'Passed|Failed|failed' "$work/case.log" | tail -n 3 | tr '\n' ' ')"
    done >> "$work/$name.log"
}
step gpu_tests 75 "${run_sh[@]}" "$bin/unit_tests" "[gpu]~[gpu_training]" -r console --durations yes
isolate gpu_tests "[gpu]~[gpu_training]"
step gpu_training 75 "${run_sh[@]}" "$bin/unit_tests" "[gpu_training]" -r console --durations yes
isolate gpu_training "[gpu_training]"

# The throughput runs need the seed U-Net at 256x256x3.
if ! grep -Eq 'type: Input, name: image, shape: \[256, 256, 3\]' configs/unet.yaml; then
  record "configs/unet.yaml: the input is not [256, 256, 3]; the throughput rows are not comparable"
fi

# sampled NAME CMD...: step NAME with nvidia-smi sampling into $work/smi_NAME.csv.
sampled() {
  local name=$1
  shift
  timeout 120 nvidia-smi --query-gpu=timestamp,utilization.gpu,memory.used,power.draw,clocks.sm \
    --format=csv,nounits -lms 500 > "$work/smi_$name.csv" 2>&1 &
  local sampler=$!
  step "$name" "$@"
  kill "$sampler" 2>/dev/null
  wait "$sampler" 2>/dev/null
}
# The headline pairs first (bf16, then tf32 against PyTorch's TF32 "fp32"),
# so that a short budget loses the diagnostics, not the comparison.
for pair in "bf16 bf16" "tf32 fp32"; do
  read -r ours theirs <<< "$pair"
  sampled "ours_$ours" 50 "${run_sh[@]}" "$bin/unet_throughput" --config configs/unet.yaml --batch 32 --gpus 0 \
    --precision "$ours" --steps 20 --warmup 5
  sampled "torch_$theirs" 45 env PYTHONUNBUFFERED=1 python3 "$bin/torch_unet.py" --batch 32 --size 256 \
    --precision "$theirs" --channels-last --steps 20 --warmup 5
done
# Ours at its best: the bf16 step replayed from CUDA graphs (recorded at the second warm-up step),
# before torch.compile, whose autotuning may take what is left of the budget.
sampled ours_bf16_graphs 50 "${run_sh[@]}" "$bin/unet_throughput" --config configs/unet.yaml --batch 32 --gpus 0 \
  --precision bf16 --steps 20 --warmup 5 --cuda-graphs
# PyTorch at its best: the same bf16 step under torch.compile (max-autotune; its compile and
# autotuning time is reported apart, as compile_s). Then the memory plan (trainer summary, made on
# the CPU) of the runs above, to set beside their measured peaks.
sampled torch_compiled_bf16 120 env PYTHONUNBUFFERED=1 python3 bench/torch_compiled.py --peer "$bin/torch_unet.py" \
  --precision bf16 --mode max-autotune --steps 20 --warmup 3
# Fed by one core: the bf16 run with augmentation on (on the device) and one host thread for the tower.
sampled ours_bf16_augment 50 "${run_sh[@]}" "$bin/unet_throughput" --config configs/unet.yaml --batch 32 --gpus 0 \
  --precision bf16 --steps 20 --warmup 5 --augment --threads 1
step memory_plan 20 bash -c "for p in bf16 tf32; do ${run_sh[*]} $bin/trainer summary --config configs/unet.yaml \
  --batch-size 32 --precision \$p | sed -n '/^Planned device memory/,\$p'; done"
# Many NCCL ranks on the one GPU (the stand-in), then the scaling table (N = 8 modeled, 3 interconnects).
step standin_tests 80 "${run_sh[@]}" env LD_PRELOAD="$PWD/$bin/libnccl_standin.so" "$bin/unit_tests" "[standin]" \
  -r console --durations yes
step scaling 70 env RUN="${run_sh[*]}" RANKS=8 bash bench/scaling.sh "$bin/unet_throughput" \
  "$bin/libnccl_standin.so"
step scaling_bn 40 env RUN="${run_sh[*]}" RANKS=8 SYNC_BN=1 BATCHES=8 INTERCONNECTS=pcie5 bash bench/scaling.sh \
  "$bin/unet_throughput" "$bin/libnccl_standin.so"
# A bf16 step's kernels, unsynchronized (where the GPU idles), and PyTorch's.
step trace_bf16 40 "${run_sh[@]}" "$bin/unet_throughput" --config configs/unet.yaml --batch 32 --gpus 0 \
  --precision bf16 --steps 2 --warmup 3 --trace 5
step torch_profile_bf16 40 env PYTHONUNBUFFERED=1 python3 bench/torch_profile.py --peer "$bin/torch_unet.py" \
  --precision bf16 --channels-last

for spec in 0 0,0; do
  name=train_gpu${spec//,/}
  step "$name" 45 "${run_sh[@]}" "$bin/trainer" --config configs/unet_small.yaml --epochs 3 --gpus "$spec" \
    --precision fp32 --output "$work/$name"
done
for p in tf32 bf16; do
  step "train_gpu0_$p" 45 "${run_sh[@]}" "$bin/trainer" --config configs/unet_small.yaml --epochs 3 --gpus 0 \
    --precision "$p" --output "$work/train_gpu0_$p"
done

# Where a step's time goes, per layer and phase (profiling synchronizes after
# every layer, so this run is for the breakdown, not for the throughput).
step profile_bf16 40 "${run_sh[@]}" "$bin/unet_throughput" --config configs/unet.yaml --batch 32 --gpus 0 \
  --precision bf16 --steps 2 --warmup 1 --profile 2
# IEEE fp32 (no tensor cores) is an order of magnitude slower and its
# algorithm search runs every fp32 algorithm: fewer steps.
sampled ours_fp32 60 "${run_sh[@]}" "$bin/unet_throughput" --config configs/unet.yaml --batch 32 --gpus 0 \
  --precision fp32 --steps 3 --warmup 1

# ---- Collect ------------------------------------------------------------------
{
  for s in gpu_tests gpu_training standin_tests; do
    echo "==== $s (rc ${rc_of[$s]:-none})"
    cat "$work/$s.log" 2>/dev/null
  done
} > "$OUT/gpu_tests.txt"
{
  for s in train_gpu0 train_gpu00 train_gpu0_tf32 train_gpu0_bf16; do
    echo "==== $s (rc ${rc_of[$s]:-none})"
    cat "$work/$s.log" 2>/dev/null
    echo "---- $s/log.csv"
    cat "$work/$s/log.csv" 2>/dev/null
  done
} > "$OUT/train_sample.txt"
{
  for s in profile_bf16 trace_bf16 ours_fp32 ours_tf32 ours_bf16 ours_bf16_augment ours_bf16_graphs torch_bf16 \
    torch_fp32 torch_compiled_bf16 torch_profile_bf16; do
    echo "==== $s (rc ${rc_of[$s]:-none})"
    cat "$work/$s.log" 2>/dev/null
  done
} > "$OUT/throughput.txt"
{
  for s in ours_fp32 ours_tf32 ours_bf16 ours_bf16_augment ours_bf16_graphs torch_bf16 torch_fp32 \
    torch_compiled_bf16; do
    echo "# $s"
    cat "$work/smi_$s.csv" 2>/dev/null
  done
} > "$OUT/smi_samples.csv"
cp "$work/snapshot.log" "$OUT/nvidia_smi.txt" 2>/dev/null

# summary_table: one row per throughput run from its JSON line and its samples.
summary_table() {
  python3 - "$work" "$gflop_per_image" "$peak_bf16" "$peak_tf32" "$peak_fp32" <<'PY'
import csv, json, os, sys
work, gflop = sys.argv[1], float(sys.argv[2])
peaks = {"bf16": float(sys.argv[3]), "tf32": float(sys.argv[4]), "fp32": float(sys.argv[5])}
rows = [("ours_fp32", "trainer fp32", "fp32"), ("ours_tf32", "trainer tf32", "tf32"),
        ("ours_bf16", "trainer bf16", "bf16"), ("ours_bf16_augment", "trainer bf16 aug., 1 core", "bf16"),
        ("ours_bf16_graphs", "trainer bf16 CUDA graphs", "bf16"),
        ("torch_fp32", "pytorch fp32 (tf32 convs)", "tf32"),
        ("torch_bf16", "pytorch bf16 channels-last", "bf16"),
        ("torch_compiled_bf16", "pytorch bf16 compiled", "bf16")]
def result(name):
    try:
        for line in open(os.path.join(work, name + ".log")):
            if line.startswith("{"):
                return json.loads(line)
    except (OSError, ValueError):
        pass
    return None
def number(text):
    try:
        return float(text)
    except ValueError:
        return None
def samples(name):
    """[utilization %, memory MiB, power W, SM MHz] per sample; None where nvidia-smi gave no number."""
    try:
        rows = list(csv.reader(open(os.path.join(work, "smi_" + name + ".csv"))))
    except OSError:
        return []
    return [[number(x) for x in r[1:5]] for r in rows if len(r) >= 5 and number(r[1]) is not None]
def column(s, i, reduce):
    values = [x[i] for x in s if x[i] is not None]
    return f"{reduce(values):.0f}" if values else "-"
def mean(values):
    return sum(values) / len(values)
print(f"{'run':28}{'images/s':>10}{'ms/step':>9}{'TFLOP/s':>9}{'MFU':>8}{'(peak)':>8}"
      f"{'MiB max':>9}{'util %':>8}{'W avg':>7}{'SM MHz':>8}{'wait ms':>9}")
for name, label, peak_key in rows:
    r, s = result(name), samples(name)
    ips = r["images_per_s"] if r else None
    busy = [x for x in s if x[0] > 0] or s  # averages over the samples with the GPU busy
    mem, util, watt, mhz = column(s, 1, max), column(busy, 0, mean), column(busy, 2, mean), column(busy, 3, mean)
    wait = f"{r['input_wait_ms_per_step']:.2f}" if r and "input_wait_ms_per_step" in r else "-"
    if ips:
        tflops = ips * gflop / 1e3
        print(f"{label:28}{ips:>10.1f}{1e3 * r['batch'] / ips:>9.1f}{tflops:>9.1f}"
              f"{100 * tflops / peaks[peak_key]:>7.1f}%{peaks[peak_key]:>8.0f}{mem:>9}{util:>8}{watt:>7}{mhz:>8}{wait:>9}")
    else:
        print(f"{label:28}{'no result':>10}{'-':>9}{'-':>9}{'-':>8}{'-':>8}{mem:>9}{util:>8}{watt:>7}{mhz:>8}{wait:>9}")
ours = result("ours_bf16")
peers = {name: result(name) for name in ("torch_bf16", "torch_compiled_bf16")}
best = max((r["images_per_s"], name) for name, r in peers.items() if r) if any(peers.values()) else None
if ours and best:
    print(f"trainer bf16 / PyTorch's best bf16 ({best[1]}): {ours['images_per_s'] / best[0]:.2f}x (target 1.3x)")
graphed = result("ours_bf16_graphs")
if graphed:
    print(f"CUDA graphs: {graphed.get('replayed_steps', 0)} of {graphed['steps']} timed steps replayed (the "
          f"warm-up records)" + (f"; images/s over trainer bf16's: {graphed['images_per_s'] / ours['images_per_s']:.3f}"
                                 if ours else "") +
          (f"; over PyTorch's best: {graphed['images_per_s'] / best[0]:.2f}x" if best else ""))
fed = result("ours_bf16_augment")
if fed and "input_wait_ms_per_step" in fed:
    step_ms = 1e3 * fed["batch"] / fed["images_per_s"]
    print(f"augmented on the GPU, one host core: data wait {fed['input_wait_ms_per_step']:.2f} ms of a "
          f"{step_ms:.1f} ms step ({100 * fed['input_wait_ms_per_step'] / step_ms:.1f}%, target under 2%)")
    if ours:  # the wait counts the compute stream's wait for the upload, not host time spent before it
        print(f"  its images/s over trainer bf16's (no augmentation, all cores): "
              f"{fed['images_per_s'] / ours['images_per_s']:.3f}")
compiled = peers["torch_compiled_bf16"]
if compiled:
    print(f"torch.compile: {compiled['mode']}, compile and autotuning {compiled['compile_s']} s (untimed); "
          f"its allocator's peak {compiled.get('peak_reserved_mib', '-')} MiB reserved, "
          f"{compiled.get('peak_allocated_mib', '-')} MiB allocated")
print(f"MFU = images/s * {gflop:.0f} GFLOP / peak; peaks (H200 SXM datasheet, dense TFLOP/s): "
      f"bf16 {peaks['bf16']:.0f}, tf32 {peaks['tf32']:.0f}, fp32 {peaks['fp32']:.0f}.")
print("MiB max / util / W / SM MHz: nvidia-smi every 500 ms during the run (whole GPU, includes start-up).")
print("wait ms: per timed step, how long tower 0's compute stream waited for its input upload.")
PY
}

# test_totals LOG: Catch2's closing lines and how many cases skipped for want of a GPU.
test_totals() {
  local log=$work/$1.log
  [ -f "$log" ] || { echo "  (no log)"; return; }
  grep -E '^(All tests passed|test cases:|assertions:|No test cases matched)' "$log" | sed 's/^/  /'
  local skipped
  skipped=$(grep -c 'skipped: no CUDA GPU visible' "$log")
  ((skipped > 0)) && echo "  WARNING: $skipped case(s) skipped: no GPU visible to unit_tests"
  return 0
}

{
  echo "GPU check of issue #3, $(date -u '+%Y-%m-%d %H:%M:%S UTC'), $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -n 1)"
  echo "binaries: $(cat "$bundle/built_from" 2>/dev/null || echo '(unknown: rerun bench/gpu_check.sh)')"
  echo
  cat "$steps_file"
  echo
  for s in gpu_tests gpu_training standin_tests; do
    echo "$s:"
    test_totals "$s"
  done
  for s in scaling scaling_bn; do
    echo "$s (bench/scaling.sh, rc ${rc_of[$s]:-none}):"
    sed 's/^/  /' "$work/$s.log" 2>/dev/null
  done
  for s in train_gpu0 train_gpu00 train_gpu0_tf32 train_gpu0_bf16; do
    echo "$s: log.csv"
    head -n 6 "$work/$s/log.csv" 2>/dev/null | sed 's/^/  /'
  done
  echo
  summary_table
  echo
  echo "memory plan (trainer summary) beside the measured peak (unet_throughput's peak_memory_mib: the tower's allocator, first step included):"
  sed 's/^/  /' "$work/memory_plan.log" 2>/dev/null
  for s in ours_bf16 ours_tf32; do
    echo "  $s measured: $(grep -o '"peak_memory_mib": [0-9.]*' "$work/$s.log" 2>/dev/null | tail -n 1)"
  done
  echo
  echo "total ${SECONDS}s"
} > "$OUT/summary.txt" 2>&1

find "$work" -name '*.h5' -delete
tar -C "$work" -czf "$OUT/all_logs.tar.gz" . 2>/dev/null
rm -rf "$work"
cat "$OUT/summary.txt"
