//===- Sharding.cpp - Shardings of values, factor projection, resharding --===//

#include "tessera/Analysis/Sharding.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SetVector.h"

using namespace mlir;
using namespace tessera;

//===----------------------------------------------------------------------===//
// MeshShape
//===----------------------------------------------------------------------===//

MeshShape::MeshShape(dist::MeshOp mesh)
    : name(FlatSymbolRefAttr::get(mesh.getSymNameAttr())) {
  for (auto [axis, size] : llvm::zip(mesh.getAxisNames(), mesh.getShape())) {
    axes.push_back(cast<StringAttr>(axis));
    sizes[cast<StringAttr>(axis)] = size;
  }
}

int64_t MeshShape::getAxisSize(StringAttr axis) const {
  return sizes.lookup_or(axis, 1);
}

int64_t MeshShape::getGroupSize(ArrayRef<StringAttr> axes) const {
  int64_t size = 1;
  for (StringAttr axis : axes)
    size *= getAxisSize(axis);
  return size;
}

DeviceGroup MeshShape::getDeviceGroup(ArrayRef<StringAttr> groupAxes) const {
  DeviceGroup group{getGroupSize(groupAxes), 1};
  for (StringAttr axis : llvm::reverse(axes)) {
    if (llvm::is_contained(groupAxes, axis))
      break;
    group.stride *= getAxisSize(axis);
  }
  // No listed axis is in the mesh: one device.
  if (group.size == 1)
    group.stride = 1;
  return group;
}

//===----------------------------------------------------------------------===//
// TensorSharding
//===----------------------------------------------------------------------===//

TensorSharding TensorSharding::getOpen(int64_t rank) {
  TensorSharding sharding;
  sharding.dims.resize(rank);
  return sharding;
}

TensorSharding TensorSharding::getReplicated(int64_t rank) {
  TensorSharding sharding = getOpen(rank);
  for (DimSharding &dim : sharding.dims)
    dim.isOpen = false;
  return sharding;
}

TensorSharding TensorSharding::fromAttr(dist::ShardingAttr attr) {
  TensorSharding sharding;
  for (dist::DimShardingAttr dim : attr.getDims())
    sharding.dims.push_back(
        {AxisList(dim.getAxes()), dim.getIsOpen(), dim.getPriority()});
  sharding.replicated.assign(attr.getReplicatedAxes().begin(),
                             attr.getReplicatedAxes().end());
  sharding.unreduced.assign(attr.getUnreducedAxes().begin(),
                            attr.getUnreducedAxes().end());
  sharding.flat.assign(attr.getFlatAxes().begin(), attr.getFlatAxes().end());
  return sharding;
}

dist::ShardingAttr TensorSharding::toAttr(FlatSymbolRefAttr mesh) const {
  MLIRContext *context = mesh.getContext();
  SmallVector<dist::DimShardingAttr> dimAttrs;
  for (const DimSharding &dim : dims)
    dimAttrs.push_back(dist::DimShardingAttr::get(context, dim.axes, dim.isOpen,
                                                  dim.priority));
  return dist::ShardingAttr::get(context, mesh, dimAttrs, replicated, unreduced,
                                 flat);
}

bool TensorSharding::usesAxis(StringAttr axis) const {
  for (const DimSharding &dim : dims)
    if (llvm::is_contained(dim.axes, axis))
      return true;
  return llvm::is_contained(replicated, axis) ||
         llvm::is_contained(unreduced, axis) || llvm::is_contained(flat, axis);
}

SmallVector<AxisList> TensorSharding::getDimAxes() const {
  SmallVector<AxisList> axes;
  for (const DimSharding &dim : dims)
    axes.push_back(dim.axes);
  return axes;
}

TensorSharding TensorSharding::getClosed() const {
  TensorSharding closed = *this;
  for (DimSharding &dim : closed.dims) {
    dim.isOpen = false;
    dim.priority.reset();
  }
  return closed;
}

//===----------------------------------------------------------------------===//
// Factor projection
//===----------------------------------------------------------------------===//

