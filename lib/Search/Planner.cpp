//===- Planner.cpp - The DP/TP/PP plan search -----------------------------===//
//
// The estimate follows Megatron-LM's analysis of GPT training (Narayanan et
// al. 2021; activation memory from Korthikanti et al. 2022) on top of the
// machine and cost models: model state per ZeRO stage, activations per
// recomputation mode, compute op by op from the graph (priceOps), TP
// collectives, the DP gradient reduction as the overlap schedule places it,
// pipeline point-to-point and bubbles, summed term by term (StepBreakdown).
//
//===----------------------------------------------------------------------===//

#include "tessera/Search/Planner.h"

#include "tessera/Analysis/StageCuts.h"

#include "dialects/Dist/IR/DistOps.h"
#include "dialects/Interfaces/CostOpInterface.h"
#include "dialects/NN/IR/NNOps.h"
#include "tessera/Analysis/MemoryPlan.h"
#include "tessera/Analysis/PipelineSchedule.h"
#include "tessera/Analysis/Sharding.h"
#include "tessera/Analysis/TrainStep.h"
#include "tessera/Search/ShardingTemplates.h"
#include "tessera/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Threading.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>
#include <map>
#include <mutex>
#include <set>
#include <tuple>

using namespace mlir;
using namespace tessera;

/// The ops of `function`'s body in program order, and each one's position.
static SmallVector<Operation *>
getBodyOps(func::FuncOp function, DenseMap<Operation *, int64_t> &position) {
  SmallVector<Operation *> ops = llvm::map_to_vector(
      function.front().without_terminator(), [](Operation &op) { return &op; });
  for (auto [index, op] : llvm::enumerate(ops))
    position[op] = index;
  return ops;
}

/// Whether `op` is one of the model's: no annotation or collective (the
/// dist dialect's). Partitioning keeps the model's ops in their order.
static bool isModelOp(Operation *op) {
  return !isa<dist::DistDialect>(op->getDialect());
}

/// The model's ops of `function`'s body in program order.
static SmallVector<Operation *> getModelOps(func::FuncOp function) {
  SmallVector<Operation *> ops;
  for (Operation &op : function.front().without_terminator())
    if (isModelOp(&op))
      ops.push_back(&op);
  return ops;
}

/// The bytes of a ranked tensor value.
static double getValueBytes(Value value) {
  auto type = dyn_cast<RankedTensorType>(value.getType());
  return type ? type.getNumElements() *
                    std::max<int64_t>(1, type.getElementTypeBitWidth() / 8)
              : 0;
}

