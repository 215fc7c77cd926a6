//===- Pipeline.h - Names shared by the pipeline passes ----------*- C++
//-*-===//

#ifndef TESSERA_TRANSFORMS_PIPELINE_PIPELINE_H
#define TESSERA_TRANSFORMS_PIPELINE_PIPELINE_H

#include "llvm/ADT/StringRef.h"

namespace tessera {

/// The mesh axis that pipeline stages run along.
inline constexpr llvm::StringLiteral kPipelineAxis = "pp";
/// The mesh axis, in time rather than devices, that --tessera-microbatch
/// splits the batch over and --tessera-pipeline turns into a loop.
inline constexpr llvm::StringLiteral kMicrobatchAxis = "mb";

} // namespace tessera

#endif // TESSERA_TRANSFORMS_PIPELINE_PIPELINE_H
