//===- PlanProtoTest.cpp - the plan schema serializes and parses ----------===//

#include "plan.pb.h"

#include <gtest/gtest.h>

namespace {

TEST(PlanProtoTest, RoundTripsThroughTheWireFormat) {
  tessera::plan::Plan plan;
  plan.set_format_version(tessera::plan::PLAN_FORMAT_VERSION);
  auto *axis = plan.mutable_mesh()->add_axes();
  axis->set_name("tp");
  axis->set_size(2);
  auto *rank = plan.add_ranks();
  rank->set_rank(1);
  auto *buffer = rank->add_buffers();
  buffer->set_id(0);
  buffer->set_dtype(tessera::plan::BF16);
  buffer->add_shape(8);
  buffer->add_shape(64);
  auto *collective = rank->add_instructions()->mutable_collective();
  collective->set_kind(tessera::plan::ALL_REDUCE);
  collective->add_mesh_axes("tp");

  std::string bytes;
  ASSERT_TRUE(plan.SerializeToString(&bytes));
  tessera::plan::Plan parsed;
  ASSERT_TRUE(parsed.ParseFromString(bytes));
  EXPECT_EQ(parsed.format_version(), tessera::plan::PLAN_FORMAT_VERSION);
  EXPECT_EQ(parsed.mesh().axes(0).name(), "tp");
  EXPECT_EQ(parsed.ranks(0).buffers(0).shape(1), 64);
  EXPECT_EQ(parsed.ranks(0).instructions(0).collective().kind(),
            tessera::plan::ALL_REDUCE);
}

TEST(PlanProtoTest, GarbageDoesNotParseAsAPlan) {
  tessera::plan::Plan parsed;
  EXPECT_FALSE(parsed.ParseFromString(std::string("\xff\xff\xff\xff", 4)));
}

} // namespace
