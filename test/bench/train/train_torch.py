#!/usr/bin/python3
"""train_torch.py - training step time of the digits CNN and ResNet-18: pdc (test/bench/train/train_bench.c) and PyTorch side by side.

Run with Debian's /usr/bin/python3 (python3-torch 1.13), e.g. `make bench-train`, or
    /usr/bin/python3 test/bench/train/train_torch.py --pdc build/train_bench [--model digits|resnet18]
        [--threads 1,2] [--steps N] [--repeats 5]

--model resnet18 (issue #38): torchvision's ResNet-18 (written out here, so torchvision is not needed) with 10
classes on [32, 3, 32, 32] inputs, plain SGD lr 0.01; "pruned" masks every 3x3 conv but the stem to 4 of 9 taps
in half of its kernels (PyTorch's compute stays dense). --model vgg16 (VGG-16's convolutions, no batchnorm, global
average pooling + fc 512->10) and --model mobilenetv2 (torchvision's, 10 classes, no dropout) the same way
(MobileNetV2's 3x3 convs are depthwise: nothing to mask). PyTorch runs with glibc's malloc thresholds raised
(GLIBC_TUNABLES, as the issue measured it: it keeps PyTorch's large buffers from being mapped afresh every step);
train_bench runs without them.

The net, batch and optimizer are examples/train_digits.c's: conv3x3(1->16, pad 1)-ReLU-conv3x3(16->32, pad 1)-ReLU-
flatten-fc(2048->10), softmax cross-entropy, Adam lr 1e-3, batch 32, inputs [32,1,8,8]. A PyTorch step is
zero_grad + forward + loss + backward + optimizer.step; for the pruned configuration it also re-applies the masks
after the step (masked retraining as PyTorch users write it: the compute stays dense). Each configuration runs 50
warm-up steps, then `repeats` timed runs of `steps` steps; the minimum and the median per-step wall time are
reported, and with 1 thread also the minimum CPU time of the calling thread (where all the work runs with 1
thread; the least disturbed by other load on the machine). pdc and PyTorch alternate per thread count.
"""
import argparse
import ctypes
import gc
import os
import statistics
import subprocess
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


def torch_net():
    return nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(),
                         nn.Flatten(), nn.Linear(2048, 10))


class BasicBlock(nn.Module):
    def __init__(self, c, o, s):
        super().__init__()
        self.conv1 = nn.Conv2d(c, o, 3, s, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(o)
        self.conv2 = nn.Conv2d(o, o, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(o)
        self.down = None
        if s != 1 or c != o:
            self.down = nn.Sequential(nn.Conv2d(c, o, 1, s, bias=False), nn.BatchNorm2d(o))

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return F.relu(y + (self.down(x) if self.down is not None else x))


def resnet18(classes=10):
    """torchvision.models.resnet18(num_classes=classes), layer for layer."""
    layers = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(3, 2, 1)]
    c = 64
    for stage in range(4):
        o = 64 << stage
        for i in range(2):
            layers.append(BasicBlock(c, o, 2 if stage > 0 and i == 0 else 1))
            c = o
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, classes)]
    return nn.Sequential(*layers)


def vgg16(classes=10):
    """torchvision's VGG-16 convolutions (no batchnorm) with a CIFAR-style classifier, as train_bench builds it."""
    cfg = [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M"]
    layers, c = [], 3
    for v in cfg:
        if v == "M":
            layers.append(nn.MaxPool2d(2, 2))
        else:
            layers += [nn.Conv2d(c, v, 3, padding=1), nn.ReLU()]
            c = v
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, classes)]
    return nn.Sequential(*layers)


class InvertedResidual(nn.Module):
    def __init__(self, c, o, s, t):
        super().__init__()
        hid = c * t
        layers = []
        if t != 1:
            layers += [nn.Conv2d(c, hid, 1, bias=False), nn.BatchNorm2d(hid), nn.ReLU6()]
        layers += [nn.Conv2d(hid, hid, 3, s, 1, groups=hid, bias=False), nn.BatchNorm2d(hid), nn.ReLU6(),
                   nn.Conv2d(hid, o, 1, bias=False), nn.BatchNorm2d(o)]
        self.conv = nn.Sequential(*layers)
        self.res = s == 1 and c == o

    def forward(self, x):
        return x + self.conv(x) if self.res else self.conv(x)


