#!/usr/bin/env python3
"""The cost model against published training runs (issue 22).

Each run of published.json (role "calibrate" or "validate") is priced by
`tessera plan --json` pinned to the run's configuration (mesh, microbatches,
ZeRO stage, schedule, recomputation, sequence parallelism) on the run's
machine preset; its predicted throughput is set against the measured one.
The measured step is the published step time, or the published TFLOP/s per
GPU turned into a step by the paper's own FLOP count:

- GPT (Narayanan et al. 2021, Korthikanti et al. 2022, Megatron-LM's
  tables): model FLOPs 72 B s l h^2 (1 + s/6h + V/12lh), hardware FLOPs
  with full recomputation 96 B s l h^2 (1 + s/6h + V/16lh);
- Llama 3 (PaLM's MFU definition): 6 N + 12 l h s per token.

Error = predicted throughput / measured - 1: positive is optimistic.

    bench/costmodel/fit.py            # the error table of the presets
    bench/costmodel/fit.py --fit      # fit each preset's "efficiency" and
                                      # its NVLink level, print the fit

--fit first fits the innermost level's bandwidth and latency and the
collective call to the 8-GPU NCCL all-reduce bus bandwidths, then the
GEMM, attention and memory efficiencies, the kernel launch and the per-step
cost to the "calibrate" runs, from each run's breakdown (the terms scale
by 1/efficiency, linearly in the launch and step costs). Runs marked
"validate" (Narayanan et al. 2021, Table 1 among them) are never fitted
to. The fitted numbers go into machines/*.json by hand, with their sources.

Assumptions where a paper is silent: one sequence per microbatch; A100-era
Megatron (2021-22) attention unfused, H100-era (2024) fused (FlashAttention);
Megatron's overlapped DP reduction in buckets of 40M f32 gradients.
"""

import argparse
import concurrent.futures
import json
import math
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TESSERA = os.path.join(ROOT, "build", "bin", "tessera")
MACHINES = os.path.join(ROOT, "machines")
PUBLISHED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "published.json")
# Megatron-LM's DDP bucket: 40M parameters of f32 main gradients.
MEGATRON_BUCKET_BYTES = 40_000_000 * 4
# FlashAttention-2's forward and backward at head dim 128 (Dao 2023: 187-203
# TFLOP/s of the A100's 312; about 35% of the H100's peak, as the
# FlashAttention-3 paper measures it).
FLASH_ATTENTION = {"dgx-a100-80gb": 0.6, "dgx-h100": 0.35, "h200-cluster": 0.35}
# A kernel's launch where too few runs fit it (about the A100 runs' fit).
LAUNCH_SECONDS = 2e-6
# No published BF16 end-to-end run on H200 gives its configuration: it takes
# the H100's compute efficiencies (the same GH100 die, with HBM3e).
SAME_DEVICE = {"h200-cluster": "dgx-h100"}


def usable(run):
    """Whether Tessera can price the run as published."""
    if run.get("incomplete") or (run.get("cp") or 1) != 1:
        return False
    if "fp8" in str(run.get("precision", "")).lower():
        return False
    return run["role"] in ("calibrate", "validate") and run.get("global_batch")


def is_llama(run):
    return "llama" in run["model"].lower()


def gaps(run):
    """Where the published program differs from the one Tessera compiles
    for the same configuration: such a run measures the difference, not the
    cost model, and is not fitted to."""
    found = []
    if (run.get("zero") or 0) in (1, 2) and run["dp"] > 1:
        found.append("gather")
    return found


GAP_LEGEND = {
    "gather": "the distributed optimizer's reduce-scatter and parameter "
              "gather run after the backward, exposed (Megatron-LM and "
              "DeepSpeed overlap them)",
}


def model_file(run, cache):
    """`tessera model` of the run's shape, one file per shape."""
    attention = "fused" if run["machine"] != "dgx-a100-80gb" else "unfused"
    args = ["--layers", run["layers"], "--hidden", run["hidden"], "--heads",
            run["heads"], "--seq", run["seq"], "--vocab", run["vocab"],
            "--batch", run["global_batch"], "--attention", attention]
    kind = "gpt"
    if is_llama(run):
        kind = "llama"
        args += ["--kv-heads", run.get("kv_heads") or run["heads"],
                 "--ffn-hidden", run["ffn_hidden"]]
    args = [str(a) for a in args]
    path = os.path.join(cache, "-".join([kind] + args[1::2]) + ".mlir")
    if not os.path.exists(path):
        # Whole or not at all: two runs may share a shape.
        partial = f"{path}.{os.getpid()}.{id(run)}"
        subprocess.run([TESSERA, "model", kind, *args, "-o", partial],
                       check=True, stderr=subprocess.DEVNULL)
        os.replace(partial, path)
    return path


