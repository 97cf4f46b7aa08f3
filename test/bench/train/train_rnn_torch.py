#!/usr/bin/python3
"""train_rnn_torch.py - training step of the LSTM classifier of train_rnn_bench.c (x [32, 8, 512] -> nn.LSTM 512 ->
last hidden state -> Linear 512->10 -> cross-entropy, Adam, batch 8) in PyTorch on 1 thread, dense and masked (the gate
matrices kept at 1/4: every 16x16 block keeps 4 of its 16 columns, weights multiplied by the mask after every step, as
a PyTorch pruning loop does), next to pdc's step (build/train_rnn_bench).

    /usr/bin/python3 test/bench/train/train_rnn_torch.py --pdc build/train_rnn_bench [--steps N] [--repeats R]

Prints one line per framework and configuration (step_ms_min, step_ms_median) and the ratios torch / pdc.
"""
import argparse
import re
import statistics
import subprocess
import time

import torch
import torch.nn.functional as F

T, N, FEAT, H, C = 32, 8, 512, 512, 10


def bcr_mask(rows, cols, g):
    """4 random columns of 16 kept in every 16x16 block (the structure; PyTorch's cost does not depend on which)."""
    m = torch.zeros(rows, cols)
    for r0 in range(0, rows, 16):
        for c0 in range(0, cols, 16):
            keep = torch.randperm(16, generator=g)[:4]
            m[r0:r0 + 16, c0 + keep] = 1
    return m


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = torch.nn.LSTM(FEAT, H)
        self.fc = torch.nn.Linear(H, C)

    def forward(self, x):
        _, (h, _) = self.lstm(x)
        return self.fc(h[0])


def time_torch(masked, steps, repeats):
    torch.set_num_threads(1)
    torch.manual_seed(1)
    net = Net()
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(2)
    masks = [(net.lstm.weight_ih_l0, bcr_mask(4 * H, FEAT, g)), (net.lstm.weight_hh_l0, bcr_mask(4 * H, H, g))] if masked else []
    with torch.no_grad():
        for w, m in masks:
            w.mul_(m)
    x = torch.rand(T, N, FEAT) - 0.5
    y = torch.arange(N) % C

    def step():
        opt.zero_grad()
        F.cross_entropy(net(x), y).backward()
        opt.step()
        with torch.no_grad():
            for w, m in masks:
                w.mul_(m)

    for _ in range(2):
        step()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(steps):
            step()
        times.append((time.perf_counter() - t0) * 1e3 / steps)
    return min(times), statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pdc", default="build/train_rnn_bench")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    out = subprocess.run([a.pdc, "--threads", "1", "--steps", str(a.steps), "--repeats", str(a.repeats)],
                         check=True, capture_output=True, text=True).stdout
    pdc = {}
    for line in out.splitlines():
        print(line)
        mt = re.search(r"config=(\S+).*step_ms_min=(\S+) step_ms_median=(\S+)", line)
        if mt:
            pdc[mt.group(1)] = float(mt.group(3))
    for name, masked in (("dense", False), ("masked", True)):
        lo, med = time_torch(masked, a.steps, a.repeats)
        print(f"torch {torch.__version__} model=lstm config={name} threads=1 batch={N} step_ms_min={lo:.3f} "
              f"step_ms_median={med:.3f}")
        mine = pdc.get("dense" if not masked else "bcr")
        if mine:
            print(f"ratio torch_{name}/pdc_{'dense' if not masked else 'bcr'} = {med / mine:.2f}")


if __name__ == "__main__":
    main()
