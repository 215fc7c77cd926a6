//===- DumpTest.cpp - Tensor files read back as written -------------------===//

#include "tessera/runtime/Dump.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

using namespace tessera::runtime;

namespace {

std::string getTempPath(const char *name) {
  return testing::TempDir() + "/" + name;
}

TEST(DumpTest, TensorsReadBackAsWritten) {
  OwnedTensor weights(DType::F32, {2, 3});
  for (int64_t i = 0; i < 6; ++i)
    weights.view.as<float>()[i] = 0.5f * i;
  OwnedTensor ids(DType::I64, {4});
  for (int64_t i = 0; i < 4; ++i)
    ids.view.as<int64_t>()[i] = 1000 - i;
  OwnedTensor scalar(DType::F32, {});
  scalar.view.as<float>()[0] = -2;
  std::string path = getTempPath("tensors.bin");
  ASSERT_TRUE(writeTensors(path, {weights, ids, scalar}).ok());

  Expected<std::vector<OwnedTensor>> read = readTensors(path);
  ASSERT_TRUE(read.ok()) << read.message();
  ASSERT_EQ(read->size(), 3u);
  EXPECT_EQ((*read)[0].view.dtype, DType::F32);
  EXPECT_EQ((*read)[0].view.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ((*read)[0].view.as<float>()[5], 2.5f);
  EXPECT_EQ((*read)[1].view.dtype, DType::I64);
  EXPECT_EQ((*read)[1].view.as<int64_t>()[3], 997);
  EXPECT_TRUE((*read)[2].view.shape.empty());
  EXPECT_EQ((*read)[2].view.as<float>()[0], -2);
  std::remove(path.c_str());
}

TEST(DumpTest, AStreamedFileCountsTheTensorsWrittenOneByOne) {
  std::string path = getTempPath("streamed.bin");
  TensorFileWriter writer;
  ASSERT_TRUE(writer.open(path).ok());
  float values[3] = {1, 2, 3};
  int32_t index = 7;
  ASSERT_TRUE(writer.write(DType::F32, {3}, values, sizeof(values)).ok());
  ASSERT_TRUE(writer.write(DType::I32, {}, &index, sizeof(index)).ok());
  ASSERT_TRUE(writer.close().ok());

  Expected<std::vector<OwnedTensor>> read = readTensors(path);
  ASSERT_TRUE(read.ok()) << read.message();
  ASSERT_EQ(read->size(), 2u);
  EXPECT_EQ((*read)[0].view.as<float>()[2], 3.0f);
  EXPECT_EQ((*read)[1].view.as<int32_t>()[0], 7);
  std::remove(path.c_str());
}

TEST(DumpTest, AMissingFileIsADataErrorNamingIt) {
  Expected<std::vector<OwnedTensor>> read =
      readTensors(getTempPath("no-such-file.bin"));
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.getStatus().getCode(), StatusCode::DataError);
  EXPECT_NE(read.message().find("cannot open"), std::string::npos);
  EXPECT_NE(read.message().find("no-such-file.bin"), std::string::npos);
}

TEST(DumpTest, AFileOfAnotherKindIsRefused) {
  std::string path = getTempPath("not-tensors.bin");
  std::ofstream(path) << "PLAN and more bytes than a header";
  Expected<std::vector<OwnedTensor>> read = readTensors(path);
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.getStatus().getCode(), StatusCode::DataError);
  EXPECT_NE(read.message().find("wrong magic"), std::string::npos);
  std::remove(path.c_str());
}

TEST(DumpTest, AHeaderClaimingMoreThanTheFileIsRefusedBeforeAllocating) {
  // A [2^18, 2^18] f64 tensor (2^39 bytes) with no data: before, the reader
  // allocated it and ended in std::bad_alloc.
  std::string path = getTempPath("huge.bin");
  {
    std::ofstream file(path, std::ios::binary);
    uint32_t version = 1, dtype = static_cast<uint32_t>(DType::F64), rank = 2;
    uint64_t count = 1;
    int64_t shape[2] = {1 << 18, 1 << 18};
    file.write("TSRT", 4);
    file.write(reinterpret_cast<char *>(&version), 4);
    file.write(reinterpret_cast<char *>(&count), 8);
    file.write(reinterpret_cast<char *>(&dtype), 4);
    file.write(reinterpret_cast<char *>(&rank), 4);
    file.write(reinterpret_cast<char *>(shape), 16);
  }
  Expected<std::vector<OwnedTensor>> read = readTensors(path);
  ASSERT_FALSE(read.ok());
  EXPECT_NE(read.message().find("tensor 0 claims 549755813888 bytes of data, "
                                "the file has 0 left"),
            std::string::npos)
      << read.message();
  std::remove(path.c_str());
}

TEST(DumpTest, AnUnwritablePathIsADataError) {
  Status written = writeTensors("/nonexistent-dir/tensors.bin", {});
  ASSERT_FALSE(written.ok());
  EXPECT_EQ(written.getCode(), StatusCode::DataError);
  EXPECT_NE(written.message().find("cannot write"), std::string::npos);
}

} // namespace
