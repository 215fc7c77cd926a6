//===- MachineModel.cpp - Clusters as the cost model sees them ------------===//

#include "tessera/Analysis/MachineModel.h"
#include "dialects/Dist/IR/DistOps.h"
#include "tessera/Support/Nesting.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>

using namespace tessera;
namespace json = llvm::json;

static llvm::Error fieldError(const llvm::Twine &field,
                              const llvm::Twine &message) {
  return llvm::createStringError("machine field '" + field + "' " + message);
}

namespace {

/// The range a machine file's number must lie in, and the unit its error
/// names.
struct NumberRange {
  double lowest, highest;
  const char *unit;
};

} // namespace

// Generous physical bounds: every preset lies well inside them (and a file
// of `tessera calibrate`, whose CPU ranks show 5e-10 s of MPI latency), and
// a number outside is a typo or a slip of unit, not a device. They keep
// every time the cost model derives from a machine finite, so that no plan
// is ranked on an infinite or NaN step; the ILP's objective is scaled
// where its costs still grow past what CBC solves (see Solver.h).
/// A device's dense peak: from a 1980s CPU to 400 times a B200's.
static constexpr NumberRange kPeakFlopsPerSecond = {1e6, 1e18, " FLOP/s"};
/// A device's memory: from a kilobyte (tests shrink it to force a pipeline)
/// to a petabyte.
static constexpr NumberRange kMemoryBytes = {1e3, 1e15, " bytes"};
/// A bandwidth, of memory or of a link: a megabyte to a petabyte a second.
static constexpr NumberRange kBandwidth = {1e6, 1e15, " bytes/s"};
/// A latency, of a level or a torus hop: a picosecond to a second.
static constexpr NumberRange kLatency = {1e-12, 1, " s"};
/// The GEMM size that reaches half of peak.
static constexpr NumberRange kGemmHalfEfficiency = {1, 1e18, " FLOPs"};
/// The fraction of a peak a kernel reaches.
static constexpr NumberRange kFractionOfPeak = {1e-3, 1,
                                                " (a fraction of peak)"};
/// A fixed cost a kernel, a collective or a step pays: none to an hour.
static constexpr NumberRange kFixedSeconds = {0, 3600, " s"};

/// A number as %g writes it: 1e+308, 5e-10, inf.
static std::string formatNumber(double value) {
  std::string text;
  llvm::raw_string_ostream(text) << llvm::format("%g", value);
  return text;
}

/// What a number in `range` must be, for an error.
static std::string describe(const NumberRange &range) {
  return "a number from " + formatNumber(range.lowest) + " to " +
         formatNumber(range.highest) + range.unit;
}

/// Checks the number at `path` against `range`. Infinity (JSON's 1e999)
/// and denormals, which lie outside every range but fixed costs', are
/// refused too.
static llvm::Error checkInRange(double value, const llvm::Twine &path,
                                const NumberRange &range) {
  bool denormal = std::fpclassify(value) == FP_SUBNORMAL;
  if (std::isfinite(value) && !denormal && value >= range.lowest &&
      value <= range.highest)
    return llvm::Error::success();
  return fieldError(path, "must be " + describe(range) + ", got " +
                              formatNumber(value) +
                              (denormal ? " (a denormal)" : ""));
}

/// The number at `key` of `object` (at `where` in the file), in `range`.
static llvm::Expected<double> getNumber(const json::Object &object,
                                        llvm::StringRef key,
                                        const llvm::Twine &where,
                                        const NumberRange &range) {
  std::optional<double> value = object.getNumber(key);
  if (!value)
    return fieldError(where + key, "must be " + describe(range));
  if (llvm::Error error = checkInRange(*value, where + key, range))
    return std::move(error);
  return *value;
}

/// The optional number at `key` of `object` into `to` (left as it is when
/// absent), in `range`.
static llvm::Error getOptionalNumber(const json::Object &object,
                                     llvm::StringRef key,
                                     const llvm::Twine &where,
                                     const NumberRange &range, double &to) {
  if (!object.get(key))
    return llvm::Error::success();
  llvm::Expected<double> value = getNumber(object, key, where, range);
  if (!value)
    return value.takeError();
  to = *value;
  return llvm::Error::success();
}

