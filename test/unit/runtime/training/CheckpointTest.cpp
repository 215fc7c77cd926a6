//===- CheckpointTest.cpp - saving, loading and resharding checkpoints ----===//

#include "tessera/runtime/training/Checkpoint.h"

#include "tessera/runtime/Plan.h"

#include <gtest/gtest.h>
#include <xxhash.h>

#include <algorithm>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
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

/// A file's bytes; empty where it cannot be read.
std::string readFile(const std::string &path) {
  std::ifstream file(path, std::ios::binary);
  std::ostringstream read;
  read << file.rdbuf();
  return read.str();
}

/// Writes `bytes` as the whole of the file at `path`.
void writeFile(const std::string &path, const std::string &bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

/// Replaces every `from` in the file at `path` by `to`; whether there was
/// one.
bool replaceInFile(const std::string &path, const std::string &from,
                   const std::string &to) {
  std::string text = readFile(path);
  bool found = false;
  for (size_t at = text.find(from); at != std::string::npos;
       at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
    found = true;
  }
  writeFile(path, text);
  return found;
}

/// Flips a bit of the last byte of a rank's tensors file: an element's (the
/// last tensor's last), so the file still reads as tensors of the recorded
/// shapes, and only a checksum tells.
void flipLastByte(const std::string &path) {
  std::string bytes = readFile(path);
  ASSERT_FALSE(bytes.empty()) << path;
  bytes.back() ^= 1;
  writeFile(path, bytes);
}

/// `lines` (each ending in a newline) followed by the line that seals them
/// in a v3 index.txt, as a forger who recomputes the checksum writes it.
std::string sealLines(const std::string &lines) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016" PRIx64,
                XXH3_64bits(lines.data(), lines.size()));
  return lines + "xxh3 " + hex + "\n";
}

/// Rewrites the v3 checkpoint in `dir`, saved on `ranks` ranks, as the v2
/// that an earlier release saved: index.txt without its rank lines and its
/// checksum, the rank files' headers relabelled.
void rewriteAsVersion2(const std::string &dir, int ranks) {
  std::istringstream index(readFile(dir + "/index.txt"));
  std::string header, step, mesh;
  std::getline(index, header);
  std::getline(index, step);
  std::getline(index, mesh);
  writeFile(dir + "/index.txt",
            "tessera checkpoint v2\n" + step + "\n" + mesh + "\n");
  for (int rank = 0; rank < ranks; ++rank)
    ASSERT_TRUE(replaceInFile(dir + "/rank-" + std::to_string(rank) + ".txt",
                              "tessera checkpoint shard v3\n",
                              "tessera checkpoint shard v2\n"));
}

/// A plan on a ["dp"=2, "tp"=2] mesh whose weight is split by rows over
/// "tp" (rank r, at dp r / 2 and tp r % 2, holds rows 2(r % 2) and the
/// next) and whose moment is replicated.
plan::Plan makeGridPlan() {
  return makePlan(
      {{"dp", 2}, {"tp", 2}},
      {{"fc.weight", plan::PARAM, {4, 2}, {{"tp"}, {}}, {2, 2}},
       {"fc.weight.adam_m", plan::OPTIMIZER_STATE, {4, 2}, {{}, {}}, {4, 2}}});
}

/// `program`'s arguments holding `values`, one list per argument.
Expected<std::vector<OwnedTensor>>
makeLocals(const plan::Program &program,
           const std::vector<std::vector<float>> &values) {
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
  return locals;
}

/// Saves `values` (one list per argument of `plan`'s program) at kSavedStep
/// as the pieces of this process: a default Job is rank 0 of a world of
/// one, whose ranks agree without MPI.
Status save(const std::string &dir, const plan::Plan &plan,
            const std::vector<std::vector<float>> &values) {
  const plan::Program &program = plan.programs(0);
  Expected<std::vector<OwnedTensor>> locals = makeLocals(program, values);
  if (!locals.ok())
    return locals.getStatus();
  return saveCheckpoint(dir, program, getMesh(plan), *locals, Job(), kSavedStep,
                        /*timeoutSeconds=*/10);
}

