"""Context, Model, Program and Trainer: thin owners of the C handles of include/pdc.h."""
import ctypes
import os
import threading
import warnings
import weakref
from collections import namedtuple

import numpy as np

from . import _lib
from ._errors import CopyWarning, InvalidStateError, error

_L = _lib.lib
_c_void_p = ctypes.c_void_p
_byref = ctypes.byref
_F32 = np.dtype(np.float32)
_PTR = ctypes.sizeof(ctypes.c_void_p)
_addressof = ctypes.addressof
_wrap, _run_c, _destroy_t = _L.pdc_tensor_wrap, _L.pdc_program_run, _L.pdc_tensor_destroy

TensorInfo = namedtuple("TensorInfo", "name shape")
TensorInfo.__doc__ = "A graph input or output: its name and shape (a tuple; -1 marks a symbolic dim)."


def _b(s):
    return s.encode() if isinstance(s, str) else s


def _dims(shape):
    shape = tuple(int(d) for d in shape)
    return len(shape), (ctypes.c_int64 * max(len(shape), 1))(*shape)


def as_f32(a, what):
    """a as a C-contiguous float32 ndarray: the array itself when it is one (no copy); otherwise one
    converted copy, with a CopyWarning naming `what`. Objects with __dlpack__ (e.g. CPU torch tensors) are
    viewed through DLPack first, without a copy."""
    if type(a) is np.ndarray and a.dtype == np.float32 and a.flags.c_contiguous:
        return a
    if not isinstance(a, np.ndarray) and hasattr(a, "__dlpack__"):
        try:
            a = np.from_dlpack(a)
        except (TypeError, RuntimeError, BufferError, AttributeError):
            a = np.asarray(a)
        if a.dtype == np.float32 and a.flags.c_contiguous:
            return a
    if isinstance(a, np.ndarray):
        why = ("dtype " + str(a.dtype)) if a.dtype != np.float32 else "not C-contiguous"
        if a.dtype == np.float32 and a.flags.c_contiguous:  # an ndarray subclass
            return np.asarray(a)
    else:
        why = type(a).__name__
    warnings.warn(f"pdc: {what}: {why}, converted to a C-contiguous float32 copy (pass a C-contiguous float32 "
                  f"NumPy array to avoid the copy)", CopyWarning, stacklevel=3)
    return np.ascontiguousarray(a, dtype=np.float32)


class _Owned:
    """An object owning one C handle, destroyed exactly once: by close(), by the end of a with block, or when
    the object is garbage collected. It keeps its Context alive."""

    _handle = None
    _destroy = None  # name of the C destroy function

    def _own(self, context, handle):
        self._context = context
        try:
            context._adopt(self)
        except BaseException:
            getattr(_L, self._destroy)(handle)
            raise
        self.__dict__["_handle"] = handle

    @property
    def context(self):
        """The Context this object belongs to."""
        return self._context

    @property
    def closed(self):
        return self._handle is None

    def _h(self):
        h = self._handle
        if h is None:
            raise InvalidStateError(f"this {type(self).__name__} is closed")
        return h

    def close(self):
        """Frees the C object now (idempotent; the object is unusable afterwards)."""
        h = self.__dict__.pop("_handle", None)  # atomic: a second close finds nothing
        if h is not None:
            getattr(_L, self._destroy)(h)
            self._context._release(self)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:  # interpreter shutdown: modules may be gone
            pass


