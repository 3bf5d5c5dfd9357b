"""gpu_check_job.py - the job bench/gpu_check.sh profiles: resnet18
training steps (torchvision's when installed, else the same architecture
defined here), inside one record_function("gpu_check") scope so every
reader compares the same steps (the job's start-up ops stay outside).

  --device cuda|cpu   --iters N
  --profile FILE      run under torch.profiler (CPU, and CUDA on cuda),
                      export_chrome_trace(FILE)
  --wait              print READY pid=N, wait for SIGUSR1 (tbpf --inject)
"""
import argparse
import os
import signal
import sys

signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402


def resnet18(num_classes=10):
    try:
        from torchvision.models import resnet18 as tv
        return tv(num_classes=num_classes)
    except ImportError:
        pass

    class Block(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(cout)
            self.relu = nn.ReLU(inplace=True)
            self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(cout)
            self.downsample = None
            if stride != 1 or cin != cout:
                self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                                nn.BatchNorm2d(cout))

        def forward(self, x):
            idt = x if self.downsample is None else self.downsample(x)
            out = self.relu(self.bn1(self.conv1(x)))
            return self.relu(self.bn2(self.conv2(out)) + idt)

    class ResNet18(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
            self.bn1 = nn.BatchNorm2d(64)
            self.relu = nn.ReLU(inplace=True)
            self.maxpool = nn.MaxPool2d(3, 2, 1)
            layers, cin = [], 64
            for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
                layers.append(nn.Sequential(Block(cin, cout, stride), Block(cout, cout, 1)))
                cin = cout
            self.layer1, self.layer2, self.layer3, self.layer4 = layers
            self.avgpool = nn.AdaptiveAvgPool2d(1)
            self.fc = nn.Linear(512, num_classes)

        def forward(self, x):
            x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
            x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
            return self.fc(torch.flatten(self.avgpool(x), 1))
    return ResNet18()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--device", default="cuda")
    p.add_argument("--iters", type=int, default=5)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--size", type=int, default=64)
    p.add_argument("--profile")
    p.add_argument("--wait", action="store_true")
    a = p.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    dev = torch.device(a.device)
    model = resnet18().to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(a.batch, 3, a.size, a.size, device=dev)
    y = torch.randint(0, 10, (a.batch,), device=dev)

    def steps():
        with torch.profiler.record_function("gpu_check"):
            for _ in range(a.iters):
                opt.zero_grad()
                loss = nn.functional.cross_entropy(model(x), y)
                loss.backward()
                opt.step()
            if dev.type == "cuda":
                torch.cuda.synchronize()

    if a.wait:
        print("READY pid=%d" % os.getpid(), flush=True)
        signal.sigwait({signal.SIGUSR1})
    if a.profile:
        acts = [torch.profiler.ProfilerActivity.CPU]
        if dev.type == "cuda":
            acts.append(torch.profiler.ProfilerActivity.CUDA)
        with torch.profiler.profile(activities=acts) as prof:
            steps()
        prof.export_chrome_trace(a.profile)
    else:
        steps()
    print("RESULT iters=%d" % a.iters, flush=True)


if __name__ == "__main__":
    sys.exit(main())
