//===- CheckpointTest.cpp - saving, loading and resharding checkpoints ----===//

#include "tessera/runtime/training/Checkpoint.h"

#include "tessera/runtime/Plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

using namespace tessera;
using namespace tessera::runtime;

namespace {

/// The step the tests' checkpoints are saved at.
constexpr int64_t kSavedStep = 3;

/// What is saved: the parameter "fc.weight" [4, 2], whose row r holds
/// 2r + 1 and 2r + 2, and its AdamW moment, ten times that.
const std::vector<float> kWeight = {1, 2, 3, 4, 5, 6, 7, 8};
const std::vector<float> kMoment = {10, 20, 30, 40, 50, 60, 70, 80};

std::string getTempPath(const std::string &name) {
  return testing::TempDir() + "/checkpoint-" + name;
}

/// A checkpointed f32 argument of a hand-built plan: the mesh axes that
/// split each dim of its global tensor (none: whole), and the piece of it
/// that each rank's buffer holds.
struct ArgumentSpec {
  std::string name;
  plan::ArgumentRole role;
  std::vector<int64_t> globalShape;
  std::vector<std::vector<std::string>> dimAxes;
  std::vector<int64_t> localShape;
};

/// A plan on a mesh of `axes` (none: one device) whose one program, run by
/// every rank, takes `arguments`, each in its own bytes of the arena.
plan::Plan makePlan(const std::vector<std::pair<std::string, int64_t>> &axes,
                    const std::vector<ArgumentSpec> &arguments) {
  plan::Plan plan;
  plan.set_format_version(plan::PLAN_FORMAT_VERSION);
  int64_t devices = 1;
  for (const auto &[name, size] : axes) {
    plan::Mesh::Axis *axis = plan.mutable_mesh()->add_axes();
    axis->set_name(name);
    axis->set_size(size);
    devices *= size;
  }
  plan::Program *program = plan.add_programs();
  for (int64_t rank = 0; rank < devices; ++rank)
    program->add_ranks(rank);
  for (const ArgumentSpec &spec : arguments) {
    plan::Buffer *buffer = program->add_buffers();
    buffer->set_id(program->buffers_size() - 1);
    buffer->set_dtype(plan::F32);
    for (int64_t size : spec.localShape)
      buffer->add_shape(size);
    buffer->set_arena_offset_bytes(program->arena_bytes());
    program->set_arena_bytes(program->arena_bytes() +
                             getNumElements(spec.localShape) * sizeof(float));
    plan::Argument *argument = program->add_arguments();
    argument->set_name(spec.name);
    argument->set_is_param(spec.role == plan::PARAM);
    argument->set_role(spec.role);
    argument->set_buffer(buffer->id());
    argument->set_dtype(plan::F32);
    for (int64_t size : spec.globalShape)
      argument->add_global_shape(size);
    for (const std::vector<std::string> &dim : spec.dimAxes) {
      plan::DimAxes *split = argument->add_dim_axes();
      for (const std::string &axis : dim)
        split->add_axes(axis);
    }
  }
  return plan;
}

/// The one-device plan the checkpoints are saved from: "fc.weight" and its
/// moment, both whole.
plan::Plan makeOneDevicePlan() {
  return makePlan(
      {},
      {{"fc.weight", plan::PARAM, {4, 2}, {{}, {}}, {4, 2}},
       {"fc.weight.adam_m", plan::OPTIMIZER_STATE, {4, 2}, {{}, {}}, {4, 2}}});
}

/// A plan on a ["tp"=2] mesh whose weight is split by rows over "tp" (a
/// [2, 2] piece per rank) and whose moment is replicated.
plan::Plan makeRowSplitPlan() {
  return makePlan(
      {{"tp", 2}},
      {{"fc.weight", plan::PARAM, {4, 2}, {{"tp"}, {}}, {2, 2}},
       {"fc.weight.adam_m", plan::OPTIMIZER_STATE, {4, 2}, {{}, {}}, {4, 2}}});
}

/// Whether the runtime runs `plan`: tessera-run validates a plan before it
/// loads a checkpoint into it, so a hand-built plan must pass too.
testing::AssertionResult isValid(const plan::Plan &plan) {
  Status status = validatePlan(plan);
  if (status.ok())
    return testing::AssertionSuccess();
  return testing::AssertionFailure() << status.message();
}

/// Zeros of each argument's local shape, as tessera-run allocates a rank's
/// arguments before it loads a checkpoint into them.
std::vector<OwnedTensor> makeZeroLocals(const plan::Program &program) {
  std::vector<OwnedTensor> locals;
  for (const plan::Argument &argument : program.arguments()) {
    const plan::Buffer &buffer = program.buffers(argument.buffer());
    locals.emplace_back(
        getDType(buffer.dtype()),
        std::vector<int64_t>(buffer.shape().begin(), buffer.shape().end()));
  }
  return locals;
}

/// The elements of an f32 tensor in row-major order.
std::vector<float> getValues(const OwnedTensor &tensor) {
  const float *data = tensor.view.as<float>();
  return std::vector<float>(data, data + tensor.view.getNumElements());
}

/// Saves `values` (one list per argument of `plan`'s program) at kSavedStep
/// as the pieces of this process: a default Job is rank 0 of a world of
/// one, whose ranks agree without MPI.
Status save(const std::string &dir, const plan::Plan &plan,
            const std::vector<std::vector<float>> &values) {
  const plan::Program &program = plan.programs(0);
  std::vector<OwnedTensor> locals = makeZeroLocals(program);
  if (values.size() != locals.size())
    return invalidArgument("got " + std::to_string(values.size()) +
                           " value lists for " + std::to_string(locals.size()) +
                           " arguments");
  for (size_t i = 0; i < locals.size(); ++i) {
    if (static_cast<int64_t>(values[i].size()) !=
        locals[i].view.getNumElements())
      return invalidArgument("argument " + std::to_string(i) + " holds " +
                             std::to_string(locals[i].view.getNumElements()) +
                             " elements, got " +
                             std::to_string(values[i].size()));
    std::copy(values[i].begin(), values[i].end(), locals[i].view.as<float>());
  }
  return saveCheckpoint(dir, program, getMesh(plan), locals, Job(), kSavedStep,
                        /*timeoutSeconds=*/10);
}

/// Loads the checkpoint in `dir` into zeros on rank `rank` of `plan`'s one
/// program, as tessera-run --load-checkpoint does; `step` is the step read.
Status load(const std::string &dir, const plan::Plan &plan, int rank,
            std::vector<OwnedTensor> &locals, int64_t &step) {
  // The plan's own program, not a copy: a reshard tells this rank's tensors
  // from other pipeline stages' by the program's address in the plan.
  const plan::Program &program = plan.programs(0);
  locals = makeZeroLocals(program);
  step = -1;
  return loadCheckpoint(dir, plan, program, getMesh(plan), locals, rank, step);
}

// Tests that a checkpoint loads back on the mesh it was saved on with the
// values and the step saved, and that the save leaves no staging directory.
TEST(CheckpointTest, RoundTripsOnTheSameMesh) {
  std::string dir = getTempPath("round-trip");
  std::filesystem::remove_all(dir);
  plan::Plan plan = makeOneDevicePlan();
  ASSERT_TRUE(isValid(plan));
  Status saved = save(dir, plan, {kWeight, kMoment});
  ASSERT_TRUE(saved.ok()) << saved.message();
  EXPECT_FALSE(std::filesystem::exists(dir + ".partial"));

  std::vector<OwnedTensor> locals;
  int64_t step = 0;
  Status loaded = load(dir, plan, /*rank=*/0, locals, step);
  ASSERT_TRUE(loaded.ok()) << loaded.message();
  EXPECT_EQ(step, kSavedStep);
  EXPECT_EQ(getValues(locals[0]), kWeight);
  EXPECT_EQ(getValues(locals[1]), kMoment);
}

// Tests that a checkpoint saved on one device loads onto two with the weight
// split by rows over "tp": rank 0 gets rows 0-1, rank 1 rows 2-3, and each
// gets the replicated moment whole.
TEST(CheckpointTest, ReshardsRowsOntoTwoDevices) {
  std::string dir = getTempPath("reshard-rows");
  std::filesystem::remove_all(dir);
  Status saved = save(dir, makeOneDevicePlan(), {kWeight, kMoment});
  ASSERT_TRUE(saved.ok()) << saved.message();

  plan::Plan plan = makeRowSplitPlan();
  ASSERT_TRUE(isValid(plan));
  std::vector<std::vector<float>> rows = {{1, 2, 3, 4}, {5, 6, 7, 8}};
  for (int rank = 0; rank < 2; ++rank) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    std::vector<OwnedTensor> locals;
    int64_t step = 0;
    Status loaded = load(dir, plan, rank, locals, step);
    ASSERT_TRUE(loaded.ok()) << loaded.message();
    EXPECT_EQ(step, kSavedStep);
    EXPECT_EQ(getValues(locals[0]), rows[rank]);
    EXPECT_EQ(getValues(locals[1]), kMoment);
  }
}

