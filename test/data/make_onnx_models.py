#!/usr/bin/python3
"""Makes the ONNX test models of pdc (test/data/onnx/) and, with --full DIR, the full-size ones.

Run with Debian's Python (python3-torch 1.13, python3-torchvision, python3-onnx):

    /usr/bin/python3 test/data/make_onnx_models.py            # writes test/data/onnx/
    /usr/bin/python3 test/data/make_onnx_models.py --full DIR # resnet18, vgg16, mobilenet_v2 at 224x224

For every model NAME it writes NAME.onnx, NAME.in.bin (the input, raw float32 little-endian) and
NAME.out.bin (PyTorch's outputs for that input, raw float32, all outputs concatenated in order).
Weights are random with fixed seeds, so the files are reproducible with the same library versions.
Some models have weights pruned into pattern or block structure (exact zeros) the way a pruning loop
leaves them; a few are written directly with onnx.helper to reach attribute forms torch does not
emit (auto_pad, Softmax before opset 13 on a non-last axis), with the reference computed by torch.
"""
import os
import sys

import numpy as np
import onnx
import torch
import torch.nn.functional as F
from onnx import TensorProto, helper, numpy_helper
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))


def save_bin(path, arrays):
    with open(path, "wb") as f:
        for a in arrays:
            f.write(np.ascontiguousarray(a, dtype="<f4").tobytes())


def randomize_bn(model, gen):
    """Eval-mode BatchNorm with non-trivial statistics, so that BN actually does something."""
    for m in model.modules():
        if isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d)):
            c = m.num_features
            m.running_mean.copy_(torch.randn(c, generator=gen) * 0.1)
            m.running_var.copy_(torch.rand(c, generator=gen) * 0.5 + 0.75)
            m.weight.data.copy_(torch.rand(c, generator=gen) * 0.5 + 0.75)
            m.bias.data.copy_(torch.randn(c, generator=gen) * 0.1)


def export(model, inputs, outdir, name, opset, names_in=("x",), names_out=("y",), preserve=True, dynamic=None,
           fold=True):
    model.eval()
    with torch.no_grad():
        ref = model(*inputs)
    refs = ref if isinstance(ref, tuple) else (ref,)
    path = os.path.join(outdir, name + ".onnx")
    kw = dict(training=torch.onnx.TrainingMode.PRESERVE) if preserve else {}
    torch.onnx.export(model, tuple(inputs), path, opset_version=opset, input_names=list(names_in),
                      output_names=list(names_out), dynamic_axes=dynamic, do_constant_folding=fold, **kw)
    onnx.checker.check_model(onnx.load(path))
    save_bin(os.path.join(outdir, name + ".in.bin"), [t.numpy() for t in inputs])
    save_bin(os.path.join(outdir, name + ".out.bin"), [t.numpy() for t in refs])
    print(f"{name}: opset {opset}, {os.path.getsize(path)} bytes, outputs {[tuple(t.shape) for t in refs]}")


def save_helper_model(graph, outdir, name, opset, inputs, refs):
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], producer_name="pdc-test")
    model.ir_version = 7
    onnx.checker.check_model(model)
    path = os.path.join(outdir, name + ".onnx")
    onnx.save(model, path)
    save_bin(os.path.join(outdir, name + ".in.bin"), inputs)
    save_bin(os.path.join(outdir, name + ".out.bin"), refs)
    print(f"{name}: opset {opset}, {os.path.getsize(path)} bytes (onnx.helper)")


# ------------------------------------------------------------------ models


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return F.relu(y + (self.down(x) if self.down is not None else x))


