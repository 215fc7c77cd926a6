//===- Data.cpp - tessera data pack ---------------------------------------===//
//
//   tessera data pack TEXTFILE -o FILE.tokens
//
// Turns UTF-8 text into a token file (tessera/runtime/TokenFile.h) with a
// byte-level vocabulary: each byte of the text is one token id, so the
// vocabulary is 256 ids and any model with at least that many trains on it
// (tessera-run --data FILE.tokens).
//
//===----------------------------------------------------------------------===//

#include "Commands.h"

#include "tessera/runtime/TokenFile.h"

#include "llvm/Support/MemoryBuffer.h"

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

int cli::runData() {
  if (dataArguments.size() != 2 || dataArguments[0] != "pack")
    return reportError("tessera data expects 'pack TEXTFILE -o FILE'");
  if (dataOutput.empty())
    return reportError("tessera data pack needs -o FILE, the token file");
  const std::string &input = dataArguments[1];
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> text =
      llvm::MemoryBuffer::getFile(input, /*IsText=*/false);
  if (!text)
    return reportError("cannot read '" + input +
                       "': " + text.getError().message());
  llvm::StringRef bytes = (*text)->getBuffer();
  if (bytes.empty())
    return reportError("'" + input +
                       "' is empty: there is nothing to train on");
  std::vector<uint32_t> tokens(bytes.bytes_begin(), bytes.bytes_end());
  runtime::Status written =
      runtime::writeTokenFile(dataOutput, tokens, /*vocab=*/256);
  if (!written.ok())
    return reportError(written.message());
  llvm::outs() << "packed " << tokens.size() << " tokens (byte-level, "
               << "vocabulary 256) into '" << dataOutput << "'\n";
  return 0;
}
