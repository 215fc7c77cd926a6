//===- Import.cpp - tessera import ----------------------------------------===//

#include "Commands.h"

#include "tessera/Import/ONNX/Importer.h"
#include "tessera/runtime/Dump.h"

#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/ToolOutputFile.h"

using namespace mlir;
using namespace tessera;
using namespace tessera::cli;
namespace cl = llvm::cl;

cl::SubCommand &cli::importCommand() {
  static cl::SubCommand command(
      "import", "Translate an ONNX model (opsets 13-17) into nn IR");
  return command;
}

static cl::opt<std::string> importInput(cl::Positional, cl::Required,
                                        cl::desc("<model.onnx>"),
                                        cl::sub(importCommand()));
static cl::opt<std::string> importOutput("o", cl::desc("Output file"),
                                         cl::value_desc("file"), cl::init("-"),
                                         cl::sub(importCommand()));
static cl::opt<std::string> weightsOutput(
    "weights-out",
    cl::desc("Write the initializers' values, one tensor per parameter "
             "argument in order, to this tensor file"),
    cl::value_desc("file"), cl::sub(importCommand()));
static cl::list<std::string> inputShapes(
    "input-shape",
    cl::desc("Static shape of an input with dynamic dims: NAME=4x128 "
             "(repeatable)"),
    cl::sub(importCommand()));

static runtime::DType getDType(Type type) {
  if (type.isF64())
    return runtime::DType::F64;
  if (type.isF16())
    return runtime::DType::F16;
  if (type.isBF16())
    return runtime::DType::BF16;
  return runtime::DType::F32;
}

static cl::list<std::string> boundInputs(
    "bind",
    cl::desc("Fix an input's value at import: NAME=FILE.pb (a TensorProto; "
             "repeatable), as a shape or an axes input that must be known"),
    cl::sub(importCommand()));

static cl::opt<onnx_import::Loss> loss(
    "loss", cl::desc("A loss to append to a graph that ends in logits"),
    cl::values(clEnumValN(onnx_import::Loss::None, "none", "none"),
               clEnumValN(onnx_import::Loss::CrossEntropy, "cross-entropy",
                          "the mean cross-entropy against a labels argument "
                          "(int64, the logits' shape without the last dim)")),
    cl::init(onnx_import::Loss::None), cl::sub(importCommand()));

int cli::runImport(MLIRContext &context) {
  onnx_import::ImportOptions options;
  options.loss = loss;
  for (const std::string &shape : inputShapes)
    if (llvm::Error error = onnx_import::parseInputShape(shape, options))
      return reportError(std::move(error));
  for (const std::string &bound : boundInputs)
    if (llvm::Error error = onnx_import::parseBoundInput(bound, options))
      return reportError(std::move(error));
  // The weights go to a file beside the target, renamed over it once the
  // import succeeds.
  std::string partial = weightsOutput + ".partial";
  runtime::TensorFileWriter writer;
  if (!weightsOutput.empty())
    if (runtime::Status status = writer.open(partial); !status.ok())
      return reportError(status.message());
  auto writeWeight = [&](const onnx_import::Weight &weight) -> llvm::Error {
    runtime::Status status = writer.write(
        getDType(weight.elementType),
        std::vector<int64_t>(weight.shape.begin(), weight.shape.end()),
        weight.bytes.data(), weight.bytes.size());
    return status.ok() ? llvm::Error::success()
                       : llvm::createStringError(status.message());
  };
  llvm::Expected<OwningOpRef<ModuleOp>> module = onnx_import::importFile(
      context, importInput, options,
      weightsOutput.empty() ? onnx_import::WeightSink() : writeWeight);
  if (!module) {
    if (!weightsOutput.empty())
      llvm::sys::fs::remove(partial);
    return reportError(module.takeError());
  }
  std::string error;
  std::unique_ptr<llvm::ToolOutputFile> output =
      openOutputFile(importOutput, &error);
  if (!output)
    return reportError(error);
  (*module)->print(output->os());
  output->os() << "\n";
  if (!weightsOutput.empty()) {
    if (runtime::Status status = writer.close(); !status.ok())
      return reportError(status.message());
    if (std::error_code code = llvm::sys::fs::rename(partial, weightsOutput))
      return reportError("cannot write '" + weightsOutput +
                         "': " + code.message());
  }
  output->keep();
  return 0;
}
