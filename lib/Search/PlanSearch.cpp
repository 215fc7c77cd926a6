//===- PlanSearch.cpp - The search over plans and scaling curves ----------===//
//
// Every plan of the plan space estimated, fastest first: each dp x tp
// shape priced as partitioned where a program is given, in Megatron's
// layout and the ILP's.
//
//===----------------------------------------------------------------------===//

#include "PlannerInternal.h"

#include "mlir/IR/Threading.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>
#include <map>
#include <set>
#include <tuple>

using namespace mlir;
using namespace tessera;
using namespace tessera::planner;

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

namespace {

/// A dp x ep x tp x cp shape of the mesh: what a layout is partitioned on.
using Shape = std::tuple<int64_t, int64_t, int64_t, int64_t>;

/// A layout the search prices a shape in, and whether with sequence
/// parallelism.
using Candidate = std::pair<TensorLayout, bool>;

/// A shape's layouts as partitioned (partitionLayout), each once:
/// Megatron's, and with tp (and without ep) the ILP's, priced against
/// Megatron's. A shape with cp is priced by the formula (its ring's
/// transfers are not a collective the partitioned program's count
/// prices).
struct ShapeLayouts {
  std::optional<PartitionedLayout> megatron, solved;
  /// The ILP found the template: its plans are the template's without
  /// sequence parallelism.
  bool solvedIsMegatron = false;
  /// The share of memory the ILP's state was solved in.
  double solvedShare = 1;
};

/// Whether a user's pin allows `value`.
template <typename Pin, typename Value>
bool isPinned(const Pin &pin, Value value) {
  return !pin || *pin == value;
}

/// The search of searchPlans, in phases: the templates partitioned, every
/// plan of their shapes estimated, then the ILP's layouts solved on the
/// shapes of the fastest template plans and searched, in less memory
/// where their state left no plan room.
class PlanSearch {
public:
  PlanSearch(const ModelShape &model, const MachineModel &machine,
             int64_t devices, const SearchPins &pins,
             const LayoutProgram *program)
      : model(model), machine(machine), devices(devices), pins(pins),
        program(program), meshes(getPlanMeshes(model, devices, pins)) {}

  SearchResult run();

private:
  /// The choice of `key`'s mesh in `layout`, the rest at its defaults.
  PlanChoice getShapeChoice(Shape key, TensorLayout layout) const;
  /// Megatron's layout of every shape without cp, partitioned on the
  /// context's threads.
  void partitionTemplates();
  /// The ILP's layout of a shape whose template partitions, its state
  /// solved in `share` of device memory; false where the solver fails.
  bool solveLayout(Shape key, double share);
  /// Every plan of each shape (of `only`, when given) in each of the
  /// `candidates` layouts.
  void searchShapes(const std::set<Shape> *only,
                    ArrayRef<Candidate> candidates);
  /// Every plan of `mesh` with `microbatches`.
  void searchMicrobatches(const PlanMesh &mesh, int64_t microbatches,
                          ArrayRef<Candidate> candidates);
  /// The schedules (and their chunks per stage) a plan of `mesh` with
  /// `microbatches` and ZeRO stage `zero` may run.
  SmallVector<std::pair<PipelineSchedule, int64_t>>
  getSchedules(const PlanMesh &mesh, int64_t microbatches, int64_t zero) const;
  /// Estimates `choice` and keeps it where it fits.
  void consider(const PlanChoice &choice, const PartitionedLayout *partition);
  /// Solves the ILP's layout on the shapes of the fastest template plans
  /// with tp (pins.ilpShapes of them, or all), and names the template's
  /// plans the ILP's where the ILP found the template.
  std::set<Shape> solveFastestShapes();
  /// Where the ILP's state took the room every plan's activations needed,
  /// solves it again in less memory: first in what the leanest plan's
  /// activations leave, then bisecting between a share the state does not
  /// fit in (below) and one that leaves no plan (above).
  void solveInLessMemory(const std::set<Shape> &refined);
  /// Whether a plan of the ILP's layout on `shape` was kept.
  bool hasSolvedPlan(Shape shape) const;
  void sortFastestFirst();

  const ModelShape &model;
  const MachineModel &machine;
  int64_t devices;
  const SearchPins &pins;
  const LayoutProgram *program;
  SmallVector<PlanMesh> meshes;
  SearchResult result;
  std::map<Shape, ShapeLayouts> partitioned;
  /// The microbatches in flight of each pipeline, the same at every TP.
  std::map<std::tuple<int64_t, int64_t, PipelineSchedule>,
           SmallVector<RankInFlight>>
      inFlight;
  /// Per shape, the least a plan of the ILP's layout over memory holds
  /// beside the model state (its activations, a gradient being made).
  std::map<Shape, double> solvedRest;
  /// Per plan considered, the slowest stage's share, per shape of the cut
  /// (sequence parallelism, whole layers), and the stage cut and the
  /// microbatches in flight per schedule and shape of the cut.
  std::map<std::pair<bool, bool>, double> imbalances;
  std::map<std::tuple<PipelineSchedule, bool, bool>, PipelineActivationLayout>
      activationLayouts;
};

} // namespace

