#!/usr/bin/env python3
"""Where the PyTorch peer's U-Net training step spends its GPU time.

Runs the model of ../shared/bench/torch_unet.py (loaded from --peer) as that
script's timed loop does (SGD with Nesterov momentum, BCE, optional bf16
autocast and channels-last), then records --steps steps with torch.profiler
and prints, per step, the GPU kernel time in total, in convolution kernels
(cuDNN / CUTLASS: names with xmma, gemm, fprop, dgrad, wgrad or convolution) and in
everything else, and the kernels that took the most time. bench/gpu_check_device.sh
runs it beside our own per-layer profile (unet_throughput --profile).

  python3 bench/torch_profile.py --peer ../shared/bench/torch_unet.py --precision bf16 --channels-last
"""
import argparse
import importlib.util
import re

import torch
import torch.nn as nn
from torch.profiler import ProfilerActivity, profile

CONV_KERNEL = re.compile(r"xmma|gemm|fprop|dgrad|wgrad|convolution|conv2d", re.IGNORECASE)


def load_peer(path):
    spec = importlib.util.spec_from_file_location("torch_unet", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def device_us(event):
    """Self GPU time of a profiler event in microseconds (the attribute was renamed in PyTorch 2.4)."""
    for name in ("self_device_time_total", "self_cuda_time_total"):
        if hasattr(event, name):
            return float(getattr(event, name))
    return 0.0


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--peer", required=True, help="path of torch_unet.py")
    p.add_argument("--size", type=int, default=256)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--precision", choices=["fp32", "bf16"], default="bf16")
    p.add_argument("--channels-last", action="store_true")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--top", type=int, default=15, help="kernels listed")
    a = p.parse_args()
    if a.steps < 1:
        raise SystemExit("torch_profile: --steps must be at least 1")
    if not torch.cuda.is_available():
        raise SystemExit("torch_profile: no CUDA device")
    torch.backends.cudnn.benchmark = True
    torch.manual_seed(0)
    dev = torch.device("cuda")
    fmt = torch.channels_last if a.channels_last else torch.contiguous_format
    model = load_peer(a.peer).UNet().to(dev).to(memory_format=fmt)
    opt = torch.optim.SGD(model.parameters(), lr=0.03, momentum=0.9, nesterov=True)
    x = (torch.rand(a.batch, 3, a.size, a.size, device=dev) * 255).to(memory_format=fmt)
    y = (torch.rand(a.batch, 1, a.size, a.size, device=dev) > 0.8).float()
    loss_fn = nn.BCELoss()

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=a.precision == "bf16"):
            out = model(x)
        loss_fn(out.float(), y).backward()
        opt.step()

    for _ in range(a.warmup):
        step()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(a.steps):
            step()
        torch.cuda.synchronize()

    kernels = [(e.key, device_us(e), e.count) for e in prof.key_averages() if device_us(e) > 0]
    kernels.sort(key=lambda k: -k[1])
    total = sum(k[1] for k in kernels) / a.steps / 1000
    conv = sum(k[1] for k in kernels if CONV_KERNEL.search(k[0])) / a.steps / 1000
    print(f"pytorch {torch.__version__}, {a.precision}, channels-last {a.channels_last}, batch {a.batch}, "
          f"{a.size}x{a.size}: GPU kernel time per step (ms), {a.steps} profiled steps")
    print(f"  all kernels           {total:8.3f}")
    print(f"  convolution kernels   {conv:8.3f}")
    print(f"  other kernels         {total - conv:8.3f}")
    print(f"top {a.top} kernels: ms/step, calls/step, name")
    for name, us, count in kernels[:a.top]:
        print(f"  {us / a.steps / 1000:8.3f} {count / a.steps:6.1f}  {name[:110]}")


if __name__ == "__main__":
    main()
