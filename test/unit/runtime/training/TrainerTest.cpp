//===- TrainerTest.cpp - the training runtime's pieces without a job ------===//

#include "tessera/runtime/training/Trainer.h"
#include "tessera/runtime/training/TrainingLog.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

using namespace tessera;
using namespace tessera::runtime;

namespace {

std::string getTempPath(const std::string &name) {
  return testing::TempDir() + "/trainer-" + name;
}

// Tests that the directories a run writes into are made before its first
// step, and that a file in a missing directory is refused by its flag.
TEST(TrainerTest, OutputsAreCheckedBeforeTheRun) {
  TrainerOptions options;
  options.traceDir = getTempPath("traces/nested");
  std::filesystem::remove_all(getTempPath("traces"));
  EXPECT_TRUE(checkTrainerOutputs(options).ok());
  EXPECT_TRUE(std::filesystem::is_directory(options.traceDir));

  options.dumpLosses = getTempPath("missing") + "/losses.txt";
  Status status = checkTrainerOutputs(options);
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.message(), "--dump-losses '" + options.dumpLosses +
                                  "': no directory '" +
                                  getTempPath("missing") + "'");

  options.dumpLosses = "";
  options.saveWeights = options.traceDir;
  status = checkTrainerOutputs(options);
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.message(),
            "--save-weights '" + options.traceDir + "' is a directory");
}

// Tests that the loss is the first scalar float result that updates no
// argument and is no metric.
TEST(TrainerTest, TheLossIsTheFirstPlainScalarResult) {
  plan::Program program;
  plan::Buffer *scalar = program.add_buffers();
  scalar->set_dtype(plan::F32);
  plan::Buffer *tokens = program.add_buffers();
  tokens->set_dtype(plan::I32);
  // An updated parameter, a metric, an integer scalar, then the loss.
  plan::Result *update = program.add_results();
  update->set_buffer(0);
  update->set_updates_argument(0);
  plan::Result *metric = program.add_results();
  metric->set_buffer(0);
  metric->set_metric("grad_norm");
  program.add_results()->set_buffer(1);
  program.add_results()->set_buffer(0);
  EXPECT_EQ(getLossResult(program), 3);
  program.mutable_results(3)->add_global_shape(2);
  EXPECT_EQ(getLossResult(program), -1);
}

} // namespace
