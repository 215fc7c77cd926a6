//===- ShardingRuleTest.cpp - factor math of sharding rules ---------------===//

#include "dialects/Interfaces/ShardingRule.h"

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace tessera;

namespace {

class ShardingRuleTest : public ::testing::Test {
protected:
  RankedTensorType tensor(ArrayRef<int64_t> shape) {
    return RankedTensorType::get(shape, Float32Type::get(&context));
  }

  /// Builds the reshape rule from `in` to `out` and checks it verifies.
  ShardingRule reshape(ArrayRef<int64_t> in, ArrayRef<int64_t> out) {
    SmallVector<Type> operands{tensor(in)}, results{tensor(out)};
    ShardingRule rule =
        ShardingRuleBuilder(operands, results).addReshape(in, out).build();
    EXPECT_TRUE(succeeded(verify(rule, operands, results))) << rule.str();
    return rule;
  }

  LogicalResult verify(const ShardingRule &rule, TypeRange operands,
                       TypeRange results) {
    lastError.clear();
    ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diag) {
      lastError = diag.str();
      return success();
    });
    return rule.verify([&] { return emitError(UnknownLoc::get(&context)); },
                       operands, results);
  }

  MLIRContext context;
  std::string lastError;
};

TEST_F(ShardingRuleTest, FactorNamesRunFromIToZThenNumbered) {
  EXPECT_EQ(ShardingRule::getFactorName(0), "i");
  EXPECT_EQ(ShardingRule::getFactorName(17), "z");
  EXPECT_EQ(ShardingRule::getFactorName(18), "z_1");
  EXPECT_EQ(ShardingRule::getFactorName(20), "z_3");
}

TEST_F(ShardingRuleTest, MatmulRuleHasOneReductionFactor) {
  SmallVector<Type> operands{tensor({8, 16}), tensor({16, 64})};
  SmallVector<Type> results{tensor({8, 64})};
  ShardingRuleBuilder builder(operands, results);
  builder.addFactor({0, ShardingRuleBuilder::kNoDim}, {0}, 8);
  builder.addFactor({ShardingRuleBuilder::kNoDim, 1}, {1}, 64);
  builder.addFactor({1, 0}, {ShardingRuleBuilder::kNoDim}, 16,
                    FactorKind::Reduction);
  ShardingRule rule = builder.build();
  EXPECT_TRUE(succeeded(verify(rule, operands, results)));
  EXPECT_EQ(rule.str(),
            "([i, k], [k, j]) -> ([i, j]) {i=8, j=64, k=16} reduction={k}");
}

TEST_F(ShardingRuleTest, ReshapeSplittingADimSharesTheMajorFactor) {
  // [8, 64] -> [8, 4, 16]: heads out of the hidden dim.
  ShardingRule rule = reshape({8, 64}, {8, 4, 16});
  EXPECT_EQ(rule.str(), "([i, jk]) -> ([i, j, k]) {i=8, j=4, k=16}");
}

TEST_F(ShardingRuleTest, ReshapeMergingDimsSharesBothFactors) {
  ShardingRule rule = reshape({2, 8, 4, 16}, {2, 8, 64});
  EXPECT_EQ(rule.str(), "([i, j, k, l]) -> ([i, j, kl]) {i=2, j=8, k=4, l=16}");
}

TEST_F(ShardingRuleTest, ReshapeUsesCommonDivisorsOfUnalignedDims) {
  // [6, 4] -> [4, 6]: the major factor 2 is shared; 3x4 vs 2x6 is not.
  ShardingRule rule = reshape({6, 4}, {4, 6});
  EXPECT_EQ(rule.getFactors()[0].size, 2);
  EXPECT_EQ(rule.getFactors()[0].kind, FactorKind::Parallel);
  EXPECT_EQ(rule.getOperandDimFactors(0, 0).front(), 0);
  EXPECT_EQ(rule.getResultDimFactors(0, 0).front(), 0);
  for (const Factor &factor : rule.getFactors().drop_front())
    EXPECT_EQ(factor.kind, FactorKind::NeedReplication);
}

TEST_F(ShardingRuleTest, ReshapeGivesSizeOneDimsTheirOwnFactor) {
  ShardingRule rule = reshape({1, 8}, {8, 1});
  EXPECT_EQ(rule.str(), "([i, j]) -> ([j, k]) {i=1, j=8, k=1}");
}

TEST_F(ShardingRuleTest, ReshapeOfCoprimeDimsCannotBeSplit) {
  ShardingRule rule = reshape({3, 2}, {2, 3});
  for (const Factor &factor : rule.getFactors())
    EXPECT_EQ(factor.kind, FactorKind::NeedReplication) << rule.str();
}

TEST_F(ShardingRuleTest, ReshapeToAndFromScalars) {
  reshape({1, 1}, {});
  reshape({}, {1});
}

TEST_F(ShardingRuleTest, VerifyRejectsFactorsThatDoNotMultiplyToTheDim) {
  SmallVector<Type> operands{tensor({8})}, results{tensor({8})};
  ShardingRuleBuilder builder(operands, results);
  builder.addFactor({0}, {0}, 4);
  EXPECT_TRUE(failed(verify(builder.build(), operands, results)));
  EXPECT_EQ(lastError, "sharding rule of operand #0 dim 0 has factors of size "
                       "4, expected 8");
}

TEST_F(ShardingRuleTest, VerifyRejectsAFactorUsedByNoTensor) {
  SmallVector<Type> operands{tensor({8})}, results{tensor({8})};
  ShardingRuleBuilder builder(operands, results);
  builder.addFactor({0}, {0}, 8);
  builder.addFactor({ShardingRuleBuilder::kNoDim},
                    {ShardingRuleBuilder::kNoDim}, 1);
  EXPECT_TRUE(failed(verify(builder.build(), operands, results)));
  EXPECT_EQ(lastError, "sharding rule factor j maps to no tensor dim");
}

TEST_F(ShardingRuleTest, VerifyRejectsAWrongTensorCount) {
  SmallVector<Type> operands{tensor({8})}, results{tensor({8})};
  ShardingRule rule =
      ShardingRuleBuilder(operands, results).addPointwise({8}).build();
  SmallVector<Type> twoOperands{tensor({8}), tensor({8})};
  EXPECT_TRUE(failed(verify(rule, twoOperands, results)));
}

} // namespace
