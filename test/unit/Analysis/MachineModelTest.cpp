//===- MachineModelTest.cpp - machine files and their checks --------------===//

#include "tessera/Analysis/MachineModel.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

using namespace tessera;

namespace {

std::string parseError(llvm::StringRef json) {
  llvm::Expected<MachineModel> machine = parseMachineModel(json);
  if (machine)
    return "";
  return llvm::toString(machine.takeError());
}

TEST(MachineModelTest, EveryPresetParses) {
  std::error_code ec;
  int count = 0;
  for (llvm::sys::fs::directory_iterator it(TESSERA_MACHINES_DIR, ec), end;
       it != end && !ec; it.increment(ec)) {
    llvm::StringRef path = it->path();
    if (!path.ends_with(".json"))
      continue;
    llvm::Expected<MachineModel> machine =
        loadMachineModel(path, TESSERA_MACHINES_DIR);
    ASSERT_TRUE(bool(machine)) << llvm::toString(machine.takeError());
    EXPECT_FALSE(machine->sources.empty()) << path.str();
    ++count;
  }
  EXPECT_GE(count, 5);
}

TEST(MachineModelTest, PresetsHoldTheDatasheetNumbers) {
  llvm::Expected<MachineModel> h100 =
      loadMachineModel("dgx-h100", TESSERA_MACHINES_DIR);
  ASSERT_TRUE(bool(h100));
  EXPECT_DOUBLE_EQ(*h100->getPeakFlops("bf16"), 989.4e12);
  EXPECT_EQ(h100->levels[0].devices, 8);
  llvm::Expected<MachineModel> rack =
      loadMachineModel("gb200-nvl72", TESSERA_MACHINES_DIR);
  ASSERT_TRUE(bool(rack));
  EXPECT_EQ(rack->levels[0].devices, 72);
  llvm::Expected<MachineModel> torus =
      loadMachineModel("tpu-torus-3d", TESSERA_MACHINES_DIR);
  ASSERT_TRUE(bool(torus));
  ASSERT_TRUE(torus->torus.has_value());
  EXPECT_EQ(torus->getMaxDevices(), 512);
}

TEST(MachineModelTest, ErrorsNameTheField) {
  const char *base = R"({"name": "m", "sources": ["s"],
    "device": {"name": "d", "peak_flops_per_second": {"bf16": 1e15},
               "memory_bytes": 1e9, "memory_bandwidth_bytes_per_second": %s},
    %s})";
  auto make = [&](const char *bandwidth, const char *network) {
    char text[1024];
    std::snprintf(text, sizeof(text), base, bandwidth, network);
    return std::string(text);
  };
  const char *levels = R"("levels": [{"name": "nvlink", "devices": 8,
      "bandwidth_bytes_per_second": 1e11, "latency_seconds": 1e-6}])";
  EXPECT_EQ(parseError(make("1e12", levels)), "");
  EXPECT_EQ(parseError(make("-1", levels)),
            "machine field 'device.memory_bandwidth_bytes_per_second' must be "
            "a number from 1e+06 to 1e+15 bytes/s, got -1");
  EXPECT_EQ(parseError(make("1e12", R"("levels": [{"name": "a", "devices": 8,
      "bandwidth_bytes_per_second": 1e9, "latency_seconds": 1},
      {"name": "b", "devices": 12, "bandwidth_bytes_per_second": 1e9,
      "latency_seconds": 1}])")),
            "machine field 'levels[1].devices' must be a multiple of the "
            "level inside it (8), larger than it");
  std::string both = std::string(R"("torus": {"dims": [4],
      "link_bandwidth_bytes_per_second": 1, "hop_latency_seconds": 1}, )") +
                     levels;
  EXPECT_EQ(parseError(make("1e12", both.c_str())),
            "machine field 'levels' or 'torus' must be given, and not both");
  EXPECT_EQ(parseError(R"({"name": "m", "device": {}})"),
            "machine field 'sources' must list where the numbers come from");
  EXPECT_NE(parseError("{").find("machine file is not JSON"),
            std::string::npos);
  // Nested deep enough to overflow the JSON parser's stack: refused first.
  std::string deep(50000, '[');
  deep += std::string(50000, ']');
  EXPECT_EQ(parseError(deep),
            "machine file is nested deeper than 1000 levels (at byte 1000)");
}

