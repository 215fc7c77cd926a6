// Built against an installed Tessera's compiler (find_package(Tessera)):
// registers its dialects and passes, parses a model, runs passes on its
// module (a textual pipeline: "tessera-propagate,tessera-partition") and
// prints the result.
//   compiler-consumer MODEL.mlir PASSES

#include "tessera/InitAll.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "llvm/Support/raw_ostream.h"

int main(int argc, char **argv) {
  if (argc != 3) {
    llvm::errs() << "usage: compiler-consumer MODEL.mlir PASSES\n";
    return 2;
  }
  mlir::DialectRegistry registry;
  tessera::registerAllDialects(registry);
  tessera::registerAllPasses();
  mlir::MLIRContext context(registry);
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceFile<mlir::ModuleOp>(argv[1], &context);
  if (!module)
    return 1;
  mlir::PassManager passes(&context, mlir::ModuleOp::getOperationName());
  if (mlir::failed(mlir::parsePassPipeline(argv[2], passes, llvm::errs())) ||
      mlir::failed(passes.run(*module)))
    return 1;
  module->print(llvm::outs());
  return 0;
}
