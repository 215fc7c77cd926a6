//===- GpuFusedBench.cpp - nn.fused on a GPU against its memory bandwidth -===//
//
// Run: build/bin/tessera-bench-gpu-fused [--peak-bandwidth BYTES_PER_S]
// The CUDA device's fused elementwise kernels on 64M f32 elements: the GELU
// gradient (23 ops, reading x and dy, writing one result) as one nn.fused
// kernel and as its 23 kernels, and the MLP's bias add and GELU (both
// results written). Prints the time, the bytes the kernel must move over
// that time (inputs read once, results written once), and the share of the
// datasheet bandwidth when one is given (bench/gpu-check.sh passes the
// H100/H200 figures of machines/). A fused kernel should reach most of it;
// the unfused column shows what fusion saves.
//
//===----------------------------------------------------------------------===//

#include "GeluGradient.h"

#include "tessera/runtime/Device.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

using namespace tessera::runtime;

namespace {

constexpr int64_t kRows = 1 << 16, kCols = 1 << 10;

int fail(const std::string &message) {
  std::fprintf(stderr, "tessera-bench-gpu-fused: error: %s\n", message.c_str());
  return 1;
}

/// Device tensors of one arena, given back when the bench ends.
class Buffers {
public:
  explicit Buffers(Device &device) : device(device) {}
  ~Buffers() {
    for (void *data : allocated)
      device.deallocate(data);
  }
  /// A tensor of `shape`, filled with values in [-4, 4].
  Status make(std::vector<int64_t> shape, Tensor &tensor) {
    tensor = Tensor{DType::F32, std::move(shape), nullptr};
    if (Status status = device.allocate(tensor.getBytes(), tensor.data);
        !status.ok())
      return status;
    allocated.push_back(tensor.data);
    std::vector<float> values(tensor.getNumElements());
    for (size_t i = 0; i < values.size(); ++i)
      values[i] = 0.001f * static_cast<float>(i % 8000) - 4.0f;
    return device.copyToDevice(tensor.data, values.data(), tensor.getBytes());
  }

private:
  Device &device;
  std::vector<void *> allocated;
};

/// Seconds per run of `run` (after two warm-up runs), over ten runs.
double timeRuns(Device &device, const std::function<Status()> &run,
                std::string &error) {
  auto once = [&] {
    if (error.empty())
      error = run().message();
  };
  once();
  once();
  if (error.empty())
    error = device.synchronize().message();
  auto begin = std::chrono::steady_clock::now();
  for (int i = 0; i < 10; ++i)
    once();
  if (error.empty())
    error = device.synchronize().message();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - begin)
             .count() /
         10;
}

} // namespace

int main(int argc, char **argv) {
  double peak = 0;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--peak-bandwidth") && i + 1 < argc)
      peak = std::atof(argv[++i]);
    else
      return fail(std::string("unknown option '") + argv[i] + "'");
  }
  Expected<std::unique_ptr<Device>> created = createCudaDevice(0);
  if (!created.ok())
    return fail(created.message());
  std::unique_ptr<Device> device = created.take();
  Buffers buffers(*device);
  std::string error;
  auto check = [&](Status status) {
    if (error.empty())
      error = status.message();
    return error.empty();
  };

  Tensor x, dy, y, bias, pre, post;
  if (!check(buffers.make({kRows, kCols}, x)) ||
      !check(buffers.make({kRows, kCols}, dy)) ||
      !check(buffers.make({kRows, kCols}, y)) ||
      !check(buffers.make({kCols}, bias)) ||
      !check(buffers.make({kRows, kCols}, pre)) ||
      !check(buffers.make({kRows, kCols}, post)))
    return fail(error);

  // The GELU gradient, fused and as its 23 kernels (each value in memory).
  KernelAttrs gelu;
  gelu.fusedSteps = makeGeluGradient();
  gelu.fusedResults = {static_cast<int64_t>(gelu.fusedSteps.size()) + 1};
  std::vector<Tensor> values = {x, dy};
  for (size_t i = 0; i < gelu.fusedSteps.size(); ++i) {
    values.emplace_back();
    if (!check(buffers.make({kRows, kCols}, values.back())))
      return fail(error);
  }
  double fused = timeRuns(
      *device,
      [&] {
        return device->runKernel("nn.fused", gelu, {&x, &dy}, {&y});
      },
      error);
  double unfused = timeRuns(
      *device,
      [&] {
        for (size_t i = 0; i < gelu.fusedSteps.size(); ++i) {
          const FusedStep &step = gelu.fusedSteps[i];
          std::vector<const Tensor *> inputs;
          for (int64_t operand : step.operands)
            inputs.push_back(&values[operand]);
          if (Status status = device->runKernel(step.op, step.attrs, inputs,
                                                {&values[i + 2]});
              !status.ok())
            return status;
        }
        return Status::success();
      },
      error);

  // The MLP's bias add and GELU: the bias read through a broadcast, the
  // sum and its GELU both written.
  KernelAttrs biasGelu;
  FusedStep broadcast{"nn.broadcast", {1}, {}, DType::F32};
  broadcast.attrs.lists["dims"] = {1};
  biasGelu.fusedSteps = {broadcast, FusedStep{"nn.add", {0, 2}, {}, DType::F32},
                         FusedStep{"nn.gelu", {3}, {}, DType::F32}};
  biasGelu.fusedResults = {3, 4};
  double biasFused = timeRuns(
      *device,
      [&] {
        return device->runKernel("nn.fused", biasGelu, {&x, &bias},
                                 {&pre, &post});
      },
      error);
  if (!error.empty())
    return fail(error);

  double elementBytes = 4.0 * kRows * kCols;
  std::printf("%-24s %10s %10s %9s\n", "kernel (64M f32)", "time (ms)", "GB/s",
              "of peak");
  auto row = [&](const char *name, double seconds, double bytes) {
    char share[16] = "-";
    if (peak > 0)
      std::snprintf(share, sizeof(share), "%.1f%%",
                    100 * bytes / seconds / peak);
    std::printf("%-24s %10.3f %10.1f %9s\n", name, seconds * 1e3,
                bytes / seconds / 1e9, share);
  };
  // Fused: x and dy read, the result written. Unfused: the same useful
  // bytes over the 23 kernels' time (each reads and writes its values).
  row("GELU gradient, fused", fused, 3 * elementBytes);
  row("GELU gradient, 23 ops", unfused, 3 * elementBytes);
  row("bias add + GELU, fused", biasFused, 3 * elementBytes);
  std::printf("fusion saves %.1fx on the GELU gradient\n", unfused / fused);
  return 0;
}
