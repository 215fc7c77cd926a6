//===- tessera-opt.cpp - Tessera pass driver ------------------------------===//
//
// Runs any Tessera pass or pipeline on .mlir input; the lit tests drive it.
//
//===----------------------------------------------------------------------===//

#include "tessera/InitAll.h"
#include "tessera/Support/Nesting.h"
#include "test/lib/TestPasses.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  tessera::registerAllDialects(registry);
  tessera::registerAllPasses();
  tessera::test::registerTesseraTestPasses();
  auto [inputFilename, outputFilename] = mlir::registerAndParseCLIOptions(
      argc, argv, "Tessera pass driver\n", registry);
  mlir::MlirOptMainConfig config =
      mlir::MlirOptMainConfig::createFromCLOptions();
  // Listings read no input.
  if (config.shouldShowDialects() || config.shouldListPasses())
    return mlir::asMainReturnCode(
        mlir::MlirOptMain(argc, argv, inputFilename, outputFilename, registry));

  std::string error;
  std::unique_ptr<llvm::MemoryBuffer> input =
      mlir::openInputFile(inputFilename, &error);
  if (!input) {
    llvm::errs() << error << "\n";
    return 1;
  }
  // The parser recurses per level of nesting: refuse what would overflow
  // its stack, as `tessera` does.
  if (std::optional<size_t> deep = tessera::findNestingOverflow(
          input->getBuffer(), tessera::kMaxNestingDepth)) {
    llvm::SourceMgr sourceMgr;
    llvm::StringRef name = input->getBufferIdentifier();
    const char *at = input->getBufferStart() + *deep;
    unsigned id = sourceMgr.AddNewSourceBuffer(std::move(input), llvm::SMLoc());
    auto [line, column] =
        sourceMgr.getLineAndColumn(llvm::SMLoc::getFromPointer(at), id);
    llvm::errs() << name << ":" << line << ":" << column
                 << ": error: nested deeper than " << tessera::kMaxNestingDepth
                 << " levels, which no model needs (the parser would overflow "
                    "its stack)\n";
    return 1;
  }
  std::unique_ptr<llvm::ToolOutputFile> output =
      mlir::openOutputFile(outputFilename, &error);
  if (!output) {
    llvm::errs() << error << "\n";
    return 1;
  }
  if (mlir::failed(
          mlir::MlirOptMain(output->os(), std::move(input), registry, config)))
    return 1;
  output->keep();
  return 0;
}
