//===- AtomicFileTest.cpp - files written whole or not at all -------------===//

#include "tessera/runtime/AtomicFile.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

using namespace tessera::runtime;

namespace {

std::string getTempPath(const std::string &name) {
  return testing::TempDir() + "/atomic-file-" + name;
}

std::string readFile(const std::string &path) {
  std::ifstream file(path, std::ios::binary);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

// Tests that the pieces land in order and no staging file is left.
TEST(AtomicFileTest, PiecesReplaceTheFileWhole) {
  std::string path = getTempPath("pieces");
  { std::ofstream(path) << "old contents"; }
  std::string second = "second";
  ASSERT_TRUE(writeFileAtomically(path, {"first,", second, ""}).ok());
  EXPECT_EQ(readFile(path), "first,second");
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  std::filesystem::remove(path);
}

// Tests that a failed write leaves the old file and removes its staging
// file, answering the writer's failure.
TEST(AtomicFileTest, AFailedWriteKeepsTheOldFile) {
  std::string path = getTempPath("failed");
  { std::ofstream(path) << "old contents"; }
  Status status = writeFileAtomically(path, [](const std::string &staging) {
    std::ofstream(staging) << "half of it";
    return dataError("the writer gave up");
  });
  EXPECT_EQ(status.message(), "the writer gave up");
  EXPECT_EQ(readFile(path), "old contents");
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  std::filesystem::remove(path);
}

// Tests that a path in a missing directory is one data error naming it.
TEST(AtomicFileTest, AMissingDirectoryIsADataError) {
  std::string path = getTempPath("missing") + "/file";
  Status status = writeFileAtomically(path, {"text"}, "the checkpoint");
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.getCode(), StatusCode::DataError);
  EXPECT_EQ(status.message().rfind("cannot write the checkpoint '", 0), 0u)
      << status.message();
  EXPECT_NE(status.message().find("No such file or directory"),
            std::string::npos)
      << status.message();
}

} // namespace
