#!/usr/bin/env python3
"""Parameter-server training against synchronous data parallelism: the loss
against steps and against wall time, with and without a straggler.

Compiles a GPT's AdamW train step twice for W data-parallel workers: as the
data-parallel plan (an MPI all-reduce of the gradients) and as a
parameter-server plan (tessera compile --ps S). Trains each on a token file
(this repository's README, byte-level) on this machine's CPU ranks:

- DP: tessera run (MPI), the per-step times from --metrics;
- PS sync, async, ssp=2 and ssp=8: one plan, tessera-run --consistency,
  each step's loss (the mean of its workers') and when its last push
  arrived from server 0's log;

each mode also with worker 1 a straggler (--straggler 1:MS, MS about one
step's compute) where the mode allows it (DP has no straggler flag: a slow
rank there holds every all-reduce, as PS sync's rounds wait for it).

Prints a table (time per step, final loss, the straggler's cost and the
staleness the servers saw) and writes two SVG plots: the loss against
steps and against seconds.

Run from the repository root after building:
    python3 bench/async/parameter_server.py [--steps 60] [--out bench/async]
"""

import argparse
import glob
import json
import os
import subprocess
import tempfile

LAYERS, HIDDEN, HEADS, SEQ, BATCH = 2, 128, 4, 64, 16
COLORS = ["#000000", "#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e",
          "#17becf", "#8c564b", "#e377c2", "#7f7f7f"]


def run(command, env, capture=True):
    return subprocess.run(command, check=True, capture_output=capture,
                          text=True, env=env)


def read_server_log(directory, workers):
    """From server 0's log, a point per push applied: the samples seen so
    far in steps of the global batch (pushes / workers), the mean loss of
    the last `workers` pushes, and the seconds since the job's first hello;
    and the staleness of every push."""
    first, losses, curve, staleness = None, [], [], {}
    for line in open(os.path.join(directory, "server0.log")):
        fields = line.split()
        time = float(fields[-1])
        if fields[0] == "hello" and first is None:
            first = time
        if fields[0] == "push":
            stale, loss = int(fields[4]), float(fields[5])
            losses.append(loss)
            recent = losses[-workers:]
            curve.append((len(losses) / workers, sum(recent) / len(recent),
                          time - first))
            staleness[stale] = staleness.get(stale, 0) + 1
    return curve, staleness


