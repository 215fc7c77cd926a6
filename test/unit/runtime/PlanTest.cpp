//===- PlanTest.cpp - Plan validation and mesh groups of the runtime ------===//

#include "tessera/runtime/Plan.h"
#include "tessera/runtime/Communicator.h"
#include "tessera/runtime/Executor.h"

#include "PlanChecksum.h"

#include <gtest/gtest.h>

#include <fstream>
#include <limits>
#include <tuple>

using namespace tessera;
using namespace tessera::runtime;

namespace {

/// Adds an f32 buffer of `shape` at `offset` in the arena.
void addBuffer(plan::Program *program, std::vector<int64_t> shape,
               int64_t offset) {
  plan::Buffer *buffer = program->add_buffers();
  buffer->set_id(program->buffers_size() - 1);
  buffer->set_dtype(plan::F32);
  for (int64_t size : shape)
    buffer->add_shape(size);
  buffer->set_arena_offset_bytes(offset);
}

/// Adds argument "arg0": f32 buffer `buffer`, replicated, of `shape`.
void addReplicatedArgument(plan::Program *program, int64_t buffer,
                           std::vector<int64_t> shape) {
  plan::Argument *argument = program->add_arguments();
  argument->set_name("arg0");
  argument->set_buffer(buffer);
  argument->set_dtype(plan::F32);
  for (int64_t size : shape) {
    argument->add_global_shape(size);
    argument->add_dim_axes();
  }
}

/// Adds a replicated result of `shape` in buffer `buffer`.
void addReplicatedResult(plan::Program *program, int64_t buffer,
                         std::vector<int64_t> shape) {
  plan::Result *result = program->add_results();
  result->set_buffer(buffer);
  for (int64_t size : shape) {
    result->add_global_shape(size);
    result->add_dim_axes();
  }
}

/// A plan on one device (a ["dp"=1] mesh) with one empty program.
plan::Plan makeOneDevicePlan() {
  plan::Plan plan;
  plan.set_format_version(plan::PLAN_FORMAT_VERSION);
  auto *axis = plan.mutable_mesh()->add_axes();
  axis->set_name("dp");
  axis->set_size(1);
  plan.add_programs()->add_ranks(0);
  return plan;
}

/// A valid plan on a ["tp"=2] mesh: x [4, 8] split by columns, one relu, an
/// all_gather back to [4, 16].
plan::Plan makePlan() {
  plan::Plan plan;
  plan.set_format_version(plan::PLAN_FORMAT_VERSION);
  auto *axis = plan.mutable_mesh()->add_axes();
  axis->set_name("tp");
  axis->set_size(2);
  plan::Program *program = plan.add_programs();
  program->add_ranks(0);
  program->add_ranks(1);
  addBuffer(program, {4, 8}, 0);
  addBuffer(program, {4, 8}, 128);
  addBuffer(program, {4, 16}, 256);
  program->set_arena_bytes(512);
  plan::Argument *argument = program->add_arguments();
  argument->set_name("arg0");
  argument->set_buffer(0);
  argument->set_dtype(plan::F32);
  argument->add_global_shape(4);
  argument->add_global_shape(16);
  argument->add_dim_axes();
  argument->add_dim_axes()->add_axes("tp");
  plan::Instruction *relu = program->add_instructions();
  relu->mutable_kernel()->set_op("nn.relu");
  relu->mutable_kernel()->add_inputs(0);
  relu->mutable_kernel()->add_outputs(1);
  relu->add_frees(0);
  plan::Instruction *gather = program->add_instructions();
  gather->mutable_collective()->set_kind(plan::ALL_GATHER);
  gather->mutable_collective()->add_mesh_axes("tp");
  gather->mutable_collective()->set_input(1);
  gather->mutable_collective()->set_output(2);
  gather->mutable_collective()->set_dim(1);
  gather->add_frees(1);
  plan::Result *result = program->add_results();
  result->set_buffer(2);
  result->add_global_shape(4);
  result->add_global_shape(16);
  result->add_dim_axes();
  result->add_dim_axes();
  return plan;
}

/// What validatePlan says: "" for a valid plan, else its invalid plan error.
std::string getValidationError(const plan::Plan &plan) {
  Status status = validatePlan(plan);
  EXPECT_TRUE(status.ok() || status.getCode() == StatusCode::InvalidPlan);
  return status.message();
}

/// Writes `bytes` to a fresh file in the test's temporary directory.
std::string writeFile(const std::string &name, const std::string &bytes) {
  std::string path = ::testing::TempDir() + name;
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

TEST(PlanTest, AWellFormedPlanValidates) {
  EXPECT_EQ(getValidationError(makePlan()), "");
}

TEST(PlanTest, RoundTripsThroughTheWireFormat) {
  std::string bytes;
  ASSERT_TRUE(makePlan().SerializeToString(&bytes));
  plan::Plan parsed;
  ASSERT_TRUE(parsed.ParseFromString(bytes));
  EXPECT_EQ(getValidationError(parsed), "");
}

TEST(PlanTest, RejectsAnotherFormatVersion) {
  plan::Plan plan = makePlan();
  plan.set_format_version(plan::PLAN_FORMAT_VERSION_UNSPECIFIED);
  EXPECT_EQ(getValidationError(plan),
            "format version 0 is not this runtime's 1");
}

TEST(PlanTest, RejectsMicrobatchesMajorThatDoNotSplitAPiece) {
  // Argument 0 is [4, 16] with dim 0 whole: 3 microbatches do not split
  // its 4 rows.
  plan::Plan plan = makePlan();
  plan.mutable_programs(0)->mutable_arguments(0)->set_microbatches_major(3);
  std::string error = getValidationError(plan);
  EXPECT_NE(error.find("holds 3 microbatches major in dim 0, which do not "
                       "split its piece of 4 rows"),
            std::string::npos)
      << error;
  plan.mutable_programs(0)->mutable_arguments(0)->set_microbatches_major(2);
  EXPECT_EQ(getValidationError(plan), "");
}

TEST(PlanTest, RejectsABufferOutOfRange) {
  plan::Plan plan = makePlan();
  plan.mutable_programs(0)
      ->mutable_instructions(0)
      ->mutable_kernel()
      ->set_inputs(0, 7);
  EXPECT_EQ(getValidationError(plan),
            "program 0: instruction 0 (nn.relu) reads "
            "names buffer 7, expected < 3");
}

TEST(PlanTest, RejectsAReadAfterFree) {
  plan::Plan plan = makePlan();
  plan.mutable_programs(0)
      ->mutable_instructions(1)
      ->mutable_collective()
      ->set_input(0);
  EXPECT_EQ(getValidationError(plan),
            "program 0: instruction 1 reads buffer 0 after it is freed");
}

TEST(PlanTest, RejectsCollectiveShapesThatDoNotFollowFromTheGroup) {
  plan::Plan plan = makePlan();
  plan.mutable_programs(0)->mutable_buffers(2)->set_shape(1, 24);
  EXPECT_EQ(getValidationError(plan),
            "program 0: instruction 1: ALL_GATHER of [4, 8] over a group of 2 "
            "cannot give [4, 24]");
}

TEST(PlanTest, RejectsAnUnknownMeshAxis) {
  plan::Plan plan = makePlan();
  plan.mutable_programs(0)
      ->mutable_instructions(1)
      ->mutable_collective()
      ->set_mesh_axes(0, "dp");
  EXPECT_EQ(getValidationError(plan),
            "program 0: instruction 1: ALL_GATHER names "
            "unknown mesh axis \"dp\"");
}

TEST(PlanTest, RejectsOverlappingLiveBuffers) {
  plan::Plan plan = makePlan();
  plan.mutable_programs(0)->mutable_buffers(1)->set_arena_offset_bytes(64);
  EXPECT_EQ(getValidationError(plan),
            "program 0: buffers 0 and 1 overlap in the "
            "arena while both live");
}

TEST(PlanTest, RejectsArgumentsWhoseGlobalShapeDoesNotFit) {
  plan::Plan plan = makePlan();
  plan.mutable_programs(0)->mutable_arguments(0)->set_global_shape(1, 12);
  EXPECT_EQ(getValidationError(plan),
            "program 0: argument 'arg0' has local shape [4, 8], not its "
            "piece [4, 6] of global shape [4, 12]");
}

TEST(PlanTest, RejectsAFlatArgumentOfTheWrongShare) {
  // [4, 16] over "tp" = 2, padded and split flat over the same 2 devices:
  // 32 of 64 elements each.
  plan::Plan plan = makePlan();
  plan::Argument *argument = plan.mutable_programs(0)->mutable_arguments(0);
  argument->clear_dim_axes();
  argument->add_dim_axes();
  argument->add_dim_axes();
  argument->add_flat_axes("tp");
  EXPECT_EQ(getValidationError(plan),
            "program 0: argument 'arg0' has local shape [4, 8], not its "
            "piece [32] of global shape [4, 16]");
}

/// makePlan's argument made a unit's flat buffer of 64 elements, split
/// flat over "tp", with no members yet.
plan::Argument *makeUnitArgument(plan::Plan &plan) {
  plan::Argument *argument = plan.mutable_programs(0)->mutable_arguments(0);
  argument->clear_dim_axes();
  argument->clear_global_shape();
  argument->add_global_shape(64);
  argument->add_dim_axes();
  argument->add_flat_axes("tp");
  return argument;
}

TEST(PlanTest, RejectsAUnitBufferThatIsNotItsMembersInARow) {
  // Its members hold 32 + 16.
  plan::Plan plan = makePlan();
  plan::Argument *argument = makeUnitArgument(plan);
  for (std::vector<int64_t> shape : {std::vector<int64_t>{4, 8}, {16}}) {
    plan::Member *member = argument->add_members();
    member->set_name("w");
    for (int64_t size : shape)
      member->add_global_shape(size);
  }
  EXPECT_EQ(getValidationError(plan),
            "program 0: argument 'arg0' of global shape [64] is not its "
            "members' 48 elements in a row");
}

TEST(PlanTest, RejectsAUnitMemberSplitOverAnUnknownAxis) {
  // A plan-loader fuzzer finding: the member's axes went unchecked into the
  // mesh's group arithmetic, which wrote out of bounds.
  plan::Plan plan = makePlan();
  plan::Member *member = makeUnitArgument(plan)->add_members();
  member->set_name("w");
  member->add_global_shape(64);
  member->add_dim_axes()->add_axes("xx");
  EXPECT_EQ(getValidationError(plan),
            "program 0: argument 'arg0' member 'w' names unknown mesh axis "
            "\"xx\"");
}

TEST(PlanTest, RejectsAUnitMemberWhoseElementsOverflow) {
  // A plan-loader fuzzer finding: a member of [64, 2^62] overflowed the
  // count of its elements.
  plan::Plan plan = makePlan();
  plan::Member *member = makeUnitArgument(plan)->add_members();
  member->set_name("w");
  member->add_global_shape(64);
  member->add_global_shape(int64_t(1) << 62);
  EXPECT_EQ(getValidationError(plan),
            "program 0: argument 'arg0' member 'w' has global shape [64, "
            "4611686018427387904], whose elements int64 does not count");
}

TEST(PlanTest, RejectsAViewPastItsBuffer) {
  // Rows 3 and 4 of the gathered [4, 16] are a view 128 bytes in; from 192
  // bytes in they would run past it.
  plan::Plan plan = makePlan();
  plan::Program *program = plan.mutable_programs(0);
  addBuffer(program, {2, 16}, 256 + 128);
  program->mutable_buffers(3)->set_view_of(2);
  program->mutable_buffers(3)->set_view_offset_bytes(128);
  EXPECT_EQ(getValidationError(plan), "");
  program->mutable_buffers(3)->set_view_offset_bytes(192);
  program->mutable_buffers(3)->set_arena_offset_bytes(256 + 192);
  EXPECT_EQ(getValidationError(plan),
            "program 0: view buffer 3 differs from buffer 2 in dtype, size or "
            "arena offset");
}

TEST(PlanTest, RejectsABufferPlacedOutsideItsConcatenation) {
  // The relu's result placed in the gather's: 128 bytes apart in the arena,
  // but said to be 0 bytes into it.
  plan::Plan plan = makePlan();
  plan.mutable_programs(0)->mutable_buffers(1)->set_placed_in(2);
  EXPECT_EQ(getValidationError(plan),
            "program 0: buffer 1 is placed in buffer 2, expected a later "
            "buffer of its dtype, neither a view nor placed nor slotted, that "
            "holds it at its arena offset");
}

TEST(PlanTest, RejectsABufferPlacedInOneWhoseSizeOverflows) {
  // A plan-loader fuzzer finding: the buffer it is placed in, checked only
  // later, had a shape whose element count overflowed.
  plan::Plan plan = makePlan();
  plan::Program *program = plan.mutable_programs(0);
  program->mutable_buffers(1)->set_placed_in(2);
  program->mutable_buffers(2)->add_shape(std::numeric_limits<int64_t>::min());
  EXPECT_EQ(getValidationError(plan),
            "program 0: buffer 1 is placed in buffer 2, expected a later "
            "buffer of its dtype, neither a view nor placed nor slotted, that "
            "holds it at its arena offset");
}

TEST(PlanTest, RejectsABufferWhoseEndOverflows) {
  // Plan-loader fuzzer findings: an arena offset near 2^63, and slots whose
  // extent overflows, made the arena check's sum overflow.
  plan::Plan plan = makePlan();
  plan.mutable_programs(0)->mutable_buffers(0)->set_arena_offset_bytes(
      std::numeric_limits<int64_t>::max());
  EXPECT_EQ(getValidationError(plan),
            "program 0: buffer 0 at offset 9223372036854775807 with 128 "
            "bytes lies outside the arena of 512 bytes");
  plan = makePlan();
  plan::Buffer *slotted = plan.mutable_programs(0)->mutable_buffers(0);
  slotted->set_slots(std::numeric_limits<int64_t>::max());
  slotted->set_slot_stride_bytes(int64_t(1) << 40);
  EXPECT_EQ(getValidationError(plan),
            "program 0: buffer 0 at offset 0 with more than 2^63 bytes lies "
            "outside the arena of 512 bytes");
}

TEST(PlanTest, RejectsRanksWithoutAProgram) {
  plan::Plan plan = makePlan();
  plan.mutable_programs(0)->mutable_ranks()->RemoveLast();
  EXPECT_EQ(getValidationError(plan),
            "the programs cover 1 ranks of a mesh of 2");
}

/// makePlan with its all_gather started on stream 1 (event 0) and a wait
/// after it that frees the gather's input.
plan::Plan makeAsyncPlan() {
  plan::Plan plan = makePlan();
  plan::Program *program = plan.mutable_programs(0);
  plan::Instruction *gather = program->mutable_instructions(1);
  gather->set_stream(1);
  gather->add_signal_events(0);
  gather->clear_frees();
  plan::Instruction *wait = program->add_instructions();
  wait->add_wait_events(0);
  wait->add_frees(1);
  return plan;
}

TEST(PlanTest, AStartedCollectiveAndItsWaitValidate) {
  EXPECT_EQ(getValidationError(makeAsyncPlan()), "");
}

TEST(PlanTest, RejectsAReadOfAStartedCollectiveBeforeItsWait) {
  plan::Plan plan = makeAsyncPlan();
  plan::Program *program = plan.mutable_programs(0);
  // A relu of the gathered buffer between the start and the wait.
  program->add_buffers()->CopyFrom(program->buffers(2));
  program->mutable_buffers(3)->set_id(3);
  program->mutable_buffers(3)->set_arena_offset_bytes(512);
  program->set_arena_bytes(1024);
  plan::Instruction early;
  early.mutable_kernel()->set_op("nn.relu");
  early.mutable_kernel()->add_inputs(2);
  early.mutable_kernel()->add_outputs(3);
  program->mutable_instructions()->Add(std::move(early));
  program->mutable_instructions()->SwapElements(2, 3);
  EXPECT_EQ(getValidationError(plan),
            "program 0: instruction 2 (nn.relu) reads "
            "buffer 2 before the wait for event 0");
}

TEST(PlanTest, RejectsFreeingTheInputOfAStartedCollective) {
  plan::Plan plan = makeAsyncPlan();
  plan::Program *program = plan.mutable_programs(0);
  program->mutable_instructions(1)->add_frees(1);
  program->mutable_instructions(2)->clear_frees();
  EXPECT_EQ(getValidationError(plan),
            "program 0: instruction 1 frees buffer 1 "
            "while the collective of event 0 uses it");
}

TEST(PlanTest, RejectsACollectiveNeverWaitedFor) {
  plan::Plan plan = makeAsyncPlan();
  plan.mutable_programs(0)->mutable_instructions()->RemoveLast();
  EXPECT_EQ(getValidationError(plan), "program 0: event 0 is never waited for");
}

TEST(PlanTest, RejectsAWaitForAnEventNothingSignals) {
  plan::Plan plan = makeAsyncPlan();
  plan.mutable_programs(0)->mutable_instructions(2)->set_wait_events(0, 5);
  EXPECT_EQ(getValidationError(plan),
            "program 0: instruction 2 waits for event 5, "
            "which no collective in flight signals");
}

TEST(PlanTest, RejectsAKernelOnTheCommunicationStream) {
  plan::Plan plan = makeAsyncPlan();
  plan.mutable_programs(0)->mutable_instructions(0)->set_stream(1);
  EXPECT_EQ(
      getValidationError(plan),
      "program 0: instruction 0 (nn.relu): only a collective or a send may "
      "run on a stream other than 0, and it signals one event");
}

/// makePlan with buffer 3, a [32] view of the relu's output that the
/// gather reads.
plan::Plan makeViewPlan() {
  plan::Plan plan = makePlan();
  plan::Program *program = plan.mutable_programs(0);
  addBuffer(program, {4, 8}, program->buffers(1).arena_offset_bytes());
  program->mutable_buffers(3)->set_view_of(1);
  program->mutable_instructions(1)->mutable_collective()->set_input(3);
  return plan;
}

TEST(PlanTest, AViewReadsTheBytesOfItsBuffer) {
  EXPECT_EQ(getValidationError(makeViewPlan()), "");
}

TEST(PlanTest, RejectsAViewOfAnotherSize) {
  plan::Plan plan = makeViewPlan();
  // Larger than its buffer (a smaller view is its first bytes).
  plan.mutable_programs(0)->mutable_buffers(3)->set_shape(1, 64);
  EXPECT_EQ(getValidationError(plan),
            "program 0: view buffer 3 differs from "
            "buffer 1 in dtype, size or arena offset");
}

TEST(PlanTest, RejectsAViewOfALaterBuffer) {
  plan::Plan plan = makeViewPlan();
  plan.mutable_programs(0)->mutable_buffers(3)->set_view_of(3);
  EXPECT_EQ(getValidationError(plan),
            "program 0: view buffer 3 is a view of 3, expected an earlier "
            "buffer that is not a view");
}

TEST(PlanTest, RejectsAReadOfAViewAfterItsBufferIsFreed) {
  plan::Plan plan = makeViewPlan();
  plan::Program *program = plan.mutable_programs(0);
  program->mutable_instructions(0)->add_frees(1);
  program->mutable_instructions(1)->clear_frees();
  EXPECT_EQ(getValidationError(plan),
            "program 0: instruction 1 reads buffer 1 after it is freed");
}

TEST(PlanTest, RejectsWritingOrFreeingAView) {
  plan::Plan plan = makeViewPlan();
  plan.mutable_programs(0)->mutable_instructions(1)->set_frees(0, 3);
  EXPECT_EQ(getValidationError(plan),
            "program 0: instruction 1 frees view buffer "
            "3 (its buffer is freed instead)");
  plan = makeViewPlan();
  plan.mutable_programs(0)
      ->mutable_instructions(0)
      ->mutable_kernel()
      ->set_outputs(0, 3);
  EXPECT_EQ(getValidationError(plan),
            "program 0: instruction 0 (nn.relu) writes view buffer 3");
}

TEST(MeshTest, GroupsAreRowMajorOverTheListedAxes) {
  Mesh mesh({"dp", "tp"}, {2, 4});
  EXPECT_EQ(mesh.getCoordinates(6), (std::vector<int64_t>{1, 2}));
  Group tp = mesh.getGroup(6, {"tp"});
  EXPECT_EQ(tp.index, 2);
  EXPECT_EQ(tp.size, 4);
  EXPECT_EQ(tp.color, 1);
  Group both = mesh.getGroup(6, {"tp", "dp"});
  EXPECT_EQ(both.index, 2 * 2 + 1);
  EXPECT_EQ(both.size, 8);
}

TEST(MeshTest, LocalPiecesRoundTrip) {
  Mesh mesh({"dp", "tp"}, {2, 2});
  OwnedTensor global(DType::F32, {4, 6});
  for (int i = 0; i < 24; ++i)
    global.view.as<float>()[i] = i;
  PieceLayout dims{{{"dp"}, {"tp"}}, {}};
  OwnedTensor piece = takeLocalPiece(global.view, dims, mesh, /*rank=*/3);
  ASSERT_EQ(piece.view.shape, (std::vector<int64_t>{2, 3}));
  // Rank 3 is dp=1, tp=1: rows 2-3, columns 3-5.
  EXPECT_EQ(piece.view.as<float>()[0], 15.0f);
  EXPECT_EQ(piece.view.as<float>()[5], 23.0f);
  OwnedTensor rebuilt(DType::F32, {4, 6});
  for (int64_t rank = 0; rank < 4; ++rank)
    placeLocalPiece(takeLocalPiece(global.view, dims, mesh, rank).view,
                    rebuilt.view, dims, mesh, rank);
  EXPECT_EQ(rebuilt.storage, global.storage);
}

TEST(MeshTest, MicrobatchesMajorPiecesRoundTrip) {
  // 8 rows in 2 microbatches major (expert parallelism's data): microbatch
  // m is rows 4m to 4m + 3, split over dp = 2 and ep = 2; rank 1 (dp=0,
  // ep=1) holds row 1 of each, rows 1 and 5.
  Mesh mesh({"dp", "ep"}, {2, 2});
  OwnedTensor global(DType::F32, {8, 2});
  for (int i = 0; i < 16; ++i)
    global.view.as<float>()[i] = i;
  PieceLayout layout{{{"dp", "ep"}, {}}, {}};
  layout.microbatchesMajor = 2;
  OwnedTensor piece = takeLocalPiece(global.view, layout, mesh, /*rank=*/1);
  ASSERT_EQ(piece.view.shape, (std::vector<int64_t>{2, 2}));
  std::vector<float> want = {2, 3, 10, 11};
  EXPECT_EQ(
      std::vector<float>(piece.view.as<float>(), piece.view.as<float>() + 4),
      want);
  OwnedTensor rebuilt(DType::F32, {8, 2});
  for (int64_t rank = 0; rank < 4; ++rank)
    placeLocalPiece(takeLocalPiece(global.view, layout, mesh, rank).view,
                    rebuilt.view, layout, mesh, rank);
  EXPECT_EQ(rebuilt.storage, global.storage);
}

TEST(MeshTest, FlatPiecesRoundTrip) {
  // A [5, 6] tensor split on dim 1 over tp = 2 and stored flat over dp = 4:
  // each tp piece's 15 elements, padded to 16, are 4 per dp rank.
  Mesh mesh({"dp", "tp"}, {4, 2});
  OwnedTensor global(DType::F32, {5, 6});
  for (int i = 0; i < 30; ++i)
    global.view.as<float>()[i] = i + 1;
  PieceLayout layout{{{}, {"tp"}}, {"dp"}};
  // Rank 3 is dp=1, tp=1: elements 4-7 of the piece of columns 3-5.
  OwnedTensor piece = takeLocalPiece(global.view, layout, mesh, /*rank=*/3);
  ASSERT_EQ(piece.view.shape, (std::vector<int64_t>{4}));
  std::vector<float> want = {11, 12, 16, 17};
  EXPECT_EQ(
      std::vector<float>(piece.view.as<float>(), piece.view.as<float>() + 4),
      want);
  // The last dp rank holds three elements and the padding.
  OwnedTensor last = takeLocalPiece(global.view, layout, mesh, /*rank=*/7);
  want = {28, 29, 30, 0};
  EXPECT_EQ(
      std::vector<float>(last.view.as<float>(), last.view.as<float>() + 4),
      want);
  OwnedTensor rebuilt(DType::F32, {5, 6});
  for (int64_t rank = 0; rank < 8; ++rank)
    placeLocalPiece(takeLocalPiece(global.view, layout, mesh, rank).view,
                    rebuilt.view, layout, mesh, rank);
  EXPECT_EQ(rebuilt.storage, global.storage);
}

TEST(MeshTest, PaddedPiecesRoundTrip) {
  // A [5, 3] tensor padded to [8, 3] (--tessera-pad) and split on dim 0
  // over dp = 4: ranks 0-1 hold two real rows, rank 2 one and a row of
  // zeros, rank 3 only zeros.
  Mesh mesh({"dp"}, {4});
  OwnedTensor global(DType::F32, {5, 3});
  for (int i = 0; i < 15; ++i)
    global.view.as<float>()[i] = i + 1;
  PieceLayout layout{{{"dp"}, {}}, {}, {8, 3}};
  OwnedTensor piece = takeLocalPiece(global.view, layout, mesh, /*rank=*/2);
  ASSERT_EQ(piece.view.shape, (std::vector<int64_t>{2, 3}));
  std::vector<float> want = {13, 14, 15, 0, 0, 0};
  EXPECT_EQ(
      std::vector<float>(piece.view.as<float>(), piece.view.as<float>() + 6),
      want);
  OwnedTensor last = takeLocalPiece(global.view, layout, mesh, /*rank=*/3);
  EXPECT_EQ(
      std::vector<float>(last.view.as<float>(), last.view.as<float>() + 6),
      std::vector<float>(6, 0));
  // Placing pieces back writes only the real rows.
  OwnedTensor rebuilt(DType::F32, {5, 3});
  for (int64_t rank = 0; rank < 4; ++rank)
    placeLocalPiece(takeLocalPiece(global.view, layout, mesh, rank).view,
                    rebuilt.view, layout, mesh, rank);
  EXPECT_EQ(rebuilt.storage, global.storage);
}

TEST(MeshTest, PaddedFlatPiecesRoundTrip) {
  // A [3, 5] tensor padded to [3, 6], split on dim 1 over tp = 2 (columns
  // 0-2 and 3-5, the last padding) and stored flat over dp = 2: each
  // [3, 3] piece's 9 elements, padded to 10, are 5 per dp rank.
  Mesh mesh({"dp", "tp"}, {2, 2});
  OwnedTensor global(DType::F32, {3, 5});
  for (int i = 0; i < 15; ++i)
    global.view.as<float>()[i] = i + 1;
  PieceLayout layout{{{}, {"tp"}}, {"dp"}, {3, 6}};
  // Rank 3 is dp=1, tp=1: elements 5-9 of the piece of columns 3-5, which
  // are (row 1, column 5), row 2 and the flat padding.
  OwnedTensor piece = takeLocalPiece(global.view, layout, mesh, /*rank=*/3);
  ASSERT_EQ(piece.view.shape, (std::vector<int64_t>{5}));
  std::vector<float> want = {0, 14, 15, 0, 0};
  EXPECT_EQ(
      std::vector<float>(piece.view.as<float>(), piece.view.as<float>() + 5),
      want);
  OwnedTensor rebuilt(DType::F32, {3, 5});
  for (int64_t rank = 0; rank < 4; ++rank)
    placeLocalPiece(takeLocalPiece(global.view, layout, mesh, rank).view,
                    rebuilt.view, layout, mesh, rank);
  EXPECT_EQ(rebuilt.storage, global.storage);
}

TEST(MeshTest, UnitMembersRoundTrip) {
  // A unit's flat buffer of a [2, 3] and a [2] member, stored flat over
  // dp = 3: the step's tensors are its members, by their index in the step;
  // a rank's share of 3 elements runs across both.
  plan::Argument unit;
  unit.set_name("fc");
  unit.set_dtype(plan::F32);
  unit.add_global_shape(8);
  std::vector<std::vector<int64_t>> shapes = {{2, 3}, {2}};
  for (size_t index = 0; index < shapes.size(); ++index) {
    plan::Member *member = unit.add_members();
    member->set_name(index ? "fc.b" : "fc.w");
    member->set_source_index(4 + index);
    for (int64_t size : shapes[index])
      member->add_global_shape(size);
  }
  auto tensors = getStepTensors(unit, 0);
  ASSERT_EQ(tensors.size(), 2u);
  EXPECT_EQ(tensors[1].first, 5);
  EXPECT_EQ(tensors[1].second.name(), "fc.b");
  EXPECT_EQ(tensors[1].second.global_shape_size(), 1);
  OwnedTensor w(DType::F32, {2, 3}), b(DType::F32, {2});
  for (int i = 0; i < 6; ++i)
    w.view.as<float>()[i] = i + 1;
  b.view.as<float>()[0] = 7;
  b.view.as<float>()[1] = 8;
  Mesh mesh({"dp"}, {3});
  OwnedTensor packed = packMembers(unit, {&w.view, &b.view}, mesh);
  PieceLayout layout{{{}}, {"dp"}};
  OwnedTensor piece = takeLocalPiece(packed.view, layout, mesh, /*rank=*/1);
  std::vector<float> want = {4, 5, 6};
  EXPECT_EQ(
      std::vector<float>(piece.view.as<float>(), piece.view.as<float>() + 3),
      want);
  OwnedTensor rebuilt(DType::F32, {8});
  for (int64_t rank = 0; rank < 3; ++rank)
    placeLocalPiece(takeLocalPiece(packed.view, layout, mesh, rank).view,
                    rebuilt.view, layout, mesh, rank);
  Expected<std::vector<OwnedTensor>> unpacked =
      unpackMembers(unit, rebuilt.view, mesh);
  ASSERT_TRUE(unpacked.ok()) << unpacked.message();
  std::vector<OwnedTensor> members = unpacked.take();
  ASSERT_EQ(members.size(), 2u);
  EXPECT_EQ(members[0].storage, w.storage);
  EXPECT_EQ(members[1].storage, b.storage);
}

TEST(MeshTest, UnitRowsRoundTrip) {
  // A unit's buffer of a row per TP device (tp = 2): a [2, 4] member split
  // on dim 1 and a [4] one split on dim 0; row r holds their r-th pieces.
  plan::Argument unit;
  unit.set_name("fc");
  unit.set_dtype(plan::F32);
  unit.add_global_shape(2);
  unit.add_global_shape(6);
  unit.add_dim_axes()->add_axes("tp");
  unit.add_dim_axes();
  std::vector<std::vector<int64_t>> shapes = {{2, 4}, {4}};
  for (size_t index = 0; index < shapes.size(); ++index) {
    plan::Member *member = unit.add_members();
    member->set_name(index ? "fc.b" : "fc.w");
    for (size_t d = 0; d < shapes[index].size(); ++d) {
      member->add_global_shape(shapes[index][d]);
      plan::DimAxes *axes = member->add_dim_axes();
      if (d + 1 == shapes[index].size())
        axes->add_axes("tp");
    }
  }
  OwnedTensor w(DType::F32, {2, 4}), b(DType::F32, {4});
  for (int i = 0; i < 8; ++i)
    w.view.as<float>()[i] = i + 1;
  for (int i = 0; i < 4; ++i)
    b.view.as<float>()[i] = 10 + i;
  Mesh mesh({"tp"}, {2});
  OwnedTensor packed = packMembers(unit, {&w.view, &b.view}, mesh);
  ASSERT_EQ(packed.view.shape, (std::vector<int64_t>{2, 6}));
  // Row 1: columns 2-3 of w, then elements 2-3 of b.
  std::vector<float> want = {3, 4, 7, 8, 12, 13};
  EXPECT_EQ(std::vector<float>(packed.view.as<float>() + 6,
                               packed.view.as<float>() + 12),
            want);
  Expected<std::vector<OwnedTensor>> unpacked =
      unpackMembers(unit, packed.view, mesh);
  ASSERT_TRUE(unpacked.ok()) << unpacked.message();
  std::vector<OwnedTensor> members = unpacked.take();
  ASSERT_EQ(members.size(), 2u);
  EXPECT_EQ(members[0].storage, w.storage);
  EXPECT_EQ(members[1].storage, b.storage);
  // A layout (a damaged checkpoint's) whose members do not fit the buffer
  // is refused before anything is allocated or read past it.
  unit.mutable_members(1)->set_global_shape(0, 400);
  EXPECT_EQ(unpackMembers(unit, packed.view, mesh).message(),
            "unit member 'fc.b' does not fit its flat buffer of 12 elements");
  unit.mutable_members(1)->set_global_shape(0, 4);
  unit.mutable_members(0)->mutable_dim_axes(1)->clear_axes();
  EXPECT_EQ(unpackMembers(unit, packed.view, mesh).message(),
            "the pieces of unit member 'fc.w' run past its flat buffer");
}

} // namespace

namespace {

/// A valid two-stage plan on a ["pp"=2] mesh: rank 0's program relus x
/// [4, 8] and sends it (started on stream 1, waited for), rank 1's receives
/// it and returns it.
plan::Plan makePipelinePlan() {
  plan::Plan plan;
  plan.set_format_version(plan::PLAN_FORMAT_VERSION);
  auto *axis = plan.mutable_mesh()->add_axes();
  axis->set_name("pp");
  axis->set_size(2);
  auto addTransfer = [](plan::Program *program, bool isSend, int64_t buffer,
                        int64_t peer) {
    plan::Instruction *instruction = program->add_instructions();
    plan::SendRecv *transfer = instruction->mutable_send_recv();
    transfer->set_is_send(isSend);
    transfer->set_buffer(buffer);
    transfer->set_mesh_axis("pp");
    transfer->set_peer(peer);
    transfer->set_tag(3);
    return instruction;
  };

  plan::Program *first = plan.add_programs();
  first->add_ranks(0);
  addBuffer(first, {4, 8}, 0);
  addBuffer(first, {4, 8}, 128);
  first->set_arena_bytes(256);
  addReplicatedArgument(first, 0, {4, 8});
  plan::Instruction *relu = first->add_instructions();
  relu->mutable_kernel()->set_op("nn.relu");
  relu->mutable_kernel()->add_inputs(0);
  relu->mutable_kernel()->add_outputs(1);
  relu->add_frees(0);
  plan::Instruction *send = addTransfer(first, true, 1, 1);
  send->set_stream(1);
  send->add_signal_events(0);
  plan::Instruction *wait = first->add_instructions();
  wait->add_wait_events(0);
  wait->add_frees(1);

  plan::Program *second = plan.add_programs();
  second->add_ranks(1);
  addBuffer(second, {4, 8}, 0);
  second->set_arena_bytes(128);
  addTransfer(second, false, 0, 0);
  plan::Result *result = second->add_results();
  result->set_buffer(0);
  result->add_global_shape(4);
  result->add_global_shape(8);
  result->add_dim_axes();
  result->add_dim_axes();
  return plan;
}

} // namespace

TEST(PlanTest, APipelinePlanValidates) {
  EXPECT_EQ(getValidationError(makePipelinePlan()), "");
}

TEST(PlanTest, RejectsASendWithoutItsReceive) {
  plan::Plan plan = makePipelinePlan();
  plan.mutable_programs(1)
      ->mutable_instructions(0)
      ->mutable_send_recv()
      ->set_tag(4);
  EXPECT_EQ(getValidationError(plan),
            "the send with tag 3 from rank 0 to rank 1 "
            "has no matching receive");
}

TEST(PlanTest, RejectsReceivesOutOfTheOrderOfTheSends) {
  // Rank 0 sends tag 5, then tag 3; rank 1 receives tag 3, then tag 5.
  // MPI would match them by tag; NCCL matches by order.
  plan::Plan plan = makePipelinePlan();
  plan::Program *first = plan.mutable_programs(0);
  plan::Instruction *early = first->mutable_instructions()->Add();
  *early = first->instructions(1);
  early->set_stream(0);
  early->clear_signal_events();
  early->mutable_send_recv()->set_tag(5);
  // Move it before the started send (index 1).
  for (int i = first->instructions_size() - 1; i > 1; --i)
    first->mutable_instructions()->SwapElements(i, i - 1);
  plan::Program *second = plan.mutable_programs(1);
  addBuffer(second, {4, 8}, 128);
  second->set_arena_bytes(256);
  plan::Instruction *late = second->add_instructions();
  *late = second->instructions(0);
  late->mutable_send_recv()->set_buffer(1);
  late->mutable_send_recv()->set_tag(5);
  EXPECT_EQ(getValidationError(plan),
            "rank 1 receives tags [3, 5] from rank 0, which sends [5, 3]: "
            "receives must come in the order of the sends");
  EXPECT_EQ(getTransferChannels(plan),
            (std::vector<std::pair<int64_t, int64_t>>{{0, 1}}));
}

TEST(PlanTest, RejectsATransferOfAnotherShape) {
  plan::Plan plan = makePipelinePlan();
  plan.mutable_programs(1)->mutable_buffers(0)->set_shape(1, 4);
  plan.mutable_programs(1)->mutable_results(0)->set_global_shape(1, 4);
  EXPECT_EQ(getValidationError(plan),
            "the send with tag 3 from rank 0 to rank 1 "
            "and its match differ in dtype or shape");
}

TEST(PlanTest, RejectsATransferToAnUnknownAxisOrItself) {
  plan::Plan plan = makePipelinePlan();
  plan.mutable_programs(0)
      ->mutable_instructions(1)
      ->mutable_send_recv()
      ->set_mesh_axis("stage");
  EXPECT_EQ(getValidationError(plan), "program 0: instruction 1: send names "
                                      "unknown mesh axis \"stage\"");
  plan = makePipelinePlan();
  plan.mutable_programs(0)
      ->mutable_instructions(1)
      ->mutable_send_recv()
      ->set_peer(0);
  EXPECT_EQ(getValidationError(plan),
            "program 0: instruction 1: send on rank 0 names itself");
  plan = makePipelinePlan();
  plan.mutable_programs(0)
      ->mutable_instructions(1)
      ->mutable_send_recv()
      ->set_peer(2);
  EXPECT_EQ(getValidationError(plan),
            "program 0: instruction 1: send peer 2 is "
            "not a coordinate of axis \"pp\" (size 2)");
}

TEST(PlanTest, RejectsAReceiveOnTheCommunicationStream) {
  plan::Plan plan = makePipelinePlan();
  plan::Instruction *recv = plan.mutable_programs(1)->mutable_instructions(0);
  recv->set_stream(1);
  recv->add_signal_events(0);
  EXPECT_EQ(getValidationError(plan),
            "program 1: instruction 0 (recv): only a collective or a send may "
            "run on a stream other than 0, and it signals one event");
}

TEST(PlanTest, RejectsFreeingABufferWhileItIsSent) {
  plan::Plan plan = makePipelinePlan();
  plan::Program *first = plan.mutable_programs(0);
  first->mutable_instructions(2)->clear_frees();
  first->mutable_instructions(1)->add_frees(1);
  EXPECT_EQ(getValidationError(plan),
            "program 0: instruction 1 (send) frees buffer 1 while the "
            "collective of event 0 uses it");
}

TEST(PlanTest, RejectsStagesThatDisagreeOnAnArgument) {
  plan::Plan plan = makePipelinePlan();
  plan.mutable_programs(0)->mutable_arguments(0)->set_source_index(0);
  // Rank 1's program also reads argument 0 of the step, as token ids.
  plan::Program *second = plan.mutable_programs(1);
  addBuffer(second, {4, 8}, 128);
  second->set_arena_bytes(256);
  plan::Argument *argument = second->add_arguments();
  *argument = plan.programs(0).arguments(0);
  argument->set_buffer(1);
  EXPECT_EQ(getValidationError(plan), "");
  argument->set_index_bound(256);
  EXPECT_EQ(getValidationError(plan),
            "program 1: argument 'arg0' (source index 0) differs from "
            "another program's in name, role, dtype, global shape or index "
            "bound");
}

//===----------------------------------------------------------------------===//
// The collective manifest
//===----------------------------------------------------------------------===//

/// Adds to each program of the pipeline plan an all_reduce over "pp" (a
/// group whose members run different programs) into a new [4, 8] buffer:
/// of rank 0's relu, after its send starts, and of rank 1's receive.
void addStageAllReduces(plan::Plan &plan, plan::ReductionKind second) {
  for (int index : {0, 1}) {
    plan::Program *program = plan.mutable_programs(index);
    int64_t input = index == 0 ? 1 : 0;
    int64_t output = program->buffers_size();
    addBuffer(program, {4, 8}, program->arena_bytes());
    program->set_arena_bytes(program->arena_bytes() + 128);
    plan::Instruction reduce;
    plan::Collective *collective = reduce.mutable_collective();
    collective->set_kind(plan::ALL_REDUCE);
    collective->add_mesh_axes("pp");
    collective->set_reduction(index == 0 ? plan::SUM : second);
    collective->set_input(input);
    collective->set_output(output);
    auto *instructions = program->mutable_instructions();
    *instructions->Add() = reduce;
    for (int i = instructions->size() - 1; i > 2 - index; --i)
      instructions->SwapElements(i, i - 1);
  }
}

TEST(PlanTest, ACollectiveOverStagesValidatesWhenTheyAgree) {
  plan::Plan plan = makePipelinePlan();
  addStageAllReduces(plan, plan::SUM);
  EXPECT_EQ(getValidationError(plan), "");
}

TEST(PlanTest, RejectsACollectiveTheGroupsMembersIssueDifferently) {
  // Rank 0 sums, rank 1 takes the maximum: one MPI_Allreduce call each,
  // which MPI pairs and which then computes nonsense or hangs.
  plan::Plan plan = makePipelinePlan();
  addStageAllReduces(plan, plan::MAX);
  EXPECT_EQ(getValidationError(plan),
            "collective 0 over (pp) differs between members of one group, "
            "which would hang: rank 0 (program 0, instruction 2: all_reduce "
            "sum f32[4, 8] -> f32[4, 8] over (pp)) against rank 1 (program "
            "1, instruction 1: all_reduce max f32[4, 8] -> f32[4, 8] over "
            "(pp))");
}

TEST(PlanTest, RejectsACollectiveOneMemberNeverIssues) {
  // Rank 0 waits in the all_reduce for rank 1, which ends without it.
  plan::Plan plan = makePipelinePlan();
  addStageAllReduces(plan, plan::SUM);
  plan.mutable_programs(1)->mutable_instructions()->DeleteSubrange(1, 1);
  EXPECT_EQ(getValidationError(plan),
            "the ranks' communication deadlocks, each waiting for another: "
            "rank 0 (program 0, instruction 2: all_reduce sum f32[4, 8] -> "
            "f32[4, 8] over (pp))");
  // Started, and waited for with the send.
  plan::Instruction *reduce = plan.mutable_programs(0)->mutable_instructions(2);
  reduce->set_stream(1);
  reduce->add_signal_events(1);
  plan.mutable_programs(0)->mutable_instructions(3)->add_wait_events(1);
  EXPECT_EQ(getValidationError(plan),
            "the ranks' communication deadlocks, each waiting for another: "
            "rank 0 (program 0, instruction 3: waits for all_reduce sum "
            "f32[4, 8] -> f32[4, 8] over (pp))");
}

TEST(PlanTest, RejectsTransfersThatWaitForEachOther) {
  // Each stage receives from the other before it sends: each blocks in its
  // receive forever, though every send has its receive in order.
  plan::Plan plan = makePipelinePlan();
  plan::Program *first = plan.mutable_programs(0);
  plan::Program *second = plan.mutable_programs(1);
  addBuffer(first, {4, 8}, 256);
  first->set_arena_bytes(384);
  plan::Instruction *receive = first->mutable_instructions()->Add();
  *receive = second->instructions(0);
  receive->mutable_send_recv()->set_buffer(2);
  receive->mutable_send_recv()->set_peer(1);
  receive->mutable_send_recv()->set_tag(4);
  for (int i = first->instructions_size() - 1; i > 0; --i)
    first->mutable_instructions()->SwapElements(i, i - 1);
  addBuffer(second, {4, 8}, 128);
  second->set_arena_bytes(256);
  plan::Instruction *send = second->add_instructions();
  send->mutable_send_recv()->set_is_send(true);
  send->mutable_send_recv()->set_buffer(0);
  send->mutable_send_recv()->set_mesh_axis("pp");
  send->mutable_send_recv()->set_peer(0);
  send->mutable_send_recv()->set_tag(4);
  EXPECT_EQ(getValidationError(plan),
            "the ranks' communication deadlocks, each waiting for another: "
            "rank 0 (program 0, instruction 0: receive f32[4, 8] from pp=1 "
            "tag 4); rank 1 (program 1, instruction 0: receive f32[4, 8] "
            "from pp=0 tag 3)");
  // Rank 0 receiving after its send breaks the cycle.
  for (int i = 0; i + 1 < first->instructions_size(); ++i)
    first->mutable_instructions()->SwapElements(i, i + 1);
  EXPECT_EQ(getValidationError(plan), "");
}

//===----------------------------------------------------------------------===//
// Kernels at load
//===----------------------------------------------------------------------===//

namespace {

TEST(PlanTest, RejectsAnUnknownKernel) {
  plan::Plan plan = makePlan();
  plan.mutable_programs(0)->mutable_instructions(0)->mutable_kernel()->set_op(
      "nn.frobnicate");
  EXPECT_EQ(getValidationError(plan),
            "program 0: instruction 0: unknown kernel 'nn.frobnicate'");
}

TEST(PlanTest, RejectsAKernelMissingAnAttribute) {
  // The plan carries every attribute, defaults included: the runtime has no
  // defaults to fall back on.
  plan::Plan plan = makePlan();
  plan.mutable_programs(0)->mutable_instructions(0)->mutable_kernel()->set_op(
      "nn.softmax");
  EXPECT_EQ(getValidationError(plan),
            "program 0: instruction 0 (nn.softmax): "
            "nn.softmax: missing integer attribute 'dim'");
  auto &attrs = *plan.mutable_programs(0)
                     ->mutable_instructions(0)
                     ->mutable_kernel()
                     ->mutable_attrs();
  attrs["dim"].set_i(1);
  EXPECT_EQ(getValidationError(plan),
            "program 0: instruction 0 (nn.softmax): "
            "nn.softmax: missing float attribute 'scale'");
  attrs["scale"].set_f(1.0);
  attrs["causal"].set_i(0);
  EXPECT_EQ(getValidationError(plan), "");
}

TEST(PlanTest, RejectsAKernelWhoseShapesDoNotFit) {
  plan::Plan plan = makePlan();
  plan.mutable_programs(0)->mutable_buffers(1)->set_shape(1, 4);
  EXPECT_EQ(
      getValidationError(plan).rfind("program 0: instruction 0 (nn.relu): "
                                     "nn.relu: expects result of shape",
                                     0),
      0u);
}

TEST(ExecutorTest, FindsEveryKernelWhenItLoads) {
  plan::Plan plan = makePlan();
  Mesh mesh = getMesh(plan);
  std::unique_ptr<Communicator> local = createLocalCommunicator();
  {
    Executor executor(plan.programs(0), mesh, *local);
    EXPECT_TRUE(executor.getLoadStatus().ok());
  }
  // An unvalidated program with an op no device knows fails at load, before
  // any argument is looked at, and every run says so.
  plan.mutable_programs(0)->mutable_instructions(0)->mutable_kernel()->set_op(
      "nn.frobnicate");
  Executor executor(plan.programs(0), mesh, *local);
  EXPECT_EQ(executor.getLoadStatus().getCode(), StatusCode::InvalidPlan);
  EXPECT_EQ(executor.getLoadStatus().message(),
            "instruction 0: unknown kernel 'nn.frobnicate'");
  std::vector<OwnedTensor> results;
  Status status = executor.run({}, results);
  EXPECT_EQ(status.getCode(), StatusCode::InvalidPlan);
  EXPECT_EQ(status.message(), "instruction 0: unknown kernel 'nn.frobnicate'");
}

TEST(LoadPlanTest, FailsOnAMissingFile) {
  std::string path = ::testing::TempDir() + "tessera-plan-test-missing.plan";
  Expected<plan::Plan> loaded = loadPlan(path);
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.getStatus().getCode(), StatusCode::DataError);
  EXPECT_EQ(loaded.message(), "cannot open plan '" + path + "'");
}

TEST(LoadPlanTest, FailsOnAFileThatIsNotAPlan) {
  std::string path =
      writeFile("tessera-plan-test-garbage.plan", "\xff\xff\xff");
  Expected<plan::Plan> loaded = loadPlan(path);
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.getStatus().getCode(), StatusCode::DataError);
  EXPECT_EQ(loaded.message(),
            "'" + path + "' is not a Tessera plan (it does not parse)");
}