/// The optional "efficiency" object (see Efficiency).
static llvm::Error parseEfficiency(const json::Object &object,
                                   Efficiency &efficiency) {
  static constexpr llvm::StringLiteral kFields[] = {"gemm",
                                                    "gemm_tile",
                                                    "compute_units",
                                                    "attention",
                                                    "memory",
                                                    "kernel_launch_seconds",
                                                    "collective_seconds",
                                                    "step_seconds"};
  for (const auto &entry : object)
    if (!llvm::is_contained(kFields, llvm::StringRef(entry.first)))
      return fieldError("efficiency." + llvm::StringRef(entry.first),
                        "is not a known field");
  for (auto [key, to] : {std::pair{"gemm", &efficiency.gemm},
                         {"attention", &efficiency.attention},
                         {"memory", &efficiency.memory}}) {
    if (llvm::Error error =
            getOptionalNumber(object, key, "efficiency.", kFractionOfPeak, *to))
      return error;
  }
  for (auto [key, to] :
       {std::pair{"kernel_launch_seconds", &efficiency.kernelLaunchSeconds},
        {"collective_seconds", &efficiency.collectiveSeconds},
        {"step_seconds", &efficiency.stepSeconds}}) {
    if (llvm::Error error =
            getOptionalNumber(object, key, "efficiency.", kFixedSeconds, *to))
      return error;
  }
  if (object.get("gemm_tile")) {
    const json::Array *tile = object.getArray("gemm_tile");
    std::optional<int64_t> m, n;
    if (tile && tile->size() == 2)
      m = (*tile)[0].getAsInteger(), n = (*tile)[1].getAsInteger();
    if (!m || !n || *m < 1 || *n < 1 || *m > 4096 || *n > 4096)
      return fieldError("efficiency.gemm_tile",
                        "must be [m, n], each from 1 to 4096");
    efficiency.tileM = *m;
    efficiency.tileN = *n;
  }
  if (object.get("compute_units")) {
    std::optional<int64_t> units = object.getInteger("compute_units");
    if (!units || *units < 0 || *units > (1 << 20))
      return fieldError("efficiency.compute_units",
                        "must be an integer from 0 to 2^20");
    efficiency.computeUnits = *units;
  }
  return llvm::Error::success();
}

llvm::Expected<double> MachineModel::getPeakFlops(llvm::StringRef dtype) const {
  auto it = peakFlopsPerSecond.find(dtype);
  if (it != peakFlopsPerSecond.end())
    return it->second;
  // A dtype the file gives no peak for is priced at the slowest peak it
  // gives: never free (a plan's compute priced at zero time), and never
  // faster than a dtype the file names.
  auto slowest =
      llvm::min_element(peakFlopsPerSecond, [](const auto &a, const auto &b) {
        return a.second < b.second;
      });
  if (slowest != peakFlopsPerSecond.end())
    return slowest->second;
  return llvm::createStringError("machine '" + name + "' has no peak for '" +
                                 dtype + "', nor for any other dtype");
}

int64_t MachineModel::getMaxDevices() const {
  if (torus) {
    int64_t devices = 1;
    for (int64_t size : torus->dims)
      devices *= size;
    return devices;
  }
  return levels.empty() ? 1 : levels.back().devices;
}

