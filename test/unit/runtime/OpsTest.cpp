//===- OpsTest.cpp - the runtime's op table and the registries from it ----===//

#include "tessera/runtime/Ops.h"
#include "tessera/runtime/Device.h"
#include "tessera/runtime/Kernels.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

using namespace tessera::runtime;

namespace {

// Tests that the table's ids index it, and that each name finds its entry.
TEST(OpsTest, NamesAndIdsAgree) {
  std::set<std::string> names;
  for (size_t index = 0; index < kNumOps; ++index) {
    const OpInfo &op = getOpInfo(static_cast<OpId>(index));
    EXPECT_EQ(static_cast<size_t>(op.id), index);
    EXPECT_TRUE(names.insert(op.name).second) << op.name << " appears twice";
    Expected<const OpInfo *> found = findOp(op.name);
    ASSERT_TRUE(found.ok()) << found.message();
    EXPECT_EQ(*found, &op);
  }
}

// Tests that an op outside the table is refused with the loader's message.
TEST(OpsTest, UnknownOpIsAnInvalidPlan) {
  Expected<const OpInfo *> found = findOp("nn.convolution_3000");
  ASSERT_FALSE(found.ok());
  EXPECT_EQ(found.getStatus().getCode(), StatusCode::InvalidPlan);
  EXPECT_EQ(found.message(), "unknown kernel 'nn.convolution_3000'");
}

// Tests that the map ops are the elementwise ops of one or two operands,
// numbered in the table's order.
TEST(OpsTest, MapOpsCarryTheirMath) {
  const OpInfo &add = getOpInfo(OpId::Add);
  EXPECT_EQ(add.kind, OpKind::Map);
  EXPECT_EQ(add.mapOp, MapOp::Add);
  EXPECT_EQ(add.mapArity, 2);
  const OpInfo &exp = getOpInfo(OpId::Exp);
  EXPECT_EQ(exp.mapOp, MapOp::Exp);
  EXPECT_EQ(exp.mapArity, 1);
  for (size_t index = 0; index < kNumOps; ++index) {
    const OpInfo &op = getOpInfo(static_cast<OpId>(index));
    if (op.kind == OpKind::Map) {
      EXPECT_TRUE(op.mapArity == 1 || op.mapArity == 2) << op.name;
    }
  }
  EXPECT_EQ(getOpInfo(OpId::Reshape).kind, OpKind::Move);
  EXPECT_EQ(getOpInfo(OpId::Dot).kind, OpKind::Compute);
}

// Tests that the CPU backend has a kernel of every op of the table, and
// the device finds the executor's own ops by id.
TEST(OpsTest, CpuHasEveryOp) {
  for (size_t index = 0; index < kNumOps; ++index) {
    const OpInfo &op = getOpInfo(static_cast<OpId>(index));
    Expected<const CpuKernel *> kernel = findCpuKernel(op.name);
    ASSERT_TRUE(kernel.ok()) << kernel.message();
    EXPECT_EQ((*kernel)->getOp(), op.name);
  }
  std::unique_ptr<Device> device = createCpuDevice();
  Expected<const Kernel *> slice = device->findKernel(OpId::Slice);
  ASSERT_TRUE(slice.ok()) << slice.message();
  EXPECT_EQ((*slice)->getOp(), "nn.slice");
}

} // namespace
