#!/usr/bin/env python3
"""One rank's AdamW step of `tessera model gpt` in PyTorch, for step_time.py.

The same model as Tessera generates: token and position embeddings, blocks
of pre-LayerNorm attention (separate q, k, v projections with biases,
causal softmax attention) and a tanh-GELU MLP, a final LayerNorm, the head
tied to the token embedding, mean cross-entropy, torch.optim.AdamW (lr
1e-3, no weight decay, as `tessera compile --train adamw`). Prints the
minimum and median step time in ms over `--steps` steps after one warm-up.
With `--ranks 2` it trains data-parallel under DistributedDataParallel
(gloo), each rank on half of the batch, as `tessera compile --mesh dp=2`.

    python3 bench/runtime/torch_gpt.py --layers 4 --hidden 256 --heads 4 \\
        --seq 128 --batch 8 --vocab 1024 --threads 1
"""

import argparse
import math
import statistics
import time

import torch
import torch.nn.functional as F


class Block(torch.nn.Module):
    def __init__(self, hidden, heads):
        super().__init__()
        self.heads = heads
        self.ln1 = torch.nn.LayerNorm(hidden, eps=1e-5)
        self.q = torch.nn.Linear(hidden, hidden)
        self.k = torch.nn.Linear(hidden, hidden)
        self.v = torch.nn.Linear(hidden, hidden)
        self.o = torch.nn.Linear(hidden, hidden)
        self.ln2 = torch.nn.LayerNorm(hidden, eps=1e-5)
        self.up = torch.nn.Linear(hidden, 4 * hidden)
        self.down = torch.nn.Linear(4 * hidden, hidden)

    def forward(self, x, mask):
        b, s, h = x.shape
        d = h // self.heads
        y = self.ln1(x)

        def split(t):
            return t.view(b, s, self.heads, d).transpose(1, 2)

        q, k, v = split(self.q(y)), split(self.k(y)), split(self.v(y))
        scores = (q @ k.transpose(-1, -2)) / math.sqrt(d)
        scores = scores.masked_fill(mask, float("-inf"))
        context = (F.softmax(scores, dim=-1) @ v).transpose(1, 2)
        x = x + self.o(context.reshape(b, s, h))
        return x + self.down(F.gelu(self.up(self.ln2(x)),
                                    approximate="tanh"))


class Gpt(torch.nn.Module):
    def __init__(self, layers, hidden, heads, seq, vocab):
        super().__init__()
        self.wte = torch.nn.Parameter(torch.randn(vocab, hidden) * 0.02)
        self.wpe = torch.nn.Parameter(torch.randn(seq, hidden) * 0.02)
        self.blocks = torch.nn.ModuleList(
            Block(hidden, heads) for _ in range(layers))
        self.ln_f = torch.nn.LayerNorm(hidden, eps=1e-5)
        # A plain tensor, not a buffer: DDP's gloo broadcast of module
        # buffers does not take bool, and the mask is the same everywhere.
        self.mask = torch.triu(torch.ones(seq, seq, dtype=torch.bool), 1)

    def forward(self, tokens, labels):
        x = self.wte[tokens] + self.wpe
        for block in self.blocks:
            x = block(x, self.mask)
        logits = self.ln_f(x) @ self.wte.t()
        return F.cross_entropy(logits.flatten(0, 1), labels.flatten())


def train(rank, args, port):
    """Runs the steps on one rank; with --ranks 2, data-parallel under DDP
    (gloo), each rank on its half of the batch. Returns the step times."""
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model = Gpt(args.layers, args.hidden, args.heads, args.seq, args.vocab)
    batch = args.batch // args.ranks
    if args.ranks > 1:
        import torch.distributed as dist
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}",
                                rank=rank, world_size=args.ranks)
        model = torch.nn.parallel.DistributedDataParallel(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3,
                                  weight_decay=0.0)
    tokens = torch.randint(args.vocab, (batch, args.seq))
    labels = torch.randint(args.vocab, (batch, args.seq))
    times = []
    for _ in range(args.steps + 1):
        start = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        model(tokens, labels).backward()
        optimizer.step()
        times.append(1e3 * (time.perf_counter() - start))
    return times[1:]


def run_rank(rank, args, port, queue):
    queue.put(train(rank, args, port))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for name, default in [("layers", 4), ("hidden", 256), ("heads", 4),
                          ("seq", 128), ("batch", 8), ("vocab", 1024),
                          ("threads", 1), ("steps", 5), ("ranks", 1)]:
        parser.add_argument(f"--{name}", type=int, default=default)
    args = parser.parse_args()
    if args.ranks == 1:
        times = train(0, args, None)
    else:
        import random
        import torch.multiprocessing as mp
        context = mp.get_context("spawn")
        queue = context.SimpleQueue()
        port = random.randint(20000, 60000)
        processes = [context.Process(target=run_rank,
                                     args=(rank, args, port, queue))
                     for rank in range(args.ranks)]
        for process in processes:
            process.start()
        per_rank = [queue.get() for _ in processes]
        for process in processes:
            process.join()
        # A step ends when its slowest rank does.
        times = [max(step) for step in zip(*per_rank)]
    print(f"torch: {min(times):.1f} ms min, "
          f"{statistics.median(times):.1f} ms median per step")


if __name__ == "__main__":
    main()
