//===- Passes.h - Tessera's compiler passes ---------------------*- C++ -*-===//

#ifndef TESSERA_TRANSFORMS_PASSES_H
#define TESSERA_TRANSFORMS_PASSES_H

#include "dialects/Dist/IR/DistDialect.h"
#include "tessera/Transforms/PassOptions.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace tessera {

#define GEN_PASS_DECL
#define GEN_PASS_REGISTRATION
#include "tessera/Transforms/Passes.h.inc"

} // namespace tessera

#endif // TESSERA_TRANSFORMS_PASSES_H
