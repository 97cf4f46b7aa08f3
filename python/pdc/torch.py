"""pdc for PyTorch modules: prune with pdc's own projections, ADMM, and compile through ONNX in memory.

    import pdc.torch
    masks = pdc.torch.prune(model, example_input=x)             # pdc's masks, attached with
                                                               # torch.nn.utils.prune.custom_from_mask
    ... fine-tune as usual: the pruned weights stay zero ...
    program = pdc.torch.compile(model, x, target="cpu")       # a Program taking and returning tensors
    y = program(x)

Which weights a pipeline prunes, and how, is pdc's decision: the module is exported to ONNX in memory and the
pipeline runs on it (its stem, kernel-size and layer rules, docs/passes.md); the masks are then computed on the
module's own weights with pdc's projection functions (pdc_prune_project_*), pass by pass, exactly as the passes
compute them - so they are the masks `pdc prune` gives for the same weights.

Needs PyTorch (Debian: python3-torch); importing this module without it raises ImportError.
"""
import copy
import io
import re
import warnings

try:
    import torch
    import torch.nn.utils.prune as _tprune
except ImportError as e:  # pragma: no cover - depends on the machine
    raise ImportError("pdc.torch needs PyTorch (Debian: apt-get install python3-torch): " + str(e)) from e

import numpy as np

from . import _core
from ._core import Context, load

__all__ = ["export_onnx", "prune", "plan", "ADMM", "admm", "compile", "TorchProgram", "to_numpy", "from_numpy"]

DEFAULT_PIPELINE = "prune-pattern,prune-connectivity"


# ------------------------------------------------------------------ data in and out

def to_numpy(t, writeable=False):
    """A CPU tensor as a NumPy array sharing its memory: through DLPack where NumPy supports it (NumPy marks such
    arrays read-only, so arrays to write into come from .numpy()), else .numpy()."""
    t = t.detach()
    if t.device.type != "cpu":
        raise ValueError(f"pdc.torch: tensor on {t.device}: move it to the CPU first")
    if not writeable and hasattr(np, "from_dlpack"):
        try:
            return np.from_dlpack(t)
        except (TypeError, RuntimeError, BufferError, AttributeError):
            pass
    return t.numpy()


def from_numpy(a):
    """A NumPy array as a tensor sharing its memory: through DLPack where torch supports it, else from_numpy."""
    if hasattr(torch, "from_dlpack") and hasattr(a, "__dlpack__"):
        try:
            return torch.from_dlpack(a)
        except (TypeError, RuntimeError, BufferError, AttributeError):
            pass
    return torch.from_numpy(a)


# ------------------------------------------------------------------ export

def _plain_copy(module):
    """A deep copy in eval mode with torch's pruning re-parametrisations made permanent (weights hold zeros)."""
    with torch.no_grad():  # pruned weights are recomputed by a forward pre-hook; the last one may hold a graph
        for sub in module.modules():
            for hook in list(sub._forward_pre_hooks.values()):
                if isinstance(hook, _tprune.BasePruningMethod):
                    setattr(sub, hook._tensor_name, hook.apply_mask(sub))
    m = copy.deepcopy(module)
    for sub in m.modules():
        for hook in list(sub._forward_pre_hooks.values()):
            if isinstance(hook, _tprune.BasePruningMethod):
                _tprune.remove(sub, hook._tensor_name)
    return m.eval()


def export_onnx(module, example_input, opset=13):
    """The module as ONNX bytes, exported in memory as pdc's tests export (eval mode, batchnorm kept as its own
    node so that initializers keep the parameters' names; pruning masks applied)."""
    m = _plain_copy(module)
    args = example_input if isinstance(example_input, tuple) else (example_input,)
    n_in = len(args)
    buf = io.BytesIO()
    with torch.no_grad(), warnings.catch_warnings():
        # PRESERVE keeps batchnorm as a node (EVAL would fold it into the conv weights, renaming them); the module
        # is in eval mode, so torch's advice against constant folding in training mode does not apply
        warnings.filterwarnings("ignore", message="It is recommended that constant folding be turned off")
        torch.onnx.export(m, args, buf, opset_version=opset, training=torch.onnx.TrainingMode.PRESERVE,
                          input_names=["input"] if n_in == 1 else [f"input{i}" for i in range(n_in)],
                          output_names=["output"],
                          do_constant_folding=True)
    return buf.getvalue()


