//===- PipelineFuzzer.cpp - libFuzzer harness of the IR parser and passes -===//
//
// Any byte string goes where `tessera compile` takes a model file: loaded
// as tessera compile loads it (loadModelFile: the nesting bound, the parser,
// the tensor-size check), then, if it parses, through the whole compile
// pipeline to an exported plan under one of a few option sets (forward
// only or a train step; ZeRO-3 with the overlap schedule; pipeline stages;
// recomputation), picked by a hash of the input so that a finding
// reproduces. Every input must compile or fail with diagnostics, never
// crash, hang or trip a sanitizer.
//
// A mutator that knows MLIR's text makes most of the inputs: besides
// libFuzzer's byte mutations it replaces an integer with one that breaks
// arithmetic (0, -1, a power of two, 2^31, 2^62, 2^63 - 1), a dimension of
// a tensor type or an axis name with another from the input, or moves a
// whole line, so that the inputs stay parseable and reach the passes.
// Build and run with scripts/fuzz-pipeline.sh.
//
//===----------------------------------------------------------------------===//

#include "tessera/InitAll.h"
#include "tessera/Pipelines/Driver.h"
#include "tessera/Pipelines/Pipelines.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/ADT/StringRef.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

using namespace tessera;

namespace {

/// FNV-1a: the same on every run, so that a finding reproduces.
uint64_t hashBytes(const uint8_t *data, size_t size) {
  uint64_t hash = 14695981039346656037ull;
  for (size_t i = 0; i < size; ++i)
    hash = (hash ^ data[i]) * 1099511628211ull;
  return hash;
}

/// The option sets, by what they exercise.
void chooseOptions(CompileOptions &options, uint64_t hash) {
  switch (hash % 6) {
  case 0: // Forward only, on the model's own mesh.
    break;
  case 1:
    options.train = Optimizer::AdamW;
    break;
  case 2:
    options.mesh = "dp=2,tp=2";
    options.train = Optimizer::AdamW;
    options.zero = ZeroStage::Parameters;
    options.overlap = true;
    break;
  case 3:
    options.mesh = "pp=2,dp=2,tp=1";
    options.pipelineStages = 2;
    options.microbatches = 2;
    options.train = Optimizer::AdamW;
    break;
  case 4:
    options.mesh = "dp=4,tp=1";
    options.train = Optimizer::Sgd;
    options.recompute = Recompute::Full;
    break;
  case 5:
    options.mesh = "dp=1,tp=4";
    options.train = Optimizer::AdamW;
    options.zero = ZeroStage::OptimizerState;
    break;
  }
}

/// Integers that break arithmetic: sizes that overflow, divide by zero or
/// do not divide.
constexpr const char *kIntegers[] = {"0",
                                     "1",
                                     "-1",
                                     "2",
                                     "3",
                                     "7",
                                     "64",
                                     "65536",
                                     "2147483647",
                                     "2147483648",
                                     "4294967296",
                                     "4611686018427387904",
                                     "9223372036854775807"};

/// The [begin, end) spans of the input's decimal integers.
std::vector<std::pair<size_t, size_t>> findIntegers(llvm::StringRef text) {
  std::vector<std::pair<size_t, size_t>> spans;
  for (size_t i = 0; i < text.size();) {
    if (!std::isdigit(static_cast<unsigned char>(text[i]))) {
      ++i;
      continue;
    }
    size_t begin = i;
    while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])))
      ++i;
    spans.emplace_back(begin, i);
  }
  return spans;
}

/// The [begin, end) spans of the input's quoted strings.
std::vector<std::pair<size_t, size_t>> findQuoted(const std::string &text) {
  std::vector<std::pair<size_t, size_t>> spans;
  for (size_t i = text.find('"'); i != std::string::npos;) {
    size_t close = text.find('"', i + 1);
    if (close == std::string::npos)
      break;
    spans.emplace_back(i, close + 1);
    i = text.find('"', close + 1);
  }
  return spans;
}

