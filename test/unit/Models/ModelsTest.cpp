//===- ModelsTest.cpp - parameter counts of the model generators ----------===//

#include "tessera/Models/Models.h"

#include "dialects/NN/IR/NNOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace tessera;

namespace {

TEST(ModelsTest, Gpt3ParameterCountMatchesThePaper) {
  GptConfig gpt3{/*layers=*/96, /*hidden=*/12288, /*heads=*/96,
                 /*seq=*/2048,  /*vocab=*/51200,  /*batch=*/1};
  int64_t l = 96, h = 12288;
  int64_t blocksAndEmbeddings =
      12 * l * h * h + 13 * l * h + (51200 + 2048) * h;
  EXPECT_EQ(blocksAndEmbeddings, 174615822336);
  // Plus the final layer norm's gamma and beta.
  EXPECT_EQ(getParameterCount(gpt3), blocksAndEmbeddings + 2 * h);
}

TEST(ModelsTest, GeneratedGptHasTheClosedFormParameterCount) {
  MLIRContext context;
  for (GptConfig config : {GptConfig{}, GptConfig{3, 48, 6, 8, 100, 1, "bf16"},
                           GptConfig{1, 32, 1, 4, 7, 3, "f16"}}) {
    ASSERT_FALSE(validate(config));
    OwningOpRef<ModuleOp> module = buildGpt(&context, config);
    ASSERT_TRUE(succeeded(verify(*module)));
    EXPECT_EQ(countParameters(*module), getParameterCount(config));
  }
}

TEST(ModelsTest, GeneratedMlpHasTheClosedFormParameterCount) {
  MLIRContext context;
  MlpConfig config{/*layers=*/3, /*input=*/10, /*hidden=*/20, /*output=*/5,
                   /*batch=*/4};
  OwningOpRef<ModuleOp> module = buildMlp(&context, config);
  ASSERT_TRUE(succeeded(verify(*module)));
  EXPECT_EQ(getParameterCount(config), 11 * 20 + 21 * 20 + 21 * 5);
  EXPECT_EQ(countParameters(*module), getParameterCount(config));
}

/// A Llama shape: layers, hidden, heads, kv heads, SwiGLU width, vocab.
static LlamaConfig llama(int64_t layers, int64_t hidden, int64_t heads,
                         int64_t kvHeads, int64_t ffnHidden, int64_t vocab) {
  LlamaConfig config;
  config.layers = layers;
  config.hidden = hidden;
  config.heads = heads;
  config.kvHeads = kvHeads;
  config.ffnHidden = ffnHidden;
  config.vocab = vocab;
  return config;
}

TEST(ModelsTest, LlamaParameterCountsMatchThePublishedModels) {
  // Llama-2 7B (Touvron et al. 2023, "6.7B"; 6,738,415,616 in Hugging
  // Face's checkpoint); its SwiGLU width is Llama's rule for hidden 4096.
  EXPECT_EQ(getLlamaFfnHidden(4096), 11008);
  EXPECT_EQ(getParameterCount(llama(32, 4096, 32, 32, 0, 32000)), 6738415616);
  // Llama-3 8B: 8 kv heads, width 14336, vocab 128256 (8,030,261,248).
  EXPECT_EQ(getParameterCount(llama(32, 4096, 32, 8, 14336, 128256)),
            8030261248);
}

TEST(ModelsTest, GeneratedLlamaHasTheClosedFormParameterCount) {
  MLIRContext context;
  LlamaConfig bf16 = llama(3, 48, 6, 2, 40, 100);
  bf16.dtype = "bf16";
  for (const LlamaConfig &config :
       {LlamaConfig{}, bf16, llama(1, 32, 4, 4, 0, 7)}) {
    ASSERT_FALSE(validate(config));
    OwningOpRef<ModuleOp> module = buildLlama(&context, config);
    ASSERT_TRUE(succeeded(verify(*module)));
    EXPECT_EQ(countParameters(*module), getParameterCount(config));
  }
}

TEST(ModelsTest, MixtureOfExpertsCountsAndCapacity) {
  // Mixtral 8x7B (Jiang et al. 2024, "46.7B"): Mistral 7B's shape with 8
  // SwiGLU experts and a router per layer.
  LlamaConfig mixtral = llama(32, 4096, 32, 8, 14336, 32000);
  mixtral.moe.experts = 8;
  EXPECT_EQ(getParameterCount(mixtral), 46702792704);
  // The generated MoE models have their closed forms.
  MLIRContext context;
  LlamaConfig small = llama(2, 32, 4, 2, 48, 20);
  small.moe.experts = 4;
  ASSERT_FALSE(validate(small));
  OwningOpRef<ModuleOp> module = buildLlama(&context, small);
  ASSERT_TRUE(succeeded(verify(*module)));
  EXPECT_EQ(countParameters(*module), getParameterCount(small));
  GptConfig gpt;
  gpt.moe.experts = 3;
  gpt.moe.topK = 1;
  ASSERT_FALSE(validate(gpt));
  module = buildGpt(&context, gpt);
  ASSERT_TRUE(succeeded(verify(*module)));
  EXPECT_EQ(countParameters(*module), getParameterCount(gpt));
  // GShard's capacity: ceil(factor x k x tokens / experts), at most the
  // tokens, at least one slot.
  MoeConfig moe{/*experts=*/8, /*topK=*/2, /*capacityFactor=*/1.25};
  EXPECT_EQ(getExpertCapacity(moe, 4096), 1280);
  EXPECT_EQ(getExpertCapacity(moe, 3), 1);
  moe.capacityFactor = 100;
  EXPECT_EQ(getExpertCapacity(moe, 16), 16);
}

TEST(ModelsTest, ValidationNamesTheOffendingOption) {
  GptConfig config;
  config.heads = 5;
  llvm::Error error = validate(config);
  ASSERT_TRUE(bool(error));
  EXPECT_EQ(llvm::toString(std::move(error)),
            "--heads (5) must divide --hidden (64)");

  MlpConfig mlp;
  mlp.dtype = "f8";
  error = validate(mlp);
  ASSERT_TRUE(bool(error));
  EXPECT_EQ(llvm::toString(std::move(error)),
            "--dtype must be f32, bf16, f16 or f64, got 'f8'");
}

TEST(ModelsTest, LlamaValidationNamesTheOffendingOption) {
  auto message = [](const LlamaConfig &config) {
    return llvm::toString(validate(config));
  };
  EXPECT_EQ(message(llama(2, 64, 4, 3, 0, 256)),
            "--kv-heads (3) must divide --heads (4)");
  EXPECT_EQ(message(llama(2, 12, 4, 2, 0, 256)),
            "--heads must leave an even head dim for the rotary halves, got 3");
  LlamaConfig theta;
  theta.ropeTheta = 0;
  EXPECT_EQ(message(theta), "--rope-theta must be greater than 1, got 0");
  EXPECT_EQ(message(llama(2, 64, 4, 2, -1, 256)),
            "--ffn-hidden must be at least 1 (or 0 for Llama's rule), got -1");
}

} // namespace
