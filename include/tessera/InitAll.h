//===- InitAll.h - Registration of every Tessera dialect and pass -*- C++
//-*-===//

#ifndef TESSERA_INITALL_H
#define TESSERA_INITALL_H

namespace mlir {
class DialectRegistry;
} // namespace mlir

namespace tessera {

/// Registers the nn and dist dialects and the upstream dialects Tessera
/// programs use (func, arith, tensor).
void registerAllDialects(mlir::DialectRegistry &registry);

/// Registers every Tessera pass and pipeline (the test passes are
/// tessera-opt's own: test/lib).
void registerAllPasses();

} // namespace tessera

#endif // TESSERA_INITALL_H