TEST(LoadPlanTest, NamesTheFileOfAnInvalidPlan) {
  plan::Plan plan = makePlan();
  plan.set_format_version(plan::PLAN_FORMAT_VERSION_UNSPECIFIED);
  std::string path =
      writeFile("tessera-plan-test-old.plan", plan.SerializeAsString());
  Expected<plan::Plan> loaded = loadPlan(path);
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.getStatus().getCode(), StatusCode::InvalidPlan);
  EXPECT_EQ(loaded.message(),
            "invalid plan '" + path +
                "': format version 0 is not this runtime's 1");
}

TEST(LoadPlanTest, LoadsAValidPlan) {
  std::string path =
      writeFile("tessera-plan-test-good.plan", makePlan().SerializeAsString());
  Expected<plan::Plan> loaded = loadPlan(path);
  ASSERT_TRUE(loaded.ok()) << loaded.message();
  EXPECT_EQ(loaded->programs(0).instructions_size(), 2);
}

TEST(LoadPlanTest, ChecksAPlansChecksum) {
  plan::Plan plan = makePlan();
  plan.set_checksum(plan::computeChecksum(plan));
  ASSERT_NE(plan.checksum(), 0u);
  std::string path =
      writeFile("tessera-plan-test-sum.plan", plan.SerializeAsString());
  EXPECT_TRUE(loadPlan(path).ok());
  // A change no structural check sees.
  plan.set_source_model("other");
  path = writeFile("tessera-plan-test-sum-bad.plan", plan.SerializeAsString());
  Expected<plan::Plan> damaged = loadPlan(path);
  ASSERT_FALSE(damaged.ok());
  EXPECT_NE(damaged.message().find("is damaged: its checksum says"),
            std::string::npos)
      << damaged.message();
}

} // namespace

