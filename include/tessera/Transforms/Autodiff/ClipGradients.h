//===- ClipGradients.h - The mark on gradient clipping's norm ---*- C++ -*-===//

#ifndef TESSERA_TRANSFORMS_AUTODIFF_CLIPGRADIENTS_H
#define TESSERA_TRANSFORMS_AUTODIFF_CLIPGRADIENTS_H

#include "llvm/ADT/StringRef.h"

namespace tessera {

/// The unit attribute that --tessera-clip-gradients sets on the op of the
/// global gradient norm it makes (the nn.sqrt of a sum of nn.sum_squares
/// that every update reads as its grad_norm). --tessera-pipeline finds the
/// norm by this mark rather than by the norm's shape, and the export leaves
/// it out of the plan: it is no attribute of the kernel.
inline constexpr llvm::StringLiteral kGlobalNormAttrName =
    "tessera.global_norm";

} // namespace tessera

#endif // TESSERA_TRANSFORMS_AUTODIFF_CLIPGRADIENTS_H
