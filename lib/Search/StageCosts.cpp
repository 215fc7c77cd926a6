//===- StageCosts.cpp - What the pipeline pass's stage cuts cost ----------===//
//
// How the pipeline pass cuts a GPT into stages for a plan, and what the
// cut puts on each stage: its compute, its parameters, its half-layers.
//
//===----------------------------------------------------------------------===//

#include "PlannerInternal.h"

#include <map>
#include <mutex>
#include <tuple>

using namespace mlir;
using namespace tessera;
using namespace tessera::planner;

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

const StageCuts &planner::getStageCuts(const ModelShape &model,
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