// Tests that a checkpoint saved on one device loads onto two with the weight
// and the moment split by columns over "tp": rank 0 gets column 0, rank 1
// column 1.
TEST(CheckpointTest, ReshardsColumnsOntoTwoDevices) {
  std::string dir = getTempPath("reshard-columns");
  std::filesystem::remove_all(dir);
  Status saved = save(dir, makeOneDevicePlan(), {kWeight, kMoment});
  ASSERT_TRUE(saved.ok()) << saved.message();

  std::vector<std::vector<std::string>> byColumns = {{}, {"tp"}};
  plan::Plan plan = makePlan(
      {{"tp", 2}},
      {{"fc.weight", plan::PARAM, {4, 2}, byColumns, {4, 1}},
       {"fc.weight.adam_m", plan::OPTIMIZER_STATE, {4, 2}, byColumns, {4, 1}}});
  ASSERT_TRUE(isValid(plan));
  std::vector<std::vector<float>> weights = {{1, 3, 5, 7}, {2, 4, 6, 8}};
  std::vector<std::vector<float>> moments = {{10, 30, 50, 70},
                                             {20, 40, 60, 80}};
  for (int rank = 0; rank < 2; ++rank) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    std::vector<OwnedTensor> locals;
    int64_t step = 0;
    Status loaded = load(dir, plan, rank, locals, step);
    ASSERT_TRUE(loaded.ok()) << loaded.message();
    EXPECT_EQ(step, kSavedStep);
    EXPECT_EQ(getValues(locals[0]), weights[rank]);
    EXPECT_EQ(getValues(locals[1]), moments[rank]);
  }
}

