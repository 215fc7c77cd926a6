//===- Stats.cpp - tessera stats ------------------------------------------===//

#include "Commands.h"

#include "dialects/Interfaces/CostOpInterface.h"
#include "tessera/Models/Models.h"

#include "llvm/ADT/MapVector.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace tessera;
using namespace tessera::cli;
namespace cl = llvm::cl;

cl::SubCommand &cli::statsCommand() {
  static cl::SubCommand command(
      "stats", "Print the parameters, ops and FLOPs of a model file");
  return command;
}

static cl::opt<std::string> statsInput(cl::Positional, cl::Required,
                                       cl::desc("<model.mlir>"),
                                       cl::sub(statsCommand()));

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
