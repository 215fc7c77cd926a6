//===- ShardingTest.cpp - factor projection and reshard planning ----------===//

#include "tessera/Analysis/Sharding.h"

#include "tessera/Analysis/CostModel.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace tessera;

namespace {

class ShardingTest : public ::testing::Test {
protected:
  ShardingTest() : builder(&context) {
    context.loadDialect<dist::DistDialect>();
    module = ModuleOp::create(builder.getUnknownLoc());
    builder.setInsertionPointToEnd(module->getBody());
    auto meshOp = dist::MeshOp::create(builder, builder.getUnknownLoc(), "mesh",
                                       builder.getStrArrayAttr({"x", "y", "z"}),
                                       builder.getDenseI64ArrayAttr({2, 4, 2}));
    mesh = MeshShape(meshOp);
  }

  StringAttr axis(StringRef name) { return builder.getStringAttr(name); }
  AxisList axes(std::initializer_list<StringRef> names) {
    AxisList list;
    for (StringRef name : names)
      list.push_back(axis(name));
    return list;
  }
  TensorSharding sharding(std::initializer_list<AxisList> dims,
                          AxisList unreduced = {}) {
    TensorSharding result;
    for (const AxisList &dim : dims)
      result.dims.push_back({dim, false, std::nullopt});
    result.unreduced = unreduced;
    return result;
  }
  /// Prints a plan as `all_gather{y}@1 all_slice{x}@0 ...`.
  std::string plan(const TensorSharding &from, const TensorSharding &to) {
    std::string text;
    llvm::raw_string_ostream os(text);
    for (const ReshardStep &step : planReshard(from, to)) {
      os << stringifyReshardKind(step.kind) << "{";
      llvm::interleaveComma(step.axes, os,
                            [&](StringAttr a) { os << a.getValue(); });
      os << "}";
      if (step.dim >= 0)
        os << "@" << step.dim;
      if (step.concatDim >= 0)
        os << "<-" << step.concatDim;
      os << " ";
    }
    return text;
  }

  MLIRContext context;
  OpBuilder builder;
  OwningOpRef<ModuleOp> module;
  MeshShape mesh;
};

TEST_F(ShardingTest, MeshSizesAndGroups) {
  EXPECT_EQ(mesh.getAxisSize(axis("y")), 4);
  EXPECT_EQ(mesh.getGroupSize(axes({"x", "z"})), 4);
  EXPECT_EQ(mesh.getGroupSize({}), 1);
}

TEST_F(ShardingTest, DeviceGroupsStrideOverTheMoreMinorAxes) {
  // Mesh x=2, y=4, z=2, row-major: z is stride 1, y stride 2, x stride 8.
  auto group = [&](std::initializer_list<StringRef> names) {
    DeviceGroup g = mesh.getDeviceGroup(axes(names));
    return std::make_pair(g.size, g.stride);
  };
  EXPECT_EQ(group({"z"}), std::make_pair(int64_t(2), int64_t(1)));
  EXPECT_EQ(group({"y"}), std::make_pair(int64_t(4), int64_t(2)));
  EXPECT_EQ(group({"x"}), std::make_pair(int64_t(2), int64_t(8)));
  EXPECT_EQ(group({"x", "y"}), std::make_pair(int64_t(8), int64_t(2)));
  EXPECT_EQ(group({}), std::make_pair(int64_t(1), int64_t(1)));
}

TEST_F(ShardingTest, NoStepsBetweenEqualShardings) {
  EXPECT_EQ(plan(sharding({axes({"x"}), {}}), sharding({axes({"x"}), {}})), "");
}

TEST_F(ShardingTest, PartialSumsBecomeAllReduce) {
  EXPECT_EQ(plan(sharding({{}, {}}, axes({"y"})), sharding({{}, {}})),
            "all_reduce{y} ");
}

TEST_F(ShardingTest, PartialSumsIntoASplitBecomeReduceScatter) {
  // Megatron row-parallel output into sequence parallelism.
  EXPECT_EQ(plan(sharding({{}, {}}, axes({"y"})), sharding({axes({"y"}), {}})),
            "reduce_scatter{y}@0 ");
}

TEST_F(ShardingTest, OnlyTheChangingSuffixIsGathered) {
  EXPECT_EQ(plan(sharding({axes({"x", "y"})}), sharding({axes({"x"})})),
            "all_gather{y}@0 ");
  // Dropping the major axis needs the minor one gathered too, then sliced.
  EXPECT_EQ(plan(sharding({axes({"x", "y"})}), sharding({axes({"y"})})),
            "all_gather{x, y}@0 all_slice{y}@0 ");
}

TEST_F(ShardingTest, ReplicatedToSplitIsALocalSlice) {
  EXPECT_EQ(plan(sharding({{}, {}}), sharding({{}, axes({"x", "z"})})),
            "all_slice{x, z}@1 ");
}

TEST_F(ShardingTest, MovingTheMinorAxisBetweenDimsIsAllToAll) {
  EXPECT_EQ(plan(sharding({axes({"x"}), {}}), sharding({{}, axes({"x"})})),
            "all_to_all{x}@1<-0 ");
  EXPECT_EQ(plan(sharding({axes({"x", "y"}), axes({"z"})}),
                 sharding({axes({"x"}), axes({"z", "y"})})),
            "all_to_all{y}@1<-0 ");
}

TEST_F(ShardingTest, MultiDimReshardsKeepWhatStays) {
  // dim 0 keeps x; dim 1 trades y for z.
  EXPECT_EQ(plan(sharding({axes({"x"}), axes({"y"})}),
                 sharding({axes({"x"}), axes({"z"})})),
            "all_gather{y}@1 all_slice{z}@1 ");
}

TEST_F(ShardingTest, ProjectionSplitsADimOverItsFactorsMajorFirst) {
  // [8, 64] -> [8, 4, 16]: the hidden dim is heads (4) x head_dim (16).
  SmallVector<Type> in{RankedTensorType::get({8, 64}, builder.getF32Type())};
  SmallVector<Type> out{
      RankedTensorType::get({8, 4, 16}, builder.getF32Type())};
  ShardingRule rule =
      ShardingRuleBuilder(in, out).addReshape({8, 64}, {8, 4, 16}).build();
  // y (4) fills the heads factor; z then splits head_dim.
  FactorAxes factors = projectToFactors(rule, rule.getOperandFactors()[0],
                                        {axes({"x"}), axes({"y", "z"})}, mesh);
  EXPECT_EQ(factors[0], axes({"x"}));
  EXPECT_EQ(factors[1], axes({"y"}));
  EXPECT_EQ(factors[2], axes({"z"}));
  SmallVector<AxisList> dims =
      projectFromFactors(rule, rule.getResultFactors()[0], factors, mesh);
  EXPECT_EQ(dims[1], axes({"y"}));
  EXPECT_EQ(dims[2], axes({"z"}));
}

TEST_F(ShardingTest, AMinorFactorIsNotSplitUnderAPartlySplitMajorOne) {
  // heads (4) split only by x (2): head_dim may not take z, or a device
  // would hold a strided piece of the hidden dim.
  SmallVector<Type> in{RankedTensorType::get({4, 16}, builder.getF32Type())};
  SmallVector<Type> out{RankedTensorType::get({64}, builder.getF32Type())};
  ShardingRule rule =
      ShardingRuleBuilder(in, out).addReshape({4, 16}, {64}).build();
  FactorAxes factors(rule.getNumFactors());
  factors[0] = axes({"x"});
  factors[1] = axes({"z"});
  SmallVector<AxisList> dims =
      projectFromFactors(rule, rule.getResultFactors()[0], factors, mesh);
  EXPECT_EQ(dims[0], axes({"x"}));
}

TEST_F(ShardingTest, LocalShapeNamesTheDimThatDoesNotDivide) {
  std::string error;
  EXPECT_TRUE(failed(getLocalShape({6, 8}, {axes({"y"}), {}}, mesh, error)));
  EXPECT_EQ(error,
            "dim 0 of size 6 is not divisible by mesh axes \"y\" (4 devices)");
  FailureOr<SmallVector<int64_t>> shape =
      getLocalShape({8, 8}, {axes({"y"}), axes({"x", "z"})}, mesh, error);
  ASSERT_TRUE(succeeded(shape));
  EXPECT_EQ(*shape, (SmallVector<int64_t>{2, 2}));
}

} // namespace