// Tests that a checkpoint saved on two devices, the weight split by rows,
// loads onto one device whole. A default Job is rank 0 of a world of one, so
// rank 1's pieces are saved as rank 0's of a second checkpoint and its files
// copied in under rank 1's names: a shard's files do not record their rank.
TEST(CheckpointTest, MergesTwoSavedRanksOntoOneDevice) {
  std::string dir = getTempPath("merge"), other = getTempPath("merge-rank-1");
  for (const std::string &each : {dir, other})
    std::filesystem::remove_all(each);
  plan::Plan twoDevices = makeRowSplitPlan();
  ASSERT_TRUE(isValid(twoDevices));
  Status saved = save(dir, twoDevices, {{1, 2, 3, 4}, kMoment});
  ASSERT_TRUE(saved.ok()) << saved.message();
  saved = save(other, twoDevices, {{5, 6, 7, 8}, kMoment});
  ASSERT_TRUE(saved.ok()) << saved.message();
  for (const char *extension : {".txt", ".tensors"}) {
    std::error_code error;
    std::filesystem::copy_file(other + "/rank-0" + extension,
                               dir + "/rank-1" + extension, error);
    ASSERT_FALSE(error) << error.message();
  }

  std::vector<OwnedTensor> locals;
  int64_t step = 0;
  Status loaded = load(dir, makeOneDevicePlan(), /*rank=*/0, locals, step);
  ASSERT_TRUE(loaded.ok()) << loaded.message();
  EXPECT_EQ(step, kSavedStep);
  EXPECT_EQ(getValues(locals[0]), kWeight);
  EXPECT_EQ(getValues(locals[1]), kMoment);
}