namespace {

/// A valid one-rank program with a schedule of two microbatches: x [4, 8]
/// holds both; unit F0 relus its microbatch's rows (a view of x) into a
/// value unit B0 reads, so it lives in the entry's slot (two, as both
/// microbatches are held between F0 and B0); B0 accumulates it. The result
/// is relu(x[0:2]) + relu(x[2:4]).
plan::Plan makeScheduledPlan() {
  plan::Plan plan = makeOneDevicePlan();
  plan::Program *program = plan.mutable_programs(0);
  program->set_microbatches(2);
  addBuffer(program, {4, 8}, 0);
  addBuffer(program, {2, 8}, 0);
  program->mutable_buffers(1)->set_view_of(0);
  program->mutable_buffers(1)->set_microbatch_stride_bytes(64);
  addBuffer(program, {2, 8}, 128);
  program->mutable_buffers(2)->set_slots(2);
  program->mutable_buffers(2)->set_slot_stride_bytes(64);
  addBuffer(program, {2, 8}, 256);
  program->set_arena_bytes(320);
  addReplicatedArgument(program, 0, {4, 8});
  plan::Instruction *relu = program->add_instructions();
  relu->mutable_kernel()->set_op("nn.relu");
  relu->mutable_kernel()->add_inputs(1);
  relu->mutable_kernel()->add_outputs(2);
  plan::Instruction *accumulate = program->add_instructions();
  accumulate->mutable_accumulate()->set_input(2);
  accumulate->mutable_accumulate()->set_accumulator(3);
  for (auto [name, begin] : {std::pair{"F0", 0}, {"B0", 1}}) {
    plan::Unit *unit = program->add_units();
    unit->set_name(name);
    unit->set_begin(begin);
    unit->set_end(begin + 1);
  }
  for (auto [unit, microbatch] : {std::pair{0, 0}, {0, 1}, {1, 0}, {1, 1}}) {
    plan::ScheduleEntry *entry = program->add_schedule();
    entry->set_unit(unit);
    entry->set_microbatch(microbatch);
    entry->set_slot(microbatch);
  }
  addReplicatedResult(program, 3, {2, 8});
  return plan;
}

} // namespace