/// The "device" object: its name, peaks, memory and bandwidth.
static llvm::Error parseDevice(const json::Object &device,
                               MachineModel &machine) {
  std::optional<llvm::StringRef> name = device.getString("name");
  if (!name || name->empty())
    return fieldError("device.name", "must be a non-empty string");
  machine.deviceName = name->str();
  const json::Object *peaks = device.getObject("peak_flops_per_second");
  if (!peaks || peaks->empty())
    return fieldError("device.peak_flops_per_second",
                      "must map dtypes to FLOP/s");
  for (const auto &[dtype, value] : *peaks) {
    std::string path = "device.peak_flops_per_second." + dtype.str();
    std::optional<double> flops = value.getAsNumber();
    if (!flops)
      return fieldError(path, "must be " + describe(kPeakFlopsPerSecond));
    if (llvm::Error error = checkInRange(*flops, path, kPeakFlopsPerSecond))
      return error;
    machine.peakFlopsPerSecond[dtype.str()] = *flops;
  }
  llvm::Expected<double> memory =
      getNumber(device, "memory_bytes", "device.", kMemoryBytes);
  if (!memory)
    return memory.takeError();
  machine.memoryBytes = *memory;
  llvm::Expected<double> bandwidth = getNumber(
      device, "memory_bandwidth_bytes_per_second", "device.", kBandwidth);
  if (!bandwidth)
    return bandwidth.takeError();
  machine.memoryBandwidthBytesPerSecond = *bandwidth;
  return getOptionalNumber(device, "gemm_half_efficiency_flops", "device.",
                           kGemmHalfEfficiency,
                           machine.gemmHalfEfficiencyFlops);
}

/// The "levels" array of a switched interconnect, innermost first.
static llvm::Error parseLevels(const json::Array &levels,
                               MachineModel &machine) {
  int64_t previous = 1;
  for (auto [index, value] : llvm::enumerate(levels)) {
    std::string where = "levels[" + std::to_string(index) + "].";
    const json::Object *level = value.getAsObject();
    if (!level)
      return fieldError(where, "must be an object");
    InterconnectLevel parsedLevel;
    std::optional<llvm::StringRef> name = level->getString("name");
    if (!name || name->empty())
      return fieldError(where + "name", "must be a non-empty string");
    parsedLevel.name = name->str();
    std::optional<int64_t> devices = level->getInteger("devices");
    if (!devices || *devices <= previous || *devices % previous != 0)
      return fieldError(where + "devices",
                        "must be a multiple of the level inside it (" +
                            llvm::Twine(previous) + "), larger than it");
    if (*devices > dist::kMaxDevices)
      return fieldError(where + "devices",
                        llvm::formatv("must be at most {0} (2^20), the most "
                                      "a plan runs on, got {1}",
                                      dist::kMaxDevices, *devices)
                            .str());
    parsedLevel.devices = previous = *devices;
    llvm::Expected<double> bandwidth =
        getNumber(*level, "bandwidth_bytes_per_second", where, kBandwidth);
    if (!bandwidth)
      return bandwidth.takeError();
    parsedLevel.bandwidthBytesPerSecond = *bandwidth;
    llvm::Expected<double> latency =
        getNumber(*level, "latency_seconds", where, kLatency);
    if (!latency)
      return latency.takeError();
    parsedLevel.latencySeconds = *latency;
    machine.levels.push_back(parsedLevel);
  }
  if (machine.levels.empty())
    return fieldError("levels", "must not be empty");
  return llvm::Error::success();
}

/// The "torus" object of an interconnect without switches.
static llvm::Error parseTorus(const json::Object &torus,
                              MachineModel &machine) {
  Torus parsedTorus;
  const json::Array *dims = torus.getArray("dims");
  if (!dims || dims->empty())
    return fieldError("torus.dims", "must list the torus dimensions");
  // Checked as the product grows, so that it cannot overflow.
  int64_t devices = 1;
  for (const json::Value &dim : *dims) {
    std::optional<int64_t> size = dim.getAsInteger();
    if (!size || *size < 1)
      return fieldError("torus.dims", "must hold positive integers");
    if (*size > dist::kMaxDevices / devices)
      return fieldError("torus.dims",
                        llvm::formatv("must multiply to at most {0} devices "
                                      "(2^20), the most a plan runs on",
                                      dist::kMaxDevices)
                            .str());
    devices *= *size;
    parsedTorus.dims.push_back(*size);
  }
  llvm::Expected<double> link =
      getNumber(torus, "link_bandwidth_bytes_per_second", "torus.", kBandwidth);
  if (!link)
    return link.takeError();
  parsedTorus.linkBandwidthBytesPerSecond = *link;
  llvm::Expected<double> hop =
      getNumber(torus, "hop_latency_seconds", "torus.", kLatency);
  if (!hop)
    return hop.takeError();
  parsedTorus.hopLatencySeconds = *hop;
  machine.torus = parsedTorus;
  return llvm::Error::success();
}

