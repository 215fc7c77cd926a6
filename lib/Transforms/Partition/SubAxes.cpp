//===- SubAxes.cpp - Sub-axes for grouped-query attention -----------------===//
//
// --tessera-split-axes and --tessera-merge-axes. With more devices on an axis
// than an attention has kv heads, the query heads of one kv head spread over
// a part of the axis: Megatron-LM's replicated kv heads. The kv heads then
// split over the major part of the axis and the group over the minor part,
// which Shardy writes as the sub-axes "tp":(1)2 and "tp":(2)2. Tessera gives
// such sub-axes to the mesh as axes of their own for propagation and
// partition (a device keeps its row-major id), and merges them back where
// the program always uses them together.
//
//===----------------------------------------------------------------------===//

#include "tessera/Transforms/Passes.h"
#include "tessera/Transforms/Pipeline/Pipeline.h"

#include "dialects/Dist/IR/DistOps.h"
#include "dialects/Interfaces/ShardingRuleOpInterface.h"

#include "mlir/IR/AttrTypeSubElements.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/Support/FormatVariadic.h"

namespace tessera {
#define GEN_PASS_DEF_SPLITAXESPASS
#define GEN_PASS_DEF_MERGEAXESPASS
#include "tessera/Transforms/Passes.h.inc"
} // namespace tessera

#define DEBUG_TYPE "tessera-sub-axes"

using namespace mlir;
using namespace tessera;

namespace {

using AxisNames = SmallVector<StringAttr, 2>;

/// Rewrites every list of mesh axes in `module`: the dims and the
/// replicated, unreduced and flat axes of each sharding, and the axes the
/// dist ops (collectives, axis_index) name. Mesh ops are left alone.
void rewriteAxisLists(
    ModuleOp module,
    llvm::function_ref<AxisNames(ArrayRef<StringAttr>)> rewrite) {
  MLIRContext *context = module.getContext();
  AttrTypeReplacer shardings;
  shardings.addReplacement(
      [&](dist::ShardingAttr sharding) -> std::pair<Attribute, WalkResult> {
        SmallVector<dist::DimShardingAttr> dims;
        for (dist::DimShardingAttr dim : sharding.getDims())
          dims.push_back(
              dist::DimShardingAttr::get(context, rewrite(dim.getAxes()),
                                         dim.getIsOpen(), dim.getPriority()));
        AxisNames replicated = rewrite(sharding.getReplicatedAxes()),
                  unreduced = rewrite(sharding.getUnreducedAxes()),
                  flat = rewrite(sharding.getFlatAxes());
        return {dist::ShardingAttr::get(context, sharding.getMesh(), dims,
                                        replicated, unreduced, flat),
                WalkResult::skip()};
      });
  AttrTypeReplacer distAxes;
  distAxes.addReplacement([&](ArrayAttr array) -> std::optional<Attribute> {
    if (array.empty() ||
        !llvm::all_of(array, [](Attribute a) { return isa<StringAttr>(a); }))
      return std::nullopt;
    AxisNames axes(array.getAsRange<StringAttr>());
    AxisNames rewritten = rewrite(axes);
    return ArrayAttr::get(
        context, SmallVector<Attribute>(rewritten.begin(), rewritten.end()));
  });
  module.walk([&](Operation *op) {
    if (isa<dist::MeshOp>(op))
      return;
    shardings.recursivelyReplaceElementsIn(op, /*replaceAttrs=*/true);
    if (isa<dist::DistDialect>(op->getDialect()))
      distAxes.recursivelyReplaceElementsIn(op, /*replaceAttrs=*/true);
  });
}

/// The name of the sub-axis of `axis` of `size` devices within blocks of
/// `pre` (Shardy's `"tp":(1)2`).
StringAttr getSubAxisName(StringAttr axis, int64_t pre, int64_t size) {
  return StringAttr::get(
      axis.getContext(),
      llvm::formatv("{0}:({1}){2}", axis.getValue(), pre, size).str());
}

/// A mesh axis made of sub-axes, major to minor.
struct SplitAxis {
  StringAttr axis;
  AxisNames parts;
};

/// Replaces each split axis by its parts in every list of `module`.
void expandAxes(ModuleOp module, ArrayRef<SplitAxis> splits) {
  rewriteAxisLists(module, [&](ArrayRef<StringAttr> axes) {
    AxisNames result;
    for (StringAttr axis : axes) {
      const SplitAxis *split = llvm::find_if(
          splits, [&](const SplitAxis &s) { return s.axis == axis; });
      if (split == splits.end())
        result.push_back(axis);
      else
        llvm::append_range(result, split->parts);
    }
    return result;
  });
}

/// The module's mesh; null unless it has exactly one (a program of several
/// meshes keeps its axes).
dist::MeshOp getOnlyMesh(ModuleOp module) {
  auto meshes = module.getOps<dist::MeshOp>();
  if (meshes.empty() || std::next(meshes.begin()) != meshes.end())
    return nullptr;
  return *meshes.begin();
}

struct SplitAxesPass : tessera::impl::SplitAxesPassBase<SplitAxesPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    dist::MeshOp mesh = getOnlyMesh(module);
    if (!mesh)
      return;
    // Each axis that splits some attention's query heads but not its kv
    // heads, as kv heads dividing the axis: its major part of kv-heads
    // devices. An op names such a dim by getSubAxisGroups.
    llvm::MapVector<StringAttr, int64_t> cuts;
    auto visit = [&](int64_t heads, int64_t kvHeads) {
      for (auto [name, size] : llvm::zip(
               mesh.getAxisNames().getAsRange<StringAttr>(), mesh.getShape())) {
        if (name.getValue() == kPipelineAxis ||
            name.getValue() == kMicrobatchAxis)
          continue;
        if (kvHeads > 1 && kvHeads < size && size % kvHeads == 0 &&
            heads % size == 0)
          cuts.try_emplace(name, kvHeads);
      }
    };
    module.walk([&](ShardingRuleOpInterface op) {
      if (std::optional<std::pair<int64_t, int64_t>> groups =
              op.getSubAxisGroups())
        visit(groups->second, groups->first);
    });
    if (cuts.empty())
      return;