def plan_args(run):
    dp, tp, pp = run["dp"], run["tp"], run["pp"]
    microbatch = run.get("microbatch") or 1
    microbatches = run["global_batch"] // dp // microbatch
    args = ["--devices", run["gpus"], "--dp", dp, "--tp", tp, "--pp", pp,
            "--microbatches", microbatches, "--zero", run.get("zero") or 0,
            "--recompute", run["recompute"], "--layout", "megatron",
            "--sequence-parallel", "on" if run["sequence_parallel"] else "off",
            "--json", "--top", "1"]
    virtual = run.get("virtual_stages") or 1
    if pp > 1:
        args += ["--schedule", "interleaved" if virtual > 1 else "1f1b"]
        if virtual > 1:
            args += ["--virtual", virtual]
    if (run.get("zero") or 0) >= 3 and is_llama(run):
        # Llama 3's FSDP keeps the forward's gathers for the backward.
        args += ["--reshard-after-forward", "false"]
    if dp > 1:
        args += ["--overlap", "--bucket-bytes", MEGATRON_BUCKET_BYTES]
    return [str(a) for a in args]


def price(run, machine_path, cache):
    """The plan's JSON for the run on `machine_path`."""
    command = [TESSERA, "plan", model_file(run, cache), "--machine", machine_path,
               *plan_args(run)]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"{run['model']}: {' '.join(command)}\n{result.stderr}")
    plans = json.loads(result.stdout)["plans"]
    if not plans:
        raise RuntimeError(f"{run['model']}: no plan fits ({' '.join(command)})")
    return plans[0]


def measured_step(run):
    """The published step in seconds (from its TFLOP/s where not given)."""
    if run.get("measured_step_seconds"):
        return run["measured_step_seconds"]
    b, s, l, h, v = (run["global_batch"], run["seq"], run["layers"],
                     run["hidden"], run["vocab"])
    tflops = run.get("measured_tflops_per_gpu")
    if is_llama(run):
        # PaLM's model FLOPs per token, N the nominal parameters.
        n = float(run["model"].split("-")[-1].rstrip("B")) * 1e9
        flops = b * s * (6 * n + 12 * l * h * s)
    elif run.get("flops_kind") == "hardware":
        flops = 96 * b * s * l * h * h * (1 + s / (6 * h) + v / (16 * l * h))
    else:
        flops = 72 * b * s * l * h * h * (1 + s / (6 * h) + v / (12 * l * h))
    if tflops is None and run.get("measured_mfu"):
        peak = {"dgx-a100-80gb": 312e12, "dgx-h100": 989e12,
                "h200-cluster": 989e12}[run["machine"]]
        return flops / (run["measured_mfu"] * peak * run["gpus"])
    return flops / (tflops * 1e12 * run["gpus"])


def load_machine(name):
    with open(os.path.join(MACHINES, name + ".json")) as f:
        return json.load(f)


def write_machine(machine, directory):
    """The machine file the runs are priced on: device memory unbounded,
    since the published runs fit their machines and time is what is
    checked here (Tessera's memory estimate may hold a configuration's
    activations over it, as for Llama 3's interleaved schedule)."""
    machine = json.loads(json.dumps(machine))
    machine["device"]["memory_bytes"] = 1e15
    path = os.path.join(directory, machine["name"] + ".json")
    with open(path, "w") as f:
        json.dump(machine, f)
    return path


# --- NCCL all-reduce inside one switched level (CostModel.cpp) -------------
def allreduce_seconds(n, nbytes, bandwidth, latency, call):
    ring = 2 * (n - 1) * latency + 2 * (n - 1) / n * nbytes / bandwidth
    tree = 2 * math.ceil(math.log2(n)) * latency + 2 * nbytes / bandwidth
    return call + min(ring, tree)


