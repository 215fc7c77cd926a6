//===- Sharding.h - Shardings of values, factor projection, resharding -*- C++
//-*-===//
//
// The sharding state that propagation and partitioning share: a value's
// per-dim mesh axes, their projection onto an op's factors and back, and the
// collectives that turn one sharding into another.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_ANALYSIS_SHARDING_H
#define TESSERA_ANALYSIS_SHARDING_H

#include "dialects/Dist/IR/DistOps.h"
#include "dialects/Interfaces/ShardingRule.h"

#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/DenseMap.h"

namespace tessera {

/// A device group as mesh axes form it: `size` devices `stride` apart
/// (the product of the sizes of the more minor mesh axes).
struct DeviceGroup {
  int64_t size = 1;
  int64_t stride = 1;
};

/// Axis sizes of one mesh.
class MeshShape {
public:
  MeshShape() = default;
  explicit MeshShape(dist::MeshOp mesh);

  mlir::FlatSymbolRefAttr getName() const { return name; }
  /// The size of `axis`; 1 for an axis the mesh does not have.
  int64_t getAxisSize(mlir::StringAttr axis) const;
  /// The number of devices spanned by `axes`.
  int64_t getGroupSize(llvm::ArrayRef<mlir::StringAttr> axes) const;
  /// The devices `axes` group together. Devices are numbered row-major over
  /// the mesh, so the stride is that of the most minor axis listed.
  DeviceGroup getDeviceGroup(llvm::ArrayRef<mlir::StringAttr> axes) const;
  /// The mesh axes, major to minor.
  llvm::ArrayRef<mlir::StringAttr> getAxes() const { return axes; }

private:
  mlir::FlatSymbolRefAttr name;
  llvm::SmallVector<mlir::StringAttr> axes;
  llvm::DenseMap<mlir::StringAttr, int64_t> sizes;
};

/// One dimension of a value's sharding.
struct DimSharding {
  AxisList axes;
  /// Propagation may append axes to an open dim.
  bool isOpen = true;
  std::optional<int64_t> priority;

  bool operator==(const DimSharding &other) const {
    return axes == other.axes && isOpen == other.isOpen &&
           priority == other.priority;
  }
};

/// A value's sharding on one mesh.
struct TensorSharding {
  llvm::SmallVector<DimSharding> dims;
  AxisList replicated;
  AxisList unreduced;
  /// The piece the dims give is stored flat, padded and split evenly over
  /// these axes (see #dist.sharding).
  AxisList flat;

  /// Nothing known yet: every dim open and unsplit.
  static TensorSharding getOpen(int64_t rank);
  /// Every dim closed and unsplit.
  static TensorSharding getReplicated(int64_t rank);
  static TensorSharding fromAttr(dist::ShardingAttr attr);
  dist::ShardingAttr toAttr(mlir::FlatSymbolRefAttr mesh) const;

  int64_t getRank() const { return dims.size(); }
  /// True when an axis splits a dim, or is replicated, unreduced or flat.
  bool usesAxis(mlir::StringAttr axis) const;
  /// The per-dim axes.
  llvm::SmallVector<AxisList> getDimAxes() const;
  /// The same sharding with every dim closed, priorities dropped.
  TensorSharding getClosed() const;

  bool operator==(const TensorSharding &other) const {
    return dims == other.dims && replicated == other.replicated &&
           unreduced == other.unreduced && flat == other.flat;
  }
  bool operator!=(const TensorSharding &other) const {
    return !(*this == other);
  }
};

/// Prints `{"x", "y"}`, as axes appear in a sharding.
std::string formatAxes(llvm::ArrayRef<mlir::StringAttr> axes);

/// True when `prefix` starts `list`.
bool isAxesPrefix(llvm::ArrayRef<mlir::StringAttr> prefix,
                  llvm::ArrayRef<mlir::StringAttr> list);

/// Splits the axes of each dim of tensor `dims` over that dim's factors,
/// major to minor: a factor takes axes while they divide what is left of it;
/// the next factor only gets axes once the previous one is fully split.
/// The dim's major factor also takes axes that do not divide it, as long as
/// their group is no larger than what is left of it (it is then split
/// unevenly, which --tessera-pad pads). Axes that fit no factor are
/// dropped. Returns per-factor axes (empty for
/// factors the tensor does not have).
FactorAxes projectToFactors(const ShardingRule &rule, const TensorFactors &dims,
                            llvm::ArrayRef<AxisList> dimAxes,
                            const MeshShape &mesh);

/// The inverse: the axes of each dim of tensor `dims` given the factors'
/// axes. A minor factor's axes are kept only when every factor before it in
/// the dim is fully split, so that each device holds a contiguous block.
llvm::SmallVector<AxisList> projectFromFactors(const ShardingRule &rule,
                                               const TensorFactors &dims,
                                               const FactorAxes &factorAxes,
                                               const MeshShape &mesh);

/// The local shape of a tensor of `globalShape` whose dims are split by
/// `dimAxes`; fails with a message naming the dim and the axes when they do
/// not divide it.
mlir::FailureOr<llvm::SmallVector<int64_t>>
getLocalShape(llvm::ArrayRef<int64_t> globalShape,
              llvm::ArrayRef<AxisList> dimAxes, const MeshShape &mesh,
              std::string &error);

/// The elements each device holds of a piece of `localShape` stored flat
/// over a group of `groupSize` devices: the piece's elements rounded up to
/// a multiple of the group, divided by it.
int64_t getFlatPieceElements(llvm::ArrayRef<int64_t> localShape,
                             int64_t groupSize);

/// One collective of a reshard.
struct ReshardStep {
  enum class Kind { AllReduce, ReduceScatter, AllToAll, AllGather, AllSlice };
  Kind kind;
  AxisList axes;
  /// Gather / scatter / slice dim; the split dim of all_to_all.
  int64_t dim = -1;
  /// The concat dim of all_to_all.
  int64_t concatDim = -1;
};

llvm::StringRef stringifyReshardKind(ReshardStep::Kind kind);

/// Plans the collectives that turn a value sharded as `from` into `to`,
/// without ever replicating more than the dims that change need:
/// unreduced axes become reduce_scatter where `to` splits a dim over them
/// next, all_reduce otherwise; an axis moving between dims as the minor-most
/// is an all_to_all; axes leaving a dim are gathered (only the dim's suffix
/// that differs); axes joining a dim are sliced locally.
llvm::SmallVector<ReshardStep> planReshard(const TensorSharding &from,
                                           const TensorSharding &to);

/// The one mesh that the shardings of a function name (on its arguments and
/// results, its ops and its constraints); null when there is none. Emits an
/// error and fails when they name several.
mlir::FailureOr<dist::MeshOp>
getFunctionMesh(mlir::FunctionOpInterface function);

} // namespace tessera

#endif // TESSERA_ANALYSIS_SHARDING_H
