//===- ONNXImportFuzzer.cpp - libFuzzer harness of the ONNX importer ------===//
//
// Feeds arbitrary bytes to onnx_import::importModel, weights read: every
// input must import or fail with an error, never crash, hang or trip a
// sanitizer. An input that begins with "EXT" carries external data: a
// 4-byte little-endian model length, the model, then the bytes of
// weights.data, written beside the model in this process's directory; a
// file of marker bytes lies one directory up, outside the model's, and no
// import may read a byte of it. Built by scripts/fuzz-onnx-import.sh.
//
//===----------------------------------------------------------------------===//

#include "tessera/Import/ONNX/Importer.h"

#include "dialects/NN/IR/NNDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>

namespace {

/// The bytes of the file outside the model's directory.
constexpr llvm::StringLiteral kOutsideMarker = "OUTSIDE!";

/// This process's directory: `model/` for the model and its data, and
/// `outside.data` beside it.
const std::filesystem::path &getDirectory() {
  static const std::filesystem::path directory = [] {
    std::filesystem::path made = std::filesystem::temp_directory_path() /
                                 ("tessera-onnx-fuzz-" +
                                  std::to_string(getpid()));
    std::filesystem::create_directories(made / "model");
    std::ofstream outside(made / "outside.data", std::ios::binary);
    for (int i = 0; i < 4096; ++i)
      outside << kOutsideMarker.str();
    return made;
  }();
  return directory;
}

/// Writes `bytes` to `path`.
void writeFile(const std::filesystem::path &path, llvm::StringRef bytes) {
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  file.write(bytes.data(), bytes.size());
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static mlir::MLIRContext *context = [] {
    auto *made = new mlir::MLIRContext();
    made->loadDialect<tessera::nn::NNDialect, mlir::func::FuncDialect>();
    made->printOpOnDiagnostic(false);
    return made;
  }();
  mlir::ScopedDiagnosticHandler quiet(
      context, [](mlir::Diagnostic &) { return mlir::success(); });
  llvm::StringRef model(reinterpret_cast<const char *>(data), size);
  // An input holding the marker itself could import it legitimately.
  if (model.contains(kOutsideMarker))
    return 0;
  std::string modelPath = "fuzz/input.onnx";
  if (model.consume_front("EXT")) {
    if (model.size() < 4)
      return 0;
    size_t modelBytes = 0;
    for (int i = 0; i < 4; ++i)
      modelBytes |= static_cast<size_t>(static_cast<uint8_t>(model[i]))
                    << (8 * i);
    model = model.drop_front(4);
    if (modelBytes > model.size())
      return 0;
    std::filesystem::path directory = getDirectory() / "model";
    writeFile(directory / "weights.data", model.drop_front(modelBytes));
    model = model.take_front(modelBytes);
    modelPath = (directory / "input.onnx").string();
    writeFile(modelPath, model);
  }
  size_t weightBytes = 0;
  auto sink = [&](const tessera::onnx_import::Weight &weight) {
    weightBytes += weight.bytes.size();
    llvm::StringRef bytes(reinterpret_cast<const char *>(weight.bytes.data()),
                          weight.bytes.size());
    if (bytes.contains(kOutsideMarker))
      std::abort(); // read outside the model's directory
    return llvm::Error::success();
  };
  auto module = tessera::onnx_import::importModel(*context, model, modelPath,
                                                  {}, sink);
  if (!module)
    llvm::consumeError(module.takeError());
  return 0;
}
