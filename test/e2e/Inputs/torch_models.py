#!/usr/bin/env python3
"""PyTorch models as the oracle of the ONNX importer (e2e/onnx-pytorch.test).

  torch_models.py export NAME DIR    model.onnx, data.tsrt (its inputs) and
                                     expected.tsrt (PyTorch's outputs)
  torch_models.py shard IN OUT --mesh dp=2,tp=2 [--split NAME=DIM ...]
                                     puts an imported model on a mesh: the
                                     data's batch over "dp", the parameters
                                     named (state-dict names; DIM of the
                                     imported argument: the PyTorch
                                     tensor's, but a fused q/k/v weight
                                     has its parts' dim first) over "tp"
  torch_models.py inputs DIR         all.tsrt: data.tsrt, then weights.tsrt
  torch_models.py compare GOT EXPECTED [--rtol 1e-4]
  torch_models.py train NAME DIR [--steps 10]
                                     DIR/train.tsrt (the train step's inputs:
                                     the data, labels, the weights, zero
                                     AdamW moments, the step),
                                     DIR/train-data.tsrt (the data and
                                     labels, for tessera-run --weights) and
                                     DIR/torch-losses.txt (the losses of as
                                     many steps of torch.optim.AdamW on them)
  torch_models.py compare-losses GOT EXPECTED [--rtol 1e-4]

The models are exported as the README tells users to: in training mode (no
dropout in them), so that torch.onnx.export does not merge parameters of
equal values, and without constant folding, so that weights keep their
state-dict names.
"""
import argparse
import math
import os
import re
import sys

import numpy as np
import torch
import torch.nn as nn

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..",
                                "Import", "ONNX", "Inputs"))
import tsrt  # noqa: E402


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(16, 64)
        self.fc2 = nn.Linear(64, 8)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


class GPT2Block(nn.Module):
    def __init__(self, hidden, heads, seq):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(hidden)
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.proj = nn.Linear(hidden, hidden)
        self.ln2 = nn.LayerNorm(hidden)
        self.fc = nn.Linear(hidden, 4 * hidden)
        self.out = nn.Linear(4 * hidden, hidden)
        self.register_buffer("mask",
                             torch.tril(torch.ones(seq, seq)).view(1, 1, seq,
                                                                   seq))

    def forward(self, x):
        b, t, h = x.shape
        d = h // self.heads
        q, k, v = self.qkv(self.ln1(x)).split(h, dim=2)
        q, k, v = (y.view(b, t, self.heads, d).transpose(1, 2)
                   for y in (q, k, v))
        scores = q @ k.transpose(-2, -1) / math.sqrt(d)
        scores = scores.masked_fill(self.mask[:, :, :t, :t] == 0,
                                    float("-inf"))
        y = (torch.softmax(scores, -1) @ v).transpose(1, 2).reshape(b, t, h)
        x = x + self.proj(y)
        return x + self.out(
            nn.functional.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT2(nn.Module):
    """GPT-2's decoder: learned positions, pre-norm blocks, a tied head."""

    def __init__(self, vocab=64, hidden=32, heads=4, layers=2, seq=8):
        super().__init__()
        self.wte = nn.Embedding(vocab, hidden)
        self.wpe = nn.Embedding(seq, hidden)
        self.blocks = nn.ModuleList(
            GPT2Block(hidden, heads, seq) for _ in range(layers))
        self.ln_f = nn.LayerNorm(hidden)

    def forward(self, ids):
        x = self.wte(ids) + self.wpe(torch.arange(ids.shape[1]))
        for block in self.blocks:
            x = block(x)
        return self.ln_f(x) @ self.wte.weight.t()


class RMSNorm(nn.Module):
    def __init__(self, hidden, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(hidden))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) +
                               self.eps) * self.weight


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class LlamaBlock(nn.Module):
    """RMSNorm, rotary embeddings computed in the graph, grouped-query
    attention (kv heads repeated as Hugging Face's repeat_kv does), SwiGLU;
    no biases."""

    def __init__(self, hidden, heads, kv_heads, ffn):
        super().__init__()
        self.heads, self.kv_heads = heads, kv_heads
        d = hidden // heads
        self.attention_norm = RMSNorm(hidden)
        self.wq = nn.Linear(hidden, heads * d, bias=False)
        self.wk = nn.Linear(hidden, kv_heads * d, bias=False)
        self.wv = nn.Linear(hidden, kv_heads * d, bias=False)
        self.wo = nn.Linear(heads * d, hidden, bias=False)
        self.ffn_norm = RMSNorm(hidden)
        self.w1 = nn.Linear(hidden, ffn, bias=False)
        self.w2 = nn.Linear(ffn, hidden, bias=False)
        self.w3 = nn.Linear(hidden, ffn, bias=False)
        self.register_buffer(
            "inv_freq", 1.0 / (10000 ** (torch.arange(0, d, 2).float() / d)))

    def forward(self, x):
        b, t, h = x.shape
        d = h // self.heads
        positions = torch.arange(t).float()
        freqs = positions[:, None] * self.inv_freq[None, :]
        angles = torch.cat((freqs, freqs), dim=-1)
        cos, sin = angles.cos(), angles.sin()
        y = self.attention_norm(x)
        q = self.wq(y).view(b, t, self.heads, d).transpose(1, 2)
        k = self.wk(y).view(b, t, self.kv_heads, d).transpose(1, 2)
        v = self.wv(y).view(b, t, self.kv_heads, d).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        repeat = self.heads // self.kv_heads
        k, v = (z[:, :, None].expand(b, self.kv_heads, repeat, t, d).reshape(
            b, self.heads, t, d) for z in (k, v))
        scores = q @ k.transpose(-2, -1) / math.sqrt(d)
        mask = torch.full((t, t), float("-inf")).triu(1)
        y = (torch.softmax(scores + mask, -1) @ v).transpose(1, 2).reshape(
            b, t, h)
        x = x + self.wo(y)
        y = self.ffn_norm(x)
        return x + self.w2(nn.functional.silu(self.w1(y)) * self.w3(y))