class Context:
    """A pdc context: options, error messages and the JIT state of the programs compiled in it.

    Context(threads=2, cache_dir="/tmp/pdc", log_level="error", ...) sets context options (docs/api.md).
    Objects made from a context keep it alive; closing the context closes them first. Calls on objects of one
    context are serialised by a lock (pdc's one-thread-at-a-time rule), except program runs, which may overlap.
    """

    def __init__(self, **options):
        h = _c_void_p()
        st = _L.pdc_context_create(_byref(h))
        if st:
            raise error(st, None)
        self._handle = h.value
        self._lock = threading.RLock()
        self._children = weakref.WeakSet()
        self._live = 0
        self._closing = False
        self._note_cb = self._progress_cb = None
        for k, v in options.items():
            self.set_option(k, v)

    # -- ownership
    def _adopt(self, obj):
        with self._lock:
            if self._closing:
                raise InvalidStateError("the context is closed")
            self._children.add(obj)
            self._live += 1

    def _release(self, obj):
        with self._lock:
            self._live -= 1
            if self._closing and self._live == 0:
                self._free()

    def _free(self):
        h, self._handle = self._handle, None
        if h is not None:
            _L.pdc_context_destroy(h)

    def _h(self):
        if self._handle is None or self._closing:
            raise InvalidStateError("the context is closed")
        return self._handle

    def close(self):
        """Closes every object made from this context, then the context (idempotent)."""
        with self._lock:
            if self._closing:
                return
            self._closing = True
            for obj in sorted(list(self._children), key=lambda o: isinstance(o, Model)):  # programs, trainers first
                obj.close()
            if self._live == 0:  # objects already unreachable close later and free the context then
                self._free()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    @property
    def closed(self):
        return self._closing

    # -- options, messages
    def set_option(self, name, value):
        """Sets a context option (docs/api.md, "Context options"); values are converted to text."""
        with self._lock:
            st = _L.pdc_context_set_option(self._h(), _b(name), _b(_text(value)))
            if st:
                raise error(st, self._handle)

    def get_option(self, name):
        """An option's current value, as text."""
        buf = ctypes.create_string_buffer(4096 + 16)
        with self._lock:
            st = _L.pdc_context_get_option(self._h(), _b(name), buf, len(buf))
            if st:
                raise error(st, self._handle)
        return buf.value.decode()

    @property
    def num_objects(self):
        """Handles made from this context and not yet destroyed, as the C library counts them
        (pdc_context_num_objects): models, attribute sets, programs, tensors and trainers."""
        n = ctypes.c_size_t()
        st = _L.pdc_context_num_objects(self._h(), _byref(n))
        if st:
            raise error(st, self._handle)
        return n.value

    @property
    def last_error(self):
        """The calling thread's most recent failure message on this context ("" if none)."""
        return (_L.pdc_context_last_error(self._handle) or b"").decode("utf-8", "replace")

    def set_note_handler(self, fn):
        """fn(kind, pass_name, layer, text) is told what the pruning passes did, layer by layer
        (kind: "pruned", "skipped_stem", "skipped_kernel", "skipped_block_conv"); None removes it."""
        kinds = {1: "pruned", 2: "skipped_stem", 3: "skipped_kernel", 4: "skipped_block_conv"}
        cb = None if fn is None else _lib.NOTE_HANDLER(
            lambda user, kind, p, layer, text: fn(kinds.get(kind, kind), p.decode(), layer.decode(), text.decode()))
        with self._lock:
            st = _L.pdc_context_set_note_handler(self._h(), cb or _lib.NOTE_HANDLER(), None)
            if st:
                raise error(st, self._handle)
            self._note_cb = cb  # kept alive while set

    def set_progress_handler(self, fn):
        """fn(stage, done, total) is called while compile and the passes work through the layers; None removes it."""
        cb = None if fn is None else _lib.PROGRESS_HANDLER(lambda user, s, d, t: fn(s.decode(), d, t))
        with self._lock:
            st = _L.pdc_context_set_progress_handler(self._h(), cb or _lib.PROGRESS_HANDLER(), None)
            if st:
                raise error(st, self._handle)
            self._progress_cb = cb

    # -- factories
    def load(self, source, input_shapes=None):
        """A Model from a file path (.pdc, .pdcir or .onnx, chosen by content) or from bytes in memory."""
        return load(source, context=self, input_shapes=input_shapes)


def _text(v):
    if isinstance(v, bool):
        return "1" if v else "0"
    if isinstance(v, (list, tuple)):
        return ",".join(_text(x) for x in v)
    if isinstance(v, dict):
        return ",".join(f"{k}={_text(x)}" if k else _text(x) for k, x in v.items())
    return str(v)


