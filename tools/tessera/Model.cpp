//===- Model.cpp - tessera model and tessera stats ------------------------===//

#include "Commands.h"

#include "dialects/Interfaces/CostOpInterface.h"
#include "tessera/Models/Models.h"

#include "mlir/IR/Verifier.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/ToolOutputFile.h"

using namespace mlir;
using namespace tessera;
using namespace tessera::cli;
namespace cl = llvm::cl;

cl::SubCommand &cli::modelCommand() {
  static cl::SubCommand command("model", "Emit a model in nn IR (gpt or mlp)");
  return command;
}

cl::SubCommand &cli::statsCommand() {
  static cl::SubCommand command(
      "stats", "Print the parameters, ops and FLOPs of a model file");
  return command;
}

static cl::opt<std::string> modelKind(cl::Positional, cl::Required,
                                      cl::desc("<gpt|mlp>"), cl::sub(modelCommand()));
static cl::opt<std::string> outputFile("o", cl::desc("Output file"),
                                       cl::value_desc("file"), cl::init("-"),
                                       cl::sub(modelCommand()));
static cl::opt<int64_t> layers("layers", cl::desc("Layers (blocks for gpt)"),
                               cl::sub(modelCommand()));
static cl::opt<int64_t> hidden("hidden", cl::desc("Hidden size"),
                               cl::sub(modelCommand()));
static cl::opt<int64_t> heads("heads", cl::desc("Attention heads (gpt)"),
                              cl::sub(modelCommand()));
static cl::opt<int64_t> seq("seq", cl::desc("Sequence length (gpt)"),
                            cl::sub(modelCommand()));
static cl::opt<int64_t> vocab("vocab", cl::desc("Vocabulary size (gpt)"),
                              cl::sub(modelCommand()));
static cl::opt<int64_t> input("input", cl::desc("Input width (mlp)"),
                              cl::sub(modelCommand()));
static cl::opt<int64_t> output("output", cl::desc("Output width (mlp)"),
                               cl::sub(modelCommand()));
static cl::opt<int64_t> batch("batch", cl::desc("Batch size"),
                              cl::sub(modelCommand()));
static cl::opt<std::string>
    sharding("sharding",
             cl::desc("Annotations: none, or megatron (batch over \"dp\", "
                      "Megatron-LM tensor parallelism over \"tp\", on a "
                      "1x1 mesh that --mesh resizes)"),
             cl::sub(modelCommand()));
static cl::opt<std::string> dtype("dtype",
                                  cl::desc("Element type: f32, bf16, f16, f64"),
                                  cl::sub(modelCommand()));

static cl::opt<std::string> statsInput(cl::Positional, cl::Required,
                                       cl::desc("<model.mlir>"),
                                       cl::sub(statsCommand()));

/// Copies a set option into a config field.
template <typename T>
static void setIfGiven(const cl::opt<T> &option, T &field) {
  if (option.getNumOccurrences())
    field = option;
}

int cli::runModel(MLIRContext &context) {
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
    setIfGiven(sharding, config.sharding);
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
    setIfGiven(sharding, config.sharding);
    if (llvm::Error error = tessera::validate(config))
      return reportError(std::move(error));
    module = tessera::buildMlp(&context, config);
    expectedParams = tessera::getParameterCount(config);
    formula = "Σ (in+1)·out over the layers";
  } else {
    return reportError(llvm::createStringError("unknown model '" + modelKind +
                                               "', expected gpt or mlp"));
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
  llvm::errs() << llvm::formatv("{0}: {1} parameters ({2}) = {3}\n", modelKind,
                                params, formatCount(params), formula);
  return 0;
}

int cli::runStats(MLIRContext &context) {
  llvm::Expected<std::unique_ptr<ModelFile>> file =
      loadModelFile(context, statsInput);
  if (!file)
    return reportError(file.takeError());
  ModuleOp module = *(*file)->module;
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
                                tessera::countParameters(module));
  llvm::outs() << llvm::formatv("{0,-20} {1,8} {2,16} {3,16}\n", "op", "count",
                                "flops", "bytes");
  for (auto &[name, stats] : perOp)
    llvm::outs() << llvm::formatv("{0,-20} {1,8} {2,16} {3,16}\n", name,
                                  stats.count, stats.flops, stats.bytes);
  llvm::outs() << llvm::formatv("{0,-20} {1,8} {2,16} {3,16}\n", "total",
                                total.count, total.flops, total.bytes);
  return 0;
}