# ------------------------------------------------------------------ the pruning plan

_LAYER = re.compile(r"^layer (\S+) = (\w+)\((.*?)\) -> \(.*?\)(?: \{(.*)\})?$")


def _rate_for(value, layer, default):
    """pdc's per-layer rate option: a number, or "RATE,LAYER=RATE,..." (docs/passes.md)."""
    if value is None:
        return default
    if isinstance(value, dict):
        value = ",".join(f"{k}={v}" if k else str(v) for k, v in value.items())
    if isinstance(value, (int, float)):
        return float(value)
    glob = default
    for item in str(value).split(","):
        item = item.strip()
        if "=" in item:
            name, r = item.rsplit("=", 1)
            if name.strip() == layer:
                return float(r)
        elif item:
            glob = float(item)
    return glob


class _Step:
    """One pass's projection of one weight (what pdc's note said it did)."""

    def __init__(self, pass_name, layer, op, transposed, options):
        self.pass_name, self.layer, self.op, self.transposed = pass_name, layer, op, transposed
        o = options
        if pass_name == "prune-pattern":
            self.patterns, self.pattern_size = int(o.get("patterns", 8)), int(o.get("pattern_size", 4))
        elif pass_name == "prune-connectivity":
            self.rate = _rate_for(o.get("connectivity"), layer, 0.5)
        elif pass_name == "prune-block":
            block = str(o.get("block", "1x4"))
            rate = o.get("block_rate")
            if ":" in block:
                block, r = block.split(":", 1)
                rate = rate if rate is not None else float(r)
            self.block = tuple(int(v) for v in block.lower().split("x"))
            self.rate = _rate_for(rate, layer, 0.5)
        elif pass_name == "prune-unstructured":
            self.rate = _rate_for(o.get("unstructured_rate"), layer, 0.5)
        else:
            raise ValueError(f"pdc.torch: {pass_name} is not a pruning pass")


class Plan:
    """What a pipeline prunes in a module: for each parameter name, its pdc layer and the projections in pass
    order. Made by plan(); applied to weights by project()."""

    def __init__(self, steps, layers):
        self.steps = steps      # {param name: [_Step]}
        self.layers = layers    # {param name: pdc layer name}

    def project(self, name, w, context=None):
        """The projections of parameter `name` applied to array w (float32 [O, C, ...] as the parameter; a copy is
        projected): returns (projected array, keep mask of w's shape, bool)."""
        ctx = context or _core._default_context()
        w = np.array(w, dtype=np.float32, order="C", copy=True)
        kp, patterns, mask = None, None, np.ones(w.shape, bool)
        for s in self.steps[name]:
            if s.pass_name == "prune-pattern":
                _, info = _core.project("pattern", w, context=ctx, patterns=s.patterns, pattern_size=s.pattern_size,
                                        kernel_pattern=None if kp is None else kp.reshape(-1))
                kp, patterns = info["kernel_pattern"], info["patterns"]
                mask = _pattern_mask(w.shape, patterns, kp)
            elif s.pass_name == "prune-connectivity":
                _, keep = _core.project("connectivity", w, context=ctx, rate=s.rate)
                if kp is not None:
                    kp = np.where(keep != 0, kp, -1)
                    mask = _pattern_mask(w.shape, patterns, kp)
                elif (keep == 0).any():
                    kp, patterns = np.where(keep != 0, 0, -1).astype(np.int32), [(1 << int(np.prod(w.shape[2:]))) - 1]
                    mask = _pattern_mask(w.shape, patterns, kp)
            elif s.pass_name == "prune-block":
                mat = w.reshape(w.shape[0], -1)
                if s.transposed:
                    mat = np.ascontiguousarray(mat.T)
                _, keep = _core.project("block", mat, context=ctx, block=s.block, rate=s.rate)
                bh, bw = s.block
                m = np.repeat(np.repeat(keep != 0, bh, 0), bw, 1)[:mat.shape[0], :mat.shape[1]]
                if s.transposed:
                    mat, m = mat.T, m.T
                w = np.ascontiguousarray(mat).reshape(w.shape)
                mask = m.reshape(w.shape)
            else:
                _, keep = _core.project("unstructured", w, context=ctx, rate=s.rate)
                mask = keep.reshape(w.shape) != 0
        return w, mask