TEST(PlanTest, AScheduledPlanValidatesAndRunsEachUnitPerMicrobatch) {
  plan::Plan plan = makeScheduledPlan();
  ASSERT_EQ(getValidationError(plan), "");
  Mesh mesh = getMesh(plan);
  std::unique_ptr<Communicator> local = createLocalCommunicator();
  Executor executor(plan.programs(0), mesh, *local);
  std::vector<OwnedTensor> arguments;
  arguments.emplace_back(DType::F32, std::vector<int64_t>{4, 8});
  float *x = arguments[0].view.as<float>();
  for (int i = 0; i < 32; ++i)
    x[i] = static_cast<float>(i % 7) - 3.0f;
  std::vector<OwnedTensor> results;
  for (int step = 0; step < 2; ++step) {
    ASSERT_TRUE(executor.run(arguments, results).ok());
    const float *sum = results[0].view.as<float>();
    for (int i = 0; i < 16; ++i)
      EXPECT_EQ(sum[i], std::max(x[i], 0.0f) + std::max(x[16 + i], 0.0f))
          << "step " << step << ", element " << i;
  }
}

/// makeScheduledPlan without a flush: microbatch 1's B0 runs in the next
/// run (F0.0, then the step before's B0.1, F0.1, B0.0). The sum has a copy
/// per step; a deferred part (after the units) relus the step before's sum
/// into the result.
plan::Plan makeSteadyPlan() {
  plan::Plan plan = makeScheduledPlan();
  plan::Program *program = plan.mutable_programs(0);
  program->set_steady(true);
  program->clear_schedule();
  for (auto [unit, microbatch, offset] :
       {std::tuple{0, 0, 0}, {1, 1, -1}, {0, 1, 0}, {1, 0, 0}}) {
    plan::ScheduleEntry *entry = program->add_schedule();
    entry->set_unit(unit);
    entry->set_microbatch(microbatch);
    entry->set_slot(microbatch);
    entry->set_step_offset(offset);
  }
  program->mutable_buffers(3)->set_step_slots(2);
  program->mutable_buffers(3)->set_step_slot_stride_bytes(64);
  addBuffer(program, {2, 8}, 384);
  program->set_arena_bytes(448);
  plan::Instruction *relu = program->add_instructions();
  relu->mutable_kernel()->set_op("nn.relu");
  relu->mutable_kernel()->add_inputs(3);
  relu->mutable_kernel()->add_outputs(4);
  program->set_deferred_begin(2);
  program->set_deferred_end(3);
  program->mutable_results(0)->set_buffer(4);
  return plan;
}

