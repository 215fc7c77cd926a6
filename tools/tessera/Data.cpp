//===- Data.cpp - tessera data pack ---------------------------------------===//
//
//   tessera data pack TEXTFILE -o FILE.tokens
//
// Turns UTF-8 text into a token file (tessera/runtime/TokenFile.h) with a
// byte-level vocabulary: each byte of the text is one token id, so the
// vocabulary is 256 ids and any model with at least that many trains on it
// (tessera-run --data FILE.tokens). The text is read, and its ids written,
// a chunk at a time: a text of any size packs in a few megabytes.
//
//===----------------------------------------------------------------------===//

#include "Commands.h"

#include "tessera/runtime/TokenFile.h"

#include "llvm/Support/Error.h"
#include "llvm/Support/FileSystem.h"

#include <vector>

using namespace tessera;
using namespace tessera::cli;
namespace cl = llvm::cl;

cl::SubCommand &cli::dataCommand() {
  static cl::SubCommand command(
      "data", "Prepare training data: 'tessera data pack TEXTFILE -o FILE' "
              "writes a token file of the text's bytes (vocabulary 256)");
  return command;
}

static cl::list<std::string> dataArguments(cl::Positional, cl::OneOrMore,
                                           cl::desc("pack <text file>"),
                                           cl::sub(dataCommand()));
static cl::opt<std::string> dataOutput("o", cl::desc("The token file"),
                                       cl::value_desc("file"),
                                       cl::sub(dataCommand()));

/// How many bytes of the text each read takes: pack holds about seven
/// times this (the bytes, their ids and the ids' encoding), whatever the
/// text's size.
static constexpr size_t kPackChunkBytes = size_t(1) << 20;

namespace {

/// The byte-level tokenizer: each call reads the next chunk of the text
/// and gives its bytes as ids (none at the end); an empty or unreadable
/// text is an error naming the file.
struct ByteTokens {
  std::string input;
  llvm::sys::fs::file_t text;
  std::vector<char> chunk = std::vector<char>(kPackChunkBytes);
  uint64_t total = 0;

  runtime::Status operator()(std::vector<uint32_t> &ids) {
    llvm::Expected<size_t> read =
        llvm::sys::fs::readNativeFile(text, llvm::MutableArrayRef<char>(chunk));
    if (!read)
      return runtime::dataError("cannot read '" + input +
                                "': " + llvm::toString(read.takeError()));
    if (*read == 0 && total == 0)
      return runtime::dataError("'" + input +
                                "' is empty: there is nothing to train on");
    total += *read;
    const auto *bytes = reinterpret_cast<const unsigned char *>(chunk.data());
    ids.assign(bytes, bytes + *read);
    return runtime::Status::success();
  }
};

} // namespace

int cli::runData() {
  if (dataArguments.size() != 2 || dataArguments[0] != "pack")
    return reportError("tessera data expects 'pack TEXTFILE -o FILE'");
  if (dataOutput.empty())
    return reportError("tessera data pack needs -o FILE, the token file");
  const std::string &input = dataArguments[1];
  if (llvm::sys::fs::is_directory(input))
    return reportError("cannot read '" + input + "': it is a directory");
  llvm::Expected<llvm::sys::fs::file_t> text =
      llvm::sys::fs::openNativeFileForRead(input);
  if (!text)
    return reportError("cannot read '" + input +
                       "': " + llvm::toString(text.takeError()));
  // The text is read and its ids written a chunk at a time.
  runtime::Expected<int64_t> packed = runtime::writeTokenFile(
      dataOutput, /*vocab=*/256, ByteTokens{input, *text});
  llvm::sys::fs::closeFile(*text);
  if (!packed.ok())
    return reportError(packed.message());
  llvm::outs() << "packed " << *packed << " tokens (byte-level, "
               << "vocabulary 256) into '" << dataOutput << "'\n";
  return 0;
}
