//===- Pipelines.cpp - The registered pass pipelines ----------------------===//
//
// One compile is one pass pipeline, built from CompileOptions; the CLI runs
// it and tessera-opt replays it (--tessera-compile-pipeline).
//
//===----------------------------------------------------------------------===//

#include "tessera/Pipelines/Pipelines.h"

#include "tessera/Transforms/Passes.h"

#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;
using namespace tessera;

std::string tessera::checkCompileOptions(const CompileOptions &options) {
  // Counts of stages and microbatches start at 1 (a count below would
  // compile as 1 where no pass reads it).
  for (auto [value, flag] :
       {std::pair<int64_t, const char *>{options.pipelineStages, "--pp"},
        {options.microbatches, "--microbatches"},
        {options.virtualStages, "--virtual"}})
    if (value < 1)
      return std::string(flag) + " must be at least 1, got " +
             std::to_string(value);
  if (options.zero != ZeroStage::None && options.train != Optimizer::AdamW)
    return "--zero needs --train adamw (the optimizer state it shards)";
  if (options.clipGrad < 0)
    return "--clip-grad must be a non-negative norm (0: no clipping)";
  if (options.clipGrad > 0 && options.train != Optimizer::AdamW)
    return "--clip-grad needs --train adamw";
  if (options.lossScale && options.train != Optimizer::AdamW)
    return "--loss-scale needs --train adamw";
  // (The options' parser refuses NaN and the infinities.)
  if (options.initialLossScale < 0) {
    std::string scale;
    llvm::raw_string_ostream(scale) << options.initialLossScale.getValue();
    return "--initial-loss-scale must be positive (0: the default), got " +
           scale;
  }
  if (options.lossScaleWindow < 1)
    return "--loss-scale-window must be at least 1, got " +
           std::to_string(options.lossScaleWindow);
  bool scheduled = options.lrSchedule != LrScheduleKind::Constant ||
                   options.warmupSteps != 0;
  if (scheduled && options.train != Optimizer::AdamW)
    return "--lr-schedule and --warmup-steps need --train adamw";
  if (options.warmupSteps < 0)
    return "--warmup-steps must be at least 0, got " +
           std::to_string(options.warmupSteps);
  if (options.lrSchedule != LrScheduleKind::Constant &&
      options.decaySteps <= options.warmupSteps)
    return "--lr-schedule " +
           std::string(
               getEnumName(kLrScheduleNames, options.lrSchedule.getValue())) +
           " needs --decay-steps past --warmup-steps (" +
           std::to_string(options.warmupSteps) + ")";
  if (options.minLr < 0 || options.minLr > options.lr)
    return "--min-lr must be from 0 to --lr";
  if (options.servers < 0)
    return "--ps must be at least 0 servers, got " +
           std::to_string(options.servers);
  if (options.servers > 0) {
    if (options.train == Optimizer::None)
      return "--ps trains on parameter servers: give --train";
    if (options.isPipelined() || options.zero != ZeroStage::None ||
        options.clipGrad > 0 || options.lossScale)
      return "--ps trains data-parallel workers against servers that hold "
             "the parameters: it takes no --pp, --microbatches, --zero, "
             "--clip-grad or --loss-scale";
  }
  bool steady = isSteady(options.schedule.getValue());
  std::string schedule =
      "--schedule " + std::string(getEnumName(kPipelineScheduleNames,
                                              options.schedule.getValue()));
  if (steady && (options.train == Optimizer::None || options.clipGrad > 0 ||
                 options.lossScale))
    return schedule +
           " updates each stage when its own backwards are done: it needs "
           "--train and takes no --clip-grad or --loss-scale (a norm over "
           "all stages)";
  if (options.schedule == PipelineSchedule::TwoBW && !options.isPipelined())
    return schedule + " is a pipeline schedule: give --pp (and "
                      "--microbatches, at least --pp)";
  if (options.schedule == PipelineSchedule::PipeDream &&
      options.stashDelays.empty() &&
      (options.pipelineStages < 2 || options.microbatches != 1))
    return schedule + " is a pipeline schedule whose steps are one "
                      "microbatch each: give --pp, and no --microbatches";
  if (!options.stashDelays.empty() &&
      (options.schedule != PipelineSchedule::PipeDream ||
       options.isPipelined()))
    return "--stash-delays gives PipeDream's delays to a step on one device "
           "(--schedule pipedream without --pp)";
  if (options.weightStash || steady) {
    if (options.train == Optimizer::None)
      return "--weight-stash keeps versions of a train step's weights: give "
             "--train";
    if (options.zero != ZeroStage::None || options.servers > 0)
      return "--weight-stash takes no --zero or --ps (their updates do not "
             "keep the weights' versions yet)";
  }
  if (options.isPipelined() && options.train == Optimizer::None)
    return "--pp and --microbatches pipeline a train step: give --train";
  if (options.recompute != Recompute::None && options.train == Optimizer::None)
    return "--recompute recomputes a train step's activations: give --train";
  return "";
}

