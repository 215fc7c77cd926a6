//===- InitAll.cpp - Registration of every Tessera dialect and pass -------===//

#include "tessera/InitAll.h"

#include "dialects/Dist/IR/DistDialect.h"
#include "dialects/NN/IR/NNDialect.h"
#include "tessera/Pipelines/Pipelines.h"
#include "tessera/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Transforms/Passes.h"

void tessera::registerAllDialects(mlir::DialectRegistry &registry) {
  registry.insert<nn::NNDialect, dist::DistDialect, mlir::func::FuncDialect,
                  mlir::arith::ArithDialect, mlir::tensor::TensorDialect>();
}

void tessera::registerAllPasses() {
  mlir::registerTransformsPasses();
  registerTesseraPasses();
  registerTesseraPipelines();
}