/// Puts together in `dir` the checkpoint that a run of `plan` on all its
/// ranks saves at kSavedStep, rank r's arguments holding `values[r]`: each
/// rank's files, then the index that seals them (as rank 0 writes it once
/// every rank has written).
Status saveRanks(const std::string &dir, const plan::Plan &plan,
                 const std::vector<std::vector<std::vector<float>>> &values) {
  const plan::Program &program = plan.programs(0);
  for (size_t rank = 0; rank < values.size(); ++rank) {
    Expected<std::vector<OwnedTensor>> locals =
        makeLocals(program, values[rank]);
    if (!locals.ok())
      return locals.getStatus();
    if (Status status =
            writeCheckpointShard(dir, program, *locals, static_cast<int>(rank));
        !status.ok())
      return status;
  }
  return writeCheckpointIndex(dir, getMesh(plan), kSavedStep);
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
// loads onto one device whole.
TEST(CheckpointTest, MergesTwoSavedRanksOntoOneDevice) {
  std::string dir = getTempPath("merge");
  std::filesystem::remove_all(dir);
  plan::Plan twoDevices = makeRowSplitPlan();
  ASSERT_TRUE(isValid(twoDevices));
  Status saved = saveRanks(dir, twoDevices,
                           {{{1, 2, 3, 4}, kMoment}, {{5, 6, 7, 8}, kMoment}});
  ASSERT_TRUE(saved.ok()) << saved.message();

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
  flipLastByte(tensors);

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

// Tests that a checkpoint of four ranks whose weight's layout is edited in
// every rank's index (split over "dp" where it was over "tp": the same
// pieces' shapes, other places) is refused, naming the first rank's index
// and the file whose checksum it fails, where it would load the wrong rows.
TEST(CheckpointTest, RefusesALayoutEditedInEveryRank) {
  std::string dir = getTempPath("edited-layout");
  std::filesystem::remove_all(dir);
  plan::Plan grid = makeGridPlan();
  ASSERT_TRUE(isValid(grid));
  std::vector<float> top = {1, 2, 3, 4}, bottom = {5, 6, 7, 8};
  Status saved = saveRanks(
      dir, grid,
      {{top, kMoment}, {bottom, kMoment}, {top, kMoment}, {bottom, kMoment}});
  ASSERT_TRUE(saved.ok()) << saved.message();
  std::vector<OwnedTensor> locals;
  int64_t step = 0;
  Status loaded = load(dir, makeOneDevicePlan(), /*rank=*/0, locals, step);
  ASSERT_TRUE(loaded.ok()) << loaded.message();
  EXPECT_EQ(getValues(locals[0]), kWeight);

  for (int rank = 0; rank < 4; ++rank)
    ASSERT_TRUE(replaceInFile(
        dir + "/rank-" + std::to_string(rank) + ".txt",
        "fc.weight f32 4 2 @ dim_axes { axes: \"tp\" } dim_axes { }",
        "fc.weight f32 4 2 @ dim_axes { axes: \"dp\" } dim_axes { }"));
  loaded = load(dir, makeOneDevicePlan(), /*rank=*/0, locals, step);
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.getCode(), StatusCode::DataError);
  EXPECT_EQ(loaded.message(), "'" + dir +
                                  "/rank-0.txt' is damaged: its contents do "
                                  "not match the checksum in '" +
                                  dir + "/index.txt'");
}

// Tests that a checkpoint whose index swaps the names of two tensors of one
// dtype, shape and layout (a parameter and its moment) is refused, where it
// would load each into the other.
TEST(CheckpointTest, RefusesSwappedNames) {
  std::string dir = getTempPath("swapped-names");
  std::filesystem::remove_all(dir);
  plan::Plan plan = makeOneDevicePlan();
  Status saved = save(dir, plan, {kWeight, kMoment});
  ASSERT_TRUE(saved.ok()) << saved.message();
  std::string index = dir + "/rank-0.txt";
  ASSERT_TRUE(replaceInFile(index, "\nfc.weight f32", "\nswapped f32"));
  ASSERT_TRUE(
      replaceInFile(index, "\nfc.weight.adam_m f32", "\nfc.weight f32"));
  ASSERT_TRUE(replaceInFile(index, "\nswapped f32", "\nfc.weight.adam_m f32"));

  std::vector<OwnedTensor> locals;
  int64_t step = 0;
  Status loaded = load(dir, plan, /*rank=*/0, locals, step);
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.getCode(), StatusCode::DataError);
  EXPECT_EQ(loaded.message(), "'" + index +
                                  "' is damaged: its contents do not match "
                                  "the checksum in '" +
                                  dir + "/index.txt'");
}