llvm::Expected<MachineModel> tessera::parseMachineModel(llvm::StringRef text) {
  // llvm::json recurses per level: a file nested thousands deep would
  // overflow its stack.
  if (std::optional<size_t> deep = findNestingOverflow(text, kMaxNestingDepth))
    return llvm::createStringError(llvm::formatv(
        "machine file is nested deeper than {0} levels (at byte {1})",
        kMaxNestingDepth, *deep));
  llvm::Expected<json::Value> parsed = json::parse(text);
  if (!parsed)
    return llvm::createStringError("machine file is not JSON: " +
                                   llvm::toString(parsed.takeError()));
  const json::Object *root = parsed->getAsObject();
  if (!root)
    return llvm::createStringError("machine file must hold a JSON object");
  MachineModel machine;
  std::optional<llvm::StringRef> name = root->getString("name");
  if (!name || name->empty())
    return fieldError("name", "must be a non-empty string");
  machine.name = name->str();
  if (std::optional<llvm::StringRef> text = root->getString("description"))
    machine.description = text->str();
  const json::Array *sources = root->getArray("sources");
  if (!sources || sources->empty())
    return fieldError("sources", "must list where the numbers come from");
  for (const json::Value &source : *sources) {
    std::optional<llvm::StringRef> text = source.getAsString();
    if (!text)
      return fieldError("sources", "must hold strings");
    machine.sources.push_back(text->str());
  }

  const json::Object *device = root->getObject("device");
  if (!device)
    return fieldError("device", "must be an object");
  if (llvm::Error error = parseDevice(*device, machine))
    return std::move(error);

  if (root->get("efficiency")) {
    const json::Object *efficiency = root->getObject("efficiency");
    if (!efficiency)
      return fieldError("efficiency", "must be an object");
    if (llvm::Error error = parseEfficiency(*efficiency, machine.efficiency))
      return std::move(error);
  }

  const json::Array *levels = root->getArray("levels");
  const json::Object *torus = root->getObject("torus");
  if ((levels != nullptr) == (torus != nullptr))
    return fieldError("levels", "or 'torus' must be given, and not both");
  if (llvm::Error error =
          levels ? parseLevels(*levels, machine) : parseTorus(*torus, machine))
    return std::move(error);
  return machine;
}

std::string tessera::getMachineFilePath(llvm::StringRef nameOrPath,
                                        llvm::StringRef machinesDir) {
  if (llvm::sys::fs::exists(nameOrPath))
    return nameOrPath.str();
  llvm::SmallString<256> path(machinesDir);
  llvm::sys::path::append(path, nameOrPath + ".json");
  return std::string(path);
}

llvm::Expected<MachineModel>
tessera::loadMachineModel(llvm::StringRef nameOrPath,
                          llvm::StringRef machinesDir) {
  std::string path = getMachineFilePath(nameOrPath, machinesDir);
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> file =
      llvm::MemoryBuffer::getFile(path);
  if (!file)
    return llvm::createStringError("no machine '" + nameOrPath +
                                   "' (looked for " + path + ")");
  llvm::Expected<MachineModel> machine =
      parseMachineModel((*file)->getBuffer());
  if (!machine)
    return llvm::createStringError(path + ": " +
                                   llvm::toString(machine.takeError()));
  return machine;
}

std::string tessera::getMachinesDir() {
  llvm::SmallString<256> installed;
  if (!llvm::sys::fs::real_path("/proc/self/exe", installed)) {
    llvm::sys::path::remove_filename(installed); // .../bin
    llvm::sys::path::remove_filename(installed); // the prefix
    llvm::sys::path::append(installed, "share", "tessera", "machines");
    if (llvm::sys::fs::is_directory(installed))
      return std::string(installed);
  }
  return TESSERA_MACHINES_DIR;
}
