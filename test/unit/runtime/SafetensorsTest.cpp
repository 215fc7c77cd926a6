//===- SafetensorsTest.cpp - Safetensors files read back and checked ------===//

#include "tessera/runtime/Safetensors.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

using namespace tessera::runtime;

namespace {

std::string getTempPath(const char *name) {
  return testing::TempDir() + "/" + name;
}

/// Writes a safetensors file by hand: the header length (`headerBytes`, or
/// that of `header` padded to 8 bytes), the header and `dataBytes` zeros.
void writeRaw(const std::string &path, std::string header, size_t dataBytes,
              uint64_t headerBytes = 0) {
  if (!headerBytes) {
    header.append((8 - header.size() % 8) % 8, ' ');
    headerBytes = header.size();
  }
  std::ofstream file(path, std::ios::binary);
  for (int i = 0; i < 8; ++i)
    file.put(static_cast<char>(headerBytes >> (8 * i)));
  file << header << std::string(dataBytes, '\0');
}

/// Opens `path`, expecting a data error that mentions each of `parts`.
void expectOpenError(const std::string &path,
                     const std::vector<std::string> &parts) {
  Expected<SafetensorsFile> file = openSafetensors(path);
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.getStatus().getCode(), StatusCode::DataError);
  for (const std::string &part : parts)
    EXPECT_NE(file.message().find(part), std::string::npos)
        << "'" << part << "' not in: " << file.message();
}

TEST(SafetensorsTest, TensorsReadBackAsWritten) {
  OwnedTensor weights(DType::F32, {2, 3});
  for (int64_t i = 0; i < 6; ++i)
    weights.view.as<float>()[i] = 0.5f * i - 1;
  // Three bf16 values first: the writer must still align the f32 and i64.
  OwnedTensor scales(DType::BF16, {3});
  for (int64_t i = 0; i < 3; ++i)
    scales.view.as<uint16_t>()[i] = floatToHalf(DType::BF16, 1.5f * i);
  OwnedTensor ids(DType::I64, {});
  ids.view.as<int64_t>()[0] = -(int64_t(1) << 40);
  std::string path = getTempPath("round-trip.safetensors");
  ASSERT_TRUE(writeSafetensors(path,
                               {{"scales", &scales.view},
                                {"layer.\"0\"\\weight", &weights.view},
                                {"ids", &ids.view}},
                               {{"format", "pt"}})
                  .ok());
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));

  Expected<SafetensorsFile> file = openSafetensors(path);
  ASSERT_TRUE(file.ok()) << file.message();
  EXPECT_EQ(file->getNames(),
            (std::vector<std::string>{"ids", "layer.\"0\"\\weight", "scales"}));
  EXPECT_EQ(file->getMetadata().at("format"), "pt");
  EXPECT_EQ(file->find("missing"), nullptr);

  const SafetensorsFile::Entry *entry = file->find("layer.\"0\"\\weight");
  ASSERT_NE(entry, nullptr);
  Tensor view = file->view(*entry);
  EXPECT_EQ(view.dtype, DType::F32);
  EXPECT_EQ(view.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(std::memcmp(view.data, weights.view.data, 24), 0);

  entry = file->find("scales");
  ASSERT_NE(entry, nullptr);
  EXPECT_EQ(entry->dtype, DType::BF16);
  EXPECT_EQ(file->view(*entry).as<uint16_t>()[2],
            floatToHalf(DType::BF16, 3.0f));

  entry = file->find("ids");
  ASSERT_NE(entry, nullptr);
  EXPECT_TRUE(entry->shape.empty());
  EXPECT_EQ(file->view(*entry).as<int64_t>()[0], -(int64_t(1) << 40));
  std::remove(path.c_str());
}

TEST(SafetensorsTest, DuplicateNamesAreRejected) {
  OwnedTensor tensor(DType::F32, {1});
  Status status = writeSafetensors(getTempPath("duplicate.safetensors"),
                                   {{"w", &tensor.view}, {"w", &tensor.view}});
  EXPECT_EQ(status.getCode(), StatusCode::InvalidArgument);
  EXPECT_NE(status.message().find("'w'"), std::string::npos);
}