class Llama(nn.Module):
    def __init__(self, vocab=64, hidden=32, heads=4, kv_heads=2, layers=2,
                 ffn=64):
        super().__init__()
        self.tok_embeddings = nn.Embedding(vocab, hidden)
        self.layers = nn.ModuleList(
            LlamaBlock(hidden, heads, kv_heads, ffn) for _ in range(layers))
        self.norm = RMSNorm(hidden)
        self.output = nn.Linear(hidden, vocab, bias=False)

    def forward(self, ids):
        x = self.tok_embeddings(ids)
        for layer in self.layers:
            x = layer(x)
        return self.output(self.norm(x))


def build(name):
    torch.manual_seed(0)
    if name == "mlp":
        return MLP(), (torch.randn(4, 16),)
    ids = torch.randint(0, 64, (4, 8))
    if name == "gpt2":
        return GPT2(), (ids,)
    if name == "llama":
        return Llama(), (ids,)
    if name == "encoder":
        layer = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0,
                                           activation="gelu",
                                           batch_first=True)
        return layer, (torch.randn(4, 8, 32),)
    if name == "encoder_dropout":
        layer = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.1,
                                           activation="gelu",
                                           batch_first=True)
        return layer, (torch.randn(4, 8, 32),)
    sys.exit(f"unknown model {name}")


# GPT-2's published shapes: layers, hidden, heads (seq 1024, vocab 50257).
GPT2_SHAPES = {"124M": (12, 768, 12), "350M": (24, 1024, 16),
               "tiny": (2, 64, 4)}


def export_gpt2(path, size, seq=1024, vocab=50257, dynamic_batch=False):
    """Exports a GPT2 of one of GPT2_SHAPES as the README tells users to,
    its weights as external data (as large models ship), its input "ids"
    of batch 1 or, with `dynamic_batch`, of a batch left to the importer
    (--input-shape ids=BxS: tracing a large batch would hold its
    activations); returns its parameter count."""
    import onnx
    layers, hidden, heads = GPT2_SHAPES[size]
    torch.manual_seed(0)
    model = GPT2(vocab=vocab, hidden=hidden, heads=heads, layers=layers,
                 seq=seq)
    model.train()
    ids = torch.randint(0, vocab, (1, seq))
    torch.onnx.export(model, (ids,), path, opset_version=17,
                      do_constant_folding=False,
                      training=torch.onnx.TrainingMode.PRESERVE,
                      input_names=["ids"],
                      dynamic_axes={"ids": {0: "batch"}} if dynamic_batch
                      else None)
    parameters = sum(p.numel() for p in model.parameters())
    del model
    proto = onnx.load(path)
    onnx.save_model(proto, path, save_as_external_data=True,
                    all_tensors_to_one_file=True,
                    location=os.path.basename(path) + ".weights")
    return parameters


def export(args):
    model, inputs = build(args.name)
    os.makedirs(args.dir, exist_ok=True)
    model.train()
    with torch.no_grad():
        expected = model(*inputs)
    torch.onnx.export(model, inputs, os.path.join(args.dir, "model.onnx"),
                      opset_version=17, do_constant_folding=False,
                      training=torch.onnx.TrainingMode.PRESERVE)
    tsrt.write(os.path.join(args.dir, "data.tsrt"),
               [x.numpy() for x in inputs])
    tsrt.write(os.path.join(args.dir, "expected.tsrt"), [expected.numpy()])


