#!/usr/bin/python3
"""torchvision's video models as users export them, dense and KGS-pruned in PyTorch: `pdc bench` on
cpu against ONNX Runtime on the same ONNX file, in the same minutes.

    /usr/bin/python3 test/bench/torchvision/bench_video.py [--pdc build/pdc] [--out TSV]
        [--models r3d_18,mc3_18,r2plus1d_18] [--threads 1] [--rounds 3] [--repeat 15] [--min-time S]

The models come from test/onnx/make_video_models.py (random weights, fixed seeds, BatchNorm3d with
non-trivial statistics; -kgs: 4x4 kernel groups, 7 of 27 / 4 of 9 / 2 of 3 positions, 8 masks per
layer, the stem and 1x1x1 convs dense) at 1x3x8x112x112. Per model, variant, threads and round: pdc's
median run (pdc bench --json) and ONNX Runtime's median run (ort_bench.js), alternating; the TSV holds
the medians over the rounds, their ratio, and pdc's and ORT's largest difference from PyTorch's output
on the seeded clip, relative to max|PyTorch|. Needs node and onnxruntime-node in test/bench/ort (make
deps-bench, or ORT_NODE_MODULE); without them the ORT columns are empty.
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile

from bench_torchvision import ORT_JS, ORT_MODULE, ROOT, max_rel_diff, pdc_bench, run_json

sys.path.insert(0, os.path.join(ROOT, "test", "onnx"))
import make_video_models  # noqa: E402  (test/onnx, shared with make test-onnx-video)


def log(msg):
    print("bench_video: " + msg, file=sys.stderr, flush=True)


def ort_bench(model, inp, out, threads, min_time):
    env = dict(os.environ, ORT_INPUT_DIMS="[1,3,8,112,112]")
    return run_json(["node", ORT_JS, model, inp, out, str(threads), str(min_time)], env)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pdc", default=os.path.join(ROOT, "build", "pdc"))
    ap.add_argument("--out", default=None, help="TSV to write (default: print only)")
    ap.add_argument("--models", default="r3d_18,mc3_18,r2plus1d_18")
    ap.add_argument("--threads", default="1")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=15, help="pdc bench runs per round")
    ap.add_argument("--min-time", type=float, default=3.0, help="ORT seconds per round")
    args = ap.parse_args()
    ort_module = os.environ.get("ORT_NODE_MODULE", ORT_MODULE)
    have_ort = os.path.isdir(ort_module) and subprocess.run(["node", "--version"], capture_output=True).returncode == 0
    if not have_ort:
        log("no onnxruntime-node in test/bench/ort (make deps-bench): ORT columns stay empty")
    work = tempfile.mkdtemp(prefix="pdc-video-")
    env = dict(os.environ, XDG_CACHE_HOME=os.path.join(work, "cache"))
    rows = []
    for base in args.models.split(","):
        for variant in ("dense", "kgs"):
            name = base if variant == "dense" else base + "-kgs"
            log("exporting " + name)
            path = make_video_models.export(name, work)
            inp, want = os.path.join(work, name + ".in.bin"), os.path.join(work, name + ".out.bin")
            pdc_out, ort_out = os.path.join(work, "pdc.bin"), os.path.join(work, "ort.bin")
            subprocess.run([args.pdc, "run", path, "--target", "cpu", "-i", inp, "-o", pdc_out], check=True, env=env,
                           capture_output=True)
            for t in [int(v) for v in args.threads.split(",")]:
                p_ms, o_ms = [], []
                for _ in range(args.rounds):
                    p_ms.append(pdc_bench(args.pdc, path, t, args.repeat, env)["median_ms"])
                    if have_ort:
                        o_ms.append(ort_bench(path, inp, ort_out, t, args.min_time)["median_ms"])
                pm = statistics.median(p_ms)
                om = statistics.median(o_ms) if o_ms else float("nan")
                p_err = max_rel_diff(pdc_out, want)
                o_err = max_rel_diff(ort_out, want) if have_ort else float("nan")
                row = (base, variant, t, pm, om, om / pm, p_err, o_err, min(p_ms), max(p_ms),
                       min(o_ms) if o_ms else float("nan"), max(o_ms) if o_ms else float("nan"))
                rows.append(row)
                log("%-12s %-5s %d thread%s: pdc %.1f ms, ORT %.1f ms, ORT/pdc %.2fx, vs PyTorch: pdc %.2g, ORT %.2g"
                    % (base, variant, t, "" if t == 1 else "s", pm, om, om / pm, p_err, o_err))
    if args.out:
        with open(args.out, "w") as f:
            f.write("model\tvariant\tthreads\tpdc_ms\tort_ms\tspeedup\tpdc_vs_torch\tort_vs_torch\tpdc_min\tpdc_max\t"
                    "ort_min\tort_max\n")
            for r in rows:
                f.write("%s\t%s\t%d\t%.2f\t%.2f\t%.3f\t%.2e\t%.2e\t%.2f\t%.2f\t%.2f\t%.2f\n" % r)
        log("wrote " + args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