TEST(MachineModelTest, EfficiencyIsOptionalAndChecked) {
  const char *base = R"({"name": "m", "sources": ["s"],
    "device": {"name": "d", "peak_flops_per_second": {"bf16": 1e15},
               "memory_bytes": 1e9, "memory_bandwidth_bytes_per_second": 1e12},
    "levels": [{"name": "nvlink", "devices": 8,
      "bandwidth_bytes_per_second": 1e11, "latency_seconds": 1e-6}]%s})";
  auto make = [&](const char *efficiency) {
    char text[1024];
    std::snprintf(text, sizeof(text), base, efficiency);
    return std::string(text);
  };
  llvm::Expected<MachineModel> plain = parseMachineModel(make(""));
  ASSERT_TRUE(bool(plain)) << llvm::toString(plain.takeError());
  EXPECT_EQ(plain->efficiency.gemm, Efficiency().gemm);
  EXPECT_EQ(plain->efficiency.computeUnits, 0);
  llvm::Expected<MachineModel> fitted = parseMachineModel(
      make(R"(, "efficiency": {"gemm": 0.7, "gemm_tile": [256, 128],
        "compute_units": 132, "attention": 0.4, "memory": 0.9,
        "kernel_launch_seconds": 2e-6, "collective_seconds": 1e-5,
        "step_seconds": 0.01})"));
  ASSERT_TRUE(bool(fitted)) << llvm::toString(fitted.takeError());
  EXPECT_EQ(fitted->efficiency.gemm, 0.7);
  EXPECT_EQ(fitted->efficiency.tileM, 256);
  EXPECT_EQ(fitted->efficiency.tileN, 128);
  EXPECT_EQ(fitted->efficiency.computeUnits, 132);
  EXPECT_EQ(fitted->efficiency.attention, 0.4);
  EXPECT_EQ(fitted->efficiency.memory, 0.9);
  EXPECT_EQ(fitted->efficiency.kernelLaunchSeconds, 2e-6);
  EXPECT_EQ(fitted->efficiency.collectiveSeconds, 1e-5);
  EXPECT_EQ(fitted->efficiency.stepSeconds, 0.01);
  EXPECT_EQ(parseError(make(R"(, "efficiency": {"gemm": 1.5})")),
            "machine field 'efficiency.gemm' must be a number from 0.001 to 1 "
            "(a fraction of peak), got 1.5");
  EXPECT_EQ(parseError(make(R"(, "efficiency": {"step_seconds": -1})")),
            "machine field 'efficiency.step_seconds' must be a number from 0 "
            "to 3600 s, got -1");
  EXPECT_EQ(parseError(make(R"(, "efficiency": {"gemm_tile": [0, 8]})")),
            "machine field 'efficiency.gemm_tile' must be [m, n], each from 1 "
            "to 4096");
  EXPECT_EQ(parseError(make(R"(, "efficiency": {"compute_units": 1.5})")),
            "machine field 'efficiency.compute_units' must be an integer from "
            "0 to 2^20");
  EXPECT_EQ(parseError(make(R"(, "efficiency": {"gemm_eff": 0.5})")),
            "machine field 'efficiency.gemm_eff' is not a known field");
  EXPECT_EQ(parseError(make(R"(, "efficiency": 3)")),
            "machine field 'efficiency' must be an object");
}

