//===- ModelShape.cpp - A model's shape read from its graph ---------------===//
//
// What the search reads of a model's program: its transformer shape, its
// ops as the cost model prices them, the items the pipeline pass may cut
// between, and what its train step keeps for the backward.
//
//===----------------------------------------------------------------------===//

#include "PlannerInternal.h"

#include "dialects/Dist/IR/DistOps.h"
#include "dialects/Interfaces/CostOpInterface.h"
#include "dialects/NN/IR/NNOps.h"
#include "tessera/Analysis/MemoryPlan.h"
#include "tessera/Analysis/Sharding.h"
#include "tessera/Analysis/StageCuts.h"
#include "tessera/Analysis/TrainStep.h"
#include "tessera/Search/ShardingTemplates.h"
#include "tessera/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FormatVariadic.h"

#include <set>

using namespace mlir;
using namespace tessera;
using namespace tessera::planner;

SmallVector<Operation *>
planner::getBodyOps(func::FuncOp function,
                    DenseMap<Operation *, int64_t> &position) {
  SmallVector<Operation *> ops = llvm::map_to_vector(
      function.front().without_terminator(), [](Operation &op) { return &op; });
  for (auto [index, op] : llvm::enumerate(ops))
    position[op] = index;
  return ops;
}

bool planner::isModelOp(Operation *op) {
  return !isa<dist::DistDialect>(op->getDialect());
}

SmallVector<Operation *> planner::getModelOps(func::FuncOp function) {
  SmallVector<Operation *> ops;
  for (Operation &op : function.front().without_terminator())
    if (isModelOp(&op))
      ops.push_back(&op);
  return ops;
}

double planner::getValueBytes(Value value) {
  auto type = dyn_cast<RankedTensorType>(value.getType());
  return type ? type.getNumElements() *
                    std::max<int64_t>(1, type.getElementTypeBitWidth() / 8)
              : 0;
}

/// The train step of `module` (a copy), or null where none is built of it.
static OwningOpRef<ModuleOp> buildTrainStep(ModuleOp module) {
  OwningOpRef<ModuleOp> copy = module.clone();
  ScopedDiagnosticHandler quiet(copy->getContext(),
                                [](Diagnostic &) { return success(); });
  PassManager pm(copy->getContext());
  pm.addPass(createTrainStepPass());
  if (mlir::failed(pm.run(*copy)))
    return nullptr;
  // The backward as compiled: its elementwise chains fused, their
  // temporaries never in memory, and what they read of the forward's
  // broadcasts read from the broadcasts' inputs. The step begins with the
  // model's ops, which stay as they are.
  func::FuncOp model = getModelFunction(module);
  func::FuncOp step = getModelFunction(*copy);
  if (!model || !step)
    return nullptr;
  int64_t modelOps = llvm::range_size(model.front().without_terminator());
  if (static_cast<int64_t>(step.front().getOperations().size()) <= modelOps)
    return nullptr;
  fuseElementwise(step.front(), &*std::next(step.front().begin(), modelOps));
  return copy;
}

/// `value` as the model's op made it: an annotation's result is its input.
static Value getModelValue(Value value) {
  while (value.getDefiningOp() && !isModelOp(value.getDefiningOp()) &&
         value.getDefiningOp()->getNumOperands() > 0)
    value = value.getDefiningOp()->getOperand(0);
  return value;
}

