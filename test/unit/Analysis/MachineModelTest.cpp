//===- MachineModelTest.cpp - machine files and their checks --------------===//

#include "tessera/Analysis/MachineModel.h"

#include "llvm/Support/FileSystem.h"

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
            "positive, got -1.00");
  EXPECT_EQ(parseError(make("1e12", R"("levels": [{"name": "a", "devices": 8,
      "bandwidth_bytes_per_second": 1, "latency_seconds": 1},
      {"name": "b", "devices": 12, "bandwidth_bytes_per_second": 1,
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
            "machine field 'efficiency.gemm' must be a fraction of peak in (0, "
            "1]");
  EXPECT_EQ(parseError(make(R"(, "efficiency": {"step_seconds": -1})")),
            "machine field 'efficiency.step_seconds' must be seconds from 0 to "
            "3600");
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