class _Attrs(_Owned):
    _destroy = "pdc_attrs_destroy"

    def __init__(self, context, values):
        h = _c_void_p()
        st = _L.pdc_attrs_create(context._h(), _byref(h))
        if st:
            raise error(st, context._handle)
        self._own(context, h.value)
        for k, v in values.items():
            self.set(k, v)

    def set(self, name, v):
        h, n = self._h(), _b(name)
        if isinstance(v, bool) or isinstance(v, (int, np.integer)):
            st = _L.pdc_attrs_set_int(h, n, int(v))
        elif isinstance(v, (float, np.floating)):
            st = _L.pdc_attrs_set_float(h, n, float(v))
        elif isinstance(v, (list, tuple)) and all(isinstance(x, (int, np.integer)) and not isinstance(x, bool)
                                                   for x in v):
            arr = (ctypes.c_int64 * max(len(v), 1))(*v)
            st = _L.pdc_attrs_set_ints(h, n, len(v), arr)
        else:  # strings; lists of names; {layer: rate} dicts ("" is the global rate)
            st = _L.pdc_attrs_set_string(h, n, _b(_text(v)))
        if st:
            raise error(st, self._context._handle)


def _with_attrs(context, options, fn):
    if not options:
        return fn(None)
    with _Attrs(context, options) as a:
        return fn(a._handle)


