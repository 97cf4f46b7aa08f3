#!/usr/bin/python3
"""torch_resnet18_check.py - one SGD step of pdc's trainer on torchvision's ResNet-18 against PyTorch's
(make test-train-torch; needs Debian's python3-torch and python3-torchvision).

    PDC_LIBRARY=build/libpdc.so.0 PYTHONPATH=python /usr/bin/python3 test/train/torch_resnet18_check.py

torchvision's resnet18(num_classes=10) with seeded weights (batchnorm scales and biases drawn too, so their
gradients are not those of an identity) is exported to ONNX; pdc imports it and trains it. A batch of 8
inputs 3x32x32 with seeded labels, softmax cross-entropy, plain SGD (lr 1, no momentum, no weight decay),
batchnorm in training mode (batch statistics), 1 thread:
  - dense: pdc trains exactly PyTorch's parameters (by name), its loss equals PyTorch's (relative 1e-5, a
    NaN fails), and every trainable weight after the step gives
    PyTorch's gradient: |g_pdc - g_torch| / |g_torch| <= 2e-4 per weight (2-norms; g_pdc = w_before - w_after);
  - pruned: pdc prunes the 3x3 convs but the stem (8 patterns of 4, half the kernels), PyTorch gets those
    weights and masks, and trains with its gradients masked (the usual masked retraining); the same checks,
    and every pruned weight is still exactly 0 after pdc's step.
Prints the worst relative error of each run; exits 1 on the first failure, naming the weight.
"""
import io
import sys

import numpy as np
import torch
import torch.nn.functional as F
import torchvision

import pdc

BATCH, CLASSES, LR = 8, 10, 1.0
LOSS_TOL, GRAD_TOL = 1e-5, 2e-4


def make_model():
    torch.manual_seed(46)
    m = torchvision.models.resnet18(num_classes=CLASSES)
    with torch.no_grad():
        for mod in m.modules():
            if isinstance(mod, torch.nn.BatchNorm2d):
                mod.weight.uniform_(0.5, 1.5)
                mod.bias.uniform_(-0.2, 0.2)
    return m


def export(m, x):
    m.eval()  # the exported graph holds batchnorm as BatchNormalization; pdc's trainer uses batch statistics
    buf = io.BytesIO()
    torch.onnx.export(m, x, buf, input_names=["image"], output_names=["logits"], opset_version=13,
                      do_constant_folding=False, training=torch.onnx.TrainingMode.PRESERVE)
    return buf.getvalue()


def fail(msg):
    print("train-torch: FAIL: " + msg)
    sys.exit(1)


def check(name, m, x, y, pruned):
    params = dict(m.named_parameters())
    t = pdc.Trainer(pdc.load(export(m, x)), optimizer="sgd", lr=LR, momentum=0, weight_decay=0,
                    batch=BATCH, threads=1)
    trainable = [w["name"] for w in t.weights if w["trainable"]]
    missing = [n for n in trainable if n not in params]
    if missing:
        fail(f"{name}: pdc weights without a PyTorch parameter of that name: {missing[:4]}")
    untrained = [n for n in params if n not in trainable]
    if untrained:
        fail(f"{name}: PyTorch parameters pdc does not train: {untrained[:4]}")
    masks = {}
    if pruned:
        t.prune("prune-pattern,prune-connectivity", patterns=8, pattern_size=4, connectivity=0.5)
        with torch.no_grad():
            for n in trainable:
                w = t.get_weights(n)
                params[n].copy_(torch.from_numpy(w))
                if (w == 0).any():
                    masks[n] = torch.from_numpy((w != 0).astype(np.float32))
        if len(masks) < 16:
            fail(f"{name}: pdc pruned {len(masks)} weights, expected the 16 3x3 convs after the stem")
    before = {n: t.get_weights(n).astype(np.float64) for n in trainable}
    loss_pdc = t.step(x.numpy(), y.numpy().astype(np.float32))

    m.train()
    m.zero_grad()
    loss = F.cross_entropy(m(x), y)
    loss.backward()
    if not abs(loss_pdc - loss.item()) <= LOSS_TOL * abs(loss.item()):  # a NaN loss fails too
        fail(f"{name}: loss {loss_pdc!r} (pdc) vs {loss.item()!r} (PyTorch)")
    worst, worst_name = 0.0, ""
    for n in trainable:
        after = t.get_weights(n)
        g_torch = params[n].grad.double().numpy()
        if n in masks:
            g_torch = g_torch * masks[n].double().numpy()
            if (after[masks[n].numpy() == 0] != 0).any():
                fail(f"{name}: pruned entries of '{n}' are not 0 after the step")
        g_pdc = (before[n] - after.astype(np.float64)) / LR
        rel = np.linalg.norm(g_pdc - g_torch) / max(np.linalg.norm(g_torch), 1e-30)
        if not rel <= GRAD_TOL:
            fail(f"{name}: weight '{n}': gradient differs from PyTorch's by {rel:.3g} (relative, 2-norm)")
        if rel > worst:
            worst, worst_name = rel, n
    print(f"train-torch: {name}: loss {loss_pdc:.6f} (PyTorch {loss.item():.6f}), {len(trainable)} weights, "
          f"{len(masks)} pruned, worst gradient error {worst:.2e} ('{worst_name}')")


def main():
    g = torch.Generator().manual_seed(47)
    x = torch.randn(BATCH, 3, 32, 32, generator=g)
    y = torch.randint(0, CLASSES, (BATCH,), generator=g)
    check("dense", make_model(), x, y, pruned=False)
    check("pruned", make_model(), x, y, pruned=True)
    print("train-torch: 2 passed, 0 failed")


if __name__ == "__main__":
    main()