class ResNetSmall(nn.Module):
    """ResNet-style: stem conv-BN-ReLU, max pool, three basic blocks with shortcuts, GAP, FC, softmax."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU())
        self.pool = nn.MaxPool2d(3, 2, 1)
        self.layers = nn.Sequential(BasicBlock(16, 16, 1), BasicBlock(16, 32, 2), BasicBlock(32, 64, 2))
        self.fc = nn.Linear(64, 10)

    def forward(self, x):
        x = self.layers(self.pool(self.stem(x)))
        x = torch.flatten(F.adaptive_avg_pool2d(x, 1), 1)
        return F.softmax(self.fc(x), dim=1)


class InvertedResidual(nn.Module):
    def __init__(self, cin, cout, stride, expand):
        super().__init__()
        hid = cin * expand
        self.use_res = stride == 1 and cin == cout
        self.body = nn.Sequential(
            nn.Conv2d(cin, hid, 1, bias=False), nn.BatchNorm2d(hid), nn.ReLU6(),
            nn.Conv2d(hid, hid, 3, stride, 1, groups=hid, bias=False), nn.BatchNorm2d(hid), nn.ReLU6(),
            nn.Conv2d(hid, cout, 1, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = self.body(x)
        return x + y if self.use_res else y


class MobileNetV2Small(nn.Module):
    """MobileNetV2-style: depthwise convs, ReLU6 (Clip), inverted residuals; a two-branch stem joined
    by Concat and a hardswish head (HardSigmoid * x before opset 14)."""

    def __init__(self):
        super().__init__()
        self.stem_a = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1, bias=False), nn.BatchNorm2d(8), nn.ReLU6())
        self.stem_b = nn.Sequential(nn.Conv2d(3, 8, 1, 2, 0, bias=False), nn.BatchNorm2d(8), nn.ReLU6())
        self.blocks = nn.Sequential(InvertedResidual(16, 16, 1, 4), InvertedResidual(16, 24, 2, 6),
                                    InvertedResidual(24, 24, 1, 6), InvertedResidual(24, 32, 2, 6))
        self.head = nn.Sequential(nn.Conv2d(32, 64, 1, bias=False), nn.BatchNorm2d(64), nn.Hardswish())
        self.drop = nn.Dropout(0.2)
        self.fc = nn.Linear(64, 10)

    def forward(self, x):
        x = torch.cat([self.stem_a(x), self.stem_b(x)], 1)
        x = self.head(self.blocks(x))
        x = F.adaptive_avg_pool2d(x, 1).flatten(1)
        return self.fc(self.drop(x))


class VGGSmall(nn.Module):
    """VGG-style at opset 9: normalisation by Sub/Div constants, conv stacks, max and average pooling,
    LeakyReLU, BN + ReLU6 (Clip with attributes), flatten by x.view(x.size(0), -1) (Shape arithmetic),
    a classifier with Sigmoid and Tanh."""

    def __init__(self):
        super().__init__()
        self.register_buffer("mean", torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1))
        self.register_buffer("std", torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1))
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.LeakyReLU(0.1), nn.AvgPool2d(2),
            nn.Conv2d(32, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU6(), nn.MaxPool2d(2, ceil_mode=False))
        self.classifier = nn.Sequential(nn.Linear(32 * 4 * 4, 64), nn.Sigmoid(), nn.Dropout(), nn.Linear(64, 32),
                                        nn.Tanh(), nn.Linear(32, 10))

    def forward(self, x):
        x = self.features((x - self.mean) / self.std)
        return self.classifier(x.view(x.size(0), -1))


class LSTMNet(nn.Module):
    """Two-layer LSTM (batch_first=False: torch builds the zero initial states with Shape/Gather/
    Unsqueeze/Concat/Expand) and a linear head on every step (MatMul + Add). Outputs y and h_n."""

    def __init__(self):
        super().__init__()
        self.rnn = nn.LSTM(8, 16, num_layers=2)
        self.head = nn.Linear(16, 4)

    def forward(self, x):
        y, (h, _) = self.rnn(x)
        return self.head(y), h


class GRUNet(nn.Module):
    """Bidirectional GRU (linear_before_reset = 1, outputs transposed and reshaped) and a linear head."""

    def __init__(self):
        super().__init__()
        self.rnn = nn.GRU(8, 12, bidirectional=True)
        self.head = nn.Linear(24, 6)

    def forward(self, x):
        y, _ = self.rnn(x)
        return self.head(y)


class PatternCNN(nn.Module):
    """Three 3x3 convs whose kernels are pruned to 4-entry patterns plus removed kernels."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.conv3 = nn.Conv2d(32, 32, 3, stride=2, padding=1)
        self.fc = nn.Linear(32, 10)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.hardswish(self.conv2(x))
        x = F.relu(self.conv3(x))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


# Six 4-of-9 patterns (bit r*3+c of the 3x3 window), each containing the centre (bit 4).
PATTERNS = [0b000011011, 0b000110110, 0b011011000, 0b110110000, 0b010111000, 0b000111010]