PlanChoice PlanSearch::getShapeChoice(Shape key, TensorLayout layout) const {
  PlanChoice shape;
  std::tie(shape.dp, shape.ep, shape.tp, shape.cp) = key;
  shape.pp = devices / shape.dp / shape.ep / shape.tp / shape.cp;
  shape.precision = pins.precision;
  shape.layout = layout;
  return shape;
}

void PlanSearch::partitionTemplates() {
  SmallVector<Shape> shapes;
  for (PlanMesh mesh : meshes)
    if (mesh.cp == 1)
      shapes.push_back({mesh.dp, mesh.ep, mesh.tp, mesh.cp});
  if (!program || shapes.empty())
    return;
  // The first alone, which loads the passes' dialects.
  std::vector<std::optional<PartitionedLayout>> templates(shapes.size());
  auto partitionTemplate = [&](size_t index) {
    llvm::Expected<PartitionedLayout> layout = partitionLayout(
        *program, machine,
        getShapeChoice(shapes[index], TensorLayout::Megatron), &model);
    if (layout)
      templates[index] = std::move(*layout);
    else
      llvm::consumeError(layout.takeError());
  };
  partitionTemplate(0);
  mlir::parallelFor(program->module->getContext(), 1, shapes.size(),
                    partitionTemplate);
  for (auto [shape, partition] : llvm::zip(shapes, templates))
    partitioned[shape].megatron = std::move(partition);
}

bool PlanSearch::solveLayout(Shape key, double share) {
  ShapeLayouts &layouts = partitioned[key];
  PlanChoice shape = getShapeChoice(key, TensorLayout::Solved);
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
}

void PlanSearch::searchShapes(const std::set<Shape> *only,
                              ArrayRef<Candidate> candidates) {
  for (const PlanMesh &mesh : meshes) {
    if (only && !only->count({mesh.dp, mesh.ep, mesh.tp, mesh.cp}))
      continue;
    imbalances.clear();
    for (int64_t microbatches :
         getDivisors(model.batch / (mesh.dp * mesh.ep))) {
      if (!isPinned(pins.microbatches, microbatches))
        continue;
      activationLayouts.clear();
      searchMicrobatches(mesh, microbatches, candidates);
    }
  }
}

SmallVector<std::pair<PipelineSchedule, int64_t>>
PlanSearch::getSchedules(const PlanMesh &mesh, int64_t microbatches,
                         int64_t zero) const {
  SmallVector<std::pair<PipelineSchedule, int64_t>> schedules;
  int64_t pp = mesh.pp;
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
    if (!getScheduleRejection({pp, microbatches, chunks, schedule}).empty())
      continue;
    // 2BW and PipeDream change the numerics (gradients at earlier
    // weights): only where allowed, and without ZeRO. PipeDream's stages
    // update at their own pace, so no weight is tied across them.
    bool async = schedule == PipelineSchedule::TwoBW ||
                 schedule == PipelineSchedule::PipeDream;
    if (async && (!(pins.allowAsync || pins.schedule == schedule) || zero != 0))
      continue;
    if (schedule == PipelineSchedule::PipeDream && model.tiedEmbedding)
      continue;
    if (schedule == PipelineSchedule::Interleaved && model.layers < chunks * pp)
      continue;
    if (!isPinned(pins.schedule, schedule))
      continue;
    schedules.push_back({schedule, chunks});
  }
  return schedules;
}

void PlanSearch::searchMicrobatches(const PlanMesh &mesh, int64_t microbatches,
                                    ArrayRef<Candidate> candidates) {
  auto [dp, tp, pp, ep, cp] = mesh;
  const ShapeLayouts &tensorLayouts = partitioned[{dp, ep, tp, cp}];
  for (int64_t zero = 0; zero <= (dp * ep * cp > 1 ? 3 : 0); ++zero) {
    if (!isPinned(pins.zero, zero))
      continue;
    for (bool reshard : {true, false}) {
      if ((!reshard && zero < 3) ||
          !isPinned(pins.reshardAfterForward, reshard))
        continue;
      for (auto [schedule, chunks] : getSchedules(mesh, microbatches, zero))
        for (Recompute recompute :
             {Recompute::None, Recompute::Selective, Recompute::Full}) {
          if (!isPinned(pins.recompute, recompute))
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
            if ((sp &&
                 (tp == 1 || model.seq % (tp * cp) != 0 || model.experts)) ||
                !isPinned(pins.sequenceParallel, sp))
              continue;
            PlanChoice choice{dp,
                              tp,
                              pp,
                              microbatches,
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
            consider(choice, partition ? &*partition : nullptr);
          }
        }
    }
  }
}