def mobilenetv2(classes=10):
    """torchvision.models.mobilenet_v2(num_classes=classes) without its dropout, layer for layer."""
    layers, c = [nn.Conv2d(3, 32, 3, 2, 1, bias=False), nn.BatchNorm2d(32), nn.ReLU6()], 32
    for t, o, n, s in ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2),
                       (6, 320, 1, 1)):
        for i in range(n):
            layers.append(InvertedResidual(c, o, s if i == 0 else 1, t))
            c = o
    layers += [nn.Conv2d(c, 1280, 1, bias=False), nn.BatchNorm2d(1280), nn.ReLU6(), nn.AdaptiveAvgPool2d(1),
               nn.Flatten(), nn.Linear(1280, classes)]
    return nn.Sequential(*layers)


def resnet_masks(net):
    """8 patterns of 4 taps + 50% connectivity on every 3x3 conv but the stem (mask density only matters here)."""
    g = torch.Generator().manual_seed(0)
    masks = []
    for m in net.modules():
        if isinstance(m, nn.Conv2d) and m.kernel_size == (3, 3) and m.groups == 1 and m.in_channels > 3:
            o, c = m.weight.shape[:2]
            pat = torch.zeros(o * c, 9)
            for k in range(o * c):
                pat[k, [4] + torch.randperm(8, generator=g)[:3].add(1).tolist()] = 1
            keep = (torch.rand(o * c, 1, generator=g) < 0.5).float()
            masks.append((m.weight, (pat * keep).view_as(m.weight)))
    return masks


def torch_masks(net):
    """Masks with the demo's kept shares (4/9 of each kept kernel, half the kernels; 20% of the fc's 1x4 blocks)."""
    g = torch.Generator().manual_seed(0)
    masks = []
    for m in (net[0], net[2]):
        o, c = m.weight.shape[:2]
        pat = torch.zeros(o, c, 9)
        for k in range(o * c):
            pat.view(-1, 9)[k, [4] + torch.randperm(8, generator=g)[:3].add(1).tolist()] = 1  # roughly: 4 of 9
        keep = (torch.rand(o, c, generator=g) < 0.5).float().unsqueeze(-1)
        masks.append((m.weight, (pat * keep).view_as(m.weight)))
    blocks = (torch.rand(10, 512, generator=g) < 0.2).float()
    masks.append((net[5].weight, blocks.repeat_interleave(4, dim=1)))
    return masks


