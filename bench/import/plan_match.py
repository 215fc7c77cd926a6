#!/usr/bin/env python3
"""An imported GPT-2 against the generated GPT of the same shape: the plans
the search gives each, and the collectives compile --auto builds for each.

GPT-2-shaped decoders (test/e2e/Inputs/torch_models.py's GPT2, fused q/k/v
and PyTorch's names) are exported by torch.onnx.export with a dynamic
batch, imported with --input-shape and --loss cross-entropy, and set
beside `tessera model gpt --attention unfused` of the same shape (PyTorch
exports attention unfused).
Per device count: `tessera plan --json` of both (the same when their
ranked plans are equal), the winner, and the per-device collectives of the
train step compile --auto builds (per kind and axes: count and bytes, the
imported model's after the generated one's).

  /usr/bin/python3 bench/import/plan_match.py [--sizes 124M,350M]
      [--devices 8,64] [--batch 8] [--machine dgx-h100]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
INPUTS = os.path.join(HERE, "..", "..", "test", "e2e", "Inputs")
sys.path.insert(0, INPUTS)
import collectives  # noqa: E402
import torch_models  # noqa: E402

BIN = os.path.join(HERE, "..", "..", "build", "bin")


def tessera(*args):
    done = subprocess.run([os.path.join(BIN, "tessera"), *args],
                          capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"tessera {' '.join(args)} failed:\n{done.stderr[-2000:]}")
    return done


def describe(plan):
    return (f"dp={plan['dp']} tp={plan['tp']} pp={plan['pp']} "
            f"mb={plan['microbatches']} zero={plan['zero']} "
            f"{plan['schedule']} recompute={plan['recompute']} "
            f"sp={plan['sequence_parallel']} "
            f"step {plan['step_time_s']:.4f} s")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="124M,350M")
    parser.add_argument("--devices", default="8,64")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq", type=int, default=1024)
    parser.add_argument("--vocab", type=int, default=50257)
    parser.add_argument("--machine", default="dgx-h100")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        for size in args.sizes.split(","):
            layers, hidden, heads = torch_models.GPT2_SHAPES[size]
            onnx_path = os.path.join(scratch, f"gpt2-{size}.onnx")
            torch_models.export_gpt2(onnx_path, size, args.seq, args.vocab,
                                     dynamic_batch=True)
            models = {
                "generated": os.path.join(scratch, "generated.mlir"),
                "imported": os.path.join(scratch, "imported.mlir")}
            tessera("import", onnx_path, "--loss", "cross-entropy",
                    f"--input-shape=ids={args.batch}x{args.seq}", "-o",
                    models["imported"])
            tessera("model", "gpt", f"--layers={layers}",
                    f"--hidden={hidden}", f"--heads={heads}",
                    f"--seq={args.seq}", f"--vocab={args.vocab}",
                    f"--batch={args.batch}", "--attention=unfused", "-o",
                    models["generated"])
            for devices in args.devices.split(","):
                common = ["--machine", args.machine, "--devices", devices]
                # In f32, the models' type, as compile --auto prices them.
                plans = {name: json.loads(tessera("plan", path, "--json",
                                                  "--top", "10",
                                                  "--precision", "fp32",
                                                  *common).stdout)
                         for name, path in models.items()}
                same = plans["generated"]["plans"] == \
                    plans["imported"]["plans"]
                best = plans["imported"]["plans"][0]
                print(f"GPT-2 {size} on {devices} x {args.machine}: ranked "
                      f"plans {'the same' if same else 'DIFFERENT'}; best "
                      f"{describe(best)}")
                parts = {}
                for name, path in models.items():
                    parts[name] = os.path.join(scratch, f"{name}.part.mlir")
                    built = tessera("compile", path, "--auto", *common,
                                    "--train", "adamw", "--emit",
                                    "partitioned", "-o", parts[name])
                    print(f"  {name}: " + next(
                        line for line in built.stderr.splitlines()
                        if line.startswith("auto:")))
                sys.argv = ["collectives.py", parts["generated"],
                            parts["imported"]]
                collectives.main()
                print()
            for name in os.listdir(scratch):
                os.remove(os.path.join(scratch, name))


if __name__ == "__main__":
    main()