/// What the train step of `function` keeps for its backward on one device,
/// nothing recomputed (the values of its forward ops, constants aside, that
/// a backward op reads: ModelShape::keptValues), and the bytes of those
/// made in the repeated blocks' spans (their data ops, and what those read
/// of parameters and constants made there: a Llama's rotary tables
/// broadcast to the heads), over the blocks. None where the model's ops are
/// not the train step's forward.
static std::optional<std::pair<SmallVector<KeptValue>, double>>
getKeptValues(ModuleOp module, func::FuncOp function) {
  SmallVector<SmallVector<Operation *>> blocks = findRepeatedBlocks(function);
  if (blocks.empty())
    return std::nullopt;
  DenseMap<Operation *, int64_t> position;
  SmallVector<Operation *> ops = getBodyOps(function, position);
  OwningOpRef<ModuleOp> copy = buildTrainStep(module);
  if (!copy)
    return std::nullopt;
  // The train step's forward is the model's ops, in their order.
  llvm::SetVector<Operation *> forward = getForwardOps(getModelFunction(*copy));
  if (forward.size() != ops.size())
    return std::nullopt;
  SmallVector<bool> inBlock(ops.size(), false);
  for (ArrayRef<Operation *> block : blocks)
    for (int64_t index = position.lookup(block.front());
         index <= position.lookup(block.back()); ++index)
      inBlock[index] = true;
  // Each op's index among the model's ops (annotations aside).
  SmallVector<int64_t> modelIndex(ops.size(), -1);
  DenseMap<Operation *, int64_t> stepPosition;
  int64_t models = 0;
  for (auto [index, op] : llvm::enumerate(ops)) {
    if (forward[index]->getName() != op->getName())
      return std::nullopt;
    stepPosition[forward[index]] = index;
    if (isModelOp(op))
      modelIndex[index] = models++;
  }
  SmallVector<KeptValue> kept;
  llvm::DenseSet<std::pair<int64_t, unsigned>> recorded;
  double blockBytes = 0;
  for (auto [index, made] : llvm::enumerate(forward)) {
    // A constant is the program's, not an activation buffer.
    if (made->hasTrait<OpTrait::ConstantLike>())
      continue;
    for (Value result : made->getResults()) {
      if (!isa<RankedTensorType>(result.getType()) ||
          llvm::none_of(result.getUsers(), [&](Operation *user) {
            return !forward.contains(user) && !isa<func::ReturnOp>(user);
          }))
        continue;
      if (inBlock[index])
        blockBytes += getValueBytes(result);
      auto producer = dyn_cast<OpResult>(getModelValue(result));
      if (!producer || !stepPosition.count(producer.getOwner()))
        continue;
      int64_t model = modelIndex[stepPosition.lookup(producer.getOwner())];
      if (model >= 0 &&
          recorded.insert({model, producer.getResultNumber()}).second)
        kept.push_back({model, producer.getResultNumber(),
                        producer.getOwner()->getName()});
    }
  }
  return std::pair(std::move(kept), blockBytes / blocks.size());
}

TrainStepActivations tessera::getTrainStepActivations(ModuleOp module) {
  func::FuncOp function = getModelFunction(module);
  if (!function)
    return {};
  SmallVector<Operation *> ops = getModelOps(function);
  OwningOpRef<ModuleOp> copy = buildTrainStep(module);
  if (!copy)
    return {};
  // The train step begins with the model's ops, in their order; then come
  // its backward and the optimizer's updates.
  func::FuncOp step = getModelFunction(*copy);
  SmallVector<Operation *> stepOps;
  DenseMap<Operation *, int64_t> position;
  for (Operation &op : step.front()) {
    position[&op] = stepOps.size();
    stepOps.push_back(&op);
  }
  int64_t modelOps = llvm::range_size(function.front().without_terminator());
  if (static_cast<int64_t>(stepOps.size()) <= modelOps)
    return {};
  DenseMap<Operation *, int64_t> index;
  for (Operation *op : ArrayRef(stepOps).take_front(modelOps))
    if (isModelOp(op)) {
      if (static_cast<size_t>(index.size()) >= ops.size() ||
          op->getName() != ops[index.size()]->getName())
        return {};
      index.try_emplace(op, index.size());
    }
  // The model op that made `value` (through annotations), if any.
  auto getProducer = [&](Value value) -> std::optional<OpResult> {
    auto producer = dyn_cast<OpResult>(getModelValue(value));
    if (!producer || !index.count(producer.getOwner()))
      return std::nullopt;
    return producer;
  };
  TrainStepActivations activations;
  activations.kept.assign(ops.size(), 0);
  for (Operation *op : ArrayRef(stepOps).take_front(modelOps)) {
    // A constant is the program's, not an activation buffer.
    if (op->hasTrait<OpTrait::ConstantLike>())
      continue;
    for (Value result : op->getResults()) {
      bool read = llvm::any_of(result.getUsers(), [&](Operation *user) {
        return position.lookup(user) >= modelOps;
      });
      if (std::optional<OpResult> producer = getProducer(result);
          read && producer && producer->getResultNumber() < 64)
        activations.kept[index.lookup(producer->getOwner())] |=
            uint64_t(1) << producer->getResultNumber();
    }
  }
  // The updates (what the results the step marks nn.updates return) and
  // what they read live to the end: the gradients the plan prices as state.
  Operation *terminator = step.front().getTerminator();
  int64_t updates = stepOps.size() - 1;
  for (OpOperand &operand : terminator->getOpOperands())
    if (step.getResultAttr(operand.getOperandNumber(), "nn.updates"))
      if (Operation *def = operand.get().getDefiningOp())
        updates = std::min(updates, position.lookup(def));
  // The backward, in order: what it makes lives to its last reader; each
  // op runs the part of the model op whose values it last read.
  double live = 0;
  int64_t part = ops.size() - 1;
  std::multimap<int64_t, double> frees;
  for (int64_t i = modelOps; i < updates; ++i) {
    Operation *op = stepOps[i];
    TrainStepActivations::BackwardOp &traced =
        activations.backward.emplace_back();
    DenseSet<Value> read;
    for (Value operand : op->getOperands()) {
      std::optional<OpResult> producer = getProducer(operand);
      if (!producer || !read.insert(operand).second)
        continue;
      part = index.lookup(producer->getOwner());
      if (llvm::all_of(operand.getUsers(), [&](Operation *user) {
            return position.lookup(user) <= i;
          }))
        traced.freed.emplace_back(part, getValueBytes(operand));
    }
    for (Value result : op->getResults()) {
      int64_t last = i;
      for (Operation *user : result.getUsers())
        last = std::max(last, position.lookup(user));
      if (last >= updates)
        continue;
      live += getValueBytes(result);
      frees.emplace(last, getValueBytes(result));
    }
    traced.part = part;
    traced.liveBytes = live;
    for (auto range = frees.equal_range(i); range.first != range.second;
         ++range.first)
      live -= range.first->second;
  }
  return activations;
}

