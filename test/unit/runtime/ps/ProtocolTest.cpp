//===- ProtocolTest.cpp - the parameter server's messages and sums --------===//

#include "ps/Protocol.h"

#include <gtest/gtest.h>

#include <unistd.h>

using namespace tessera::runtime;
using namespace tessera::runtime::ps;

namespace {

// Tests that a header travels whole in one frame and names its sender.
TEST(ProtocolTest, AHeaderRoundTripsThroughAFrame) {
  Header sent = makeHeader(MessageType::Push, 3);
  sent.step = 7;
  sent.version = 6;
  sent.loss = 2.5;
  zmq::message_t frame = makeFrame(&sent, sizeof sent);
  Header received = readFrame<Header>(frame);
  EXPECT_EQ(received.type, MessageType::Push);
  EXPECT_EQ(received.worker, 3);
  EXPECT_EQ(received.step, 7);
  EXPECT_EQ(received.version, 6);
  EXPECT_EQ(received.loss, 2.5);
  EXPECT_EQ(received.pid, getpid());
  EXPECT_EQ(std::string(received.host), getHostName());
}

// Tests that the heartbeat came after the earlier types, whose numbers on
// the wire it leaves as they were.
TEST(ProtocolTest, TheHeartbeatKeepsTheEarlierTypesNumbers) {
  EXPECT_EQ(static_cast<uint32_t>(MessageType::Hello), 0u);
  EXPECT_EQ(static_cast<uint32_t>(MessageType::Bye), 5u);
  EXPECT_EQ(static_cast<uint32_t>(MessageType::Heartbeat), 6u);
  Header beat = makeHeader(MessageType::Heartbeat, 1);
  zmq::message_t frame = makeFrame(&beat, sizeof beat);
  EXPECT_EQ(readFrame<Header>(frame).type, MessageType::Heartbeat);
  EXPECT_EQ(readFrame<Header>(frame).worker, 1);
}

// Tests that a short frame reads as zeros past its end, never past it.
TEST(ProtocolTest, AShortFrameReadsAsZerosPastItsEnd) {
  int32_t word = 5;
  zmq::message_t frame = makeFrame(&word, sizeof word);
  int64_t wide = readFrame<int64_t>(frame);
  EXPECT_EQ(wide, 5);
}

// Tests that a server sums pieces of either float width and stores the
// sum scaled in the state's own type.
TEST(ProtocolTest, PiecesSumInF32AndStoreScaled) {
  std::vector<float> sum(3, 0.0f);
  float f32[] = {1.0f, -2.0f, 0.5f};
  addInto(sum, f32, DType::F32);
  uint16_t bf16[3];
  for (int i = 0; i < 3; ++i)
    bf16[i] = floatToHalf(DType::BF16, 2.0f * (i + 1));
  addInto(sum, bf16, DType::BF16);
  EXPECT_EQ(sum, (std::vector<float>{3.0f, 2.0f, 6.5f}));

  OwnedTensor state(DType::F32, {3});
  storeScaled(sum, 0.5f, state.view);
  EXPECT_EQ(state.view.as<float>()[2], 3.25f);
  OwnedTensor half(DType::BF16, {3});
  storeScaled(sum, 1.0f, half.view);
  EXPECT_EQ(halfToFloat(DType::BF16, half.view.as<uint16_t>()[0]), 3.0f);
}

// Tests that the job directory names each process's files.
TEST(ProtocolTest, TheJobDirectoryNamesEachProcessFile) {
  EXPECT_EQ(getServerFile("/job", 2, ".addr"), "/job/server2.addr");
  EXPECT_EQ(getWorkerPidFile("/job", 0), "/job/worker0.pid");
}

} // namespace
