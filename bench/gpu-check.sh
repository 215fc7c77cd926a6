#!/usr/bin/env bash
# The CUDA backend on one GPU (H100/H200; A100 works too), in under 8
# minutes on a 16-core machine:
#   1. builds (scripts/setup.sh on every core; CUDA is found and built);
#   2. checks every GPU kernel against the CPU backend on random inputs,
#      with tolerances per dtype (the CudaKernelsTest gtests);
#   3. runs the small GPT's train step on the GPU and matches the CPU
#      reference's losses and results (tessera verify --device cuda, and
#      lit's GPU tests);
#   4. prints GEMM TFLOP/s of nn.dot against cuBLAS alone and the
#      datasheet peak (machines/), the fused elementwise kernels' bandwidth
#      against the datasheet's, and a bf16 GPT train step's MFU;
#   5. times fused against unfused attention in a bf16 GPT train step.
# Every step runs even when an earlier one fails; the exit status says
# whether all passed.
set -uo pipefail
cd "$(dirname "$0")/.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OPENBLAS_NUM_THREADS=1
begin=$SECONDS
failed=()
step() { echo; echo "== $1 (at $((SECONDS - begin)) s)"; }
check() { # check NAME COMMAND...: runs it, records a failure
  local name=$1; shift
  "$@" || failed+=("$name")
}

step "GPU"
if ! nvidia-smi --query-gpu=name,memory.total,driver_version \
    --format=csv,noheader; then
  echo "gpu-check: no GPU visible (nvidia-smi failed)"
  exit 1
fi
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)
case "$gpu" in
  *H200*) machine=machines/h200-cluster.json ;;
  *H100*) machine=machines/dgx-h100.json ;;
  *A100*) machine=machines/dgx-a100-80gb.json ;;
  *) machine="" ;;
esac
peak() { # peak DTYPE: the datasheet FLOP/s of this GPU, or 0
  [ -n "$machine" ] || { echo 0; return; }
  python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["device"]["peak_flops_per_second"][sys.argv[2]])' \
    "$machine" "$1" 2>/dev/null || echo 0
}
peak_bf16=$(peak bf16)
peak_fp32=$(peak fp32)
peak_bandwidth=0
[ -n "$machine" ] && peak_bandwidth=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["device"]["memory_bandwidth_bytes_per_second"])' \
  "$machine" 2>/dev/null || echo 0)
echo "datasheet peak: bf16 $peak_bf16, fp32 $peak_fp32 FLOP/s, memory $peak_bandwidth B/s (${machine:-unknown GPU})"

step "build"
if ! TESSERA_BUILD_JOBS=$(nproc) bash scripts/setup.sh > /tmp/gpu-check-build.log 2>&1; then
  tail -n 40 /tmp/gpu-check-build.log
  echo "gpu-check: the build failed (log: /tmp/gpu-check-build.log)"
  exit 1
fi
if ! grep -q "^TESSERA_ENABLE_CUDA:BOOL=ON" build/CMakeCache.txt; then
  echo "gpu-check: the build has no CUDA backend (nvcc, cuBLAS or NCCL missing)"
  exit 1
fi
echo "built in $((SECONDS - begin)) s"

step "every GPU kernel against the CPU backend"
check kernels build/bin/TesseraRuntimeUnitTests \
  --gtest_filter='CudaKernelsTest.*:CheckKernelTest.*' --gtest_brief=1

step "the small GPT's train step: GPU against the CPU reference"
check verify build/bin/tessera verify examples/gpt_small.mlir --mesh dp=1,tp=1 \
  --train adamw --lr 0.01 --steps 10 --device cuda --tolerance 1e-4
check lit /usr/lib/llvm-22/bin/lit -v build/test --filter 'gpu'

step "GEMM: nn.dot against cuBLAS alone"
check gemm build/bin/tessera-bench-gpu-gemm --peak-bf16 "$peak_bf16" \
  --peak-fp32 "$peak_fp32"

step "fused elementwise kernels against the memory bandwidth"
check fused build/bin/tessera-bench-gpu-fused --peak-bandwidth "$peak_bandwidth"

step "MFU of a bf16 GPT train step (4 layers, hidden 1024, seq 512, batch 8)"
work=$(mktemp -d)
mfu() {
  build/bin/tessera model gpt --layers 4 --hidden 1024 --heads 16 --seq 512 \
    --vocab 8192 --batch 8 --sharding megatron --dtype bf16 -o "$work/gpt.mlir" &&
  build/bin/tessera compile "$work/gpt.mlir" --mesh dp=1,tp=1 --train adamw \
    --precision mixed -o "$work/gpt.plan" &&
  build/bin/tessera stats "$work/gpt.mlir" > "$work/stats.txt" &&
  build/bin/tessera-run "$work/gpt.plan" --steps 10 --device cuda --time \
    > "$work/run.txt" || return 1
  local flops ms
  flops=$(awk '$1 == "total" {print $3}' "$work/stats.txt")
  ms=$(awk '/^time:/ {print $2}' "$work/run.txt")
  tail -n 3 "$work/run.txt"
  # A train step does the forward's FLOPs three times (forward, and twice
  # that in the backward).
  python3 -c 'import sys
flops, ms, peak = float(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
achieved = 3 * flops / (ms / 1e3)
print(f"forward {flops:.3e} FLOP, step {ms:.2f} ms: {achieved / 1e12:.1f} TFLOP/s"
      + (f", MFU {100 * achieved / peak:.1f}% of {peak / 1e12:.0f} TFLOP/s" if peak > 0 else ""))' \
    "$flops" "$ms" "$peak_bf16"
}
check mfu mfu
rm -rf "$work"

step "fused against unfused attention: bf16 GPT train step (seq 2048, 4096)"
check attention python3 bench/attention/fused_vs_unfused.py --device cuda \
  --dtype bf16 --layers 2 --hidden 1024 --heads 16 --seqs 2048 4096 \
  --batch 2 --vocab 8192 --steps 5 --runs 2

step "done in $((SECONDS - begin)) s"
if [ ${#failed[@]} -gt 0 ]; then
  echo "gpu-check: FAILED: ${failed[*]}"
  exit 1
fi
echo "gpu-check: PASS"
