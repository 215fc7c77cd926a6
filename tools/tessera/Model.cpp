//===- Model.cpp - tessera model ------------------------------------------===//

#include "Commands.h"

#include "tessera/Models/Models.h"

#include "mlir/IR/Verifier.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/ToolOutputFile.h"

using namespace mlir;
using namespace tessera;
using namespace tessera::cli;
namespace cl = llvm::cl;

cl::SubCommand &cli::modelCommand() {
  static cl::SubCommand command("model",
                                "Emit a model in nn IR (gpt, llama, mlp or "
                                "ctr)");
  return command;
}

static cl::opt<std::string> modelKind(cl::Positional, cl::Required,
                                      cl::desc("<gpt|llama|mlp|ctr>"),
                                      cl::sub(modelCommand()));
static cl::opt<std::string> outputFile("o", cl::desc("Output file"),
                                       cl::value_desc("file"), cl::init("-"),
                                       cl::sub(modelCommand()));
static cl::opt<int64_t> layers("layers",
                               cl::desc("Layers (blocks for gpt and llama)"),
                               cl::sub(modelCommand()));
static cl::opt<int64_t> hidden("hidden", cl::desc("Hidden size"),
                               cl::sub(modelCommand()));
static cl::opt<int64_t> heads("heads", cl::desc("Attention heads (gpt, llama)"),
                              cl::sub(modelCommand()));
static cl::opt<int64_t> seq("seq", cl::desc("Sequence length (gpt, llama)"),
                            cl::sub(modelCommand()));
static cl::opt<int64_t> vocab("vocab", cl::desc("Vocabulary size (gpt, llama)"),
                              cl::sub(modelCommand()));
static cl::opt<int64_t>
    kvHeads("kv-heads",
            cl::desc("Key/value heads, dividing --heads (llama; grouped-query "
                     "attention when fewer)"),
            cl::sub(modelCommand()));
static cl::opt<int64_t>
    ffnHidden("ffn-hidden",
              cl::desc("SwiGLU width (llama; default 2/3 of 4 x hidden, "
                       "rounded up to a multiple of 256)"),
              cl::sub(modelCommand()));
static FiniteDoubleOption
    ropeTheta("rope-theta", cl::desc("Rotary base (llama, default 10000)"),
              cl::sub(modelCommand()));
static FiniteDoubleOption
    normEps("norm-eps", cl::desc("RMSNorm epsilon (llama, default 1e-5)"),
            cl::sub(modelCommand()));
static cl::opt<int64_t> input("input", cl::desc("Input width (mlp)"),
                              cl::sub(modelCommand()));
static cl::opt<int64_t> output("output", cl::desc("Output width (mlp)"),
                               cl::sub(modelCommand()));
static cl::opt<int64_t> batch("batch", cl::desc("Batch size"),
                              cl::sub(modelCommand()));
static cl::opt<int64_t>
    features("features",
             cl::desc("Hashed features per example (ctr; default 8)"),
             cl::sub(modelCommand()));
static cl::opt<int64_t>
    buckets("buckets",
            cl::desc("Hash buckets: rows of the embedding table (ctr; "
                     "default 4096; --hidden is a row's width, default 4)"),
            cl::sub(modelCommand()));
static cl::opt<std::string>
    sharding("sharding",
             cl::desc("Annotations: none, megatron (batch over \"dp\", "
                      "Megatron-LM tensor parallelism over \"tp\", on a "
                      "1x1 mesh that --mesh resizes) or megatron-sp (and "
                      "sequence parallelism, gpt)"),
             cl::sub(modelCommand()));
static cl::opt<std::string>
    attention("attention",
              cl::desc("Attention (gpt, llama): fused (one nn.attention, "
                       "memory linear in the sequence) or unfused"),
              cl::sub(modelCommand()));
static FiniteDoubleOption
    dropout("dropout",
            cl::desc("Dropout rate (gpt, llama): after the embeddings, of "
                     "the attention probabilities, and of each block's "
                     "attention and MLP outputs; 0 for none"),
            cl::sub(modelCommand()));
static cl::opt<bool> vocabParallel(
    "vocab-parallel",
    cl::desc("With --sharding megatron(-sp) (gpt, llama): the token "
             "embedding, and a tied LM head, split on the vocabulary over "
             "\"tp\" (Megatron-LM's vocab-parallel embedding and "
             "cross-entropy; the default, =false keeps them whole)"),
    cl::sub(modelCommand()));
static cl::opt<std::string> contextParallel(
    "context-parallel",
    cl::desc("With --sharding megatron(-sp) (gpt, llama): none, or the "
             "sequence split over a \"cp\" axis, the fused attention's "
             "keys and values passed around it (ring), its heads exchanged "
             "for it by all-to-all (ulysses, as DeepSpeed-Ulysses) or its "
             "keys and values gathered (all-gather, as Llama 3)"),
    cl::sub(modelCommand()));