def _pattern_mask(shape, patterns, kp):
    win = int(np.prod(shape[2:]))
    bits = np.array([[(int(p) >> i) & 1 for i in range(win)] for p in patterns], bool)
    kp = np.asarray(kp).reshape(-1)
    m = np.where((kp >= 0)[:, None], bits[np.maximum(kp, 0)], False)
    return m.reshape(shape)


def plan(module, example_input, pipeline=DEFAULT_PIPELINE, **options):
    """Which parameters of module the pipeline prunes, and how (a Plan): the pipeline runs on the module exported
    to ONNX, and pdc's notes say what each pass pruned."""
    ctx = Context()
    try:
        model = load(export_onnx(module, example_input), context=ctx)
        layer_inputs = {}
        for line in model.to_text(elide_weights=True).splitlines():
            m = _LAYER.match(line)
            if m:
                attrs = m.group(4) or ""
                layer_inputs[m.group(1)] = (m.group(2), [s.strip() for s in m.group(3).split(",")],
                                            "transB=1" in attrs)
        notes = []
        ctx.set_note_handler(lambda kind, p, layer, text: notes.append((p, layer)) if kind == "pruned" else None)
        model.transform(pipeline, **options)
        model.close()
    finally:
        ctx.close()
    params = dict(module.named_parameters())
    for sub_name, sub in module.named_modules():  # already pruned by torch: the parameter is NAME_orig
        for pname, _ in sub.named_parameters(recurse=False):
            if pname.endswith("_orig"):
                params[(sub_name + "." if sub_name else "") + pname[:-5]] = None
    steps, layers = {}, {}
    for p, layer in notes:
        op, inputs, trans_b = layer_inputs[layer]
        if op not in ("conv", "fc", "gemm", "matmul"):
            raise NotImplementedError(f"pdc.torch: {p} pruned layer '{layer}' ({op}): only conv, fc, gemm and matmul "
                                      f"weights map to module parameters")
        wname = inputs[1]
        if wname not in params:
            raise LookupError(f"pdc.torch: layer '{layer}' reads weight '{wname}', which is not a parameter of the "
                              f"module (the exporter renamed or folded it)")
        transposed = op == "matmul" or (op == "gemm" and not trans_b)
        steps.setdefault(wname, []).append(_Step(p, layer, op, transposed, options))
        layers[wname] = layer
    return Plan(steps, layers)


def _param(module, name):
    path, _, attr = name.rpartition(".")
    sub = module.get_submodule(path) if path else module
    return sub, attr


def prune(module, pipeline=DEFAULT_PIPELINE, example_input=None, **options):
    """Prunes module in place with pdc's masks: plan() says which weights and how, pdc's projection functions
    compute each mask from the weight, and torch.nn.utils.prune.custom_from_mask attaches it, so a normal
    fine-tuning loop keeps exactly pdc's structure. Options are pdc_model_transform's (patterns=8,
    pattern_size=4, connectivity=0.5, block="1x4", block_rate, unstructured_rate, layers=[...], skip=[...],
    include_stem=1, ...; layer names are pdc's, as pdc inspect shows them).
    Returns {parameter name: mask (torch.bool tensor)}."""
    if example_input is None:
        raise TypeError("pdc.torch.prune: example_input is needed: pdc decides what to prune on the exported graph "
                        "(which conv is the stem, kernel sizes, ...)")
    p = plan(module, example_input, pipeline, **options)
    out = {}
    for name in p.steps:
        sub, attr = _param(module, name)
        w = getattr(sub, attr)
        _, mask = p.project(name, to_numpy(w))
        t = torch.from_numpy(mask)
        _tprune.custom_from_mask(sub, attr, t.to(w.dtype))
        out[name] = t
    return out


