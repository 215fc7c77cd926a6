//===- Pad.cpp - Padding of unevenly split dims (--tessera-pad) -----------===//
//
// Makes every split dim of a propagated function divide by its mesh axes:
// each dim grows to a multiple of the groups that split it (or anything
// tied to it by an op) anywhere in the function, the padding is masked out
// of what reads a dim whole, and the function boundary records the shapes
// before padding. See Passes.td.
//
//===----------------------------------------------------------------------===//

#include "tessera/Transforms/Passes.h"

#include "dialects/Dist/IR/DistOps.h"
#include "dialects/Interfaces/OptimizerOpInterface.h"
#include "dialects/Interfaces/ShardingRuleOpInterface.h"
#include "dialects/NN/IR/NNOps.h"
#include "tessera/Analysis/IndexBound.h"
#include "tessera/Analysis/Sharding.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/IntEqClasses.h"

#include <limits>
#include <numeric>

namespace tessera {
#define GEN_PASS_DEF_PADPASS
#include "tessera/Transforms/Passes.h.inc"
} // namespace tessera

using namespace mlir;
using namespace tessera;

namespace {

/// A dim that an op sees as several factors (a reshape's merged dim): it is
/// padded as its major factor is, times the others' sizes; the others may
/// not be padded.
struct Product {
  unsigned merged;
  SmallVector<unsigned> factors;
  Operation *op;
};

/// Pads one function over one mesh. Every value dim and every factor of
/// every op is a node; a factor and the dims it alone makes up are one
/// class, which pads to one size.
class FunctionPadder {
public:
  FunctionPadder(func::FuncOp function, dist::MeshOp meshOp)
      : function(function), mesh(meshOp), builder(function.getContext()) {}

  LogicalResult run();

private:
  unsigned addNode(int64_t size);
  unsigned getNode(Value value, int64_t dim) const {
    return firstNode.lookup(value) + dim;
  }
  void addValue(Value value);
  void tieOp(Operation *op);
  /// Every dim `sharding` splits must divide by its group.
  void require(Value value, Attribute sharding);
  LogicalResult solve();
  int64_t getPaddedSize(unsigned node) const { return padded[classes[node]]; }
  bool isPaddedNode(unsigned node) const {
    return getPaddedSize(node) != nodeSizes[node];
  }
  bool isPadded(Value value) const { return unpadded.contains(value); }
  void retype(Value value);
  LogicalResult fixAttributes(Operation *op);
  LogicalResult maskOperands(Operation *op);
  /// `value` with its padding on `dims` set to `fill`, before `user`.
  Value mask(Operation *user, Value value, ArrayRef<int64_t> dims,
             PaddingFill fill);
  void annotate(Operation *op, const TensorSharding &sharding);
  /// Zeros of `type`, at the builder's point.
  Value zeros(Location loc, RankedTensorType type,
              const TensorSharding &sharding);
  /// `value` (at the builder's point) grown to `size` on `dim` with zeros
  /// after it, laid out as `sharding`.
  Value grow(Value value, int64_t dim, int64_t size,
             const TensorSharding &sharding);
  /// `value` (at the builder's point) without its padding on `dim`, whole on
  /// that dim.
  Value cutPadding(Value value, int64_t dim);
  /// PadContext::regrow.
  void regrow(OpResult result, ArrayRef<int64_t> dims);
  TensorSharding getSharding(Value value);
  void scaleMean(ShardingRuleOpInterface op);
  void trackZeroPadding(Operation *op);

  class OpContext;

  func::FuncOp function;
  MeshShape mesh;
  OpBuilder builder;

  SmallVector<int64_t> nodeSizes;
  /// The least common multiple of the groups that split the node.
  SmallVector<int64_t> nodeGroups;
  SmallVector<std::pair<unsigned, unsigned>> ties;
  SmallVector<Product> products;
  DenseMap<Value, unsigned> firstNode;
  /// The nodes of each op's factors, with its rule.
  DenseMap<Operation *, std::pair<ShardingRule, SmallVector<unsigned>>>
      opFactors;
  /// Ops with tensors and no rule: they may not touch padding.
  SmallVector<Operation *> ruleless;

