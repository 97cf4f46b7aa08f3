"""examples/python/ run as written (shortened where they take options)."""
import os
import re
import subprocess
import sys

import pytest

from conftest import data

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


def run_example(name, *args, tmp_path):
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"), XDG_CACHE_HOME=str(tmp_path))
    r = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "python", name), *args], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_digits_example(tmp_path):
    out = run_example("digits.py", "--data", data("digits.bin"), "--epochs", "3", "--retrain", "1",
                      tmp_path=tmp_path)
    dense = float(re.search(r"dense: .* test accuracy ([0-9.]+)", out).group(1))
    final = float(re.search(r"compiled for cpu: test accuracy ([0-9.]+) on 450 digits", out).group(1))
    pruned = float(re.search(r"pruned: .* test accuracy ([0-9.]+)", out).group(1))
    assert dense > 0.8 and abs(final - pruned) < 1e-9, out  # the compiled program classifies as the trainer did
    assert re.search(r"conv2 +kept +1056/4640 +pattern 3x3: 8 patterns", out), out


def test_resnet18_example(tmp_path):
    pytest.importorskip("torch", reason="python3-torch is not installed: the ResNet-18 example is skipped")
    pytest.importorskip("torchvision", reason="python3-torchvision is not installed: the ResNet-18 example is skipped")
    out = run_example("resnet18.py", tmp_path=tmp_path)
    assert "pruned 16 weights, kept 2,441,216 of 10,985,472" in out, out
    assert float(re.search(r"max \|pdc - torch\| = (\S+)", out).group(1)) < 1e-4, out
