"""hf_train.py - Hugging Face transformers models, training: a small BERT
(BertForMaskedLM) or GPT-2 (GPT2LMHeadModel) built from its config (no
download: random weights, 2 layers, hidden size 64, 4 heads, vocabulary
512), trained with AdamW on seeded random tokens, 4 sequences of 32.

After READY and go (wl_common.py): --iters steps of forward with labels
(the model's own loss), backward, optimizer step and zero_grad; RESULT
steps=N checksum=<the losses' sum>.  --profile runs the same steps under
torch.profiler and prints {"rows", "events", "checksum"} as
scopes_model.py does (compare_rows.py).
"""
import argparse
import warnings

import wl_common  # noqa: F401  (blocks SIGUSR1 before torch starts threads)
from wl_common import add_common_args, print_json, profile_cpu, ready, result, wait_go
from scopes_model import rows_of

import torch

warnings.simplefilter("ignore")


def build(kind, seed):
    import transformers
    transformers.logging.set_verbosity_error()
    torch.manual_seed(seed)
    if kind == "bert":
        cfg = transformers.BertConfig(vocab_size=512, hidden_size=64, num_hidden_layers=2,
                                      num_attention_heads=4, intermediate_size=128,
                                      max_position_embeddings=64)
        model = transformers.BertForMaskedLM(cfg)
    else:
        cfg = transformers.GPT2Config(vocab_size=512, n_positions=64, n_embd=64, n_layer=2,
                                      n_head=4)
        model = transformers.GPT2LMHeadModel(cfg)
    model.train()
    return model, torch.optim.AdamW(model.parameters(), lr=1e-3)


def batches(seed, n):
    g = torch.Generator().manual_seed(seed + 1)
    return [torch.randint(0, 512, (4, 32), generator=g) for _ in range(n)]


def train(model, opt, data):
    total = 0.0
    for ids in data:
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
        total += loss.item()
    return total


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--model", choices=("bert", "gpt2"), default="bert")
    p.add_argument("--iters", type=int, default=8)
    p.add_argument("--profile", action="store_true")
    add_common_args(p)
    args = p.parse_args()
    torch.set_num_threads(args.intra_threads)
    model, opt = build(args.model, args.seed)
    data = batches(args.seed, args.iters)
    if args.profile:
        with profile_cpu() as prof:
            total = train(model, opt, data)
        rows, events = rows_of(prof)
        print_json({"rows": rows, "events": events, "checksum": "%.12e" % total})
        return
    ready()
    wait_go(args)
    total = train(model, opt, data)
    result(steps=args.iters, checksum="%.12e" % total)


if __name__ == "__main__":
    main()