DecoderItems::DecoderItems(func::FuncOp function) {
  SmallVector<SmallVector<Operation *>> blocks = findRepeatedBlocks(function);
  DenseMap<Operation *, int64_t> position;
  ops = getBodyOps(function, position);
  SmallVector<int64_t> boundaries = getLayerBoundaries(ops);
  int64_t end = 0;
  for (ArrayRef<Operation *> block : blocks) {
    int64_t first = position.lookup(block.front());
    int64_t last = position.lookup(block.back()) + 1;
    SmallVector<int64_t> cuts = llvm::to_vector(llvm::make_filter_range(
        boundaries, [&](int64_t cut) { return cut > first && cut < last; }));
    if (first < end || cuts.size() != 1) {
      starts.clear();
      return;
    }
    // The ops between blocks (none in a GPT) go with the next one.
    starts.push_back(end);
    starts.push_back(cuts.front());
    end = last;
  }
  if (!starts.empty())
    starts.push_back(end);
}

/// What the pipeline pass balances, per decoder item: the forward's FLOPs
/// (the pass adds a launch per op, which only breaks ties).
static SmallVector<double> getItemFlops(func::FuncOp function) {
  DecoderItems items(function);
  SmallVector<double> costs;
  for (size_t item = 0; item < items.size(); ++item) {
    double cost = 0;
    for (int64_t i = items.starts[item]; i < items.getEnd(item); ++i)
      if (auto costOp = dyn_cast<CostOpInterface>(items.ops[i]))
        cost += costOp.getFlops();
    costs.push_back(cost);
  }
  return costs;
}

/// The GEMM shape of `dot`: its batch dims, the rest of lhs (m), of rhs (n),
/// and the contracted dims (k).
static GemmShape getGemmShape(nn::DotOp dot) {
  ArrayRef<int64_t> lhs = dot.getLhs().getType().getShape();
  ArrayRef<int64_t> rhs = dot.getRhs().getType().getShape();
  GemmShape shape;
  for (auto [dim, size] : llvm::enumerate(lhs)) {
    int64_t index = dim;
    if (llvm::is_contained(dot.getLhsBatchingDims(), index))
      shape.batch *= size;
    else if (llvm::is_contained(dot.getLhsContractingDims(), index))
      shape.k *= size;
    else
      shape.m *= size;
  }
  for (auto [dim, size] : llvm::enumerate(rhs)) {
    int64_t index = dim;
    if (!llvm::is_contained(dot.getRhsBatchingDims(), index) &&
        !llvm::is_contained(dot.getRhsContractingDims(), index))
      shape.n *= size;
  }
  return shape;
}

