#!/usr/bin/python3
"""NaN and Inf through the ONNX test models: pdc (ref and cpu) against ONNX Runtime.

    /usr/bin/python3 test/bench/nonfinite_vs_ort.py [build/pdc]

For each pruned or dense test model of test/data/onnx and three inputs (all NaN, one +Inf, one NaN
among normal values) it runs ONNX Runtime (onnxruntime-node in test/bench/ort, make deps-bench) and
`pdc run` on both host targets, and prints how many output elements fall in the same class (NaN,
+Inf, -Inf, finite) as ONNX Runtime's. docs/reliability.md records the result.
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODELS = {"pattern_cnn": [1, 3, 16, 16], "resnet_small": [2, 3, 32, 32], "vgg_small": [2, 3, 32, 32],
          "mobilenetv2_small": [1, 3, 32, 32]}


def classes(a):
    return np.where(np.isnan(a), "N", np.where(np.isposinf(a), "+", np.where(np.isneginf(a), "-", "f")))


def main():
    pdc = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build", "pdc")
    work = tempfile.mkdtemp(prefix="pdc-nonfinite-")
    inp, ort_out, pdc_out = (os.path.join(work, f) for f in ("in.bin", "ort.bin", "pdc.bin"))
    same_all = True
    for name, dims in MODELS.items():
        model = os.path.join(ROOT, "test", "data", "onnx", name + ".onnx")
        n = int(np.prod(dims))
        rng = np.random.default_rng(1)
        cases = {"all NaN": np.full(n, np.nan, "f4"), "one +Inf": rng.standard_normal(n).astype("f4"),
                 "one NaN": rng.standard_normal(n).astype("f4")}
        cases["one +Inf"][n // 3] = np.inf
        cases["one NaN"][n // 2] = np.nan
        for case, x in cases.items():
            x.astype("<f4").tofile(inp)
            subprocess.run(["node", os.path.join(ROOT, "test", "bench", "ort_run.js"), model, inp, json.dumps(dims),
                            ort_out], check=True)
            o = np.fromfile(ort_out, "<f4")
            res = []
            for target in ("ref", "cpu"):
                subprocess.run([pdc, "run", model, "--target", target, "-i", inp, "-o", pdc_out], check=True,
                               capture_output=True)
                p = np.fromfile(pdc_out, "<f4")[: o.size]
                same = int((classes(p) == classes(o)).sum())
                same_all &= same == o.size
                res.append("%s %d/%d" % (target, same, o.size))
            kinds = dict(zip(*np.unique(classes(o), return_counts=True)))
            print("%-18s %-9s ONNX Runtime %-22s same class: %s" % (name, case, kinds, ", ".join(res)))
    return 0 if same_all else 1


if __name__ == "__main__":
    sys.exit(main())