  llvm::IntEqClasses classes;
  SmallVector<int64_t> padded;
  /// The shapes of padded values before padding.
  DenseMap<Value, SmallVector<int64_t>> unpadded;
  /// Padded values whose padding holds zeros.
  DenseSet<Value> zeroPadded;
  /// Masks made, by value, fill and dims.
  std::map<std::tuple<void *, PaddingFill, SmallVector<int64_t>>, Value> masks;
};

/// What an op whose attributes follow the padding asks of the padder
/// (ShardingRuleOpInterface::pad).
class FunctionPadder::OpContext final : public PadContext {
public:
  explicit OpContext(FunctionPadder &padder) : padder(padder) {}

  bool isPadded(Value value) const override { return padder.isPadded(value); }
  SmallVector<int64_t> getUnpaddedShape(Value value) const override {
    if (padder.isPadded(value))
      return padder.unpadded.lookup(value);
    return SmallVector<int64_t>(
        cast<RankedTensorType>(value.getType()).getShape());
  }
  Value createZeros(Location loc, RankedTensorType type, Value like,
                    int64_t wholeDim) override {
    TensorSharding sharding = padder.getSharding(like);
    sharding.unreduced.clear();
    sharding.dims[wholeDim].axes.clear();
    return padder.zeros(loc, type, sharding);
  }
  Value cutPadding(Value value, int64_t dim) override {
    return padder.cutPadding(value, dim);
  }
  void regrow(OpResult result, ArrayRef<int64_t> dims) override {
    padder.regrow(result, dims);
  }

private:
  FunctionPadder &padder;
};

} // namespace

unsigned FunctionPadder::addNode(int64_t size) {
  nodeSizes.push_back(size);
  nodeGroups.push_back(1);
  return nodeSizes.size() - 1;
}

void FunctionPadder::addValue(Value value) {
  auto type = dyn_cast<RankedTensorType>(value.getType());
  if (!type)
    return;
  firstNode[value] = nodeSizes.size();
  for (int64_t size : type.getShape())
    addNode(size);
}

void FunctionPadder::tieOp(Operation *op) {
  if (isa<dist::ShardingConstraintOp>(op)) {
    Value input = op->getOperand(0), result = op->getResult(0);
    for (int64_t dim = 0, e = cast<RankedTensorType>(input.getType()).getRank();
         dim < e; ++dim)
      ties.push_back({getNode(input, dim), getNode(result, dim)});
    return;
  }
  auto ruleOp = dyn_cast<ShardingRuleOpInterface>(op);
  if (!ruleOp) {
    if (!isa<func::ReturnOp>(op) &&
        (llvm::any_of(op->getOperandTypes(), llvm::IsaPred<RankedTensorType>) ||
         llvm::any_of(op->getResultTypes(), llvm::IsaPred<RankedTensorType>)))
      ruleless.push_back(op);
    return;
  }
  ShardingRule rule = ruleOp.getShardingRule();
  SmallVector<unsigned> factorNodes;
  for (const Factor &factor : rule.getFactors())
    factorNodes.push_back(addNode(factor.size));
  auto tie = [&](Value value, const TensorFactors &dims) {
    for (auto [dim, factors] : llvm::enumerate(dims)) {
      unsigned node = getNode(value, dim);
      if (factors.size() == 1) {
        ties.push_back({node, factorNodes[factors.front()]});
      } else if (factors.size() > 1) {
        Product &product = products.emplace_back();
        product.merged = node;
        product.op = op;
        for (int64_t factor : factors)
          product.factors.push_back(factorNodes[factor]);
      }
    }
  };
  for (auto [operand, dims] :
       llvm::zip(op->getOperands(), rule.getOperandFactors()))
    tie(operand, dims);
  for (auto [result, dims] :
       llvm::zip(op->getResults(), rule.getResultFactors()))
    tie(result, dims);
  opFactors[op] = {std::move(rule), std::move(factorNodes)};
}