TEST(PlanTest, ASteadyPlanFinishesEachStepInTheNextRun) {
  plan::Plan plan = makeSteadyPlan();
  ASSERT_EQ(getValidationError(plan), "");
  Mesh mesh = getMesh(plan);
  std::unique_ptr<Communicator> local = createLocalCommunicator();
  Executor executor(plan.programs(0), mesh, *local);
  EXPECT_TRUE(executor.hasDeferredWork());
  std::vector<OwnedTensor> arguments;
  arguments.emplace_back(DType::F32, std::vector<int64_t>{4, 8});
  float *x = arguments[0].view.as<float>();
  auto relu = [](float v) { return std::max(v, 0.0f); };
  std::vector<float> first(32), second(32);
  for (int i = 0; i < 32; ++i) {
    first[i] = static_cast<float>(i % 7) - 3.0f;
    second[i] = static_cast<float>(i % 5) - 1.0f;
  }
  std::vector<OwnedTensor> results;
  // The first run has no step before: no result.
  std::copy(first.begin(), first.end(), x);
  ASSERT_TRUE(executor.run(arguments, results).ok());
  EXPECT_EQ(results[0].view.data, nullptr);
  // The second finishes the first step (its microbatch 1 kept in its slot)
  // and returns its sum.
  std::copy(second.begin(), second.end(), x);
  ASSERT_TRUE(executor.run(arguments, results).ok());
  for (int i = 0; i < 16; ++i)
    EXPECT_EQ(results[0].view.as<float>()[i],
              relu(first[i]) + relu(first[16 + i]));
  // The drain finishes the second.
  ASSERT_TRUE(executor.drain(results).ok());
  for (int i = 0; i < 16; ++i)
    EXPECT_EQ(results[0].view.as<float>()[i],
              relu(second[i]) + relu(second[16 + i]));
}

