//===- ShardingTemplates.cpp - Megatron-LM, SP, CP and EP annotations ----===//
//
// The hand-written layouts of transformer parallelism, read from a model's
// dataflow rather than its names: Megatron-LM's tensor parallelism, its
// sequence parallelism, context parallelism and expert parallelism. The
// generators (lib/Models) annotate their models with them and the plan
// search (lib/Search) lays out its template plans with them.
//
//===----------------------------------------------------------------------===//

#include "tessera/Search/ShardingTemplates.h"

#include "dialects/Dist/IR/DistOps.h"
#include "dialects/NN/IR/NNOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseSet.h"

using namespace mlir;
using namespace tessera;

//===----------------------------------------------------------------------===//
// Megatron-LM annotations
//===----------------------------------------------------------------------===//

namespace {
/// A parameter's split: the dim over "tp" of each argument it is decided
/// for.
using MegatronDims = llvm::DenseMap<unsigned, int64_t>;
} // namespace

/// The parameter `value` reads (through transposes and casts), and the
/// parameter's dim that `dim` of `value` is.
static std::optional<std::pair<BlockArgument, int64_t>>
traceParameter(func::FuncOp function, Value value, int64_t dim) {
  while (true) {
    if (auto arg = dyn_cast<BlockArgument>(value)) {
      if (!function.getArgAttr(arg.getArgNumber(), nn::kParamAttrName))
        return std::nullopt;
      return std::make_pair(arg, dim);
    }
    if (auto transpose = value.getDefiningOp<nn::TransposeOp>()) {
      dim = transpose.getPermutation()[dim];
      value = transpose.getInput();
    } else if (auto cast = value.getDefiningOp<nn::CastOp>()) {
      value = cast.getInput();
    } else {
      return std::nullopt;
    }
  }
}

/// The parameter, and its dim, that `add` adds to one of `products` (a
/// value with a dim of note) on that dim: a bias broadcast onto a product.
static std::optional<std::pair<BlockArgument, int64_t>>
traceAddedBias(func::FuncOp function, nn::AddOp add,
               const llvm::DenseMap<Value, int64_t> &products) {
  for (auto [product, other] : {std::pair(add.getLhs(), add.getRhs()),
                                std::pair(add.getRhs(), add.getLhs())}) {
    auto dim = products.find(product);
    auto broadcast = other.getDefiningOp<nn::BroadcastOp>();
    if (dim == products.end() || !broadcast)
      continue;
    ArrayRef<int64_t> landing = broadcast.getDims();
    auto at = llvm::find(landing, dim->second);
    if (at == landing.end())
      continue;
    if (auto param = traceParameter(function, broadcast.getInput(),
                                    at - landing.begin()))
      return param;
  }
  return std::nullopt;
}

/// The dots whose products become the keys or values of a grouped-query
/// nn.attention (through reshapes, transposes and the rotary embedding's
/// elementwise ops, not through another dot).
static llvm::DenseSet<Operation *> getKeyValueProducts(func::FuncOp function) {
  llvm::DenseSet<Operation *> products;
  SmallVector<Value> work;
  function.walk([&](nn::AttentionOp attention) {
    if (attention.getKey().getType().getDimSize(1) !=
        attention.getQuery().getType().getDimSize(1))
      work.append({attention.getKey(), attention.getValue()});
  });
  llvm::DenseSet<Value> seen;
  while (!work.empty()) {
    Value value = work.pop_back_val();
    Operation *op = value.getDefiningOp();
    if (!op || !seen.insert(value).second)
      continue;
    if (isa<nn::DotOp>(op))
      products.insert(op);
    else if (!isa<nn::AttentionOp>(op))
      llvm::append_range(work, op->getOperands());
  }
  return products;
}

/// The dots whose products a router's nn.top_k ranks (through elementwise
/// ops and softmaxes, not through another dot): a mixture of experts'
/// routers, which stay whole.
static llvm::DenseSet<Operation *> getRouterProducts(func::FuncOp function) {
  llvm::DenseSet<Operation *> products;
  SmallVector<Value> work;
  function.walk([&](nn::TopKOp topK) { work.push_back(topK.getInput()); });
  llvm::DenseSet<Value> seen;
  while (!work.empty()) {
    Value value = work.pop_back_val();
    Operation *op = value.getDefiningOp();
    if (!op || !seen.insert(value).second)
      continue;
    if (isa<nn::DotOp>(op))
      products.insert(op);
    else
      llvm::append_range(work, op->getOperands());
  }
  return products;
}