/// The key that orders and merges a partition's collectives.
using CollectiveKey = std::tuple<CollectiveKind, double, int64_t, int64_t>;
static CollectiveKey getCollectiveKey(const CollectiveUse &use) {
  return {use.kind, use.bytes, use.group.size, use.group.stride};
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

namespace {
/// The items the pipeline pass may cut a decoder between: each repeated
/// block's two halves (cut where one value crosses inside it: after the
/// attention's residual add), the ops before the first block with the
/// first half, and those after the last block (the head and the loss).
struct DecoderItems {
  /// The body's ops in program order, and the position of each item's
  /// first; empty where a block does not cut in two.
  SmallVector<Operation *> ops;
  SmallVector<int64_t> starts;

  explicit DecoderItems(func::FuncOp function);
  size_t size() const { return starts.size(); }
  /// The position one past item `item`'s last op.
  int64_t getEnd(size_t item) const {
    return item + 1 < starts.size() ? starts[item + 1] : ops.size();
  }
};
} // namespace

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

namespace {
/// Bytes per element of activations and per parameter of the model state.
struct PrecisionBytes {
  double activation, weight, gradient, optimizer;
  const char *dtype;
  /// What AdamW's update reads and writes per parameter (see
  /// getOptimizerSeconds): the weight (the f32 master in mixed precision,
  /// and its bf16 copy written), the gradient and two moments read, the
  /// weight and moments written.
  double optimizerUpdate;
};

PrecisionBytes getPrecisionBytes(Precision precision) {
  switch (precision) {
  case Precision::Mixed:
    // bf16 weights and gradients; f32 master weights, m and v (2+2+12).
    return {2, 2, 2, 12, "bf16", 4 + 2 + 8 + 12 + 2};
  case Precision::BF16:
    return {2, 2, 2, 4, "bf16", 2 + 2 + 4 + 6};
  case Precision::FP32:
    return {4, 4, 4, 8, "fp32", 4 + 4 + 8 + 12};
  }
  return {2, 2, 2, 12, "bf16", 4 + 2 + 8 + 12 + 2};
}
} // namespace

StageCutShape StageCutShape::get(const PlanChoice &choice) {
  return {choice.tp, choice.sequenceParallel,
          choice.recompute == Recompute::Full || choice.zero >= 1};
}

/// What the pipeline pass balances when it cuts a GPT into stages, per item
/// it may cut between (the attention block and the MLP of each layer, one
/// value crossing after each residual add, or whole layers; then the LM
/// head): the forward's FLOPs as the ops count them (CostOpInterface), per
/// token, of a device under Megatron-LM's TP. The projections, the scores,
/// the elementwise ops on their split outputs and the LM head's logits (on
/// the vocabulary) are split; the layer norms, the residual adds and the
/// output projections' biases are not, but with sequence parallelism.
static llvm::SmallVector<double> getStageItemCosts(const ModelShape &model,
                                                   const StageCutShape &shape) {
  double h = model.hidden, s = model.seq, a = model.heads, v = model.vocab;
  // Per half-layer and the head, under `tp`-way TP with or without SP.
  auto getHalves = [&](double t, bool sp) {
    double whole = sp ? 1 / t : 1;
    // Attention: q, k, v and the output projection, the scores and their
    // weighted sum; q, k and v's biases, the scaling and the softmax (5 per
    // score); the norm (7), the output bias and the residual.
    double attention =
        (8 * h * h + 4 * s * h + 3 * h + 6 * a * s) / t + 9 * h * whole;
    // MLP: its two projections, the first's bias and the GELU (9 per
    // element); the norm, the second's bias and the residual.
    double mlp = (16 * h * h + 40 * h) / t + 9 * h * whole;
    llvm::SmallVector<double> costs;
    for (int64_t layer = 0; layer < model.layers; ++layer) {
      costs.push_back(attention);
      costs.push_back(mlp);
    }
    // The embeddings' sum, with the first layer; the final norm, the logits
    // and the cross-entropy (4 per logit, 2 per token).
    costs.front() += h * whole;
    costs.push_back((7 * h + 2) * whole + (2 * h * v + 4 * v) / t);
    return costs;
  };
  llvm::SmallVector<double> costs = getHalves(shape.tp, shape.sequenceParallel);
  // A model of another structure: each item as its ops count it on one
  // device (ModelShape::itemFlops), split as GPT's.
  if (model.itemFlops.size() == costs.size()) {
    llvm::SmallVector<double> one = getHalves(1, false);
    for (auto [cost, measured, gpt] : llvm::zip(costs, model.itemFlops, one))
      cost *= measured / (gpt * model.batch * model.seq);
  }
  if (!shape.wholeLayers)
    return costs;
  llvm::SmallVector<double> layers;
  for (int64_t layer = 0; layer < model.layers; ++layer)
    layers.push_back(costs[2 * layer] + costs[2 * layer + 1]);
  layers.push_back(costs.back());
  return layers;
}

/// The measured items of `model`, for a cache key.
static size_t getItemsHash(const ModelShape &model) {
  auto bits = llvm::map_range(model.itemFlops, [](double cost) {
    return llvm::bit_cast<uint64_t>(cost);
  });
  return llvm::hash_combine_range(bits.begin(), bits.end());
}

/// The pipeline pass's cut of a GPT into `stages` stages for `shape`. The
/// search asks for the same few cuts for every plan, and a cut is a dynamic
/// program over the items: they are kept.
static const StageCuts &getStageCuts(const ModelShape &model,
                                     const StageCutShape &shape,
                                     int64_t stages) {
  using Key = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                         bool, bool, int64_t, size_t>;
  static std::mutex mutex;
  static std::map<Key, StageCuts> cuts;
  std::lock_guard<std::mutex> lock(mutex);
  Key key = {model.layers,
             model.hidden,
             model.seq,
             model.vocab,
             model.heads,
             shape.tp,
             shape.sequenceParallel,
             shape.wholeLayers,
             stages,
             getItemsHash(model)};
  auto [it, inserted] = cuts.try_emplace(key);
  if (inserted)
    it->second = balanceStages(getStageItemCosts(model, shape), stages);
  return it->second;
}

/// Per stage of that cut, its attention and MLP half-layers; the last
/// stage holds the LM head.
static llvm::SmallVector<std::array<int64_t, 2>>
getStageHalves(const ModelShape &model, const StageCutShape &shape,
               int64_t stages) {
  const StageCuts &cuts = getStageCuts(model, shape, stages);
  int64_t layerItems = shape.wholeLayers ? model.layers : 2 * model.layers;
  llvm::SmallVector<std::array<int64_t, 2>> halves;
  for (int64_t stage = 0; stage < stages; ++stage) {
    int64_t end = stage + 1 < stages ? cuts.starts[stage + 1] : layerItems + 1;
    std::array<int64_t, 2> count = {0, 0};
    for (int64_t item = cuts.starts[stage]; item < std::min(end, layerItems);
         ++item) {
      if (shape.wholeLayers) {
        ++count[0];
        ++count[1];
      } else {
        ++count[item % 2];
      }
    }
    halves.push_back(count);
  }
  return halves;
}

double tessera::getStageImbalance(const ModelShape &model, int64_t stages,
                                  const StageCutShape &shape) {
  if (stages <= 1)
    return 1.0;
  llvm::SmallVector<double> costs = getStageItemCosts(model, shape);
  double total = 0;
  for (double cost : costs)
    total += cost;
  return getStageCuts(model, shape, stages).maxStageCost / (total / stages);
}

double tessera::getDeviceParameters(const ModelShape &model, int64_t pp,
                                    const StageCutShape &shape) {
  double h = model.hidden, t = shape.tp;
  // A model of another shape than GPT's: its parameters split evenly.
  double untiedHead = model.tiedEmbedding ? 0 : model.vocab * h;
  if (model.layers * (12 * h * h + 13 * h) + (model.vocab + model.seq) * h +
          2 * h + untiedHead !=
      static_cast<double>(model.parameters))
    return model.parameters / (t * pp);
  // A layer's two halves, which the compiler may cut between (one value
  // crosses after each residual add): the attention block and the MLP, by
  // Megatron-LM's split (q, k, v, the first MLP weight and their biases by
  // columns, the output projections by rows; their biases and the layer
  // norms whole); the token embedding and the LM head on the vocabulary,
  // the position embedding whole.
  double vocab = model.vocab / t;
  double embeddings = (vocab + model.seq) * h;
  double head = untiedHead / t;
  double halves[2] = {(4 * h * h + 3 * h) / t + 3 * h,
                      (8 * h * h + 4 * h) / t + 3 * h};
  if (pp <= 1)
    return model.layers * (halves[0] + halves[1]) + embeddings + 2 * h + head;
  double most = 0;
  for (auto [stage, count] :
       llvm::enumerate(getStageHalves(model, shape, pp))) {
    double params = count[0] * halves[0] + count[1] * halves[1];
    if (stage == 0)
      params += embeddings;
    // The last stage's final layer norm and LM head: the token embedding
    // again when tied.
    if (static_cast<int64_t>(stage) == pp - 1)
      params += 2 * h + (model.tiedEmbedding ? vocab * h : head);
    most = std::max(most, params);
  }
  return most;
}

/// What a microbatch keeps of a half-layer (or the LM head, or a stage's
/// ends) for its backward, in elements of s b h: what F makes and B or W
/// reads (`kept`), the part of that W reads (`read`), and what B makes for
/// W (`made`); the last two matter only under ZB-H1, which runs the weight
/// gradients apart.
struct KeptActivations {
  double kept = 0, read = 0, made = 0;
};

/// What a stage keeps at its ends, in s b h: its output until the send is
/// waited for (but the last stage), the input gradient it sends likewise
/// (but the first), and, under ZB-H1, the gradient it receives, which W
/// reads (but the last). Under ZB-H1 W reads the input gradient too, but
/// where ZeRO reduce-scatters each microbatch's gradients (from stage 2).
struct StageEnds {
  double output = 0, inputGradient = 0, receivedGradient = 0;
  bool weightReadsInputGradient = true;
};

/// The transients of a stage's units, in s b h: each runs next to every
/// copy its rank keeps (the loop form holds them for the whole schedule),
/// one at a time.
struct UnitTransients {
  /// A layer's backward: B, or W where it runs whole (ZB-H1's first stage,
  /// whose B has no input gradient to make), and ZB-H1's B without the
  /// weight gradients.
  double backward = 0, inputBackward = 0;
  /// The first stage's embedding gradients, the last's LM head backward.
  double embedding = 0, head = 0;
};

PipelineActivationLayout tessera::getPipelineActivationLayout(
    const ModelShape &model, const PlanChoice &choice,
    const llvm::SmallVector<RankInFlight> *ranks) {
  PipelineActivationLayout layout;
  PipelineSpec spec{choice.pp, choice.microbatches,
                    choice.schedule == PipelineSchedule::Interleaved
                        ? choice.virtualStages
                        : 1,
                    choice.schedule};
  int64_t stages = spec.getNumStages();
  StageCutShape shape = StageCutShape::get(choice);
  if (choice.pp <= 1 ||
      stages > static_cast<int64_t>(getStageItemCosts(model, shape).size()))
    return layout;
  layout.halves = getStageHalves(model, shape, stages);
  layout.ranks = ranks ? *ranks : getStagesInFlight(spec);
  return layout;
}

/// The activation elements (in s b h) of the rank that holds the most:
/// each of its stages' microbatches in flight under the schedule the
/// compiler builds, on the stage cut the pipeline pass makes (`layout`),
/// times what each keeps, and the largest transient of its units. The
/// export gives every value as many copies as its lifetimes overlap, for
/// the whole schedule, so a rank's stages add up.
static double getPipelinedActivations(const PipelineActivationLayout &layout,
                                      bool weightApart,
                                      const KeptActivations halves[2],
                                      const KeptActivations &head,
                                      const StageEnds &ends,
                                      const UnitTransients &transients) {
  int64_t stages = layout.halves.size();
  auto getKept = [&](int64_t stage) {
    KeptActivations kept;
    for (int half = 0; half < 2; ++half) {
      kept.kept += layout.halves[stage][half] * halves[half].kept;
      kept.read += layout.halves[stage][half] * halves[half].read;
      kept.made += layout.halves[stage][half] * halves[half].made;
    }
    if (stage + 1 == stages) {
      kept.kept += head.kept;
      kept.read += head.read;
      kept.made += head.made;
    } else {
      kept.made += ends.receivedGradient;
    }
    return kept;
  };
  double most = 0;
  for (const auto &rank : layout.ranks) {
    double held = 0, transient = 0;
    for (auto [stage, inFlight] : rank) {
      KeptActivations k = getKept(stage);
      // ZB-H1's first stage makes no input gradient: W runs its whole
      // backward.
      bool split = weightApart && stage > 0;
      // Under ZB-H1 the input gradient sent is one of what B makes for W
      // (the first half's residual gradient).
      double sent = stage > 0 ? ends.inputGradient : 0;
      held += split ? inFlight.forwardToBackward * (k.kept - k.read) +
                          inFlight.forwardToWeight * k.read +
                          inFlight.backwardToWeight * (k.made - sent)
              : weightApart ? inFlight.forwardToWeight * k.kept
                            : inFlight.forwardToBackward * k.kept;
      held +=
          inFlight.forwardSent * ends.output +
          (split && ends.weightReadsInputGradient ? inFlight.backwardSentOrRead
                                                  : inFlight.backwardSent) *
              sent;
      transient = std::max(transient, split ? transients.inputBackward
                                            : transients.backward);
      if (stage == 0)
        transient = std::max(transient, transients.embedding);
      if (stage + 1 == stages)
        transient = std::max(transient, transients.head);
    }
    most = std::max(most, held + transient);
  }
  return most;
}

double StepBreakdown::getComputeSeconds() const {
  double seconds = 0;
  for (const auto &entry : compute)
    seconds += entry.second;
  return seconds;
}

double StepBreakdown::getTotalSeconds() const {
  return getComputeSeconds() + recompute + launch + tpExposed + epExposed +
         cpExposed + ppExposed + dpExposed + bubble + optimizer + fixed;
}

namespace {
/// One device's compute over a step of the whole model (see priceOps).
struct OpTimes {
  /// Forward and backward by op class, in the order first met.
  llvm::MapVector<StringRef, double> byClass;
  double backward = 0, recompute = 0, kernels = 0;
  /// The FLOPs recomputation adds to the step (all devices').
  double recomputedFlops = 0;
};
} // namespace

/// Prices `model`'s ops (OpCost) on one device of `choice`: each at its
/// per-device, per-microbatch shape (the batch split over dp and the
/// microbatches, Megatron-LM's TP split, sequence parallelism splitting the
/// residual stream's ops too), in the plan's precision, by its roofline,
/// times the microbatches; the backward from the forward; what
/// recomputation runs again.
static OpTimes priceOps(const ModelShape &model, const MachineModel &machine,
                        const PlanChoice &choice, const PrecisionBytes &bytes) {
  OpTimes times;
  // Data and experts split the tokens alike: an expert's GEMM over its
  // tokens runs on E / ep experts and the tokens of dp.
  double t = choice.tp, rows = choice.getDataParallel() * choice.microbatches;
  double elementScale = bytes.activation / model.elementBytes;
  auto gemm = [&](const GemmShape &shape, double moved) {
    llvm::Expected<double> seconds =
        getGemmSeconds(machine, bytes.dtype, shape, moved);
    if (!seconds) {
      // A machine without the plan's dtype: its first peak.
      llvm::consumeError(seconds.takeError());
      return shape.getFlops() / machine.peakFlopsPerSecond.begin()->second;
    }
    return *seconds;
  };
  for (const OpCost &op : model.opCosts) {
    double batchSplit = op.perBatch ? rows : 1;
    double split = op.tensorSplit || choice.sequenceParallel ? t : 1;
    double moved = op.bytes * elementScale / batchSplit / split;
    double forward = 0, backward = 0;
    StringRef name = op.name;
    switch (op.kind) {
    case OpClass::Gemm: {
      GemmShape shape = op.gemm;
      double &rowsDim = shape.batch > 1 ? shape.batch : shape.m;
      rowsDim /= batchSplit;
      // TP splits the projections; sequence parallelism would run a whole
      // one on a slice of the sequence.
      if (op.tensorSplit || choice.sequenceParallel) {
        moved = op.bytes * elementScale / batchSplit / t;
        double &tpDim = !op.tensorSplit     ? rowsDim
                        : shape.batch > 1   ? shape.batch
                        : shape.n > shape.k ? shape.n
                                            : shape.k;
        tpDim /= t;
      }
      forward = gemm(shape, moved);
      // The input's gradient (dY W^T) and the weight's (X^T dY).
      backward = gemm({shape.batch, shape.m, shape.k, shape.n}, moved) +
                 gemm({shape.batch, shape.k, shape.n, shape.m}, moved);
      name = "gemm";
      break;
    }
    case OpClass::FusedAttention: {
      double flops = op.flops / batchSplit / t;
      auto attention = [&](double flops, double moved) {
        llvm::Expected<double> seconds =
            getFusedAttentionSeconds(machine, bytes.dtype, flops, moved);
        return seconds ? *seconds
                       : (llvm::consumeError(seconds.takeError()),
                          getMemoryBoundSeconds(machine, moved));
      };
      // FlashAttention's backward: five products of the forward's two.
      forward = attention(flops, moved);
      backward = attention(2.5 * flops, 2 * moved);
      name = "attention";
      break;
    }
    case OpClass::MemoryBound:
      // The backward reads the output's gradient and the input, and
      // writes the input's gradient: about twice the forward's bytes.
      forward = getMemoryBoundSeconds(machine, moved);
      backward = 2 * forward;
      break;
    }
    double runs = op.count * choice.microbatches;
    times.byClass[name] += runs * (forward + backward);
    times.backward += runs * backward;
    // A GEMM's backward is two kernels.
    times.kernels += runs * (op.kind == OpClass::Gemm ? 3 : 2);
    bool recomputed =
        choice.recompute == Recompute::Full
            ? op.inBlock
            : choice.recompute == Recompute::Selective && op.scores;
    if (recomputed) {
      times.recompute += runs * forward;
      times.kernels += runs;
      times.recomputedFlops += op.count * op.flops;
    }
  }
  return times;
}

PlanEstimate tessera::estimatePlan(const ModelShape &model,
                                   const MachineModel &machine,
                                   const PlanChoice &choice,
                                   std::optional<double> stageImbalance,
                                   const PartitionedLayout *partitioned,
                                   const PipelineActivationLayout *layout) {
  PlanEstimate estimate;
  estimate.choice = choice;
  PrecisionBytes bytes = getPrecisionBytes(choice.precision);
  // The dense layers' replicas: dp x ep (expert parallelism splits the
  // batch with dp; without experts ep is 1).
  int64_t replicas = choice.getDataParallel();
  double devices = replicas * choice.tp * choice.pp;
  double s = model.seq, h = model.hidden, a = model.heads, t = choice.tp;
  // A device's share of the vocabulary: Megatron-LM splits the token
  // embedding, the LM head and the logits on it over TP.
  double vocab = model.vocab / t;
  double microbatch =
      static_cast<double>(model.batch) / replicas / choice.microbatches;
  int64_t layersPerStage = (model.layers + choice.pp - 1) / choice.pp;

  // Model state: parameters split over TP and PP (the experts' over EP
  // too), then ZeRO over the data-parallel axes: the dense parameters'
  // over dp x ep, the experts' over dp.
  double scale = partitioned ? partitioned->parameterScale : 1;
  double expertParams =
      model.expertParameters / (t * choice.pp) / choice.ep * scale;
  double localParams =
      getDeviceParameters(model, choice.pp, StageCutShape::get(choice)) *
          scale -
      expertParams * (choice.ep - 1);
  double denseParams = localParams - expertParams;
  ModelStateBytesPerParameter stateBytes = {bytes.weight, bytes.gradient,
                                            bytes.optimizer};
  ModelStateMemory state =
      getZeroModelState(denseParams, stateBytes, choice.zero, replicas);
  ModelStateMemory expertState =
      getZeroModelState(expertParams, stateBytes, choice.zero, choice.dp);
  state.parameterBytes += expertState.parameterBytes;
  state.gradientBytes += expertState.gradientBytes;
  state.optimizerStateBytes += expertState.optimizerStateBytes;
  estimate.paramBytes = state.parameterBytes;
  // Kept until the backward, the forward's gathers hold every parameter of
  // the device whole at the forward's end, next to the shards.
  if (choice.zero >= 3 && !choice.reshardAfterForward)
    estimate.paramBytes += localParams * bytes.weight;
  estimate.gradBytes = state.gradientBytes;
  // A layout that gathers parameters keeps the gathered copies for the
  // backward and their whole gradients until the step reduces them (a
  // stage's share of them).
  if (partitioned && partitioned->gatheredParameters > 0) {
    double gathered = partitioned->gatheredParameters / choice.pp;
    estimate.paramBytes += gathered * bytes.weight;
    estimate.gradBytes += gathered * bytes.gradient;
  }
  // From stage 2 a unit's gradient is whole until its reduce-scatter: a
  // block's flat buffer (the ZeRO pass packs a block's parameters that TP
  // splits, their TP pieces, apart from those it does not, 6 h).
  // Without a pipeline, at the peak (the first block's) the embeddings'
  // shards, the backward's last, are not made yet; a pipeline's largest
  // stage is its last, whose tied embedding's shard the head made first.
  // A pipeline stage sums a microbatch's shard into the step's after the
  // reduce-scatter: that shard too.
  double unit = choice.tp == 1 ? 12 * h * h + 13 * h
                               : std::max(6 * h, (12 * h * h + 7 * h) / t);
  double unmade = choice.pp == 1 ? (vocab + model.seq) * h / replicas : 0;
  double summed =
      choice.pp > 1 && choice.microbatches > 1 ? unit / replicas : 0;
  if (choice.zero >= 2)
    estimate.gradBytes +=
        bytes.gradient * (std::max(0.0, unit - unmade) + summed);
  // ZeRO-1 accumulates the step's whole gradients: with microbatches a
  // microbatch's are made beside them; in a pipeline of one microbatch the
  // reduce-scatter's shard is. Without ZeRO a pipeline of microbatches
  // sums the LM head's term of a tied embedding's gradient ([V, h]) beside
  // the accumulated one.
  if (choice.zero == 1 && choice.microbatches > 1)
    estimate.gradBytes += localParams * bytes.gradient;
  else if (choice.zero == 1 && choice.pp > 1)
    estimate.gradBytes += localParams * bytes.gradient / replicas;
  if (choice.zero == 0 && choice.pp > 1 && choice.microbatches > 1 &&
      model.tiedEmbedding)
    estimate.gradBytes += vocab * h * bytes.gradient;
  estimate.optimizerBytes = state.optimizerStateBytes;
  // The weight stash, copies of the stage's weights as the optimizer
  // updates them (the f32 masters in mixed precision): 2BW's has a copy
  // per step parity; PipeDream's first stage a version per step in
  // flight, p of them. 2BW's sums over microbatches also have a copy per
  // step parity.
  double stashes = choice.schedule == PipelineSchedule::TwoBW       ? 2
                   : choice.schedule == PipelineSchedule::PipeDream ? choice.pp
                                                                    : 0;
  if (choice.schedule == PipelineSchedule::TwoBW)
    estimate.gradBytes += localParams * bytes.gradient;
  estimate.optimizerBytes +=
      stashes * localParams *
      (choice.precision == Precision::Mixed ? 4.0 : bytes.weight);

  // Activations of one layer and microbatch, in elements of s b h, as the
  // compiler's train step keeps them for the backward (a GPT block without
  // dropout; Korthikanti et al. 2022 count the same tensors, in bytes, with
  // dropout masks): the two layer-norm inputs and the two projections'
  // inputs whole, twelve s b h split over TP (q, k, v, the attention output,
  // the MLP's 4h input and output), and the softmax's a s s b split over TP.
  // With sequence parallelism the layer norms' inputs are split too and the
  // gathered projection inputs are not kept (14/t); selective recomputation
  // drops the softmax, full keeps only the layer's input. Fused attention
  // keeps no softmax (its backward recomputes the scores tile by tile) but
  // its result in the [b, heads, s, d] layout its gradient reads, beside
  // the transpose the output projection reads (1/t).
  double sbh = s * microbatch * h;
  // Dropout of the unfused probabilities keeps them dropped too.
  double attention = model.fusedAttention
                         ? 0
                         : (model.attentionDropout ? 2 : 1) * a * s / h / t;
  double fusedKept = model.fusedAttention ? 1 / t : 0;
  double kept = (choice.sequenceParallel ? 14 / t : 4 + 12 / t) + fusedKept;
  double layerNone = kept + attention;
  // A block of another structure than GPT's (measured on its train step,
  // see ModelShape::keptPerLayer) keeps that much more or less.
  double structure = 1;
  if (model.keptPerLayer > 0)
    structure = model.keptPerLayer / (16 + fusedKept * t + attention * t);
  double perLayer = choice.recompute == Recompute::None        ? layerNone
                    : choice.recompute == Recompute::Selective ? kept
                    : choice.sequenceParallel                  ? 1 / t
                                                               : 1;
  // A device's logits.
  double sbv = s * microbatch * vocab;
  // The backward's peak, beyond what the layers keep, in s b h: the larger
  // of the LM head's (the logits, their log-probabilities and gradients:
  // 3 s b v, the cross-entropy's gradient being one fused kernel, and the
  // head's input and its gradient) and the first layer's MLP's (its 4h
  // gradients, the GELU's gradient being one fused kernel, and, recomputing
  // it whole, the layer again with its scores; on one device, a tied
  // embedding's head term of the gradient, [V, h], which data parallelism
  // reduces). Measured on compiled steps with elementwise fusion
  // (bench/search/activations.py: h 256-512, s 64-512, V/h 1-8, TP 1-4,
  // with and without SP and recomputation).
  bool sp = choice.sequenceParallel;
  double headTransient = 3 * vocab / h + 2 / (sp ? t : 1);
  double headGradient = model.tiedEmbedding && replicas == 1 && choice.pp == 1
                            ? vocab / (s * microbatch)
                            : 0;
  double dropped = model.outputDropout && !sp ? 1 : 0;
  double mlpTransient =
      choice.recompute == Recompute::Full
          ? (sp ? 22 / t : 20 / t + 4 + headGradient + dropped) + attention +
                fusedKept
          : (sp ? 7 / t : 6 / t + 1 + headGradient + dropped);
  if (choice.pp == 1) {
    estimate.activationBytes = (perLayer * structure * model.layers +
                                std::max(headTransient, mlpTransient)) *
                               sbh * bytes.activation;
  } else {
    // Per half-layer (the attention block, the MLP), in s b h, as the
    // compiled stages keep them (bench/pipeline/activations.py): F makes
    // for B the norm's input, the projections' TP-split inputs and outputs
    // (q, k, v and the softmax; the 4h input of the GELU) and, but with
    // sequence parallelism, whose projections read a gathered copy, the
    // norm's output. W reads of these the projections' inputs (the norm's
    // output, the attention output; the GELU's output) and what B makes
    // for it: the projections' output gradients (q, k, v; the GELU's
    // input), the norm's normalised input and its output's gradient, and
    // the residual gradient (with TP or SP the reduced gradient is a
    // collective's: the attention's sums q, k and v's terms and reduces
    // them once). Recomputing layers
    // whole, F keeps only the layer's input, and B makes for W what F
    // would have kept.
    bool full = choice.recompute == Recompute::Full;
    double whole = sp ? 1 / t : 1, norm = sp ? 0 : whole;
    double softmax = choice.recompute == Recompute::None ? attention : 0;
    KeptActivations halves[2] = {
        {whole + norm + 4 / t + softmax + fusedKept, norm + 1 / t,
         (sp || t > 1 ? 2 : 3) * whole + 3 / t},
        {whole + norm + 8 / t, norm + 4 / t, (t > 1 ? 2 : 3) * whole + 4 / t}};
    if (full)
      halves[0] = {whole, 0, halves[0].read + halves[0].made},
      halves[1] = {0, 0, halves[1].read + halves[1].made};
    // The LM head: the final norm's input and output and the logits; its
    // backward makes for W the logits' gradient, the norm's normalised
    // input, its output's gradient (with TP a collective's: the head's
    // input gradient is summed over the vocabulary's pieces) and the
    // residual gradient. The ends' values are the residual stream's; with
    // SP, W reads a collective's copy of the received gradient.
    double logits = sbv / sbh;
    KeptActivations head = {2 * whole + logits, whole,
                            (t > 1 ? 2 : 3) * whole + logits};
    // With one microbatch nothing sums the LM head's term of a tied
    // embedding's gradient ([V, h]) over microbatches: it lives from B to
    // the update, and under ZB-H1 the head's weight gradient runs in B,
    // which then keeps no logits' gradient for W.
    if (choice.microbatches == 1 && model.tiedEmbedding) {
      head.kept += vocab / (s * microbatch);
      head.made -= logits;
    }
    StageEnds ends = {whole, whole, norm, choice.zero < 2};
    // The units' transients, measured as the stages' activation peaks less
    // what their ranks keep (h 256, s 128-512, V/h 2-16, TP 1-2, with and
    // without SP and recomputation; the fused GELU and head terms refitted
    // on PlannerTest's pipelines, h 256, V/h 4, TP 1-2): a layer's
    // backward, at the MLP's (the GELU's gradient, one fused kernel: the
    // 4h/t gradient it reads and the one it makes) or the attention's (the
    // scores' gradients: three softmaxes, four recomputing them), next to
    // the gradient it receives; recomputing whole, the unpipelined
    // backward's (see mlpTransient), less 5/t + 3 without its weight
    // gradients. The embeddings' gradients (the token embedding's [V, h]).
    double scores = (choice.recompute == Recompute::None ? 3 : 4) * attention;
    UnitTransients transients;
    transients.backward =
        full ? (sp ? 22 / t : 20 / t + 4) + attention + fusedKept
             : std::max(8 / t, scores + 1 / t) + whole;
    transients.inputBackward =
        full ? 15 / t + 1 + attention + fusedKept
             : std::max(8 / t + (sp ? whole : 0), scores + 1 / t);
    transients.embedding = vocab / (s * microbatch) + whole;
    // The head's: the logits' gradient (one fused kernel from the logits)
    // and the softmax, and, where B runs the head's weight gradient (see
    // above), the logits' gradient it then does not hold for W.
    transients.head =
        (choice.microbatches == 1 && model.tiedEmbedding ? 3 : 2) * logits;
    PipelineActivationLayout own;
    if (!layout)
      own = getPipelineActivationLayout(model, choice);
    estimate.activationBytes =
        getPipelinedActivations(layout ? *layout : own,
                                choice.schedule ==
                                    PipelineSchedule::ZeroBubbleH1,
                                halves, head, ends, transients) *
        structure * sbh * bytes.activation;
  }
  if (partitioned)
    estimate.activationBytes *= partitioned->activationScale;
  estimate.peakMemoryBytes = estimate.paramBytes + estimate.gradBytes +
                             estimate.optimizerBytes + estimate.activationBytes;
  estimate.fits = estimate.peakMemoryBytes <= machine.memoryBytes;

  // FLOPs: a step is forward plus backward (twice the forward).
  estimate.modelFlopsPerStep = 3 * model.forwardFlops;
  double peak = machine.getPeakFlops(bytes.dtype)
                    ? *machine.getPeakFlops(bytes.dtype)
                    : machine.peakFlopsPerSecond.begin()->second;
  StepBreakdown &breakdown = estimate.breakdown;
  // Compute on one device, the whole model's over the step, then the
  // slowest stage's share: the layers are cut by dynamic programming, the LM
  // head (and its loss) weighing on the last stage.
  estimate.stageImbalance =
      stageImbalance
          ? *stageImbalance
          : getStageImbalance(model, choice.pp, StageCutShape::get(choice));
  double stage = estimate.stageImbalance / choice.pp *
                 (partitioned ? partitioned->computeScale : 1);
  double backwardSeconds = 0;
  if (!model.opCosts.empty()) {
    OpTimes times = priceOps(model, machine, choice, bytes);
    // A causal ring in natural order is not load-balanced: each step
    // waits for the device whose block is whole, and the last device's
    // blocks are all whole but its own half one, (cp - 1/2) blocks where
    // the average is cp/2. Stored in zigzag order (--tessera-zigzag-context,
    // where the sequence is whole chunks of 2 cp) every step costs every
    // device half a block.
    bool zigzag = model.seq % (2 * choice.cp) == 0;
    double ringImbalance = choice.cp > 1 && model.causalAttention && !zigzag
                               ? (2.0 * choice.cp - 1) / choice.cp
                               : 1;
    for (auto &[name, seconds] : times.byClass)
      breakdown.compute.emplace_back(
          name, seconds * stage * (name == "attention" ? ringImbalance : 1));
    breakdown.recompute = times.recompute * stage;
    breakdown.launch = times.kernels * machine.efficiency.kernelLaunchSeconds *
                       estimate.stageImbalance / choice.pp;
    backwardSeconds = times.backward * stage;
    estimate.hardwareFlopsPerStep =
        estimate.modelFlopsPerStep + times.recomputedFlops;
  } else {
    // A shape without its ops: GEMMs at the efficiency of the typical one (a
    // microbatch through an MLP projection); the rest of a layer (norms,
    // softmax, GELU, residuals) memory-bound, about the layer's stored
    // activations read and written, forward and backward.
    double attentionShare = s / (6 * h + s);
    estimate.hardwareFlopsPerStep =
        estimate.modelFlopsPerStep *
        getRecomputeFactor(choice.recompute, attentionShare);
    double gemm = 2 * microbatch * s * h * (4 * h / t);
    double gemmSeconds =
        estimate.hardwareFlopsPerStep * choice.pp / devices /
        (peak *
         getGemmEfficiency(machine, {1, gemm / (8 * h * h / t), 4 * h / t, h}));
    double elementwiseBytes = 3 * 2 * (34 / t) * sbh * (bytes.activation / 2) *
                              model.layers * choice.microbatches;
    breakdown.compute = {
        {"gemm", gemmSeconds * stage},
        {"elementwise",
         getMemoryBoundSeconds(machine, elementwiseBytes) * stage}};
    backwardSeconds = breakdown.getComputeSeconds() * 2 / 3;
  }
  estimate.computeSeconds = breakdown.getComputeSeconds() + breakdown.recompute;

  // TP: two all-reduces of the layer's activations forward, two backward
  // (all-gather + reduce-scatter pairs with sequence parallelism: the same
  // time), two more when recomputing the forward; and the vocabulary's
  // (see below).
  // From the partitioned program: its forward's collectives (at the
  // model's batch, split into microbatches), backward mirroring forward,
  // recomputation repeating it; a stage runs its share of them.
  // Expert parallelism's all_to_all over "ep", tokens to experts and back,
  // likewise (its own term).
  double passes = choice.recompute == Recompute::Full ? 3 : 2;
  if (partitioned) {
    double m = choice.microbatches;
    double seconds = 0, exchanges = 0;
    for (const CollectiveUse &use : partitioned->forward)
      (use.kind == CollectiveKind::AllToAll && choice.ep > 1 &&
               use.group.size == choice.ep && use.group.stride == choice.tp
           ? exchanges
           : seconds) += use.count * m *
                         getCollectiveSeconds(
                             machine, use.kind,
                             use.bytes / m * (bytes.activation / 4), use.group);
    estimate.tpCommSeconds = passes * seconds / choice.pp;
    estimate.epCommSeconds = passes * exchanges / choice.pp;
  } else {
    if (choice.tp > 1) {
      double perLayerCount = choice.recompute == Recompute::Full ? 6 : 4;
      double oneAllReduce =
          getCollectiveSeconds(machine, CollectiveKind::AllReduce,
                               sbh * bytes.activation, {choice.tp, 1});
      // The vocabulary's: the lookups' sum (first stage), the head's input
      // gradient, and per token the cross-entropy's max, sum of
      // exponentials and label logit, and its gradient's max and sum (last
      // stage).
      double tokenAllReduce =
          getCollectiveSeconds(machine, CollectiveKind::AllReduce,
                               s * microbatch * 4, {choice.tp, 1});
      double vocabCount = choice.pp == 1 ? 2 : 1;
      estimate.tpCommSeconds = (perLayerCount * layersPerStage + vocabCount) *
                                   oneAllReduce * choice.microbatches +
                               5 * tokenAllReduce * choice.microbatches;
    }
    // Each MoE layer's dispatched tokens [b, E, C, h] exchanged into the
    // experts and back, among the "ep" devices tp apart.
    if (choice.ep > 1) {
      double dispatched = sbh * model.expertSlotsPerToken * bytes.activation;
      double layers = static_cast<double>(model.moeLayers) / choice.pp;
      estimate.epCommSeconds =
          passes * 2 * layers * choice.microbatches *
          getCollectiveSeconds(machine, CollectiveKind::AllToAll, dispatched,
                               {choice.ep, choice.tp});
    }
  }
  // TP's collectives sit between the ops that make and read them: exposed.
  breakdown.tpExposed = estimate.tpCommSeconds;
  breakdown.epExposed = estimate.epCommSeconds;
  // CP: ring attention among the "cp" devices tp apart, per layer and
  // microbatch. The forward passes a device's piece of the keys and values
  // on cp - 1 times (again when recomputing), the backward passes them with
  // their gradients' sums and sends those home. Each transfer runs under a
  // block that does not read it: the attention hides up to (cp - 1)/cp of
  // its time. A device holds its kv heads' share of TP, at least one (with
  // fewer kv heads than TP ranks each is replicated).
  if (choice.cp > 1) {
    double c = choice.cp, headDim = h / a;
    double kvHeads = std::max(1.0, std::ceil(model.keyHidden / headDim / t));
    double keyValue = 2 * sbh * kvHeads * headDim / h * bytes.activation;
    double forwards = choice.recompute == Recompute::Full ? 2 : 1;
    estimate.cpCommSeconds =
        ((c - 1) * (forwards + 2) + 1) *
        getPointToPointSeconds(machine, keyValue, {choice.cp, choice.tp}) *
        model.layers / choice.pp * choice.microbatches;
    double attention = 0;
    for (const auto &[name, seconds] : breakdown.compute)
      if (name == "attention")
        attention += seconds;
    breakdown.cpExposed =
        std::max(0.0, estimate.cpCommSeconds - attention * (c - 1) / c);
  }
  // DP, as the compiler builds it: without ZeRO one all-reduce of the
  // gradients accumulated over the microbatches; stage 1 accumulates whole
  // gradients too and reduce-scatters them once; from stage 2 each
  // microbatch's gradient is reduce-scattered as it is made (the shards
  // accumulate). The parameters are gathered once per step after the update
  // (stages 1 and 2); stage 3 gathers them for each microbatch's forward and
  // again for its backward, as FSDP does, or, keeping the forward's copy, once
  // per step. The overlap schedule (getExposedReductionSeconds) starts a
  // reduction once its gradient is made, in buckets: without ZeRO only with one
  // microbatch (with more the sums are made at the step's end); from stage
  // 2 each microbatch's during its own backward. Stage 1 reduce-scatters at
  // the update, where nothing is left to overlap, and stages 1 and 2
  // gather the parameters after it (Megatron-LM's distributed optimizer
  // gathers them during the next step's forward); stage 3's gathers run a
  // unit ahead of the compute that reads them. Without the schedule every
  // collective is exposed whole.
  // With experts the dense parameters' gradients reduce over dp x ep and
  // the experts' over dp (their devices ep x tp apart).
  if (replicas > 1) {
    double gradientBytes = localParams * bytes.gradient;
    DeviceGroup group{replicas, choice.tp};
    DeviceGroup expertGroup{choice.dp, choice.ep * choice.tp};
    double expertShare = localParams > 0 ? expertParams / localParams : 0;
    double ring = (replicas - 1.0) / replicas;
    double expertRing = (choice.dp - 1.0) / choice.dp;
    // A tied embedding's second gradient term is reduced on its own (but at
    // ZeRO-1, which sums the terms while they are pending; and in a
    // pipeline of microbatches each end stage reduces its one term, where
    // without them the first stage receives the head's term and reduces
    // both).
    bool bothTerms = choice.pp == 1 || choice.microbatches == 1;
    double tiedBytes = model.tiedEmbedding && bothTerms && choice.zero != 1
                           ? vocab * model.hidden * bytes.gradient
                           : 0;
    auto seconds = [&](CollectiveKind kind, double bytes) {
      return bytes > 0 ? getCollectiveSeconds(machine, kind, bytes, group)
                       : 0.0;
    };
    // Of bytes in proportion to the parameters: the dense share over the
    // replicas, the experts' over dp.
    auto parameterSeconds = [&](CollectiveKind kind, double bytes) {
      double experts = bytes * expertShare;
      return seconds(kind, bytes - experts) +
             (experts > 0 && choice.dp > 1
                  ? getCollectiveSeconds(machine, kind, experts, expertGroup)
                  : 0.0);
    };
    // The ring's share of such bytes a device sends.
    double parameterRing = ring * (1 - expertShare) + expertRing * expertShare;
    // Buckets of the stage's gradients: at most one per parameter, a
    // ZeRO-3 unit (a layer) at least; one where nothing overlaps.
    double m = choice.microbatches;
    double window = backwardSeconds / m;
    int64_t parameters =
        std::max<int64_t>(1, model.parameterTensors / choice.pp);
    int64_t buckets = 1;
    if (choice.overlap)
      buckets = choice.bucketBytes <= 0
                    ? parameters
                    : std::clamp<int64_t>(
                          std::ceil(gradientBytes / choice.bucketBytes),
                          choice.zero >= 3 ? layersPerStage : 1, parameters);
    if (choice.zero == 0) {
      double reduce =
          parameterSeconds(CollectiveKind::AllReduce, gradientBytes) +
          seconds(CollectiveKind::AllReduce, tiedBytes);
      estimate.dpCommSeconds = reduce;
      breakdown.dpExposed = getExposedReductionSeconds(
          window, reduce, choice.microbatches == 1 ? buckets : 1);
      estimate.dpTrafficBytes =
          2 * (parameterRing * gradientBytes + ring * tiedBytes);
    } else {
      double gathers = choice.zero >= 3 && choice.reshardAfterForward
                           ? 2.0 * choice.microbatches
                           : 1;
      int64_t reductions = choice.zero == 1 ? 1 : choice.microbatches;
      // From stage 2 the token embedding's gradient is sharded on the
      // vocabulary over dp, and with one microbatch the lookup's term of it
      // is a vocab-parallel scatter: each device adds its rows from the
      // step's row gradients and ids gathered over dp, where that moves
      // fewer bytes than reduce-scattering the whole table (small
      // vocabularies, few tokens), as the partitioner prices it. (With
      // microbatches the gradient is accumulated flat, which keeps the
      // default layout; a pipeline's first stage is priced with the table
      // reduced.)
      double reducedBytes = gradientBytes, rowBytes = 0;
      if (choice.zero >= 2 && choice.pp == 1 && choice.microbatches == 1) {
        double table = vocab * model.hidden * bytes.gradient;
        double rows = model.batch * model.seq *
                      (model.hidden * bytes.activation + sizeof(int32_t));
        if (rows < table) {
          reducedBytes -= table;
          rowBytes = rows;
        }
      }
      double reduce =
          parameterSeconds(CollectiveKind::ReduceScatter, reducedBytes) +
          seconds(CollectiveKind::ReduceScatter, tiedBytes) +
          seconds(CollectiveKind::AllGather, rowBytes);
      double gather = parameterSeconds(CollectiveKind::AllGather,
                                       localParams * bytes.weight);
      estimate.dpCommSeconds = reductions * reduce + gathers * gather;
      estimate.dpTrafficBytes =
          parameterRing * (reductions * reducedBytes +
                           gathers * localParams * bytes.weight) +
          ring * reductions * (tiedBytes + rowBytes);
      breakdown.dpExposed =
          choice.zero == 1
              ? reductions * reduce
              : (m - 1) * std::max(0.0, reduce - window) +
                    getExposedReductionSeconds(window, reduce, buckets);
      if (choice.zero >= 3) {
        // A forward is about half its backward.
        double forwardWindow = window / 2;
        breakdown.dpExposed += gathers * getExposedReductionSeconds(
                                             forwardWindow, gather, buckets);
      } else {
        breakdown.dpExposed += gather;
      }
    }
  }
  // PP: activations forward and gradients backward at each stage boundary,
  // between devices dp x tp apart.
  if (choice.pp > 1) {
    double message = sbh * bytes.activation / (choice.sequenceParallel ? t : 1);
    double p2p = getPointToPointSeconds(machine, message,
                                        {choice.pp, replicas * choice.tp});
    estimate.ppCommSeconds = 2 * p2p * (choice.microbatches + choice.pp - 1);
    estimate.bubbleFraction = getBubbleFraction(
        choice.schedule, choice.pp, choice.microbatches, choice.virtualStages);
  }
  breakdown.ppExposed = estimate.ppCommSeconds;
  breakdown.bubble =
      estimate.bubbleFraction *
      (estimate.computeSeconds + breakdown.launch + breakdown.tpExposed +
       breakdown.epExposed + breakdown.cpExposed);
  // The update of the device's parameters (its ZeRO shard from stage 1).
  double updated = choice.zero >= 1
                       ? denseParams / replicas + expertParams / choice.dp
                       : localParams;
  breakdown.optimizer =
      getOptimizerSeconds(machine, updated, bytes.optimizerUpdate);
  breakdown.fixed = machine.efficiency.stepSeconds;
  estimate.stepTimeSeconds = breakdown.getTotalSeconds();
  estimate.tflopsPerDevice =
      estimate.hardwareFlopsPerStep / estimate.stepTimeSeconds / devices / 1e12;
  estimate.mfu =
      estimate.modelFlopsPerStep / (estimate.stepTimeSeconds * devices * peak);
  estimate.hfu = estimate.hardwareFlopsPerStep /
                 (estimate.stepTimeSeconds * devices * peak);
  return estimate;
}

/// The divisors of `n`, ascending, in O(√n).
static SmallVector<int64_t> getDivisors(int64_t n) {
  SmallVector<int64_t> small, large;
  for (int64_t d = 1; d <= n / d; ++d)
    if (n % d == 0) {
      small.push_back(d);
      if (d != n / d)
        large.push_back(n / d);
    }
  small.append(large.rbegin(), large.rend());
  return small;
}

llvm::Error tessera::checkDeviceCount(const MachineModel &machine,
                                      int64_t devices) {
  int64_t most = machine.getMaxDevices();
  if (devices < 1 || (most && devices > most))
    return llvm::createStringError(
        llvm::formatv("--devices must be between 1 and {0} for machine '{1}', "
                      "got {2}",
                      most, machine.name, devices)
            .str());
  return llvm::Error::success();
}

SmallVector<PlanMesh> tessera::getPlanMeshes(const ModelShape &model,
                                             int64_t devices,
                                             const SearchPins &pins) {
  auto pinned = [](std::optional<int64_t> pin, int64_t value) {
    return !pin || *pin == value;
  };
  SmallVector<PlanMesh> meshes;
  for (int64_t tp : getDivisors(devices)) {
    if (model.heads % tp != 0 || !pinned(pins.tp, tp))
      continue;
    for (int64_t pp : getDivisors(devices / tp)) {
      if (pp > model.layers || !pinned(pins.pp, pp))
        continue;
      // The data-parallel devices, split into dp x ep where the model has
      // experts (ep dividing them), or dp x cp where its attention is
      // fused (cp dividing the sequence). TODO(issue 23): pipelines of
      // experts over "ep" compile and train exactly, but a MoE model's
      // stage parameters are priced as an even split of them
      // (getDeviceParameters knows only GPT's layout): 11.1 MB charged
      // where a compiled pp=2 x ep=2 stage held 12.6 MB.
      int64_t replicas = devices / tp / pp;
      for (int64_t ep : getDivisors(replicas))
        for (int64_t cp : getDivisors(replicas / ep)) {
          int64_t dp = replicas / ep / cp, batchSplit = dp * ep;
          if ((ep > 1 &&
               (model.experts == 0 || model.experts % ep != 0 || pp > 1)) ||
              (cp > 1 && (!model.fusedAttention || model.attentionDropout ||
                          model.experts > 0 || model.seq % cp != 0)) ||
              !pinned(pins.ep, ep) || !pinned(pins.cp, cp) ||
              model.batch % batchSplit != 0 || !pinned(pins.dp, dp) ||
              (pins.microbatches &&
               (*pins.microbatches < 1 ||
                model.batch / batchSplit % *pins.microbatches != 0)))
            continue;
          meshes.push_back({dp, tp, pp, ep, cp});
        }
    }
  }
  return meshes;
}

llvm::Error tessera::checkSearchPins(const ModelShape &model, int64_t devices,
                                     const SearchPins &pins) {
  if (pins.virtualStages &&
      (*pins.virtualStages < 2 || *pins.virtualStages > model.layers ||
       (pins.schedule && *pins.schedule != PipelineSchedule::Interleaved)))
    return llvm::createStringError(llvm::formatv(
        "--virtual {0} needs --schedule interleaved and 2 to {1} (the "
        "layers) stages per rank",
        *pins.virtualStages, model.layers));
  if (pins.ilpShapes < 0)
    return llvm::createStringError(
        llvm::formatv("--ilp-shapes must be at least 0 (0: every shape), got "
                      "{0}",
                      pins.ilpShapes));
  // The schedules without a flush, pinned where no plan can take them.
  if (pins.schedule == PipelineSchedule::PipeDream &&
      ((pins.microbatches && *pins.microbatches != 1) ||
       (pins.zero && *pins.zero != 0) || (pins.pp && *pins.pp < 2) ||
       model.tiedEmbedding))
    return llvm::createStringError(
        model.tiedEmbedding
            ? "--schedule pipedream updates each stage's weights at its own "
              "pace: the model ties its token embedding to its LM head, "
              "which the first and the last stage both read (use 2bw)"
            : "--schedule pipedream runs pipelines of at least 2 stages, "
              "one microbatch a step and no ZeRO");
  if (!getPlanMeshes(model, devices, pins).empty())
    return llvm::Error::success();
  std::string pinned;
  for (auto [name, pin] : {std::pair{"dp", pins.dp},
                           {"tp", pins.tp},
                           {"pp", pins.pp},
                           {"ep", pins.ep},
                           {"cp", pins.cp},
                           {"microbatches", pins.microbatches}})
    if (pin)
      pinned +=
          llvm::formatv("{0}{1}={2}", pinned.empty() ? "" : ", ", name, *pin)
              .str();
  std::string experts =
      model.experts
          ? llvm::formatv(", ep the experts ({0}) and dp x ep the batch "
                          "(ep > 1 with one microbatch and no pipeline)",
                          model.experts)
                .str()
          : "";
  std::string context =
      pins.cp && *pins.cp > 1
          ? llvm::formatv(", cp the sequence ({0}; fused attention without "
                          "dropout, no experts)",
                          model.seq)
                .str()
          : "";
  return llvm::createStringError(llvm::formatv(
      "no dp x tp x pp mesh of {0} devices{1}: dp must divide the batch "
      "({2}), tp the heads ({3}){5}{6}, pp must be at most the layers ({4}), "
      "and the microbatches must divide a dp replica's batch",
      devices, pinned.empty() ? "" : " with " + pinned, model.batch,
      model.heads, model.layers, experts, context));
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

llvm::Expected<ScalingCurve>
tessera::getScalingCurve(const ModelShape &model, const MachineModel &machine,
                         ArrayRef<int64_t> devices, ScalingMode mode,
                         const SearchPins &pins) {
  ScalingCurve curve;
  curve.mode = mode;
  if (devices.empty())
    return llvm::createStringError("a scaling curve needs device counts");
  SmallVector<std::pair<double, double>> speedups;
  for (auto [index, count] : llvm::enumerate(devices)) {
    if (index > 0 && count <= devices[index - 1])
      return llvm::createStringError(
          llvm::formatv("device counts must ascend: {0} after {1}", count,
                        devices[index - 1]));
    if (mode == ScalingMode::Weak && count % devices.front() != 0)
      return llvm::createStringError(llvm::formatv(
          "weak scaling grows the batch with the devices: {0} devices is not "
          "a multiple of the first count, {1}",
          count, devices.front()));
    if (llvm::Error error = checkDeviceCount(machine, count))
      return std::move(error);
    ScalingPoint point;
    point.devices = count;
    point.batch = mode == ScalingMode::Strong
                      ? model.batch
                      : model.batch * (count / devices.front());
    ModelShape shape = withBatch(model, point.batch);
    if (llvm::Error error = checkSearchPins(shape, count, pins))
      return llvm::createStringError(llvm::formatv(
          "at {0} devices: {1}", count, llvm::toString(std::move(error))));
    SearchResult result = searchPlans(shape, machine, count, pins);
    if (!result.plans.empty()) {
      point.plan = result.plans.front();
      point.throughput = point.batch / point.plan->stepTimeSeconds;
    }
    curve.points.push_back(std::move(point));
  }
  const ScalingPoint &base = curve.points.front();
  for (ScalingPoint &point : curve.points) {
    if (!point.plan || !base.plan)
      continue;
    double n = static_cast<double>(point.devices) / base.devices;
    point.speedup = point.throughput / base.throughput;
    point.efficiency = point.speedup / n;
    speedups.push_back({n, point.speedup});
  }
  curve.serialFraction = fitSerialFraction(speedups, mode == ScalingMode::Weak);
  return curve;
}

SearchResult tessera::searchPlans(const ModelShape &model,
                                  const MachineModel &machine, int64_t devices,
                                  const SearchPins &pins,
                                  const LayoutProgram *program) {
  SearchResult result;
  auto pinned = [](const auto &pin, auto value) {
    return !pin || *pin == value;
  };
  // Each dp x ep x tp shape partitioned once per layout: Megatron's, and
  // with tp (and without ep) the ILP's, priced against Megatron's. A shape
  // with cp is priced by the formula (its ring's transfers are not a
  // collective the partitioned program's count prices).
  using Shape = std::tuple<int64_t, int64_t, int64_t, int64_t>;
  struct ShapeLayouts {
    std::optional<PartitionedLayout> megatron, solved;
    /// The ILP found the template: its plans are the template's without
    /// sequence parallelism.
    bool solvedIsMegatron = false;
    /// The share of memory the ILP's state was solved in.
    double solvedShare = 1;
  };
  std::map<Shape, ShapeLayouts> partitioned;
  auto take = [](llvm::Expected<PartitionedLayout> layout) {
    if (layout)
      return std::optional<PartitionedLayout>(std::move(*layout));
    llvm::consumeError(layout.takeError());
    return std::optional<PartitionedLayout>();
  };
  auto getShape = [&](Shape key, TensorLayout layout) {
    PlanChoice shape;
    std::tie(shape.dp, shape.ep, shape.tp, shape.cp) = key;
    shape.pp = devices / shape.dp / shape.ep / shape.tp / shape.cp;
    shape.precision = pins.precision;
    shape.layout = layout;
    return shape;
  };
  SmallVector<PlanMesh> meshes = getPlanMeshes(model, devices, pins);
  SmallVector<Shape> shapes;
  for (PlanMesh mesh : meshes)
    if (mesh.cp == 1)
      shapes.push_back({mesh.dp, mesh.ep, mesh.tp, mesh.cp});
  // The templates partitioned on the context's threads (the first alone,
  // which loads the passes' dialects).
  if (program && !shapes.empty()) {
    std::vector<std::optional<PartitionedLayout>> templates(shapes.size());
    auto partitionTemplate = [&](size_t index) {
      templates[index] = take(partitionLayout(
          *program, machine, getShape(shapes[index], TensorLayout::Megatron),
          &model));
    };
    partitionTemplate(0);
    mlir::parallelFor(program->module->getContext(), 1, shapes.size(),
                      partitionTemplate);
    for (auto [shape, partition] : llvm::zip(shapes, templates))
      partitioned[shape].megatron = std::move(partition);
  }
  // The ILP's layout of a shape whose template partitions.
  auto solveLayout = [&](Shape key, double share) {
    ShapeLayouts &layouts = partitioned[key];
    PlanChoice shape = getShape(key, TensorLayout::Solved);
    shape.layoutMemoryShare = share;
    llvm::Expected<PartitionedLayout> layout =
        partitionLayout(*program, machine, shape, &model);
    if (!layout) {
      std::string why = llvm::toString(layout.takeError());
      if (result.solveFailure.empty() && share == 1)
        result.solveFailure = why;
      return false;
    }
    layouts.solved = std::move(*layout);
    layouts.solvedShare = share;
    PartitionedLayout &solved = *layouts.solved;
    const PartitionedLayout &megatron = *layouts.megatron;
    solved.computeScale = solved.flops / megatron.flops;
    solved.parameterScale = solved.parameters / megatron.parameters;
    solved.activationScale = solved.keptBytes > 0 && megatron.keptBytes > 0
                                 ? solved.keptBytes / megatron.keptBytes
                                 : solved.valueBytes / megatron.valueBytes;
    // Both merged in one order (partitionLayout).
    auto same = [](const CollectiveUse &a, const CollectiveUse &b) {
      return getCollectiveKey(a) == getCollectiveKey(b) && a.count == b.count;
    };
    layouts.solvedIsMegatron =
        solved.flops == megatron.flops &&
        solved.parameters == megatron.parameters &&
        solved.valueBytes == megatron.valueBytes &&
        llvm::equal(solved.forward, megatron.forward, same);
    return true;
  };
  // The microbatches in flight of each pipeline, the same at every TP.
  std::map<std::tuple<int64_t, int64_t, PipelineSchedule>,
           llvm::SmallVector<RankInFlight>>
      inFlight;
  // Every plan of each dp x ep x tp shape (of `only`, when given) in each
  // of the `candidates` layouts (with or without sequence parallelism).
  // Per shape, the least a plan of the ILP's layout over memory holds
  // beside the model state (its activations, a gradient being made).
  std::map<Shape, double> solvedRest;
  auto searchShapes = [&](const std::set<Shape> *only,
                          ArrayRef<std::pair<TensorLayout, bool>> candidates) {
    for (auto [dp, tp, pp, ep, cp] : meshes) {
      Shape key{dp, ep, tp, cp};
      if (only && !only->count(key))
        continue;
      // The slowest stage's share, per shape of the cut.
      std::map<std::pair<bool, bool>, double> imbalances;
      auto getImbalance = [&](const PlanChoice &choice) {
        StageCutShape shape = StageCutShape::get(choice);
        auto [it, inserted] =
            imbalances.try_emplace({shape.sequenceParallel, shape.wholeLayers});
        if (inserted)
          it->second = getStageImbalance(model, pp, shape);
        return it->second;
      };
      const ShapeLayouts &tensorLayouts = partitioned[key];
      for (int64_t m : getDivisors(model.batch / (dp * ep))) {
        if (!pinned(pins.microbatches, m))
          continue;
        // The stage cut and the microbatches in flight, per schedule and
        // shape of the cut.
        std::map<std::tuple<PipelineSchedule, bool, bool>,
                 PipelineActivationLayout>
            layouts;
        auto getLayout = [&](const PlanChoice &choice) {
          StageCutShape shape = StageCutShape::get(choice);
          auto [it, inserted] = layouts.try_emplace(
              {choice.schedule, shape.sequenceParallel, shape.wholeLayers});
          if (inserted && pp > 1) {
            auto [ranks, added] =
                inFlight.try_emplace({pp, m, choice.schedule});
            if (added)
              ranks->second = getStagesInFlight(
                  {pp, m, choice.virtualStages, choice.schedule});
            it->second =
                getPipelineActivationLayout(model, choice, &ranks->second);
          }
          return &it->second;
        };
        for (int64_t zero = 0; zero <= (dp * ep * cp > 1 ? 3 : 0); ++zero) {
          if (!pinned(pins.zero, zero))
            continue;
          for (bool reshard : {true, false}) {
            if ((!reshard && zero < 3) ||
                !pinned(pins.reshardAfterForward, reshard))
              continue;
            for (PipelineSchedule schedule :
                 {PipelineSchedule::GPipe, PipelineSchedule::OneFOneB,
                  PipelineSchedule::Interleaved, PipelineSchedule::ZeroBubbleH1,
                  PipelineSchedule::TwoBW, PipelineSchedule::PipeDream}) {
              if (pp == 1 && schedule != PipelineSchedule::OneFOneB)
                continue;
              // Interleaving runs its chunks per stage (two unless pinned).
              int64_t chunks = schedule == PipelineSchedule::Interleaved
                                   ? pins.virtualStages.value_or(2)
                                   : 1;
              if (!getScheduleRejection({pp, m, chunks, schedule}).empty())
                continue;
              // 2BW and PipeDream change the numerics (gradients at earlier
              // weights): only where allowed, and without ZeRO. PipeDream's
              // stages update at their own pace, so no weight is tied
              // across them.
              bool async = schedule == PipelineSchedule::TwoBW ||
                           schedule == PipelineSchedule::PipeDream;
              if (async && (!(pins.allowAsync || pins.schedule == schedule) ||
                            zero != 0))
                continue;
              if (schedule == PipelineSchedule::PipeDream &&
                  model.tiedEmbedding)
                continue;
              if (schedule == PipelineSchedule::Interleaved &&
                  model.layers < chunks * pp)
                continue;
              if (!pinned(pins.schedule, schedule))
                continue;
              for (Recompute recompute :
                   {Recompute::None, Recompute::Selective, Recompute::Full}) {
                if (!pinned(pins.recompute, recompute))
                  continue;
                for (auto [layout, sp] : candidates) {
                  // The ILP's layout splits the sequence where it pays: no
                  // template of it. Without tp both are data parallelism.
                  const std::optional<PartitionedLayout> &partition =
                      layout == TensorLayout::Solved ? tensorLayouts.solved
                                                     : tensorLayouts.megatron;
                  if (layout == TensorLayout::Solved &&
                      (!partition || tensorLayouts.solvedIsMegatron))
                    continue;
                  // TODO(issue 23): price sequence parallelism's experts
                  // (their dispatched tokens all-reduced over tp).
                  if ((sp && (tp == 1 || model.seq % (tp * cp) != 0 ||
                              model.experts)) ||
                      !pinned(pins.sequenceParallel, sp))
                    continue;
                  PlanChoice choice{dp,
                                    tp,
                                    pp,
                                    m,
                                    zero,
                                    reshard,
                                    schedule,
                                    chunks,
                                    recompute,
                                    sp,
                                    pins.precision,
                                    layout,
                                    layout == TensorLayout::Solved
                                        ? tensorLayouts.solvedShare
                                        : 1.0,
                                    pins.overlap,
                                    pins.bucketBytes,
                                    ep,
                                    cp};
                  PlanEstimate estimate = estimatePlan(
                      model, machine, choice, getImbalance(choice),
                      partition ? &*partition : nullptr, getLayout(choice));
                  ++result.considered;
                  if (pins.progress && result.considered % 64 == 0)
                    pins.progress(result);
                  if (!estimate.fits) {
                    ++result.overMemory;
                    // What the ILP's state leaves the rest of its
                    // leanest plan.
                    if (layout == TensorLayout::Solved) {
                      double rest = estimate.peakMemoryBytes -
                                    estimate.paramBytes - estimate.gradBytes -
                                    estimate.optimizerBytes;
                      auto [it, inserted] = solvedRest.try_emplace(key, rest);
                      it->second = std::min(it->second, rest);
                    }
                    continue;
                  }
                  result.bestStepSeconds = std::min(result.bestStepSeconds,
                                                    estimate.stepTimeSeconds);
                  result.plans.push_back(estimate);
                }
              }
            }
          }
        }
      }
    }
  };
  auto fastestFirst = [&] {
    llvm::stable_sort(result.plans,
                      [](const PlanEstimate &x, const PlanEstimate &y) {
                        return x.stepTimeSeconds < y.stepTimeSeconds;
                      });
  };
  // The templates on every shape; then the ILP's layouts on the shapes of
  // the fastest template plans with tp (pins.ilpShapes of them, or all).
  // Where the ILP finds the template, the template's plans without sequence
  // parallelism are the ILP's.
  searchShapes(nullptr, {{TensorLayout::Megatron, false},
                         {TensorLayout::Megatron, true}});
  fastestFirst();
  if (!program || pins.layout == TensorLayout::Megatron)
    return result;
  std::set<Shape> refined;
  for (const PlanEstimate &plan : result.plans) {
    const PlanChoice &c = plan.choice;
    Shape key{c.dp, c.ep, c.tp, c.cp};
    if (c.tp == 1 || c.ep > 1 || c.cp > 1 || refined.count(key) ||
        !partitioned[key].megatron)
      continue;
    if (pins.ilpShapes &&
        static_cast<int64_t>(refined.size()) == pins.ilpShapes)
      break;
    refined.insert(key);
    solveLayout(key, 1.0);
  }
  // Without tp both layouts are data parallelism: a pin of the ILP's names
  // its plans so.
  for (PlanEstimate &plan : result.plans) {
    PlanChoice &c = plan.choice;
    if ((c.tp > 1 && !c.sequenceParallel &&
         partitioned[{c.dp, c.ep, c.tp, c.cp}].solvedIsMegatron) ||
        (c.tp == 1 && pins.layout == TensorLayout::Solved))
      c.layout = TensorLayout::Solved;
  }
  // Ranked among the templates, which a pin of the ILP's layout then drops.
  if (pins.layout)
    llvm::erase_if(result.plans, [&](const PlanEstimate &plan) {
      return plan.choice.tp > 1 && plan.choice.layout != *pins.layout;
    });
  searchShapes(&refined, {{TensorLayout::Solved, false}});
  // The solver leaves the activations out. Where the ILP's state took the
  // room every plan's activations needed, it is solved again in less
  // memory: first in what the leanest plan's activations leave, then
  // bisecting between a share the state does not fit in (below) and one
  // that leaves no plan (above).
  for (Shape shape : refined) {
    auto fits = [&] {
      return llvm::any_of(result.plans, [&](const PlanEstimate &plan) {
        const PlanChoice &c = plan.choice;
        return Shape{c.dp, c.ep, c.tp, c.cp} == shape &&
               c.layout == TensorLayout::Solved;
      });
    };
    if (!partitioned[shape].solved || fits() || !solvedRest.count(shape))
      continue;
    double share = 1 - solvedRest[shape] / machine.memoryBytes;
    double below = 0, above = 1;
    for (int attempt = 0; attempt < 2 && share > 0 && !fits(); ++attempt) {
      if (solveLayout(shape, share)) {
        std::set<Shape> only = {shape};
        searchShapes(&only, {{TensorLayout::Solved, false}});
        above = share;
      } else {
        below = share;
      }
      share = (below + above) / 2;
    }
  }
  fastestFirst();
  return result;
}

/// The first op of each pipeline stage after the first where the search
/// cuts `model`, a decoder of `shape`, for the ILP's layout of `choice`:
/// between half-layers, as without sequence parallelism (the layout is
/// solved once per mesh, whatever the plan's recomputation and ZeRO);
/// empty where it does not cut so.
static SmallVector<Operation *> getLayoutStageStarts(ModuleOp model,
                                                     const ModelShape &shape,
                                                     const PlanChoice &choice) {
  DecoderItems items(getModelFunction(model));
  if (choice.pp <= 1 ||
      static_cast<int64_t>(items.size()) != 2 * shape.layers + 1 ||
      static_cast<int64_t>(items.size()) < choice.pp)
    return {};
  const StageCuts &cuts =
      getStageCuts(shape, StageCutShape{choice.tp, false, false}, choice.pp);
  SmallVector<Operation *> starts;
  for (int64_t item : llvm::drop_begin(cuts.starts)) {
    // The item's first op of the model (the solver replaces annotations).
    auto ops = ArrayRef(items.ops).slice(
        items.starts[item], items.getEnd(item) - items.starts[item]);
    auto first = llvm::find_if(ops, isModelOp);
    if (first == ops.end())
      return {};
    starts.push_back(*first);
  }
  return starts;
}

ShardingSolverOptions
tessera::getLayoutSolverOptions(ModuleOp model, const MachineModel &machine,
                                const PlanChoice &choice,
                                const ModelShape *shape) {
  ShardingSolverOptions options;
  // The solver charges per byte of a parameter in the program's type its
  // weight, its gradient and the optimizer's share: the plan's precision's
  // state, whatever type the program holds its parameters in.
  double elements = 0, programBytes = 0;
  func::FuncOp function = getModelFunction(model);
  for (BlockArgument arg : function.getArguments())
    if (auto type = dyn_cast<RankedTensorType>(arg.getType()))
      if (function.getArgAttr(arg.getArgNumber(), nn::kParamAttrName)) {
        elements += type.getNumElements();
        programBytes += getValueBytes(arg);
      }
  PrecisionBytes bytes = getPrecisionBytes(choice.precision);
  double elementBytes = elements > 0 ? programBytes / elements : bytes.weight;
  options.optimizerBytesPerParameterByte = std::max(
      0.0,
      (bytes.weight + bytes.gradient + bytes.optimizer) / elementBytes - 2);
  options.batchAxes = {"dp"};
  options.keepActivations = false;
  // Each stage's state in its device's memory, or all stages' in theirs.
  if (shape)
    options.stageStarts = getLayoutStageStarts(model, *shape, choice);
  options.memoryLimitBytes =
      machine.memoryBytes * choice.layoutMemoryShare *
      (options.stageStarts.empty() ? choice.pp : int64_t(1));
  return options;
}

llvm::Error tessera::annotateLayout(ModuleOp model, const MachineModel &machine,
                                    const PlanChoice &choice,
                                    const ModelShape *shape) {
  if (choice.layout == TensorLayout::Megatron) {
    annotateMegatron(model, choice.dp, choice.tp);
    // Without ep the experts are laid out as Megatron's MLP, whose
    // microbatches and pipelines the "ep" axis would keep out.
    if (choice.ep > 1)
      annotateExpertParallel(model, choice.ep);
    if (choice.cp > 1)
      annotateContextParallel(model, "ring", choice.cp);
    if (choice.sequenceParallel)
      annotateSequenceParallel(model);
    return llvm::Error::success();
  }
  ShardingSolverOptions options =
      getLayoutSolverOptions(model, machine, choice, shape);
  llvm::Expected<ShardingSolution> solution =
      applyMeshSharding(model, machine, choice.dp, choice.tp, options);
  if (solution || choice.dp == 1)
    return solution ? llvm::Error::success() : solution.takeError();
  // A state that fits only split over dp too: solved again in ZeRO-3's
  // share of memory, which the search's plans with ZeRO then price.
  options.memoryLimitBytes = *options.memoryLimitBytes * choice.dp;
  llvm::Expected<ShardingSolution> sharded =
      applyMeshSharding(model, machine, choice.dp, choice.tp, options);
  if (sharded) {
    llvm::consumeError(solution.takeError());
    return llvm::Error::success();
  }
  llvm::consumeError(sharded.takeError());
  return solution.takeError();
}

/// The attribute that marks the results of an op that the train step keeps.
static constexpr llvm::StringLiteral kKeptAttrName = "tessera.kept";

/// Marks `values` on the ops of `module`'s model, which must be theirs.
static bool markKeptValues(ModuleOp module, ArrayRef<KeptValue> values) {
  if (values.empty())
    return true;
  SmallVector<Operation *> ops = getModelOps(getModelFunction(module));
  llvm::MapVector<Operation *, SmallVector<int32_t>> results;
  for (const KeptValue &value : values) {
    if (value.op >= static_cast<int64_t>(ops.size()) ||
        ops[value.op]->getName() != value.name ||
        value.result >= ops[value.op]->getNumResults())
      return false;
    results[ops[value.op]].push_back(value.result);
  }
  for (auto &[op, indices] : results)
    op->setAttr(kKeptAttrName,
                DenseI32ArrayAttr::get(module.getContext(), indices));
  return true;
}

/// The figures of `module`'s partitioned program (its collectives merged,
/// in the order of getCollectiveKey).
static PartitionedLayout measurePartition(ModuleOp module) {
  PartitionedLayout partitioned;
  module->walk([&](func::FuncOp function) {
    for (BlockArgument arg : function.getArguments())
      if (function.getArgAttr(arg.getArgNumber(), nn::kParamAttrName))
        partitioned.parameters +=
            cast<RankedTensorType>(arg.getType()).getNumElements();
  });
  module->walk([&](CostOpInterface op) {
    partitioned.flops += op.getFlops();
    for (Value result : op->getResults())
      partitioned.valueBytes += getValueBytes(result);
  });
  // The kept values, marked on their ops before the partitioner rewrites
  // them (it keeps an op's attributes).
  module->walk([&](Operation *op) {
    if (auto results = op->getAttrOfType<DenseI32ArrayAttr>(kKeptAttrName))
      for (int32_t result : results.asArrayRef())
        partitioned.keptBytes += getValueBytes(op->getResult(result));
  });
  // Parameters the layout gathers (a weight split on a dim its reader needs
  // whole): the gathered copy is kept for the backward, and its gradient is
  // whole until it is reduced.
  module->walk([&](dist::AllGatherOp gather) {
    Value source = gather.getInput();
    while (Operation *op = source.getDefiningOp()) {
      if (op->getNumOperands() != 1)
        break;
      source = op->getOperand(0);
    }
    auto arg = dyn_cast<BlockArgument>(source);
    auto function =
        arg ? dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp()) : nullptr;
    if (function && function.getArgAttr(arg.getArgNumber(), nn::kParamAttrName))
      partitioned.gatheredParameters += gather.getType().getNumElements();
  });
  SymbolTableCollection symbols;
  std::map<CollectiveKey, CollectiveUse> uses;
  module->walk([&](dist::CollectiveOpInterface op) {
    auto in = cast<RankedTensorType>(op->getOperand(0).getType());
    auto out = cast<RankedTensorType>(op->getResult(0).getType());
    // Bytes as f32 (the search rescales to the plan's precision).
    double inBytes = in.getNumElements() * 4.0;
    double outBytes = out.getNumElements() * 4.0;
    CollectiveKind kind;
    double bytes;
    if (isa<dist::AllReduceOp>(op)) {
      kind = CollectiveKind::AllReduce;
      bytes = inBytes;
    } else if (isa<dist::AllGatherOp>(op)) {
      kind = CollectiveKind::AllGather;
      bytes = outBytes;
    } else if (isa<dist::ReduceScatterOp>(op)) {
      kind = CollectiveKind::ReduceScatter;
      bytes = inBytes;
    } else if (isa<dist::AllToAllOp>(op)) {
      kind = CollectiveKind::AllToAll;
      bytes = inBytes;
    } else {
      return; // all_slice moves nothing; the others do not appear here
    }
    SmallVector<StringAttr> axes =
        llvm::to_vector(op.getMeshAxes().getAsRange<StringAttr>());
    CollectiveUse use{kind, bytes,
                      MeshShape(op.getMesh(symbols)).getDeviceGroup(axes), 0};
    ++uses.try_emplace(getCollectiveKey(use), use).first->second.count;
  });
  for (auto &entry : uses)
    partitioned.forward.push_back(entry.second);
  return partitioned;
}

/// Cuts `module`'s model to its first `keep` repeated blocks: what the last
/// block passes on is taken from the `keep`th instead, and the later
/// blocks' ops, what only they read and the parameters only they read are
/// erased. False where the blocks do not each pass on one value.
static bool keepFirstBlocks(ModuleOp module, int64_t keep) {
  func::FuncOp function = getModelFunction(module);
  SmallVector<SmallVector<Operation *>> blocks = findRepeatedBlocks(function);
  if (static_cast<int64_t>(blocks.size()) <= keep)
    return false;
  // The one value of `block` that ops outside it read.
  auto getOutput = [](ArrayRef<Operation *> block) {
    llvm::DenseSet<Operation *> inside(block.begin(), block.end());
    Value output;
    for (Operation *op : block)
      for (Value result : op->getResults())
        if (llvm::any_of(result.getUsers(), [&](Operation *user) {
              return !inside.contains(user);
            })) {
          if (output)
            return Value();
          output = result;
        }
    return output;
  };
  Value last = getOutput(blocks.back());
  Value kept = getOutput(blocks[keep - 1]);
  if (!last || !kept || last.getType() != kept.getType())
    return false;
  llvm::DenseSet<Operation *> lastBlock(blocks.back().begin(),
                                        blocks.back().end());
  llvm::DenseSet<Operation *> erased;
  for (ArrayRef<Operation *> block : llvm::drop_begin(blocks, keep))
    erased.insert(block.begin(), block.end());
  last.replaceUsesWithIf(kept, [&](OpOperand &use) {
    return !lastBlock.contains(use.getOwner());
  });
  for (Operation *op : erased)
    for (Operation *user : op->getUsers())
      if (!erased.contains(user))
        return false;
  for (ArrayRef<Operation *> block :
       llvm::reverse(llvm::drop_begin(blocks, keep)))
    for (Operation *op : llvm::reverse(block))
      op->erase();
  // What only the erased blocks read: the ops before them that make nothing
  // else reads (a weight's cast), and their parameters.
  SmallVector<Operation *> ops = llvm::to_vector(
      llvm::make_pointer_range(function.front().without_terminator()));
  for (Operation *op : llvm::reverse(ops))
    if (op->getNumResults() > 0 && op->use_empty())
      op->erase();
  llvm::BitVector unused(function.getNumArguments());
  for (BlockArgument arg : function.getArguments())
    if (arg.use_empty() &&
        function.getArgAttr(arg.getArgNumber(), nn::kParamAttrName))
      unused.set(arg.getArgNumber());
  return succeeded(function.eraseArguments(unused));
}

/// A model of `blocks` repeated blocks, from its partitions with the first
/// block (`one`) and the first two (`two`): the second block's share
/// counted once per block after the first. None where `two` has less of
/// something than `one`.
static std::optional<PartitionedLayout>
extrapolateBlocks(const PartitionedLayout &one, const PartitionedLayout &two,
                  int64_t blocks) {
  PartitionedLayout all;
  bool grows = true;
  auto extrapolate = [&](double first, double second) {
    grows &= second >= first;
    return first + (blocks - 1) * (second - first);
  };
  all.flops = extrapolate(one.flops, two.flops);
  all.parameters = extrapolate(one.parameters, two.parameters);
  all.valueBytes = extrapolate(one.valueBytes, two.valueBytes);
  all.keptBytes = extrapolate(one.keptBytes, two.keptBytes);
  all.gatheredParameters =
      extrapolate(one.gatheredParameters, two.gatheredParameters);
  // Both in the order of getCollectiveKey.
  const CollectiveUse *first = one.forward.begin();
  for (const CollectiveUse &use : two.forward) {
    CollectiveUse total = use;
    int64_t count = 0;
    if (first != one.forward.end() &&
        getCollectiveKey(*first) == getCollectiveKey(use))
      count = (first++)->count;
    total.count = extrapolate(count, use.count);
    all.forward.push_back(total);
  }
  if (!grows || first != one.forward.end())
    return std::nullopt;
  return all;
}

llvm::Expected<PartitionedLayout>
tessera::partitionLayout(const LayoutProgram &program,
                         const MachineModel &machine, const PlanChoice &choice,
                         const ModelShape *shape, bool wholeModel) {
  int64_t dp = choice.dp, tp = choice.tp;
  TensorLayout layout = choice.layout;
  OwningOpRef<ModuleOp> marked = ModuleOp(program.module).clone();
  // The search's diagnostics are its own; a failure here falls back to the
  // analytic formula.
  ScopedDiagnosticHandler quiet(marked->getContext(),
                                [](Diagnostic &) { return success(); });
  auto failure = [&](const llvm::Twine &why) {
    return llvm::createStringError(
        "the model does not partition for dp=" + llvm::Twine(dp) +
        " tp=" + llvm::Twine(tp) + " in " +
        getEnumName(kTensorLayoutNames, layout) + "'s layout" + why);
  };
  if (shape && !markKeptValues(*marked, shape->keptValues))
    return failure(": the model is not the one whose kept values are given");
  // Annotated whole (the ILP's memory constraint holds the whole model),
  // then partitioned whole or cut to its first blocks.
  PlanChoice unsplit = choice;
  unsplit.sequenceParallel = false;
  if (llvm::Error error = annotateLayout(*marked, machine, unsplit, shape))
    return failure(": " + llvm::toString(std::move(error)));
  auto partition = [&](std::optional<int64_t> blocks)
      -> llvm::Expected<std::optional<PartitionedLayout>> {
    OwningOpRef<ModuleOp> module = marked->clone();
    if (blocks && !keepFirstBlocks(*module, *blocks))
      return std::nullopt;
    if (mlir::failed(program.partition(*module)))
      return failure("");
    return measurePartition(*module);
  };
  int64_t blocks = findRepeatedBlocks(getModelFunction(*marked)).size();
  if (!wholeModel && blocks >= 3) {
    auto one = partition(1);
    if (!one)
      return one.takeError();
    auto two = partition(2);
    if (!two)
      return two.takeError();
    if (*one && *two)
      if (std::optional<PartitionedLayout> all =
              extrapolateBlocks(**one, **two, blocks))
        return std::move(*all);
  }
  auto whole = partition(std::nullopt);
  if (!whole)
    return whole.takeError();
  return std::move(**whole);
}