void FunctionPadder::require(Value value, Attribute attr) {
  auto sharding = dyn_cast_or_null<dist::ShardingAttr>(attr);
  if (!sharding || !firstNode.contains(value))
    return;
  for (auto [dim, dimSharding] : llvm::enumerate(sharding.getDims())) {
    unsigned node = getNode(value, dim);
    nodeGroups[node] =
        std::lcm(nodeGroups[node], mesh.getGroupSize(dimSharding.getAxes()));
  }
}

LogicalResult FunctionPadder::solve() {
  classes.grow(nodeSizes.size());
  for (auto [a, b] : ties)
    classes.join(a, b);
  classes.compress();
  unsigned numClasses = classes.getNumClasses();
  SmallVector<int64_t> sizes(numClasses, -1), groups(numClasses, 1);
  for (auto [node, size] : llvm::enumerate(nodeSizes)) {
    unsigned c = classes[node];
    sizes[c] = size;
    groups[c] = std::lcm(groups[c], nodeGroups[node]);
  }
  // A merged dim's groups fall on its major factor, the part of them that
  // the other factors' sizes do not take.
  auto minorSize = [&](const Product &product) {
    int64_t size = 1;
    for (unsigned node : ArrayRef<unsigned>(product.factors).drop_front())
      size *= nodeSizes[node];
    return size;
  };
  for (bool changed = true; changed;) {
    changed = false;
    for (const Product &product : products) {
      unsigned merged = classes[product.merged],
               major = classes[product.factors.front()];
      int64_t rest =
          groups[merged] / std::gcd(groups[merged], minorSize(product));
      int64_t group = std::lcm(groups[major], rest);
      changed |= group != groups[major];
      groups[major] = group;
    }
  }
  padded.resize(numClasses);
  for (unsigned c = 0; c < numClasses; ++c)
    padded[c] = llvm::alignTo(sizes[c], groups[c]);
  for (size_t round = 0; round <= products.size(); ++round)
    for (const Product &product : products) {
      int64_t &merged = padded[classes[product.merged]];
      merged = std::max(merged, padded[classes[product.factors.front()]] *
                                    minorSize(product));
    }
  for (const Product &product : products) {
    for (unsigned node : ArrayRef<unsigned>(product.factors).drop_front())
      if (isPaddedNode(node))
        return product.op->emitError("cannot pad ")
               << product.op->getName() << ": a dim of "
               << nodeSizes[product.merged]
               << " elements is made of several factors and the minor one of "
               << nodeSizes[node] << " is split unevenly (only a dim's major "
               << "factor can grow)";
    int64_t asFactors =
        getPaddedSize(product.factors.front()) * minorSize(product);
    if (getPaddedSize(product.merged) != asFactors)
      return product.op->emitError("cannot pad ")
             << product.op->getName() << ": a dim of "
             << nodeSizes[product.merged]
             << " elements would grow to two sizes, " << asFactors
             << " as this op's factors and " << getPaddedSize(product.merged)
             << " as other ops see it (they split it differently, and "
                "unevenly)";
  }
  return success();
}

TensorSharding FunctionPadder::getSharding(Value value) {
  return getPropagatedSharding(function, value);
}

void FunctionPadder::annotate(Operation *op, const TensorSharding &sharding) {
  op->setAttr(dist::DistDialect::kShardingAttrName,
              builder.getArrayAttr({sharding.toAttr(mesh.getName())}));
}

void FunctionPadder::retype(Value value) {
  auto type = dyn_cast<RankedTensorType>(value.getType());
  if (!type)
    return;
  SmallVector<int64_t> shape;
  for (int64_t dim = 0; dim < type.getRank(); ++dim)
    shape.push_back(getPaddedSize(getNode(value, dim)));
  if (shape == type.getShape())
    return;
  unpadded[value] = SmallVector<int64_t>(type.getShape());
  value.setType(RankedTensorType::get(shape, type.getElementType()));
}