/// Megatron-LM's tensor parallelism (Shoeybi et al. 2019) read from the
/// dataflow, not from names. In program order:
/// - a dot of a whole activation with a weight matrix (or a stack of them
///   that the dot batches over, a mixture's experts) is column-parallel:
///   the weight's last output dim over "tp", and what is computed from the
///   product is split (attention heads, GELU, SwiGLU's product);
/// - a dot of a split activation with a weight is row-parallel: the
///   weight's contracted dim over "tp"; its result is whole again (after
///   the all-reduce), as is what is computed from whole values only;
/// - a vector parameter added to a column-parallel product is split with
///   it;
/// - a mixture of experts' router stays whole, as does what it computes;
/// - the key and value weights of grouped-query attention are left to
///   propagation, which splits them as the attention's query heads split:
///   over "tp" when it divides the kv heads, else over the part of "tp"
///   that does (--tessera-split-axes), each kv head whole on the devices
///   of its query heads (Megatron-LM's replicated kv heads).
/// Embedding tables are split on the vocabulary with `vocabParallel`, a
/// tied LM head with them (its column-parallel split is the same), else
/// whole, also where the LM head reads them. A parameter decided twice
/// differently, or whose dim "tp" does not divide, stays whole, and what it
/// computes is whole.
static MegatronDims getMegatronDims(func::FuncOp function, int64_t tp,
                                    bool vocabParallel) {
  MegatronDims dims;
  llvm::DenseSet<unsigned> conflicts;
  auto decide = [&](BlockArgument param, int64_t dim) {
    auto type = cast<RankedTensorType>(param.getType());
    if (type.getDimSize(dim) % tp != 0 ||
        (!vocabParallel &&
         llvm::any_of(param.getUsers(), llvm::IsaPred<nn::EmbeddingOp>)))
      return false;
    unsigned index = param.getArgNumber();
    auto [it, inserted] = dims.try_emplace(index, dim);
    if (!inserted && it->second != dim)
      conflicts.insert(index);
    return !conflicts.contains(index);
  };
  // Values computed from a column-parallel product, and those products
  // with the dim the weight splits.
  llvm::DenseSet<Value> split;
  llvm::DenseMap<Value, int64_t> columnProducts;
  llvm::DenseSet<Operation *> keyValueProducts = getKeyValueProducts(function);
  llvm::DenseSet<Operation *> routerProducts = getRouterProducts(function);
  function.walk([&](Operation *op) {
    if (auto lookup = dyn_cast<nn::EmbeddingOp>(op); lookup && vocabParallel)
      if (auto param = traceParameter(function, lookup.getTable(), 0))
        decide(param->first, param->second);
    if (auto dot = dyn_cast<nn::DotOp>(op)) {
      ArrayRef<int64_t> contracting = dot.getRhsContractingDims();
      auto rhsType = cast<RankedTensorType>(dot.getRhs().getType());
      SmallVector<int64_t> free;
      for (int64_t dim = 0; dim < rhsType.getRank(); ++dim)
        if (!llvm::is_contained(dot.getRhsBatchingDims(), dim) &&
            !llvm::is_contained(contracting, dim))
          free.push_back(dim);
      bool weight = !free.empty() &&
                    traceParameter(function, dot.getRhs(), 0) &&
                    !traceParameter(function, dot.getLhs(), 0);
      if (weight && routerProducts.contains(dot))
        return;
      if (weight && split.contains(dot.getLhs())) {
        if (contracting.size() == 1)
          if (auto param =
                  traceParameter(function, dot.getRhs(), contracting[0]))
            decide(param->first, param->second);
        return;
      }
      if (weight && keyValueProducts.contains(dot)) {
        split.insert(dot.getResult());
        return;
      }
      if (weight) {
        auto param = traceParameter(function, dot.getRhs(), free.back());
        if (param && decide(param->first, param->second)) {
          split.insert(dot.getResult());
          columnProducts[dot.getResult()] = dot.getType().getRank() - 1;
        }
        return;
      }
    }
    if (auto add = dyn_cast<nn::AddOp>(op))
      if (auto param = traceAddedBias(function, add, columnProducts))
        decide(param->first, param->second);
    if (llvm::any_of(op->getOperands(),
                     [&](Value operand) { return split.contains(operand); }))
      split.insert(op->result_begin(), op->result_end());
  });
  for (unsigned index : conflicts)
    dims.erase(index);
  return dims;
}