class Model(_Owned):
    """A model (pdc's IR): built layer by layer, or from pdc.load / pdc.parse. Inspect it (layers, inputs,
    outputs), transform it with pass pipelines, save it, compile it."""

    _destroy = "pdc_model_destroy"

    def __init__(self, name="model", context=None, _handle=None):
        context = context if context is not None else Context()
        if _handle is None:
            h = _c_void_p()
            with context._lock:
                st = _L.pdc_model_create(context._h(), _b(name), _byref(h))
            if st:
                raise error(st, context._handle)
            _handle = h.value
        self._own(context, _handle)

    def _call(self, fn, *args):
        with self._context._lock:
            st = fn(self._h(), *args)
            if st:
                raise error(st, self._context._handle)

    # -- building
    def add_input(self, name, shape):
        """Adds a float32 graph input; -1 marks a symbolic dim (fix it with set_input_shape)."""
        r, d = _dims(shape)
        self._call(_L.pdc_model_add_input, _b(name), r, d)
        return self

    def set_input_shape(self, name, shape):
        r, d = _dims(shape)
        self._call(_L.pdc_model_set_input_shape, _b(name), r, d)
        return self

    def add_constant(self, name, values):
        """Adds a constant (weights); values is copied."""
        a = np.ascontiguousarray(values, dtype=np.float32)
        r, d = _dims(a.shape)
        self._call(_L.pdc_model_add_constant, _b(name), r, d, a.ctypes.data)
        return self

    def add_layer(self, name, op, inputs, outputs, **attrs):
        """Adds a layer: op name (docs/ir.md), input tensor names, new output names, attributes as keywords."""
        if isinstance(inputs, str):
            inputs = [inputs]
        if isinstance(outputs, str):
            outputs = [outputs]
        ins = (ctypes.c_char_p * max(len(inputs), 1))(*[_b(s) for s in inputs])
        outs = (ctypes.c_char_p * max(len(outputs), 1))(*[_b(s) for s in outputs])
        _with_attrs(self._context, attrs, lambda a: self._call(_L.pdc_model_add_layer, _b(name), _b(op), len(inputs),
                                                               ins, len(outputs), outs, a))
        return self

    def mark_output(self, name):
        self._call(_L.pdc_model_mark_output, _b(name))
        return self

    # -- inspection
    def _count(self, fn):
        n = ctypes.c_size_t()
        self._call(fn, _byref(n))
        return n.value

    def _infos(self, count_fn, info_fn):
        out = []
        for i in range(self._count(count_fn)):
            name, rank, dims = ctypes.c_char_p(), ctypes.c_size_t(), (ctypes.c_int64 * _lib.MAX_RANK)()
            self._call(info_fn, i, _byref(name), _byref(rank), dims)
            out.append(TensorInfo(name.value.decode(), tuple(dims[:rank.value])))
        return out

    @property
    def inputs(self):
        """[TensorInfo(name, shape)] of the graph inputs."""
        return self._infos(_L.pdc_model_num_inputs, _L.pdc_model_input_info)

    @property
    def outputs(self):
        """[TensorInfo(name, shape)] of the graph outputs (shape () while it depends on a symbolic input)."""
        return self._infos(_L.pdc_model_num_outputs, _L.pdc_model_output_info)

    _FIELDS = (("name", 1), ("op", 2), ("input_shape", 3), ("output_shape", 4), ("sparsity", 5), ("patterns", 6))
    _STATS = (("weights", 1), ("kept_weights", 2), ("dense_flops", 3), ("effective_flops", 4), ("bytes", 5))

    @property
    def layers(self):
        """One dict per layer: name, op, input_shape, output_shape, sparsity, patterns (text, as `pdc inspect`),
        weights, kept_weights, dense_flops, effective_flops, bytes (ints; FLOPs None while symbolic)."""
        out = []
        with self._context._lock:
            h = self._h()
            n = ctypes.c_size_t()
            st = _L.pdc_model_num_layers(h, _byref(n))
            if st:
                raise error(st, self._context._handle)
            s, v = ctypes.c_char_p(), ctypes.c_int64()
            for i in range(n.value):
                d = {}
                for key, f in self._FIELDS:
                    st = _L.pdc_model_layer_string(h, i, f, _byref(s))
                    if st:
                        raise error(st, self._context._handle)
                    d[key] = s.value.decode()
                for key, f in self._STATS:
                    st = _L.pdc_model_layer_stat(h, i, f, _byref(v))
                    d[key] = None if st else v.value
                out.append(d)
        return out

    def sparsity(self):
        """{layer name: sparsity text} for the layers with pruned weights."""
        return {d["name"]: d["sparsity"] for d in self.layers if d["sparsity"] not in ("", "dense")}

    def to_text(self, elide_weights=False):
        """The IR text form (.pdcir)."""
        p = _c_void_p()
        self._call(_L.pdc_model_print, 1 if elide_weights else 0, _byref(p))
        try:
            return ctypes.string_at(p.value).decode()
        finally:
            _L.pdc_string_free(p.value)

    def verify(self):
        self._call(_L.pdc_model_verify)
        return self

    # -- changing, saving, compiling
    def transform(self, pipeline, **options):
        """Runs a pass pipeline in place, e.g. transform("prune-pattern,prune-connectivity", connectivity=0.6)
        (docs/passes.md). Lists become comma-separated strings, {"": 0.5, "conv2": 0.7} becomes "0.5,conv2=0.7".
        Returns the model. On failure the model is unchanged."""
        if isinstance(pipeline, (list, tuple)):
            pipeline = ",".join(pipeline)
        _with_attrs(self._context, options, lambda a: self._call(_L.pdc_model_transform, _b(pipeline), a))
        return self

    def save(self, path, format=None, elide_weights=False):
        """Saves the model: format "pdc", "text" (.pdcir) or "onnx", by default from the file extension."""
        path = os.fspath(path)
        fmt = format or {".onnx": "onnx", ".pdcir": "text"}.get(os.path.splitext(path)[1], "pdc")
        if fmt == "onnx":
            self._call(_L.pdc_model_save_onnx, _b(path))
        elif fmt == "text":
            self._call(_L.pdc_model_save_text, _b(path), 1 if elide_weights else 0)
        elif fmt == "pdc":
            self._call(_L.pdc_model_save, _b(path))
        else:
            raise ValueError(f"pdc: unknown format {format!r} (pdc, text or onnx)")
        return self

    def compile(self, target="cpu", threads=None):
        """Compiles for "cpu", "ref" or "gpu" and returns a Program. threads sets the context option "threads"
        first (worker threads of each run, fixed at compile; 0 = all cores)."""
        ctx = self._context
        with ctx._lock:
            if threads is not None and ctx.get_option("threads") != str(int(threads)):
                ctx.set_option("threads", int(threads))
            h = _c_void_p()
            st = _L.pdc_compile(ctx._h(), self._h(), _b(target), _byref(h))
            if st:
                raise error(st, ctx._handle)
            return Program(ctx, h.value)

    def trainer(self, **options):
        """A Trainer for a copy of this model."""
        return Trainer(self, **options)