// Tests that an index whose step is edited fails its own checksum.
TEST(CheckpointTest, RefusesAnEditedStep) {
  std::string dir = getTempPath("edited-step");
  std::filesystem::remove_all(dir);
  plan::Plan plan = makeOneDevicePlan();
  Status saved = save(dir, plan, {kWeight, kMoment});
  ASSERT_TRUE(saved.ok()) << saved.message();
  ASSERT_TRUE(replaceInFile(dir + "/index.txt", "\nstep 3\n", "\nstep 4\n"));

  std::vector<OwnedTensor> locals;
  int64_t step = 0;
  Status loaded = load(dir, plan, /*rank=*/0, locals, step);
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.message(), "'" + dir +
                                  "/index.txt' is damaged: its contents do "
                                  "not match the checksum on its last line");
}

// Tests that a v3 index is refused without its own checksum line, and, its
// checksum recomputed, without a checksum for each rank of its mesh.
TEST(CheckpointTest, RefusesAnIndexWithoutItsChecksums) {
  std::string dir = getTempPath("unsealed");
  std::filesystem::remove_all(dir);
  plan::Plan plan = makeOneDevicePlan();
  Status saved = save(dir, plan, {kWeight, kMoment});
  ASSERT_TRUE(saved.ok()) << saved.message();
  std::string index = readFile(dir + "/index.txt");
  size_t rankLine = index.find("\nrank 0 ");
  size_t sealLine = index.find("\nxxh3 ");
  ASSERT_NE(rankLine, std::string::npos);
  ASSERT_NE(sealLine, std::string::npos);
  std::vector<OwnedTensor> locals;
  int64_t step = 0;

  writeFile(dir + "/index.txt", index.substr(0, sealLine + 1));
  Status loaded = load(dir, plan, /*rank=*/0, locals, step);
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.message(), "'" + dir +
                                  "/index.txt' is damaged: it does not end "
                                  "with the line of its checksum ('xxh3 ' "
                                  "and 16 hex digits)");

  writeFile(dir + "/index.txt", sealLines(index.substr(0, rankLine + 1)));
  loaded = load(dir, plan, /*rank=*/0, locals, step);
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.message(), "'" + dir +
                                  "/index.txt' records checksums for 0 "
                                  "ranks, its mesh '-' has 1");
}

// Tests that an index marked v1 (which read tensors by position and checked
// nothing) with a flipped data byte is refused, whatever else it holds.
TEST(CheckpointTest, RefusesAnIndexMarkedVersion1) {
  std::string dir = getTempPath("marked-v1");
  std::filesystem::remove_all(dir);
  plan::Plan plan = makeOneDevicePlan();
  Status saved = save(dir, plan, {kWeight, kMoment});
  ASSERT_TRUE(saved.ok()) << saved.message();
  flipLastByte(dir + "/rank-0.tensors");
  ASSERT_TRUE(replaceInFile(dir + "/index.txt", "tessera checkpoint v3\n",
                            "tessera checkpoint v1\n"));

  std::vector<OwnedTensor> locals;
  int64_t step = 0;
  Status loaded = load(dir, plan, /*rank=*/0, locals, step);
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.getCode(), StatusCode::DataError);
  EXPECT_EQ(loaded.message(),
            "'" + dir +
                "/index.txt' is of format v1, which has no checksum to check "
                "its tensors by: only v2 and v3 checkpoints load");
}

// Tests that a v3 checkpoint relabelled v2 is refused while any of v3 is
// left (the index's rank lines and checksum, the rank files' headers), and
// that once it is a whole v2 its flipped data byte still fails the v2
// checksum of its tensors file.
TEST(CheckpointTest, RefusesAnIndexMarkedVersion2) {
  std::string dir = getTempPath("marked-v2");
  std::filesystem::remove_all(dir);
  plan::Plan plan = makeOneDevicePlan();
  Status saved = save(dir, plan, {kWeight, kMoment});
  ASSERT_TRUE(saved.ok()) << saved.message();
  flipLastByte(dir + "/rank-0.tensors");
  std::string sealed = readFile(dir + "/index.txt");
  std::vector<OwnedTensor> locals;
  int64_t step = 0;

  // The header alone: the index keeps its rank line and its checksum.
  ASSERT_TRUE(replaceInFile(dir + "/index.txt", "tessera checkpoint v3\n",
                            "tessera checkpoint v2\n"));
  Status loaded = load(dir, plan, /*rank=*/0, locals, step);
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.message(),
            "'" + dir +
                "/index.txt' holds 5 lines, not the 3 of a v2 checkpoint "
                "index");

  // The index rewritten as v2's: the rank file is still v3's.
  std::istringstream lines(sealed);
  std::string header, stepLine, meshLine;
  std::getline(lines, header);
  std::getline(lines, stepLine);
  std::getline(lines, meshLine);
  writeFile(dir + "/index.txt",
            "tessera checkpoint v2\n" + stepLine + "\n" + meshLine + "\n");
  loaded = load(dir, plan, /*rank=*/0, locals, step);
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.message(),
            "'" + dir +
                "/rank-0.txt' is not a Tessera checkpoint shard's index of "
                "format v2, which '" +
                dir + "/index.txt' names");

  // A whole v2: its own check, the tensors file's checksum, fails.
  writeFile(dir + "/index.txt", sealed);
  rewriteAsVersion2(dir, /*ranks=*/1);
  loaded = load(dir, plan, /*rank=*/0, locals, step);
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.message(), "'" + dir +
                                  "/rank-0.tensors' is damaged: its contents "
                                  "do not match the checksum in '" +
                                  dir + "/rank-0.txt'");
}