/// The train step, when `options` ask for one.
static void addTrainStep(OpPassManager &pm, const CompileOptions &options) {
  if (options.train == Optimizer::None)
    return;
  TrainStepPassOptions trainStep;
  trainStep.optimizer = options.train;
  trainStep.lr = options.lr;
  trainStep.weightDecay = options.weightDecay;
  trainStep.precision = options.precision;
  trainStep.schedule = options.lrSchedule;
  trainStep.warmupSteps = options.warmupSteps;
  trainStep.decaySteps = options.decaySteps;
  trainStep.minLr = options.minLr;
  trainStep.lossScale = options.lossScale;
  trainStep.initialLossScale = options.initialLossScale;
  pm.addPass(createTrainStepPass(trainStep));
  // 2BW's steps read the weights of the step before. So do PipeDream's
  // before the pipeline pass, which reads a stash as the weights of its
  // rank's latest update, each rank's steps lagging by its own count; on
  // one device PipeDream's stashes take those counts as delays.
  if (options.weightStash || isSteady(options.schedule.getValue())) {
    WeightStashPassOptions stash;
    stash.delays.assign(options.stashDelays.begin(), options.stashDelays.end());
    pm.addPass(createWeightStashPass(stash));
  }
}

/// Gradient clipping, when `options` ask for it: the norm reads the
/// gradients as the updates read them, so after ZeRO.
static void addClipping(OpPassManager &pm, const CompileOptions &options) {
  if (options.clipGrad <= 0 && !options.lossScale)
    return;
  ClipGradientsPassOptions clip;
  clip.maxNorm = options.clipGrad;
  clip.window = options.lossScaleWindow;
  pm.addPass(createClipGradientsPass(clip));
}

/// The ops' folders and canonicalizations (a dot reads a transposed operand
/// in place; collectives that cancel), which the partitioner's cleanup also
/// runs on what it partitions: for every function, before passes that mark
/// ops (units, schedules).
static void addFolding(OpPassManager &pm) {
  GreedyRewriteConfig config;
  config.setRegionSimplificationLevel(GreedySimplifyRegionLevel::Disabled);
  pm.addPass(createCanonicalizerPass(config));
}

void tessera::buildMeshPipeline(OpPassManager &pm,
                                const CompileOptions &options) {
  if (options.mesh.empty() && options.pipelineStages == 1)
    return;
  SetMeshPassOptions mesh;
  mesh.shape = options.mesh;
  mesh.pipelineStages = options.pipelineStages;
  pm.addPass(createSetMeshPass(mesh));
}

void tessera::buildShardingPipeline(OpPassManager &pm,
                                    const CompileOptions &options) {
  // Every later pass reads the mesh's sizes; the pipeline axis is one of
  // them.
  buildMeshPipeline(pm, options);
  // Ring attention's causal load balance reads the sized "cp" axis; the
  // train step then differentiates the permuted forward.
  if (options.zigzag)
    pm.addPass(createZigzagContextPass());
  addTrainStep(pm, options);
  // Recomputation clones forward ops into the backward; ZeRO then sees the
  // clones' parameter reads as the backward's (gathered again at stage 3).
  if (options.recompute != Recompute::None) {
    RecomputePassOptions recompute;
    recompute.mode = options.recompute;
    pm.addPass(createRecomputePass(recompute));
  }
  // ZeRO seeds the shardings of the optimizer state, gradients and
  // parameters, so it runs before propagation completes the rest.
  if (options.zero != ZeroStage::None) {
    ZeroPassOptions zero;
    zero.stage = options.zero;
    zero.dataAxes.assign(options.zeroAxes.begin(), options.zeroAxes.end());
    zero.reshardAfterForward = options.reshardAfterForward;
    zero.units = options.zeroUnits;
    pm.addPass(createZeroPass(zero));
  }
  addClipping(pm, options);
  // Parameter-server training: the workers' side of the step or the
  // servers' (compilePlan compiles each and joins them).
  if (options.servers > 0) {
    ParameterServerPassOptions server;
    server.part = options.serverPart;
    server.servers = options.servers;
    pm.addPass(createParameterServerPass(server));
  }
  // Microbatches are a mesh axis in time: propagation and partition treat
  // them as one more split of the batch, which the pipeline pass then runs
  // one microbatch after another (each unit once, run per microbatch by
  // the stage's schedule).
  if (options.microbatches > 1) {
    MicrobatchPassOptions microbatch;
    microbatch.microbatches = options.microbatches;
    pm.addPass(createMicrobatchPass(microbatch));
  }
  // Grouped-query attention with more devices than kv heads on an axis
  // splits the kv heads over a part of it; the parts merge back after.
  pm.addPass(createSplitAxesPass());
  PropagatePassOptions propagate;
  propagate.mode = options.propagation;
  propagate.machine = options.machine;
  pm.addPass(createPropagatePass(propagate));
  // Softmax and cross-entropy over a split dim work on its pieces.
  pm.addPass(createDecomposeSplitReductionsPass());
  // Dims that their axes do not divide grow to a multiple of them.
  pm.addPass(createPadPass());
  PartitionPassOptions partition;
  partition.machine = options.machine;
  pm.addPass(createPartitionPass(partition));
  addFolding(pm);
  pm.addPass(createMergeAxesPass());
  if (options.isPipelined()) {
    PipelinePassOptions pipeline;
    pipeline.stages = options.pipelineStages;
    pipeline.microbatches = options.microbatches;
    pipeline.schedule = options.schedule;
    pipeline.virtualStages = options.virtualStages;
    pm.addPass(createPipelinePass(pipeline));
  }
  // The overlap schedule moves the collectives of the final programs, the
  // pipeline's stages included.
  if (options.overlap) {
    SchedulePassOptions schedule;
    schedule.prefetch = options.prefetch;
    schedule.bucketBytes = options.bucketBytes;
    schedule.memoryLimit = options.memoryLimit;
    schedule.gatherUnits = options.gatherUnits;
    pm.addPass(createSchedulePass(schedule));
  }
}