def fit_nccl(points):
    """Bandwidth, latency and call cost fitting the bus bandwidths."""
    def loss(p):
        bandwidth, latency, call = p
        total = 0
        for point in points:
            n, nbytes = point["gpus"], point["bytes"]
            measured = nbytes / (point["busbw_gbps"] * 1e9 / (2 * (n - 1) / n))
            total += math.log(allreduce_seconds(n, nbytes, bandwidth, latency,
                                                call) / measured) ** 2
        return total
    grids = [[x * 1e9 for x in range(100, 1001, 10)],
             [x * 1e-7 for x in range(1, 101)],
             [x * 1e-6 for x in range(0, 61)]]
    return coordinate_descent(loss, [450e9, 3e-6, 0.0], grids)


def coordinate_descent(loss, start, grids, rounds=8):
    """Each parameter in turn over its grid; ties keep the value nearest the
    start."""
    best = list(start)
    for _ in range(rounds):
        for i, grid in enumerate(grids):
            best[i] = min(grid, key=lambda x: (
                round(loss(best[:i] + [x] + best[i + 1:]), 12), abs(x - start[i])))
    return best


# --- The step from a breakdown (Planner.cpp's StepBreakdown) ---------------
def terms(plan):
    b = plan["breakdown"]
    compute = b["compute_s"]
    gemm = compute.get("gemm", 0)
    attention = compute.get("attention", 0)
    memory = sum(v for k, v in compute.items() if k not in ("gemm", "attention"))
    pipelined = gemm + attention + memory + b["recompute_s"] + b["launch_s"] + b["tp_exposed_s"]
    return {"gemm": gemm, "attention": attention, "memory": memory,
            "recompute": b["recompute_s"], "tp": b["tp_exposed_s"],
            "bubble_fraction": b["bubble_s"] / pipelined if pipelined else 0,
            "pp": b["pp_exposed_s"], "dp": b["dp_exposed_s"],
            "optimizer": b["optimizer_s"]}


def predicted(t, kernels, p):
    gemm, attention, memory, launch, step = p
    compute = t["gemm"] / gemm + t["attention"] / attention + t["memory"] / memory
    raw = t["gemm"] + t["attention"] + t["memory"]
    recompute = t["recompute"] * compute / raw if raw else 0
    pipelined = compute + recompute + kernels * launch + t["tp"]
    return (pipelined * (1 + t["bubble_fraction"]) + t["pp"] + t["dp"] +
            t["optimizer"] / memory + step)


def fit_machine(name, runs, nccl, cache, directory, fitted):
    machine = load_machine(name)
    points = [p for p in nccl if p["machine"] == name]
    report = {}
    if points:
        bandwidth, latency, call = fit_nccl(points)
        machine["levels"][0]["bandwidth_bytes_per_second"] = bandwidth
        machine["levels"][0]["latency_seconds"] = latency
        machine.setdefault("efficiency", {})["collective_seconds"] = call
        report["nvlink"] = (bandwidth, latency, call)
        for point in points:
            if point["bytes"] in (2 ** 20, 2 ** 26, 2 ** 33):
                n, nbytes = point["gpus"], point["bytes"]
                busbw = nbytes / allreduce_seconds(n, nbytes, bandwidth, latency,
                                                   call) * 2 * (n - 1) / n
                report[f"busbw at {nbytes} B (GB/s)"] = (
                    round(busbw / 1e9, 1), point["busbw_gbps"])
    calibrate = [r for r in runs if r["machine"] == name and
                 r["role"] == "calibrate" and not gaps(r)]
    if not calibrate:
        # The same silicon as a fitted machine: its efficiencies.
        if name in SAME_DEVICE and SAME_DEVICE[name] in fitted:
            source = fitted[SAME_DEVICE[name]]["efficiency"]
            machine.setdefault("efficiency", {}).update(
                {k: v for k, v in source.items() if k != "collective_seconds"})
        return machine, report
    efficiency = machine.setdefault("efficiency", {})
    efficiency.update(gemm=1, attention=1, memory=1, kernel_launch_seconds=0,
                      step_seconds=0)
    raw = write_machine(machine, directory)
    efficiency["kernel_launch_seconds"] = 1e-6
    launch_dir = tempfile.mkdtemp(dir=directory)
    launched = write_machine(machine, launch_dir)
    samples = []
    for run in calibrate:
        base = price(run, raw, cache)
        kernels = (price(run, launched, cache)["breakdown"]["launch_s"]) / 1e-6
        samples.append((terms(base), kernels, measured_step(run)))

    # Fused attention's efficiency is FlashAttention-2's, as published (its
    # runs here are few); a launch is fitted where the runs pin it down.
    attention = FLASH_ATTENTION.get(name, 0.5)
    launch_grid = [x * 5e-7 for x in range(0, 41)] if len(samples) > 3 else [
        LAUNCH_SECONDS]

    def loss(p):
        gemm, memory, launch = p
        return sum(math.log(predicted(t, k, (gemm, attention, memory, launch, 0))
                            / m) ** 2 for t, k, m in samples)
    grids = [[x / 200 for x in range(60, 201)], [x / 200 for x in range(60, 201)],
             launch_grid]
    gemm, memory, launch = coordinate_descent(loss, [0.8, 0.8, launch_grid[0]],
                                              grids)
    step = 0
    efficiency.update(gemm=gemm, attention=attention, memory=memory,
                      kernel_launch_seconds=launch, step_seconds=step)
    report["efficiency"] = (gemm, attention, memory, launch, step)
    return machine, report