TEST(SafetensorsTest, TruncatedDataIsAnError) {
  OwnedTensor tensor(DType::F32, {4});
  std::string path = getTempPath("truncated.safetensors");
  ASSERT_TRUE(writeSafetensors(path, {{"w", &tensor.view}}).ok());
  std::filesystem::resize_file(path, std::filesystem::file_size(path) - 4);
  expectOpenError(path, {path, "tensor 'w'", "[0, 16]", "12 bytes of data"});
  std::remove(path.c_str());
}

TEST(SafetensorsTest, OverlappingTensorsAreAnError) {
  std::string path = getTempPath("overlap.safetensors");
  writeRaw(path,
           R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
           R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
           12);
  expectOpenError(path, {path, "'a' and 'b' overlap"});
  std::remove(path.c_str());
}

TEST(SafetensorsTest, UnknownDTypeIsAnError) {
  std::string path = getTempPath("dtype.safetensors");
  writeRaw(path, R"({"q":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}})", 4);
  expectOpenError(path, {path, "tensor 'q'", "unsupported dtype 'U8'"});
  std::remove(path.c_str());
}

TEST(SafetensorsTest, HeaderLengthPastTheEndIsAnError) {
  std::string path = getTempPath("header.safetensors");
  writeRaw(path, "{}", 0, /*headerBytes=*/1000);
  expectOpenError(path, {path, "header length 1000", "10 bytes"});
  std::remove(path.c_str());
}

TEST(SafetensorsTest, NamesGivenTwiceAreAnError) {
  std::string path = getTempPath("twice.safetensors");
  writeRaw(path,
           R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
           R"("a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
           8);
  expectOpenError(path, {path, "header is not valid JSON", "'a' twice"});
  std::remove(path.c_str());
}

TEST(SafetensorsTest, DeepHeaderIsRefusedAtOnce) {
  // Nested 100,000 deep: refused past the reader's 1,000 levels, in time
  // linear in the header (a reader that rescans per level takes minutes).
  std::string path = getTempPath("deep.safetensors");
  writeRaw(
      path,
      "{\"a\":" + std::string(100000, '[') + std::string(100000, ']') + "}", 0);
  auto begin = std::chrono::steady_clock::now();
  expectOpenError(path, {path, "nest deeper than 1000 levels"});
  EXPECT_LT(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - begin)
          .count(),
      10.0);
  std::remove(path.c_str());
}

TEST(SafetensorsTest, DeepIndexIsRefusedAtOnce) {
  std::string path = getTempPath("deep.safetensors.index.json");
  std::ofstream(path) << "{\"weight_map\":" << std::string(100000, '[')
                      << std::string(100000, ']') << "}";
  Expected<SafetensorsCheckpoint> checkpoint = openSafetensorsCheckpoint(path);
  ASSERT_FALSE(checkpoint.ok());
  EXPECT_EQ(checkpoint.getStatus().getCode(), StatusCode::DataError);
  EXPECT_NE(checkpoint.message().find(path), std::string::npos);
  EXPECT_NE(checkpoint.message().find("nest deeper than 1000 levels"),
            std::string::npos)
      << checkpoint.message();
  std::remove(path.c_str());
}

// Tests that a weight map's file name cannot reach outside the index's
// directory: a name with a slash, "..", or a link to a file elsewhere.
TEST(SafetensorsTest, IndexNamesOnlyFilesOfItsDirectory) {
  std::filesystem::path root = getTempPath("traversal");
  std::filesystem::remove_all(root);
  std::filesystem::create_directories(root / "model");
  writeRaw((root / "outside.safetensors").string(),
           R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 4);
  std::filesystem::create_symlink(root / "outside.safetensors",
                                  root / "model" / "link.safetensors");
  std::string index = (root / "model" / "w.safetensors.index.json").string();
  for (std::string file :
       {"../outside.safetensors", "..", "link.safetensors"}) {
    std::ofstream(index) << R"({"weight_map":{"w":")" << file << R"("}})";
    Expected<SafetensorsCheckpoint> checkpoint =
        openSafetensorsCheckpoint(index);
    ASSERT_FALSE(checkpoint.ok()) << file;
    EXPECT_EQ(checkpoint.getStatus().getCode(), StatusCode::DataError);
    bool named =
        checkpoint.message().find("no file name of this directory") !=
            std::string::npos ||
        checkpoint.message().find("leads outside the index's directory") !=
            std::string::npos;
    EXPECT_TRUE(named) << checkpoint.message();
  }
  // A file of the directory itself is read.
  std::filesystem::copy_file(root / "outside.safetensors",
                             root / "model" / "inside.safetensors");
  std::ofstream(index) << R"({"weight_map":{"w":"inside.safetensors"}})";
  EXPECT_TRUE(openSafetensorsCheckpoint(index).ok());
  std::filesystem::remove_all(root);
}

