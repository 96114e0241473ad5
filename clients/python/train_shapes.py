#!/usr/bin/env python3
"""Trains a small CNN on the shapes dataset as piperun streams it
(examples/pipelines/serve.yaml): batches arrive as torch tensors, already
decoded, augmented, normalized, shuffled and batched on every core.

    go run ./cmd/piperun apply examples/pipelines/serve.yaml &
    /usr/bin/python3 clients/python/train_shapes.py unix://out/shapes.sock

Prints one line per epoch: batches, mean loss, accuracy on the batches
seen, and how long the loop waited for data."""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402
from torch import nn  # noqa: E402

from piperun_client import PiperunDataset  # noqa: E402


def main():
    address = sys.argv[1] if len(sys.argv) > 1 else "unix://out/shapes.sock"
    torch.manual_seed(0)
    torch.set_num_threads(1)  # piperun has the other cores
    model = nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(32 * 12 * 12, 4))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    data = PiperunDataset(address)
    loader = torch.utils.data.DataLoader(data, batch_size=None, num_workers=0)
    epoch, last = 0, None
    while last is None or epoch < last:
        n = correct = seen = 0
        total = waited = 0.0
        t = time.perf_counter()
        for batch in loader:
            waited += time.perf_counter() - t
            x, y = batch["image"], batch["label"]
            out = model(x)
            loss = loss_fn(out, y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            n += 1
            total += loss.item()
            correct += (out.argmax(1) == y).sum().item()
            seen += len(y)
            t = time.perf_counter()
        if n == 0:
            break  # the stream ended early: the run was interrupted
        if last is None:
            # The hello, read with the first epoch, says how many the
            # spec runs (0: endless) and, for a trainer taking over from
            # one that left, the epoch it starts in. Reading past the last
            # would give an empty epoch and a warning.
            epoch = (data.hello.get("resume") or {}).get("epoch", 0)
            last = data.hello.get("epochs") or float("inf")
        print("epoch %d: %d batches, loss %.3f, accuracy %.3f, waited for data %.2fs" %
              (epoch, n, total / n, correct / seen, waited), flush=True)
        epoch += 1


if __name__ == "__main__":
    main()
