//===- ModelsBench.cpp - time to build, verify and reparse GPT models -----===//
//
// Run: build/bin/tessera-bench-models
// GPT-3 175B (L=96, h=12288, A=96, s=2048, V=51200) is the headline case;
// the 2-layer model shows the fixed cost.
//
//===----------------------------------------------------------------------===//

#include "tessera/InitAll.h"
#include "tessera/Models/Models.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"

#include <benchmark/benchmark.h>

using namespace mlir;

static tessera::GptConfig getConfig(int64_t layers) {
  if (layers == 96)
    return {96, 12288, 96, 2048, 51200, 1, "bf16"};
  return {layers, 64, 4, 16, 256, 2, "f32"};
}

static MLIRContext &getContext() {
  static DialectRegistry registry = [] {
    DialectRegistry r;
    tessera::registerAllDialects(r);
    return r;
  }();
  static MLIRContext context(registry);
  return context;
}

static void BM_BuildGpt(benchmark::State &state) {
  tessera::GptConfig config = getConfig(state.range(0));
  for (auto _ : state) {
    OwningOpRef<ModuleOp> module = tessera::buildGpt(&getContext(), config);
    benchmark::DoNotOptimize(module.get());
  }
}
BENCHMARK(BM_BuildGpt)->Arg(2)->Arg(96)->Unit(benchmark::kMillisecond);

static void BM_VerifyGpt(benchmark::State &state) {
  OwningOpRef<ModuleOp> module =
      tessera::buildGpt(&getContext(), getConfig(state.range(0)));
  for (auto _ : state)
    benchmark::DoNotOptimize(succeeded(verify(*module)));
}
BENCHMARK(BM_VerifyGpt)->Arg(2)->Arg(96)->Unit(benchmark::kMillisecond);

static void BM_PrintAndParseGpt(benchmark::State &state) {
  OwningOpRef<ModuleOp> module =
      tessera::buildGpt(&getContext(), getConfig(state.range(0)));
  std::string text;
  llvm::raw_string_ostream os(text);
  module->print(os);
  state.counters["bytes"] = text.size();
  for (auto _ : state) {
    OwningOpRef<ModuleOp> parsed =
        parseSourceString<ModuleOp>(text, &getContext());
    benchmark::DoNotOptimize(parsed.get());
  }
}
BENCHMARK(BM_PrintAndParseGpt)->Arg(2)->Arg(96)->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