def svg_plot(path, title, xlabel, series, xkey):
    """A line plot of each series' (x, loss) points."""
    width, height, left, right, top, bottom = 640, 400, 60, 170, 30, 45
    xs = [point[xkey] for _, points in series for point in points]
    ys = [point[1] for _, points in series for point in points]
    x0, x1, y0, y1 = 0.0, max(xs), min(ys), max(ys)
    def sx(x):
        return left + (x - x0) / (x1 - x0) * (width - left - right)
    def sy(y):
        return top + (y1 - y) / (y1 - y0) * (height - top - bottom)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" '
           f'height="{height}" font-family="sans-serif" font-size="11">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="{width / 2}" y="18" text-anchor="middle" '
           f'font-size="13">{title}</text>',
           f'<line x1="{left}" y1="{height - bottom}" x2="{width - right}" '
           f'y2="{height - bottom}" stroke="black"/>',
           f'<line x1="{left}" y1="{top}" x2="{left}" y2="{height - bottom}" '
           f'stroke="black"/>',
           f'<text x="{(left + width - right) / 2}" y="{height - 8}" '
           f'text-anchor="middle">{xlabel}</text>',
           f'<text x="14" y="{(top + height - bottom) / 2}" '
           f'transform="rotate(-90 14 {(top + height - bottom) / 2})" '
           f'text-anchor="middle">loss</text>']
    for i in range(5):
        x = x0 + (x1 - x0) * i / 4
        y = y0 + (y1 - y0) * i / 4
        out.append(f'<text x="{sx(x)}" y="{height - bottom + 14}" '
                   f'text-anchor="middle">{x:.3g}</text>')
        out.append(f'<text x="{left - 4}" y="{sy(y) + 4}" '
                   f'text-anchor="end">{y:.3g}</text>')
    for index, (name, points) in enumerate(series):
        color = COLORS[index % len(COLORS)]
        dash = ' stroke-dasharray="5,3"' if "straggler" in name else ""
        coordinates = " ".join(f"{sx(p[xkey]):.1f},{sy(p[1]):.1f}"
                               for p in points)
        out.append(f'<polyline points="{coordinates}" fill="none" '
                   f'stroke="{color}" stroke-width="1.5"{dash}/>')
        ly = top + 14 * index + 10
        out.append(f'<line x1="{width - right + 8}" y1="{ly}" '
                   f'x2="{width - right + 28}" y2="{ly}" stroke="{color}" '
                   f'stroke-width="1.5"{dash}/>')
        out.append(f'<text x="{width - right + 32}" y="{ly + 4}">{name}'
                   f'</text>')
    out.append("</svg>")
    with open(path, "w") as file:
        file.write("\n".join(out) + "\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin", default="build/bin")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--servers", type=int, default=1)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--lr", default="0.003")
    parser.add_argument("--out", default="bench/async")
    args = parser.parse_args()
    tessera = os.path.join(args.bin, "tessera")
    runner = os.path.join(args.bin, "tessera-run")
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1",
               OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OPENBLAS_NUM_THREADS="1")
    results = []
    with tempfile.TemporaryDirectory() as work:
        model = os.path.join(work, "gpt.mlir")
        data = os.path.join(work, "tokens.bin")
        run([tessera, "model", "gpt", "--layers", str(LAYERS), "--hidden",
             str(HIDDEN), "--heads", str(HEADS), "--seq", str(SEQ), "--vocab",
             "256", "--batch", str(BATCH), "--sharding", "megatron", "-o",
             model], env)
        run([tessera, "data", "pack", "README.md", "-o", data], env)
        mesh = f"dp={args.workers},tp=1"
        dp_plan = os.path.join(work, "dp.plan")
        ps_plan = os.path.join(work, "ps.plan")
        common = ["--mesh", mesh, "--train", "adamw", "--lr", args.lr]
        run([tessera, "compile", model, *common, "-o", dp_plan], env)
        run([tessera, "compile", model, *common, "--ps", str(args.servers),
             "-o", ps_plan], env)

        # Data parallelism over MPI: the time of each step from its metrics.
        metrics = os.path.join(work, "dp.jsonl")
        run([tessera, "run", dp_plan, "--ranks", str(args.workers),
             "--steps", str(args.steps), "--data", data, "--metrics",
             metrics], env)
        elapsed, curve = 0.0, []
        for line in open(metrics):
            record = json.loads(line)
            elapsed += record["step_seconds"]
            curve.append((record["step"], record["loss"], elapsed))
        results.append(("DP (MPI)", curve, None))
        # A straggler of about one step's compute.
        step_ms = 1e3 * sorted(p[2] - q[2] for p, q in
                               zip(curve[1:], curve))[len(curve) // 2]
        straggle = max(1, round(step_ms))

        for consistency in ["sync", "async", "ssp=2", "ssp=8"]:
            for slow in [False, True]:
                directory = os.path.join(work, f"{consistency}-{slow}")
                command = [runner, ps_plan, "--steps", str(args.steps),
                           "--data", data, "--consistency", consistency,
                           "--ps-dir", directory]
                if slow:
                    command += ["--straggler", f"1:{straggle}"]
                run(command, env)
                curve, staleness = read_server_log(directory, args.workers)
                name = f"PS {consistency}" + (" straggler" if slow else "")
                results.append((name, curve, staleness))

    print(f"GPT {LAYERS} layers, hidden {HIDDEN}, {HEADS} heads, sequence "
          f"{SEQ}, batch {BATCH}, AdamW lr {args.lr}, on {args.workers} "
          f"workers ({args.servers} parameter server{'s' * (args.servers > 1)}"
          f" for PS), {args.steps} steps each on this README's bytes; the "
          f"straggler (worker 1) waits {straggle} ms a step")
    # A step is a global batch's samples: W pushes of a parameter server.
    target = results[0][1][len(results[0][1]) // 2][1]
    print(f"{'mode':<22} {'ms/step':>8} {'final loss':>10} "
          f"{'s to ' + format(target, '.3f'):>9}  staleness (steps:pushes)")
    for name, curve, staleness in results:
        seconds = curve[-1][2]
        reached = next((p[2] for p in curve if p[1] <= target), None)
        stale = "" if staleness is None else " ".join(
            f"{k}:{v}" for k, v in sorted(staleness.items()))
        print(f"{name:<22} {1e3 * seconds / curve[-1][0]:>8.1f} "
              f"{curve[-1][1]:>10.4f} "
              f"{'-' if reached is None else format(reached, '.2f'):>9}  "
              f"{stale}")
    print("ms/step: the run's seconds over its steps (a parameter server's "
          "pushes over the workers); the loss of a parameter server is the "
          "mean of its last W pushes'; s to L: the seconds until the loss "
          "first reaches DP's loss halfway")
    os.makedirs(args.out, exist_ok=True)
    series = [(name, curve) for name, curve, _ in results]
    svg_plot(os.path.join(args.out, "loss_by_step.svg"),
             "Loss against steps (global batches of samples)", "step",
             series, 0)
    svg_plot(os.path.join(args.out, "loss_by_time.svg"),
             "Loss against wall time", "seconds", series, 2)
    print(f"wrote {args.out}/loss_by_step.svg and {args.out}/loss_by_time.svg")


if __name__ == "__main__":
    main()
