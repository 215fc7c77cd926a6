//===- FusedProjections.h - Parts of a weight as a dim ----------*- C++ -*-===//

#ifndef TESSERA_LIB_IMPORT_ONNX_FUSEDPROJECTIONS_H
#define TESSERA_LIB_IMPORT_ONNX_FUSEDPROJECTIONS_H

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace tessera::onnx_import {

/// Gives each parameter that one projection reads, and whose output only
/// slices of one width along its features read (q, k and v of a fused
/// [3h, h] weight), a dim for the parts: [3h, h] as [3, h, h], its bias
/// [3h] as [3, h], and each slice one index of the parts' dim. The
/// parameters' bytes are unchanged; `function`'s type follows its
/// arguments'.
void splitFusedProjections(mlir::func::FuncOp function);

} // namespace tessera::onnx_import

#endif // TESSERA_LIB_IMPORT_ONNX_FUSEDPROJECTIONS_H
