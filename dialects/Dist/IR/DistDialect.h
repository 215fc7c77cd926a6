//===- DistDialect.h - dist dialect -----------------------------*- C++ -*-===//

#ifndef TESSERA_DIST_DISTDIALECT_H
#define TESSERA_DIST_DISTDIALECT_H

#include "mlir/IR/Dialect.h"

#include "dialects/Dist/IR/DistDialect.h.inc"

#endif // TESSERA_DIST_DISTDIALECT_H
