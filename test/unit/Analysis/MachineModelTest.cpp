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

} // namespace