FactorAxes tessera::projectToFactors(const ShardingRule &rule,
                                     const TensorFactors &dims,
                                     ArrayRef<AxisList> dimAxes,
                                     const MeshShape &mesh) {
  FactorAxes result(rule.getNumFactors());
  for (auto [dimFactors, axes] : llvm::zip(dims, dimAxes)) {
    size_t next = 0;
    for (auto [position, factor] : llvm::enumerate(dimFactors)) {
      int64_t left = rule.getFactors()[factor].size;
      while (next < axes.size()) {
        int64_t size = mesh.getAxisSize(axes[next]);
        if (left % size != 0)
          break;
        result[factor].push_back(axes[next++]);
        left /= size;
      }
      if (left == 1)
        continue;
      // The dim's major factor takes the rest unevenly, when every device
      // still gets some of it: --tessera-pad pads it.
      ArrayRef<StringAttr> rest = ArrayRef<StringAttr>(axes).drop_front(next);
      if (position == 0 && !rest.empty() && mesh.getGroupSize(rest) <= left)
        llvm::append_range(result[factor], rest);
      break;
    }
  }
  return result;
}

SmallVector<AxisList> tessera::projectFromFactors(const ShardingRule &rule,
                                                  const TensorFactors &dims,
                                                  const FactorAxes &factorAxes,
                                                  const MeshShape &mesh) {
  SmallVector<AxisList> result;
  for (ArrayRef<int64_t> dimFactors : dims) {
    AxisList &axes = result.emplace_back();
    for (int64_t factor : dimFactors) {
      llvm::append_range(axes, factorAxes[factor]);
      int64_t size = rule.getFactors()[factor].size;
      if (size != mesh.getGroupSize(factorAxes[factor]))
        break;
    }
  }
  return result;
}

FailureOr<SmallVector<int64_t>>
tessera::getLocalShape(ArrayRef<int64_t> globalShape,
                       ArrayRef<AxisList> dimAxes, const MeshShape &mesh,
                       std::string &error) {
  SmallVector<int64_t> shape(globalShape);
  for (auto [dim, axes] : llvm::enumerate(dimAxes)) {
    int64_t group = mesh.getGroupSize(axes);
    if (shape[dim] % group == 0) {
      shape[dim] /= group;
      continue;
    }
    llvm::raw_string_ostream os(error);
    os << "dim " << dim << " of size " << shape[dim]
       << " is not divisible by mesh axes ";
    llvm::interleaveComma(axes, os, [&](StringAttr axis) {
      os << "\"" << axis.getValue() << "\"";
    });
    os << " (" << group << " devices)";
    return failure();
  }
  return shape;
}

int64_t tessera::getFlatPieceElements(ArrayRef<int64_t> localShape,
                                      int64_t groupSize) {
  int64_t elements = 1;
  for (int64_t size : localShape)
    elements *= size;
  return llvm::divideCeil(elements, groupSize);
}

//===----------------------------------------------------------------------===//
// Reshard planning
//===----------------------------------------------------------------------===//

StringRef tessera::stringifyReshardKind(ReshardStep::Kind kind) {
  switch (kind) {
  case ReshardStep::Kind::AllReduce:
    return "all_reduce";
  case ReshardStep::Kind::ReduceScatter:
    return "reduce_scatter";
  case ReshardStep::Kind::AllToAll:
    return "all_to_all";
  case ReshardStep::Kind::AllGather:
    return "all_gather";
  case ReshardStep::Kind::AllSlice:
    return "all_slice";
  }
  llvm_unreachable("unknown reshard kind");
}

/// The length of the longest common prefix of two axis lists.
static size_t commonPrefix(ArrayRef<StringAttr> a, ArrayRef<StringAttr> b) {
  size_t n = 0;
  while (n < a.size() && n < b.size() && a[n] == b[n])
    ++n;
  return n;
}

bool tessera::isAxesPrefix(ArrayRef<StringAttr> prefix,
                           ArrayRef<StringAttr> list) {
  return commonPrefix(prefix, list) == prefix.size();
}

std::string tessera::formatAxes(ArrayRef<StringAttr> axes) {
  std::string text = "{";
  llvm::raw_string_ostream os(text);
  llvm::interleaveComma(axes, os, [&](StringAttr axis) {
    os << "\"" << axis.getValue() << "\"";
  });
  os << "}";
  return text;
}