TEST(SafetensorsTest, IndexThatIsADirectoryIsAnError) {
  std::string path = getTempPath("directory.safetensors.index.json");
  std::filesystem::create_directories(path);
  Expected<SafetensorsCheckpoint> checkpoint = openSafetensorsCheckpoint(path);
  ASSERT_FALSE(checkpoint.ok());
  EXPECT_EQ(checkpoint.getStatus().getCode(), StatusCode::DataError);
  EXPECT_NE(checkpoint.message().find(path), std::string::npos);
  EXPECT_NE(checkpoint.message().find("is a directory"), std::string::npos)
      << checkpoint.message();
  std::filesystem::remove(path);
}

TEST(SafetensorsTest, FileCutShortWhileMappedIsAnError) {
  // Many pages of data, so that the cut removes whole pages of the mapping:
  // reading them would be a SIGBUS without the guard.
  OwnedTensor tensor(DType::F32, {1 << 16});
  for (int64_t i = 0; i < (1 << 16); ++i)
    tensor.view.as<float>()[i] = 1.0f;
  std::string path = getTempPath("cut-while-mapped.safetensors");
  ASSERT_TRUE(writeSafetensors(path, {{"w", &tensor.view}}).ok());
  Expected<SafetensorsFile> file = openSafetensors(path);
  ASSERT_TRUE(file.ok()) << file.message();
  EXPECT_TRUE(file->checkIntact().ok());
  std::filesystem::resize_file(path, 200);

  // The lost page reads as zeros.
  const volatile float *data = file->view(*file->find("w")).as<float>();
  EXPECT_EQ(data[(1 << 16) - 1], 0.0f);
  Status intact = file->checkIntact();
  ASSERT_FALSE(intact.ok());
  EXPECT_EQ(intact.getCode(), StatusCode::DataError);
  EXPECT_NE(intact.message().find(path), std::string::npos);
  EXPECT_NE(intact.message().find("cut short"), std::string::npos)
      << intact.message();
  std::remove(path.c_str());
}

TEST(SafetensorsTest, FloatsConvertWithRounding) {
  OwnedTensor wide(DType::F32, {3});
  float values[3] = {1.0f, 1.00390625f, 3.14159f};
  std::memcpy(wide.view.data, values, sizeof values);
  Expected<OwnedTensor> narrow = convertTo(wide.view, DType::BF16);
  ASSERT_TRUE(narrow.ok()) << narrow.message();
  Expected<OwnedTensor> back = convertTo(narrow->view, DType::F32);
  ASSERT_TRUE(back.ok()) << back.message();
  EXPECT_EQ(back->view.as<float>()[0], 1.0f);
  // 1 + 2^-8 lies halfway between two bf16 values: it rounds to even.
  EXPECT_EQ(back->view.as<float>()[1], 1.0f);
  EXPECT_EQ(back->view.as<float>()[2], 3.140625f);
}

TEST(SafetensorsTest, IntegersOutOfRangeAreAnError) {
  OwnedTensor wide(DType::I64, {2});
  wide.view.as<int64_t>()[0] = -7;
  wide.view.as<int64_t>()[1] = int64_t(1) << 40;
  Expected<OwnedTensor> narrow = convertTo(wide.view, DType::I32);
  ASSERT_FALSE(narrow.ok());
  EXPECT_NE(narrow.message().find("element 1 is 1099511627776"),
            std::string::npos)
      << narrow.message();

  wide.view.as<int64_t>()[1] = 7;
  narrow = convertTo(wide.view, DType::I32);
  ASSERT_TRUE(narrow.ok()) << narrow.message();
  EXPECT_EQ(narrow->view.as<int32_t>()[0], -7);
  EXPECT_EQ(convertTo(wide.view, DType::F32).getStatus().getCode(),
            StatusCode::InvalidArgument);
}

} // namespace