// Tests that a checkpoint does not load into a plan whose parameter of the
// same name has another global shape, and that the message gives both.
TEST(CheckpointTest, RefusesAnotherGlobalShape) {
  std::string dir = getTempPath("other-shape");
  std::filesystem::remove_all(dir);
  Status saved = save(dir, makeOneDevicePlan(), {kWeight, kMoment});
  ASSERT_TRUE(saved.ok()) << saved.message();

  plan::Plan plan = makePlan(
      {},
      {{"fc.weight", plan::PARAM, {2, 4}, {{}, {}}, {2, 4}},
       {"fc.weight.adam_m", plan::OPTIMIZER_STATE, {4, 2}, {{}, {}}, {4, 2}}});
  ASSERT_TRUE(isValid(plan));
  std::vector<OwnedTensor> locals;
  int64_t step = 0;
  Status loaded = load(dir, plan, /*rank=*/0, locals, step);
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.getCode(), StatusCode::DataError);
  EXPECT_EQ(loaded.message(), "checkpoint tensor 'fc.weight' is f32 [4, 2], "
                              "this plan's f32 [2, 4]");
}

// Tests that a checkpoint does not load into a plan without one of its
// tensors, and that the message names the tensor.
TEST(CheckpointTest, RefusesATensorThePlanLacks) {
  std::string dir = getTempPath("other-name");
  std::filesystem::remove_all(dir);
  Status saved = save(dir, makeOneDevicePlan(), {kWeight, kMoment});
  ASSERT_TRUE(saved.ok()) << saved.message();

  plan::Plan plan = makePlan(
      {},
      {{"fc.bias", plan::PARAM, {4, 2}, {{}, {}}, {4, 2}},
       {"fc.bias.adam_m", plan::OPTIMIZER_STATE, {4, 2}, {{}, {}}, {4, 2}}});
  ASSERT_TRUE(isValid(plan));
  std::vector<OwnedTensor> locals;
  int64_t step = 0;
  Status loaded = load(dir, plan, /*rank=*/0, locals, step);
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.getCode(), StatusCode::DataError);
  EXPECT_EQ(loaded.message(), "the checkpoint in '" + dir +
                                  "' holds 'fc.weight', which this plan "
                                  "does not have");
}

// Tests that a load checks the tensors file against its index's checksum:
// one flipped bit fails, naming both files.
TEST(CheckpointTest, RefusesADamagedTensorsFile) {
  std::string dir = getTempPath("damaged");
  std::filesystem::remove_all(dir);
  plan::Plan plan = makeOneDevicePlan();
  Status saved = save(dir, plan, {kWeight, kMoment});
  ASSERT_TRUE(saved.ok()) << saved.message();

  std::string tensors = dir + "/rank-0.tensors";
  std::string bytes;
  {
    std::ifstream file(tensors, std::ios::binary);
    std::ostringstream read;
    read << file.rdbuf();
    bytes = read.str();
  }
  ASSERT_FALSE(bytes.empty());
  // The last byte is an element's (the moment's last), so the file still
  // reads as tensors of the recorded shapes: only the checksum tells.
  bytes.back() ^= 1;
  std::ofstream(tensors, std::ios::binary | std::ios::trunc) << bytes;

  std::vector<OwnedTensor> locals;
  int64_t step = 0;
  Status loaded = load(dir, plan, /*rank=*/0, locals, step);
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.getCode(), StatusCode::DataError);
  EXPECT_EQ(loaded.message(),
            "'" + tensors +
                "' is damaged: its contents do not match the checksum in '" +
                dir + "/rank-0.txt'");
}

} // namespace