def load(source, context=None, input_shapes=None):
    """A Model from a path (.pdc, .pdcir or .onnx; the format is chosen by content) or from bytes.
    Without a context the model gets a context of its own. input_shapes={"x": (1, 3, 224, 224)} fixes
    symbolic input dims."""
    context = context if context is not None else Context()
    h = _c_void_p()
    with context._lock:
        if isinstance(source, (bytes, bytearray, memoryview)):
            data = bytes(source)
            st = _L.pdc_model_load_memory(context._h(), data, len(data), _byref(h))
        else:
            st = _L.pdc_model_load(context._h(), _b(os.fspath(source)), _byref(h))
        if st:
            raise error(st, context._handle)
    m = Model(context=context, _handle=h.value)
    for name, shape in (input_shapes or {}).items():
        m.set_input_shape(name, shape)
    return m


def parse(text, context=None):
    """A Model from the IR text form."""
    context = context if context is not None else Context()
    data = _b(text)
    h = _c_void_p()
    with context._lock:
        st = _L.pdc_model_parse(context._h(), data, len(data), _byref(h))
        if st:
            raise error(st, context._handle)
    return Model(context=context, _handle=h.value)


class Program(_Owned):
    """A compiled model. program(x, ...) runs it on NumPy arrays (inputs in order) and returns the output
    array, or a list for several outputs; program.run({"x": x}) returns {name: array}. Inputs and outputs are
    wrapped, never copied, when they are C-contiguous float32 arrays; out= gives arrays to write into.
    Runs release the GIL and may come from several threads at once."""

    _destroy = "pdc_program_destroy"

    def __init__(self, context, handle):
        self._own(context, handle)
        self.inputs = self._infos(_L.pdc_program_num_inputs, _L.pdc_program_input_info)
        self.outputs = self._infos(_L.pdc_program_num_outputs, _L.pdc_program_output_info)
        self._in_names = [t.name for t in self.inputs]
        self._out_shapes = [t.shape for t in self.outputs]
        self._out_dims = [_dims(s) for s in self._out_shapes]
        self._dims_cache = {}

    def _infos(self, count_fn, info_fn):
        n = ctypes.c_size_t()
        h = self._h()
        st = count_fn(h, _byref(n))
        if st:
            raise error(st, self._context._handle)
        out = []
        for i in range(n.value):
            name, rank, dims = ctypes.c_char_p(), ctypes.c_size_t(), (ctypes.c_int64 * _lib.MAX_RANK)()
            st = info_fn(h, i, _byref(name), _byref(rank), dims)
            if st:
                raise error(st, self._context._handle)
            out.append(TensorInfo(name.value.decode(), tuple(dims[:rank.value])))
        return out

    @property
    def target(self):
        return _L.pdc_program_target(self._h()).decode()

    @property
    def num_threads(self):
        n = ctypes.c_size_t()
        st = _L.pdc_program_num_threads(self._h(), _byref(n))
        if st:
            raise error(st, self._context._handle)
        return n.value

    def layer_kernels(self):
        """{layer name: the kernel the target chose for it, and why}."""
        h = self._h()
        n = ctypes.c_size_t()
        st = _L.pdc_program_num_layers(h, _byref(n))
        if st:
            raise error(st, self._context._handle)
        out = {}
        name, kern = ctypes.c_char_p(), ctypes.c_char_p()
        for i in range(n.value):
            st = _L.pdc_program_layer_kernel(h, i, _byref(name), _byref(kern))
            if st:
                raise error(st, self._context._handle)
            out[name.value.decode()] = kern.value.decode()
        return out

    def _check_out(self, out):
        if isinstance(out, np.ndarray):
            out = [out]
        out = list(out)
        if len(out) != len(self._out_shapes):
            raise ValueError(f"pdc: out: {len(out)} arrays for {len(self._out_shapes)} outputs")
        for i, o in enumerate(out):
            if not (isinstance(o, np.ndarray) and o.dtype == np.float32 and o.flags.c_contiguous
                    and o.flags.writeable):
                raise ValueError(f"pdc: out[{i}] (output '{self.outputs[i].name}') must be a writeable "
                                 f"C-contiguous float32 NumPy array")
        return out

    def _run(self, arrays, out):
        # The per-call path: kept lean (make bench-python measures it). Each array is wrapped, never copied.
        h = self._handle
        if h is None:
            self._h()
        ctxh = self._context._handle
        out = [np.empty(s, _F32) for s in self._out_shapes] if out is None else self._check_out(out)
        n_in, n_out = len(arrays), len(out)
        handles = []
        t = _c_void_p()
        bt = _byref(t)
        cache = self._dims_cache
        try:
            for i in range(n_in):
                a = arrays[i]
                if not (type(a) is np.ndarray and a.dtype == _F32 and a.flags.c_contiguous):
                    a = arrays[i] = as_f32(a, f"input '{self._in_names[i] if i < len(self._in_names) else i}'")
                d = cache.get(a.shape)
                if d is None:
                    d = cache[a.shape] = _dims(a.shape)
                st = _wrap(ctxh, d[0], d[1], a.ctypes.data, bt)
                if st:
                    raise error(st, ctxh)
                handles.append(t.value)
            for o in out:
                d = cache.get(o.shape)
                if d is None:
                    d = cache[o.shape] = _dims(o.shape)
                st = _wrap(ctxh, d[0], d[1], o.ctypes.data, bt)
                if st:
                    raise error(st, ctxh)
                handles.append(t.value)
            tens = (_c_void_p * max(n_in + n_out, 1))(*handles)  # inputs, then outputs
            base = _addressof(tens)
            st = _run_c(h, n_in, base, n_out, base + n_in * _PTR)
            if st:
                raise error(st, ctxh)
        finally:
            for th in handles:
                _destroy_t(th)
        return out

    def __call__(self, *inputs, out=None):
        outs = self._run(list(inputs), out)
        return outs[0] if len(outs) == 1 else outs

    def run(self, feeds, out=None):
        """feeds: {input name: array} (or a list in input order); returns {output name: array}. out: a dict or
        list of arrays to write the outputs into."""
        if isinstance(feeds, dict):
            unknown = set(feeds) - set(self._in_names)
            if unknown:
                raise KeyError(f"pdc: no input named {sorted(unknown)[0]!r} (inputs: {', '.join(self._in_names)})")
            missing = [n for n in self._in_names if n not in feeds]
            if missing:
                raise KeyError(f"pdc: input {missing[0]!r} is missing")
            arrays = [feeds[n] for n in self._in_names]
        else:
            arrays = list(feeds)
        if isinstance(out, dict):
            out = [out[t.name] for t in self.outputs]
        outs = self._run(arrays, out)
        return {t.name: o for t, o in zip(self.outputs, outs)}


