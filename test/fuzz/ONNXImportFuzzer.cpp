//===- ONNXImportFuzzer.cpp - libFuzzer harness of the ONNX importer ------===//
//
// Feeds arbitrary bytes to onnx_import::importModel, weights read: every
// input must import or fail with an error, never crash, hang or trip a
// sanitizer. Built by scripts/fuzz-onnx-import.sh.
//
//===----------------------------------------------------------------------===//

#include "tessera/Import/ONNX/Importer.h"

#include "dialects/NN/IR/NNDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"

#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static mlir::MLIRContext *context = [] {
    auto *made = new mlir::MLIRContext();
    made->loadDialect<tessera::nn::NNDialect, mlir::func::FuncDialect>();
    made->printOpOnDiagnostic(false);
    return made;
  }();
  mlir::ScopedDiagnosticHandler quiet(
      context, [](mlir::Diagnostic &) { return mlir::success(); });
  size_t weightBytes = 0;
  auto sink = [&](const tessera::onnx_import::Weight &weight) {
    weightBytes += weight.bytes.size();
    return llvm::Error::success();
  };
  auto module = tessera::onnx_import::importModel(
      *context,
      llvm::StringRef(reinterpret_cast<const char *>(data), size),
      "fuzz/input.onnx", {}, sink);
  if (!module)
    llvm::consumeError(module.takeError());
  return 0;
}
