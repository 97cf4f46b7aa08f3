#!/usr/bin/python3
"""bench_python.py - the per-call overhead of pdc's Python bindings over the C call (`make bench-python`).

For each small model: the time of one pdc_program_run in C (bench_call: tensors wrapped once; and with the
wrap and destroy calls the bindings make per call), then in this process: pdc_program_run through ctypes on
tensors wrapped once, and a Python call, program(x, out=y) (output given) and program(x) (output allocated).
Each figure is the fastest of 15 samples of N calls, in process CPU time (time.process_time; the C helper
uses CLOCK_PROCESS_CPUTIME_ID), so that other processes on a busy machine do not count; 1 thread.
Overhead = Python call - C call. The issue's budget: <= 20 us per call.
Not a timed test: it prints a table and exits 0 (it fails only if a step fails).

usage: PDC_LIBRARY=build/libpdc.so.0 /usr/bin/python3 test/bench/bench_python.py --c-bench build/bench_call
"""
import argparse
import ctypes
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


def best_us(fns, n):
    """The fastest of SAMPLES samples of n calls of each function, the functions' samples interleaved (so that
    load from elsewhere on the machine falls on all of them alike)."""
    times = [[] for _ in fns]
    for _ in range(SAMPLES):
        for k, fn in enumerate(fns):
            t0 = time.process_time()
            for _ in range(n):
                fn()
            times[k].append((time.process_time() - t0) / n * 1e6)
    return [min(t) for t in times]


def raw_run(prog, x, y):
    """pdc_program_run called through ctypes on tensors wrapped once: the C call as Python reaches it."""
    lib, ctx = pdc._lib.lib, prog.context._handle
    handles = []
    for a in (x, y):
        dims = (ctypes.c_int64 * a.ndim)(*a.shape)
        t = ctypes.c_void_p()
        if lib.pdc_tensor_wrap(ctx, a.ndim, dims, a.ctypes.data, ctypes.byref(t)):
            raise RuntimeError("wrap failed")
        handles.append(t.value)
    tin, tout = (ctypes.c_void_p * 1)(handles[0]), (ctypes.c_void_p * 1)(handles[1])
    run, h = lib.pdc_program_run, prog._handle
    return (lambda: run(h, 1, tin, 1, tout)), handles


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
          f"1 thread, CPU time, fastest of {SAMPLES} samples of {args.n} calls "
          f"(python {sys.version.split()[0]}, numpy {np.__version__})")
    print(f"{'model':28} {'C run':>8} {'C wrap+run':>10} {'ctypes run':>10} {'py out=y':>9} {'py alloc':>9} "
          f"{'overhead':>9}")
    worst = 0.0
    for label, path in MODELS:
        c = subprocess.run([args.c_bench, path, args.target, "1", str(args.n)], check=True, capture_output=True,
                           text=True).stdout
        f = dict(kv.split("=") for kv in c.split())
        c_run, c_call = float(f["run_us"]), float(f["call_us"])
        prog = pdc.load(path).compile(target=args.target, threads=1)
        x = np.sin(0.37 * np.arange(np.prod(prog.inputs[0].shape)), dtype=np.float32).reshape(prog.inputs[0].shape)
        y = np.empty(prog.outputs[0].shape, np.float32)
        raw, handles = raw_run(prog, x, y)
        ct_run, py_out, py_alloc = best_us([raw, lambda: prog(x, out=y), lambda: prog(x)], args.n)
        for t in handles:
            pdc._lib.lib.pdc_tensor_destroy(t)
        over = py_out - c_run
        worst = max(worst, over)
        print(f"{label:28} {c_run:6.2f}us {c_call:8.2f}us {ct_run:8.2f}us {py_out:7.2f}us {py_alloc:7.2f}us "
              f"{over:7.2f}us")
    print(f"largest overhead (program(x, out=y) - pdc_program_run): {worst:.2f} us per call "
          f"({'within' if worst <= 20 else 'OVER'} the 20 us budget)")


if __name__ == "__main__":
    main()