def status_mb(field):
    """VmRSS or VmHWM of this process in MB."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field):
                return int(line.split()[1]) / 1024.0
    return 0.0


def peak_reset_mb():
    """The resident memory now, freed heap returned first and the peak reset to it (clear_refs 5), as
    train_bench does for pdc."""
    gc.collect()
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    return status_mb("VmRSS:")


def time_torch(model, threads, steps, repeats, pruned):
    rss0 = peak_reset_mb()
    torch.set_num_threads(threads)
    torch.manual_seed(1)
    if model != "digits":
        net = {"resnet18": resnet18, "vgg16": vgg16, "mobilenetv2": mobilenetv2}[model]()
        opt = torch.optim.SGD(net.parameters(), lr=0.01)
        masks = resnet_masks(net) if pruned else []
        x = torch.randint(0, 17, (32, 3, 32, 32)).float() / 16
    else:
        net = torch_net()
        opt = torch.optim.Adam(net.parameters(), lr=1e-3)
        masks = torch_masks(net) if pruned else []
        x = torch.randint(0, 17, (32, 1, 8, 8)).float() / 16
    net.train()
    y = torch.arange(32) % 10

    def step():
        opt.zero_grad()
        loss = F.cross_entropy(net(x), y)
        loss.backward()
        opt.step()
        if masks:
            with torch.no_grad():
                for w, m in masks:
                    w.mul_(m)

    for _ in range(3 if model != "digits" else 50):
        step()
    peak_reset_mb()
    times, cpu = [], []
    for _ in range(repeats):
        t0, c0 = time.perf_counter(), time.thread_time()
        for _ in range(steps):
            step()
        times.append((time.perf_counter() - t0) * 1e3 / steps)
        cpu.append((time.thread_time() - c0) * 1e3 / steps)
    return min(times), statistics.median(times), (min(cpu) if threads == 1 else 0.0), status_mb("VmHWM:") - rss0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pdc", default="build/train_bench", help="path of the built train_bench")
    ap.add_argument("--model", default="digits", choices=("digits", "resnet18", "vgg16", "mobilenetv2"))
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--steps", type=int, default=0, help="steps per timed run (default 200 digits, else 5)")
    ap.add_argument("--repeats", type=int, default=5)
    a = ap.parse_args()
    if not a.steps:
        a.steps = 5 if a.model != "digits" else 200
    tunables = "glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=4294967295"
    if os.environ.get("GLIBC_TUNABLES") != tunables:  # PyTorch as the issue timed it: re-run with the tunables set
        os.execve(sys.executable, [sys.executable] + sys.argv, dict(os.environ, GLIBC_TUNABLES=tunables))
    pdc_env = {k: v for k, v in os.environ.items() if k != "GLIBC_TUNABLES"}
    opt_name = "SGD lr 0.01" if a.model != "digits" else "Adam"
    print(f"# {a.model}: PyTorch {torch.__version__} ({sys.executable}, GLIBC_TUNABLES={tunables}), batch 32, "
          f"{opt_name}, {a.steps} steps x {a.repeats} repeats")
    rows = []
    for t in a.threads.split(","):
        out = subprocess.run([a.pdc, "--model", a.model, "--threads", t, "--steps", str(a.steps), "--repeats",
                              str(a.repeats)], check=True, capture_output=True, text=True, env=pdc_env).stdout
        for line in out.splitlines():
            f = dict(kv.split("=", 1) for kv in line.split()[1:])
            rows.append(("pdc", f["config"], int(t), float(f["step_ms_min"]), float(f["step_ms_median"]), f["isa"],
                         float(f["cpu_ms_min"]), float(f["peak_mb"])))
        for pruned in (False, True):
            mn, md, cp, peak = time_torch(a.model, int(t), a.steps, a.repeats, pruned)
            rows.append(("torch", "pruned_masked" if pruned else "dense", int(t), mn, md, "-", cp, peak))
    for r in rows:
        print(f"{r[0]} config={r[1]} threads={r[2]} batch=32 step_ms_min={r[3]:.4f} step_ms_median={r[4]:.4f} "
              f"cpu_ms_min={r[6]:.4f} isa={r[5]} peak_mb={r[7]:.1f}")
    print("\n| threads | pdc dense | pdc pruned, sparse kernels | pdc pruned, dense kernels | PyTorch dense | "
          "PyTorch pruned (masked) | sparse gain (pdc) | pdc vs PyTorch, dense | pdc vs PyTorch, pruned |")
    print("|---|---|---|---|---|---|---|---|---|")
    for t in sorted({r[2] for r in rows}):
        for col, what in ((3, "wall, min"), (4, "wall, median"), (6, "CPU, min")):
            get = {(r[0], r[1]): r[col] for r in rows if r[2] == t}
            d, s, sd = get[("pdc", "dense")], get[("pdc", "pruned_sparse_kernels")], get[("pdc", "pruned_dense_kernels")]
            td, tp = get[("torch", "dense")], get[("torch", "pruned_masked")]
            if d <= 0:
                continue
            print(f"| {t} ({what}) | {d:.3f} ms | {s:.3f} ms | {sd:.3f} ms | {td:.3f} ms | {tp:.3f} ms | "
                  f"{sd / s:.2f}x (vs dense kernels), {d / s:.2f}x (vs dense net) | {td / d:.2f}x | {tp / s:.2f}x |")
        get = {(r[0], r[1]): r[7] for r in rows if r[2] == t}
        print(f"| {t} (peak MB) | {get[('pdc', 'dense')]:.0f} | {get[('pdc', 'pruned_sparse_kernels')]:.0f} | "
              f"{get[('pdc', 'pruned_dense_kernels')]:.0f} | {get[('torch', 'dense')]:.0f} | "
              f"{get[('torch', 'pruned_masked')]:.0f} | | | |")
    print("(per-step times over the repeats; pdc vs PyTorch: PyTorch's time / pdc's, above 1 = pdc faster; "
          "CPU = the calling thread's CPU time, 1 thread only; peak MB: the most resident memory during the timed "
          "steps less what the process held before the trainer or net was made)")

if __name__ == "__main__":
    main()