void PlanSearch::consider(const PlanChoice &choice,
                          const PartitionedLayout *partition) {
  StageCutShape cut = StageCutShape::get(choice);
  auto [imbalance, newCut] =
      imbalances.try_emplace({cut.sequenceParallel, cut.wholeLayers});
  if (newCut)
    imbalance->second = getStageImbalance(model, choice.pp, cut);
  auto [layout, newLayout] = activationLayouts.try_emplace(
      {choice.schedule, cut.sequenceParallel, cut.wholeLayers});
  if (newLayout && choice.pp > 1) {
    auto [ranks, added] =
        inFlight.try_emplace({choice.pp, choice.microbatches, choice.schedule});
    if (added)
      ranks->second =
          getStagesInFlight({choice.pp, choice.microbatches,
                             choice.virtualStages, choice.schedule});
    layout->second = getPipelineActivationLayout(model, choice, &ranks->second);
  }
  PlanEstimate estimate = estimatePlan(
      model, machine, choice, imbalance->second, partition, &layout->second);
  ++result.considered;
  if (pins.progress && result.considered % 64 == 0)
    pins.progress(result);
  if (!estimate.fits) {
    ++result.overMemory;
    // What the ILP's state leaves the rest of its leanest plan.
    if (choice.layout == TensorLayout::Solved) {
      double rest = estimate.peakMemoryBytes - estimate.paramBytes -
                    estimate.gradBytes - estimate.optimizerBytes;
      auto [it, inserted] = solvedRest.try_emplace(
          {choice.dp, choice.ep, choice.tp, choice.cp}, rest);
      it->second = std::min(it->second, rest);
    }
    return;
  }
  result.bestStepSeconds =
      std::min(result.bestStepSeconds, estimate.stepTimeSeconds);
  result.plans.push_back(estimate);
}

void PlanSearch::sortFastestFirst() {
  llvm::stable_sort(result.plans,
                    [](const PlanEstimate &x, const PlanEstimate &y) {
                      return x.stepTimeSeconds < y.stepTimeSeconds;
                    });
}

std::set<Shape> PlanSearch::solveFastestShapes() {
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
  return refined;
}

bool PlanSearch::hasSolvedPlan(Shape shape) const {
  return llvm::any_of(result.plans, [&](const PlanEstimate &plan) {
    const PlanChoice &c = plan.choice;
    return Shape{c.dp, c.ep, c.tp, c.cp} == shape &&
           c.layout == TensorLayout::Solved;
  });
}

void PlanSearch::solveInLessMemory(const std::set<Shape> &refined) {
  for (Shape shape : refined) {
    if (!partitioned[shape].solved || hasSolvedPlan(shape) ||
        !solvedRest.count(shape))
      continue;
    double share = 1 - solvedRest[shape] / machine.memoryBytes;
    double below = 0, above = 1;
    for (int attempt = 0; attempt < 2 && share > 0 && !hasSolvedPlan(shape);
         ++attempt) {
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
}

SearchResult PlanSearch::run() {
  // The templates on every shape; then the ILP's layouts on the shapes of
  // the fastest template plans with tp. Where the ILP finds the template,
  // the template's plans without sequence parallelism are the ILP's.
  partitionTemplates();
  searchShapes(nullptr, {{TensorLayout::Megatron, false},
                         {TensorLayout::Megatron, true}});
  sortFastestFirst();
  if (!program || pins.layout == TensorLayout::Megatron)
    return std::move(result);
  std::set<Shape> refined = solveFastestShapes();
  // Ranked among the templates, which a pin of the ILP's layout then drops.
  if (pins.layout)
    llvm::erase_if(result.plans, [&](const PlanEstimate &plan) {
      return plan.choice.tp > 1 && plan.choice.layout != *pins.layout;
    });
  searchShapes(&refined, {{TensorLayout::Solved, false}});
  // The solver leaves the activations out.
  solveInLessMemory(refined);
  sortFastestFirst();
  return std::move(result);
}

SearchResult tessera::searchPlans(const ModelShape &model,
                                  const MachineModel &machine, int64_t devices,
                                  const SearchPins &pins,
                                  const LayoutProgram *program) {
  return PlanSearch(model, machine, devices, pins, program).run();
}
