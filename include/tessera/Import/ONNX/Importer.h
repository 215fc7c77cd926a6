//===- Importer.h - ONNX models as nn IR ------------------------*- C++ -*-===//
//
// Translates an ONNX ModelProto (opsets 13 to 17 of the default domain) into
// one func.func of nn ops with global static shapes, through libonnx: its
// protobuf classes, checker and shape inference. Graph inputs become data
// arguments, the float initializers that are trained parameters
// (`nn.param` = the initializer's name, PyTorch's state-dict names), graph
// outputs the results. Shape subgraphs and every other node whose inputs
// are all known at import are folded to constants.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_IMPORT_ONNX_IMPORTER_H
#define TESSERA_IMPORT_ONNX_IMPORTER_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>
#include <vector>

namespace tessera::onnx_import {

/// A loss the import appends to a graph that ends in logits.
enum class Loss { None, CrossEntropy };

struct ImportOptions {
  /// Static shapes for graph inputs whose dims are dynamic (`dim_param` or
  /// unknown), by input name.
  llvm::StringMap<llvm::SmallVector<int64_t>> inputShapes;
  /// Graph inputs whose values are fixed at import, by input name: the path
  /// of a TensorProto file. They are folded like constants (a Reshape's
  /// shape, a Slice's starts given as inputs).
  llvm::StringMap<std::string> boundInputs;
  /// CrossEntropy: the graph's one output is logits [..., vocab]; a labels
  /// argument (int64, the logits' shape without the last dim) follows the
  /// data, and the function returns their mean cross-entropy, so that a
  /// train step can minimize it.
  Loss loss = Loss::None;
};

/// An initializer's values, for the parameter argument it became; the
/// bytes live until the sink returns.
struct Weight {
  llvm::StringRef name;
  /// The argument's element type: f32, f64, f16, bf16.
  mlir::Type elementType;
  llvm::ArrayRef<int64_t> shape;
  /// Little-endian elements, row-major.
  llvm::ArrayRef<uint8_t> bytes;
};

/// Takes each parameter's weight, in argument order (the parameters follow
/// the data arguments), one at a time: the import never holds them all.
using WeightSink = llvm::function_ref<llvm::Error(const Weight &)>;

/// Parses `text` as "name=4x128" (the syntax of --input-shape) into
/// `options`; fails naming what is wrong.
llvm::Error parseInputShape(llvm::StringRef text, ImportOptions &options);
/// Parses `text` as "name=FILE.pb" (the syntax of --bind).
llvm::Error parseBoundInput(llvm::StringRef text, ImportOptions &options);

/// Imports the ONNX model at `path` (external data is read relative to its
/// directory). Fails with one message naming the problem: a file that is
/// not an ONNX model, an opset outside 13-17, dynamic dims without a shape,
/// or every unsupported op of the graph at once, with its node and opset.
/// With `weights`, their values are read (from the model or its external
/// data) and given to it.
llvm::Expected<mlir::OwningOpRef<mlir::ModuleOp>>
importFile(mlir::MLIRContext &context, llvm::StringRef path,
           const ImportOptions &options = {}, WeightSink weights = nullptr);

/// Imports a model held in memory; `path` names it in messages, and its
/// directory holds the external data.
llvm::Expected<mlir::OwningOpRef<mlir::ModuleOp>>
importModel(mlir::MLIRContext &context, llvm::StringRef bytes,
            llvm::StringRef path, const ImportOptions &options = {},
            WeightSink weights = nullptr);

} // namespace tessera::onnx_import

#endif // TESSERA_IMPORT_ONNX_IMPORTER_H