/// Export of the plan to `output`.
static void addExport(OpPassManager &pm, StringRef output, bool text) {
  ExportPassOptions options;
  options.output = output.str();
  options.text = text;
  pm.addPass(createExportPass(options));
}

/// Elementwise fusion, when `options` ask for it, then export of the plan
/// to their output.
static void addFusionAndExport(OpPassManager &pm,
                               const CompileOptions &options) {
  if (options.fuse)
    pm.addPass(createFuseElementwisePass());
  addExport(pm, options.output, options.text);
}

LogicalResult tessera::partitionAnnotated(ModuleOp module) {
  PassManager pm(module->getContext());
  buildShardingPipeline(pm, CompileOptions());
  return pm.run(module);
}

void tessera::buildCompilePipeline(OpPassManager &pm,
                                   const CompileOptions &options) {
  buildShardingPipeline(pm, options);
  addFusionAndExport(pm, options);
}

void tessera::buildSingleDevicePipeline(OpPassManager &pm,
                                        const CompileOptions &options) {
  addTrainStep(pm, options);
  addClipping(pm, options);
  pm.addPass(createStripShardingPass());
  addFolding(pm);
  addFusionAndExport(pm, options);
}

void tessera::buildGradientPipeline(OpPassManager &pm, StringRef output) {
  pm.addPass(createStripShardingPass());
  pm.addPass(createAutodiffPass());
  addExport(pm, output, /*text=*/false);
}

std::string tessera::getReplayCommand(StringRef model,
                                      const CompileOptions &options,
                                      bool exportPlan) {
  std::string printed;
  llvm::raw_string_ostream os(printed);
  options.print(os);
  // print() writes "{a=1 b=2}"; the flag takes what is inside the braces.
  StringRef inside = StringRef(printed).drop_front().drop_back().trim();
  if (!exportPlan)
    return ("tessera-opt " + model + " --tessera-sharding-pipeline='" + inside +
            "' -o " + options.output)
        .str();
  return ("tessera-opt " + model + " --tessera-compile-pipeline='" + inside +
          "' -o /dev/null")
      .str();
}

/// Registers `name`, built by `build` from CompileOptions that
/// checkCompileOptions accepts.
static void registerCompilePipeline(StringRef name, StringRef description,
                                    void (*build)(OpPassManager &,
                                                  const CompileOptions &)) {
  registerPassPipeline(
      name, description,
      [build](OpPassManager &pm, StringRef text,
              function_ref<LogicalResult(const Twine &)> errorHandler) {
        CompileOptions options;
        if (failed(options.parseFromString(text)))
          return failure();
        if (std::string error = checkCompileOptions(options); !error.empty())
          return errorHandler(error);
        build(pm, options);
        return success();
      },
      [](function_ref<void(const mlir::detail::PassOptions &)> optionHandler) {
        optionHandler(CompileOptions());
      });
}

void tessera::registerTesseraPipelines() {
  registerCompilePipeline(
      "tessera-compile-pipeline",
      "What `tessera compile` runs: mesh, train step, ZeRO, propagation, "
      "partition, pipeline and overlap schedules, export of the plan",
      buildCompilePipeline);
  registerCompilePipeline("tessera-sharding-pipeline",
                          "--tessera-compile-pipeline up to the per-device "
                          "program, without export (compile --emit "
                          "partitioned)",
                          buildShardingPipeline);
}
