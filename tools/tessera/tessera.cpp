//===- tessera.cpp - The Tessera command-line interface -------------------===//
//
// tessera model gpt|mlp ...   emit a model in nn IR
// tessera stats FILE          parameters, ops and FLOPs of a model
// tessera compile|verify|plan|run|calibrate
//                             later stages; each says which issue builds it
//
//===----------------------------------------------------------------------===//

#include "dialects/Interfaces/CostOpInterface.h"
#include "dialects/NN/IR/NNOps.h"
#include "tessera/InitAll.h"
#include "tessera/Models/Models.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"

using namespace mlir;
namespace cl = llvm::cl;

//===----------------------------------------------------------------------===//
// Subcommands and their options
//===----------------------------------------------------------------------===//

static cl::SubCommand modelCmd("model", "Emit a model in nn IR (gpt or mlp)");
static cl::SubCommand statsCmd(
    "stats", "Print the parameters, ops and FLOPs of a model file");

static cl::opt<std::string> modelKind(cl::Positional, cl::Required,
                                      cl::desc("<gpt|mlp>"),
                                      cl::sub(modelCmd));
static cl::opt<std::string> outputFile("o", cl::desc("Output file"),
                                       cl::value_desc("file"), cl::init("-"),
                                       cl::sub(modelCmd));
static cl::opt<int64_t> layers("layers", cl::desc("Layers (blocks for gpt)"),
                               cl::sub(modelCmd));
static cl::opt<int64_t> hidden("hidden", cl::desc("Hidden size"),
                               cl::sub(modelCmd));
static cl::opt<int64_t> heads("heads", cl::desc("Attention heads (gpt)"),
                              cl::sub(modelCmd));
static cl::opt<int64_t> seq("seq", cl::desc("Sequence length (gpt)"),
                            cl::sub(modelCmd));
static cl::opt<int64_t> vocab("vocab", cl::desc("Vocabulary size (gpt)"),
                              cl::sub(modelCmd));
static cl::opt<int64_t> input("input", cl::desc("Input width (mlp)"),
                              cl::sub(modelCmd));
static cl::opt<int64_t> output("output", cl::desc("Output width (mlp)"),
                               cl::sub(modelCmd));
static cl::opt<int64_t> batch("batch", cl::desc("Batch size"),
                              cl::sub(modelCmd));
static cl::opt<std::string> dtype("dtype",
                                  cl::desc("Element type: f32, bf16, f16, f64"),
                                  cl::sub(modelCmd));

static cl::opt<std::string> statsInput(cl::Positional, cl::Required,
                                       cl::desc("<model.mlir>"),
                                       cl::sub(statsCmd));

/// Stages that later issues build: each fails with a clear message.
struct PendingStage {
  const char *name;
  const char *description;
  const char *issue;
};
static const PendingStage kPendingStages[] = {
    {"compile", "Shard, partition and export a model to a plan",
     "#4 (plan export; propagation and partition run in tessera-opt "
     "--tessera-propagate --tessera-partition)"},
    {"verify", "Check a sharded plan against the single-device program",
     "#4 (runtime)"},
    {"plan", "Search the DP/TP/PP plan against a machine model",
     "#7 (plan search)"},
    {"run", "Run a plan on N local ranks", "#4 (runtime)"},
    {"calibrate", "Fit a machine model from runtime microbenchmarks",
     "#7 (plan search)"},
};

//===----------------------------------------------------------------------===//
// tessera model
//===----------------------------------------------------------------------===//

/// Copies a set option into a config field.
template <typename T>
static void setIfGiven(const cl::opt<T> &option, T &field) {
  if (option.getNumOccurrences())
    field = option;
}

static int reportError(llvm::Error error) {
  llvm::errs() << "tessera: error: " << llvm::toString(std::move(error))
               << "\n";
  return 1;
}

/// 174615846912 -> "174.6B".
static std::string formatCount(int64_t count) {
  if (count >= 1000000000)
    return llvm::formatv("{0:f1}B", count / 1e9).str();
  if (count >= 1000000)
    return llvm::formatv("{0:f1}M", count / 1e6).str();
  if (count >= 1000)
    return llvm::formatv("{0:f1}K", count / 1e3).str();
  return std::to_string(count);
}

