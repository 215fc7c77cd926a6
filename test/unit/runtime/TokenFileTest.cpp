//===- TokenFileTest.cpp - Token files written, read and cut short --------===//

#include "tessera/runtime/TokenFile.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>

using namespace tessera::runtime;

namespace {

std::string getTempPath(const char *name) {
  return testing::TempDir() + "/" + name;
}

std::string readBytes(const std::string &path) {
  std::ifstream file(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(file),
                     std::istreambuf_iterator<char>());
}

/// Expects `status` to be a data error that mentions each of `parts`.
void expectDataError(const Status &status,
                     const std::vector<std::string> &parts) {
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.getCode(), StatusCode::DataError);
  for (const std::string &part : parts)
    EXPECT_NE(status.message().find(part), std::string::npos)
        << "'" << part << "' not in: " << status.message();
}

TEST(TokenFileTest, IdsReadBackAsWritten) {
  std::vector<uint32_t> tokens = {0, 1, 255, 7, 42, 3};
  std::string path = getTempPath("round-trip.tokens");
  ASSERT_TRUE(writeTokenFile(path, tokens, 256).ok());
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  EXPECT_EQ(std::filesystem::file_size(path),
            kTokenFileHeaderBytes + 2 * tokens.size());

  Expected<std::unique_ptr<TokenFile>> file = TokenFile::open(path);
  ASSERT_TRUE(file.ok()) << file.message();
  EXPECT_EQ((*file)->getNumTokens(), 6);
  EXPECT_EQ((*file)->getVocab(), 256u);
  EXPECT_EQ((*file)->getBytesPerToken(), 2);
  std::vector<uint32_t> ids(4);
  ASSERT_TRUE((*file)->read(2, 4, ids.data()).ok());
  EXPECT_EQ(ids, (std::vector<uint32_t>{255, 7, 42, 3}));
  Status outside = (*file)->read(4, 3, ids.data());
  EXPECT_EQ(outside.getCode(), StatusCode::InvalidArgument);
  std::remove(path.c_str());
}

TEST(TokenFileTest, ChunkedWriteMatchesWholeWrite) {
  // Ids over the uint16 range: 4-byte ids.
  std::vector<uint32_t> tokens;
  for (uint32_t i = 0; i < 1000; ++i)
    tokens.push_back(i * 97 % 70000);
  std::string whole = getTempPath("whole.tokens");
  std::string chunked = getTempPath("chunked.tokens");
  ASSERT_TRUE(writeTokenFile(whole, tokens, 70000).ok());
  size_t next = 0;
  Expected<int64_t> count =
      writeTokenFile(chunked, 70000, [&](std::vector<uint32_t> &ids) {
        size_t end = std::min(tokens.size(), next + 333);
        ids.assign(tokens.begin() + next, tokens.begin() + end);
        next = end;
        return Status::success();
      });
  ASSERT_TRUE(count.ok()) << count.message();
  EXPECT_EQ(*count, 1000);
  EXPECT_EQ(readBytes(chunked), readBytes(whole));
  std::remove(whole.c_str());
  std::remove(chunked.c_str());
}

TEST(TokenFileTest, SourceErrorLeavesNoFile) {
  std::string path = getTempPath("failed.tokens");
  std::remove(path.c_str());
  Expected<int64_t> count =
      writeTokenFile(path, 256, [](std::vector<uint32_t> &) {
        return dataError("'text' is empty: there is nothing to train on");
      });
  EXPECT_FALSE(count.ok());
  EXPECT_NE(count.message().find("is empty"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
}

TEST(TokenFileTest, IdAtOrAboveTheVocabularyIsRejected) {
  std::string path = getTempPath("vocab.tokens");
  Status status = writeTokenFile(path, {1, 2, 256}, 256);
  EXPECT_EQ(status.getCode(), StatusCode::InvalidArgument);
  EXPECT_NE(status.message().find("token id 256 at position 2"),
            std::string::npos)
      << status.message();
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(TokenFileTest, FileCutShortWhileOpenIsAnError) {
  // Enough ids for several pages, so that the cut removes whole pages (a
  // mapped file would raise SIGBUS there).
  std::vector<uint32_t> tokens(1 << 16, 9);
  std::string path = getTempPath("cut.tokens");
  ASSERT_TRUE(writeTokenFile(path, tokens, 256).ok());
  Expected<std::unique_ptr<TokenFile>> file = TokenFile::open(path);
  ASSERT_TRUE(file.ok()) << file.message();
  std::filesystem::resize_file(path, kTokenFileHeaderBytes + 100);

  std::vector<uint32_t> ids(1000);
  ASSERT_TRUE((*file)->read(0, 50, ids.data()).ok());
  expectDataError((*file)->read(60000, 1000, ids.data()), {path, "cut short"});
  std::remove(path.c_str());
}

TEST(TokenFileTest, DirectoryIsAnError) {
  std::string path = getTempPath("directory.tokens");
  std::filesystem::create_directories(path);
  Expected<std::unique_ptr<TokenFile>> file = TokenFile::open(path);
  expectDataError(file.getStatus(), {path, "is a directory"});
  std::filesystem::remove(path);
}

} // namespace
