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

} // namespace