TEST_F(ShardingTest, ReshardCostsEachCollectiveOnTheBufferItMoves) {
  MachineModel machine;
  machine.levels = {{"nvlink", 16, 100e9, 1e-6}};
  // [16, 8] f32 split [{y}, {}]: gathering "y" moves the whole 512 bytes
  // (the all-gather's output), over the 4 devices of "y".
  ReshardCost gather =
      getReshardCost(machine, mesh, {16, 8}, 4, sharding({axes({"y"}), {}}),
                     sharding({{}, {}}));
  EXPECT_DOUBLE_EQ(gather.bytes, 512);
  EXPECT_DOUBLE_EQ(gather.seconds,
                   getCollectiveSeconds(machine, CollectiveKind::AllGather, 512,
                                        mesh.getDeviceGroup(axes({"y"}))));
  // Partial sums over "x" scattered onto dim 1: the input, split [{y}, {}],
  // is 128 bytes.
  ReshardCost scatter = getReshardCost(machine, mesh, {16, 8}, 4,
                                       sharding({axes({"y"}), {}}, axes({"x"})),
                                       sharding({axes({"y"}), axes({"x"})}));
  EXPECT_DOUBLE_EQ(scatter.bytes, 128);
  EXPECT_DOUBLE_EQ(scatter.seconds,
                   getCollectiveSeconds(machine, CollectiveKind::ReduceScatter,
                                        128, mesh.getDeviceGroup(axes({"x"}))));
  // A slice is free.
  ReshardCost slice =
      getReshardCost(machine, mesh, {16, 8}, 4, sharding({{}, {}}),
                     sharding({axes({"y"}), axes({"z"})}));
  EXPECT_DOUBLE_EQ(slice.bytes, 0);
  EXPECT_DOUBLE_EQ(slice.seconds, 0);
  EXPECT_DOUBLE_EQ(slice.sentBytes, 0);
}

TEST_F(ShardingTest, ReshardCostCountsTheBytesEachDeviceSends) {
  // The ring algorithms: an all-gather over the 4 devices of "y" sends 3/4
  // of its 512-byte output; without a machine there are no seconds.
  ReshardCost gather =
      getReshardCost(nullptr, mesh, {16, 8}, 4, sharding({axes({"y"}), {}}),
                     sharding({{}, {}}));
  EXPECT_DOUBLE_EQ(gather.sentBytes, 384);
  EXPECT_DOUBLE_EQ(gather.seconds, 0);
  // An all-reduce of the 128-byte piece over the 2 devices of "x" sends
  // 2 (n - 1) / n of it.
  ReshardCost reduce = getReshardCost(nullptr, mesh, {16, 8}, 4,
                                      sharding({axes({"y"}), {}}, axes({"x"})),
                                      sharding({axes({"y"}), {}}));
  EXPECT_DOUBLE_EQ(reduce.bytes, 128);
  EXPECT_DOUBLE_EQ(reduce.sentBytes, 128);
}
