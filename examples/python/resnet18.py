#!/usr/bin/python3
"""Prune, fine-tune and compile a torchvision ResNet-18 with pdc, on random data (needs python3-torch and
python3-torchvision).
usage: PYTHONPATH=python PDC_LIBRARY=build/libpdc.so.0 /usr/bin/python3 examples/python/resnet18.py"""
import time

import torch
import torchvision

import pdc.torch

torch.manual_seed(0)
model = torchvision.models.resnet18(num_classes=10)
x = torch.randn(1, 3, 224, 224)

# pdc's masks (8 patterns of 4 weights + half the kernels of every 3x3 conv but the stem), kept by PyTorch
masks = pdc.torch.prune(model, "prune-pattern,prune-connectivity", example_input=x)
print(f"pruned {len(masks)} weights, kept {sum(int(m.sum()) for m in masks.values()):,} "
      f"of {sum(m.numel() for m in masks.values()):,}")

opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
model.train()
for step in range(3):  # an ordinary fine-tuning loop: the pruned weights stay zero
    opt.zero_grad()
    loss = torch.nn.functional.cross_entropy(model(torch.randn(8, 3, 224, 224)), torch.randint(0, 10, (8,)))
    loss.backward()
    opt.step()
    print(f"step {step}: loss {loss.item():.3f}")

model.eval()
program = pdc.torch.compile(model, x, target="cpu", threads=2)
with torch.no_grad():
    want = model(x)
t0 = time.perf_counter()
y = program(x)
print(f"pdc cpu: {1e3 * (time.perf_counter() - t0):.1f} ms, max |pdc - torch| = {(y - want).abs().max().item():.2e}")