def pattern_prune(conv, gen, n_patterns, removed_frac, extra_zero_frac):
    """Zeros outside a pattern per kernel, whole kernels removed, and a few kernels with one more zero
    inside their pattern (they must still be recognised as that pattern). Returns the expected
    number of removed kernels."""
    w = conv.weight.data
    o, c = w.shape[:2]
    kernels = o * c
    pat = torch.randint(0, n_patterns, (kernels,), generator=gen)
    pat[:n_patterns] = torch.arange(n_patterns)  # every pattern appears intact
    removed = torch.rand(kernels, generator=gen) < removed_frac
    removed[:n_patterns] = False
    extra = torch.rand(kernels, generator=gen) < extra_zero_frac
    extra[:n_patterns] = False
    flat = w.view(kernels, 9)
    for k in range(kernels):
        bits = PATTERNS[int(pat[k])]
        keep = torch.tensor([(bits >> p) & 1 for p in range(9)], dtype=torch.bool)
        if removed[k]:
            keep[:] = False
        elif extra[k]:
            keep[4] = False  # drop the centre: fewer non-zeros than the pattern
        flat[k][~keep] = 0.0
    return int(removed.sum())


def block_prune(linear, bh, bw, frac, gen):
    w = linear.weight.data
    rows, cols = w.shape
    mask = torch.rand((rows + bh - 1) // bh, (cols + bw - 1) // bw, generator=gen) < frac
    full = mask.repeat_interleave(bh, 0).repeat_interleave(bw, 1)[:rows, :cols]
    w[full] = 0.0
    return int(mask.sum()), mask.numel()


class BlockFC(nn.Module):
    """An MLP exported at opset 17: a 1x4-block-pruned, a 4x4-block-pruned, an unstructured-pruned
    (60% zeros) and a dense Gemm."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(64, 128)
        self.fc2 = nn.Linear(128, 64)
        self.fc3 = nn.Linear(64, 32)
        self.fc4 = nn.Linear(32, 10)

    def forward(self, x):
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        x = F.relu(self.fc3(x))
        return self.fc4(x)


def make_small(outdir):
    os.makedirs(outdir, exist_ok=True)
    torch.manual_seed(1)
    gen = torch.Generator().manual_seed(1)

    m = ResNetSmall()
    randomize_bn(m, gen)
    export(m, [torch.randn(2, 3, 32, 32, generator=gen)], outdir, "resnet_small", 13)

    m = MobileNetV2Small()
    randomize_bn(m, gen)
    export(m, [torch.randn(1, 3, 32, 32, generator=gen)], outdir, "mobilenetv2_small", 11)

    m = VGGSmall()
    randomize_bn(m, gen)
    # without torch's constant folding, so that the flatten's Shape arithmetic reaches pdc
    export(m, [torch.rand(2, 3, 32, 32, generator=gen)], outdir, "vgg_small", 9, fold=False)

    m = LSTMNet()
    export(m, [torch.randn(6, 3, 8, generator=gen)], outdir, "lstm", 13, names_out=("y", "h_n"), preserve=False)

    m = GRUNet()
    export(m, [torch.randn(5, 2, 8, generator=gen)], outdir, "gru", 11, preserve=False)

    m = PatternCNN()
    removed = [pattern_prune(m.conv1, gen, 4, 0.0, 0.0), pattern_prune(m.conv2, gen, 6, 0.25, 0.1),
               pattern_prune(m.conv3, gen, 5, 0.4, 0.1)]
    export(m, [torch.randn(1, 3, 16, 16, generator=gen)], outdir, "pattern_cnn", 14)
    print("  pattern_cnn removed kernels per conv:", removed)

    m = BlockFC()
    b1 = block_prune(m.fc1, 1, 4, 0.7, gen)
    b2 = block_prune(m.fc2, 4, 4, 0.5, gen)
    w3 = m.fc3.weight.data
    w3[torch.rand(w3.shape, generator=gen) < 0.6] = 0.0
    export(m, [torch.randn(4, 64, generator=gen)], outdir, "block_fc", 17)
    print("  block_fc zero blocks: fc1 1x4 %d/%d, fc2 4x4 %d/%d; fc3 zeros %d/%d"
          % (b1[0], b1[1], b2[0], b2[1], int((w3 == 0).sum()), w3.numel()))

    make_softmax_v11(outdir, gen)
    make_autopad(outdir, gen)


def make_softmax_v11(outdir, gen):
    """Opset 11 forms torch does not write: Softmax(axis=1) on a 4-D tensor (flatten-at-axis semantics),
    Dropout and Identity (removed), Unsqueeze/Squeeze with axes attributes, Transpose, Flatten."""
    x = torch.randn(2, 3, 4, 5, generator=gen)
    nodes = [
        helper.make_node("Softmax", ["x"], ["s"], name="softmax_axis1", axis=1),
        helper.make_node("Dropout", ["s"], ["d"], name="dropout", ratio=0.5),
        helper.make_node("Identity", ["d"], ["i"], name="identity"),
        helper.make_node("Unsqueeze", ["i"], ["u"], name="unsqueeze", axes=[0]),
        helper.make_node("Squeeze", ["u"], ["q"], name="squeeze", axes=[0]),
        helper.make_node("Transpose", ["q"], ["t"], name="transpose", perm=[0, 2, 3, 1]),
        helper.make_node("Flatten", ["t"], ["y"], name="flatten", axis=2),
    ]
    graph = helper.make_graph(nodes, "softmax_v11", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4, 5])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [8, 15])])
    s = torch.softmax(x.reshape(2, -1), dim=1).reshape(2, 3, 4, 5)  # softmax-11: over dims >= axis
    y = s.permute(0, 2, 3, 1).reshape(8, 15)
    save_helper_model(graph, outdir, "softmax_v11", 11, [x.numpy()], [y.numpy()])


def make_autopad(outdir, gen):
    """auto_pad forms at opset 13: Conv SAME_UPPER with stride 2 on an even input (asymmetric pads),
    MaxPool SAME_LOWER, AveragePool VALID, then a HardSigmoid with the ONNX default alpha/beta."""
    x = torch.randn(1, 2, 8, 8, generator=gen)
    w = torch.randn(4, 2, 3, 3, generator=gen)
    b = torch.randn(4, generator=gen)
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv_same_upper", auto_pad="SAME_UPPER",
                         strides=[2, 2], kernel_shape=[3, 3]),
        helper.make_node("MaxPool", ["c"], ["p"], name="maxpool_same_lower", auto_pad="SAME_LOWER",
                         kernel_shape=[2, 2], strides=[1, 1]),
        helper.make_node("AveragePool", ["p"], ["a"], name="avgpool_valid", auto_pad="VALID", kernel_shape=[2, 2]),
        helper.make_node("HardSigmoid", ["a"], ["y"], name="hardsigmoid"),
    ]
    inits = [numpy_helper.from_array(w.numpy(), "w"), numpy_helper.from_array(b.numpy(), "b")]
    graph = helper.make_graph(nodes, "autopad", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 3, 3])], inits)
    # SAME_UPPER, in 8, k 3, s 2: out 4, total pad 1 -> begin 0, end 1
    c = F.conv2d(F.pad(x, (0, 1, 0, 1)), w, b, stride=2)
    # SAME_LOWER, in 4, k 2, s 1: total pad 1 -> begin 1, end 0 (padding never wins a max)
    p = F.max_pool2d(F.pad(c, (1, 0, 1, 0), value=float("-inf")), 2, 1)
    a = F.avg_pool2d(p, 2, 1)
    y = torch.clamp(0.2 * a + 0.5, 0, 1)
    save_helper_model(graph, outdir, "autopad", 13, [x.numpy()], [y.numpy()])


def make_full(outdir):
    import torchvision

    os.makedirs(outdir, exist_ok=True)
    for name, ctor in (("resnet18", torchvision.models.resnet18), ("mobilenet_v2", torchvision.models.mobilenet_v2),
                       ("vgg16", torchvision.models.vgg16)):
        torch.manual_seed(0)
        m = ctor(weights=None) if "weights" in ctor.__code__.co_varnames else ctor(pretrained=False)
        gen = torch.Generator().manual_seed(0)
        randomize_bn(m, gen)  # fresh BN (mean 0, var 1) would make mobilenet_v2's outputs ~1e-9
        x = torch.randn(1, 3, 224, 224, generator=gen)
        export(m, [x], outdir, name, 13, preserve=False)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--full":
        make_full(sys.argv[2])
    elif len(sys.argv) == 1:
        make_small(os.path.join(HERE, "onnx"))
    else:
        sys.exit(__doc__)
