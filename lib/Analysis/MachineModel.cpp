//===- MachineModel.cpp - Clusters as the cost model sees them ------------===//

#include "tessera/Analysis/MachineModel.h"
#include "tessera/Support/Nesting.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

using namespace tessera;
namespace json = llvm::json;

static llvm::Error fieldError(const llvm::Twine &field,
                              const llvm::Twine &message) {
  return llvm::createStringError("machine field '" + field + "' " + message);
}

/// A positive number at `key` of `object`.
static llvm::Expected<double> getPositive(const json::Object &object,
                                          llvm::StringRef key,
                                          const llvm::Twine &where) {
  std::optional<double> value = object.getNumber(key);
  if (!value)
    return fieldError(where + key, "must be a number");
  if (!(*value > 0))
    return fieldError(where + key,
                      "must be positive, got " + llvm::formatv("{0}", *value));
  return *value;
}

/// A number at `key` of `object` that `valid` accepts (left as it is when
/// absent); `expected` says what it must be.
static llvm::Error getChecked(const json::Object &object, llvm::StringRef key,
                              llvm::function_ref<bool(double)> valid,
                              llvm::StringRef expected, double &to) {
  if (!object.get(key))
    return llvm::Error::success();
  std::optional<double> value = object.getNumber(key);
  if (!value || !valid(*value))
    return fieldError("efficiency." + key, "must be " + expected);
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
  auto isFraction = [](double value) { return value > 0 && value <= 1; };
  for (auto [key, to] : {std::pair{"gemm", &efficiency.gemm},
                         {"attention", &efficiency.attention},
                         {"memory", &efficiency.memory}}) {
    if (llvm::Error error = getChecked(object, key, isFraction,
                                       "a fraction of peak in (0, 1]", *to))
      return error;
  }
  auto isSeconds = [](double value) { return value >= 0 && value <= 3600; };
  for (auto [key, to] :
       {std::pair{"kernel_launch_seconds", &efficiency.kernelLaunchSeconds},
        {"collective_seconds", &efficiency.collectiveSeconds},
        {"step_seconds", &efficiency.stepSeconds}}) {
    if (llvm::Error error =
            getChecked(object, key, isSeconds, "seconds from 0 to 3600", *to))
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
  std::string known;
  for (const auto &entry : peakFlopsPerSecond)
    known += (known.empty() ? "" : ", ") + entry.getKey().str();
  return llvm::createStringError("machine '" + name + "' has no peak for '" +
                                 dtype + "' (it has " + known + ")");
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
  auto getString = [&](const json::Object &object, llvm::StringRef key,
                       std::string &out) -> llvm::Error {
    std::optional<llvm::StringRef> value = object.getString(key);
    if (!value || value->empty())
      return fieldError(key, "must be a non-empty string");
    out = value->str();
    return llvm::Error::success();
  };
  if (llvm::Error error = getString(*root, "name", machine.name))
    return std::move(error);
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
  if (llvm::Error error = getString(*device, "name", machine.deviceName))
    return fieldError("device.name", "must be a non-empty string");
  const json::Object *peaks = device->getObject("peak_flops_per_second");
  if (!peaks || peaks->empty())
    return fieldError("device.peak_flops_per_second",
                      "must map dtypes to FLOP/s");
  for (const auto &[dtype, value] : *peaks) {
    std::optional<double> flops = value.getAsNumber();
    if (!flops || !(*flops > 0))
      return fieldError("device.peak_flops_per_second." + dtype.str(),
                        "must be a positive number");
    machine.peakFlopsPerSecond[dtype.str()] = *flops;
  }
  llvm::Expected<double> memory =
      getPositive(*device, "memory_bytes", "device.");
  if (!memory)
    return memory.takeError();
  machine.memoryBytes = *memory;
  llvm::Expected<double> bandwidth =
      getPositive(*device, "memory_bandwidth_bytes_per_second", "device.");
  if (!bandwidth)
    return bandwidth.takeError();
  machine.memoryBandwidthBytesPerSecond = *bandwidth;
  if (device->get("gemm_half_efficiency_flops")) {
    llvm::Expected<double> half =
        getPositive(*device, "gemm_half_efficiency_flops", "device.");
    if (!half)
      return half.takeError();
    machine.gemmHalfEfficiencyFlops = *half;
  }

  if (root->get("efficiency")) {
    const json::Object *efficiency = root->getObject("efficiency");
    if (!efficiency)
      return fieldError("efficiency", "must be an object");
    if (llvm::Error error = parseEfficiency(*efficiency, machine.efficiency))
      return error;
  }

  const json::Array *levels = root->getArray("levels");
  const json::Object *torus = root->getObject("torus");
  if ((levels != nullptr) == (torus != nullptr))
    return fieldError("levels", "or 'torus' must be given, and not both");
  if (levels) {
    int64_t previous = 1;
    for (auto [index, value] : llvm::enumerate(*levels)) {
      std::string where = "levels[" + std::to_string(index) + "].";
      const json::Object *level = value.getAsObject();
      if (!level)
        return fieldError(where, "must be an object");
      InterconnectLevel parsedLevel;
      if (llvm::Error error = getString(*level, "name", parsedLevel.name))
        return fieldError(where + "name", "must be a non-empty string");
      std::optional<int64_t> devices = level->getInteger("devices");
      if (!devices || *devices <= previous || *devices % previous != 0)
        return fieldError(where + "devices",
                          "must be a multiple of the level inside it (" +
                              llvm::Twine(previous) + "), larger than it");
      parsedLevel.devices = previous = *devices;
      llvm::Expected<double> levelBandwidth =
          getPositive(*level, "bandwidth_bytes_per_second", where);
      if (!levelBandwidth)
        return levelBandwidth.takeError();
      parsedLevel.bandwidthBytesPerSecond = *levelBandwidth;
      llvm::Expected<double> latency =
          getPositive(*level, "latency_seconds", where);
      if (!latency)
        return latency.takeError();
      parsedLevel.latencySeconds = *latency;
      machine.levels.push_back(parsedLevel);
    }
    if (machine.levels.empty())
      return fieldError("levels", "must not be empty");
  } else {
    Torus parsedTorus;
    const json::Array *dims = torus->getArray("dims");
    if (!dims || dims->empty())
      return fieldError("torus.dims", "must list the torus dimensions");
    for (const json::Value &dim : *dims) {
      std::optional<int64_t> size = dim.getAsInteger();
      if (!size || *size < 1)
        return fieldError("torus.dims", "must hold positive integers");
      parsedTorus.dims.push_back(*size);
    }
    llvm::Expected<double> link =
        getPositive(*torus, "link_bandwidth_bytes_per_second", "torus.");
    if (!link)
      return link.takeError();
    parsedTorus.linkBandwidthBytesPerSecond = *link;
    llvm::Expected<double> hop =
        getPositive(*torus, "hop_latency_seconds", "torus.");
    if (!hop)
      return hop.takeError();
    parsedTorus.hopLatencySeconds = *hop;
    machine.torus = parsedTorus;
  }
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