/// A valid machine file with the number of `key` (unique in it) replaced
/// by `value`.
std::string makeWith(llvm::StringRef key, llvm::StringRef value) {
  std::string text = R"({"name": "m", "sources": ["s"],
    "device": {"name": "d", "peak_flops_per_second": {"bf16": 1e15},
               "memory_bytes": 1e9, "memory_bandwidth_bytes_per_second": 1e12,
               "gemm_half_efficiency_flops": 2e9},
    "efficiency": {"gemm": 0.8, "attention": 0.8,
                   "kernel_launch_seconds": 2e-6},
    "levels": [{"name": "nvlink", "devices": 8,
      "bandwidth_bytes_per_second": 1e11, "latency_seconds": 1e-6}]})";
  std::string quoted = "\"" + key.str() + "\": ";
  size_t start = text.find(quoted);
  EXPECT_NE(start, std::string::npos) << key.str();
  start += quoted.size();
  size_t end = text.find_first_of(",}", start);
  return text.replace(start, end - start, value.str());
}

TEST(MachineModelTest, NumbersAreFiniteAndWithinPhysicalBounds) {
  // llvm::json reads 1e999 as infinity, which no check refused: plans were
  // ranked on infinite and NaN step times.
  EXPECT_EQ(parseError(makeWith("bf16", "1e999")),
            "machine field 'device.peak_flops_per_second.bf16' must be a "
            "number from 1e+06 to 1e+18 FLOP/s, got inf");
  EXPECT_EQ(parseError(makeWith("latency_seconds", "-1e999")),
            "machine field 'levels[0].latency_seconds' must be a number from "
            "1e-12 to 1 s, got -inf");
  // Positive and finite, yet no device: the ILP's costs went past what CBC
  // asserts on (1e25).
  EXPECT_EQ(parseError(makeWith("gemm_half_efficiency_flops", "1e308")),
            "machine field 'device.gemm_half_efficiency_flops' must be a "
            "number from 1 to 1e+18 FLOPs, got 1e+308");
  EXPECT_EQ(parseError(makeWith("bandwidth_bytes_per_second", "1e-20")),
            "machine field 'levels[0].bandwidth_bytes_per_second' must be a "
            "number from 1e+06 to 1e+15 bytes/s, got 1e-20");
  EXPECT_EQ(parseError(makeWith("gemm", "1e-300")),
            "machine field 'efficiency.gemm' must be a number from 0.001 to 1 "
            "(a fraction of peak), got 1e-300");
  // Denormals, named as such where the range holds zero.
  EXPECT_EQ(parseError(makeWith("latency_seconds", "1e-310")),
            "machine field 'levels[0].latency_seconds' must be a number from "
            "1e-12 to 1 s, got 1e-310 (a denormal)");
  EXPECT_EQ(parseError(makeWith("kernel_launch_seconds", "1e-310")),
            "machine field 'efficiency.kernel_launch_seconds' must be a number "
            "from 0 to 3600 s, got 1e-310 (a denormal)");
  EXPECT_EQ(parseError(makeWith("latency_seconds", "\"fast\"")),
            "machine field 'levels[0].latency_seconds' must be a number from "
            "1e-12 to 1 s");
  // The bounds themselves are valid.
  EXPECT_EQ(parseError(makeWith("gemm_half_efficiency_flops", "1e18")), "");
  EXPECT_EQ(parseError(makeWith("kernel_launch_seconds", "0")), "");
  EXPECT_EQ(parseError(makeWith("attention", "0.001")), "");
}