SmallVector<ReshardStep> tessera::planReshard(const TensorSharding &from,
                                              const TensorSharding &to) {
  using Kind = ReshardStep::Kind;
  SmallVector<ReshardStep> steps;
  SmallVector<AxisList> state = from.getDimAxes();
  SmallVector<AxisList> target = to.getDimAxes();
  int64_t rank = state.size();

  // Partial sums: scatter them onto the dims that `to` splits next over the
  // same axes, and all-reduce the rest.
  AxisList pending;
  for (StringAttr axis : from.unreduced)
    if (!llvm::is_contained(to.unreduced, axis))
      pending.push_back(axis);
  for (int64_t dim = 0; dim < rank && !pending.empty(); ++dim) {
    if (!isAxesPrefix(state[dim], target[dim]))
      continue;
    AxisList scatter;
    for (StringAttr axis :
         ArrayRef<StringAttr>(target[dim]).drop_front(state[dim].size())) {
      if (!llvm::is_contained(pending, axis))
        break;
      scatter.push_back(axis);
    }
    if (scatter.empty())
      continue;
    steps.push_back({Kind::ReduceScatter, scatter, dim});
    llvm::append_range(state[dim], scatter);
    for (StringAttr axis : scatter)
      llvm::erase(pending, axis);
  }
  if (!pending.empty())
    steps.push_back({Kind::AllReduce, pending});

  // Axes that are the minor-most of one dim and, in that order, the next of
  // another move with one all_to_all (over all of them at once: each device
  // sends the others their pieces, not a gather then a slice).
  for (bool moved = true; moved;) {
    moved = false;
    for (int64_t from = 0; from < rank && !moved; ++from) {
      if (isAxesPrefix(state[from], target[from]))
        continue;
      for (int64_t into = 0; into < rank && !moved; ++into) {
        if (into == from || !isAxesPrefix(state[into], target[into]))
          continue;
        ArrayRef<StringAttr> next =
            ArrayRef<StringAttr>(target[into]).drop_front(state[into].size());
        // The most minor-most axes of `from` that `into` takes next.
        for (size_t count = std::min(state[from].size(), next.size());
             count > 0 && !moved; --count) {
          ArrayRef<StringAttr> axes =
              ArrayRef<StringAttr>(state[from]).take_back(count);
          if (axes != next.take_front(count))
            continue;
          steps.push_back({Kind::AllToAll, AxisList(axes), into, from});
          llvm::append_range(state[into], axes);
          state[from].resize(state[from].size() - count);
          moved = true;
        }
      }
    }
  }

  for (int64_t dim = 0; dim < rank; ++dim) {
    size_t keep = commonPrefix(state[dim], target[dim]);
    if (keep == state[dim].size())
      continue;
    steps.push_back(
        {Kind::AllGather,
         AxisList(ArrayRef<StringAttr>(state[dim]).drop_front(keep)), dim});
    state[dim].resize(keep);
  }
  for (int64_t dim = 0; dim < rank; ++dim) {
    if (state[dim].size() == target[dim].size())
      continue;
    steps.push_back(
        {Kind::AllSlice,
         AxisList(
             ArrayRef<StringAttr>(target[dim]).drop_front(state[dim].size())),
         dim});
    state[dim] = target[dim];
  }
  return steps;
}

//===----------------------------------------------------------------------===//
// The mesh of a function
//===----------------------------------------------------------------------===//

FailureOr<dist::MeshOp> tessera::getFunctionMesh(FunctionOpInterface function) {
  llvm::SetVector<SymbolRefAttr> names;
  auto add = [&](Attribute attr) {
    if (auto sharding = dyn_cast_or_null<dist::ShardingAttr>(attr)) {
      names.insert(sharding.getMesh());
    } else if (auto array = dyn_cast_or_null<ArrayAttr>(attr)) {
      for (Attribute element : array)
        if (auto sharding = dyn_cast<dist::ShardingAttr>(element))
          names.insert(sharding.getMesh());
    }
  };
  StringRef attrName = dist::DistDialect::kShardingAttrName;
  for (unsigned i = 0; i < function.getNumArguments(); ++i)
    add(function.getArgAttr(i, attrName));
  for (unsigned i = 0; i < function.getNumResults(); ++i)
    add(function.getResultAttr(i, attrName));
  function->walk([&](Operation *op) {
    if (auto constraint = dyn_cast<dist::ShardingConstraintOp>(op))
      add(constraint.getSharding());
    add(op->getAttr(attrName));
  });
  if (names.empty())
    return dist::MeshOp();
  if (names.size() > 1) {
    function.emitError("expects the shardings of one function on one mesh, "
                       "got ")
        << names[0] << " and " << names[1];
    return failure();
  }
  auto mesh =
      SymbolTable::lookupNearestSymbolFrom<dist::MeshOp>(function, names[0]);
  if (!mesh) {
    function.emitError("names unknown mesh ") << names[0];
    return failure();
  }
  return mesh;
}