class ADMM:
    """ADMM pruning (Zhang et al. 2018) of a module towards the sparsity a pdc pipeline gives, with pdc's
    projections for the Z-step:

        admm = pdc.torch.admm(model, x, "prune-pattern,prune-connectivity", rho=1e-3)
        for epoch ...:
            for batch ...:
                loss = criterion(model(inp), target) + admm.penalty()     # the W-step's proximal term
                ...
            admm.update()                                                 # Z = proj(W + U); U += W - Z
        masks = admm.prune()                                              # hard-prune with pdc's masks
    """

    def __init__(self, module, example_input, pipeline=DEFAULT_PIPELINE, rho=1e-3, **options):
        if rho <= 0:
            raise ValueError("pdc.torch.admm: rho must be > 0")
        self.module, self.rho = module, float(rho)
        self.plan = plan(module, example_input, pipeline, **options)
        self.Z, self.U = {}, {}
        for name in self.plan.steps:
            w = self._weight(name)
            z, _ = self.plan.project(name, to_numpy(w))
            self.Z[name] = torch.from_numpy(z).to(w.dtype)
            self.U[name] = torch.zeros_like(w.detach())

    def _weight(self, name):
        sub, attr = _param(self.module, name)
        return getattr(sub, attr)

    def penalty(self):
        """rho/2 * sum ||W - Z + U||^2 over the ADMM weights (differentiable in W)."""
        total = 0.0
        for name in self.Z:
            total = total + (self._weight(name) - self.Z[name] + self.U[name]).pow(2).sum()
        return 0.5 * self.rho * total

    def update(self):
        """The Z- and U-steps; returns the primal residual ||W - Z|| / ||W|| over all ADMM weights."""
        num = den = 0.0
        with torch.no_grad():
            for name in self.Z:
                w = self._weight(name).detach()
                z, _ = self.plan.project(name, to_numpy(w + self.U[name]))
                z = torch.from_numpy(z).to(w.dtype)
                self.U[name] += w - z
                self.Z[name] = z
                num += float((w - z).pow(2).sum())
                den += float(w.pow(2).sum())
        return (num ** 0.5) / max(den ** 0.5, 1e-12)

    def prune(self):
        """Ends ADMM: attaches the masks of the projection of W (custom_from_mask); returns them."""
        out = {}
        for name in self.plan.steps:
            sub, attr = _param(self.module, name)
            w = getattr(sub, attr)
            _, mask = self.plan.project(name, to_numpy(w))
            t = torch.from_numpy(mask)
            _tprune.custom_from_mask(sub, attr, t.to(w.dtype))
            out[name] = t
        return out


def admm(module, example_input, pipeline=DEFAULT_PIPELINE, rho=1e-3, **options):
    """An ADMM helper for module (see ADMM)."""
    return ADMM(module, example_input, pipeline, rho, **options)


# ------------------------------------------------------------------ compile

class TorchProgram:
    """A pdc Program taking and returning torch tensors (CPU, float32), without copies where DLPack or the
    NumPy buffer allow. .program is the underlying pdc.Program."""

    def __init__(self, program):
        self.program = program

    def __call__(self, *inputs, out=None):
        arrays = [to_numpy(t) if isinstance(t, torch.Tensor) else t for t in inputs]
        if out is not None:
            out = [to_numpy(t, writeable=True) for t in (out if isinstance(out, (list, tuple)) else [out])]
        res = self.program._run(arrays, out)
        res = [from_numpy(a) for a in res]
        return res[0] if len(res) == 1 else res

    def close(self):
        self.program.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def compile(module, example_input, target="cpu", threads=None, context=None, transform=None, **options):
    """Exports module to ONNX in memory (pruning masks applied: the zeros become pdc's sparsity), loads it into
    pdc, optionally runs a pass pipeline (transform="canonicalize", options as Model.transform) and compiles it.
    The input shape is example_input's. Returns a TorchProgram."""
    ctx = context if context is not None else Context()
    with load(export_onnx(module, example_input), context=ctx) as model:
        if transform:
            model.transform(transform, **options)
        return TorchProgram(model.compile(target=target, threads=threads))
