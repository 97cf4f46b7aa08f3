"""The float initializers of an ONNX file, read straight from the protobuf wire format (no onnx package):
enough for the tests to compare weights pdc wrote."""
import numpy as np


def _varint(b, i):
    r = s = 0
    while True:
        c = b[i]
        i += 1
        r |= (c & 0x7F) << s
        s += 7
        if c < 0x80:
            return r, i


def _fields(b):
    i = 0
    while i < len(b):
        key, i = _varint(b, i)
        f, wt = key >> 3, key & 7
        if wt == 0:
            v, i = _varint(b, i)
        elif wt == 1:
            v, i = b[i:i + 8], i + 8
        elif wt == 2:
            n, i = _varint(b, i)
            v, i = b[i:i + n], i + n
        elif wt == 5:
            v, i = b[i:i + 4], i + 4
        else:
            raise ValueError(f"wire type {wt}")
        yield f, wt, v


def initializers(data):
    """{name: float32 ndarray} of ModelProto.graph.initializer (TensorProto: dims 1, data_type 2, float_data 4,
    name 8, raw_data 9)."""
    data = memoryview(data)
    out = {}
    for f, _, graph in _fields(data):
        if f != 7:
            continue
        for g, _, tensor in _fields(graph):
            if g != 5:
                continue
            dims, name, raw, floats, dtype = [], None, None, [], 1
            for t, twt, v in _fields(tensor):
                if t == 1:
                    if twt == 0:
                        dims.append(v)
                    else:
                        j = 0
                        while j < len(v):
                            d, j = _varint(v, j)
                            dims.append(d)
                elif t == 2:
                    dtype = v
                elif t == 4:
                    floats.append(np.frombuffer(bytes(v), "<f4"))
                elif t == 8:
                    name = bytes(v).decode()
                elif t == 9:
                    raw = bytes(v)
            if dtype == 1:
                a = np.frombuffer(raw, "<f4") if raw is not None else np.concatenate(floats or [np.zeros(0, "<f4")])
                out[name] = a.reshape(dims)
    return out
