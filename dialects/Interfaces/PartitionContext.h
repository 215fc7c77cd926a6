//===- PartitionContext.h - What a self-partitioning op may ask -*- C++ -*-===//
//
// An op that partitions itself (ShardingRuleOpInterface::partition) reaches
// --tessera-partition through this class, which the partitioner implements:
// nn ops may not depend on the dist dialect or on the sharding analysis.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_INTERFACES_PARTITIONCONTEXT_H
#define TESSERA_INTERFACES_PARTITIONCONTEXT_H

#include "dialects/Interfaces/ShardingRule.h"
#include "mlir/IR/Builders.h"

namespace tessera {

/// What an op that partitions itself may ask of --tessera-partition, for
/// the op being partitioned. Layouts are per-dim mesh axes, every dim
/// closed; every call that builds IR inserts at the point of the builder
/// passed to `partition`.
class PartitionContext {
public:
  virtual ~PartitionContext();

  /// The op's factor sharding rule.
  virtual const ShardingRule &getRule() const = 0;
  /// The axes the partitioner chose for each factor of the rule.
  virtual llvm::ArrayRef<AxisList> getFactorAxes() const = 0;
  /// The number of devices `axes` span on the function's mesh.
  virtual int64_t getGroupSize(llvm::ArrayRef<mlir::StringAttr> axes) const = 0;

  /// The axes of each dim of operand `index` under the chosen factor axes.
  virtual llvm::SmallVector<AxisList>
  getOperandDimAxes(unsigned index) const = 0;
  /// Operand `index` resharded to the layout `dimAxes`, its pending sums
  /// completed; fails after an error at the op.
  virtual mlir::FailureOr<mlir::Value>
  reshardOperand(unsigned index, llvm::ArrayRef<AxisList> dimAxes) = 0;

  /// The axes of each dim of result `index` under the chosen factor axes.
  virtual llvm::SmallVector<AxisList>
  getResultDimAxes(unsigned index) const = 0;
  /// The axes result `index` holds partial sums over under the chosen
  /// factor axes: those of the reduction factors it does not have.
  virtual AxisList getResultUnreduced(unsigned index) const = 0;
  /// Replaces result `index` by `local`, a device's piece laid out by
  /// `dimAxes` with partial sums over `unreduced`: resharded to what the
  /// result's users want (the sums completed with the op's partial
  /// combiner) and wired to them. Fails after an error at the op.
  virtual mlir::LogicalResult
  replaceResult(unsigned index, mlir::Value local,
                llvm::ArrayRef<AxisList> dimAxes,
                llvm::ArrayRef<mlir::StringAttr> unreduced) = 0;

  /// This device's index in each group of mesh axes (a dist.axis_index, a
  /// tensor of one i64 per group).
  virtual mlir::Value createAxisIndex(mlir::Location loc,
                                      llvm::ArrayRef<AxisList> groups) = 0;
  /// `value` sent one step along the ring of the devices of `ring` (a
  /// dist.collective_permute): each device's to the next, the last's to
  /// the first.
  virtual mlir::Value
  createRingShift(mlir::Location loc, mlir::Value value,
                  llvm::ArrayRef<mlir::StringAttr> ring) = 0;

  /// Keeps `companion` beside the local value `local` for a later op that
  /// reads it (ring attention's log-sum-exps, which its gradient reuses).
  virtual void setCompanion(mlir::Value local, mlir::Value companion) = 0;
  /// The companion kept beside `local`; null when there is none.
  virtual mlir::Value getCompanion(mlir::Value local) const = 0;
};

} // namespace tessera

#endif // TESSERA_INTERFACES_PARTITIONCONTEXT_H