def error_table(runs, machine_paths, cache):
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        plans = list(pool.map(
            lambda run: price(run, machine_paths[run["machine"]], cache), runs))
    print(f"{'role':9} {'machine':14} {'model':16} {'gpus':>6} {'tp':>3} {'pp':>3}"
          f" {'dp':>4} {'recompute':>9} {'measured':>9} {'predicted':>9} {'error':>7}"
          f" {'MFU':>6}  gap")
    errors = {}
    for run, plan in zip(runs, plans):
        measured = measured_step(run)
        error = measured / plan["step_time_s"] - 1
        kind = "different program" if gaps(run) else "same program"
        errors.setdefault((run["role"], run["machine"], kind), []).append(error)
        print(f"{run['role']:9} {run['machine']:14} {run['model'][:16]:16}"
              f" {run['gpus']:6} {run['tp']:3} {run['pp']:3} {run['dp']:4}"
              f" {run['recompute']:>9} {measured:9.3f} {plan['step_time_s']:9.3f}"
              f" {100 * error:+6.1f}% {100 * plan['mfu']:5.1f}%  "
              f"{','.join(gaps(run))}")
    print("\ngap: the published program differs from Tessera's:")
    for key, text in GAP_LEGEND.items():
        print(f"  {key}: {text}")
    print("\nerror of predicted throughput (positive: optimistic)")
    for (role, machine, kind), values in sorted(errors.items()):
        mean = sum(abs(e) for e in values) / len(values)
        worst = max(values, key=abs)
        print(f"  {role:9} {machine:14} {kind:17} {len(values):3} runs: mean "
              f"|error| {100 * mean:4.1f}%, worst {100 * worst:+.1f}%")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--fit", action="store_true",
                        help="fit the presets' efficiency and print the fit")
    args = parser.parse_args()
    with open(PUBLISHED) as f:
        published = json.load(f)
    runs = [r for r in published["runs"] if usable(r)]
    machines = sorted({r["machine"] for r in runs} |
                      {p["machine"] for p in published["nccl_allreduce"]})
    with tempfile.TemporaryDirectory() as directory:
        cache = os.path.join(directory, "models")
        os.makedirs(cache)
        presets = tempfile.mkdtemp(dir=directory)
        paths = {name: write_machine(load_machine(name), presets)
                 for name in machines}
        if args.fit:
            fitted = {}
            for name in sorted(machines, key=lambda m: m in SAME_DEVICE):
                machine, report = fit_machine(name, runs, published["nccl_allreduce"],
                                              cache, directory, fitted)
                fitted[name] = machine
                paths[name] = write_machine(machine, tempfile.mkdtemp(dir=directory))
                print(f"{name}: {json.dumps(report)}")
                print(f"  \"efficiency\": {json.dumps(machine.get('efficiency', {}))}")
                print(f"  levels[0]: {json.dumps(machine['levels'][0])}")
        error_table(runs, paths, cache)
    return 0


if __name__ == "__main__":
    sys.exit(main())
