//===- HostMemoryTest.cpp - A plan too big for host memory, refused -------===//
//
// Every plan here is only described: its sizes are added up and compared
// with a limit, and nothing of them is allocated.
//
//===----------------------------------------------------------------------===//

#include "tessera/runtime/HostMemory.h"
#include "tessera/runtime/Tensor.h"

#include <gtest/gtest.h>

using namespace tessera;
using namespace tessera::runtime;

namespace {

constexpr int64_t kHugeBytes = int64_t(1) << 50;

/// A limit of 1 GiB, named so that the messages can be checked.
HostMemoryLimit getTestLimit() { return {uint64_t(1) << 30, "a test limit"}; }

/// Adds an f32 buffer of `shape` named `name` at offset 0 of the arena.
int64_t addBuffer(plan::Program &program, std::vector<int64_t> shape,
                  const std::string &name) {
  plan::Buffer *buffer = program.add_buffers();
  buffer->set_id(program.buffers_size() - 1);
  buffer->set_dtype(plan::F32);
  buffer->set_debug_name(name);
  for (int64_t size : shape)
    buffer->add_shape(size);
  return buffer->id();
}

/// Adds an f32 argument `name` of `globalShape` held in `buffer`.
void addArgument(plan::Program &program, const std::string &name,
                 int64_t buffer, std::vector<int64_t> globalShape) {
  plan::Argument *argument = program.add_arguments();
  argument->set_name(name);
  argument->set_buffer(buffer);
  argument->set_dtype(plan::F32);
  for (int64_t size : globalShape)
    argument->add_global_shape(size);
}

/// A program whose arena holds one f32 buffer "huge" of 2^50 bytes.
plan::Program getHugeArenaProgram() {
  plan::Program program;
  addBuffer(program, {kHugeBytes / 4}, "huge");
  addBuffer(program, {4}, "small");
  program.set_arena_bytes(kHugeBytes + 16);
  return program;
}

TEST(HostMemoryTest, RefusesAnArenaLargerThanTheLimit) {
  Status status =
      checkHostMemory(getHugeArenaProgram(), HostMemoryUse(), getTestLimit());
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.getCode(), StatusCode::Device);
  const std::string &message = status.message();
  EXPECT_NE(message.find("running the program needs"), std::string::npos)
      << message;
  EXPECT_NE(message.find("of a test limit"), std::string::npos) << message;
  EXPECT_NE(message.find("the largest is the arena (its largest buffer "
                         "'huge' holds 1125899906842624 bytes"),
            std::string::npos)
      << message;
  // The arena with the executor's 64 bytes of slack.
  EXPECT_NE(message.find("1125899906842704 bytes"), std::string::npos)
      << message;
}

TEST(HostMemoryTest, RefusesAnArenaLargerThanThisMachine) {
  // 2^50 bytes is more than any machine this runs on has.
  Status status = checkHostMemory(getHugeArenaProgram(), HostMemoryUse());
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("'huge'"), std::string::npos)
      << status.message();
}

TEST(HostMemoryTest, LeavesADeviceArenaToTheDevice) {
  HostMemoryUse onDevice;
  onDevice.arenaOnHost = false;
  EXPECT_TRUE(
      checkHostMemory(getHugeArenaProgram(), onDevice, getTestLimit()).ok());
}

