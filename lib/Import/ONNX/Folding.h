//===- Folding.h - ONNX nodes evaluated at import ---------------*- C++ -*-===//
//
// A node whose inputs are all known at import is evaluated on the host:
// the shape subgraphs that exporters write (Shape -> Gather -> Concat ->
// Reshape), masks (Trilu, Where, Equal) and tables (Range, Sin, Cos), so
// that the nn program sees their results as constants.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_LIB_IMPORT_ONNX_FOLDING_H
#define TESSERA_LIB_IMPORT_ONNX_FOLDING_H

#include "GraphImporter.h"

namespace tessera::onnx_import {

/// Evaluates a node on its inputs (null for an absent optional input).
using FoldFn = std::function<llvm::Expected<llvm::SmallVector<HostTensor>>(
    const onnx::NodeProto &, llvm::ArrayRef<const HostTensor *>)>;
using FolderTable = llvm::StringMap<FoldFn>;

/// The op types the importer evaluates at import.
const FolderTable &getFolders();

/// Reshape's target shape: 0 keeps the input's dim (unless `allowZero`),
/// -1 takes what is left.
llvm::Expected<llvm::SmallVector<int64_t>>
getReshapeShape(llvm::ArrayRef<int64_t> input, llvm::ArrayRef<int64_t> shape,
                bool allowZero);

/// Slice's per-dim [start, limit) of `inputShape` for ONNX's starts, ends,
/// axes and steps (clamped as ONNX clamps them); fails for steps other
/// than 1 where `unitStepsOnly`.
struct SliceBounds {
  llvm::SmallVector<int64_t> start, limit, step;
};
llvm::Expected<SliceBounds>
getSliceBounds(llvm::ArrayRef<int64_t> inputShape,
               llvm::ArrayRef<int64_t> starts, llvm::ArrayRef<int64_t> ends,
               std::optional<llvm::ArrayRef<int64_t>> axes,
               std::optional<llvm::ArrayRef<int64_t>> steps);

/// The reduced dims of a Reduce* node (its `axes` attribute, or input #1
/// from opset 18 and for ReduceSum from 13), normalized and sorted; all
/// dims when there are none, unless noop_with_empty_axes.
llvm::Expected<llvm::SmallVector<int64_t>>
getReduceDims(const onnx::NodeProto &node, const HostTensor *axesInput,
              int64_t rank);

/// Squeeze's and Unsqueeze's result shapes.
llvm::Expected<llvm::SmallVector<int64_t>>
getSqueezedShape(llvm::ArrayRef<int64_t> shape,
                 std::optional<llvm::ArrayRef<int64_t>> axes);
llvm::Expected<llvm::SmallVector<int64_t>>
getUnsqueezedShape(llvm::ArrayRef<int64_t> shape, llvm::ArrayRef<int64_t> axes);

} // namespace tessera::onnx_import

#endif // TESSERA_LIB_IMPORT_ONNX_FOLDING_H
