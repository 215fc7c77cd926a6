//===- CompileOptionsTest.cpp - The compile pipeline's options ------------===//

#include "tessera/Pipelines/Pipelines.h"

#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

using namespace tessera;

namespace {

std::string print(const CompileOptions &options) {
  std::string text;
  llvm::raw_string_ostream os(text);
  options.print(os);
  return text;
}

std::string print(ExactDouble value) {
  std::string text;
  llvm::raw_string_ostream(text) << value;
  return text;
}

TEST(CompileOptionsTest, PrintedOptionsParseBackToTheSameOptions) {
  CompileOptions options;
  options.mesh = "dp=2,tp=4";
  options.train = Optimizer::AdamW;
  options.lr = 3e-4;
  options.weightDecay = 0.1;
  options.precision = TrainPrecision::Mixed;
  options.zero = ZeroStage::Parameters;
  options.zeroAxes = llvm::SmallVector<std::string>{"node", "gpu"};
  options.reshardAfterForward = ReshardAfterForward::group(8);
  options.pipelineStages = 4;
  options.microbatches = 8;
  options.schedule = PipelineSchedule::ZeroBubbleH1;
  options.overlap = true;
  options.output = "model.plan";
  std::string printed = print(options);
  CompileOptions parsed;
  ASSERT_TRUE(succeeded(parsed.parseFromString(
      llvm::StringRef(printed).drop_front().drop_back())));
  EXPECT_EQ(print(parsed), printed);
  EXPECT_EQ(parsed.reshardAfterForward.getValue(),
            ReshardAfterForward::group(8));
  EXPECT_EQ(parsed.schedule, PipelineSchedule::ZeroBubbleH1);
  EXPECT_EQ(static_cast<double>(parsed.lr), 3e-4);
  EXPECT_NE(printed.find("zero-axes={node,gpu}"), std::string::npos);
}

TEST(CompileOptionsTest, DoublesPrintAsTheShortestExactDecimal) {
  EXPECT_EQ(print(ExactDouble(3e-4)), "0.0003");
  EXPECT_EQ(print(ExactDouble(0.1)), "0.1");
  EXPECT_EQ(print(ExactDouble(0)), "0");
  double third = 1.0 / 3;
  double back;
  ASSERT_FALSE(llvm::StringRef(print(ExactDouble(third))).getAsDouble(back));
  EXPECT_EQ(back, third);
}

TEST(CompileOptionsTest, BadValuesNameTheChoices) {
  std::string errors;
  llvm::raw_string_ostream os(errors);
  CompileOptions options;
  EXPECT_TRUE(failed(options.parseFromString("schedule=zigzag", os)));
  EXPECT_TRUE(failed(options.parseFromString("reshard-after-forward=0", os)));
  EXPECT_TRUE(
      succeeded(options.parseFromString("reshard-after-forward=false")));
  EXPECT_EQ(options.reshardAfterForward.getValue(),
            ReshardAfterForward::keep());
}

TEST(CompileOptionsTest, NonFiniteDoublesAreRefusedWhereParsed) {
  // "nan" and "inf" parse as doubles, and a number past a double's range
  // becomes an infinity: none means anything as an option's value.
  std::string errors;
  llvm::raw_string_ostream os(errors);
  CompileOptions options;
  EXPECT_TRUE(failed(options.parseFromString("initial-loss-scale=nan", os)));
  EXPECT_TRUE(failed(options.parseFromString("lr=1e400", os)));
  EXPECT_TRUE(succeeded(options.parseFromString("lr=1e30")));
  EXPECT_EQ(static_cast<double>(options.lr), 1e30);
}

TEST(CompileOptionsTest, OptionsThatNeedAnotherAreRefused) {
  CompileOptions options;
  EXPECT_EQ(checkCompileOptions(options), "");
  options.zero = ZeroStage::OptimizerState;
  EXPECT_EQ(checkCompileOptions(options),
            "--zero needs --train adamw (the optimizer state it shards)");
  options.train = Optimizer::AdamW;
  EXPECT_EQ(checkCompileOptions(options), "");
  options.train = Optimizer::None;
  options.zero = ZeroStage::None;
  options.microbatches = 2;
  EXPECT_EQ(checkCompileOptions(options),
            "--pp and --microbatches pipeline a train step: give --train");
}

TEST(CompileOptionsTest, CountsBelowOneAreRefused) {
  CompileOptions options;
  options.train = Optimizer::AdamW;
  options.microbatches = -3;
  EXPECT_EQ(checkCompileOptions(options),
            "--microbatches must be at least 1, got -3");
  options.microbatches = 1;
  options.pipelineStages = 0;
  EXPECT_EQ(checkCompileOptions(options), "--pp must be at least 1, got 0");
  options.pipelineStages = 1;
  options.virtualStages = -1;
  EXPECT_EQ(checkCompileOptions(options),
            "--virtual must be at least 1, got -1");
  options.virtualStages = 1;
  options.lossScaleWindow = 0;
  EXPECT_EQ(checkCompileOptions(options),
            "--loss-scale-window must be at least 1, got 0");
}

TEST(CompileOptionsTest, TheReplayCommandCarriesEveryOption) {
  CompileOptions options;
  options.mesh = "dp=2";
  std::string command = getReplayCommand("model.mlir", options);
  EXPECT_EQ(command.rfind("tessera-opt model.mlir "
                          "--tessera-compile-pipeline='",
                          0),
            0u);
  EXPECT_NE(command.find(" mesh=dp=2 "), std::string::npos);
  EXPECT_NE(command.find(" zero=0 "), std::string::npos);
  EXPECT_NE(command.find(" zero-units=true "), std::string::npos);
  EXPECT_NE(command.find(" zigzag=true' -o /dev/null"), std::string::npos);
}

TEST(EnumNamesTest, OneTableNamesParsesAndJoins) {
  EXPECT_EQ(getEnumName(kPipelineScheduleNames, PipelineSchedule::OneFOneB),
            "1f1b");
  EXPECT_EQ(parseEnumName(kRecomputeNames, "selective"), Recompute::Selective);
  EXPECT_EQ(parseEnumName(kRecomputeNames, "some"), std::nullopt);
  EXPECT_EQ(joinEnumNames(kTrainPrecisionNames), "model or mixed");
  EXPECT_EQ(joinEnumNames(kPipelineScheduleNames),
            "gpipe, 1f1b, interleaved, zb-h1, 2bw or pipedream");
}

} // namespace