void tessera::annotateMegatron(ModuleOp module, int64_t dp, int64_t tp,
                               bool vocabParallel) {
  MLIRContext *context = module.getContext();
  context->loadDialect<dist::DistDialect>();
  OpBuilder builder(context);
  for (auto mesh : llvm::make_early_inc_range(module.getOps<dist::MeshOp>()))
    mesh.erase();
  builder.setInsertionPointToStart(module.getBody());
  dist::MeshOp::create(builder, module.getLoc(), "mesh",
                       builder.getStrArrayAttr({"dp", "tp"}),
                       builder.getDenseI64ArrayAttr({dp, tp}));
  auto mesh = FlatSymbolRefAttr::get(context, "mesh");
  auto sharding = [&](ArrayRef<SmallVector<StringRef, 1>> dims) {
    SmallVector<dist::DimShardingAttr> dimAttrs;
    for (ArrayRef<StringRef> axes : dims) {
      SmallVector<StringAttr> names;
      for (StringRef axis : axes)
        names.push_back(builder.getStringAttr(axis));
      dimAttrs.push_back(dist::DimShardingAttr::get(context, names,
                                                    /*isOpen=*/false,
                                                    std::nullopt));
    }
    return dist::ShardingAttr::get(mesh, dimAttrs);
  };
  StringRef attrName = dist::DistDialect::kShardingAttrName;
  module.walk([&](func::FuncOp function) {
    for (unsigned i = 0; i < function.getNumResults(); ++i)
      function.removeResultAttr(i, builder.getStringAttr(attrName));
    MegatronDims split = getMegatronDims(function, tp, vocabParallel);
    for (BlockArgument arg : function.getArguments()) {
      unsigned index = arg.getArgNumber();
      function.removeArgAttr(index, attrName);
      auto type = dyn_cast<RankedTensorType>(arg.getType());
      if (!type || type.getRank() == 0)
        continue;
      auto param =
          function.getArgAttrOfType<StringAttr>(index, nn::kParamAttrName);
      if (!param) {
        // Data: the batch over "dp".
        SmallVector<SmallVector<StringRef, 1>> dims(type.getRank());
        dims[0] = {"dp"};
        function.setArgAttr(index, attrName, sharding(dims));
        continue;
      }
      if (auto dim = split.find(index); dim != split.end()) {
        SmallVector<SmallVector<StringRef, 1>> dims(type.getRank());
        dims[dim->second] = {"tp"};
        function.setArgAttr(index, attrName, sharding(dims));
      }
    }
  });
}

/// A dim split over `axes`, major to minor.
static dist::DimShardingAttr
getDimSharding(MLIRContext *context, ArrayRef<StringRef> axes, bool isOpen) {
  SmallVector<StringAttr> names;
  for (StringRef axis : axes)
    names.push_back(StringAttr::get(context, axis));
  return dist::DimShardingAttr::get(context, names, isOpen, std::nullopt);
}

/// Rebuilds each mesh of `module` with the axis `axis` of `size` devices
/// next to `neighbour`: before it or after it.
static void insertMeshAxis(ModuleOp module, StringRef axis, int64_t size,
                           StringRef neighbour, bool before) {
  OpBuilder builder(module.getContext());
  for (auto mesh : llvm::make_early_inc_range(module.getOps<dist::MeshOp>())) {
    SmallVector<StringRef> names;
    SmallVector<int64_t> sizes;
    for (auto [name, axisSize] :
         llvm::zip(mesh.getAxisNames().getAsValueRange<StringAttr>(),
                   mesh.getShape())) {
      if (before && name == neighbour) {
        names.push_back(axis);
        sizes.push_back(size);
      }
      names.push_back(name);
      sizes.push_back(axisSize);
      if (!before && name == neighbour) {
        names.push_back(axis);
        sizes.push_back(size);
      }
    }
    builder.setInsertionPoint(mesh);
    dist::MeshOp::create(builder, mesh.getLoc(), mesh.getSymName(),
                         builder.getStrArrayAttr(names),
                         builder.getDenseI64ArrayAttr(sizes));
    mesh.erase();
  }
}

