#!/usr/bin/python3
"""Networks as users export them: torchvision models, pruned in PyTorch, exported to ONNX, then
`pdc bench` against ONNX Runtime on the same file, in the same minutes.

    /usr/bin/python3 test/bench/torchvision/bench_torchvision.py [--pdc build/pdc] [--out TSV]
        [--models resnet18,vgg16,mobilenet_v2,resnet50] [--threads 1,2] [--batches 1,8] [--rounds 2] [--min-time S]

Needs Debian's python3-torch and python3-torchvision, node and onnxruntime-node in test/bench/ort
(make deps-bench); without ONNX Runtime the ORT columns are empty.

Every model comes twice: dense (random weights, fixed seed, BatchNorm with non-trivial statistics) and
pruned the way a pruning loop leaves it, exact zeros in the exported weights:
  - every 3x3 conv with group 1 and more than 3 input channels: each kernel keeps the best of 8
    4-entry patterns (centre included) by kept L2 norm, then the 50% kernels of smallest norm are
    removed (pdc's prune-pattern + prune-connectivity rule);
  - every nn.Linear, and for resnet50 and mobilenet_v2 every 1x1 conv: 1x4 blocks of its [out, in]
    matrix, the 50% (resnet50, mobilenet_v2: 75%) of smallest norm removed;
  - the stem, depthwise convs and 7x7 kernels stay dense (what `pdc prune` leaves by default).
The models are exported with a free batch dimension; each runs at every batch size of --batches (pdc bench
--shape input=Bx3x224x224, ONNX Runtime on the same B images), so throughput per image at batch 8 can be
compared with batch 1's. Per model, batch, threads and round: pdc's median run (pdc bench --json) and ONNX Runtime's median run
(ort_bench.js), alternating; the TSV holds the median over the rounds of each, their ratio, and the
largest difference between pdc's output and ORT's, relative to max|ORT|. Then the compile time of
the pruned ResNet-50 (or the last model) in a fresh kernel cache: cold, then twice from the cache.

With --schedule-out TSV it also times the DAG schedule (the schedule pass, passes.md): GoogLeNet (whose
Inception branches run side by side) and ResNet-18, each converted once with the passes
canonicalize,plan (sequential) and once with canonicalize,schedule,plan (dag), both timed with
`pdc bench` at 2 threads, alternating with the dag model run with PDC_CPU_LANES=1 (every step of 2+
chains side by side: forced) and =0 (never side by side: the schedule's order and memory plan alone);
the TSV holds the medians, how many layers are in steps of 2+ chains, and the 1-minute load average
before and after.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

import numpy as np
import torch
import torchvision
from torch import nn

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
ORT_JS = os.path.join(ROOT, "test", "bench", "ort_bench.js")
ORT_MODULE = os.path.join(ROOT, "test", "bench", "ort", "node_modules", "onnxruntime-node")

# 4-of-9 patterns of the 3x3 window (bit r*3+c), each with the centre: pdc's benchmark set
PATTERNS = [0x1B, 0x36, 0xD8, 0x1B0, 0x3A, 0xB2, 0xB8, 0x9A]


def log(msg):
    print("bench_torchvision: " + msg, file=sys.stderr, flush=True)


def randomize_bn(model, gen):
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            c = m.num_features
            m.running_mean.copy_(torch.randn(c, generator=gen) * 0.1)
            m.running_var.copy_(torch.rand(c, generator=gen) * 0.5 + 0.75)
            m.weight.data.copy_(torch.rand(c, generator=gen) * 0.5 + 0.75)
            m.bias.data.copy_(torch.randn(c, generator=gen) * 0.1)


def pattern_prune(conv, connectivity):
    w = conv.weight.data  # [O, C, 3, 3]
    o, c = w.shape[0], w.shape[1]
    k = w.reshape(o * c, 9)
    masks = torch.zeros(len(PATTERNS), 9)
    for p, bits in enumerate(PATTERNS):
        for i in range(9):
            masks[p, i] = float(bits >> i & 1)
    energy = (k * k) @ masks.t()  # [kernels, patterns]
    best = energy.argmax(dim=1)
    keep = masks[best]
    kept_energy = energy.gather(1, best[:, None])[:, 0]
    drop = int(connectivity * o * c)
    if drop:
        order = torch.argsort(kept_energy, stable=True)
        keep[order[:drop]] = 0.0
    conv.weight.data = (k * keep).reshape(w.shape)


def block_prune(weight, rate):
    w = weight.data
    rows = w.shape[0]
    m = w.reshape(rows, -1)
    cols = m.shape[1]
    if cols % 4:
        return
    blocks = m.reshape(rows, cols // 4, 4)
    norms = (blocks * blocks).sum(dim=2).flatten()
    drop = int(rate * norms.numel())
    order = torch.argsort(norms, stable=True)
    keep = torch.ones_like(norms)
    keep[order[:drop]] = 0.0
    weight.data = (blocks * keep.reshape(rows, cols // 4, 1)).reshape(w.shape)


def prune(model, name):
    first = True
    fc_rate = 0.75 if name in ("resnet50", "mobilenet_v2") else 0.5
    for m in model.modules():
        if isinstance(m, nn.Conv2d):
            if first:  # the stem
                first = False
                continue
            if m.groups == 1 and m.kernel_size == (3, 3) and m.in_channels > 3:
                pattern_prune(m, 0.5)
            elif name in ("resnet50", "mobilenet_v2") and m.groups == 1 and m.kernel_size == (1, 1):
                block_prune(m.weight, fc_rate)
        elif isinstance(m, nn.Linear):
            block_prune(m.weight, fc_rate)


def export(name, pruned, outdir):
    torch.manual_seed(1)
    gen = torch.Generator().manual_seed(2)
    model = getattr(torchvision.models, name)(weights=None)
    randomize_bn(model, gen)
    model.eval()
    if pruned:
        prune(model, name)
    kept = sum(int((p != 0).sum()) for p in model.parameters())
    total = sum(p.numel() for p in model.parameters())
    path = os.path.join(outdir, "%s-%s.onnx" % (name, "pruned" if pruned else "dense"))
    x = torch.randn(1, 3, 224, 224, generator=gen)
    with torch.no_grad():
        torch.onnx.export(model, x, path, opset_version=13, input_names=["input"], output_names=["logits"],
                          dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}})
    return path, total / max(kept, 1)


def run_json(cmd, env=None):
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        raise RuntimeError("%s failed (%d): %s" % (" ".join(cmd), r.returncode, r.stderr.strip()[-500:]))
    return json.loads(r.stdout.strip().splitlines()[-1])


def pdc_bench(pdc, model, threads, repeat, env, batch=None):
    shape = ["--shape", "input=%dx3x224x224" % batch] if batch else []
    return run_json([pdc, "bench", model, "--threads", str(threads), "--repeat", str(repeat), "--json"] + shape, env)


def ort_bench(model, inp, out, threads, min_time, batch=1):
    env = dict(os.environ, ORT_INPUT_DIMS="[%d,3,224,224]" % batch)
    return run_json(["node", ORT_JS, model, inp, out, str(threads), str(min_time)], env)


def max_rel_diff(a_path, b_path):
    a = np.fromfile(a_path, dtype="<f4")
    b = np.fromfile(b_path, dtype="<f4")
    if a.shape != b.shape or not b.size:
        return float("nan")
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-30))


def schedule_bench(args, work, env):
    rows = []
    for name in ("googlenet", "resnet18"):
        torch.manual_seed(1)
        kw = {"aux_logits": False, "init_weights": True} if name == "googlenet" else {}
        model = getattr(torchvision.models, name)(weights=None, **kw).eval()
        src = os.path.join(work, name + ".onnx")
        with torch.no_grad():
            torch.onnx.export(model, torch.randn(1, 3, 224, 224), src, opset_version=13, input_names=["input"],
                              output_names=["logits"])
        paths = {}
        for mode, passes in (("sequential", "canonicalize,plan"), ("dag", "canonicalize,schedule,plan")):
            paths[mode] = os.path.join(work, "%s-%s.pdc" % (name, mode))
            subprocess.run([args.pdc, "prune", src, "-o", paths[mode], "--passes", passes], check=True,
                           capture_output=True, env=env)
        r = subprocess.run([args.pdc, "inspect", paths["dag"], "--target", "cpu"], capture_output=True, text=True,
                           env=dict(env, PDC_OMP_STATIC="1"))
        lanes = r.stdout.count("in its step")
        # dag: each step's chains side by side where the latency model predicts it faster; forced: every step
        # of 2+ chains side by side (what dag did before); never: the schedule's order and memory plan alone
        modes = (("sequential", "sequential", None), ("dag", "dag", None), ("forced", "dag", "1"), ("never", "dag", "0"))
        ms = {m[0]: [] for m in modes}
        load0 = os.getloadavg()[0]
        for _ in range(max(args.rounds, 3)):
            for mode, path, lanes_env in modes:
                e = dict(env, PDC_CPU_LANES=lanes_env) if lanes_env else env
                ms[mode].append(pdc_bench(args.pdc, paths[path], 2, args.repeat, e)["median_ms"])
        med = {m: statistics.median(v) for m, v in ms.items()}
        load = "%.2f-%.2f" % (load0, os.getloadavg()[0])
        rows.append((name, 2, med["sequential"], med["dag"], med["sequential"] / med["dag"], lanes, med["forced"],
                     med["never"], load))
        log("%s at 2 threads: sequential %.2f ms, dag %.2f ms (%.2fx), forced lanes %.2f ms, never %.2f ms, "
            "%d layers in steps of 2+ chains, load %s" % (name, med["sequential"], med["dag"],
                                                          med["sequential"] / med["dag"], med["forced"], med["never"],
                                                          lanes, load))
    with open(args.schedule_out, "w") as f:
        f.write("model\tthreads\tsequential_ms\tdag_ms\tspeedup\tlayers_in_lanes\tforced_ms\tnever_ms\tload\n")
        for r in rows:
            f.write("%s\t%d\t%.3f\t%.3f\t%.3f\t%d\t%.3f\t%.3f\t%s\n" % r)
    log("wrote " + args.schedule_out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pdc", default=os.path.join(ROOT, "build", "pdc"))
    ap.add_argument("--out", default=None, help="TSV to write (default: print only)")
    ap.add_argument("--models", default="resnet18,vgg16,mobilenet_v2,resnet50")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--batches", default="1,8", help="batch sizes (pdc runs fewer repetitions at larger ones)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=30, help="pdc bench runs per round")
    ap.add_argument("--min-time", type=float, default=2.0, help="ORT seconds per round")
    ap.add_argument("--schedule-out", default=None, help="also time sequential against dag; TSV to write")
    args = ap.parse_args()
    have_ort = os.path.isdir(ORT_MODULE) and subprocess.run(["node", "--version"], capture_output=True).returncode == 0
    if not have_ort:
        log("no onnxruntime-node in test/bench/ort (make deps-bench): ORT columns stay empty")
    work = tempfile.mkdtemp(prefix="pdc-tv-")
    cache = os.path.join(work, "cache")
    env = dict(os.environ, XDG_CACHE_HOME=cache)
    batches = [int(v) for v in args.batches.split(",")]
    inputs = {}
    for b in batches:
        inputs[b] = os.path.join(work, "input-%d.bin" % b)
        np.random.default_rng(3).standard_normal((b, 3, 224, 224)).astype("<f4").tofile(inputs[b])
    rows = []
    last_pruned = None
    for name in args.models.split(","):
        for pruned in (False, True):
            log("exporting %s (%s)" % (name, "pruned" if pruned else "dense"))
            path, comp = export(name, pruned, work)
            if pruned:
                last_pruned = path
            pdc_out, ort_out = os.path.join(work, "pdc.bin"), os.path.join(work, "ort.bin")
            for b in batches:
                subprocess.run([args.pdc, "run", path, "--target", "cpu", "--shape", "input=%dx3x224x224" % b,
                                "-i", inputs[b], "-o", pdc_out], check=True, env=env, capture_output=True)
                for t in [int(v) for v in args.threads.split(",")]:
                    p_ms, o_ms = [], []
                    for r in range(args.rounds):
                        p_ms.append(pdc_bench(args.pdc, path, t, max(args.repeat // b, 5), env, b)["median_ms"])
                        if have_ort:
                            o_ms.append(ort_bench(path, inputs[b], ort_out, t, args.min_time, b)["median_ms"])
                    pm = statistics.median(p_ms)
                    om = statistics.median(o_ms) if o_ms else float("nan")
                    err = max_rel_diff(pdc_out, ort_out) if have_ort else float("nan")
                    row = (name, "pruned" if pruned else "dense", comp, b, t, pm, om, om / pm, err, min(p_ms), max(p_ms),
                           min(o_ms) if o_ms else float("nan"), max(o_ms) if o_ms else float("nan"))
                    rows.append(row)
                    log("%-12s %-6s %5.2fx fewer weights, batch %d, %d thread%s: pdc %.2f ms, ORT %.2f ms, pdc %.2fx, "
                        "max rel diff %.2g" % (name, row[1], comp, b, t, "" if t == 1 else "s", pm, om, om / pm, err))
    compile_rows = []
    if last_pruned:
        cold = os.path.join(work, "cold-cache")
        for k in range(3):
            e = dict(os.environ, XDG_CACHE_HOME=cold)
            j = pdc_bench(args.pdc, last_pruned, 1, 1, e, 1)
            compile_rows.append((os.path.basename(last_pruned)[:-5], "cold" if k == 0 else "cached", j["compile_ms"]))
            log("compile %s (%s): %.0f ms" % (compile_rows[-1][0], compile_rows[-1][1], j["compile_ms"]))
    if args.schedule_out:
        schedule_bench(args, work, env)
    if args.out:
        with open(args.out, "w") as f:
            f.write("model\tvariant\tcompression\tbatch\tthreads\tpdc_ms\tort_ms\tspeedup\tmax_rel_diff\tpdc_min\t"
                    "pdc_max\tort_min\tort_max\n")
            for r in rows:
                f.write("%s\t%s\t%.2f\t%d\t%d\t%.3f\t%.3f\t%.3f\t%.2e\t%.3f\t%.3f\t%.3f\t%.3f\n" % r)
            for c in compile_rows:
                f.write("# compile %s %s: %.0f ms\n" % c)
        log("wrote " + args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