static cl::opt<int64_t> experts(
    "experts",
    cl::desc("Mixture-of-experts layers with this many experts in place of "
             "the MLP (gpt, llama; 0 for the dense MLP); with --sharding "
             "megatron the experts split over an \"ep\" axis"),
    cl::sub(modelCommand()));
static cl::opt<int64_t>
    topK("top-k", cl::desc("Experts each token is routed to (default 2)"),
         cl::sub(modelCommand()));
static FiniteDoubleOption capacityFactor(
    "capacity-factor",
    cl::desc("Expert slots per routed token of a sequence (default 1.25): "
             "each expert takes ceil(factor x top-k x seq / experts) tokens "
             "of a sequence, the rest skip it"),
    cl::sub(modelCommand()));
static FiniteDoubleOption auxLossCoef(
    "aux-loss-coef",
    cl::desc("Weight of each MoE layer's load-balancing loss (default 0.01)"),
    cl::sub(modelCommand()));
static cl::opt<int64_t> moeGroupSize(
    "moe-group-size",
    cl::desc("Tokens of a sequence routed together (GShard's groups), "
             "dividing --seq; 0 (the default) for the whole sequence. A "
             "group's dispatch mask holds group x experts x capacity "
             "elements"),
    cl::sub(modelCommand()));
static cl::opt<std::string> dtype("dtype",
                                  cl::desc("Element type: f32, bf16, f16, f64"),
                                  cl::sub(modelCommand()));

/// Copies a set option into a config field (whatever parser read it).
template <typename T, typename Parser>
static void setIfGiven(const cl::opt<T, false, Parser> &option, T &field) {
  if (option.getNumOccurrences())
    field = option;
}

static void setMoeOptions(tessera::MoeConfig &config) {
  setIfGiven(experts, config.experts);
  setIfGiven(topK, config.topK);
  setIfGiven(capacityFactor, config.capacityFactor);
  setIfGiven(auxLossCoef, config.auxLossCoef);
  setIfGiven(moeGroupSize, config.groupSize);
}

int cli::runModel(MLIRContext &context) {
  // Megatron-LM's layout splits the vocabulary by default; asking for it
  // without that layout would ask for nothing.
  if (vocabParallel.getNumOccurrences() && vocabParallel &&
      !StringRef(sharding).starts_with("megatron"))
    return reportError(llvm::createStringError(
        "--vocab-parallel splits the embedding of a megatron sharding: give "
        "--sharding megatron or megatron-sp"));
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
    setIfGiven(vocabParallel, config.vocabParallel);
    setIfGiven(contextParallel, config.contextParallel);
    setIfGiven(attention, config.attention);
    setIfGiven(dropout, config.dropout);
    setMoeOptions(config.moe);
    if (llvm::Error error = tessera::validate(config))
      return reportError(std::move(error));
    module = tessera::buildGpt(&context, config);
    expectedParams = tessera::getParameterCount(config);
    formula = config.moe.experts
                  ? "L·(4·h² + 8·h + E·(8·h² + 5·h) + h·E) + (V+s)·h + 2·h"
                  : "12·L·h² + 13·L·h + (V+s)·h + 2·h (final layer norm)";
  } else if (modelKind == "llama") {
    tessera::LlamaConfig config;
    setIfGiven(layers, config.layers);
    setIfGiven(hidden, config.hidden);
    setIfGiven(heads, config.heads);
    setIfGiven(kvHeads, config.kvHeads);
    setIfGiven(ffnHidden, config.ffnHidden);
    setIfGiven(seq, config.seq);
    setIfGiven(vocab, config.vocab);
    setIfGiven(batch, config.batch);
    setIfGiven(ropeTheta, config.ropeTheta);
    setIfGiven(normEps, config.normEps);
    setIfGiven(dtype, config.dtype);
    setIfGiven(sharding, config.sharding);
    setIfGiven(vocabParallel, config.vocabParallel);
    setIfGiven(contextParallel, config.contextParallel);
    setIfGiven(attention, config.attention);
    setIfGiven(dropout, config.dropout);
    setMoeOptions(config.moe);
    if (llvm::Error error = tessera::validate(config))
      return reportError(std::move(error));
    module = tessera::buildLlama(&context, config);
    expectedParams = tessera::getParameterCount(config);
    formula =
        config.moe.experts
            ? "L·(2·h + 2·h² + 2·h·kv·d + E·3·h·f + h·E) + 2·V·h + h"
            : "L·(2·h + 2·h² + 2·h·kv·d + 3·h·f) + 2·V·h + h (final norm)";
  } else if (modelKind == "ctr") {
    tessera::CtrConfig config;
    setIfGiven(features, config.features);
    setIfGiven(buckets, config.buckets);
    setIfGiven(hidden, config.hidden);
    setIfGiven(batch, config.batch);
    if (llvm::Error error = tessera::validate(config))
      return reportError(std::move(error));
    module = tessera::buildCtr(&context, config);
    expectedParams = tessera::getParameterCount(config);
    formula = "buckets·h + h + 1";
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
    return reportError(llvm::createStringError(
        "unknown model '" + modelKind + "', expected gpt, llama, mlp or ctr"));
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