class _Tensors:
    """C tensors wrapping arrays for the duration of one call."""

    def __init__(self, context, arrays):
        self.handles = []
        self.arrays = arrays
        ctxh = context._handle
        try:
            for a in arrays:
                r, d = _dims(a.shape)
                t = _c_void_p()
                st = _L.pdc_tensor_wrap(ctxh, r, d, a.ctypes.data, _byref(t))
                if st:
                    raise error(st, ctxh)
                self.handles.append(t.value)
        except BaseException:
            self.close()
            raise

    def close(self):
        while self.handles:
            _L.pdc_tensor_destroy(self.handles.pop())

    def __enter__(self):
        return self.handles

    def __exit__(self, *exc):
        self.close()


class Trainer(_Owned):
    """Trains a copy of a model from NumPy batches, as the C trainer (docs/training.md): step, evaluate,
    prune, ADMM, checkpoints; export() gives the trained model. Options as keywords (lr=1e-3, batch=32, ...)."""

    _destroy = "pdc_trainer_destroy"

    def __init__(self, model, **options):
        ctx = model._context
        h = _c_void_p()
        with ctx._lock:
            st = _L.pdc_trainer_create(ctx._h(), model._h(), _byref(h))
            if st:
                raise error(st, ctx._handle)
        self._own(ctx, h.value)
        for k, v in options.items():
            self.set_option(k, v)

    def _call(self, fn, *args):
        with self._context._lock:
            st = fn(self._h(), *args)
            if st:
                raise error(st, self._context._handle)

    def set_option(self, name, value):
        self._call(_L.pdc_trainer_set_option, _b(name), _b(_text(value)))

    def get_option(self, name):
        buf = ctypes.create_string_buffer(256)
        self._call(_L.pdc_trainer_get_option, _b(name), buf, len(buf))
        return buf.value.decode()

    @property
    def steps(self):
        return int(self.get_option("step"))

    def init_weights(self):
        self._call(_L.pdc_trainer_init_weights)
        return self

    def shuffle(self, n):
        """A random permutation of range(n) from the trainer's random numbers (saved in checkpoints)."""
        perm = np.empty(n, dtype=np.uintp)
        self._call(_L.pdc_trainer_shuffle, n, perm.ctypes.data_as(_lib.c_size_p))
        return perm.astype(np.int64)

    def step(self, inputs, labels):
        """One training step on a batch; returns the mean loss before the update."""
        x, y = as_f32(inputs, "inputs"), as_f32(labels, "labels")
        loss = ctypes.c_float()
        with _Tensors(self._context, [x, y]) as t:
            self._call(_L.pdc_trainer_step, t[0], t[1], _byref(loss))
        return loss.value

    def evaluate(self, inputs, labels):
        """(loss, accuracy) over a dataset of any size, in inference mode."""
        x, y = as_f32(inputs, "inputs"), as_f32(labels, "labels")
        loss, acc = ctypes.c_float(), ctypes.c_float()
        with _Tensors(self._context, [x, y]) as t:
            self._call(_L.pdc_trainer_evaluate, t[0], t[1], _byref(loss), _byref(acc))
        return loss.value, acc.value

    @property
    def weights(self):
        """One dict per constant: name, shape, kept (elements its sparsity keeps), trainable."""
        n = ctypes.c_size_t()
        self._call(_L.pdc_trainer_num_weights, _byref(n))
        out = []
        for i in range(n.value):
            name, rank, dims = ctypes.c_char_p(), ctypes.c_size_t(), (ctypes.c_int64 * _lib.MAX_RANK)()
            kept, tr = ctypes.c_size_t(), ctypes.c_int()
            self._call(_L.pdc_trainer_weight_info, i, _byref(name), _byref(rank), dims, _byref(kept), _byref(tr))
            out.append({"name": name.value.decode(), "shape": tuple(dims[:rank.value]), "kept": kept.value,
                        "trainable": bool(tr.value)})
        return out

    def get_weights(self, name):
        """A copy of a constant's values, by constant name (Trainer.weights lists them)."""
        shape = {w["name"]: w["shape"] for w in self.weights}.get(name)
        out = np.empty(shape if shape is not None else (0,), np.float32)
        self._call(_L.pdc_trainer_get_weights, _b(name), out.ctypes.data, out.size)  # unknown: pdc says why
        return out

    def set_weights(self, name, values):
        a = as_f32(values, f"weights '{name}'")
        self._call(_L.pdc_trainer_set_weights, _b(name), a.ctypes.data, a.size)

    def prune(self, pipeline, **options):
        """Prunes with pruning passes and switches to masked retraining (options as Model.transform)."""
        _with_attrs(self._context, options, lambda a: self._call(_L.pdc_trainer_prune, _b(pipeline), a))

    def admm_begin(self, pipeline, rho, **options):
        _with_attrs(self._context, options,
                    lambda a: self._call(_L.pdc_trainer_admm_begin, _b(pipeline), a, float(rho)))

    def admm_update(self):
        """The ADMM Z- and U-steps; returns the primal residual."""
        r = ctypes.c_double()
        self._call(_L.pdc_trainer_admm_update, _byref(r))
        return r.value

    def admm_end(self):
        self._call(_L.pdc_trainer_admm_end)

    def save(self, path):
        self._call(_L.pdc_trainer_save, _b(os.fspath(path)))

    def load(self, path):
        self._call(_L.pdc_trainer_load, _b(os.fspath(path)))

    def export(self):
        """A new Model with the trained weights and their sparsity."""
        h = _c_void_p()
        self._call(_L.pdc_trainer_export, _byref(h))
        return Model(context=self._context, _handle=h.value)