/// One MLIR-aware mutation of `text`, or false where it found nothing to
/// change.
bool mutateText(std::string &text, std::mt19937_64 &random) {
  auto pick = [&](size_t n) { return static_cast<size_t>(random() % n); };
  // One of `spans` becomes the text of another.
  auto copyAnother = [&](const std::vector<std::pair<size_t, size_t>> &spans) {
    if (spans.size() < 2)
      return false;
    auto [begin, end] = spans[pick(spans.size())];
    auto [fromBegin, fromEnd] = spans[pick(spans.size())];
    text.replace(begin, end - begin,
                 text.substr(fromBegin, fromEnd - fromBegin));
    return true;
  };
  switch (pick(4)) {
  case 0: { // An integer becomes one that breaks arithmetic.
    auto spans = findIntegers(text);
    if (spans.empty())
      return false;
    auto [begin, end] = spans[pick(spans.size())];
    text.replace(begin, end - begin, kIntegers[pick(std::size(kIntegers))]);
    return true;
  }
  case 1: // An integer becomes another of the input's.
    return copyAnother(findIntegers(text));
  case 2: // A quoted name (an axis, a parameter) becomes another.
    return copyAnother(findQuoted(text));
  default: { // A line moves, is copied or goes.
    std::vector<size_t> starts = {0};
    for (size_t i = 0; i < text.size(); ++i)
      if (text[i] == '\n' && i + 1 < text.size())
        starts.push_back(i + 1);
    size_t line = starts[pick(starts.size())];
    size_t lineEnd = text.find('\n', line);
    lineEnd = lineEnd == std::string::npos ? text.size() : lineEnd + 1;
    std::string moved = text.substr(line, lineEnd - line);
    size_t action = pick(3);
    if (action != 1)
      text.erase(line, lineEnd - line);
    if (action != 2) {
      size_t to = starts[pick(starts.size())];
      text.insert(std::min(to, text.size()), moved);
    }
    return true;
  }
  }
}

} // namespace

extern "C" size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t maxSize);

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size,
                                          size_t maxSize, unsigned seed) {
  std::mt19937_64 random(seed);
  // A quarter of the mutations are libFuzzer's own, on bytes.
  if (random() % 4 == 0)
    return LLVMFuzzerMutate(data, size, maxSize);
  std::string text(reinterpret_cast<const char *>(data), size);
  if (!mutateText(text, random) || text.size() > maxSize)
    return LLVMFuzzerMutate(data, size, maxSize);
  std::memcpy(data, text.data(), text.size());
  return text.size();
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static mlir::MLIRContext *context = [] {
    mlir::DialectRegistry registry;
    registerAllDialects(registry);
    auto *made = new mlir::MLIRContext(registry);
    made->loadAllAvailableDialects();
    made->printOpOnDiagnostic(false);
    // The pipelines run in the fuzzer's own thread, one input at a time.
    made->disableMultithreading();
    return made;
  }();
  static const std::string directory = [] {
    std::string made = "/tmp/tessera-pipeline-fuzz-" + std::to_string(getpid());
    mkdir(made.c_str(), 0700);
    return made;
  }();
  std::string model = directory + "/model.mlir";
  {
    std::ofstream file(model, std::ios::binary | std::ios::trunc);
    file.write(reinterpret_cast<const char *>(data), size);
  }
  llvm::Expected<std::unique_ptr<ModelFile>> loaded =
      loadModelFile(*context, model);
  if (!loaded) {
    llvm::consumeError(loaded.takeError());
    return 0;
  }
  CompileOptions options;
  chooseOptions(options, hashBytes(data, size));
  options.output = directory + "/model.plan";
  if (!checkCompileOptions(options).empty())
    return 0;
  if (llvm::Error error =
          runPipeline((*loaded)->module.get(), [&](mlir::OpPassManager &pm) {
            buildCompilePipeline(pm, options);
          }))
    llvm::consumeError(std::move(error));
  return 0;
}
