//===- FactorPropagationTest.cpp - conflict strategies of propagation -----===//

#include "tessera/Analysis/FactorPropagation.h"

#include "tessera/Analysis/CostModel.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace tessera;

namespace {

class FactorPropagationTest : public ::testing::Test {
protected:
  FactorPropagationTest() {
    context.loadDialect<dist::DistDialect>();
    // Two nodes of eight devices: "gpu" stays inside a node, "node" crosses
    // nodes.
    module = parseSourceString<ModuleOp>(
        R"(dist.mesh @mesh_node_2_gpu_8 ["node"=2, "gpu"=8])", &context);
    mesh = MeshShape(*module->getOps<dist::MeshOp>().begin());
  }

  AxisList axes(std::initializer_list<StringRef> names) {
    AxisList list;
    for (StringRef name : names)
      list.push_back(StringAttr::get(&context, name));
    return list;
  }

  /// DGX H100 nodes of eight GPUs: NVLink inside a node, InfiniBand across.
  void SetUp() override {
    llvm::Expected<MachineModel> loaded =
        loadMachineModel("dgx-h100", TESSERA_MACHINES_DIR);
    ASSERT_TRUE(static_cast<bool>(loaded))
        << llvm::toString(loaded.takeError());
    machine = std::move(*loaded);
  }

