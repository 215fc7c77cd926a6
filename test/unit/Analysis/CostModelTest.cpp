//===- CostModelTest.cpp - the cost model's formulas ----------------------===//

#include "tessera/Analysis/CostModel.h"

#include <gtest/gtest.h>

using namespace tessera;

namespace {

/// An 8-GPU-per-node cluster with round numbers: NVLink 100 GB/s, 1 us; IB
/// 10 GB/s, 10 us.
MachineModel makeSwitched() {
  MachineModel machine;
  machine.name = "test";
  machine.peakFlopsPerSecond["bf16"] = 1e15;
  machine.memoryBandwidthBytesPerSecond = 1e12;
  machine.levels = {{"nvlink", 8, 100e9, 1e-6}, {"ib", 1024, 10e9, 10e-6}};
  return machine;
}

MachineModel makeTorus() {
  MachineModel machine;
  machine.name = "torus";
  machine.peakFlopsPerSecond["bf16"] = 1e15;
  machine.memoryBandwidthBytesPerSecond = 1e12;
  machine.torus = Torus{{4, 4, 4}, 50e9, 1e-6};
  return machine;
}

TEST(CostModelTest, GemmEfficiencyIsHalfAtTheHalfPointAndApproachesOne) {
  EXPECT_DOUBLE_EQ(getGemmEfficiency(2e9), 0.5);
  EXPECT_GT(getGemmEfficiency(1e13), 0.999);
  EXPECT_LT(getGemmEfficiency(1e8), 0.05);
}

TEST(CostModelTest, ComputeIsTheLongerOfFlopsAndBytes) {
  MachineModel machine = makeSwitched();
  // 1 TFLOP of a large GEMM: compute-bound, ~1 ms.
  double big = *getComputeSeconds(machine, "bf16", 1e12, 1e6);
  EXPECT_NEAR(big, 1e12 / (1e15 * getGemmEfficiency(1e12)), 1e-12);
  // An elementwise op: 1 GB at 1 TB/s is 1 ms, its FLOPs are nothing.
  EXPECT_DOUBLE_EQ(*getComputeSeconds(machine, "bf16", 1e6, 1e9), 1e-3);
  // A small one streams its bytes too: the GEMM efficiency (a fixed 2 us at
  // this peak) is a contraction's, which computes more FLOPs than bytes.
  EXPECT_DOUBLE_EQ(*getComputeSeconds(machine, "bf16", 2.5e5, 1e6), 1e-6);
  // A dtype without a peak of its own runs at the slowest the machine
  // gives (its only one here), not in no time.
  llvm::Expected<double> missing =
      getComputeSeconds(machine, "fp32", 1e12, 1e6);
  ASSERT_TRUE(bool(missing)) << llvm::toString(missing.takeError());
  EXPECT_DOUBLE_EQ(*missing, big);
  MachineModel bare = makeSwitched();
  bare.peakFlopsPerSecond.clear();
  llvm::Expected<double> none = getComputeSeconds(bare, "fp32", 1, 1);
  ASSERT_FALSE(bool(none));
  EXPECT_EQ(llvm::toString(none.takeError()),
            "machine 'test' has no peak for 'fp32', nor for any other dtype");
}

TEST(CostModelTest, RingMovesTheNcclTestsShares) {
  // n = 4, 1 GB at 1 GB/s: all-reduce 2 (n-1)/n = 1.5 s, all-gather 0.75 s.
  EXPECT_DOUBLE_EQ(getRingSeconds(CollectiveKind::AllReduce, 4, 1e9, 1e9, 0),
                   1.5);
  EXPECT_DOUBLE_EQ(getRingSeconds(CollectiveKind::AllGather, 4, 1e9, 1e9, 0),
                   0.75);
  // Latency: 2 (n-1) steps for all-reduce.
  EXPECT_DOUBLE_EQ(getRingSeconds(CollectiveKind::AllReduce, 4, 0, 1e9, 1.0),
                   6.0);
  EXPECT_EQ(getRingSeconds(CollectiveKind::AllReduce, 1, 1e9, 1e9, 1.0), 0.0);
}

TEST(CostModelTest, TreeWinsSmallAllReducesOnManyDevices) {
  // 1 KB over 64 devices: the ring pays 126 latencies, the tree 12.
  double ring = getRingSeconds(CollectiveKind::AllReduce, 64, 1e3, 10e9, 1e-5);
  double tree = getTreeAllReduceSeconds(64, 1e3, 10e9, 1e-5);
  EXPECT_LT(tree, ring);
  MachineModel machine = makeSwitched();
  machine.levels = {{"ib", 64, 10e9, 1e-5}};
  EXPECT_DOUBLE_EQ(
      getCollectiveSeconds(machine, CollectiveKind::AllReduce, 1e3, {64, 1}),
      tree);
}

TEST(CostModelTest, GroupsInsideANodeUseNvlinkAndAcrossUseInfiniband) {
  MachineModel machine = makeSwitched();
  double nvlink =
      getCollectiveSeconds(machine, CollectiveKind::AllGather, 1e9, {8, 1});
  EXPECT_DOUBLE_EQ(
      nvlink, getRingSeconds(CollectiveKind::AllGather, 8, 1e9, 100e9, 1e-6));
  // One member per node (stride 8): all on InfiniBand.
  double ib =
      getCollectiveSeconds(machine, CollectiveKind::AllGather, 1e9, {4, 8});
  EXPECT_DOUBLE_EQ(
      ib, getRingSeconds(CollectiveKind::AllGather, 4, 1e9, 10e9, 10e-6));
  EXPECT_GT(ib, nvlink);
}

TEST(CostModelTest, AGroupAcrossNodesIsHierarchical) {
  MachineModel machine = makeSwitched();
  // 32 devices: 8 per node on NVLink, 4 nodes on InfiniBand. The all-reduce
  // is reduce-scatter inside, all-reduce of an eighth across, all-gather
  // inside.
  double bytes = 1e9;
  double expected =
      getRingSeconds(CollectiveKind::ReduceScatter, 8, bytes, 100e9, 1e-6) +
      std::min(
          getRingSeconds(CollectiveKind::AllReduce, 4, bytes / 8, 10e9, 10e-6),
          getTreeAllReduceSeconds(4, bytes / 8, 10e9, 10e-6)) +
      getRingSeconds(CollectiveKind::AllGather, 8, bytes, 100e9, 1e-6);
  EXPECT_DOUBLE_EQ(
      getCollectiveSeconds(machine, CollectiveKind::AllReduce, bytes, {32, 1}),
      expected);
  // Cheaper than a flat ring over InfiniBand.
  EXPECT_LT(expected,
            getRingSeconds(CollectiveKind::AllReduce, 32, bytes, 10e9, 10e-6));
}

TEST(CostModelTest, TorusRingsRunAlongItsDimensions) {
  MachineModel machine = makeTorus();
  // A group along the minor dimension: one bidirectional ring.
  double oneDim =
      getCollectiveSeconds(machine, CollectiveKind::AllGather, 1e9, {4, 1});
  EXPECT_DOUBLE_EQ(
      oneDim, getRingSeconds(CollectiveKind::AllGather, 4, 1e9, 100e9, 1e-6));
  // Two dimensions: a ring per dimension, the second on a quarter.
  double twoDims =
      getCollectiveSeconds(machine, CollectiveKind::AllGather, 1e9, {16, 1});
  EXPECT_DOUBLE_EQ(
      twoDims,
      getRingSeconds(CollectiveKind::AllGather, 4, 1e9, 100e9, 1e-6) +
          getRingSeconds(CollectiveKind::AllGather, 4, 0.25e9, 100e9, 1e-6));
  // Not a run of dimensions (stride 2): each step pays two hops.
  double strided =
      getCollectiveSeconds(machine, CollectiveKind::AllGather, 1e3, {2, 2});
  EXPECT_DOUBLE_EQ(
      strided, getRingSeconds(CollectiveKind::AllGather, 2, 1e3, 100e9, 2e-6));
}

TEST(CostModelTest, AllToAllIsBisectionBoundOnATorusNotOnASwitch) {
  // On a switch (full bisection) an all-to-all moves what an all-gather
  // does, (n - 1)/n of a buffer per device.
  MachineModel switched = makeSwitched();
  EXPECT_DOUBLE_EQ(
      getCollectiveSeconds(switched, CollectiveKind::AllToAll, 1e9, {8, 1}),
      getCollectiveSeconds(switched, CollectiveKind::AllGather, 1e9, {8, 1}));
  // Around a torus ring of 4 (50 GB/s links): each half sends the other
  // 4 · 1 GB / 4 over the two cut links, 100 GB/s each way: 10 ms, where the
  // all-gather takes 7.5 ms (3/4 of 1 GB at a device's 100 GB/s).
  MachineModel torus = makeTorus();
  double call = torus.efficiency.collectiveSeconds;
  EXPECT_DOUBLE_EQ(
      getCollectiveSeconds(torus, CollectiveKind::AllToAll, 1e9, {4, 1}),
      call + 3e-6 + 1e9 / 100e9);
  // Two dimensions: the whole buffer along each in turn.
  EXPECT_DOUBLE_EQ(
      getCollectiveSeconds(torus, CollectiveKind::AllToAll, 1e9, {16, 1}),
      call + 2 * (3e-6 + 1e9 / 100e9));
  // Longer rings fall further behind a switch: 8 devices send twice the
  // all-gather's bytes' time, 16 about four times.
  MachineModel ring;
  ring.name = "ring";
  ring.peakFlopsPerSecond["bf16"] = 1e15;
  ring.memoryBandwidthBytesPerSecond = 1e12;
  ring.torus = Torus{{16}, 50e9, 0};
  for (auto [size, ratio] : {std::pair{8, 16.0 / 7}, {16, 64.0 / 15}})
    EXPECT_NEAR(
        (getCollectiveSeconds(ring, CollectiveKind::AllToAll, 1e9, {size, 1}) -
         call) /
            (getCollectiveSeconds(ring, CollectiveKind::AllGather, 1e9,
                                  {size, 1}) -
             call),
        ratio, 1e-9);
}

TEST(CostModelTest, PipelineBubbles) {
  EXPECT_DOUBLE_EQ(getBubbleFraction(PipelineSchedule::GPipe, 4, 8), 3.0 / 8);
  EXPECT_DOUBLE_EQ(getBubbleFraction(PipelineSchedule::ZeroBubbleH1, 4, 8),
                   1.0 / 8);
  EXPECT_DOUBLE_EQ(getBubbleFraction(PipelineSchedule::OneFOneB, 4, 8),
                   3.0 / 8);
  EXPECT_DOUBLE_EQ(getBubbleFraction(PipelineSchedule::Interleaved, 4, 8, 2),
                   3.0 / 16);
}

TEST(CostModelTest, RecomputationAddsForwardFlops) {
  EXPECT_DOUBLE_EQ(getRecomputeFactor(Recompute::None), 1.0);
  EXPECT_DOUBLE_EQ(getRecomputeFactor(Recompute::Full), 4.0 / 3.0);
  EXPECT_DOUBLE_EQ(getRecomputeFactor(Recompute::Selective, 0.3), 1.1);
}

TEST(CostModelTest, BucketedReductionExposesItsLastBucket) {
  // Not overlapped (one bucket): all of it.
  EXPECT_DOUBLE_EQ(getExposedReductionSeconds(10, 4, 1), 4);
  // Four buckets of 1 s under a 10 s backward: only the last.
  EXPECT_DOUBLE_EQ(getExposedReductionSeconds(10, 4, 4), 1);
  // Communication-bound: 40 s of reductions, the first starting after a
  // quarter of the backward: 10/4 + 40 - 10.
  EXPECT_DOUBLE_EQ(getExposedReductionSeconds(10, 40, 4), 32.5);
}

TEST(CostModelTest, GemmEfficiencyQuantizesTilesOverTheUnits) {
  MachineModel machine = makeSwitched();
  machine.efficiency.gemm = 0.8;
  machine.efficiency.computeUnits = 108;
  // [4096, 4096]: 1024 tiles of 128 x 128, 9.48 waves of 108: 94.8%.
  GemmShape square{1, 4096, 4096, 4096};
  EXPECT_NEAR(getGemmEfficiency(machine, square), 0.8 * 1024.0 / 1080, 1e-9);
  // 108 tiles exactly: one full wave.
  EXPECT_NEAR(getGemmEfficiency(machine, {1, 128 * 12, 128 * 9, 64}), 0.8,
              1e-9);
  // One more row than a tile pads a second row of tiles half empty... of
  // 129 rows, 256 computed: and 2 tiles of 108 units.
  EXPECT_NEAR(getGemmEfficiency(machine, {1, 129, 128, 4096}),
              0.8 * (129.0 / 256) * (2.0 / 108), 1e-9);
  // The batch of products fills the waves too; K does not tile.
  EXPECT_NEAR(getGemmEfficiency(machine, {54, 128, 256, 64}), 0.8, 1e-9);
  // Without units (a CPU), size alone, as getGemmEfficiency(flops).
  machine.efficiency.computeUnits = 0;
  machine.gemmHalfEfficiencyFlops = 2e9;
  GemmShape small{1, 1000, 1000, 1};
  EXPECT_DOUBLE_EQ(getGemmEfficiency(machine, small),
                   0.8 * getGemmEfficiency(2e6));
  // Time: the FLOPs at that efficiency, or the bytes, the longer.
  EXPECT_DOUBLE_EQ(*getGemmSeconds(machine, "bf16", small, 0),
                   2e6 / (1e15 * 0.8 * getGemmEfficiency(2e6)));
  EXPECT_DOUBLE_EQ(*getGemmSeconds(machine, "bf16", small, 1e9), 1e-3);
  // A dtype the machine gives no peak for runs at the slowest it gives.
  EXPECT_DOUBLE_EQ(*getGemmSeconds(machine, "fp8", small, 0),
                   *getGemmSeconds(machine, "bf16", small, 0));
}

TEST(CostModelTest, MemoryBoundKernelsPayTheBandwidthTheyReach) {
  MachineModel machine = makeSwitched();
  machine.efficiency.memory = 0.5;
  EXPECT_DOUBLE_EQ(getMemoryBoundSeconds(machine, 1e9), 2e-3);
  // AdamW in mixed precision, 28 bytes per parameter: 1e9 of them.
  EXPECT_DOUBLE_EQ(getOptimizerSeconds(machine, 1e9, 28), 56e-3);
  machine.efficiency.attention = 0.5;
  EXPECT_DOUBLE_EQ(*getFusedAttentionSeconds(machine, "bf16", 1e12, 0), 2e-3);
  EXPECT_DOUBLE_EQ(*getFusedAttentionSeconds(machine, "bf16", 1, 1e9), 2e-3);
}

TEST(CostModelTest, CollectivesAndSendsPayTheirCall) {
  MachineModel machine = makeSwitched();
  double bare =
      getCollectiveSeconds(machine, CollectiveKind::AllReduce, 1e6, {8, 1});
  machine.efficiency.collectiveSeconds = 5e-6;
  EXPECT_DOUBLE_EQ(
      getCollectiveSeconds(machine, CollectiveKind::AllReduce, 1e6, {8, 1}),
      bare + 5e-6);
  // A group of one calls nothing.
  EXPECT_DOUBLE_EQ(
      getCollectiveSeconds(machine, CollectiveKind::AllReduce, 1e6, {1, 1}), 0);
  // Stages 2 devices apart, 4 of them: inside a node (NVLink).
  EXPECT_DOUBLE_EQ(getPointToPointSeconds(machine, 1e8, {4, 2}),
                   5e-6 + 1e-6 + 1e8 / 100e9);
  // 8 apart: every send crosses nodes (InfiniBand).
  EXPECT_DOUBLE_EQ(getPointToPointSeconds(machine, 1e8, {2, 8}),
                   5e-6 + 10e-6 + 1e8 / 10e9);
  MachineModel torus = makeTorus();
  EXPECT_DOUBLE_EQ(getPointToPointSeconds(torus, 1e8, {4, 16}),
                   1e-6 + 1e8 / 50e9);
}

TEST(CostModelTest, ScalingLawsAndTheirSerialFractions) {
  // Amdahl: 5% serial caps the speedup at 20; 16 devices give 9.14.
  EXPECT_DOUBLE_EQ(getAmdahlSpeedup(0.05, 16), 1 / (0.05 + 0.95 / 16));
  EXPECT_DOUBLE_EQ(getAmdahlSpeedup(0, 16), 16);
  // Gustafson: the scaled speedup loses the serial part of each device.
  EXPECT_DOUBLE_EQ(getGustafsonSpeedup(0.05, 16), 16 - 0.05 * 15);
  // Fits recover the fraction the points were made with.
  llvm::SmallVector<std::pair<double, double>> amdahl, gustafson;
  for (double n : {1, 2, 4, 8, 16, 64}) {
    amdahl.push_back({n, getAmdahlSpeedup(0.037, n)});
    gustafson.push_back({n, getGustafsonSpeedup(0.21, n)});
  }
  EXPECT_NEAR(fitSerialFraction(amdahl, false), 0.037, 1e-6);
  EXPECT_NEAR(fitSerialFraction(gustafson, true), 0.21, 1e-6);
  // Perfect scaling: no serial part.
  EXPECT_EQ(fitSerialFraction({{1, 1}, {4, 4}}, false), 0);
}

} // namespace