/// Whether the module's mesh has a "cp" axis (annotateContextParallel).
static bool hasContextAxis(ModuleOp module) {
  return llvm::any_of(module.getOps<dist::MeshOp>(), [](dist::MeshOp mesh) {
    return mesh.getAxisIndex("cp").has_value();
  });
}

void tessera::annotateContextParallel(ModuleOp module, StringRef kind,
                                      int64_t cp) {
  MLIRContext *context = module.getContext();
  OpBuilder builder(context);
  // The mesh: "cp" between "dp" and "tp", so that "tp" stays the innermost
  // (fastest) axis, as Megatron-LM orders tp, cp, dp.
  insertMeshAxis(module, "cp", cp, "tp", /*before=*/true);
  auto mesh = FlatSymbolRefAttr::get(context, "mesh");
  StringRef attrName = dist::DistDialect::kShardingAttrName;
  auto dim = [&](ArrayRef<StringRef> axes, bool isOpen = false) {
    return getDimSharding(context, axes, isOpen);
  };
  module.walk([&](func::FuncOp function) {
    // The data ([batch, sequence, ...]): the sequence over "cp".
    for (BlockArgument arg : function.getArguments()) {
      unsigned index = arg.getArgNumber();
      auto type = dyn_cast<RankedTensorType>(arg.getType());
      auto sharding =
          function.getArgAttrOfType<dist::ShardingAttr>(index, attrName);
      if (!type || type.getRank() < 2 || !sharding ||
          function.getArgAttr(index, nn::kParamAttrName))
        continue;
      SmallVector<dist::DimShardingAttr> dims(sharding.getDims());
      dims[1] = dim({"cp"});
      function.setArgAttr(index, attrName, dist::ShardingAttr::get(mesh, dims));
    }
    // Ring: each attention passes the keys and values around "cp".
    if (kind == "ring")
      function.walk([](nn::AttentionOp attention) { attention.setRing(true); });
    // Ulysses: each attention's queries [batch, heads, sequence, d] with
    // the heads over "tp" and "cp", the sequence whole. The batch is left
    // open: it is split over "dp" and, with microbatches, over their axis.
    if (kind != "ulysses")
      return;
    function.walk([&](nn::AttentionOp attention) {
      Value query = attention.getQuery();
      builder.setInsertionPoint(attention);
      auto constraint = dist::ShardingConstraintOp::create(
          builder, attention.getLoc(), query,
          dist::ShardingAttr::get(mesh, {dim({}, /*isOpen=*/true),
                                         dim({"tp", "cp"}), dim({}), dim({})}));
      attention.getQueryMutable().assign(constraint);
    });
  });
}

namespace {
/// A mixture of experts' layout in a function, read from its dataflow.
struct ExpertLayout {
  /// The experts' parameters (the rhs a dot batches over, and vectors
  /// added to such products), with their experts dim.
  llvm::DenseMap<unsigned, int64_t> parameters;
  /// The values laid out by experts (the experts' products and what is
  /// computed from them elementwise or transposed), with their experts dim.
  llvm::DenseMap<Value, int64_t> dims;
  /// The values the experts read, and the experts' outputs other ops read.
  SmallVector<Value> inputs, outputs;
};
} // namespace

static ExpertLayout findExperts(func::FuncOp function) {
  ExpertLayout layout;
  llvm::DenseMap<unsigned, int64_t> &expertParams = layout.parameters;
  llvm::DenseMap<Value, int64_t> &expertDims = layout.dims;
  SmallVector<Value> &inputs = layout.inputs, &outputs = layout.outputs;
  function.walk([&](Operation *op) {
    if (auto dot = dyn_cast<nn::DotOp>(op)) {
      ArrayRef<int64_t> batching = dot.getRhsBatchingDims();
      std::optional<std::pair<BlockArgument, int64_t>> param;
      if (batching.size() == 1 && dot.getLhsBatchingDims()[0] == 0 &&
          !traceParameter(function, dot.getLhs(), 0))
        param = traceParameter(function, dot.getRhs(), batching[0]);
      if (param) {
        expertParams[param->first.getArgNumber()] = param->second;
        if (!expertDims.contains(dot.getLhs()) &&
            !llvm::is_contained(inputs, dot.getLhs()))
          inputs.push_back(dot.getLhs());
        expertDims[dot.getResult()] = 0;
        return;
      }
      for (Value operand : dot->getOperands())
        if (expertDims.contains(operand) &&
            !llvm::is_contained(outputs, operand))
          outputs.push_back(operand);
      return;
    }
    // A vector added to an experts' product: split with it.
    if (auto add = dyn_cast<nn::AddOp>(op))
      if (auto param = traceAddedBias(function, add, expertDims))
        expertParams[param->first.getArgNumber()] = param->second;
    // Elementwise ops and transposes keep the experts dim.
    for (Value operand : op->getOperands()) {
      auto expertDim = expertDims.find(operand);
      if (expertDim == expertDims.end() || op->getNumResults() != 1)
        continue;
      int64_t result = expertDim->second;
      if (auto transpose = dyn_cast<nn::TransposeOp>(op))
        result = llvm::find(transpose.getPermutation(), result) -
                 transpose.getPermutation().begin();
      else if (!op->hasTrait<OpTrait::SameOperandsAndResultType>())
        continue;
      expertDims[op->getResult(0)] = result;
    }
  });
  return layout;
}

