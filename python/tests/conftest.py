"""Shared fixtures of the pdc Python suite (run by `make test-python`, from the repository root).
PDC_LIBRARY names the library under test; PDC_TEST_DATA the test data folder (default test/data)."""
import os
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # python/, so that `import pdc` finds the package under test

DATA = os.environ.get("PDC_TEST_DATA", os.path.join(HERE, "..", "..", "test", "data"))


def data(*parts):
    return os.path.join(DATA, *parts)


def raw(path, shape):
    return np.fromfile(path, dtype=np.float32).reshape(shape)


@pytest.fixture
def cache_dir(tmp_path):
    return str(tmp_path / "cache")


def relu_model(shape=(2, 3), context=None):
    import pdc
    m = pdc.Model("relu", context=context)
    return m.add_input("x", shape).add_layer("r", "relu", "x", "y").mark_output("y")


def fc_model(context=None, seed=0):
    """x[4,3] -> fc(3->2) -> y: a model small enough to check by hand."""
    import pdc
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((2, 3)).astype(np.float32)
    b = np.array([0.5, -0.25], np.float32)
    m = pdc.Model("fc", context=context)
    m.add_input("x", (4, 3)).add_constant("w", w).add_constant("b", b)
    m.add_layer("fc", "fc", ["x", "w", "b"], "y").mark_output("y")
    return m, w, b