Value FunctionPadder::zeros(Location loc, RankedTensorType type,
                            const TensorSharding &sharding) {
  auto constant = nn::ConstantOp::create(
      builder, loc,
      DenseElementsAttr::get(type, builder.getZeroAttr(type.getElementType())));
  annotate(constant, sharding);
  return constant;
}

Value FunctionPadder::grow(Value value, int64_t dim, int64_t size,
                           const TensorSharding &sharding) {
  auto type = cast<RankedTensorType>(value.getType());
  TensorSharding whole = sharding;
  whole.unreduced.clear();
  whole.dims[dim].axes.clear();
  SmallVector<int64_t> shape(type.getShape());
  shape[dim] = size - type.getDimSize(dim);
  Value padding =
      zeros(value.getLoc(), RankedTensorType::get(shape, type.getElementType()),
            whole);
  shape[dim] = size;
  auto concat =
      nn::ConcatOp::create(builder, value.getLoc(),
                           RankedTensorType::get(shape, type.getElementType()),
                           ValueRange{value, padding}, dim);
  annotate(concat, sharding);
  return concat;
}

Value FunctionPadder::cutPadding(Value value, int64_t dim) {
  auto type = cast<RankedTensorType>(value.getType());
  SmallVector<int64_t> before = unpadded.lookup(value);
  SmallVector<int64_t> start(type.getRank(), 0), limit(type.getShape());
  limit[dim] = before[dim];
  TensorSharding sharding = getSharding(value);
  sharding.unreduced.clear();
  sharding.flat.clear();
  sharding.dims[dim].axes.clear();
  auto slice = nn::SliceOp::create(builder, value.getLoc(), value,
                                   builder.getDenseI64ArrayAttr(start),
                                   builder.getDenseI64ArrayAttr(limit));
  annotate(slice, sharding);
  if (limit != before)
    unpadded[slice] = before;
  return slice;
}

Value FunctionPadder::mask(Operation *user, Value value, ArrayRef<int64_t> dims,
                           PaddingFill fill) {
  auto key = std::make_tuple(value.getAsOpaquePointer(), fill,
                             SmallVector<int64_t>(dims));
  if (Value made = masks[key])
    return made;
  auto type = cast<RankedTensorType>(value.getType());
  SmallVector<int64_t> before = unpadded.lookup(value);
  Location loc = user->getLoc();
  builder.setInsertionPoint(user);
  TensorSharding sharding = getSharding(value);
  sharding.unreduced.clear();
  sharding.flat.clear();
  TensorSharding whole = TensorSharding::getReplicated(1);
  // Where the elements are real: the index below the unpadded size on every
  // masked dim, as an i1 vector per dim broadcast to the value's shape.
  Value real;
  for (int64_t dim : dims) {
    auto indices =
        RankedTensorType::get({type.getDimSize(dim)}, builder.getI64Type());
    auto iota = nn::IotaOp::create(builder, loc, indices, 0);
    auto bound = nn::ConstantOp::create(
        builder, loc,
        DenseElementsAttr::get(
            indices, Attribute(builder.getI64IntegerAttr(before[dim]))));
    auto below = nn::CompareOp::create(builder, loc, nn::ComparePredicate::lt,
                                       iota, bound);
    auto spread = nn::BroadcastOp::create(
        builder, loc,
        RankedTensorType::get(type.getShape(), builder.getI1Type()), below,
        builder.getDenseI64ArrayAttr({dim}));
    for (Operation *op :
         {iota.getOperation(), bound.getOperation(), below.getOperation()})
      annotate(op, whole);
    annotate(spread, sharding);
    if (!real) {
      real = spread;
      continue;
    }
    auto both = nn::SelectOp::create(builder, loc, real, spread, real);
    annotate(both, sharding);
    real = both;
  }
  auto elementType = cast<FloatType>(type.getElementType());
  double fillValue = fill == PaddingFill::Zero
                         ? 0.0
                         : -std::numeric_limits<double>::infinity();
  auto filler = nn::ConstantOp::create(
      builder, loc,
      DenseElementsAttr::get(
          type, Attribute(builder.getFloatAttr(elementType, fillValue))));
  auto masked = nn::SelectOp::create(builder, loc, real, value, filler);
  annotate(filler, sharding);
  annotate(masked, sharding);
  unpadded[masked] = SmallVector<int64_t>(before);
  if (fill == PaddingFill::Zero &&
      llvm::all_of(llvm::enumerate(before), [&](auto dim) {
        return dim.value() == type.getDimSize(dim.index()) ||
               llvm::is_contained(dims, int64_t(dim.index()));
      }))
    zeroPadded.insert(masked);
  masks[key] = masked;
  return masked;
}

