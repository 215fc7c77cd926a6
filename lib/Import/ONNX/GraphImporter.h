//===- GraphImporter.h - The ONNX importer's shared state -------*- C++ -*-===//
//
// What the topic files of the importer (Elementwise, Linear, Shapes,
// Reductions) share: the values of the graph so far, as nn values or as
// tensors known at import (HostTensor), and the helpers that build nn ops
// on them with ONNX's broadcasting.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_LIB_IMPORT_ONNX_GRAPHIMPORTER_H
#define TESSERA_LIB_IMPORT_ONNX_GRAPHIMPORTER_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Error.h"

#include <onnx/onnx_pb.h>

#include <functional>
#include <optional>
#include <vector>

namespace tessera::onnx_import {

/// A tensor known at import: an ONNX Constant, an integer initializer, a
/// Shape of a static value, and whatever nodes compute from these alone.
/// Every element type's values are held as doubles (integers are exact up
/// to 2^53, which covers every shape and index).
struct HostTensor {
  /// onnx::TensorProto::DataType.
  int32_t elementType = onnx::TensorProto::FLOAT;
  llvm::SmallVector<int64_t> shape;
  std::vector<double> values;

  int64_t getSize() const;
  /// The values as integers (saturated to int64).
  llvm::SmallVector<int64_t> getInts() const;
};

/// A graph value: an nn value, or a tensor known at import (then `value` is
/// null until an nn op needs it as an operand).
struct GraphValue {
  mlir::Value value;
  std::optional<HostTensor> constant;
};

/// Reads a TensorProto's elements (raw_data, the typed fields, or external
/// data beside `modelPath`, the file the tensor came from) as doubles; fails
/// naming the tensor.
llvm::Expected<HostTensor> readTensor(const onnx::TensorProto &tensor,
                                      llvm::StringRef modelPath);
/// Fails when a tensor has a negative dim or more than 2^40 elements.
llvm::Error checkElementCount(const onnx::TensorProto &tensor);
/// A tensor's elements as little-endian bytes of their own type: a view of
/// the model's raw data, or read from its external data or typed fields.
struct TensorBytes {
  llvm::ArrayRef<uint8_t> bytes;
  std::vector<uint8_t> converted;
};
llvm::Expected<TensorBytes> readTensorBytes(const onnx::TensorProto &tensor,
                                            llvm::StringRef modelPath);
/// Fails when a tensor of the model (an initializer, an attribute, in a
/// subgraph or a function) has external data that lies outside the model's
/// directory or that its file does not hold; reads no data.
llvm::Error checkExternalData(const onnx::ModelProto &model,
                              llvm::StringRef modelPath);

/// Whether an ONNX element type is a float type.
bool isFloatType(int32_t elementType);
/// The nn element type of an ONNX one, or null for the types nn lacks.
mlir::Type getElementType(mlir::MLIRContext *context, int32_t elementType);
/// ONNX's name of an element type ("FLOAT", "INT64").
std::string getElementTypeName(int32_t elementType);

/// The most elements of a tensor the importer folds on the host (as
/// doubles: 512 MB), and of any tensor it types.
inline constexpr int64_t kMaxFoldedElements = int64_t(1) << 26;
inline constexpr int64_t kMaxElements = int64_t(1) << 40;
/// The element count of `shape`, or an error naming `what` when a dim is
/// negative or the count passes `limit` (or int64).
llvm::Expected<int64_t> getCheckedSize(llvm::ArrayRef<int64_t> shape,
                                       int64_t limit, llvm::StringRef what);

/// Row-major strides of `shape`.
llvm::SmallVector<int64_t> getStrides(llvm::ArrayRef<int64_t> shape);
/// The shape two shapes broadcast to (numpy's rule), or none.
std::optional<llvm::SmallVector<int64_t>>
getBroadcastShape(llvm::ArrayRef<int64_t> lhs, llvm::ArrayRef<int64_t> rhs);
/// `tensor` broadcast to `shape` (which it must broadcast to).
HostTensor broadcastHost(const HostTensor &tensor,
                         llvm::ArrayRef<int64_t> shape);

class GraphImporter;

/// Translates one node; reads its inputs and sets its outputs through the
/// importer. Errors name what is wrong; the importer adds the node.
using ConvertFn =
    std::function<llvm::Error(GraphImporter &, const onnx::NodeProto &)>;

/// The op types a topic file translates, keyed by ONNX op type.
using ConverterTable = llvm::StringMap<ConvertFn>;
void addElementwiseConverters(ConverterTable &table);
void addLinearConverters(ConverterTable &table);
void addShapeConverters(ConverterTable &table);
void addReductionConverters(ConverterTable &table);

class GraphImporter {
public:
  GraphImporter(mlir::OpBuilder &builder, std::string modelPath)
      : builder(builder), modelPath(std::move(modelPath)) {}

  mlir::OpBuilder &getBuilder() { return builder; }
  mlir::MLIRContext *getContext() { return builder.getContext(); }
  mlir::Location getLoc() const { return loc; }
  void setLoc(mlir::Location location) { loc = location; }
  /// The model file, beside which its external data lies.
  llvm::StringRef getModelPath() const { return modelPath; }

