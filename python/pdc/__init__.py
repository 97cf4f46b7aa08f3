"""pdc: Python bindings of the pdc compiler for pruned neural networks (ctypes over libpdc.so.0's C ABI).

    import pdc
    model = pdc.load("model.onnx")                  # .onnx, .pdc or .pdcir
    print(model.layers[0])                          # name, op, shapes, sparsity, weights, FLOPs
    model.transform("prune-pattern,prune-connectivity", connectivity=0.5)
    model.save("pruned.onnx")
    program = model.compile(target="cpu", threads=2)
    y = program(x)                                  # x: a C-contiguous float32 NumPy array

pdc.torch (imported on first use, needs PyTorch) prunes and compiles torch.nn.Modules. See python/README.md.
"""
from . import _lib
from ._core import Context, Model, Program, TensorInfo, Trainer, load, parse, project
from ._errors import (ERRORS, CopyWarning, CorruptError, Error, InternalError, InvalidArgError, InvalidModelError,
                      InvalidStateError, IoError, NoDeviceError, NotFoundError, NumericError, OutOfMemoryError,
                      ParseError, ShapeError, SizeOverflowError, UnknownTargetError, UnsupportedError)

__version__ = _lib.lib.pdc_version_string().decode()
library_path = _lib.lib._name


def passes():
    """[(name, requires, guarantees)] of the pass table, in the usual pipeline order."""
    import ctypes
    out, i = [], 0
    while True:
        n, r, g = ctypes.c_char_p(), ctypes.c_char_p(), ctypes.c_char_p()
        if _lib.lib.pdc_pass_info(i, ctypes.byref(n), ctypes.byref(r), ctypes.byref(g)):
            return out
        out.append((n.value.decode(), r.value.decode(), g.value.decode()))
        i += 1


def __getattr__(name):  # pdc.torch is imported on first use only: it needs PyTorch
    if name == "torch":
        import importlib
        return importlib.import_module(".torch", __name__)
    raise AttributeError(f"module 'pdc' has no attribute {name!r}")


__all__ = ["Context", "Model", "Program", "TensorInfo", "Trainer", "load", "parse", "project", "passes", "Error",
           "ERRORS", "CopyWarning", "InvalidArgError", "OutOfMemoryError", "IoError", "ParseError", "CorruptError",
           "InvalidModelError", "ShapeError", "UnsupportedError", "UnknownTargetError", "NoDeviceError",
           "InvalidStateError", "SizeOverflowError", "NotFoundError", "InternalError", "NumericError"]
