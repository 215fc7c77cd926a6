//===- MachineModel.h - Clusters as the cost model sees them -----*- C++
//-*-===//
//
// A machine file (machines/<name>.json) describes a cluster: its devices'
// peak FLOP/s per dtype, memory and bandwidth, and its interconnect either
// as switched levels (NVLink inside a node, InfiniBand across nodes) or as a
// torus without switches.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_ANALYSIS_MACHINEMODEL_H
#define TESSERA_ANALYSIS_MACHINEMODEL_H

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Error.h"

#include <string>

namespace tessera {

/// One level of a switched interconnect: groups of `devices` consecutive
/// devices share it; each device moves `bandwidthBytesPerSecond` each way.
struct InterconnectLevel {
  std::string name;
  int64_t devices = 1;
  double bandwidthBytesPerSecond = 0;
  double latencySeconds = 0;
};

/// A torus: devices are row-major over `dims`; each device has one link to
/// each neighbour along each dim (wrap-around included).
struct Torus {
  llvm::SmallVector<int64_t> dims;
  double linkBandwidthBytesPerSecond = 0;
  double hopLatencySeconds = 0;
};

/// What a device reaches of its peaks, and the fixed costs a step pays: the
/// parameters a machine file's "efficiency" object fits to measured runs
/// (bench/costmodel/fit.py), these defaults where it gives none.
struct Efficiency {
  /// The fraction of the dense peak the largest GEMMs reach.
  double gemm = 0.8;
  /// The output tile a GEMM kernel computes ([m, n]) and how many tiles run
  /// at once (streaming multiprocessors): a GEMM of too few tiles for a
  /// whole last wave idles the rest (0 units: no such quantization).
  int64_t tileM = 128, tileN = 128, computeUnits = 0;
  /// The fraction of the dense peak fused attention (FlashAttention)
  /// reaches, forward and backward.
  double attention = 0.8;
  /// The fraction of the memory bandwidth a memory-bound kernel reaches.
  double memory = 1;
  /// Fixed costs: a kernel's launch, a collective's call (on top of its
  /// alpha-beta time) and a training step's own (the host's work between
  /// steps: the data loader, the loss's read-back, the optimizer's launch).
  double kernelLaunchSeconds = 0, collectiveSeconds = 0, stepSeconds = 0;
};

struct MachineModel {
  std::string name;
  std::string description;
  llvm::SmallVector<std::string> sources;
  std::string deviceName;
  /// Dense peak per dtype ("bf16", "fp16", "fp32", "tf32", "fp8").
  llvm::StringMap<double> peakFlopsPerSecond;
  double memoryBytes = 0;
  double memoryBandwidthBytesPerSecond = 0;
  /// The GEMM size (FLOPs) that reaches half of peak (getGemmEfficiency);
  /// optional in the file ("gemm_half_efficiency_flops").
  double gemmHalfEfficiencyFlops = 2e9;
  Efficiency efficiency;
  /// Switched levels, innermost first; empty for a torus.
  llvm::SmallVector<InterconnectLevel> levels;
  std::optional<Torus> torus;

  /// The peak for a dtype. A dtype the machine gives no peak for (an fp32
  /// plan on a machine file that lists only tensor-core peaks) gets the
  /// slowest peak it gives, so that no plan's compute is priced as free;
  /// fails only when the machine gives no peak at all (a machine file
  /// always gives one).
  llvm::Expected<double> getPeakFlops(llvm::StringRef dtype) const;
  /// The largest number of devices the interconnect describes (0: any).
  int64_t getMaxDevices() const;
};

/// Parses and checks a machine file's text: every number finite and within
/// physical bounds (a peak from 1e6 to 1e18 FLOP/s, a bandwidth from 1e6 to
/// 1e15 bytes/s, a latency from 1e-12 to 1 s, ...), at most 2^20 devices.
/// The error names the field by its JSON path and the bound it breaks.
llvm::Expected<MachineModel> parseMachineModel(llvm::StringRef json);
/// The file loadMachineModel reads: `nameOrPath` where it exists, else
/// `<name>.json` under `machinesDir`.
std::string getMachineFilePath(llvm::StringRef nameOrPath,
                               llvm::StringRef machinesDir);
/// Reads `path`, or `machines/<name>.json` under `machinesDir`.
llvm::Expected<MachineModel> loadMachineModel(llvm::StringRef nameOrPath,
                                              llvm::StringRef machinesDir);

/// The machine presets' directory: `share/tessera/machines` beside the
/// running binary's directory (an installed Tessera, wherever it was moved),
/// else the source tree's `machines` the build was configured from.
std::string getMachinesDir();

} // namespace tessera

#endif // TESSERA_ANALYSIS_MACHINEMODEL_H
