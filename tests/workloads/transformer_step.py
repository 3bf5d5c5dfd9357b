"""transformer_step.py - benchmark workload: a small language model's training step.

A real model, as users train one: token embedding, a 2-layer
nn.TransformerEncoder (d_model 64, 4 heads, feed-forward 128), a linear
head, cross-entropy on next-token targets, backward, AdamW; each step
ends with loss.item() and a little Python bookkeeping, as training loops
do (the op that ends a step is followed by Python code, not by another
op; --gap-ms adds that much busy Python time there).  Protocol and options: see wl_common.bench_main (--iters,
--count-ops, --torch-profiler, READY / go signal / RESULT).
"""
import time

import wl_common  # noqa: F401  (blocks SIGUSR1 before torch starts threads)

import torch
from torch import nn

VOCAB, SEQ, BATCH, D = 256, 32, 8, 64


class TinyLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, D)
        layer = nn.TransformerEncoderLayer(D, 4, dim_feedforward=128, dropout=0.0,
                                           batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2)
        self.head = nn.Linear(D, VOCAB)

    def forward(self, tokens):
        return self.head(self.encoder(self.embed(tokens)))


def setup(args):
    g = torch.Generator().manual_seed(args.seed)
    data = torch.randint(0, VOCAB, (16, BATCH, SEQ + 1), generator=g)
    model = TinyLM()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    state = {"i": 0, "losses": []}

    def step():
        batch = data[state["i"] % len(data)]
        state["i"] += 1
        logits = model(batch[:, :-1])
        loss = loss_fn(logits.reshape(-1, VOCAB), batch[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        value = loss.item()
        # the bookkeeping a training loop does between steps (plain Python)
        state["losses"].append(value)
        if len(state["losses"]) > 50:
            state["losses"] = state["losses"][-50:]
        _ = sum(x * x for x in range(2000))
        if args.gap_ms:
            end = time.perf_counter() + args.gap_ms / 1000
            while time.perf_counter() < end:
                pass
    return step


def add_args(p):
    p.add_argument("--gap-ms", type=float, default=0,
                   help="busy Python time after loss.item() in every step")


if __name__ == "__main__":
    wl_common.bench_main(__doc__, setup, default_iters=100, add_args=add_args)