SmallVector<OpCost> tessera::getOpCosts(func::FuncOp function, int64_t hidden,
                                        int64_t seq) {
  DenseMap<Operation *, int64_t> position;
  SmallVector<Operation *> ops = getBodyOps(function, position);
  llvm::SmallPtrSet<Operation *, 32> data, inBlock;
  for (Operation *op : getDataOps(function, ops))
    data.insert(op);
  for (ArrayRef<Operation *> block : findRepeatedBlocks(function))
    inBlock.insert(block.begin(), block.end());
  auto isScores = [&](Type type) {
    auto tensor = dyn_cast<RankedTensorType>(type);
    return tensor && tensor.getRank() >= 2 &&
           tensor.getShape().take_back(2) == ArrayRef<int64_t>{seq, seq};
  };
  SmallVector<OpCost> costs;
  for (Operation *op : ops) {
    auto costOp = dyn_cast<CostOpInterface>(op);
    if (!costOp || isa<nn::ReshapeOp, nn::BroadcastOp, nn::ConstantOp>(op))
      continue;
    OpCost cost;
    cost.name = op->getName().getStringRef().str();
    cost.flops = costOp.getFlops();
    cost.bytes = costOp.getBytesAccessed();
    cost.perBatch = data.contains(op);
    cost.inBlock = inBlock.contains(op);
    cost.scores = llvm::any_of(op->getOperandTypes(), isScores) ||
                  llvm::any_of(op->getResultTypes(), isScores);
    if (auto dot = dyn_cast<nn::DotOp>(op)) {
      cost.kind = OpClass::Gemm;
      cost.gemm = getGemmShape(dot);
      // Megatron's layout splits every weight's product over TP, the LM
      // head's on the vocabulary (a tied one with the token embedding).
      cost.tensorSplit = true;
    } else if (isa<nn::AttentionOp>(op)) {
      cost.kind = OpClass::FusedAttention;
    } else {
      // The residual stream's ops are h wide: their widest value's last dim.
      RankedTensorType widest;
      for (Type type :
           llvm::concat<Type>(llvm::to_vector(op->getOperandTypes()),
                              llvm::to_vector(op->getResultTypes())))
        if (auto tensor = dyn_cast<RankedTensorType>(type))
          if (tensor.getRank() > 0 &&
              (!widest || tensor.getNumElements() > widest.getNumElements()))
            widest = tensor;
      cost.tensorSplit = widest && widest.getShape().back() != hidden;
    }
    auto same = llvm::find_if(costs, [&](const OpCost &other) {
      return other.name == cost.name && other.kind == cost.kind &&
             other.flops == cost.flops && other.bytes == cost.bytes &&
             other.gemm.batch == cost.gemm.batch &&
             other.gemm.m == cost.gemm.m && other.gemm.n == cost.gemm.n &&
             other.gemm.k == cost.gemm.k &&
             other.tensorSplit == cost.tensorSplit &&
             other.perBatch == cost.perBatch && other.scores == cost.scores &&
             other.inBlock == cost.inBlock;
    });
    if (same != costs.end())
      ++same->count;
    else
      costs.push_back(std::move(cost));
  }
  return costs;
}

