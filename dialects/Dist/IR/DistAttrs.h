//===- DistAttrs.h - dist dialect attributes --------------------*- C++ -*-===//

#ifndef TESSERA_DIST_DISTATTRS_H
#define TESSERA_DIST_DISTATTRS_H

#include "dialects/Dist/IR/DistDialect.h"
#include "mlir/IR/Attributes.h"
#include "mlir/IR/BuiltinAttributes.h"

#include "dialects/Dist/IR/DistEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/Dist/IR/DistAttrs.h.inc"

#endif // TESSERA_DIST_DISTATTRS_H