def project(kind, weights, context=None, **kw):
    """pdc's pruning projections (pdc_prune_project_*) on a NumPy array, in place when it is a C-contiguous
    float32 array (else on a converted copy, which is returned). kind and keywords:
      "pattern":       weights [O, C, kh, kw]; patterns=8, pattern_size=4, given=None (a list of bitmasks to
                       use instead of choosing), kernel_pattern=None (int32 [O*C]; -1 stay removed)
      "connectivity":  weights [O, C, kh, kw]; rate
      "block":         weights [rows, cols] (or [O, C, 1, 1]); block=(1, 4), rate
      "unstructured":  any shape; rate
    Returns (weights, info): info is {"patterns", "kernel_pattern"} for pattern, else the keep mask (uint8:
    kernels, blocks or elements)."""
    ctx = context if context is not None else _default_context()
    w = as_f32(weights, "weights")
    fp = w.ctypes.data_as(_lib.c_float_p)
    with ctx._lock:
        ch = ctx._h()
        if kind == "pattern":
            o, c, kh, kw_ = w.shape
            given = kw.get("given")
            n = len(given) if given is not None else int(kw.get("patterns", 8))
            pats = (ctypes.c_uint64 * n)(*(given or []))
            kp = kw.get("kernel_pattern")
            flags = 1 if given is not None else 0
            if kp is None:
                kp = np.zeros(o * c, np.int32)
            else:
                kp = np.ascontiguousarray(kp, np.int32).copy()
                flags |= 2
            st = _L.pdc_prune_project_pattern(ch, fp, o, c, kh, kw_, n, int(kw.get("pattern_size", 4)), flags, pats,
                                              kp.ctypes.data_as(_lib.c_int32_p))
            info = {"patterns": list(pats), "kernel_pattern": kp.reshape(o, c)}
        elif kind == "connectivity":
            o, c = w.shape[0], w.shape[1]
            keep = np.zeros(o * c, np.uint8)
            st = _L.pdc_prune_project_connectivity(ch, fp, o, c, int(np.prod(w.shape[2:], dtype=np.int64)),
                                                   float(kw["rate"]), keep.ctypes.data_as(_lib.c_uint8_p))
            info = keep.reshape(o, c)
        elif kind == "block":
            rows = w.shape[0]
            cols = w.size // rows
            bh, bw = kw.get("block", (1, 4))
            keep = np.zeros(((rows + bh - 1) // bh) * ((cols + bw - 1) // bw), np.uint8)
            st = _L.pdc_prune_project_block(ch, fp, rows, cols, bh, bw, float(kw["rate"]),
                                            keep.ctypes.data_as(_lib.c_uint8_p))
            info = keep.reshape((rows + bh - 1) // bh, (cols + bw - 1) // bw)
        elif kind == "unstructured":
            keep = np.zeros(w.size, np.uint8)
            st = _L.pdc_prune_project_unstructured(ch, fp, w.size, float(kw["rate"]),
                                                   keep.ctypes.data_as(_lib.c_uint8_p))
            info = keep.reshape(w.shape)
        else:
            raise ValueError(f"pdc: unknown projection {kind!r} (pattern, connectivity, block, unstructured)")
        if st:
            raise error(st, ch)
    return w, info


_default = None
_default_lock = threading.Lock()


def _default_context():
    global _default
    with _default_lock:
        if _default is None:
            _default = Context()
        return _default