    SmallVector<SplitAxis> splits;
    SmallVector<Attribute> names;
    SmallVector<int64_t> shape;
    for (auto [name, size] : llvm::zip(
             mesh.getAxisNames().getAsRange<StringAttr>(), mesh.getShape())) {
      auto cut = cuts.find(name);
      if (cut == cuts.end()) {
        names.push_back(name);
        shape.push_back(size);
        continue;
      }
      int64_t major = cut->second, minor = size / major;
      SplitAxis split{
          name,
          {getSubAxisName(name, 1, major), getSubAxisName(name, major, minor)}};
      for (StringAttr part : split.parts)
        if (mesh.getAxisIndex(part.getValue())) {
          mesh.emitError("cannot split axis \"")
              << name.getValue() << "\": the mesh has an axis \""
              << part.getValue() << "\" already";
          return signalPassFailure();
        }
      llvm::append_range(names, split.parts);
      shape.append({major, minor});
      splits.push_back(std::move(split));
    }
    expandAxes(module, splits);
    mesh.setAxisNamesAttr(ArrayAttr::get(&getContext(), names));
    mesh.setShape(shape);
  }
};

/// Parses a name getSubAxisName made: the axis, the block and the size.
std::optional<std::tuple<StringRef, int64_t, int64_t>>
parseSubAxisName(StringRef name) {
  auto [axis, rest] = name.rsplit(":(");
  if (rest.empty() || axis.empty())
    return std::nullopt;
  auto [pre, size] = rest.split(')');
  int64_t preValue, sizeValue;
  if (pre.getAsInteger(10, preValue) || size.getAsInteger(10, sizeValue))
    return std::nullopt;
  return std::make_tuple(axis, preValue, sizeValue);
}

struct MergeAxesPass : tessera::impl::MergeAxesPassBase<MergeAxesPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    dist::MeshOp mesh = getOnlyMesh(module);
    if (!mesh)
      return;
    // Runs of adjacent mesh axes that are the sub-axes of one axis, major
    // to minor, covering it from block 1.
    SmallVector<SplitAxis> splits;
    auto axisNames = mesh.getAxisNames().getAsRange<StringAttr>();
    SmallVector<StringAttr> all(axisNames.begin(), axisNames.end());
    for (size_t i = 0; i < all.size();) {
      auto first = parseSubAxisName(all[i].getValue());
      if (!first || std::get<1>(*first) != 1) {
        ++i;
        continue;
      }
      StringRef base = std::get<0>(*first);
      SplitAxis split{StringAttr::get(&getContext(), base), {all[i]}};
      int64_t covered = std::get<2>(*first);
      size_t j = i + 1;
      for (; j < all.size(); ++j) {
        auto next = parseSubAxisName(all[j].getValue());
        if (!next || std::get<0>(*next) != base ||
            std::get<1>(*next) != covered)
          break;
        covered *= std::get<2>(*next);
        split.parts.push_back(all[j]);
      }
      if (split.parts.size() > 1 && !mesh.getAxisIndex(base))
        splits.push_back(std::move(split));
      i = j;
    }
    if (splits.empty())
      return;

    // An axis merges back only when every list names all of its parts, in
    // order, or none of them.
    SmallVector<bool> mergeable(splits.size(), true);
    rewriteAxisLists(module, [&](ArrayRef<StringAttr> axes) {
      for (auto [index, split] : llvm::enumerate(splits)) {
        for (size_t at = 0; at < axes.size(); ++at) {
          if (!llvm::is_contained(split.parts, axes[at]))
            continue;
          if (axes.drop_front(at).take_front(split.parts.size()) !=
              ArrayRef<StringAttr>(split.parts))
            mergeable[index] = false;
          at += split.parts.size() - 1;
        }
      }
      return AxisNames(axes);
    });
    SmallVector<SplitAxis> merged;
    for (auto [index, split] : llvm::enumerate(splits))
      if (mergeable[index])
        merged.push_back(split);
    if (merged.empty())
      return;
    rewriteAxisLists(module, [&](ArrayRef<StringAttr> axes) {
      AxisNames result;
      for (size_t at = 0; at < axes.size(); ++at) {
        const SplitAxis *split = llvm::find_if(merged, [&](const SplitAxis &s) {
          return s.parts.front() == axes[at];
        });
        if (split == merged.end()) {
          result.push_back(axes[at]);
          continue;
        }
        result.push_back(split->axis);
        at += split->parts.size() - 1;
      }
      return result;
    });
    SmallVector<Attribute> names;
    SmallVector<int64_t> shape;
    for (size_t i = 0; i < all.size(); ++i) {
      const SplitAxis *split = llvm::find_if(merged, [&](const SplitAxis &s) {
        return s.parts.front() == all[i];
      });
      if (split == merged.end()) {
        names.push_back(all[i]);
        shape.push_back(mesh.getShape()[i]);
        continue;
      }
      int64_t size = 1;
      for (size_t k = 0; k < split->parts.size(); ++k)
        size *= mesh.getShape()[i + k];
      names.push_back(split->axis);
      shape.push_back(size);
      i += split->parts.size() - 1;
    }
    mesh.setAxisNamesAttr(ArrayAttr::get(&getContext(), names));
    mesh.setShape(shape);
  }
};

} // namespace