  MLIRContext context;
  OwningOpRef<ModuleOp> module;
  MeshShape mesh;
  MachineModel machine;
};

TEST_F(FactorPropagationTest, NoCandidatesKeepNothing) {
  AggressiveFactorPropagation aggressive;
  FactorResolution resolution = aggressive.resolve({});
  EXPECT_TRUE(resolution.axes.empty());
  EXPECT_EQ(resolution.winner, -1);
  EXPECT_FALSE(resolution.isConflict);
}

TEST_F(FactorPropagationTest, CompatibleCandidatesKeepTheFirstLongest) {
  // {x} is a prefix of {x, y}: no conflict, whatever the strategy.
  SmallVector<FactorCandidate> candidates = {{0, axes({"node"}), 100},
                                             {1, axes({"node", "gpu"}), 10},
                                             {2, axes({"node", "gpu"}), 10}};
  AggressiveFactorPropagation aggressive;
  ConservativeFactorPropagation conservative;
  MachineFactorPropagation weighted(mesh, machine);
  for (const FactorPropagation *strategy :
       {static_cast<const FactorPropagation *>(&aggressive),
        static_cast<const FactorPropagation *>(&conservative),
        static_cast<const FactorPropagation *>(&weighted)}) {
    FactorResolution resolution = strategy->resolve(candidates);
    EXPECT_EQ(resolution.axes, axes({"node", "gpu"}));
    EXPECT_EQ(resolution.winner, 1);
    EXPECT_FALSE(resolution.isConflict);
  }
}

TEST_F(FactorPropagationTest, ConservativeKeepsTheCommonPrefix) {
  ConservativeFactorPropagation conservative;
  FactorResolution resolution = conservative.resolve(
      {{0, axes({"node", "gpu"}), 100}, {3, axes({"node", "x"}), 100}});
  EXPECT_TRUE(resolution.isConflict);
  EXPECT_EQ(resolution.axes, axes({"node"}));
  EXPECT_EQ(resolution.winner, 0);

  // Nothing in common: nothing kept, and no tensor to name for it.
  resolution =
      conservative.resolve({{0, axes({"node"}), 100}, {1, axes({"gpu"}), 100}});
  EXPECT_TRUE(resolution.isConflict);
  EXPECT_TRUE(resolution.axes.empty());
  EXPECT_EQ(resolution.winner, -1);
  EXPECT_EQ(conservative.getReason(), "conservative: common prefix");
}

TEST_F(FactorPropagationTest, AggressiveReshardsTheFewestBytes) {
  AggressiveFactorPropagation aggressive;
  // Keeping {gpu} reshards the 100 bytes of tensor 0, keeping {node} the 400
  // of tensor 1.
  FactorResolution resolution =
      aggressive.resolve({{0, axes({"node"}), 100}, {1, axes({"gpu"}), 400}});
  EXPECT_TRUE(resolution.isConflict);
  EXPECT_EQ(resolution.axes, axes({"gpu"}));
  EXPECT_EQ(resolution.winner, 1);
  EXPECT_EQ(aggressive.getReason(), "fewest bytes to reshard");
}

TEST_F(FactorPropagationTest, AggressiveCountsOnlyIncompatibleTensors) {
  AggressiveFactorPropagation aggressive;
  // {node} and {node, gpu} agree, so each costs only tensor 2's 150 bytes;
  // {x} costs 200. The tie goes to more axes.
  FactorResolution resolution =
      aggressive.resolve({{0, axes({"node"}), 100},
                          {1, axes({"node", "gpu"}), 100},
                          {2, axes({"x"}), 150}});
  EXPECT_EQ(resolution.axes, axes({"node", "gpu"}));
  EXPECT_EQ(resolution.winner, 1);
}

TEST_F(FactorPropagationTest, AggressiveTiesGoToTheFirstCandidate) {
  AggressiveFactorPropagation aggressive;
  FactorResolution resolution =
      aggressive.resolve({{0, axes({"node"}), 100}, {1, axes({"gpu"}), 100}});
  EXPECT_EQ(resolution.axes, axes({"node"}));
  EXPECT_EQ(resolution.winner, 0);
}

TEST_F(FactorPropagationTest, MachineWeightedPricesTheGatherOnItsLinks) {
  MachineFactorPropagation weighted(mesh, machine);
  FactorCandidate acrossNodes{0, axes({"node"}), 100000000};
  FactorCandidate insideNode{1, axes({"gpu"}), 200000000};

  // Losing tensor 1 gathers its 200 MB over "gpu" on NVLink; losing tensor 0
  // gathers its 100 MB over "node" on InfiniBand.
  double gatherInside = weighted.getReshardCost(insideNode, axes({"node"}));
  EXPECT_DOUBLE_EQ(gatherInside,
                   getCollectiveSeconds(machine, CollectiveKind::AllGather, 2e8,
                                        DeviceGroup{8, 1}));
  double gatherAcross = weighted.getReshardCost(acrossNodes, axes({"gpu"}));
  EXPECT_DOUBLE_EQ(gatherAcross,
                   getCollectiveSeconds(machine, CollectiveKind::AllGather, 1e8,
                                        DeviceGroup{2, 8}));
  ASSERT_LT(gatherInside, gatherAcross);

  // By bytes tensor 0 is the one to reshard; by seconds it is tensor 1.
  AggressiveFactorPropagation aggressive;
  EXPECT_EQ(aggressive.resolve({acrossNodes, insideNode}).winner, 1);
  FactorResolution resolution = weighted.resolve({acrossNodes, insideNode});
  EXPECT_EQ(resolution.axes, axes({"node"}));
  EXPECT_EQ(resolution.winner, 0);
  EXPECT_EQ(weighted.getReason(), "fastest to reshard on dgx-h100");
}

TEST_F(FactorPropagationTest, MachineWeightedGathersOnlyTheAxesItLoses) {
  MachineFactorPropagation weighted(mesh, machine);
  // Kept {gpu, node} vs wanted {node, gpu}: both axes stay on the tensor but
  // in another order; only those missing from the kept axes are gathered, so
  // here none is (a one-device group).
  FactorCandidate loser{0, axes({"node", "gpu"}), 1000};
  EXPECT_DOUBLE_EQ(weighted.getReshardCost(loser, axes({"gpu", "node"})),
                   getCollectiveSeconds(machine, CollectiveKind::AllGather,
                                        1000, mesh.getDeviceGroup({})));
}

TEST_F(FactorPropagationTest, SharedAxisGoesToTheFactorHoldingMoreBytes) {
  // Factor 0 and factor 1 both chose "node". Tensor 0 (100 bytes) holds it
  // on factor 0, tensors 1 and 2 (60 + 60 bytes) on factor 1.
  FactorAxes chosen = {axes({"node", "gpu"}), axes({"node"})};
  SmallVector<FactorAxes> projected = {
      {axes({"node"}), {}}, {{}, axes({"node"})}, {{}, axes({"node"})}};
  SmallVector<AxisClaimLoss> losses =
      resolveAxisClaims(chosen, projected, {100, 60, 60});
  ASSERT_EQ(losses.size(), 1u);
  EXPECT_EQ(losses[0].axis.getValue(), "node");
  EXPECT_EQ(losses[0].keeper, 1);
  EXPECT_EQ(losses[0].loser, 0);
  // A factor losing an axis loses the axes after it.
  EXPECT_TRUE(chosen[0].empty());
  EXPECT_EQ(chosen[1], axes({"node"}));
}

TEST_F(FactorPropagationTest, SharedAxisTiesGoToTheFirstFactor) {
  FactorAxes chosen = {axes({"gpu"}), axes({"node"}), axes({"gpu"})};
  SmallVector<FactorAxes> projected = {{axes({"gpu"}), {}, {}},
                                       {{}, axes({"node"}), axes({"gpu"})}};
  SmallVector<AxisClaimLoss> losses =
      resolveAxisClaims(chosen, projected, {100, 100});
  ASSERT_EQ(losses.size(), 1u);
  EXPECT_EQ(losses[0].keeper, 0);
  EXPECT_EQ(losses[0].loser, 2);
  EXPECT_EQ(chosen[0], axes({"gpu"}));
  EXPECT_EQ(chosen[1], axes({"node"}));
  EXPECT_TRUE(chosen[2].empty());
}

TEST_F(FactorPropagationTest, SharedAxesAreSettledOneAtATime) {
  // Both factors chose "node" then "gpu": settling "node" for factor 1 also
  // takes "gpu" from factor 0, so "gpu" is no longer shared.
  FactorAxes chosen = {axes({"node", "gpu"}), axes({"node", "gpu"})};
  SmallVector<FactorAxes> projected = {{axes({"node", "gpu"}), {}},
                                       {{}, axes({"node", "gpu"})}};
  SmallVector<AxisClaimLoss> losses =
      resolveAxisClaims(chosen, projected, {10, 20});
  ASSERT_EQ(losses.size(), 1u);
  EXPECT_EQ(losses[0].keeper, 1);
  EXPECT_TRUE(chosen[0].empty());
  EXPECT_EQ(chosen[1], axes({"node", "gpu"}));
}

} // namespace