void FunctionPadder::regrow(OpResult result, ArrayRef<int64_t> dims) {
  Operation *op = result.getOwner();
  auto type = cast<RankedTensorType>(result.getType());
  SmallVector<int64_t> before = unpadded.lookup(result);
  SmallVector<int64_t> shape(type.getShape());
  for (int64_t dim : dims)
    shape[dim] = before[dim];
  result.setType(RankedTensorType::get(shape, type.getElementType()));
  TensorSharding sharding = getSharding(result);
  TensorSharding cut = sharding;
  for (int64_t dim : dims)
    cut.dims[dim].axes.clear();
  annotate(op, cut);
  unpadded.erase(result);
  if (shape != before)
    unpadded[result] = before;
  builder.setInsertionPointAfter(op);
  Value value = result;
  for (int64_t dim : dims)
    value = grow(value, dim, type.getDimSize(dim), sharding);
  result.replaceAllUsesExcept(value, value.getDefiningOp());
  unpadded[value] = before;
}

LogicalResult FunctionPadder::fixAttributes(Operation *op) {
  // Random numbers drawn for a padded shape are not those of the shape as
  // written.
  auto random = dyn_cast<nn::RandomOpInterface>(op);
  if (random && random.drawsNumbers() &&
      (llvm::any_of(op->getOperands(), [&](Value v) { return isPadded(v); }) ||
       llvm::any_of(op->getResults(), [&](Value v) { return isPadded(v); })))
    return op->emitError("cannot pad random numbers: a mesh axis splits a dim "
                         "of them unevenly");
  if (auto ruleOp = dyn_cast<ShardingRuleOpInterface>(op)) {
    OpContext context(*this);
    ruleOp.pad(context, builder);
  }
  return success();
}

LogicalResult FunctionPadder::maskOperands(Operation *op) {
  auto it = opFactors.find(op);
  if (it == opFactors.end())
    return success();
  const auto &[rule, factorNodes] = it->second;
  auto ruleOp = cast<ShardingRuleOpInterface>(op);
  // The dims to mask of each operand, and with what.
  SmallVector<std::pair<SmallVector<int64_t>, PaddingFill>> wanted(
      op->getNumOperands(), {{}, PaddingFill::None});
  for (auto [factor, node] : llvm::enumerate(factorNodes)) {
    if (!isPaddedNode(node))
      continue;
    FactorKind kind = rule.getFactors()[factor].kind;
    for (auto [index, dims] : llvm::enumerate(rule.getOperandFactors())) {
      for (auto [dim, factors] : llvm::enumerate(dims)) {
        if (!llvm::is_contained(factors, static_cast<int64_t>(factor)))
          continue;
        FailureOr<PaddingFill> fill = ruleOp.getPaddingFill(index, kind);
        if (failed(fill))
          return op->emitError("cannot pad ")
                 << op->getName() << ": a mesh axis splits dim " << dim
                 << " of operand #" << index << " unevenly, which "
                 << "this op reads whole (" << stringifyFactorKind(kind)
                 << " factor of " << nodeSizes[node] << ")";
        if (*fill == PaddingFill::None)
          continue;
        wanted[index].first.push_back(dim);
        wanted[index].second = *fill;
      }
    }
  }
  // An optimizer's gradient is masked to zeros: the padding of the
  // parameter and its state then stays zero.
  if (auto optimizer = dyn_cast<OptimizerOpInterface>(op)) {
    OpOperand &gradient = optimizer.getGradientOperand();
    Value value = gradient.get();
    if (isPadded(value)) {
      auto &[dims, fill] = wanted[gradient.getOperandNumber()];
      dims.clear();
      SmallVector<int64_t> before = unpadded.lookup(value);
      for (auto [dim, size] : llvm::enumerate(before))
        if (size != cast<RankedTensorType>(value.getType()).getDimSize(dim))
          dims.push_back(dim);
      fill = PaddingFill::Zero;
    }
  }
  for (auto [index, entry] : llvm::enumerate(wanted)) {
    auto &[dims, fill] = entry;
    Value value = op->getOperand(index);
    if (fill == PaddingFill::None ||
        (fill == PaddingFill::Zero && zeroPadded.contains(value)))
      continue;
    llvm::sort(dims);
    dims.erase(llvm::unique(dims), dims.end());
    op->setOperand(index, mask(op, value, dims, fill));
  }
  return success();
}

