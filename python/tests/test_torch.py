"""pdc.torch: pdc's masks on PyTorch modules, ADMM, and compiling a module through ONNX in memory.
Skipped with a message where PyTorch (python3-torch) or torchvision (python3-torchvision) is missing."""
import os
import subprocess

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="python3-torch is not installed: the pdc.torch tests are skipped")
torchvision = pytest.importorskip("torchvision",
                                  reason="python3-torchvision is not installed: the pdc.torch tests are skipped")

import pdc  # noqa: E402
import pdc.torch  # noqa: E402
from onnx_reader import initializers  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
PDC_TOOL = os.environ.get("PDC_TOOL", os.path.join(os.path.dirname(os.environ.get("PDC_LIBRARY", "build/x")), "pdc"))


def resnet18(seed=0):
    torch.manual_seed(seed)
    m = torchvision.models.resnet18(num_classes=10)
    with torch.no_grad():  # batchnorm statistics that are not the identity
        for mod in m.modules():
            if isinstance(mod, torch.nn.BatchNorm2d):
                mod.running_mean.uniform_(-0.1, 0.1)
                mod.running_var.uniform_(0.8, 1.2)
    return m.eval()


@pytest.mark.parametrize("args, options", [
    ([], {}),
    (["--patterns", "4", "--connectivity", "0.7", "--block", "1x4:0.6"],
     {"pipeline": "prune-pattern,prune-connectivity,prune-block", "patterns": 4, "connectivity": 0.7,
      "block": "1x4:0.6"}),
])
def test_masks_are_pdc_prunes_on_resnet18(tmp_path, args, options):
    if not os.access(PDC_TOOL, os.X_OK):
        pytest.skip(f"the pdc tool ({PDC_TOOL}) is not built")
    m = resnet18()
    x = torch.randn(1, 3, 64, 64)
    path = tmp_path / "r18.onnx"
    path.write_bytes(pdc.torch.export_onnx(m, x))
    out = tmp_path / "r18-pruned.onnx"
    subprocess.run([PDC_TOOL, "prune", str(path), "-o", str(out)] + args, check=True, capture_output=True)
    want = initializers(out.read_bytes())
    before = {k: v.detach().numpy().copy() for k, v in m.named_parameters()}
    pipeline = options.pop("pipeline", pdc.torch.DEFAULT_PIPELINE)
    masks = pdc.torch.prune(m, pipeline, example_input=x, **options)
    n_conv = sum(1 for k in masks if m.get_submodule(k.rsplit(".", 1)[0]).__class__.__name__ == "Conv2d")
    assert n_conv == 16  # every 3x3 conv but the stem (7x7); 1x1 downsamples stay dense
    assert ("fc.weight" in masks) == ("--block" in args)
    for name, w0 in before.items():
        got = dict(m.named_buffers()).get(name + "_mask")
        pruned = want[name]
        if got is None:  # left dense by pdc prune too
            assert name not in masks
            np.testing.assert_array_equal(pruned, w0, err_msg=name)
            continue
        mask = got.numpy() != 0
        np.testing.assert_array_equal(mask, pruned != 0, err_msg=name)  # the same mask as pdc prune ...
        np.testing.assert_array_equal(w0 * mask, pruned, err_msg=name)  # ... and the same kept weights
        np.testing.assert_array_equal(getattr(m.get_submodule(name.rsplit(".", 1)[0]), "weight").detach().numpy(),
                                      pruned, err_msg=name)


def test_pruned_finetuned_module_compiles_and_matches_pytorch(tmp_path):
    m = resnet18(1)
    x = torch.randn(2, 3, 64, 64)
    masks = pdc.torch.prune(m, example_input=x)
    opt = torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9)
    m.train()
    for _ in range(2):  # an ordinary PyTorch loop: custom_from_mask keeps pdc's structure
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(m(torch.randn(4, 3, 64, 64)), torch.randint(0, 10, (4,)))
        loss.backward()
        opt.step()
    m.eval()
    for name, mask in masks.items():
        w = m.get_submodule(name.rsplit(".", 1)[0]).weight
        assert (w[mask == 0] == 0).all() and (w[mask != 0] != 0).all(), name
    ctx = pdc.Context(cache_dir=str(tmp_path / "cache"))
    prog = pdc.torch.compile(m, x, target="cpu", threads=2, context=ctx)  # right after a step (weights hold a graph)
    with torch.no_grad():
        want = m(x)
    y = prog(x)
    assert isinstance(y, torch.Tensor) and y.shape == (2, 10)
    err = float((y - want).abs().max())
    assert err <= 1e-4, err
    kernels = prog.program.layer_kernels()
    assert sum("pattern-sparse" in k for k in kernels.values()) == 16, kernels
    out = torch.empty(2, 10)
    assert prog(x, out=out) is not None and torch.equal(out, y)  # written into the caller's tensor


def test_admm_moves_weights_towards_pdcs_sparsity():
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.Conv2d(8, 8, 3, padding=1),
                            torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(8 * 8 * 8, 4))
    x = torch.randn(1, 3, 8, 8)
    a = pdc.torch.admm(m, x, "prune-pattern,prune-connectivity", rho=1.0, patterns=2, connectivity=0.5)
    assert list(a.Z) == ["2.weight"]  # the stem (layer 0) is left alone by pdc's defaults
    z0 = a.Z["2.weight"].clone()
    w0 = m[2].weight.detach().clone()
    np.testing.assert_allclose(float(a.penalty()), 0.5 * float((w0 - z0).pow(2).sum()), rtol=1e-5)
    opt = torch.optim.SGD(m.parameters(), lr=1.0)
    opt.zero_grad()
    a.penalty().backward()
    opt.step()  # with rho = lr = 1 one step solves the W-step exactly: W = Z - U = Z
    assert torch.allclose(m[2].weight.detach(), z0)
    for _ in range(3):  # Z = proj(W + U), U = U + W - Z, residual ||W - Z|| / ||W||
        opt.zero_grad()
        (a.penalty() + m(x).square().mean()).backward()
        opt.step()
        w, u = m[2].weight.detach().clone(), a.U["2.weight"].clone()
        z, _ = a.plan.project("2.weight", (w + u).numpy())
        r = a.update()
        np.testing.assert_array_equal(a.Z["2.weight"].numpy(), z)
        assert torch.allclose(a.U["2.weight"], u + w - torch.from_numpy(z))
        np.testing.assert_allclose(r, float((w - torch.from_numpy(z)).norm() / w.norm()), rtol=1e-5)
        zk = z.reshape(64, 9)
        assert ((zk != 0).sum(1) <= 4).all() and ((zk != 0).sum(1) == 0).sum() >= 32  # pdc's structure
    masks = a.prune()
    w = m[2].weight.detach().numpy().reshape(64, 9)
    kept = masks["2.weight"].numpy().reshape(64, 9)
    assert (w[kept == 0] == 0).all()
    assert ((kept.sum(1) == 4) | (kept.sum(1) == 0)).all() and (kept.sum(1) == 0).sum() == 32
    with pytest.raises(ValueError, match="rho"):
        pdc.torch.admm(m, x, rho=0)


def test_prune_needs_an_example_input():
    with pytest.raises(TypeError, match="example_input"):
        pdc.torch.prune(torch.nn.Linear(4, 4))
