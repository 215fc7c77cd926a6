//===- ShardingRule.h - Factor-based sharding rules of ops ------*- C++ -*-===//
//
// A sharding rule describes an op's iteration space as factors and maps every
// operand and result dimension onto them (see ShardingRuleOpInterface.td).
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_INTERFACES_SHARDINGRULE_H
#define TESSERA_INTERFACES_SHARDINGRULE_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/TypeRange.h"
#include "mlir/IR/Types.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/raw_ostream.h"

#include <string>

namespace tessera {

/// What splitting a factor over mesh axes means for the op.
enum class FactorKind : uint8_t {
  /// Every device computes its slice independently.
  Parallel,
  /// The factor is summed over; a split leaves partial sums in the results
  /// it does not appear in (those it appears in split by it).
  Reduction,
  /// The op cannot compute on a split of this factor; it must be replicated.
  NeedReplication,
};

llvm::StringRef stringifyFactorKind(FactorKind kind);

/// How the partial results of a split reduction factor combine into the
/// whole (the all-reduce the partitioner inserts).
enum class PartialCombiner : uint8_t { Sum, Max, Min, Mean };

/// One loop dimension of an op.
struct Factor {
  int64_t size;
  FactorKind kind;
};

/// For each dimension of one tensor, the factors it is made of, major to
/// minor. The product of their sizes is the dimension's size.
using TensorFactors = llvm::SmallVector<llvm::SmallVector<int64_t, 1>>;

/// Mesh axes, major to minor: what splits one dim of a tensor, or one factor.
using AxisList = llvm::SmallVector<mlir::StringAttr, 2>;

/// The axes of each factor of a rule.
using FactorAxes = llvm::SmallVector<AxisList>;

/// The factor sharding rule of one op.
class ShardingRule {
public:
  ShardingRule() = default;
  ShardingRule(llvm::SmallVector<Factor> factors,
               llvm::SmallVector<TensorFactors> operands,
               llvm::SmallVector<TensorFactors> results)
      : factors(std::move(factors)), operands(std::move(operands)),
        results(std::move(results)) {}

  llvm::ArrayRef<Factor> getFactors() const { return factors; }
  int64_t getNumFactors() const { return factors.size(); }
  /// Whether every factor is parallel (no reduction, none that needs
  /// replication): tensors with the same factors are then laid out alike
  /// element for element, as a pointwise op's operands and results are.
  bool hasOnlyParallelFactors() const {
    return llvm::all_of(factors, [](const Factor &factor) {
      return factor.kind == FactorKind::Parallel;
    });
  }
  llvm::ArrayRef<TensorFactors> getOperandFactors() const { return operands; }
  llvm::ArrayRef<TensorFactors> getResultFactors() const { return results; }

  /// Returns the factors of dimension `dim` of operand `operand`.
  llvm::ArrayRef<int64_t> getOperandDimFactors(unsigned operand,
                                               unsigned dim) const {
    return operands[operand][dim];
  }
  /// Whether result `result` holds partial sums over `factor`: a reduction
  /// factor sums in the results it does not appear in (attention's gradient
  /// splits dq by the query heads it sums dk and dv over).
  bool isReducedIn(unsigned result, int64_t factor) const;

  llvm::ArrayRef<int64_t> getResultDimFactors(unsigned result,
                                              unsigned dim) const {
    return results[result][dim];
  }

  /// Checks that the rule describes tensors of the given types: one entry per
  /// dimension, factor sizes multiplying to the dimension sizes, every factor
  /// used at most once per tensor and at least once overall.
  llvm::LogicalResult
  verify(llvm::function_ref<mlir::InFlightDiagnostic()> emitError,
         mlir::TypeRange operandTypes, mlir::TypeRange resultTypes) const;

  /// Prints the rule in Shardy's notation, e.g.
  /// `([i, j], [j, k]) -> ([i, k]) {i=8, j=16, k=64} reduction={j}`.
  void print(llvm::raw_ostream &os) const;
  std::string str() const;

  /// Returns the printed name of factor `index`: i, j, ..., z, z_1, z_2, ...
  static std::string getFactorName(int64_t index);

private:
  llvm::SmallVector<Factor> factors;
  llvm::SmallVector<TensorFactors> operands;
  llvm::SmallVector<TensorFactors> results;
};

/// Builds a ShardingRule for an op with the given operand and result types.
/// Each added factor is appended as the minor-most factor of the dimensions
/// it is mapped to; `kNoDim` marks a tensor the factor does not appear in.
class ShardingRuleBuilder {
public:
  static constexpr int64_t kNoDim = -1;

  ShardingRuleBuilder(mlir::TypeRange operandTypes,
                      mlir::TypeRange resultTypes);

  /// Adds a factor of `size` mapped to `operandDims[i]` of operand i and
  /// `resultDims[r]` of result r. Returns its index.
  int64_t addFactor(llvm::ArrayRef<int64_t> operandDims,
                    llvm::ArrayRef<int64_t> resultDims, int64_t size,
                    FactorKind kind = FactorKind::Parallel);

  /// Adds one parallel factor per dimension, shared by every tensor; all
  /// tensors must have the same shape (elementwise ops). Factors of
  /// `exceptDims` get `exceptKind` instead.
  ShardingRuleBuilder &
  addPointwise(llvm::ArrayRef<int64_t> shape,
               llvm::ArrayRef<int64_t> exceptDims = {},
               FactorKind exceptKind = FactorKind::NeedReplication);

  /// Adds the factors of a reshape from `inShape` (operand 0) to `outShape`
  /// (result 0). Dimensions whose sizes factor into one another share factors
  /// (16 -> 4x4 gives two factors); groups that do not divide get
  /// need_replication factors of their own.
  ShardingRuleBuilder &addReshape(llvm::ArrayRef<int64_t> inShape,
                                  llvm::ArrayRef<int64_t> outShape);

  ShardingRule build();

private:
  void appendFactor(llvm::SmallVector<TensorFactors> &tensors, unsigned tensor,
                    int64_t dim, int64_t factor);

  llvm::SmallVector<Factor> factors;
  llvm::SmallVector<TensorFactors> operands;
  llvm::SmallVector<TensorFactors> results;
};

} // namespace tessera

#endif // TESSERA_INTERFACES_SHARDINGRULE_H
