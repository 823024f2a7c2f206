#!/usr/bin/env python3
"""The PyTorch peer at its best: its U-Net step under torch.compile.

Runs the model of ../shared/bench/torch_unet.py (loaded from --peer) with the
same step as that script (SGD with Nesterov momentum, BCE on the sigmoid
output, bf16 autocast, channels-last), the model wrapped in
torch.compile(mode=--mode), or left eager with --mode eager. The first
--warmup steps include the compilation (Inductor's kernel generation and, in
max-autotune, its timing of candidate kernels); their time is reported as
compile_s, apart from the timed steps. Prints one JSON line, as torch_unet.py
does, with the peak memory PyTorch's caching allocator reserved and
allocated (MiB; on a GPU) added. bench/gpu_check_device.sh runs it beside
trainer and the eager peer on the same GPU.

  python3 bench/torch_compiled.py --peer ../shared/bench/torch_unet.py --precision bf16
"""
import argparse
import json
import os
import time

import torch
import torch.nn as nn

from torch_profile import load_peer  # bench/, beside this script


def synchronize(dev):
    if dev.type == "cuda":
        torch.cuda.synchronize()


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--peer", required=True, help="path of torch_unet.py")
    p.add_argument("--mode", default="max-autotune",
                   help="torch.compile mode (default, reduce-overhead, max-autotune, ...) or eager")
    p.add_argument("--width", type=int, default=64)
    p.add_argument("--size", type=int, default=256)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3, help="untimed steps first, the compilation included")
    p.add_argument("--precision", choices=["fp32", "bf16"], default="bf16")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    a = p.parse_args()
    if a.steps < 1 or a.warmup < 1:
        raise SystemExit("torch_compiled: --steps and --warmup must be at least 1")
    torch.set_num_threads(len(os.sched_getaffinity(0)))
    torch.manual_seed(0)
    dev = torch.device(a.device)
    if dev.type == "cuda":
        torch.backends.cudnn.benchmark = True
    fmt = torch.channels_last
    model = load_peer(a.peer).UNet(width=a.width).to(dev).to(memory_format=fmt)
    opt = torch.optim.SGD(model.parameters(), lr=0.03, momentum=0.9, nesterov=True)
    run = model if a.mode == "eager" else torch.compile(model, mode=a.mode)
    x = (torch.rand(a.batch, 3, a.size, a.size, device=dev) * 255).to(memory_format=fmt)
    y = (torch.rand(a.batch, 1, a.size, a.size, device=dev) > 0.8).float()
    loss_fn = nn.BCELoss()

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=a.precision == "bf16"):
            out = run(x)
        loss = loss_fn(out.float(), y)
        loss.backward()
        opt.step()
        return loss

    t = time.perf_counter()
    for _ in range(a.warmup):
        step()
    synchronize(dev)
    compile_s = time.perf_counter() - t
    t = time.perf_counter()
    for _ in range(a.steps):
        loss = step()
    loss.item()
    synchronize(dev)
    dt = time.perf_counter() - t
    result = {"peer": "pytorch " + torch.__version__, "mode": a.mode, "device": a.device, "precision": a.precision,
              "width": a.width, "size": a.size, "batch": a.batch, "steps": a.steps,
              "images_per_s": round(a.batch * a.steps / dt, 3), "compile_s": round(compile_s, 1)}
    if dev.type == "cuda":
        result["peak_reserved_mib"] = round(torch.cuda.max_memory_reserved() / 2**20, 1)
        result["peak_allocated_mib"] = round(torch.cuda.max_memory_allocated() / 2**20, 1)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