/// A mean over padded dims (an op whose reduction factors combine as a
/// mean) divides by their padded sizes: scaled back to the real count.
void FunctionPadder::scaleMean(ShardingRuleOpInterface op) {
  if (op.getPartialCombiner() != PartialCombiner::Mean)
    return;
  Value input = op->getOperand(0);
  SmallVector<int64_t> before = unpadded.lookup(input);
  if (before.empty())
    return;
  const ShardingRule &rule = opFactors.find(op.getOperation())->second.first;
  double scale = 1;
  for (auto [dim, factors] : llvm::enumerate(rule.getOperandFactors()[0]))
    if (llvm::any_of(factors, [&](int64_t factor) {
          return rule.getFactors()[factor].kind == FactorKind::Reduction;
        }))
      scale *= double(cast<RankedTensorType>(input.getType()).getDimSize(dim)) /
               before[dim];
  if (scale == 1)
    return;
  builder.setInsertionPointAfter(op);
  auto type = cast<RankedTensorType>(op->getResult(0).getType());
  auto factor = nn::ConstantOp::create(
      builder, op.getLoc(),
      DenseElementsAttr::get(
          type, Attribute(builder.getFloatAttr(type.getElementType(), scale))));
  auto scaled =
      nn::MulOp::create(builder, op.getLoc(), op->getResult(0), factor);
  TensorSharding sharding = getSharding(op->getResult(0));
  sharding.unreduced.clear();
  annotate(factor, sharding);
  annotate(scaled, sharding);
  op->getResult(0).replaceAllUsesExcept(scaled, scaled);
  if (isPadded(op->getResult(0)))
    unpadded[scaled] = unpadded.lookup(op->getResult(0));
}

/// Ops that map zeros to zeros keep zero padding zero.
void FunctionPadder::trackZeroPadding(Operation *op) {
  if (op->getNumResults() != 1 || !isPadded(op->getResult(0)))
    return;
  auto padded = [&](Value v) { return isPadded(v); };
  auto zero = [&](Value v) { return !isPadded(v) || zeroPadded.contains(v); };
  bool keeps = false;
  if (isa<dist::ShardingConstraintOp>(op))
    keeps = llvm::all_of(op->getOperands(), zero);
  else if (auto ruleOp = dyn_cast<ShardingRuleOpInterface>(op))
    keeps = ruleOp.keepsZeroPadding(padded, zero);
  if (keeps)
    zeroPadded.insert(op->getResult(0));
}

