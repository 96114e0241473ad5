#!/usr/bin/env python3
"""A trainer on a real NVIDIA GPU, fed by piperun's serve sink, for checking
apply's GPU monitor against the truth (bench/gpu_check.sh runs it).

    gpu_trainer.py ADDRESS --step-ms MS [--cpu-ms MS]

Each batch is copied to the GPU and followed by MS milliseconds of GPU work
(8192² bf16 matrix products, their count calibrated once before
connecting); the step ends with a synchronize, as a step that reads its
loss does; --cpu-ms adds that much work on the CPU to each step (Python
that a real step may do: logging, metrics, a data-dependent loss), during
which the GPU idles. CUDA events time the GPU side of every step, so the trainer
knows how busy it kept the GPU: the figure apply's NVML readings should
agree with. Prints one JSON line: steps, seconds from the first batch to the end, GPU-busy
seconds (CUDA events), their ratio, and the share of the time the loop
waited for data."""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "clients", "python"))
import torch  # noqa: E402

from piperun_client import connect  # noqa: E402


class Timer:
    """Times GPU work with CUDA events; on the CPU (--device cpu, to try
    the script where there is no GPU) with the wall clock."""

    def __init__(self, dev):
        self.cuda = dev.type == "cuda"

    def start(self):
        if self.cuda:
            self.s, self.e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            self.s.record()
        else:
            self.t = time.perf_counter()

    def stop(self, result):
        """Waits for result and returns the milliseconds since start."""
        if self.cuda:
            self.e.record()
        result.item()  # a step that logs its loss waits for the GPU here
        if self.cuda:
            return self.s.elapsed_time(self.e)
        return (time.perf_counter() - self.t) * 1e3


def calibrate(timer, a, b, c, step_ms):
    """Returns how many a@b products take step_ms of GPU time."""
    for _ in range(3):
        torch.matmul(a, b, out=c)
    c[0, 0].item()
    n = 20
    timer.start()
    for _ in range(n):
        torch.matmul(a, b, out=c)
    per = timer.stop(c[0, 0]) / n
    return max(1, round(step_ms / per)), per


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("address")
    ap.add_argument("--step-ms", type=float, required=True)
    # 8192 on a GPU: one product is over a millisecond, so a step is a few
    # long kernels and the GPU is not left idle between Python's launches.
    ap.add_argument("--size", type=int, default=0, help="matrix side (default 8192 on a GPU, 512 on the CPU)")
    ap.add_argument("--cpu-ms", type=float, default=0.0)
    ap.add_argument("--device", default="cuda")
    args = ap.parse_args()
    dev = torch.device(args.device)
    args.size = args.size or (8192 if dev.type == "cuda" else 512)
    timer = Timer(dev)
    g = torch.Generator(device=dev).manual_seed(0)
    dtype = torch.bfloat16 if dev.type == "cuda" else torch.float32
    a = torch.randn(args.size, args.size, device=dev, dtype=dtype, generator=g)
    b = torch.randn(args.size, args.size, device=dev, dtype=dtype, generator=g)
    c = torch.empty_like(a)
    reps, per_ms = calibrate(timer, a, b, c, args.step_ms)

    steps = 0
    busy_ms = 0.0
    waited = 0.0
    t0 = None
    with connect(args.address, torch=True, wait=60) as stream:
        t = time.perf_counter()
        for batch in stream.samples():
            now = time.perf_counter()
            if t0 is None:
                t0 = now  # the wait for the first batch is start-up, not starving
            else:
                waited += now - t
            timer.start()
            x = batch["image"].to(dev, non_blocking=True)
            for _ in range(reps):
                torch.matmul(a, b, out=c)
            busy_ms += timer.stop(x.float().mean() + c[0, 0].float())
            spin = time.perf_counter() + args.cpu_ms / 1e3
            while time.perf_counter() < spin:
                pass
            steps += 1
            t = time.perf_counter()
    wall = (t - t0) if t0 is not None else 0.0
    print(json.dumps({
        "steps": steps, "step_ms": args.step_ms, "cpu_ms": args.cpu_ms, "products_per_step": reps, "product_ms": round(per_ms, 4),
        "seconds": round(wall, 3), "gpu_busy_s": round(busy_ms / 1e3, 3),
        "gpu_busy_share": round(busy_ms / 1e3 / wall, 3) if wall else 0.0,
        "waited_share": round(waited / wall, 3) if wall else 0.0,
        "gpu": torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu", "pid": os.getpid(),
    }), flush=True)


if __name__ == "__main__":
    main()