llvm::Expected<ModelShape> tessera::getModelShape(ModuleOp module) {
  ModelShape shape;
  func::FuncOp function = getModelFunction(module);
  if (!function)
    return llvm::createStringError("the model has no function");
  // From the structure, not the names: the token ids are the first integer
  // data argument [batch, seq], and the token embedding the nn.embedding
  // that looks them up in a parameter [vocab, hidden] (tied when a dot
  // reads that table too, the LM head).
  BlockArgument tokens;
  llvm::StringSet<> numberedUnits;
  for (BlockArgument arg : function.getArguments()) {
    auto type = dyn_cast<RankedTensorType>(arg.getType());
    if (!type)
      continue;
    if (auto name = function.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                          nn::kParamAttrName)) {
      shape.parameters += type.getNumElements();
      StringRef unit = getParameterUnit(name.getValue());
      if (isNumberedUnit(unit))
        numberedUnits.insert(unit);
    } else if (!tokens && type.getRank() == 2 &&
               isa<IntegerType>(type.getElementType())) {
      tokens = arg;
      shape.batch = type.getDimSize(0);
      shape.seq = type.getDimSize(1);
    }
  }
  auto isTable = [&](Value value) {
    if (auto cast = value.getDefiningOp<nn::CastOp>())
      value = cast.getInput();
    auto arg = dyn_cast<BlockArgument>(value);
    return arg && function.getArgAttr(arg.getArgNumber(), nn::kParamAttrName)
               ? arg
               : BlockArgument();
  };
  // The bytes of an element of the residual stream (the lookup's).
  double activationBytes = 4;
  BlockArgument table;
  if (tokens)
    for (Operation *user : tokens.getUsers()) {
      auto lookup = dyn_cast<nn::EmbeddingOp>(user);
      table = lookup ? isTable(lookup.getTable()) : nullptr;
      if (!table || lookup.getIndices() != tokens)
        continue;
      auto type = cast<RankedTensorType>(table.getType());
      shape.vocab = type.getDimSize(0);
      shape.hidden = type.getDimSize(1);
      activationBytes =
          std::max<int64_t>(1, lookup.getType().getElementTypeBitWidth() / 8);
      // Read by a dot, directly or through casts and transposes.
      SmallVector<Value> views = {table};
      while (!views.empty() && !shape.tiedEmbedding)
        for (Operation *reader : views.pop_back_val().getUsers()) {
          shape.tiedEmbedding |= isa<nn::DotOp>(reader);
          if (isa<nn::CastOp, nn::TransposeOp>(reader))
            views.push_back(reader->getResult(0));
        }
      break;
    }
  // The blocks as the structure repeats; one block repeats nothing, and
  // then the numbering of the parameters' names is the hint.
  shape.layers = findRepeatedBlocks(function).size();
  if (!shape.layers)
    shape.layers = numberedUnits.size();
  // Heads: the reshape that splits the hidden dim as [b, s, heads, d].
  function.walk([&](nn::ReshapeOp reshape) {
    RankedTensorType result = reshape.getType();
    if (!shape.heads && shape.hidden && result.getRank() == 4 &&
        result.getDimSize(2) * result.getDimSize(3) == shape.hidden)
      shape.heads = result.getDimSize(2);
  });
  function.walk(
      [&](CostOpInterface op) { shape.forwardFlops += op.getFlops(); });
  function.walk([&](nn::AttentionOp attention) {
    shape.fusedAttention = true;
    shape.causalAttention = attention.getCausal();
    RankedTensorType key = attention.getKey().getType();
    shape.keyHidden = key.getDimSize(1) * key.getDimSize(3);
  });
  function.walk([&](nn::DropoutOp dropout) {
    if (dropout.getInput().getDefiningOp<nn::SoftmaxOp>())
      shape.attentionDropout = true;
    else
      shape.outputDropout = true;
  });
  if (!shape.vocab || !shape.layers || !shape.heads || !shape.batch)
    return llvm::createStringError(
        "the plan search reads GPT-style models (tessera model gpt): could "
        "not find " +
        std::string(!tokens         ? "the token ids (an integer [batch, seq] "
                                      "argument)"
                    : !shape.vocab  ? "the token embedding (an nn.embedding "
                                      "of the token ids in a parameter)"
                    : !shape.layers ? "repeated blocks"
                                    : "the attention heads (a reshape of the "
                                      "hidden dim to [b, s, heads, d])"));
  shape.itemFlops = getItemFlops(function);
  shape.opCosts = getOpCosts(function, shape.hidden, shape.seq);
  shape.elementBytes = activationBytes;
  for (BlockArgument arg : function.getArguments())
    shape.parameterTensors +=
        function.getArgAttr(arg.getArgNumber(), nn::kParamAttrName) != nullptr;
  // A mixture of experts: its dispatch masks [b, s, E, C] and the
  // experts' weights.
  function.walk([&](nn::MoeDispatchOp dispatch) {
    ArrayRef<int64_t> mask = dispatch.getType().getShape();
    int64_t rank = mask.size();
    ++shape.moeLayers;
    shape.experts = mask[rank - 2];
    shape.expertSlotsPerToken =
        static_cast<double>(mask[rank - 2] * mask[rank - 1]) / mask[rank - 3];
  });
  for (auto [index, dim] : getExpertParameters(function))
    shape.expertParameters +=
        cast<RankedTensorType>(function.getArgument(index).getType())
            .getNumElements();
  if (auto kept = getKeptValues(module, function)) {
    shape.keptValues = std::move(kept->first);
    shape.keptPerLayer = kept->second / (activationBytes * shape.batch *
                                         shape.seq * shape.hidden);
  }
  return shape;
}

ModelShape tessera::withBatch(const ModelShape &model, int64_t batch) {
  ModelShape scaled = model;
  double factor = static_cast<double>(batch) / model.batch;
  scaled.batch = batch;
  scaled.forwardFlops *= factor;
  for (double &flops : scaled.itemFlops)
    flops *= factor;
  for (OpCost &op : scaled.opCosts) {
    if (!op.perBatch)
      continue;
    op.flops *= factor;
    op.bytes *= factor;
    (op.gemm.batch > 1 ? op.gemm.batch : op.gemm.m) *= factor;
  }
  // What was measured on the program at its batch no longer applies.
  scaled.keptValues.clear();
  return scaled;
}
