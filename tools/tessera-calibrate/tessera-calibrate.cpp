//===- tessera-calibrate.cpp - Fits a machine file from microbenchmarks ---===//
//
//   mpirun -np N tessera-calibrate OUTPUT.json [--quick]
//
// Measures, on the runtime's own backend and communicator: the GEMM FLOP/s
// of nn.dot over square sizes (peak and half-efficiency size fitted to
// their times), the memory bandwidth
// of a large nn.add, a tiny kernel's time (the cost model's launch), fused
// attention's fraction of the GEMM peak, and all_reduce times over message
// sizes on all ranks,
// fitted to the ring model t = 2(n-1) alpha + 2(n-1)/n S / beta by least
// squares. Rank 0 writes a machine file (machines/*.json schema) with one
// interconnect level of N devices.
//
//===----------------------------------------------------------------------===//

#include "tessera/runtime/Communicator.h"
#include "tessera/runtime/Kernels.h"

#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

using namespace tessera::runtime;

namespace {

double now() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/// The best of `repeats` timings of `run`, in seconds.
template <typename Run> double bestOf(int repeats, Run run) {
  double best = 1e30;
  for (int i = 0; i < repeats; ++i) {
    double start = now();
    run();
    best = std::min(best, now() - start);
  }
  return best;
}

/// A measurement that fails says why and ends the job: a calibration from a
/// failed kernel would be garbage.
void orDie(const Status &status) {
  if (status.ok())
    return;
  std::fprintf(stderr, "tessera-calibrate: error: %s\n",
               status.message().c_str());
  MPI_Abort(MPI_COMM_WORLD, 1);
}

/// Fits t = a + b S over (S, t) by least squares.
std::pair<double, double> fitLine(const std::vector<double> &sizes,
                                  const std::vector<double> &times) {
  double n = sizes.size(), sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    sx += sizes[i];
    sy += times[i];
    sxx += sizes[i] * sizes[i];
    sxy += sizes[i] * times[i];
  }
  double slope = (n * sxy - sx * sy) / (n * sxx - sx * sx);
  double intercept = (sy - slope * sx) / n;
  return {std::max(intercept, 1e-9), std::max(slope, 1e-15)};
}

/// The GEMM peak and the size that reaches half of it: with efficiency
/// f / (f + h), a GEMM of f FLOPs takes (f + h) / peak, a line in f fitted
/// by least squares (one slow large GEMM moves it less than the largest
/// shortfall would).
std::pair<double, double> measureGemm(bool quick) {
  std::vector<double> flops, times;
  KernelAttrs attrs;
  attrs.lists["lhs_batching_dims"] = {};
  attrs.lists["rhs_batching_dims"] = {};
  attrs.lists["lhs_contracting_dims"] = {1};
  attrs.lists["rhs_contracting_dims"] = {0};
  for (int64_t n : quick ? std::vector<int64_t>{32, 128, 256}
                         : std::vector<int64_t>{32, 64, 256, 512, 1024}) {
    OwnedTensor a(DType::F32, {n, n}), b(DType::F32, {n, n}),
        c(DType::F32, {n, n});
    times.push_back(bestOf(3, [&] {
      orDie(runCpuKernel("nn.dot", attrs, {&a.view, &b.view}, {&c.view}));
    }));
    flops.push_back(2.0 * n * n * n);
  }
  auto [intercept, slope] = fitLine(flops, times);
  return {1 / slope, std::max(intercept / slope, 1.0)};
}

double measureMemoryBandwidth(bool quick) {
  int64_t n = quick ? (int64_t(1) << 20) : (int64_t(1) << 24);
  OwnedTensor a(DType::F32, {n}), b(DType::F32, {n}), c(DType::F32, {n});
  double seconds = bestOf(3, [&] {
    orDie(runCpuKernel("nn.add", {}, {&a.view, &b.view}, {&c.view}));
  });
  return 3.0 * n * 4 / seconds;
}

/// What a kernel costs beyond its work: the best time of an nn.add of 16
/// elements.
double measureKernelLaunch() {
  OwnedTensor a(DType::F32, {16}), b(DType::F32, {16}), c(DType::F32, {16});
  return bestOf(200, [&] {
    orDie(runCpuKernel("nn.add", {}, {&a.view, &b.view}, {&c.view}));
  });
}

