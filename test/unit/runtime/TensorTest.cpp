//===- TensorTest.cpp - tensors and statuses --------------------------------===//

#include "KernelsTestSupport.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

using namespace tessera::runtime;
using namespace tessera::runtime::kernels_test;

namespace {

TEST(TensorTest, DTypesHaveSizesAndNames) {
  EXPECT_EQ(getDTypeBytes(DType::F32), 4u);
  EXPECT_EQ(getDTypeBytes(DType::F64), 8u);
  EXPECT_EQ(getDTypeBytes(DType::BF16), 2u);
  EXPECT_EQ(getDTypeBytes(DType::I1), 1u);
  EXPECT_STREQ(getDTypeName(DType::BF16), "bf16");
  EXPECT_STREQ(getDTypeName(DType::I64), "i64");
  EXPECT_EQ(getNumElements({}), 1);
  EXPECT_EQ(getNumElements({2, 3, 4}), 24);
  EXPECT_EQ(getNumElements({2, 0}), 0);
}

TEST(TensorTest, OwnedTensorIsZeroedAndCopiesOwnStorage) {
  OwnedTensor tensor(DType::I64, {2, 3});
  EXPECT_EQ(tensor.view.getBytes(), 48u);
  EXPECT_EQ(read<int64_t>(tensor), std::vector<int64_t>(6, 0));
  tensor.view.as<int64_t>()[4] = 7;

  OwnedTensor copy(tensor);
  EXPECT_NE(copy.view.data, tensor.view.data);
  EXPECT_EQ(copy.view.data, copy.storage.data());
  copy.view.as<int64_t>()[4] = 9;
  EXPECT_EQ(tensor.view.as<int64_t>()[4], 7);

  OwnedTensor assigned;
  assigned = tensor;
  EXPECT_EQ(assigned.view.data, assigned.storage.data());
  EXPECT_EQ(assigned.view.as<int64_t>()[4], 7);

  OwnedTensor moved(std::move(copy));
  EXPECT_EQ(moved.view.data, moved.storage.data());
  EXPECT_EQ(moved.view.as<int64_t>()[4], 9);
}

TEST(StatusTest, CarriesACodeAndAMessage) {
  Status success;
  EXPECT_TRUE(success.ok());
  EXPECT_EQ(success.message(), "");
  EXPECT_TRUE(success.withPrefix("instruction 3: ").ok());

  Status failure = timeoutError("all_reduce: not finished after 5 s");
  EXPECT_FALSE(failure.ok());
  Status prefixed = failure.withPrefix("instruction 3: ");
  EXPECT_EQ(prefixed.getCode(), StatusCode::Timeout);
  EXPECT_EQ(prefixed.message(),
            "instruction 3: all_reduce: not finished after 5 s");
  EXPECT_STREQ(getStatusCodeName(prefixed.getCode()), "timeout");
}

TEST(StatusTest, ExpectedHoldsAValueOrAnError) {
  Expected<int> value = 42;
  ASSERT_TRUE(value.ok());
  EXPECT_EQ(*value, 42);
  EXPECT_TRUE(value.getStatus().ok());

  Expected<int> error = dataError("'x.bin' is not a tensor file: wrong magic");
  EXPECT_FALSE(error.ok());
  EXPECT_EQ(error.getStatus().getCode(), StatusCode::DataError);
  EXPECT_EQ(error.message(), "'x.bin' is not a tensor file: wrong magic");
}

} // namespace
