//===- Apply.cpp - The auto-sharding ILP's solution, written back -----------===//
//
// A solution as the function's annotations, and a choice described for
// explain=true.
//
//===----------------------------------------------------------------------===//

#include "tessera/Search/ShardingSolver.h"

#include "dialects/Interfaces/CostOpInterface.h"
#include "dialects/Interfaces/ShardingRuleOpInterface.h"
#include "dialects/NN/IR/NNOps.h"
#include "tessera/Analysis/CostModel.h"
#include "tessera/Analysis/PipelineSchedule.h"
#include "tessera/Analysis/StageCuts.h"
#include "tessera/Analysis/TrainStep.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <chrono>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <numeric>
#include <vector>

using namespace mlir;
using namespace tessera;

/// does not use replicated, and what `annotation` had of the others kept.
static dist::ShardingAttr
getAnnotationAttr(const TensorSharding &solved,
                  const std::optional<TensorSharding> &annotation,
                  const MeshShape &mesh, ArrayRef<StringAttr> solvedAxes,
                  bool open) {
  bool allSolved = !open && llvm::all_of(mesh.getAxes(), [&](StringAttr axis) {
    return mesh.getAxisSize(axis) == 1 || llvm::is_contained(solvedAxes, axis);
  });
  TensorSharding sharding = solved;
  if (!allSolved) {
    for (auto [dim, dimSharding] : llvm::enumerate(sharding.dims)) {
      AxisList axes;
      bool isOpen = true;
      if (annotation) {
        for (StringAttr axis : annotation->dims[dim].axes)
          if (!llvm::is_contained(solvedAxes, axis))
            axes.push_back(axis);
        isOpen = annotation->dims[dim].isOpen;
      }
      llvm::append_range(axes, dimSharding.axes);
      dimSharding.axes = axes;
      dimSharding.isOpen = isOpen;
    }
    for (StringAttr axis : solvedAxes)
      if (!sharding.usesAxis(axis))
        sharding.replicated.push_back(axis);
    if (annotation)
      for (StringAttr axis : annotation->replicated)
        if (!llvm::is_contained(sharding.replicated, axis))
          sharding.replicated.push_back(axis);
  } else {
    for (DimSharding &dim : sharding.dims)
      dim.isOpen = false;
    sharding.replicated.clear();
  }
  return sharding.toAttr(mesh.getName());
}

void tessera::applyShardings(func::FuncOp function, dist::MeshOp meshOp,
                             const ShardingSolution &solution) {
  MeshShape mesh(meshOp);
  ArrayRef<StringAttr> axes = solution.axes;
  StringRef attrName = dist::DistDialect::kShardingAttrName;
  OpBuilder builder(function.getContext());
  for (const ShardingChoice &choice : solution.choices) {
    if (choice.op)
      continue;
    std::optional<TensorSharding> annotation;
    if (auto attr = function.getArgAttrOfType<dist::ShardingAttr>(
            choice.argument, attrName))
      annotation = TensorSharding::fromAttr(attr);
    function.setArgAttr(choice.argument, attrName,
                        getAnnotationAttr(choice.chosen.results.front(),
                                          annotation, mesh, axes,
                                          /*open=*/false));
  }
  for (const ShardingChoice &choice : solution.choices) {
    if (!choice.op ||
        isa<dist::ShardingConstraintOp, func::ReturnOp>(choice.op))
      continue;
    builder.setInsertionPointAfter(choice.op);
    for (auto [index, result] : llvm::enumerate(choice.op->getResults())) {
      auto type = dyn_cast<RankedTensorType>(result.getType());
      if (!type || type.getRank() == 0)
        continue;
      // Partial sums are completed as priced, and so is their gradient (an
      // unreduced constraint's gradient is its dims): a scattered result's
      // gradient is gathered before the op's backward reads it.
      Value value = result;
      if (index < choice.partialResults.size() &&
          choice.partialResults[index] != choice.chosen.results[index])
        value = dist::ShardingConstraintOp::create(
            builder, result.getLoc(), value,
            getAnnotationAttr(choice.partialResults[index], std::nullopt, mesh,
                              axes, solution.openToOtherAxes));
      auto constraint = dist::ShardingConstraintOp::create(
          builder, result.getLoc(), value,
          getAnnotationAttr(choice.chosen.results[index], std::nullopt, mesh,
                            axes, solution.openToOtherAxes));
      result.replaceAllUsesExcept(constraint, value == result
                                                  ? constraint.getOperation()
                                                  : value.getDefiningOp());
    }
  }
  for (auto [operand, sharding] : solution.operands) {
    Operation *user = operand->getOwner();
    builder.setInsertionPoint(user);
    auto constraint = dist::ShardingConstraintOp::create(
        builder, user->getLoc(), operand->get(),
        getAnnotationAttr(sharding, std::nullopt, mesh, axes,
                          solution.openToOtherAxes));
    operand->set(constraint);
  }
}

/// The results' shardings and the factors' axes of `alternative`:
/// `#dist.sharding<@mesh, [{}, {"tp"}]> (k={"tp"})`.
static std::string formatAlternative(const ShardingAlternative &alternative,
                                     dist::MeshOp mesh) {
  std::string text;
  llvm::raw_string_ostream os(text);
  auto meshName = FlatSymbolRefAttr::get(mesh.getSymNameAttr());
  llvm::interleaveComma(
      alternative.results, os,
      [&](const TensorSharding &sharding) { os << sharding.toAttr(meshName); });
  SmallVector<std::string> factors;
  for (auto [factor, axes] : llvm::enumerate(alternative.factorAxes))
    if (!axes.empty())
      factors.push_back(ShardingRule::getFactorName(factor) + "=" +
                        formatAxes(axes));
  if (!factors.empty())
    os << " (" << llvm::join(factors, ", ") << ")";
  return text;
}

std::string tessera::describeChoice(const ShardingChoice &choice,
                                    dist::MeshOp mesh) {
  std::string text = "sharded " + formatAlternative(choice.chosen, mesh) +
                     llvm::formatv(" at {0:F3} us", choice.seconds * 1e6).str();
  if (choice.follows)
    return text + "; follows its operand";
  if (!choice.runnerUp)
    return text + "; no other choice";
  return text + "; runner-up " + formatAlternative(*choice.runnerUp, mesh) +
         llvm::formatv(" costs {0:F3} us more",
                       choice.runnerUpExtraSeconds * 1e6)
             .str();
}
