//===- NNDialect.h - nn dialect ---------------------------------*- C++ -*-===//

#ifndef TESSERA_NN_NNDIALECT_H
#define TESSERA_NN_NNDIALECT_H

#include "mlir/IR/Dialect.h"

#include "dialects/NN/IR/NNDialect.h.inc"

#endif // TESSERA_NN_NNDIALECT_H
