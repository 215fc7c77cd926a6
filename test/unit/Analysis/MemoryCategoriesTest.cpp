//===- MemoryCategoriesTest.cpp - what a program's values hold -----------===//

#include "tessera/Analysis/MemoryCategories.h"

#include "dialects/Dist/IR/DistDialect.h"
#include "dialects/NN/IR/NNOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace tessera;

namespace {

/// A partitioned ZeRO-3 step of one weight on dp=2: the weight is gathered
/// (and reshaped) to compute, its gradient's partial sums reduce-scattered
/// into the update.
constexpr const char *kStep = R"mlir(
dist.mesh @mesh ["dp"=2]
func.func @step(%w: tensor<2x4xf32> {nn.param = "w"},
                %m: tensor<2x4xf32> {nn.state = "w.adam_m"},
                %v: tensor<2x4xf32> {nn.state = "w.adam_v"},
                %t: tensor<i64> {nn.state = "step"},
                %x: tensor<1x4xf32>)
    -> (tensor<2x4xf32> {nn.updates = 0 : i64}, tensor<2x4xf32> {nn.updates = 1 : i64},
        tensor<2x4xf32> {nn.updates = 2 : i64}, tensor<1x4xf32>) {
  %g = dist.all_gather %w on @mesh ["dp"] dim = 0 : tensor<2x4xf32> -> tensor<4x4xf32>
  %gt = nn.reshape %g : tensor<4x4xf32> -> tensor<16xf32>
  %gw = nn.reshape %gt : tensor<16xf32> -> tensor<4x4xf32>
  %y = nn.dot %x, %gw contracting_dims = [1] x [0] : (tensor<1x4xf32>, tensor<4x4xf32>) -> tensor<1x4xf32>
  %r = nn.relu %y : tensor<1x4xf32>
  %p = nn.dot %x, %r contracting_dims = [0] x [0] : (tensor<1x4xf32>, tensor<1x4xf32>) -> tensor<4x4xf32>
  %s = dist.reduce_scatter %p on @mesh ["dp"] dim = 0 sum : tensor<4x4xf32> -> tensor<2x4xf32>
  %w2, %m2, %v2 = nn.adamw %w, %s, %m, %v, %t lr = 1.0e-03 : tensor<2x4xf32>, tensor<2x4xf32>, tensor<i64>
  return %w2, %m2, %v2, %r : tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<1x4xf32>
}
)mlir";

TEST(MemoryCategoriesTest, ClassifiesEveryPartOfAZeroStep) {
  MLIRContext context;
  context.loadDialect<func::FuncDialect, nn::NNDialect, dist::DistDialect>();
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(kStep, &context);
  ASSERT_TRUE(module);
  auto function = *module->getOps<func::FuncOp>().begin();
  DenseMap<Value, MemoryCategory> categories = getMemoryCategories(function);
  auto of = [&](Value value) {
    return categories.lookup_or(value, MemoryCategory::Activation);
  };
  Block &body = function.front();
  EXPECT_EQ(of(body.getArgument(0)), MemoryCategory::Parameter);
  EXPECT_EQ(of(body.getArgument(1)), MemoryCategory::OptimizerState);
  EXPECT_EQ(of(body.getArgument(3)), MemoryCategory::OptimizerState);
  EXPECT_EQ(of(body.getArgument(4)), MemoryCategory::Activation);
  SmallVector<Operation *> ops;
  for (Operation &op : body)
    ops.push_back(&op);
  // The gathered weight and its reshaped views: communication buffers.
  EXPECT_EQ(of(ops[0]->getResult(0)), MemoryCategory::Communication);
  EXPECT_EQ(of(ops[1]->getResult(0)), MemoryCategory::Communication);
  EXPECT_EQ(of(ops[2]->getResult(0)), MemoryCategory::Communication);
  EXPECT_EQ(of(ops[3]->getResult(0)), MemoryCategory::Activation);
  EXPECT_EQ(of(ops[4]->getResult(0)), MemoryCategory::Activation);
  // The gradient's partial sums and their reduced shard.
  EXPECT_EQ(of(ops[5]->getResult(0)), MemoryCategory::Gradient);
  EXPECT_EQ(of(ops[6]->getResult(0)), MemoryCategory::Gradient);
  // The update's results, by what they update.
  EXPECT_EQ(of(ops[7]->getResult(0)), MemoryCategory::Parameter);
  EXPECT_EQ(of(ops[7]->getResult(1)), MemoryCategory::OptimizerState);
}

} // namespace