/// A steady plan that lags two steps, as PipeDream's first rank of three:
/// F0 makes relu(x) into a ring of three copies by microbatch (one a step);
/// B0 runs two steps later (step offset -2) on its step's copy; the
/// deferred part then returns B0's output plus its step's x, read from x's
/// copy of that step (three step slots).
plan::Plan makeLaggingPlan() {
  plan::Plan plan = makeOneDevicePlan();
  plan::Program *program = plan.mutable_programs(0);
  program->set_microbatches(1);
  program->set_steady(true);
  addBuffer(program, {4, 8}, 0); // x, a copy per step
  program->mutable_buffers(0)->set_step_slots(3);
  program->mutable_buffers(0)->set_step_slot_stride_bytes(128);
  addBuffer(program, {4, 8}, 384); // relu(x), a ring by microbatch
  program->mutable_buffers(1)->set_slots(3);
  program->mutable_buffers(1)->set_slot_stride_bytes(128);
  program->mutable_buffers(1)->set_slot_by_microbatch(true);
  addBuffer(program, {4, 8}, 768); // B0's
  addBuffer(program, {4, 8}, 896); // the result
  program->set_arena_bytes(1024);
  addReplicatedArgument(program, 0, {4, 8});
  for (auto [input, output] : {std::pair{0, 1}, {1, 2}}) {
    plan::Instruction *relu = program->add_instructions();
    relu->mutable_kernel()->set_op("nn.relu");
    relu->mutable_kernel()->add_inputs(input);
    relu->mutable_kernel()->add_outputs(output);
  }
  plan::Instruction *add = program->add_instructions();
  add->mutable_kernel()->set_op("nn.add");
  add->mutable_kernel()->add_inputs(2);
  add->mutable_kernel()->add_inputs(0);
  add->mutable_kernel()->add_outputs(3);
  for (auto [name, begin] : {std::pair{"F0", 0}, {"B0", 1}}) {
    plan::Unit *unit = program->add_units();
    unit->set_name(name);
    unit->set_begin(begin);
    unit->set_end(begin + 1);
  }
  for (auto [unit, offset] : {std::pair{0, 0}, {1, -2}}) {
    plan::ScheduleEntry *entry = program->add_schedule();
    entry->set_unit(unit);
    entry->set_step_offset(offset);
  }
  program->set_update_after_entry(1);
  program->set_deferred_begin(2);
  program->set_deferred_end(3);
  program->set_weight_delay(2);
  addReplicatedResult(program, 3, {4, 8});
  return plan;
}