  void define(llvm::StringRef name, GraphValue value) {
    values[name] = std::move(value);
  }
  bool isDefined(llvm::StringRef name) const { return values.count(name); }
  const GraphValue *lookup(llvm::StringRef name) const;
  /// Forgets a value no node reads any more.
  void release(llvm::StringRef name) { values.erase(name); }
  /// The value named `name` as an nn value (a constant materialized).
  std::optional<mlir::Value> getNamedValue(llvm::StringRef name);

  /// Input `index` of `node`, or none when it is absent (past the end or
  /// named ""), ONNX's optional inputs.
  const GraphValue *getInput(const onnx::NodeProto &node, int index) const;
  /// The input's value as an nn value (constants materialized).
  llvm::Expected<mlir::Value> getValue(const onnx::NodeProto &node, int index);
  /// The input as an nn value that holds floats (nn computes on floats).
  llvm::Expected<mlir::Value> getFloatValue(const onnx::NodeProto &node,
                                            int index);
  /// The input as a tensor known at import; fails saying that `what` must
  /// be a constant.
  llvm::Expected<HostTensor> getConstant(const onnx::NodeProto &node, int index,
                                         llvm::StringRef what);
  /// The input's shape, and its element type as ONNX names it.
  llvm::Expected<llvm::SmallVector<int64_t>>
  getShape(const onnx::NodeProto &node, int index);
  llvm::Expected<int32_t> getONNXType(const onnx::NodeProto &node, int index);

  void setOutput(const onnx::NodeProto &node, int index, mlir::Value value);
  void setOutput(const onnx::NodeProto &node, int index, HostTensor value);

  /// `tensor` as an nn.constant (a splat when its values are equal).
  mlir::Value materialize(const HostTensor &tensor);
  /// `value` broadcast to `shape` (numpy's rule; nothing when equal).
  mlir::Value broadcastTo(mlir::Value value, llvm::ArrayRef<int64_t> shape);
  /// The inputs `indices` of `node` as nn values broadcast to one shape of
  /// one element type; constants are made in that shape directly.
  llvm::Expected<llvm::SmallVector<mlir::Value>>
  getBroadcastValues(const onnx::NodeProto &node, llvm::ArrayRef<int> indices);
  /// A splat constant of `value` in `type`, or in the type of `like`.
  mlir::Value getSplat(mlir::RankedTensorType type, double value);
  mlir::Value getSplat(mlir::Value like, double value) {
    return getSplat(mlir::cast<mlir::RankedTensorType>(like.getType()), value);
  }
  /// `value` reshaped to `shape`.
  mlir::Value reshape(mlir::Value value, llvm::ArrayRef<int64_t> shape);

  /// Whether a node or the graph's outputs read the value `name`.
  bool isRead(llvm::StringRef name) const { return readValues.contains(name); }
  void setRead(llvm::StringRef name) { readValues.insert(name); }

  /// Where the function's arguments go: `body`'s, their types in `types`.
  void setArguments(mlir::Block *body,
                    llvm::SmallVectorImpl<mlir::Type> *types) {
    argumentBlock = body;
    argumentTypes = types;
  }
  /// The step counter that training-mode Dropout draws its masks for: a
  /// new argument on first use (which the importer marks nn.state "step").
  mlir::Value getStep();
  std::optional<unsigned> getStepIndex() const { return stepIndex; }
  /// A seed no other random op of the graph has.
  int64_t takeSeed() { return nextSeed++; }

private:
  mlir::OpBuilder &builder;
  std::string modelPath;
  mlir::Location loc = mlir::UnknownLoc::get(builder.getContext());
  llvm::StringMap<GraphValue> values;
  llvm::StringSet<> readValues;
  mlir::Block *argumentBlock = nullptr;
  llvm::SmallVectorImpl<mlir::Type> *argumentTypes = nullptr;
  std::optional<unsigned> stepIndex;
  int64_t nextSeed = 0;
};

/// Attribute helpers: a node's attribute by name, or the default.
int64_t getIntAttr(const onnx::NodeProto &node, llvm::StringRef name,
                   int64_t otherwise);
float getFloatAttr(const onnx::NodeProto &node, llvm::StringRef name,
                   float otherwise);
std::optional<llvm::SmallVector<int64_t>>
getIntsAttr(const onnx::NodeProto &node, llvm::StringRef name);
const onnx::AttributeProto *getAttr(const onnx::NodeProto &node,
                                    llvm::StringRef name);

/// A dim index in [-rank, rank) as a dim in [0, rank); fails naming `what`.
llvm::Expected<int64_t> normalizeAxis(int64_t axis, int64_t rank,
                                      llvm::StringRef what);

/// Flatten's axis in [-rank, rank] as a dim in [0, rank].
llvm::Expected<int64_t> normalizeFlattenAxis(int64_t axis, int64_t rank);

/// Fails unless `value` holds floats: nn computes on floats only.
llvm::Error requireFloat(mlir::Value value, const onnx::NodeProto &node);

/// An error with a message.
llvm::Error makeError(const llvm::Twine &message);

} // namespace tessera::onnx_import

#endif // TESSERA_LIB_IMPORT_ONNX_GRAPHIMPORTER_H
