//===- NNCostTest.cpp - FLOP and byte formulas of nn ops ------------------===//

#include "dialects/NN/IR/NNOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace tessera;

namespace {

class NNCostTest : public ::testing::Test {
protected:
  NNCostTest() : builder(&context), loc(builder.getUnknownLoc()) {
    context.loadDialect<nn::NNDialect>();
    module = ModuleOp::create(loc);
    builder.setInsertionPointToEnd(module->getBody());
  }

  /// A value of the given type with no producer that costs anything.
  Value value(ArrayRef<int64_t> shape, Type element = nullptr) {
    auto type =
        RankedTensorType::get(shape, element ? element : builder.getF32Type());
    Attribute zero =
        isa<FloatType>(type.getElementType())
            ? Attribute(builder.getFloatAttr(type.getElementType(), 0))
            : Attribute(builder.getIntegerAttr(type.getElementType(), 0));
    return nn::ConstantOp::create(builder, loc,
                                  DenseElementsAttr::get(type, zero));
  }

  DenseI64ArrayAttr dims(ArrayRef<int64_t> values) {
    return builder.getDenseI64ArrayAttr(values);
  }

  MLIRContext context;
  OpBuilder builder;
  Location loc;
  OwningOpRef<ModuleOp> module;
};

TEST_F(NNCostTest, DotCountsTwoFlopsPerMultiplyAdd) {
  auto dot = nn::DotOp::create(builder, loc, value({8, 16}), value({16, 64}),
                               dims({}), dims({}), dims({1}), dims({0}));
  EXPECT_EQ(dot.getFlops(), 2 * 8 * 16 * 64);
  // Reads both operands and writes the result, 4 bytes an element.
  EXPECT_EQ(dot.getBytesAccessed(), 4 * (8 * 16 + 16 * 64 + 8 * 64));
}

TEST_F(NNCostTest, BatchedDotCountsEveryBatch) {
  auto dot = nn::DotOp::create(builder, loc, value({2, 4, 8, 16}),
                               value({2, 4, 8, 16}), dims({0, 1}), dims({0, 1}),
                               dims({3}), dims({3}));
  EXPECT_EQ(dot.getFlops(), 2 * (2 * 4 * 8 * 8) * 16);
}

TEST_F(NNCostTest, ElementwiseOpsCountTheirFormula) {
  Value x = value({4, 8});
  EXPECT_EQ(nn::AddOp::create(builder, loc, x, x).getFlops(), 32);
  EXPECT_EQ(nn::GeluOp::create(builder, loc, x).getFlops(), 9 * 32);
  EXPECT_EQ(nn::SoftmaxOp::create(builder, loc, x, 1).getFlops(), 5 * 32);
  EXPECT_EQ(nn::TransposeOp::create(builder, loc, x, dims({1, 0})).getFlops(),
            0);
}

TEST_F(NNCostTest, HalfPrecisionHalvesTheBytes) {
  Value x = value({4, 8}, builder.getBF16Type());
  EXPECT_EQ(nn::ExpOp::create(builder, loc, x).getBytesAccessed(), 2 * 2 * 32);
}

TEST_F(NNCostTest, EmbeddingReadsOnlyTheLookedUpRows) {
  auto lookup = nn::EmbeddingOp::create(builder, loc, value({50000, 64}),
                                        value({2, 8}, builder.getI32Type()));
  EXPECT_EQ(lookup.getFlops(), 0);
  EXPECT_EQ(lookup.getBytesAccessed(), 4 * 16 + 2 * 4 * 16 * 64);
}

TEST_F(NNCostTest, ReductionsCountEveryInputElement) {
  Value x = value({4, 8});
  EXPECT_EQ(nn::ReduceSumOp::create(builder, loc, x, dims({1})).getFlops(), 32);
  EXPECT_EQ(nn::ReduceMeanOp::create(builder, loc, x, dims({1})).getFlops(),
            32 + 4);
}

TEST_F(NNCostTest, OptimizerUpdatesScaleWithTheParameter) {
  Value p = value({16, 4});
  auto sgd =
      nn::SgdOp::create(builder, loc, p, p, builder.getF32FloatAttr(0.1f),
                        builder.getF32FloatAttr(0.0f));
  EXPECT_EQ(sgd.getFlops(), 2 * 64);
  auto adamw = nn::AdamWOp::create(
      builder, loc, p, p, p, p, value({}, builder.getI64Type()),
      /*grad_norm=*/Value(), /*loss_scale=*/Value(),
      builder.getF32FloatAttr(1e-3f), builder.getF32FloatAttr(0.9f),
      builder.getF32FloatAttr(0.999f), builder.getF32FloatAttr(1e-8f),
      builder.getF32FloatAttr(0.01f),
      nn::LrScheduleAttr::get(builder.getContext(), nn::LrSchedule::constant),
      builder.getI64IntegerAttr(0), builder.getI64IntegerAttr(0),
      builder.getF32FloatAttr(0.0f), builder.getF32FloatAttr(0.0f));
  EXPECT_EQ(adamw.getFlops(), 16 * 64);
}

TEST_F(NNCostTest, CausalAttentionOnAPieceCountsTheLastPiece) {
  // A causal attention over 32 queries sees 32 * 33 / 2 pairs per head. A
  // device's piece of 8 of those queries (context parallelism's keys
  // gathered whole) is priced where it sees the most: last, after the 24
  // keys before it (24 * 8 + 8 * 9 / 2), not first (8 * 9 / 2).
  context.loadDialect<func::FuncDialect>();
  OwningOpRef<ModuleOp> parsed = parseSourceString<ModuleOp>(R"mlir(
    func.func @f(%q: tensor<1x2x32x4xf32>, %qp: tensor<1x2x8x4xf32>,
                 %k: tensor<1x2x32x4xf32>, %p: tensor<4xi64>) {
      %whole = nn.attention %q, %k, %k causal = true scale = 0.5 : (tensor<1x2x32x4xf32>, tensor<1x2x32x4xf32>, tensor<1x2x32x4xf32>) -> tensor<1x2x32x4xf32>
      %piece = nn.attention %qp, %k, %k piece %p causal = true scale = 0.5 {global_shape = array<i64: 1, 2, 32, 32>} : (tensor<1x2x8x4xf32>, tensor<1x2x32x4xf32>, tensor<1x2x32x4xf32>, tensor<4xi64>) -> tensor<1x2x8x4xf32>
      return
    })mlir",
                                                             &context);
  ASSERT_TRUE(parsed);
  SmallVector<nn::AttentionOp> ops;
  parsed->walk([&](nn::AttentionOp op) { ops.push_back(op); });
  ASSERT_EQ(ops.size(), 2u);
  // Per score: q kᵀ and p v (2 d each) and 5 more.
  int64_t perScore = 2 * 4 + 2 * 4 + 5;
  EXPECT_EQ(ops[0].getFlops(), 2 * (32 * 33 / 2) * perScore);
  EXPECT_EQ(ops[1].getFlops(), 2 * (24 * 8 + 8 * 9 / 2) * perScore);
}

} // namespace