LogicalResult FunctionPadder::run() {
  Block &body = function.getBody().front();
  for (BlockArgument arg : body.getArguments())
    addValue(arg);
  SmallVector<Operation *> ops;
  for (Operation &op : body) {
    ops.push_back(&op);
    for (Value result : op.getResults())
      addValue(result);
  }
  for (Operation *op : ops)
    tieOp(op);

  StringRef attrName = dist::DistDialect::kShardingAttrName;
  for (BlockArgument arg : body.getArguments())
    require(arg, function.getArgAttr(arg.getArgNumber(), attrName));
  Operation *terminator = body.getTerminator();
  for (auto [index, value] : llvm::enumerate(terminator->getOperands()))
    require(value, function.getResultAttr(index, attrName));
  for (Operation *op : ops) {
    if (auto constraint = dyn_cast<dist::ShardingConstraintOp>(op)) {
      require(constraint.getResult(), constraint.getSharding());
      continue;
    }
    if (auto perResult = dyn_cast_or_null<ArrayAttr>(op->getAttr(attrName)))
      for (auto [result, sharding] : llvm::zip(op->getResults(), perResult))
        require(result, sharding);
  }
  if (failed(solve()))
    return failure();
  if (llvm::none_of(llvm::seq<unsigned>(0, nodeSizes.size()),
                    [&](unsigned node) { return isPaddedNode(node); }))
    return success();

  // Integer data keeps the bound of its values: the real vocab, not the
  // padded table.
  SmallVector<int64_t> bounds;
  for (BlockArgument arg : body.getArguments())
    bounds.push_back(getIndexBound(arg));
  for (BlockArgument arg : body.getArguments())
    retype(arg);
  for (Operation *op : ops)
    for (Value result : op->getResults())
      retype(result);
  for (Operation *op : ruleless)
    if (llvm::any_of(op->getOperands(), [&](Value v) { return isPadded(v); }) ||
        llvm::any_of(op->getResults(), [&](Value v) { return isPadded(v); }))
      return op->emitError("cannot pad ")
             << op->getName()
             << ": it has no sharding rule and a "
                "mesh axis splits a dim of its tensors unevenly";

  // The runtime pads arguments with zeros.
  for (BlockArgument arg : body.getArguments())
    if (isPadded(arg))
      zeroPadded.insert(arg);
  for (Operation *op : ops) {
    if (failed(fixAttributes(op)) || failed(maskOperands(op)))
      return failure();
    if (auto ruleOp = dyn_cast<ShardingRuleOpInterface>(op))
      scaleMean(ruleOp);
    trackZeroPadding(op);
  }

  // The boundary keeps the shapes before padding: the runtime pads each
  // argument's pieces and cuts the results' padding off.
  for (auto [arg, bound] : llvm::zip(body.getArguments(), bounds))
    if (bound != getIndexBound(arg))
      function.setArgAttr(arg.getArgNumber(),
                          dist::DistDialect::kIndexBoundAttrName,
                          builder.getI64IntegerAttr(bound));
  StringRef unpaddedName = dist::DistDialect::kUnpaddedShapeAttrName;
  for (BlockArgument arg : body.getArguments())
    if (isPadded(arg))
      function.setArgAttr(arg.getArgNumber(), unpaddedName,
                          builder.getDenseI64ArrayAttr(unpadded.lookup(arg)));
  for (auto [index, value] : llvm::enumerate(terminator->getOperands()))
    if (isPadded(value))
      function.setResultAttr(
          index, unpaddedName,
          builder.getDenseI64ArrayAttr(unpadded.lookup(value)));
  function.setType(FunctionType::get(function.getContext(),
                                     body.getArgumentTypes(),
                                     terminator->getOperandTypes()));
  return success();
}

namespace {
struct PadPass : tessera::impl::PadPassBase<PadPass> {
  using PadPassBase::PadPassBase;

  void runOnOperation() override {
    if (failed(forEachMeshFunction(
            getOperation(), [](func::FuncOp function, dist::MeshOp mesh) {
              return FunctionPadder(function, mesh).run();
            })))
      signalPassFailure();
  }
};
} // namespace