static int runModel(MLIRContext &context) {
  OwningOpRef<ModuleOp> module;
  int64_t expectedParams;
  std::string formula;
  if (modelKind == "gpt") {
    tessera::GptConfig config;
    setIfGiven(layers, config.layers);
    setIfGiven(hidden, config.hidden);
    setIfGiven(heads, config.heads);
    setIfGiven(seq, config.seq);
    setIfGiven(vocab, config.vocab);
    setIfGiven(batch, config.batch);
    setIfGiven(dtype, config.dtype);
    if (llvm::Error error = tessera::validate(config))
      return reportError(std::move(error));
    module = tessera::buildGpt(&context, config);
    expectedParams = tessera::getParameterCount(config);
    formula = "12·L·h² + 13·L·h + (V+s)·h + 2·h (final layer norm)";
  } else if (modelKind == "mlp") {
    tessera::MlpConfig config;
    setIfGiven(layers, config.layers);
    setIfGiven(hidden, config.hidden);
    setIfGiven(input, config.input);
    setIfGiven(output, config.output);
    setIfGiven(batch, config.batch);
    setIfGiven(dtype, config.dtype);
    if (llvm::Error error = tessera::validate(config))
      return reportError(std::move(error));
    module = tessera::buildMlp(&context, config);
    expectedParams = tessera::getParameterCount(config);
    formula = "Σ (in+1)·out over the layers";
  } else {
    return reportError(llvm::createStringError(
        "unknown model '" + modelKind + "', expected gpt or mlp"));
  }
  if (failed(verify(*module)))
    return reportError(
        llvm::createStringError("the generated model does not verify"));
  int64_t params = tessera::countParameters(*module);
  if (params != expectedParams)
    return reportError(llvm::createStringError(
        llvm::formatv("generated {0} parameters, the closed form gives {1}",
                      params, expectedParams)
            .str()));

  std::string errorMessage;
  std::unique_ptr<llvm::ToolOutputFile> file =
      openOutputFile(outputFile, &errorMessage);
  if (!file)
    return reportError(llvm::createStringError(errorMessage));
  module->print(file->os());
  file->os() << "\n";
  file->keep();
  llvm::errs() << llvm::formatv("{0}: {1} parameters ({2}) = {3}\n",
                                modelKind, params, formatCount(params),
                                formula);
  return 0;
}

//===----------------------------------------------------------------------===//
// tessera stats
//===----------------------------------------------------------------------===//

static int runStats(MLIRContext &context) {
  std::string errorMessage;
  std::unique_ptr<llvm::MemoryBuffer> file =
      openInputFile(statsInput, &errorMessage);
  if (!file)
    return reportError(llvm::createStringError(errorMessage));
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(std::move(file), llvm::SMLoc());
  SourceMgrDiagnosticHandler handler(sourceMgr, &context);
  OwningOpRef<ModuleOp> module =
      parseSourceFile<ModuleOp>(sourceMgr, &context);
  if (!module)
    return 1;
  struct OpStats {
    int64_t count = 0, flops = 0, bytes = 0;
  };
  llvm::MapVector<StringRef, OpStats> perOp;
  OpStats total;
  module->walk([&](tessera::CostOpInterface op) {
    OpStats &stats = perOp[op->getName().getStringRef()];
    int64_t flops = op.getFlops(), bytes = op.getBytesAccessed();
    stats.count += 1;
    stats.flops += flops;
    stats.bytes += bytes;
    total.count += 1;
    total.flops += flops;
    total.bytes += bytes;
  });
  llvm::outs() << llvm::formatv("parameters: {0}\n",
                                tessera::countParameters(*module));
  llvm::outs() << llvm::formatv("{0,-20} {1,8} {2,16} {3,16}\n", "op", "count",
                                "flops", "bytes");
  for (auto &[name, stats] : perOp)
    llvm::outs() << llvm::formatv("{0,-20} {1,8} {2,16} {3,16}\n", name,
                                  stats.count, stats.flops, stats.bytes);
  llvm::outs() << llvm::formatv("{0,-20} {1,8} {2,16} {3,16}\n", "total",
                                total.count, total.flops, total.bytes);
  return 0;
}

int main(int argc, char **argv) {
  llvm::InitLLVM initLLVM(argc, argv);
  // Later stages parse nothing yet: catch their names before cl does, so
  // that any options they are given do not hide the message.
  if (argc > 1) {
    for (const PendingStage &stage : kPendingStages) {
      if (StringRef(argv[1]) != stage.name)
        continue;
      llvm::errs() << "tessera: error: '" << stage.name << "' ("
                   << stage.description
                   << ") is not available: its stages are not built yet; "
                      "they arrive with issue "
                   << stage.issue << "\n";
      return 2;
    }
  }
  cl::ParseCommandLineOptions(
      argc, argv,
      "Tessera: a declarative auto-sharding compiler for neural-network "
      "training\n");

  DialectRegistry registry;
  tessera::registerAllDialects(registry);
  MLIRContext context(registry);
  if (modelCmd)
    return runModel(context);
  if (statsCmd)
    return runStats(context);
  llvm::errs() << "tessera: error: expected a subcommand: model, stats, "
                  "compile, verify, plan, run or calibrate (see --help)\n";
  return 1;
}
