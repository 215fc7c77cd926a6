//===- tessera-opt.cpp - Tessera pass driver ------------------------------===//
//
// Runs any Tessera pass or pipeline on .mlir input; the lit tests drive it.
//
//===----------------------------------------------------------------------===//

#include "tessera/InitAll.h"
#include "test/lib/TestPasses.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  tessera::registerAllDialects(registry);
  tessera::registerAllPasses();
  tessera::test::registerTesseraTestPasses();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "Tessera pass driver\n", registry));
}
