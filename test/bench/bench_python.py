#!/usr/bin/python3
"""bench_python.py - the per-call overhead of pdc's Python bindings over the C call (`make bench-python`).

For each small model: the time of one pdc_program_run in C (bench_call, tensors wrapped once), then
of one Python call, program(x, out=y) (output given) and program(x) (output allocated), each the fastest of
15 samples of N calls (the least disturbed by other load on the machine). Overhead = Python call - C call. The issue's budget: <= 20 us per call.
Not a timed test: it prints a table and exits 0 (it fails only if a step fails).

usage: PDC_LIBRARY=build/libpdc.so.0 /usr/bin/python3 test/bench/bench_python.py --c-bench build/bench_call
"""
import argparse
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))

import numpy as np  # noqa: E402

import pdc  # noqa: E402

MODELS = [  # (label, path relative to the repository root)
    ("relu 1x16 (IR text)", "build/bench-python/relu.pdcir"),
    ("block_fc.onnx 4x64 fc", "test/data/onnx/block_fc.onnx"),
    ("pattern_cnn.onnx 1x3x16x16", "test/data/onnx/pattern_cnn.onnx"),
]
SAMPLES = 15


def best_us(fn, n):
    times = []
    for _ in range(SAMPLES):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        times.append((time.perf_counter() - t0) / n * 1e6)
    return min(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--c-bench", required=True, help="the bench_call binary")
    ap.add_argument("--target", default="cpu")
    ap.add_argument("-n", type=int, default=20000, help="calls per sample")
    args = ap.parse_args()
    root = os.path.normpath(os.path.join(HERE, "..", ".."))
    os.chdir(root)
    os.makedirs("build/bench-python", exist_ok=True)
    m = pdc.Model("relu")
    m.add_input("x", (1, 16)).add_layer("r", "relu", "x", "y").mark_output("y").save(MODELS[0][1])
    print(f"pdc {pdc.__version__} Python bindings: per-call overhead over the C call, target {args.target}, "
          f"1 thread, fastest of {SAMPLES} samples of {args.n} calls (python {sys.version.split()[0]}, numpy {np.__version__})")
    print(f"{'model':30} {'C run':>9} {'C wrap+run':>11} {'py out=y':>9} {'py alloc':>9} {'overhead':>9}")
    worst = 0.0
    for label, path in MODELS:
        c = subprocess.run([args.c_bench, path, args.target, "1", str(args.n)], check=True, capture_output=True,
                           text=True).stdout
        f = dict(kv.split("=") for kv in c.split())
        c_run, c_call = float(f["run_us"]), float(f["call_us"])
        prog = pdc.load(path).compile(target=args.target, threads=1)
        x = np.random.default_rng(0).standard_normal(prog.inputs[0].shape).astype(np.float32)
        y = np.empty(prog.outputs[0].shape, np.float32)
        py_out = best_us(lambda: prog(x, out=y), args.n)
        py_alloc = best_us(lambda: prog(x), args.n)
        over = py_out - c_run
        worst = max(worst, over)
        print(f"{label:30} {c_run:8.2f}us {c_call:10.2f}us {py_out:8.2f}us {py_alloc:8.2f}us {over:8.2f}us")
    print(f"largest overhead (program(x, out=y) - pdc_program_run): {worst:.2f} us per call "
          f"({'within' if worst <= 20 else 'OVER'} the 20 us budget)")


if __name__ == "__main__":
    main()