llvm::DenseMap<unsigned, int64_t>
tessera::getExpertParameters(func::FuncOp function) {
  return findExperts(function).parameters;
}

void tessera::annotateExpertParallel(ModuleOp module, int64_t ep) {
  MLIRContext *context = module.getContext();
  // The mesh: "ep" right after "dp", as Megatron-LM orders tp, cp, ep, dp
  // from the fastest: the devices of an expert group are neighbours.
  insertMeshAxis(module, "ep", ep, "dp", /*before=*/false);
  auto mesh = FlatSymbolRefAttr::get(context, "mesh");
  StringRef attrName = dist::DistDialect::kShardingAttrName;
  auto dim = [&](ArrayRef<StringRef> axes, bool isOpen = false) {
    return getDimSharding(context, axes, isOpen);
  };
  module.walk([&](func::FuncOp function) {
    ExpertLayout experts = findExperts(function);
    for (BlockArgument arg : function.getArguments()) {
      unsigned index = arg.getArgNumber();
      auto type = dyn_cast<RankedTensorType>(arg.getType());
      if (!type || type.getRank() == 0)
        continue;
      auto sharding =
          function.getArgAttrOfType<dist::ShardingAttr>(index, attrName);
      SmallVector<dist::DimShardingAttr> dims;
      if (sharding)
        dims.assign(sharding.getDims().begin(), sharding.getDims().end());
      else
        dims.assign(type.getRank(), dim({}));
      if (auto expertDim = experts.parameters.find(index);
          expertDim != experts.parameters.end()) {
        // An expert's weights live on the devices of its "ep" group.
        dims[expertDim->second] = dim({"ep"});
      } else if (sharding && !function.getArgAttr(index, nn::kParamAttrName)) {
        // The data: the batch over "dp" and "ep".
        SmallVector<StringRef> axes;
        for (StringAttr axis : dims[0].getAxes())
          axes.push_back(axis.getValue());
        if (!llvm::is_contained(axes, "ep"))
          axes.push_back("ep");
        dims[0] = dim(axes);
      } else {
        continue;
      }
      function.setArgAttr(index, attrName, dist::ShardingAttr::get(mesh, dims));
    }
    // The experts read their tokens split by experts over "ep", and the
    // combine reads the experts whole: an all_to_all over "ep" each way.
    // The other dims are left open (the tokens keep "dp" and, with
    // microbatches, their axis).
    auto constrain = [&](Value value, int64_t expertDim,
                         ArrayRef<StringRef> experts) {
      auto type = cast<RankedTensorType>(value.getType());
      SmallVector<dist::DimShardingAttr> dims(type.getRank(),
                                              dim({}, /*isOpen=*/true));
      dims[expertDim] = dim(experts);
      OpBuilder at = OpBuilder::atBlockBegin(value.getParentBlock());
      at.setInsertionPointAfterValue(value);
      auto constraint = dist::ShardingConstraintOp::create(
          at, value.getLoc(), value, dist::ShardingAttr::get(mesh, dims));
      value.replaceAllUsesExcept(constraint, constraint);
    };
    for (Value input : experts.inputs)
      constrain(input, 0, {"ep"});
    for (Value output : experts.outputs)
      constrain(output, experts.dims.lookup(output), {});
  });
}