// Tests that a v2 checkpoint (saved before v3) still loads, on its mesh and
// resharded, with the values saved.
TEST(CheckpointTest, LoadsAVersion2Checkpoint) {
  std::string dir = getTempPath("v2");
  std::filesystem::remove_all(dir);
  plan::Plan twoDevices = makeRowSplitPlan();
  Status saved = saveRanks(dir, twoDevices,
                           {{{1, 2, 3, 4}, kMoment}, {{5, 6, 7, 8}, kMoment}});
  ASSERT_TRUE(saved.ok()) << saved.message();
  rewriteAsVersion2(dir, /*ranks=*/2);

  std::vector<OwnedTensor> locals;
  int64_t step = 0;
  Status loaded = load(dir, twoDevices, /*rank=*/1, locals, step);
  ASSERT_TRUE(loaded.ok()) << loaded.message();
  EXPECT_EQ(step, kSavedStep);
  EXPECT_EQ(getValues(locals[0]), std::vector<float>({5, 6, 7, 8}));
  loaded = load(dir, makeOneDevicePlan(), /*rank=*/0, locals, step);
  ASSERT_TRUE(loaded.ok()) << loaded.message();
  EXPECT_EQ(getValues(locals[0]), kWeight);
  EXPECT_EQ(getValues(locals[1]), kMoment);
}

// Tests that no name a checkpoint holds leads a load out of its directory:
// an index whose rank line names a path (to a whole checkpoint beside it,
// its checksum recomputed) is refused, naming the line; a tensor named
// like a path (its checksums recomputed) is only a name this plan lacks.
TEST(CheckpointTest, RefusesPathsInTheIndex) {
  std::string dir = getTempPath("traversal");
  std::string outside = getTempPath("traversal-outside");
  for (const std::string &each : {dir, outside})
    std::filesystem::remove_all(each);
  plan::Plan plan = makeOneDevicePlan();
  for (const std::string &each : {dir, outside}) {
    Status saved = save(each, plan, {kWeight, kMoment});
    ASSERT_TRUE(saved.ok()) << saved.message();
  }
  std::string index = readFile(dir + "/index.txt");
  size_t rankLine = index.find("\nrank 0 ");
  ASSERT_NE(rankLine, std::string::npos);
  std::string checksum = index.substr(rankLine + 8, 16);
  std::string named = "rank ../checkpoint-traversal-outside/rank-0 " + checksum;
  writeFile(dir + "/index.txt",
            sealLines(index.substr(0, rankLine + 1) + named + "\n"));

  std::vector<OwnedTensor> locals;
  int64_t step = 0;
  Status loaded = load(dir, plan, /*rank=*/0, locals, step);
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.getCode(), StatusCode::DataError);
  EXPECT_EQ(loaded.message(), "'" + dir + "/index.txt' line 4 is '" + named +
                                  "', not 'rank 0 <checksum>'");

  writeFile(dir + "/index.txt", index);
  ASSERT_TRUE(replaceInFile(dir + "/rank-0.txt", "\nfc.weight f32",
                            "\n../../fc.weight f32"));
  Status sealed = writeCheckpointIndex(dir, getMesh(plan), kSavedStep);
  ASSERT_TRUE(sealed.ok()) << sealed.message();
  loaded = load(dir, plan, /*rank=*/0, locals, step);
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.message(), "the checkpoint in '" + dir +
                                  "' holds '../../fc.weight', which this "
                                  "plan does not have");
}

} // namespace
