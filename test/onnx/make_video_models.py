#!/usr/bin/python3
"""Exports torchvision's video models to ONNX, dense and KGS-pruned in PyTorch, with PyTorch's outputs.

    /usr/bin/python3 test/onnx/make_video_models.py DIR [NAME...]

NAME is r3d_18, mc3_18, r2plus1d_18 (dense) or NAME-kgs (pruned); default all six. For each it writes
DIR/NAME.onnx, NAME.in.bin (a seeded 1x3x8x112x112 clip, raw float32 LE) and NAME.out.bin (PyTorch's
logits for it), the layout `onnx_check` reads (make test-onnx-video). Needs Debian's python3-torch and
python3-torchvision; weights are random (weights=None, fixed seeds, nothing downloaded), BatchNorm3d
statistics randomised so that folding them at import is exercised.

The -kgs variants are pruned the way RT3D's kernel-group sparsity leaves a weight (exact zeros), with
pdc's prune-kgs rule (docs/passes.md, kgs_group 4x4, kgs_masks 8): the [O, C] kernel grid of each conv
cut into 4x4 tiles (edge tiles partial); a tile's position norms are the sums of w^2 over its kernels;
each tile's natural mask keeps the KEEP positions of largest norm; the 8 most frequent natural masks of
the layer form its set and each tile takes the set's mask with the largest norm sum. KEEP is 7 of 27
for 3x3x3 windows, 4 of 9 for 1x3x3 (mc3_18's and r2plus1d_18's spatial convs), 2 of 3 for 3x1x1
(r2plus1d_18's temporal convs). Left dense: each model's stem (3x7x7 or r2plus1d's 1x7x7 + 3x1x1,
which prune-kgs skips too) and the 1x1x1 downsampling convs (a one-entry window has no positions to
choose) and the fc layer.
"""
import os
import sys

import torch
import torchvision.models.video as video
from torch import nn

MODELS = ("r3d_18", "mc3_18", "r2plus1d_18")
KEEP = {27: 7, 9: 4, 3: 2}
GROUP = 4
MASKS = 8
SHAPE = (1, 3, 8, 112, 112)


def randomize_bn(model, gen):
    for m in model.modules():
        if isinstance(m, nn.BatchNorm3d):
            c = m.num_features
            m.running_mean.copy_(torch.randn(c, generator=gen) * 0.1)
            m.running_var.copy_(torch.rand(c, generator=gen) * 0.5 + 0.75)
            m.weight.data.copy_(torch.rand(c, generator=gen) * 0.5 + 0.75)
            m.bias.data.copy_(torch.randn(c, generator=gen) * 0.1)


def kgs_prune(conv, keep):
    """Kernel-group masks on conv's weight [O, C, kd, kh, kw], in place (see the module comment)."""
    w = conv.weight.data
    o, c = w.shape[0], w.shape[1]
    win = w.shape[2] * w.shape[3] * w.shape[4]
    go, gc = -(-o // GROUP), -(-c // GROUP)
    sq = (w.reshape(o, c, win) ** 2).double()
    # pad to whole tiles with zeros (they add nothing to a norm), then sum each tile
    sq = nn.functional.pad(sq, (0, 0, 0, gc * GROUP - c, 0, go * GROUP - o))
    norms = sq.reshape(go, GROUP, gc, GROUP, win).sum(dim=(1, 3)).reshape(go * gc, win)
    # natural masks: the keep largest norms, the lower position on ties (stable sort of -norm)
    order = torch.sort(-norms, dim=1, stable=True).indices[:, :keep]
    natural = torch.zeros_like(norms).scatter_(1, order, 1.0)
    bits = (natural.long() << torch.arange(win)).sum(dim=1)
    uniq, counts = torch.unique(bits, return_counts=True)
    # most frequent first, the smaller bitmask on equal counts (uniq is ascending, the sort is stable)
    chosen = uniq[torch.sort(-counts, stable=True).indices[:MASKS]]
    set_masks = ((chosen[:, None] >> torch.arange(win)) & 1).double()  # [K, win]
    best = (norms @ set_masks.t()).argmax(dim=1)  # the first mask on equal sums
    tile = set_masks[best].reshape(go, 1, gc, 1, win).expand(go, GROUP, gc, GROUP, win)
    mask = tile.reshape(go * GROUP, gc * GROUP, win)[:o, :c].to(w.dtype)
    conv.weight.data = (w.reshape(o, c, win) * mask).reshape(w.shape)


def prune(model, name):
    stem = set(id(m) for m in model.stem.modules())
    for m in model.modules():
        if isinstance(m, nn.Conv3d) and id(m) not in stem and m.groups == 1:
            win = m.kernel_size[0] * m.kernel_size[1] * m.kernel_size[2]
            if win in KEEP:
                kgs_prune(m, KEEP[win])


def build(name):
    """The model (eval mode, seeded weights and BN statistics) and the seeded input clip."""
    base = name[:-4] if name.endswith("-kgs") else name
    if base not in MODELS:
        sys.exit("make_video_models: unknown model %s (known: %s, each also NAME-kgs)" % (name, ", ".join(MODELS)))
    torch.manual_seed(1)
    gen = torch.Generator().manual_seed(2)
    model = getattr(video, base)(weights=None)
    randomize_bn(model, gen)
    model.eval()
    if base != name:
        prune(model, base)
    x = torch.randn(*SHAPE, generator=gen)
    return model, x


def export(name, outdir):
    model, x = build(name)
    path = os.path.join(outdir, name + ".onnx")
    with torch.no_grad():
        y = model(x)
        torch.onnx.export(model, x, path, opset_version=13, input_names=["input"], output_names=["logits"])
    for suffix, a in ((".in.bin", x), (".out.bin", y)):
        a.numpy().astype("<f4").tofile(os.path.join(outdir, name + suffix))
    kept = sum(int((p != 0).sum()) for p in model.parameters())
    total = sum(p.numel() for p in model.parameters())
    print("make_video_models: %s: %d of %d weights kept (%.2fx fewer)" % (name, kept, total, total / kept))
    return path


def main():
    if len(sys.argv) < 2 or sys.argv[1].startswith("-"):
        sys.exit(__doc__)
    outdir = sys.argv[1]
    os.makedirs(outdir, exist_ok=True)
    names = sys.argv[2:] or [n + v for n in MODELS for v in ("", "-kgs")]
    for n in names:
        export(n, outdir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