TEST(PlanTest, ASteadyPlanLaggingTwoStepsDrainsInTwoRuns) {
  plan::Plan plan = makeLaggingPlan();
  ASSERT_EQ(getValidationError(plan), "");
  Mesh mesh = getMesh(plan);
  std::unique_ptr<Communicator> local = createLocalCommunicator();
  Executor executor(plan.programs(0), mesh, *local);
  EXPECT_EQ(executor.getLag(), 2);
  std::vector<OwnedTensor> arguments;
  arguments.emplace_back(DType::F32, std::vector<int64_t>{4, 8});
  auto input = [](int step, int i) {
    return static_cast<float>((i * (step + 3)) % 11) - 5.0f;
  };
  auto expected = [&](int step, int i) {
    return std::max(input(step, i), 0.0f) + input(step, i);
  };
  std::vector<OwnedTensor> results;
  for (int step = 0; step < 4; ++step) {
    for (int i = 0; i < 32; ++i)
      arguments[0].view.as<float>()[i] = input(step, i);
    ASSERT_TRUE(executor.run(arguments, results).ok());
    // The first two runs have no step two before: no result.
    if (step < 2) {
      EXPECT_EQ(results[0].view.data, nullptr);
      continue;
    }
    for (int i = 0; i < 32; ++i)
      EXPECT_EQ(results[0].view.as<float>()[i], expected(step - 2, i));
  }
  // The drain finishes steps 2 and 3.
  ASSERT_TRUE(executor.drain(results).ok());
  for (int i = 0; i < 32; ++i)
    EXPECT_EQ(results[0].view.as<float>()[i], expected(3, i));
  EXPECT_FALSE(executor.drain(results).ok());
}

TEST(PlanTest, RejectsStepsOutsideASteadyPlan) {
  auto errorOf = [](auto change) {
    plan::Plan plan = makeSteadyPlan();
    change(*plan.mutable_programs(0));
    return getValidationError(plan);
  };
  EXPECT_EQ(errorOf([](plan::Program &p) { p.set_steady(false); }),
            "program 0: buffer 3 has 2 step slots, expected them only on a "
            "steady program's buffer that is neither a view nor slotted, each "
            "at least its size apart");
  plan::Plan flushed = makeScheduledPlan();
  flushed.mutable_programs(0)->mutable_schedule(2)->set_step_offset(-1);
  EXPECT_EQ(getValidationError(flushed),
            "program 0: schedule entry 2 runs step offset -1, expected 0 (or "
            "from -1048576 to 0 in a steady program)");
  EXPECT_EQ(errorOf([](plan::Program &p) {
              p.mutable_schedule(1)->set_step_offset(1);
            }),
            "program 0: schedule entry 1 runs step offset 1, expected 0 (or "
            "from -1048576 to 0 in a steady program)");
  // PipeDream's rank r lags p - r - 1 steps: deeper offsets are valid.
  EXPECT_EQ(errorOf([](plan::Program &p) {
              p.mutable_schedule(1)->set_step_offset(-3);
              p.mutable_buffers(3)->set_step_slots(4);
              p.mutable_buffers(4)->set_arena_offset_bytes(512);
              p.set_arena_bytes(576);
            }),
            "");
  // A copy per step reached: two steps back need three.
  EXPECT_EQ(errorOf([](plan::Program &p) {
              p.mutable_schedule(1)->set_step_offset(-2);
            }),
            "program 0: buffer 3 has 2 step slots, but the program's runs "
            "reach back 2 steps");
  EXPECT_EQ(errorOf([](plan::Program &p) { p.set_weight_delay(-1); }),
            "program 0: the weights lag the step by -1 updates, expected 0 "
            "(or up to 1048576 in a steady program)");
  flushed.mutable_programs(0)->mutable_schedule(2)->set_step_offset(0);
  flushed.mutable_programs(0)->set_weight_delay(1);
  EXPECT_EQ(getValidationError(flushed),
            "program 0: the weights lag the step by 1 updates, expected 0 (or "
            "up to 1048576 in a steady program)");
  EXPECT_EQ(errorOf([](plan::Program &p) {
              p.set_deferred_begin(2);
              p.set_deferred_end(7);
            }),
            "program 0: the deferred instructions [2, 7) are not a range "
            "after the units of a steady program");
  EXPECT_EQ(errorOf([](plan::Program &p) { p.set_update_after_entry(4); }),
            "program 0: the updates run after schedule entry 4, expected an "
            "entry of a steady program");
  EXPECT_EQ(errorOf([](plan::Program &p) {
              p.mutable_buffers(2)->set_step_slots(2);
              p.mutable_buffers(2)->set_step_slot_stride_bytes(64);
            }),
            "program 0: buffer 2 has 2 step slots, expected them only on a "
            "steady program's buffer that is neither a view nor slotted, each "
            "at least its size apart");
}

TEST(PlanTest, RejectsABadSchedule) {
  auto errorOf = [](auto change) {
    plan::Plan plan = makeScheduledPlan();
    change(*plan.mutable_programs(0));
    return getValidationError(plan);
  };
  EXPECT_EQ(errorOf([](plan::Program &p) {
              p.mutable_schedule(3)->set_microbatch(0);
            }),
            "program 0: schedule entry 3 runs unit 'B0' on microbatch 0 a "
            "second time");
  EXPECT_EQ(
      errorOf([](plan::Program &p) { p.mutable_schedule()->RemoveLast(); }),
      "program 0: the schedule runs 3 units, expected each of 2 on each "
      "of 2 microbatches");
  // A plan-loader fuzzer finding: a huge microbatch count overflowed the
  // schedule's expected count (units times microbatches) and a microbatch
  // view's (its rows times microbatches).
  EXPECT_EQ(errorOf([](plan::Program &p) {
              p.set_microbatches(int64_t(1) << 62);
              p.mutable_buffers(1)->set_microbatch_stride_bytes(0);
            }),
            "program 0: the schedule runs 4 units, expected each of 2 on each "
            "of 4611686018427387904 microbatches");
  EXPECT_EQ(
      errorOf([](plan::Program &p) { p.set_microbatches(int64_t(1) << 62); }),
      "program 0: view buffer 1 differs from buffer 0 in dtype, size or "
      "arena offset");
  EXPECT_EQ(
      errorOf([](plan::Program &p) { p.mutable_schedule(1)->set_slot(2); }),
      "program 0: schedule entry 1 uses slot 2 of 2");
  EXPECT_EQ(errorOf([](plan::Program &p) { p.mutable_units(1)->set_begin(0); }),
            "program 0: unit 1 ('B0') spans instructions [0, 2), expected a "
            "range after the previous unit's");
  EXPECT_EQ(errorOf([](plan::Program &p) { p.mutable_units(1)->set_end(1); }),
            "program 0: instruction 1 accumulates outside the units");
  EXPECT_EQ(errorOf([](plan::Program &p) {
              p.mutable_buffers(2)->set_slot_stride_bytes(32);
            }),
            "program 0: buffer 2 has 2 slots 32 bytes apart, closer than its "
            "size");
  EXPECT_EQ(errorOf([](plan::Program &p) {
              p.mutable_buffers(1)->set_microbatch_stride_bytes(32);
            }),
            "program 0: view buffer 1 has a microbatch stride of 32 bytes, "
            "expected its size in a program of microbatches");
}

namespace {

/// makePlan with an axis_index over `groups` into a new buffer of `dtype`
/// and `size` elements, freed at once.
plan::Plan makeAxisIndexPlan(std::vector<std::vector<std::string>> groups,
                             plan::DType dtype, int64_t size) {
  plan::Plan plan = makePlan();
  plan::Program *program = plan.mutable_programs(0);
  addBuffer(program, {size}, 512);
  program->mutable_buffers(3)->set_dtype(dtype);
  program->set_arena_bytes(512 + 8 * size);
  plan::Instruction *index = program->add_instructions();
  for (const std::vector<std::string> &axes : groups) {
    plan::DimAxes *group = index->mutable_axis_index()->add_groups();
    for (const std::string &axis : axes)
      group->add_axes(axis);
  }
  index->mutable_axis_index()->set_output(3);
  index->add_frees(3);
  return plan;
}

} // namespace

TEST(PlanTest, AnAxisIndexValidates) {
  EXPECT_EQ(getValidationError(makeAxisIndexPlan({{"tp"}, {}}, plan::I64, 2)),
            "");
}

TEST(PlanTest, RejectsAnAxisIndexOverUnknownAxesOrIntoTheWrongBuffer) {
  EXPECT_EQ(getValidationError(makeAxisIndexPlan({{"dp"}}, plan::I64, 1)),
            "program 0: instruction 2: axis_index names unknown mesh axis "
            "\"dp\"");
  // Microbatches are an axis only of a program with units.
  EXPECT_EQ(getValidationError(makeAxisIndexPlan({{"mb"}}, plan::I64, 1)),
            "program 0: instruction 2: axis_index names unknown mesh axis "
            "\"mb\"");
  EXPECT_EQ(
      getValidationError(makeAxisIndexPlan({{"tp", "tp"}}, plan::I64, 1)),
      "program 0: instruction 2: axis_index names mesh axis \"tp\" twice in "
      "a group");
  EXPECT_EQ(getValidationError(makeAxisIndexPlan({{"tp"}}, plan::F32, 1)),
            "program 0: instruction 2: axis_index writes a buffer of 1 i64 "
            "elements, got [1] of F32");
  EXPECT_EQ(getValidationError(makeAxisIndexPlan({{"tp"}}, plan::I64, 2)),
            "program 0: instruction 2: axis_index writes a buffer of 1 i64 "
            "elements, got [2] of I64");
}

