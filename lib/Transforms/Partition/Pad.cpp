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
#include "llvm/ADT/TypeSwitch.h"

#include <limits>
#include <numeric>

namespace tessera {
#define GEN_PASS_DEF_PADPASS
#include "tessera/Transforms/Passes.h.inc"
} // namespace tessera

using namespace mlir;
using namespace tessera;

namespace {

/// What fills the padding of a value read by an op that needs it neutral.
enum class Fill { Zero, Lowest };

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
  Value mask(Operation *user, Value value, ArrayRef<int64_t> dims, Fill fill);
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
  TensorSharding getSharding(Value value);
  void scaleMean(nn::ReduceMeanOp op);
  void trackZeroPadding(Operation *op);

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
  std::map<std::tuple<void *, Fill, SmallVector<int64_t>>, Value> masks;
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

/// `elements` grown to `type` with zeros.
static DenseElementsAttr padElements(DenseElementsAttr elements,
                                     RankedTensorType type) {
  if (elements.isSplat())
    return DenseElementsAttr::get(type, elements.getSplatValue<Attribute>());
  ArrayRef<int64_t> before = elements.getType().getShape();
  SmallVector<Attribute> values(elements.getValues<Attribute>());
  SmallVector<Attribute> padded(
      type.getNumElements(),
      OpBuilder(type.getContext()).getZeroAttr(type.getElementType()));
  SmallVector<int64_t> index(before.size(), 0);
  for (Attribute value : values) {
    int64_t offset = 0;
    for (auto [dim, i] : llvm::enumerate(index))
      offset = offset * type.getDimSize(dim) + i;
    padded[offset] = value;
    for (int64_t dim = before.size() - 1; dim >= 0; --dim) {
      if (++index[dim] < before[dim])
        break;
      index[dim] = 0;
    }
  }
  return DenseElementsAttr::get(type, padded);
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
                           Fill fill) {
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
  double fillValue =
      fill == Fill::Zero ? 0.0 : -std::numeric_limits<double>::infinity();
  auto filler = nn::ConstantOp::create(
      builder, loc,
      DenseElementsAttr::get(
          type, Attribute(builder.getFloatAttr(elementType, fillValue))));
  auto masked = nn::SelectOp::create(builder, loc, real, value, filler);
  annotate(filler, sharding);
  annotate(masked, sharding);
  unpadded[masked] = SmallVector<int64_t>(before);
  if (fill == Fill::Zero &&
      llvm::all_of(llvm::enumerate(before), [&](auto dim) {
        return dim.value() == type.getDimSize(dim.index()) ||
               llvm::is_contained(dims, int64_t(dim.index()));
      }))
    zeroPadded.insert(masked);
  masks[key] = masked;
  return masked;
}

LogicalResult FunctionPadder::fixAttributes(Operation *op) {
  auto padsAny = [&]() {
    return llvm::any_of(op->getOperands(),
                        [&](Value v) { return isPadded(v); }) ||
           llvm::any_of(op->getResults(), [&](Value v) { return isPadded(v); });
  };
  if (auto constant = dyn_cast<nn::ConstantOp>(op)) {
    if (isPadded(constant.getResult()))
      constant.setValueAttr(
          padElements(cast<DenseElementsAttr>(constant.getValue()),
                      cast<RankedTensorType>(constant.getType())));
    return success();
  }
  if (auto slice = dyn_cast<nn::SliceOp>(op)) {
    if (!isPadded(slice.getResult()))
      return success();
    // A whole padded dim stays whole, padding included; a part of one is
    // sliced as written and grown to the padded size with zeros.
    Value result = slice.getResult();
    SmallVector<int64_t> before = unpadded.lookup(result);
    SmallVector<int64_t> limit(slice.getLimit()), shape(before);
    SmallVector<int64_t> grown;
    ArrayRef<int64_t> start = slice.getStart();
    auto type = cast<RankedTensorType>(result.getType());
    for (auto [dim, size] : llvm::enumerate(type.getShape())) {
      int64_t whole = isPadded(slice.getInput())
                          ? unpadded.lookup(slice.getInput())[dim]
                          : slice.getInput().getType().getDimSize(dim);
      if (size == before[dim])
        continue;
      if (start[dim] == 0 && limit[dim] == whole) {
        limit[dim] = shape[dim] = size;
        continue;
      }
      grown.push_back(dim);
    }
    slice.setLimit(limit);
    if (grown.empty())
      return success();
    result.setType(RankedTensorType::get(shape, type.getElementType()));
    TensorSharding sharding = getSharding(result);
    TensorSharding cut = sharding;
    for (int64_t dim : grown)
      cut.dims[dim].axes.clear();
    annotate(slice, cut);
    unpadded.erase(result);
    if (shape != before)
      unpadded[result] = before;
    builder.setInsertionPointAfter(slice);
    Value value = result;
    for (int64_t dim : grown)
      value = grow(value, dim, type.getDimSize(dim), sharding);
    result.replaceAllUsesExcept(value, value.getDefiningOp());
    unpadded[value] = before;
    return success();
  }
  if (auto scatter = dyn_cast<nn::EmbeddingGradOp>(op)) {
    scatter.setVocab(scatter.getType().getDimSize(0));
    return success();
  }
  if (auto concat = dyn_cast<nn::ConcatOp>(op)) {
    // Each input's padding is cut off the dim the inputs are joined along,
    // and the padding of the result follows them, zeros.
    int64_t dim = concat.getDim();
    auto grows = [&](Value v) {
      return isPadded(v) &&
             unpadded.lookup(v)[dim] !=
                 cast<RankedTensorType>(v.getType()).getDimSize(dim);
    };
    builder.setInsertionPoint(concat);
    int64_t joined = 0;
    for (OpOperand &input : concat->getOpOperands()) {
      Value value = input.get();
      if (grows(value))
        input.set(cutPadding(value, dim));
      joined += cast<RankedTensorType>(input.get().getType()).getDimSize(dim);
    }
    int64_t size = concat.getType().getDimSize(dim);
    if (joined == size)
      return success();
    TensorSharding sharding = getSharding(concat.getResult());
    sharding.unreduced.clear();
    sharding.dims[dim].axes.clear();
    SmallVector<int64_t> shape(concat.getType().getShape());
    shape[dim] = size - joined;
    concat->insertOperands(
        concat->getNumOperands(),
        {zeros(concat.getLoc(),
               RankedTensorType::get(shape, concat.getType().getElementType()),
               sharding)});
    return success();
  }
  if (isa<nn::DropoutOp, nn::RandomUniformOp>(op) && padsAny())
    return op->emitError("cannot pad random numbers: a mesh axis splits a dim "
                         "of them unevenly");
  auto hasDropout = [](auto attention) {
    return !attention.getDropout().isZero();
  };
  bool dropout = TypeSwitch<Operation *, bool>(op)
                     .Case<nn::AttentionOp, nn::AttentionGradOp>(hasDropout)
                     .Default(false);
  if (dropout && padsAny())
    return op->emitError("cannot pad attention with dropout: a mesh axis "
                         "splits a dim of it unevenly");
  return success();
}

/// The fill that makes padding of `factor`, of kind `kind`, harmless to
/// `op`'s operand `index`; nothing when it already is; failure when the op
/// cannot compute on it.
static FailureOr<std::optional<Fill>> getFill(Operation *op, FactorKind kind,
                                              unsigned index) {
  using Result = FailureOr<std::optional<Fill>>;
  std::optional<Fill> none;
  if (kind == FactorKind::Parallel)
    return Result(none);
  if (kind == FactorKind::Reduction)
    return TypeSwitch<Operation *, Result>(op)
        .Case<nn::DotOp, nn::ReduceSumOp, nn::ReduceMeanOp, nn::ScatterAddOp,
              nn::EmbeddingGradOp>([&](Operation *) {
          // Indices are never masked: what they pick is.
          bool isFloat = isa<FloatType>(
              cast<RankedTensorType>(op->getOperand(index).getType())
                  .getElementType());
          return Result(isFloat ? std::optional(Fill::Zero) : none);
        })
        .Case<nn::ReduceMaxOp>(
            [&](Operation *) { return Result(Fill::Lowest); })
        // Indices below the vocab never pick a padded row.
        .Case<nn::EmbeddingOp>([&](Operation *) { return Result(none); })
        .Default([&](Operation *) { return Result(failure()); });
  return TypeSwitch<Operation *, Result>(op)
      .Case<nn::SoftmaxOp, nn::LogSoftmaxOp, nn::CrossEntropyOp, nn::TopKOp>(
          [&](Operation *) {
            return Result(index == 0 ? std::optional(Fill::Lowest) : none);
          })
      // Real indices pick real elements; padded ones make padding. A causal
      // mask masks every padded key of a real query.
      .Case<nn::GatherOp, nn::ScatterAddOp, nn::OneHotOp, nn::EmbeddingGradOp,
            nn::IotaOp, nn::CausalMaskOp, nn::SliceOp, nn::ConcatOp,
            nn::MoeDispatchOp>([&](Operation *) { return Result(none); })
      .Default([&](Operation *) { return Result(failure()); });
}

LogicalResult FunctionPadder::maskOperands(Operation *op) {
  auto it = opFactors.find(op);
  if (it == opFactors.end())
    return success();
  const auto &[rule, factorNodes] = it->second;
  // The dims to mask of each operand, and with what.
  SmallVector<std::pair<SmallVector<int64_t>, std::optional<Fill>>> wanted(
      op->getNumOperands());
  for (auto [factor, node] : llvm::enumerate(factorNodes)) {
    if (!isPaddedNode(node))
      continue;
    FactorKind kind = rule.getFactors()[factor].kind;
    for (auto [index, dims] : llvm::enumerate(rule.getOperandFactors())) {
      for (auto [dim, factors] : llvm::enumerate(dims)) {
        if (!llvm::is_contained(factors, static_cast<int64_t>(factor)))
          continue;
        FailureOr<std::optional<Fill>> fill = getFill(op, kind, index);
        if (failed(fill))
          return op->emitError("cannot pad ")
                 << op->getName() << ": a mesh axis splits dim " << dim
                 << " of operand #" << index << " unevenly, which "
                 << "this op reads whole (" << stringifyFactorKind(kind)
                 << " factor of " << nodeSizes[node] << ")";
        if (!*fill)
          continue;
        wanted[index].first.push_back(dim);
        wanted[index].second = **fill;
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
      fill = Fill::Zero;
    }
  }
  for (auto [index, entry] : llvm::enumerate(wanted)) {
    auto &[dims, fill] = entry;
    Value value = op->getOperand(index);
    if (!fill || (*fill == Fill::Zero && zeroPadded.contains(value)))
      continue;
    llvm::sort(dims);
    dims.erase(llvm::unique(dims), dims.end());
    op->setOperand(index, mask(op, value, dims, *fill));
  }
  return success();
}

/// A mean over padded dims divides by their padded sizes: scaled back to the
/// real count.
void FunctionPadder::scaleMean(nn::ReduceMeanOp op) {
  SmallVector<int64_t> before = unpadded.lookup(op.getInput());
  if (before.empty())
    return;
  double scale = 1;
  for (int64_t dim : op.getDims())
    scale *= double(op.getInput().getType().getDimSize(dim)) / before[dim];
  if (scale == 1)
    return;
  builder.setInsertionPointAfter(op);
  auto type = cast<RankedTensorType>(op.getType());
  auto factor = nn::ConstantOp::create(
      builder, op.getLoc(),
      DenseElementsAttr::get(
          type, Attribute(builder.getFloatAttr(type.getElementType(), scale))));
  auto scaled = nn::MulOp::create(builder, op.getLoc(), op, factor);
  TensorSharding sharding = getSharding(op.getResult());
  sharding.unreduced.clear();
  annotate(factor, sharding);
  annotate(scaled, sharding);
  op.getResult().replaceAllUsesExcept(scaled, scaled);
  if (isPadded(op.getResult()))
    unpadded[scaled] = unpadded.lookup(op.getResult());
}

/// Ops that map zeros to zeros keep zero padding zero.
void FunctionPadder::trackZeroPadding(Operation *op) {
  if (op->getNumResults() != 1 || !isPadded(op->getResult(0)))
    return;
  auto zero = [&](Value v) { return !isPadded(v) || zeroPadded.contains(v); };
  bool keeps =
      TypeSwitch<Operation *, bool>(op)
          .Case<nn::AddOp, nn::SubOp, nn::MulOp, nn::MaxOp, nn::MinOp,
                nn::NegOp, nn::ReluOp, nn::GeluOp, nn::SiluOp, nn::TanhOp,
                nn::SinOp, nn::AbsOp, nn::ErfOp, nn::CastOp, nn::TransposeOp,
                nn::ReshapeOp, dist::ShardingConstraintOp>([&](Operation *) {
            return llvm::all_of(op->getOperands(), zero);
          })
          .Case<nn::SelectOp>([&](nn::SelectOp select) {
            return zero(select.getOnTrue()) && zero(select.getOnFalse());
          })
          .Case<nn::OneHotOp>([&](nn::OneHotOp oneHot) {
            return !isPadded(oneHot.getLabels());
          })
          .Default(false);
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
    if (auto mean = dyn_cast<nn::ReduceMeanOp>(op))
      scaleMean(mean);
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