void tessera::annotateSequenceParallel(ModuleOp module) {
  MLIRContext *context = module.getContext();
  auto mesh = FlatSymbolRefAttr::get(context, "mesh");
  StringRef attrName = dist::DistDialect::kShardingAttrName;
  auto dim = [&](ArrayRef<StringRef> axes, bool isOpen = false) {
    return getDimSharding(context, axes, isOpen);
  };
  StringAttr tp = StringAttr::get(context, "tp");
  // [batch as the data has it, sequence over `sequence`, hidden over
  // `hidden`], pending sums over `unreduced`. The batch stays open: it is
  // split over "dp" and, with microbatches, over their axis.
  auto constrain = [&](Value value, ArrayRef<StringRef> sequence,
                       ArrayRef<StringRef> hidden,
                       ArrayRef<StringAttr> unreduced = {}) {
    OpBuilder builder = OpBuilder::atBlockBegin(value.getParentBlock());
    builder.setInsertionPointAfterValue(value);
    auto constraint = dist::ShardingConstraintOp::create(
        builder, value.getLoc(), value,
        dist::ShardingAttr::get(
            context, mesh,
            {dim({}, /*isOpen=*/true), dim(sequence), dim(hidden)}, {},
            unreduced, {}));
    value.replaceAllUsesExcept(constraint, constraint);
  };
  module.walk([&](func::FuncOp function) {
    // Whether `dot` reads a weight (a parameter, through transposes and
    // casts) split over "tp" on the dim it contracts (row-parallel:
    // `contracted`) or on another (column-parallel).
    auto splitsWeight = [&](nn::DotOp dot, bool contracted) {
      ArrayRef<int64_t> contracting = dot.getRhsContractingDims();
      if (contracting.size() != 1 || !dot.getRhsBatchingDims().empty())
        return false;
      int64_t rank = cast<RankedTensorType>(dot.getRhs().getType()).getRank();
      for (int64_t dim = 0; dim < rank; ++dim) {
        if ((dim == contracting[0]) != contracted)
          continue;
        auto param = traceParameter(function, dot.getRhs(), dim);
        auto sharding = param ? function.getArgAttrOfType<dist::ShardingAttr>(
                                    param->first.getArgNumber(), attrName)
                              : nullptr;
        if (sharding &&
            llvm::is_contained(sharding.getDims()[param->second].getAxes(), tp))
          return true;
      }
      return false;
    };
    SmallVector<Value> residuals, gathered;
    SmallVector<nn::DotOp> rowParallel;
    function.walk([&](Operation *op) {
      if (isa<nn::LayerNormOp, nn::RmsNormOp>(op)) {
        Value input = op->getOperand(0), output = op->getResult(0);
        if (cast<RankedTensorType>(output.getType()).getRank() != 3)
          return;
        if (!llvm::is_contained(residuals, input))
          residuals.push_back(input);
        if (llvm::any_of(output.getUsers(), [&](Operation *user) {
              auto dot = dyn_cast<nn::DotOp>(user);
              return dot && dot.getLhs() == output &&
                     splitsWeight(dot, /*contracted=*/false);
            }))
          gathered.push_back(output);
      } else if (auto dot = dyn_cast<nn::DotOp>(op);
                 dot && dot.getType().getRank() == 3 &&
                 splitsWeight(dot, /*contracted=*/true)) {
        rowParallel.push_back(dot);
      }
    });
    // The residual stream, split on the sequence: the layer norms and
    // residual adds run on a piece of it, as does the LM head. Under
    // context parallelism "whole" is the device's piece over "cp", and
    // "tp" splits that further.
    SmallVector<StringRef> whole, piece = {"tp"};
    if (hasContextAxis(module)) {
      whole = {"cp"};
      piece = {"cp", "tp"};
    }
    for (Value residual : residuals)
      constrain(residual, piece, {});
    // A layer norm's output that a column-parallel region reads is made on a
    // piece of the sequence and gathered whole (Megatron's g); its gradient,
    // the region's partial sums, is reduce-scattered back onto the piece.
    // (Each constraint goes right after the value: the second one written
    // comes first.)
    for (Value output : gathered) {
      constrain(output, whole, {});
      constrain(output, piece, {});
    }
    // A row-parallel region's partial sums are reduce-scattered onto the
    // sequence (Megatron's g-bar), and their gradient gathered whole.
    for (nn::DotOp dot : rowParallel)
      constrain(dot.getResult(), whole, {}, {tp});
  });
}
