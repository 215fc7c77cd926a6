//===- ShardingSolverTest.cpp - the per-op sharding ILP on generated GPTs -===//

#include "tessera/Search/ShardingSolver.h"
#include "lib/Search/AutoSharding/Solver.h"

#include "dialects/Dist/IR/DistOps.h"
#include "dialects/NN/IR/NNOps.h"
#include "tessera/Models/Models.h"
#include "tessera/Search/ShardingTemplates.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

using namespace mlir;
using namespace tessera;

namespace {

/// A GPT large enough that tensor parallelism pays on one H100 node: a
/// sequence of 2048 tokens, hidden 8192.
GptConfig getLargeGpt(int64_t layers) {
  GptConfig config;
  config.layers = layers;
  config.hidden = 8192;
  config.heads = 64;
  config.seq = 2048;
  config.vocab = 32768;
  config.batch = 1;
  config.dtype = "bf16";
  return config;
}

/// The model on a dp=1 x tp=4 mesh: with Megatron-LM's annotations, or none.
OwningOpRef<ModuleOp> buildOnMesh(MLIRContext &context, const GptConfig &config,
                                  bool megatron) {
  OwningOpRef<ModuleOp> module = buildGpt(&context, config);
  annotateMegatron(*module, 1, 4);
  if (!megatron)
    for (auto function : module->getOps<func::FuncOp>())
      for (unsigned i = 0; i < function.getNumArguments(); ++i)
        function.removeArgAttr(i, dist::DistDialect::kShardingAttrName);
  return module;
}

struct Solved {
  OwningOpRef<ModuleOp> module;
  ShardingSolution solution;
};

Solved solve(MLIRContext &context, const GptConfig &config, bool megatron) {
  Solved solved;
  solved.module = buildOnMesh(context, config, megatron);
  llvm::Expected<MachineModel> machine =
      loadMachineModel("dgx-h100", TESSERA_MACHINES_DIR);
  EXPECT_TRUE(static_cast<bool>(machine));
  ShardingSolverOptions options;
  options.axes = {"tp"};
  auto function = *solved.module->getOps<func::FuncOp>().begin();
  auto mesh = *solved.module->getOps<dist::MeshOp>().begin();
  llvm::Expected<ShardingSolution> solution =
      solveShardings(function, mesh, *machine, options);
  EXPECT_TRUE(static_cast<bool>(solution))
      << llvm::toString(solution.takeError());
  solved.solution = std::move(*solution);
  return solved;
}

/// The chosen dims of the parameter `name`.
SmallVector<AxisList> getParameter(Solved &solved, StringRef name) {
  auto function = *solved.module->getOps<func::FuncOp>().begin();
  for (const ShardingChoice &choice : solved.solution.choices) {
    if (choice.op)
      continue;
    auto param = function.getArgAttrOfType<StringAttr>(choice.argument,
                                                       nn::kParamAttrName);
    if (param && param.getValue() == name)
      return choice.chosen.results.front().getDimAxes();
  }
  ADD_FAILURE() << "no parameter " << name.str();
  return {};
}

TEST(ShardingSolverTest, FindsMegatronsSplitAndIsNoCostlierThanIt) {
  MLIRContext context;
  context.loadDialect<nn::NNDialect, dist::DistDialect, func::FuncDialect>();
  Solved free = solve(context, getLargeGpt(2), /*megatron=*/false);
  Solved pinned = solve(context, getLargeGpt(2), /*megatron=*/true);
  // Megatron's annotations are hard constraints of the same program: the
  // free solution can only be as cheap or cheaper.
  EXPECT_LE(free.solution.objectiveSeconds,
            pinned.solution.objectiveSeconds * (1 + 1e-9));
  // Column-parallel q, k, v and first MLP weight, row-parallel output
  // projections: Megatron-LM's split, found from the graph alone.
  StringAttr tp = StringAttr::get(&context, "tp");
  for (int64_t layer : {0, 1}) {
    std::string prefix = "blocks." + std::to_string(layer) + ".";
    for (StringRef column : {"attn.wq", "attn.wk", "attn.wv", "mlp.w1"})
      EXPECT_EQ(getParameter(free, prefix + column.str()),
                (SmallVector<AxisList>{{}, {tp}}))
          << column.str();
    for (StringRef row : {"attn.wo", "mlp.w2"})
      EXPECT_EQ(getParameter(free, prefix + row.str()),
                (SmallVector<AxisList>{{tp}, {}}))
          << row.str();
  }
}

TEST(ShardingSolverTest, RepeatedBlocksKeepTheProgramTheSizeOfOne) {
  MLIRContext context;
  context.loadDialect<nn::NNDialect, dist::DistDialect, func::FuncDialect>();
  Solved two = solve(context, getLargeGpt(2), /*megatron=*/false);
  Solved eight = solve(context, getLargeGpt(8), /*megatron=*/false);
  EXPECT_EQ(two.solution.sharedBlocks, 2);
  EXPECT_EQ(eight.solution.sharedBlocks, 8);
  EXPECT_EQ(two.solution.variables, eight.solution.variables);
  EXPECT_EQ(two.solution.constraints, eight.solution.constraints);
  EXPECT_EQ(two.solution.distinctNodes, eight.solution.distinctNodes);
  EXPECT_GT(eight.solution.nodes, two.solution.nodes);
  // Every block is sharded as the first.
  for (int64_t layer = 1; layer < 8; ++layer)
    EXPECT_EQ(
        getParameter(eight, "blocks." + std::to_string(layer) + ".mlp.w2"),
        getParameter(eight, "blocks.0.mlp.w2"));
}

TEST(ShardingSolverTest, EveryExampleIsNoCostlierThanItsTemplate) {
  // The examples carry Megatron-LM's template (annotateMegatron); solved
  // with it as hard constraints and without any, on each mesh shape of 4
  // devices, the free program is never the costlier.
  MLIRContext context;
  context.loadDialect<nn::NNDialect, dist::DistDialect, func::FuncDialect>();
  llvm::Expected<MachineModel> machine =
      loadMachineModel("dgx-h100", TESSERA_MACHINES_DIR);
  ASSERT_TRUE(static_cast<bool>(machine));
  std::error_code error;
  int64_t examples = 0;
  for (llvm::sys::fs::directory_iterator it(TESSERA_EXAMPLES_DIR, error), end;
       it != end && !error; it.increment(error)) {
    if (llvm::sys::path::extension(it->path()) != ".mlir")
      continue;
    ++examples;
    OwningOpRef<ModuleOp> model =
        parseSourceFile<ModuleOp>(it->path(), &context);
    ASSERT_TRUE(model) << it->path();
    for (auto [dp, tp] : {std::pair<int64_t, int64_t>{1, 4}, {2, 2}, {4, 1}}) {
      OwningOpRef<ModuleOp> pinned(cast<ModuleOp>((*model)->clone()));
      auto mesh = *pinned->getOps<dist::MeshOp>().begin();
      mesh.setShape({dp, tp});
      auto function = *pinned->getOps<func::FuncOp>().begin();
      llvm::Expected<ShardingSolution> withTemplate =
          solveShardings(function, mesh, *machine, {});
      ASSERT_TRUE(static_cast<bool>(withTemplate))
          << llvm::toString(withTemplate.takeError());
      OwningOpRef<ModuleOp> free(cast<ModuleOp>((*model)->clone()));
      llvm::Expected<ShardingSolution> solved =
          applyMeshSharding(*free, *machine, dp, tp, {});
      ASSERT_TRUE(static_cast<bool>(solved))
          << llvm::toString(solved.takeError());
      EXPECT_LE(solved->objectiveSeconds,
                withTemplate->objectiveSeconds * (1 + 1e-9))
          << it->path() << " dp=" << dp << " tp=" << tp;
    }
  }
  EXPECT_GE(examples, 4);
}

TEST(ShardingSolverTest, PipelineStagesEachFitTheirDevice) {
  // An MLP's AdamW step (16 bytes of state per parameter) in two pipeline
  // stages on a tp=2 mesh, its first layer four times the others: the cut
  // balances time, so the first stage holds it and the second layer, 5/7
  // of the state. Each stage's state must fit its device: a limit of 40%
  // of the whole fits with the first stage's weights split over tp; 30%
  // fits the whole state in two devices but not the first stage in one,
  // which the error says.
  MLIRContext context;
  context.loadDialect<nn::NNDialect, dist::DistDialect, func::FuncDialect>();
  MlpConfig config;
  config.layers = 4;
  config.input = 4096;
  config.hidden = 1024;
  config.output = 1024;
  config.batch = 8;
  llvm::Expected<MachineModel> machine =
      loadMachineModel("dgx-h100", TESSERA_MACHINES_DIR);
  ASSERT_TRUE(static_cast<bool>(machine));
  double state = 16.0 * (4096 * 1024 + 3 * 1024 * 1024 + 4 * 1024);
  ShardingSolverOptions options;
  options.keepActivations = false;
  options.batchAxes = {"dp"};
  options.memoryLimitBytes = 0.4 * state;
  OwningOpRef<ModuleOp> model = buildMlp(&context, config);
  llvm::Expected<ShardingSolution> solved =
      applyMeshSharding(*model, *machine, 1, 2, options, /*stages=*/2);
  ASSERT_TRUE(static_cast<bool>(solved)) << llvm::toString(solved.takeError());
  EXPECT_LE(solved->memoryBytes, 0.4 * state);
  EXPECT_GT(solved->memoryBytes, 0.3 * state);
  int64_t marks = 0;
  model->walk([&](Operation *op) {
    marks += op->hasAttr(dist::DistDialect::kStageAttrName);
  });
  EXPECT_EQ(marks, 1);
  options.memoryLimitBytes = 0.3 * state;
  OwningOpRef<ModuleOp> small = buildMlp(&context, config);
  llvm::Expected<ShardingSolution> failed =
      applyMeshSharding(*small, *machine, 1, 2, options, /*stages=*/2);
  ASSERT_FALSE(static_cast<bool>(failed));
  EXPECT_NE(llvm::toString(failed.takeError()).find("of pipeline stage"),
            std::string::npos);
}

TEST(ShardingSolverTest, ZeroAndMicrobatchesPayTheirCollectives) {
  // An MLP's AdamW step on dp=2, the batch on dp, its weights whole: the
  // gradients' all-reduce, once per step however many microbatches (they
  // are summed first); ZeRO-1 gathers the updated weights, and the sums
  // it reduce-scatters are as large; ZeRO-2 reduce-scatters each
  // microbatch's gradients.
  MLIRContext context;
  context.loadDialect<nn::NNDialect, dist::DistDialect, func::FuncDialect>();
  MlpConfig config;
  config.layers = 2;
  config.input = 256;
  config.hidden = 256;
  config.output = 256;
  config.batch = 8;
  llvm::Expected<MachineModel> machine =
      loadMachineModel("dgx-h100", TESSERA_MACHINES_DIR);
  ASSERT_TRUE(static_cast<bool>(machine));
  double weights = 4.0 * 2 * (256 * 256 + 256);
  auto collectiveBytes = [&](int64_t microbatches, int64_t zero) {
    ShardingSolverOptions options;
    options.keepActivations = false;
    options.batchAxes = {"dp"};
    options.microbatches = microbatches;
    options.zeroStage = zero;
    OwningOpRef<ModuleOp> model = buildMlp(&context, config);
    llvm::Expected<ShardingSolution> solved =
        applyMeshSharding(*model, *machine, 2, 1, options);
    EXPECT_TRUE(static_cast<bool>(solved))
        << llvm::toString(solved.takeError());
    return solved ? solved->reshardBytes : 0.0;
  };
  // Beside them, the loss's mean over dp: 4 bytes per microbatch.
  EXPECT_NEAR(collectiveBytes(1, 0), weights, 64);
  EXPECT_NEAR(collectiveBytes(4, 0), weights, 64);
  EXPECT_NEAR(collectiveBytes(1, 1), 2 * weights, 64);
  EXPECT_NEAR(collectiveBytes(4, 1), 2 * weights, 64);
  EXPECT_NEAR(collectiveBytes(4, 2), 5 * weights, 64);
}

TEST(ShardingSolverTest, CostsOfAnyMagnitudeReachTheSolverScaled) {
  // One of three choices, costing 3e30, 1e30 and 2e30: Clp asserted
  // (fabs(obj[i]) < 1.0e25) and aborted the process.
  autosharding::IntegerProgram program;
  std::vector<int> columns;
  for (double cost : {3e30, 1e30, 2e30})
    columns.push_back(program.addColumn(cost, /*integer=*/true));
  program.addRow(columns, {1.0, 1.0, 1.0}, 1, 1);
  llvm::Expected<autosharding::IntegerSolution> solved =
      autosharding::solveIntegerProgram(program, /*seconds=*/10);
  ASSERT_TRUE(static_cast<bool>(solved)) << llvm::toString(solved.takeError());
  ASSERT_EQ(solved->values.size(), 3u);
  EXPECT_NEAR(solved->values[1], 1.0, 1e-6);
  // A cost that is not finite is refused, not taken for CBC's infinity.
  program.objective[2] = std::numeric_limits<double>::infinity();
  llvm::Expected<autosharding::IntegerSolution> infinite =
      autosharding::solveIntegerProgram(program, /*seconds=*/10);
  ASSERT_FALSE(static_cast<bool>(infinite));
  EXPECT_EQ(llvm::toString(infinite.takeError()),
            "the cost of variable 2 is not a finite number");
}

TEST(ShardingSolverTest, AnExtremeButValidMachineIsSolved) {
  // The slowest machine a machine file may describe: the MLP's GEMMs take
  // 1e12 s each (1e18 in the program's microseconds), on which CBC called
  // its programs infeasible before the objective was scaled (tessera plan:
  // "no sharding on {"tp"} fits in 1000000.00 GB per device").
  llvm::Expected<MachineModel> machine = parseMachineModel(R"({
    "name": "slowest", "sources": ["the bounds of a machine file"],
    "device": {"name": "d", "peak_flops_per_second": {"fp32": 1e6},
               "memory_bytes": 1e15, "memory_bandwidth_bytes_per_second": 1e6,
               "gemm_half_efficiency_flops": 1e18},
    "efficiency": {"gemm": 0.001, "attention": 0.001, "memory": 0.001,
                   "kernel_launch_seconds": 3600,
                   "collective_seconds": 3600, "step_seconds": 3600},
    "levels": [{"name": "slow", "devices": 8,
                "bandwidth_bytes_per_second": 1e6, "latency_seconds": 1}]})");
  ASSERT_TRUE(static_cast<bool>(machine))
      << llvm::toString(machine.takeError());
  MLIRContext context;
  context.loadDialect<nn::NNDialect, dist::DistDialect, func::FuncDialect>();
  llvm::SmallString<256> path(TESSERA_EXAMPLES_DIR);
  llvm::sys::path::append(path, "mlp.mlir");
  for (auto [dp, tp] : {std::pair<int64_t, int64_t>{1, 8}, {2, 4}}) {
    OwningOpRef<ModuleOp> model = parseSourceFile<ModuleOp>(path, &context);
    ASSERT_TRUE(model) << path.str().str();
    llvm::Expected<ShardingSolution> solved =
        applyMeshSharding(*model, *machine, dp, tp, {});
    ASSERT_TRUE(static_cast<bool>(solved))
        << "dp=" << dp << " tp=" << tp << ": "
        << llvm::toString(solved.takeError());
    EXPECT_TRUE(std::isfinite(solved->objectiveSeconds));
    EXPECT_GT(solved->objectiveSeconds, 1e12);
  }
}

} // namespace
