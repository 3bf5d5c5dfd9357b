"""train.py - the bundled demo workload: a small CNN trained on random data.

An ordinary, unmodified PyTorch training loop (conv, batch norm, pooling,
linear, cross-entropy, backward, Adam) for tbpf to attach to.  Runs for
--seconds (default 120) or until stopped; prints one line once training
has started and a progress line every 5 seconds.
"""
import argparse
import os
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class SmallCNN(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
            nn.AdaptiveAvgPool2d(4),
        )
        self.classifier = nn.Sequential(nn.Flatten(), nn.Linear(32 * 4 * 4, 64), nn.ReLU(),
                                        nn.Dropout(0.1), nn.Linear(64, classes))

    def forward(self, x):
        return self.classifier(self.features(x))


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--seconds", type=float, default=120)
    p.add_argument("--batch", type=int, default=16)
    args = p.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = SmallCNN()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    start = last = time.monotonic()
    step = 0
    while time.monotonic() - start < args.seconds:
        x = torch.randn(args.batch, 3, 32, 32)
        y = torch.randint(0, 10, (args.batch,))
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        step += 1
        if step == 3:
            print("demo: training started (pid %d, torch %s)" % (os.getpid(), torch.__version__), flush=True)
        if time.monotonic() - last >= 5:
            last = time.monotonic()
            print("demo: step %d, loss %.3f" % (step, loss.item()), flush=True)


if __name__ == "__main__":
    main()
