#!/usr/bin/python3
"""The digits demo from Python (what `make demo` does in C, examples/train_digits.c): build the digits CNN,
train it with pdc's trainer, prune it (8 patterns of 4 + 50% connectivity on the convs, 80% of the fc's 1x4
blocks), retrain it, compile it for cpu and classify the test set.

usage: PYTHONPATH=python PDC_LIBRARY=build/libpdc.so.0 /usr/bin/python3 examples/python/digits.py [--epochs N]
"""
import argparse
import struct

import numpy as np

import pdc


def load_digits(path):  # format: test/data/README.md
    raw = open(path, "rb").read()
    magic, n_train, n_test, rows, cols = struct.unpack_from("<4s4I", raw)
    assert magic == b"DGT1" and (rows, cols) == (8, 8), f"{path}: not a digits file"
    n = n_train + n_test
    x = np.frombuffer(raw, np.uint8, n * 64, 20).reshape(n, 1, 8, 8).astype(np.float32) / 16
    y = np.frombuffer(raw, np.uint8, n, 20 + n * 64).astype(np.float32)
    return (x[:n_train], y[:n_train]), (x[n_train:], y[n_train:])


def digits_cnn():
    m = pdc.Model("digits_cnn")
    m.add_input("image", (-1, 1, 8, 8))  # batch: set by the trainer, and before compiling
    for name, shape in [("conv1.w", (16, 1, 3, 3)), ("conv1.b", (16,)), ("conv2.w", (32, 16, 3, 3)),
                        ("conv2.b", (32,)), ("fc.w", (10, 2048)), ("fc.b", (10,))]:
        m.add_constant(name, np.zeros(shape, np.float32))  # the trainer draws the initial weights
    m.add_layer("conv1", "conv", ["image", "conv1.w", "conv1.b"], "c1", pads=[1, 1, 1, 1])
    m.add_layer("relu1", "relu", "c1", "r1")
    m.add_layer("conv2", "conv", ["r1", "conv2.w", "conv2.b"], "c2", pads=[1, 1, 1, 1])
    m.add_layer("relu2", "relu", "c2", "r2")
    m.add_layer("flatten", "flatten", "r2", "flat")
    m.add_layer("fc", "fc", ["flat", "fc.w", "fc.b"], "logits")
    m.add_layer("softmax", "softmax", "logits", "probs")
    return m.mark_output("probs")


def train(tr, x, y, epochs, batch=32):
    for epoch in range(epochs):
        perm = tr.shuffle(len(x))
        losses = [tr.step(x[perm[i:i + batch]], y[perm[i:i + batch]]) for i in range(0, len(x), batch)]
    return float(np.mean(losses))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default="test/data/digits.bin")
    ap.add_argument("--epochs", type=int, default=20)
    ap.add_argument("--retrain", type=int, default=10)
    args = ap.parse_args()
    (xtr, ytr), (xte, yte) = load_digits(args.data)

    with digits_cnn() as model, model.trainer(lr=1e-3, batch=32, seed=1) as tr:
        tr.init_weights()
        loss = train(tr, xtr, ytr, args.epochs)
        print(f"dense:  {args.epochs} epochs, train loss {loss:.4f}, test accuracy {tr.evaluate(xte, yte)[1]:.3f}")
        # conv1 reads the image (the stem): naming the layers prunes it too
        tr.prune("prune-pattern,prune-connectivity,prune-block", layers=["conv1", "conv2", "fc"],
                 block="1x4", block_rate=0.8)
        loss = train(tr, xtr, ytr, args.retrain)
        print(f"pruned: {args.retrain} epochs of masked retraining, train loss {loss:.4f}, "
              f"test accuracy {tr.evaluate(xte, yte)[1]:.3f}")
        pruned = tr.export()

    for layer in pruned.layers:
        if layer["weights"]:
            print(f"  {layer['name']:6} kept {layer['kept_weights']:5}/{layer['weights']:<5}  {layer['sparsity']}")
    pruned.set_input_shape("image", (len(xte), 1, 8, 8))  # the whole test set in one run
    program = pruned.compile(target="cpu", threads=2)
    probs = program(np.ascontiguousarray(xte))
    print(f"compiled for cpu: test accuracy {np.mean(probs.argmax(1) == yte):.3f} on {len(xte)} digits")


if __name__ == "__main__":
    main()