def shard(args):
    sizes = dict(pair.split("=") for pair in args.mesh.split(","))
    splits = dict(split.split("=") for split in args.split)
    with open(args.input) as file:
        text = file.read()
    dp = int(sizes.get("dp", 1))

    def annotate(match):
        name, shape, attrs = match.group(1), match.group(2), match.group(3)
        dims = [int(d) for d in shape.split("x")[:-1]]
        parameter = re.search(r'nn.param = "([^"]+)"', attrs or "")
        axes = [[] for _ in dims]
        if parameter is None:
            if dims and dims[0] % dp == 0:
                axes[0] = ["dp"]
        elif parameter.group(1) in splits:
            axes[int(splits[parameter.group(1)])] = ["tp"]
        sharding = ", ".join(
            "{" + ", ".join(f'"{a}"' for a in dim) + "}" for dim in axes)
        rest = attrs.strip()[1:-1] + ", " if attrs else ""
        return (f"{name}: tensor<{shape}> {{{rest}dist.sharding = "
                f"#dist.sharding<@mesh, [{sharding}]>}}")

    header, body = text.split("func.func", 1)
    signature, rest = body.split(") ->", 1)
    signature = re.sub(r"(%arg\d+): tensor<([^>]*)>( \{[^}]*\})?", annotate,
                       signature)
    mesh = ", ".join(f'"{axis}"={size}' for axis, size in sizes.items())
    with open(args.output, "w") as file:
        file.write(header.replace("module {", "module {\n  dist.mesh @mesh "
                                  f"[{mesh}]", 1) + "func.func" + signature +
                   ") ->" + rest)


def inputs(args):
    tsrt.write(os.path.join(args.dir, "all.tsrt"),
               tsrt.read(os.path.join(args.dir, "data.tsrt")) +
               tsrt.read(os.path.join(args.dir, "weights.tsrt")))


def compare(args):
    got, expected = tsrt.read(args.got)[0], tsrt.read(args.expected)[0]
    if got.shape != expected.shape:
        sys.exit(f"shape {got.shape}, expected {expected.shape}")
    error = np.max(np.abs(got - expected)) / np.max(np.abs(expected))
    print(f"max error {error:.2e} of the largest output")
    if not error <= args.rtol:
        sys.exit(f"differs from PyTorch by {error:.2e} > {args.rtol}")
    print("matches PyTorch")


# The optimizer both sides run: Tessera's --train adamw with these.
LR, WEIGHT_DECAY = 1e-3, 0.01


def train(args):
    model, inputs = build(args.name)
    model.train()
    with torch.no_grad():
        logits = model(*inputs)
    labels = torch.randint(0, logits.shape[-1], logits.shape[:-1],
                           generator=torch.Generator().manual_seed(1))
    weights = tsrt.read(os.path.join(args.dir, "weights.tsrt"))
    moments = [np.zeros_like(w) for w in weights for _ in range(2)]
    data = [x.numpy() for x in inputs] + [labels.numpy()]
    tsrt.write(os.path.join(args.dir, "train.tsrt"),
               data + weights + moments + [np.array(0, dtype=np.int64)])
    tsrt.write(os.path.join(args.dir, "train-data.tsrt"), data)
    optimizer = torch.optim.AdamW(model.parameters(), lr=LR,
                                  betas=(0.9, 0.999), eps=1e-8,
                                  weight_decay=WEIGHT_DECAY)
    losses = []
    for _ in range(args.steps):
        logits = model(*inputs)
        loss = nn.functional.cross_entropy(
            logits.reshape(-1, logits.shape[-1]), labels.reshape(-1))
        losses.append(loss.item())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    with open(os.path.join(args.dir, "torch-losses.txt"), "w") as file:
        file.write("".join(f"{loss:.9g}\n" for loss in losses))


def compare_losses(args):
    def read(path):
        with open(path) as file:
            return [float(line) for line in file if line.strip()]
    got, expected = read(args.got), read(args.expected)
    if len(got) != len(expected):
        sys.exit(f"{len(got)} losses, expected {len(expected)}")
    error = max(abs(a - b) / abs(b) for a, b in zip(got, expected))
    print(f"{len(got)} steps, losses {expected[0]:.6f} to {expected[-1]:.6f}, "
          f"max relative error {error:.2e}")
    if not error <= args.rtol:
        sys.exit(f"differs from PyTorch by {error:.2e} > {args.rtol}")
    print("trains as PyTorch")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    command = commands.add_parser("export")
    command.add_argument("name")
    command.add_argument("dir")
    command = commands.add_parser("shard")
    command.add_argument("input")
    command.add_argument("output")
    command.add_argument("--mesh", required=True)
    command.add_argument("--split", action="append", default=[])
    command = commands.add_parser("inputs")
    command.add_argument("dir")
    command = commands.add_parser("compare")
    command.add_argument("got")
    command.add_argument("expected")
    command.add_argument("--rtol", type=float, default=1e-4)
    command = commands.add_parser("train")
    command.add_argument("name")
    command.add_argument("dir")
    command.add_argument("--steps", type=int, default=10)
    command = commands.add_parser("compare-losses")
    command.add_argument("got")
    command.add_argument("expected")
    command.add_argument("--rtol", type=float, default=1e-4)
    args = parser.parse_args()
    {"export": export, "shard": shard, "inputs": inputs, "compare": compare,
     "train": train, "compare-losses": compare_losses}[args.command](args)


if __name__ == "__main__":
    main()