TEST(MachineModelTest, DeviceCountsAreAtMostThoseOfAPlan) {
  EXPECT_EQ(parseError(R"({"name": "m", "sources": ["s"],
    "device": {"name": "d", "peak_flops_per_second": {"bf16": 1e15},
               "memory_bytes": 1e9, "memory_bandwidth_bytes_per_second": 1e12},
    "levels": [{"name": "nvlink", "devices": 8,
      "bandwidth_bytes_per_second": 1e11, "latency_seconds": 1e-6},
      {"name": "ib", "devices": 2097152,
      "bandwidth_bytes_per_second": 1e10, "latency_seconds": 1e-5}]})"),
            "machine field 'levels[1].devices' must be at most 1048576 (2^20), "
            "the most a plan runs on, got 2097152");
  // The torus's product overflowed int64 in getMaxDevices.
  EXPECT_EQ(parseError(R"({"name": "m", "sources": ["s"],
    "device": {"name": "d", "peak_flops_per_second": {"bf16": 1e15},
               "memory_bytes": 1e9, "memory_bandwidth_bytes_per_second": 1e12},
    "torus": {"dims": [4294967296, 4294967296],
      "link_bandwidth_bytes_per_second": 1e10, "hop_latency_seconds": 1e-6}})"),
            "machine field 'torus.dims' must multiply to at most 1048576 "
            "devices (2^20), the most a plan runs on");
}

TEST(MachineModelTest, AFileErrorNamesTheFile) {
  llvm::SmallString<128> path;
  int fd;
  ASSERT_FALSE(
      llvm::sys::fs::createTemporaryFile("infinite-peak", "json", fd, path));
  {
    llvm::raw_fd_ostream file(fd, /*shouldClose=*/true);
    file << makeWith("latency_seconds", "1e999");
  }
  llvm::Expected<MachineModel> machine = loadMachineModel(path, "");
  llvm::sys::fs::remove(path);
  ASSERT_FALSE(bool(machine));
  EXPECT_EQ(llvm::toString(machine.takeError()),
            path.str().str() +
                ": machine field 'levels[0].latency_seconds' must be a number "
                "from 1e-12 to 1 s, got inf");
}

TEST(MachineModelTest, ADtypeWithoutAPeakGetsTheSlowestNotNone) {
  // A machine file without an fp32 peak (gb200-nvl72's lists tensor-core
  // peaks only) priced an fp32 model's compute in no time.
  llvm::Expected<MachineModel> rack =
      loadMachineModel("gb200-nvl72", TESSERA_MACHINES_DIR);
  ASSERT_TRUE(bool(rack)) << llvm::toString(rack.takeError());
  ASSERT_FALSE(rack->peakFlopsPerSecond.contains("fp32"));
  llvm::Expected<double> fp32 = rack->getPeakFlops("fp32");
  ASSERT_TRUE(bool(fp32)) << llvm::toString(fp32.takeError());
  EXPECT_DOUBLE_EQ(*fp32, *rack->getPeakFlops("tf32"));
  llvm::Expected<MachineModel> torus =
      loadMachineModel("tpu-torus-3d", TESSERA_MACHINES_DIR);
  ASSERT_TRUE(bool(torus)) << llvm::toString(torus.takeError());
  EXPECT_DOUBLE_EQ(*torus->getPeakFlops("fp32"), 275e12);
  // Only a machine that gives no peak at all has none to give.
  MachineModel bare;
  bare.name = "bare";
  llvm::Expected<double> none = bare.getPeakFlops("fp32");
  ASSERT_FALSE(bool(none));
  EXPECT_EQ(llvm::toString(none.takeError()),
            "machine 'bare' has no peak for 'fp32', nor for any other dtype");
}

TEST(MachineModelTest, CalibratedPresetsRecordTheirFits) {
  for (const char *name : {"dgx-a100-80gb", "dgx-h100", "h200-cluster"}) {
    llvm::Expected<MachineModel> machine =
        loadMachineModel(name, TESSERA_MACHINES_DIR);
    ASSERT_TRUE(bool(machine)) << llvm::toString(machine.takeError());
    EXPECT_GT(machine->efficiency.computeUnits, 0) << name;
    EXPECT_TRUE(llvm::any_of(machine->sources, [](const std::string &source) {
      return llvm::StringRef(source).contains("bench/costmodel/fit.py") ||
             llvm::StringRef(source).contains("the same GH100 die");
    })) << name;
  }
}

} // namespace