namespace {

/// A one-rank program whose result updates its argument x [4]: x + x,
/// written over x (an in-place update, as the memory plan places an
/// optimizer's) or, with `inPlace` false, elsewhere.
plan::Plan makeUpdatePlan(bool inPlace) {
  plan::Plan plan = makeOneDevicePlan();
  plan::Program *program = plan.mutable_programs(0);
  addBuffer(program, {4}, 0);
  addBuffer(program, {4}, inPlace ? 0 : 64);
  if (inPlace)
    program->mutable_buffers(1)->set_overwrites(0);
  program->set_arena_bytes(128);
  addReplicatedArgument(program, 0, {4});
  plan::Instruction *add = program->add_instructions();
  add->mutable_kernel()->set_op("nn.add");
  add->mutable_kernel()->add_inputs(0);
  add->mutable_kernel()->add_inputs(0);
  add->mutable_kernel()->add_outputs(1);
  add->add_frees(0);
  plan::Result *result = program->add_results();
  result->set_buffer(1);
  result->add_global_shape(4);
  result->add_dim_axes();
  result->set_updates_argument(0);
  return plan;
}

} // namespace

TEST(ExecutorTest, CarriesUpdatesWrittenInPlaceOrElsewhere) {
  // With carried updates, each run reads the last run's update of x, not
  // the caller's x: 2x, 4x, 8x, whether the update is written over x
  // (nothing is copied between runs) or elsewhere (it is kept aside).
  for (bool inPlace : {true, false}) {
    plan::Plan plan = makeUpdatePlan(inPlace);
    ASSERT_EQ(getValidationError(plan), "");
    Mesh mesh = getMesh(plan);
    std::unique_ptr<Communicator> local = createLocalCommunicator();
    Executor executor(plan.programs(0), mesh, *local);
    executor.setCarryUpdates(true);
    std::vector<OwnedTensor> arguments;
    arguments.emplace_back(DType::F32, std::vector<int64_t>{4});
    for (int i = 0; i < 4; ++i)
      arguments[0].view.as<float>()[i] = static_cast<float>(i) - 1.5f;
    std::vector<OwnedTensor> results;
    for (float factor : {2.0f, 4.0f, 8.0f}) {
      ASSERT_TRUE(executor.run(arguments, results).ok());
      for (int i = 0; i < 4; ++i)
        EXPECT_EQ(results[0].view.as<float>()[i],
                  factor * (static_cast<float>(i) - 1.5f))
            << (inPlace ? "in place" : "elsewhere") << ", element " << i;
    }
  }
}

TEST(PlanTest, ParsesConsistencies) {
  Consistency consistency;
  ASSERT_TRUE(parseConsistency("sync", consistency).ok());
  EXPECT_EQ(consistency.mode, plan::SYNC);
  ASSERT_TRUE(parseConsistency("async", consistency).ok());
  EXPECT_EQ(consistency.mode, plan::ASYNC);
  ASSERT_TRUE(parseConsistency("ssp=3", consistency).ok());
  EXPECT_EQ(consistency.mode, plan::SSP);
  EXPECT_EQ(consistency.staleness, 3);
  EXPECT_EQ(formatConsistency(consistency), "ssp=3");
  ASSERT_TRUE(parseConsistency("ssp=0", consistency).ok());
  EXPECT_EQ(consistency.staleness, 0);
  for (const char *bad : {"", "ssp", "ssp=", "ssp=-1", "ssp=2x", "Sync",
                          "ssp=99999999999999999999"}) {
    Status status = parseConsistency(bad, consistency);
    EXPECT_FALSE(status.ok()) << bad;
    EXPECT_NE(status.message().find("expects sync, async or ssp=K"),
              std::string::npos)
        << status.message();
  }
}

TEST(PlanTest, RejectsAParameterServerPlanWithoutServers) {
  // A plan whose servers' plan is missing (an empty plan) is refused with
  // the servers named.
  plan::Plan plan = makePlan();
  plan.mutable_parameter_server();
  Status status = validatePlan(plan);
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("the parameter servers' plan:"),
            std::string::npos)
      << status.message();
}

/// A valid parameter-server plan of one worker and one server: the worker
/// returns x · w as the gradient of its parameter "w" [4]; the server
/// subtracts the gradient from its piece of "w".
plan::Plan makeServerPlan() {
  auto addTensor = [](auto *message, const std::string &name,
                      plan::ArgumentRole role, int64_t buffer) {
    message->set_name(name);
    message->set_role(role);
    message->set_is_param(role == plan::PARAM);
    message->set_buffer(buffer);
    message->set_dtype(plan::F32);
    message->add_global_shape(4);
    message->add_dim_axes();
  };
  auto addKernel = [](plan::Program *program, const std::string &op, int64_t a,
                      int64_t b, int64_t out) {
    plan::Kernel *kernel = program->add_instructions()->mutable_kernel();
    kernel->set_op(op);
    kernel->add_inputs(a);
    kernel->add_inputs(b);
    kernel->add_outputs(out);
  };
  plan::Plan plan;
  plan.set_format_version(plan::PLAN_FORMAT_VERSION);
  plan::Program *worker = plan.add_programs();
  worker->add_ranks(0);
  for (int64_t offset : {0, 16, 32})
    addBuffer(worker, {4}, offset);
  worker->set_arena_bytes(64);
  addTensor(worker->add_arguments(), "w", plan::PARAM, 0);
  addTensor(worker->add_arguments(), "arg1", plan::DATA, 1);
  addKernel(worker, "nn.mul", 0, 1, 2);
  plan::Result *gradient = worker->add_results();
  gradient->set_buffer(2);
  gradient->add_global_shape(4);
  gradient->add_dim_axes();
  gradient->set_grad_of("w");

  plan::Plan *servers = plan.mutable_parameter_server()->mutable_servers();
  servers->set_format_version(plan::PLAN_FORMAT_VERSION);
  plan::Program *update = servers->add_programs();
  update->add_ranks(0);
  for (int64_t offset : {0, 16, 32})
    addBuffer(update, {4}, offset);
  update->set_arena_bytes(64);
  addTensor(update->add_arguments(), "w", plan::PARAM, 0);
  addTensor(update->add_arguments(), "w", plan::GRADIENT, 1);
  addKernel(update, "nn.sub", 0, 1, 2);
  plan::Result *updated = update->add_results();
  updated->set_buffer(2);
  updated->add_global_shape(4);
  updated->add_dim_axes();
  updated->set_updates_argument(0);
  return plan;
}

TEST(PlanTest, AParameterServerPlanValidates) {
  EXPECT_EQ(getValidationError(makeServerPlan()), "");
}

TEST(PlanTest, RejectsParameterServerPlansWhoseProgramsDisagree) {
  auto expectError = [](const plan::Plan &plan, const std::string &error) {
    std::string message = getValidationError(plan);
    EXPECT_NE(message.find(error), std::string::npos) << message;
  };
  plan::Plan plan = makeServerPlan();
  plan.mutable_parameter_server()->set_staleness(-1);
  expectError(plan, "the parameter servers' consistency is not one of sync, "
                    "async and ssp=K");

  plan = makeServerPlan();
  *plan.mutable_parameter_server()
       ->mutable_servers()
       ->mutable_parameter_server()
       ->mutable_servers() = makeServerPlan().parameter_server().servers();
  expectError(plan, "the parameter servers' plan has servers of its own");

  // Workers and servers exchange nothing but pushes and pulls.
  plan = makeServerPlan();
  auto *axis = plan.mutable_mesh()->add_axes();
  axis->set_name("dp");
  axis->set_size(1);
  addBuffer(plan.mutable_programs(0), {4}, 48);
  plan::Collective *collective =
      plan.mutable_programs(0)->add_instructions()->mutable_collective();
  collective->set_kind(plan::ALL_REDUCE);
  collective->add_mesh_axes("dp");
  collective->set_reduction(plan::SUM);
  collective->set_input(2);
  collective->set_output(3);
  expectError(plan, "the parameter-server plan's workers' program holds a "
                    "collective or transfer");

  plan = makeServerPlan();
  plan.mutable_programs(0)->mutable_arguments(1)->set_role(
      plan::OPTIMIZER_STATE);
  expectError(plan, "the workers' argument 'arg1' is optimizer state, which "
                    "the servers hold");

  plan = makeServerPlan();
  plan.mutable_parameter_server()
      ->mutable_servers()
      ->mutable_programs(0)
      ->mutable_arguments(1)
      ->set_role(plan::DATA);
  expectError(plan, "the servers' argument 'w' is data, which only the "
                    "workers read");

  plan = makeServerPlan();
  plan.mutable_parameter_server()
      ->mutable_servers()
      ->mutable_programs(0)
      ->mutable_arguments(0)
      ->set_name("v");
  expectError(plan, "the servers' parameter 'v' is no parameter of the "
                    "workers of its dtype and shape");

  plan = makeServerPlan();
  plan.mutable_programs(0)->mutable_results(0)->set_grad_of("v");
  expectError(plan, "the servers' gradient of 'w' is no gradient the workers "
                    "return of its dtype and shape");

  // A gradient of no parameter (here, a second one of the data).
  plan = makeServerPlan();
  *plan.mutable_programs(0)->add_results() = plan.programs(0).results(0);
  plan.mutable_programs(0)->mutable_results(1)->set_grad_of("arg1");
  expectError(plan, "the workers' gradient of 'arg1' is of no parameter of "
                    "its shape");

  // A parameter no server holds.
  plan = makeServerPlan();
  plan.mutable_programs(0)->mutable_arguments(1)->set_role(plan::PARAM);
  expectError(plan, "the workers' parameter 'arg1' is on no server");
}