/// The fraction of the GEMM peak fused attention reaches, forward and
/// backward, as the cost model prices it: nn.attention's FLOPs
/// (CostOpInterface: 2 d + 2 dv + 5 per causal score) and the backward's
/// 2.5 times them, over their time.
double measureAttention(bool quick, double peak) {
  int64_t b = 1, a = 4, s = quick ? 128 : 512, d = 64;
  OwnedTensor q(DType::F32, {b, a, s, d}), k(DType::F32, {b, a, s, d}),
      v(DType::F32, {b, a, s, d}), o(DType::F32, {b, a, s, d}),
      r(DType::F32, {b, a, s, d}), dq(DType::F32, {b, a, s, d}),
      dk(DType::F32, {b, a, s, d}), dv(DType::F32, {b, a, s, d});
  KernelAttrs attrs;
  attrs.floats["scale"] = 0.125;
  attrs.ints["causal"] = 1;
  attrs.floats["dropout"] = 0;
  attrs.ints["zigzag"] = 0;
  double forward = bestOf(3, [&] {
    orDie(runCpuKernel("nn.attention", attrs, {&q.view, &k.view, &v.view},
                       {&o.view}));
  });
  double backward = bestOf(3, [&] {
    orDie(runCpuKernel("nn.attention_grad", attrs,
                       {&q.view, &k.view, &v.view, &o.view, &r.view},
                       {&dq.view, &dk.view, &dv.view}));
  });
  double flops = static_cast<double>(b) * a * s * (s + 1) / 2 * (4 * d + 5);
  return std::min(1.0, 3.5 * flops / (forward + backward) / peak);
}

} // namespace

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  std::string output;
  bool quick = false;
  const char *usage = "usage: tessera-calibrate OUTPUT.json [--quick]\n";
  std::string unknown;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--help") == 0 ||
        std::strcmp(argv[i], "-h") == 0) {
      if (rank == 0)
        std::printf("tessera-calibrate: measures GEMMs, memory bandwidth and "
                    "all_reduce on the ranks it runs on and writes a machine "
                    "file (--quick: fewer sizes)\n%s",
                    usage);
      MPI_Finalize();
      return 0;
    }
    if (std::strcmp(argv[i], "--quick") == 0)
      quick = true;
    else if (argv[i][0] == '-')
      unknown = argv[i];
    else
      output = argv[i];
  }
  if (output.empty() || !unknown.empty()) {
    if (rank == 0) {
      if (!unknown.empty())
        std::fprintf(stderr, "tessera-calibrate: error: unknown option '%s'\n",
                     unknown.c_str());
      std::fprintf(stderr, "%s", usage);
    }
    MPI_Finalize();
    return 2;
  }
  Expected<std::unique_ptr<Communicator>> created =
      createMpiCommunicator(Mesh({"x"}, {size}));
  orDie(created.getStatus());
  std::unique_ptr<Communicator> communicator = created.take();

  auto [flops, halfFlops] = measureGemm(quick);
  double bandwidth = measureMemoryBandwidth(quick);
  double launch = measureKernelLaunch();
  double attention = measureAttention(quick, flops);
  // Every rank measured; the machine is as fast as its slowest rank.
  MPI_Allreduce(MPI_IN_PLACE, &flops, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(MPI_IN_PLACE, &bandwidth, 1, MPI_DOUBLE, MPI_MIN,
                MPI_COMM_WORLD);
  MPI_Allreduce(MPI_IN_PLACE, &launch, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  MPI_Allreduce(MPI_IN_PLACE, &attention, 1, MPI_DOUBLE, MPI_MIN,
                MPI_COMM_WORLD);

  double alpha = 1e-6, beta = 1e9;
  if (size > 1) {
    std::vector<double> sizes, times;
    for (int64_t bytes = 4096; bytes <= (quick ? (1 << 20) : (1 << 24));
         bytes *= 4) {
      OwnedTensor in(DType::F32, {bytes / 4}), out(DType::F32, {bytes / 4});
      double seconds = bestOf(quick ? 3 : 5, [&] {
        MPI_Barrier(MPI_COMM_WORLD);
        orDie(
            communicator->allReduce(in.view, out.view, Reduction::Sum, {"x"}));
      });
      MPI_Allreduce(MPI_IN_PLACE, &seconds, 1, MPI_DOUBLE, MPI_MAX,
                    MPI_COMM_WORLD);
      sizes.push_back(bytes);
      times.push_back(seconds);
    }
    auto [intercept, slope] = fitLine(sizes, times);
    double n = size;
    alpha = intercept / (2 * (n - 1));
    beta = 2 * (n - 1) / (n * slope);
  }

  if (rank == 0) {
    char host[256] = "unknown";
    gethostname(host, sizeof(host) - 1);
    long pages = sysconf(_SC_PHYS_PAGES), pageSize = sysconf(_SC_PAGE_SIZE);
    double memory = static_cast<double>(pages) * pageSize / size;
    std::ofstream file(output);
    file << "{\n"
         << "  \"name\": \"calibrated-cpu\",\n"
         << "  \"description\": \"CPU ranks of " << host
         << " as measured by tessera calibrate (" << size << " ranks)\",\n"
         << "  \"sources\": [\"tessera calibrate: nn.dot GEMMs, a large "
            "nn.add, a 16-element nn.add (a kernel's fixed cost), "
            "nn.attention and its gradient, and MPI all_reduce over message "
            "sizes, fitted to the ring model\"],\n"
         << "  \"device\": {\n"
         << "    \"name\": \"CPU rank (OpenBLAS)\",\n"
         << "    \"peak_flops_per_second\": {\"fp32\": " << flops
         << ", \"bf16\": " << flops << "},\n"
         << "    \"memory_bytes\": " << memory << ",\n"
         << "    \"memory_bandwidth_bytes_per_second\": " << bandwidth << ",\n"
         << "    \"gemm_half_efficiency_flops\": " << halfFlops << "\n"
         << "  },\n"
         << "  \"efficiency\": {\"gemm\": 1, \"memory\": 1, "
            "\"attention\": "
         << attention << ", \"kernel_launch_seconds\": " << launch << "},\n"
         << "  \"levels\": [\n"
         << "    {\"name\": \"mpi\", \"devices\": " << std::max(size, 2)
         << ", \"bandwidth_bytes_per_second\": " << beta
         << ", \"latency_seconds\": " << alpha << "}\n"
         << "  ]\n"
         << "}\n";
    std::printf("calibrate: %d ranks: GEMM %.1f GFLOP/s, memory %.1f GB/s, "
                "attention at %.0f%% of the GEMM peak, kernel %.2f us, "
                "all_reduce alpha %.2f us, beta %.2f GB/s -> %s\n",
                size, flops / 1e9, bandwidth / 1e9, 100 * attention,
                launch * 1e6, alpha * 1e6, beta / 1e9, output.c_str());
  }
  communicator.reset();
  MPI_Finalize();
  return 0;
}