TEST(HostMemoryTest, NamesTheLargestGlobalValue) {
  // A small local piece of a 2^42-byte global tensor, which the run would
  // make whole before cutting the piece.
  plan::Program program;
  int64_t piece = addBuffer(program, {16}, "wte.piece");
  addArgument(program, "wte", piece, {int64_t(1) << 20, int64_t(1) << 20});
  addArgument(program, "bias", addBuffer(program, {16}, "bias"), {16});
  program.set_arena_bytes(128);
  Status status = checkHostMemory(program, HostMemoryUse(), getTestLimit());
  ASSERT_FALSE(status.ok());
  const std::string &message = status.message();
  EXPECT_NE(message.find("making the program's arguments needs"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("the largest is the global value of 'wte', "
                         "4398046511104 bytes (4096.0 GiB)"),
            std::string::npos)
      << message;
}

TEST(HostMemoryTest, LeavesMappedParametersOut) {
  // Under --load-weights a parameter's global value is a view of the file.
  plan::Program program;
  int64_t piece = addBuffer(program, {16}, "wte.piece");
  addArgument(program, "wte", piece, {int64_t(1) << 20, int64_t(1) << 20});
  program.mutable_arguments(0)->set_role(plan::PARAM);
  program.set_arena_bytes(128);
  HostMemoryUse mapped;
  mapped.parametersMapped = true;
  EXPECT_TRUE(checkHostMemory(program, mapped, getTestLimit()).ok());
  EXPECT_FALSE(checkHostMemory(program, HostMemoryUse(), getTestLimit()).ok());
}

TEST(HostMemoryTest, SaturatesASizeThatOverflows) {
  plan::Program program;
  int64_t piece = addBuffer(program, {16}, "piece");
  addArgument(program, "overflowing", piece,
              {int64_t(1) << 40, int64_t(1) << 40});
  Status status = checkHostMemory(program, HostMemoryUse(), getTestLimit());
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("2^64 bytes or more"), std::string::npos)
      << status.message();
}

TEST(HostMemoryTest, AcceptsAPlanThatFits) {
  plan::Program program;
  int64_t piece = addBuffer(program, {16}, "piece");
  addArgument(program, "w", piece, {64});
  plan::Result *result = program.add_results();
  result->set_buffer(piece);
  program.set_arena_bytes(64);
  EXPECT_TRUE(checkHostMemory(program, HostMemoryUse(), getTestLimit()).ok());
  std::vector<HostMemoryPhase> phases =
      getHostMemoryPhases(program, HostMemoryUse());
  ASSERT_EQ(phases.size(), 2u);
  // The global value (256 bytes) and the piece (64).
  EXPECT_EQ(phases[0].totalBytes, 320u);
  // The piece, the arena with its slack (128) and the result's copy (64).
  EXPECT_EQ(phases[1].totalBytes, 256u);
}

TEST(HostMemoryTest, KnowsThisMachinesMemory) {
  HostMemoryLimit limit = getHostMemoryLimit();
  EXPECT_GT(limit.bytes, 0u);
  EXPECT_LT(limit.bytes, UINT64_MAX);
  EXPECT_FALSE(limit.source.empty());
}

TEST(HostMemoryTest, SharesTheMachineAmongItsRanks) {
  HostMemoryLimit alone = getHostMemoryLimit();
  HostMemoryLimit shared = getHostMemoryLimit(4);
  EXPECT_LE(shared.bytes, alone.bytes);
  // Under a ulimit below the share, the ulimit stays the bound.
  if (alone.source == "this machine's memory") {
    EXPECT_NE(shared.source.find("over 4 ranks"), std::string::npos)
        << shared.source;
  }
}

TEST(OwnedTensorTest, RefusesBytesPastTwoToTheSixtyFour) {
  // Refused from the shape alone, before any allocation.
  Expected<OwnedTensor> tensor = OwnedTensor::allocate(
      DType::F32, {int64_t(1) << 40, int64_t(1) << 30}, "the test tensor");
  ASSERT_FALSE(tensor.ok());
  EXPECT_NE(tensor.message().find("the test tensor of shape"),
            std::string::npos)
      << tensor.message();
}

TEST(OwnedTensorTest, AllocatesASmallTensor) {
  Expected<OwnedTensor> tensor =
      OwnedTensor::allocate(DType::F32, {2, 3}, "the test tensor");
  ASSERT_TRUE(tensor.ok()) << tensor.message();
  EXPECT_EQ(tensor->view.getBytes(), 24u);
  EXPECT_EQ(tensor->view.as<float>()[5], 0.0f);
}

TEST(FormatBytesTest, ScalesLargeCounts) {
  EXPECT_EQ(formatBytes(512), "512 bytes");
  EXPECT_EQ(formatBytes(uint64_t(3) << 20), "3145728 bytes (3.0 MiB)");
  EXPECT_EQ(formatBytes(uint64_t(1) << 40), "1099511627776 bytes (1024.0 GiB)");
}

} // namespace
