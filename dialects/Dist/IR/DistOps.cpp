//===- DistOps.cpp - dist dialect operations ------------------------------===//

#include "dialects/Dist/IR/DistOps.h"

#include "dialects/Interfaces/CostOpInterface.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallBitVector.h"

using namespace mlir;
using namespace tessera;
using namespace tessera::dist;

//===----------------------------------------------------------------------===//
// Sharding checks against a mesh
//===----------------------------------------------------------------------===//

LogicalResult tessera::dist::verifyShardingForType(
    ShardingAttr sharding, MeshOp mesh, Type type,
    function_ref<InFlightDiagnostic()> emitError) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor)
    return emitError() << "expects a ranked tensor to shard, got " << type;
  // A partitioned program holds a flat value's 1-d piece.
  bool flatPiece = !sharding.getFlatAxes().empty() && tensor.getRank() == 1;
  if (sharding.getRank() != tensor.getRank() && !flatPiece)
    return emitError() << "sharding has " << sharding.getRank()
                       << " dims but the tensor has rank " << tensor.getRank();
  for (StringAttr axis : sharding.getAllAxes())
    if (!mesh.getAxisIndex(axis.getValue()))
      return emitError() << "mesh @" << mesh.getSymName() << " has no axis \""
                         << axis.getValue() << "\"";
  return success();
}

LogicalResult
tessera::dist::verifyShardingAt(ShardingAttr sharding, Operation *from,
                                Type type,
                                function_ref<InFlightDiagnostic()> emitError) {
  auto mesh =
      SymbolTable::lookupNearestSymbolFrom<MeshOp>(from, sharding.getMesh());
  if (!mesh)
    return emitError() << "unknown mesh " << sharding.getMesh();
  return verifyShardingForType(sharding, mesh, type, emitError);
}

//===----------------------------------------------------------------------===//
// MeshOp
//===----------------------------------------------------------------------===//

/// Parses `["dp"=2, "tp"=4]`.
static ParseResult parseMeshAxes(OpAsmParser &parser, ArrayAttr &names,
                                 DenseI64ArrayAttr &shape) {
  SmallVector<Attribute> axisNames;
  SmallVector<int64_t> sizes;
  auto parseAxis = [&]() -> ParseResult {
    std::string name;
    int64_t size = 0;
    if (parser.parseString(&name) || parser.parseEqual() ||
        parser.parseInteger(size))
      return failure();
    axisNames.push_back(parser.getBuilder().getStringAttr(name));
    sizes.push_back(size);
    return success();
  };
  if (parser.parseCommaSeparatedList(OpAsmParser::Delimiter::Square, parseAxis))
    return failure();
  names = parser.getBuilder().getArrayAttr(axisNames);
  shape = parser.getBuilder().getDenseI64ArrayAttr(sizes);
  return success();
}

static void printMeshAxes(OpAsmPrinter &printer, Operation *, ArrayAttr names,
                          DenseI64ArrayAttr shape) {
  printer << "[";
  llvm::interleaveComma(
      llvm::zip(names, shape.asArrayRef()), printer, [&](auto axis) {
        printer.printString(cast<StringAttr>(std::get<0>(axis)).getValue());
        printer << "=" << std::get<1>(axis);
      });
  printer << "]";
}

/// Whether `name` names the microbatch axis (see DistDialect).
static bool isMicrobatchAxis(Attribute name) {
  return cast<StringAttr>(name).getValue() == DistDialect::kMicrobatchAxisName;
}

LogicalResult MeshOp::verify() {
  if (getAxisNames().size() != getShape().size())
    return emitOpError("has ") << getAxisNames().size() << " axis names but "
                               << getShape().size() << " sizes";
  llvm::DenseSet<StringAttr> seen;
  for (auto [name, size] : llvm::zip(getAxisNames(), getShape())) {
    auto axis = cast<StringAttr>(name);
    if (axis.getValue().empty())
      return emitOpError("has an axis with an empty name");
    if (!seen.insert(axis).second)
      return emitOpError("has axis \"") << axis.getValue() << "\" twice";
    if (size < 1)
      return emitOpError("axis \"") << axis.getValue() << "\" has size " << size
                                    << ", expected at least 1";
  }
  // The microbatch axis is time, not devices: a step's microbatches run one
  // after another on the same devices, so it is bounded on its own. With
  // both bounds, no product of a mesh's axis sizes passes 2^40.
  if (std::optional<int64_t> microbatches =
          getAxisSize(DistDialect::kMicrobatchAxisName);
      microbatches && *microbatches > kMaxMicrobatches)
    return emitOpError("axis \"")
           << DistDialect::kMicrobatchAxisName << "\" has " << *microbatches
           << " microbatches, more than " << kMaxMicrobatches
           << " (2^20), the most a step runs";
  // The devices, checked as their count grows, so that it cannot overflow.
  int64_t devices = 1;
  for (auto [name, size] : llvm::zip(getAxisNames(), getShape())) {
    if (isMicrobatchAxis(name))
      continue;
    if (size > kMaxDevices / devices)
      return emitOpError("has more than ")
             << kMaxDevices << " devices (2^20), the most a plan runs on";
    devices *= size;
  }
  return success();
}

int64_t MeshOp::getNumDevices() {
  int64_t devices = 1;
  for (auto [name, size] : llvm::zip(getAxisNames(), getShape()))
    if (!isMicrobatchAxis(name))
      devices *= size;
  return devices;
}

std::optional<int64_t> MeshOp::getAxisIndex(StringRef axis) {
  for (auto [index, name] : llvm::enumerate(getAxisNames()))
    if (cast<StringAttr>(name).getValue() == axis)
      return index;
  return std::nullopt;
}

std::optional<int64_t> MeshOp::getAxisSize(StringRef axis) {
  if (std::optional<int64_t> index = getAxisIndex(axis))
    return getShape()[*index];
  return std::nullopt;
}

//===----------------------------------------------------------------------===//
// ShardingConstraintOp
//===----------------------------------------------------------------------===//

LogicalResult
ShardingConstraintOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  auto mesh = symbolTable.lookupNearestSymbolFrom<MeshOp>(
      *this, getSharding().getMesh());
  if (!mesh)
    return emitOpError("names unknown mesh ") << getSharding().getMesh();
  return verifyShardingForType(getSharding(), mesh, getType(),
                               [&]() { return emitOpError(); });
}

LogicalResult
ShardingConstraintOp::buildGradients(OpBuilder &builder,
                                     ArrayRef<Value> resultGradients,
                                     SmallVectorImpl<Value> &operandGradients) {
  Value gradient = resultGradients.front();
  if (!gradient) {
    operandGradients.push_back(nullptr);
    return success();
  }
  // A pending sum's gradient is the same on every device: no unreduced axes.
  ShardingAttr sharding = getSharding();
  auto constraint = ShardingAttr::get(
      getContext(), sharding.getMesh(), sharding.getDims(),
      sharding.getReplicatedAxes(), {}, sharding.getFlatAxes());
  operandGradients.push_back(
      ShardingConstraintOp::create(builder, getLoc(), gradient, constraint));
  return success();
}

//===----------------------------------------------------------------------===//
// Collectives
//===----------------------------------------------------------------------===//

MeshOp CollectiveOpInterface::getMesh(SymbolTableCollection &symbolTable) {
  return symbolTable.lookupNearestSymbolFrom<MeshOp>(getOperation(),
                                                     getMeshAttr());
}

int64_t CollectiveOpInterface::getGroupSize(MeshOp mesh) {
  int64_t size = 1;
  for (Attribute axis : getMeshAxes())
    size *= mesh.getAxisSize(cast<StringAttr>(axis).getValue()).value_or(1);
  return size;
}

int64_t CollectiveOpInterface::getOperandBytes() {
  return getTensorBytes(getOperation()->getOperand(0).getType());
}

int64_t CollectiveOpInterface::getBytesPerDevice() {
  if (isa<AllSliceOp>(getOperation()))
    return 0;
  return getOperandBytes();
}

/// Checks what needs no mesh: at least one axis, none twice, one element
/// type, and `dims` in range of the operand's rank.
static LogicalResult verifyCollective(Operation *op, ArrayAttr axes,
                                      ArrayRef<int64_t> dims = {}) {
  if (axes.empty())
    return op->emitOpError("expects at least one mesh axis");
  llvm::DenseSet<Attribute> seen;
  for (Attribute axis : axes)
    if (!seen.insert(axis).second)
      return op->emitOpError("names mesh axis ") << axis << " twice";
  auto input = cast<RankedTensorType>(op->getOperand(0).getType());
  auto result = cast<RankedTensorType>(op->getResult(0).getType());
  if (input.getElementType() != result.getElementType())
    return op->emitOpError("expects the result element type ")
           << input.getElementType() << ", got " << result.getElementType();
  if (input.getRank() != result.getRank())
    return op->emitOpError("expects a result of rank ")
           << input.getRank() << ", got " << result.getRank();
  for (int64_t dim : dims)
    if (dim < 0 || dim >= input.getRank())
      return op->emitOpError("dim ")
             << dim << " is out of range for rank " << input.getRank();
  return success();
}

/// Checks the mesh and its axes, then the op's shapes against the group size.
static LogicalResult verifyCollectiveMesh(CollectiveOpInterface op,
                                          SymbolTableCollection &symbolTable) {
  MeshOp mesh = op.getMesh(symbolTable);
  if (!mesh)
    return op->emitOpError("names unknown mesh ") << op.getMeshAttr();
  for (Attribute axis : op.getMeshAxes())
    if (!mesh.getAxisIndex(cast<StringAttr>(axis).getValue()))
      return op->emitOpError("mesh @")
             << mesh.getSymName() << " has no axis " << axis;
  return op.verifyGroupShapes(op.getGroupSize(mesh));
}

/// Checks that the result has the operand's shape with `dim` scaled: times
/// `multiply` when positive, divided by `divide` (which must divide it).
static LogicalResult expectScaledDims(Operation *op, int64_t groupSize,
                                      std::optional<int64_t> divideDim,
                                      std::optional<int64_t> multiplyDim) {
  auto input = cast<RankedTensorType>(op->getOperand(0).getType());
  auto result = cast<RankedTensorType>(op->getResult(0).getType());
  SmallVector<int64_t> expected(input.getShape());
  if (divideDim) {
    if (expected[*divideDim] % groupSize != 0)
      return op->emitOpError("dim ")
             << *divideDim << " of size " << expected[*divideDim]
             << " is not divisible by the group size " << groupSize;
    expected[*divideDim] /= groupSize;
  }
  if (multiplyDim)
    expected[*multiplyDim] *= groupSize;
  if (ArrayRef<int64_t>(expected) != result.getShape()) {
    InFlightDiagnostic diag = op->emitOpError("expects a result of shape [");
    llvm::interleaveComma(expected, diag);
    diag << "] for group size " << groupSize << ", got [";
    llvm::interleaveComma(result.getShape(), diag);
    return diag << "]";
  }
  return success();
}

/// A collective whose group is one device passes its operand through; the
/// mesh is looked up only when the types allow it.
static OpFoldResult foldSingleDeviceGroup(CollectiveOpInterface op) {
  Value input = op->getOperand(0);
  // A started collective stays what its dist.wait completes.
  if (input.getType() != op->getResult(0).getType() ||
      op->hasAttr(DistDialect::kStreamAttrName))
    return {};
  auto mesh =
      SymbolTable::lookupNearestSymbolFrom<MeshOp>(op, op.getMeshAttr());
  if (!mesh)
    return {};
  for (Attribute axis : op.getMeshAxes())
    if (mesh.getAxisSize(cast<StringAttr>(axis).getValue()) != 1)
      return {};
  return input;
}

#define TESSERA_COLLECTIVE_SYMBOL_USES(OpTy)                                   \
  LogicalResult OpTy::verifySymbolUses(SymbolTableCollection &symbolTable) {   \
    return verifyCollectiveMesh(*this, symbolTable);                           \
  }
TESSERA_COLLECTIVE_SYMBOL_USES(AllReduceOp)
TESSERA_COLLECTIVE_SYMBOL_USES(AllGatherOp)
TESSERA_COLLECTIVE_SYMBOL_USES(ReduceScatterOp)
TESSERA_COLLECTIVE_SYMBOL_USES(AllToAllOp)
TESSERA_COLLECTIVE_SYMBOL_USES(AllSliceOp)
TESSERA_COLLECTIVE_SYMBOL_USES(CollectivePermuteOp)
TESSERA_COLLECTIVE_SYMBOL_USES(BroadcastOp)
#undef TESSERA_COLLECTIVE_SYMBOL_USES

#define TESSERA_COLLECTIVE_FOLD(OpTy)                                          \
  OpFoldResult OpTy::fold(FoldAdaptor) { return foldSingleDeviceGroup(*this); }
TESSERA_COLLECTIVE_FOLD(AllReduceOp)
TESSERA_COLLECTIVE_FOLD(AllGatherOp)
TESSERA_COLLECTIVE_FOLD(ReduceScatterOp)
TESSERA_COLLECTIVE_FOLD(AllToAllOp)
TESSERA_COLLECTIVE_FOLD(AllSliceOp)
TESSERA_COLLECTIVE_FOLD(BroadcastOp)
#undef TESSERA_COLLECTIVE_FOLD

/// With one device, only the permutation 0 -> 0 keeps the tensor; an empty
/// one sends nothing and leaves zeros.
OpFoldResult CollectivePermuteOp::fold(FoldAdaptor) {
  if (getPairs() != ArrayRef<int64_t>{0, 0})
    return {};
  return foldSingleDeviceGroup(*this);
}

LogicalResult AllReduceOp::verify() {
  return verifyCollective(*this, getMeshAxes());
}
LogicalResult AllReduceOp::verifyGroupShapes(int64_t) { return success(); }

LogicalResult AllGatherOp::verify() {
  return verifyCollective(*this, getMeshAxes(),
                          {static_cast<int64_t>(getDim())});
}
LogicalResult AllGatherOp::verifyGroupShapes(int64_t groupSize) {
  return expectScaledDims(*this, groupSize, std::nullopt,
                          static_cast<int64_t>(getDim()));
}

LogicalResult ReduceScatterOp::verify() {
  return verifyCollective(*this, getMeshAxes(),
                          {static_cast<int64_t>(getDim())});
}
LogicalResult ReduceScatterOp::verifyGroupShapes(int64_t groupSize) {
  return expectScaledDims(*this, groupSize, static_cast<int64_t>(getDim()),
                          std::nullopt);
}

LogicalResult AllToAllOp::verify() {
  return verifyCollective(*this, getMeshAxes(),
                          {static_cast<int64_t>(getSplitDim()),
                           static_cast<int64_t>(getConcatDim())});
}
LogicalResult AllToAllOp::verifyGroupShapes(int64_t groupSize) {
  return expectScaledDims(*this, groupSize, static_cast<int64_t>(getSplitDim()),
                          static_cast<int64_t>(getConcatDim()));
}

LogicalResult AllSliceOp::verify() {
  return verifyCollective(*this, getMeshAxes(),
                          {static_cast<int64_t>(getDim())});
}
LogicalResult AllSliceOp::verifyGroupShapes(int64_t groupSize) {
  return expectScaledDims(*this, groupSize, static_cast<int64_t>(getDim()),
                          std::nullopt);
}

LogicalResult CollectivePermuteOp::verify() {
  if (getPairs().size() % 2 != 0)
    return emitOpError("expects (source, target) pairs, got ")
           << getPairs().size() << " indices";
  return verifyCollective(*this, getMeshAxes());
}
LogicalResult CollectivePermuteOp::verifyGroupShapes(int64_t groupSize) {
  llvm::SmallBitVector sources(groupSize), targets(groupSize);
  ArrayRef<int64_t> pairs = getPairs();
  for (size_t i = 0; i < pairs.size(); i += 2) {
    int64_t source = pairs[i], target = pairs[i + 1];
    for (int64_t index : {source, target})
      if (index < 0 || index >= groupSize)
        return emitOpError("index ")
               << index << " is out of range for group size " << groupSize;
    if (sources.test(source))
      return emitOpError("device ") << source << " is a source twice";
    if (targets.test(target))
      return emitOpError("device ") << target << " is a target twice";
    sources.set(source);
    targets.set(target);
  }
  return success();
}

LogicalResult BroadcastOp::verify() {
  return verifyCollective(*this, getMeshAxes());
}
LogicalResult BroadcastOp::verifyGroupShapes(int64_t groupSize) {
  auto root = static_cast<int64_t>(getRoot());
  if (root < 0 || root >= groupSize)
    return emitOpError("root ")
           << root << " is out of range for group size " << groupSize;
  return success();
}

#include "dialects/Dist/IR/DistOpInterfaces.cpp.inc"

#define GET_OP_CLASSES
#include "dialects/Dist/IR/DistOps.cpp.inc"

LogicalResult WaitOp::verify() {
  Operation *start = getInput().getDefiningOp();
  if (!start || !start->hasAttr(DistDialect::kStreamAttrName))
    return emitOpError("expects the result of a collective or send started "
                       "on a stream ('")
           << DistDialect::kStreamAttrName << "')";
  return success();
}

//===----------------------------------------------------------------------===//
// Axis index
//===----------------------------------------------------------------------===//

SmallVector<StringRef> AxisIndexOp::getGroup(unsigned index) {
  SmallVector<StringRef> axes;
  for (Attribute axis : cast<ArrayAttr>(getGroups()[index]))
    axes.push_back(cast<StringAttr>(axis).getValue());
  return axes;
}

LogicalResult AxisIndexOp::verify() {
  int64_t size = getResult().getType().getDimSize(0);
  if (size != static_cast<int64_t>(getGroups().size()))
    return emitOpError("expects a result of one element per group, got ")
           << size << " for " << getGroups().size() << " groups";
  for (unsigned index = 0; index < getGroups().size(); ++index) {
    SmallVector<StringRef> axes = getGroup(index);
    for (auto [position, axis] : llvm::enumerate(axes))
      if (llvm::is_contained(ArrayRef(axes).take_front(position), axis))
        return emitOpError("names mesh axis \"")
               << axis << "\" twice in group " << index;
  }
  return success();
}

LogicalResult
AxisIndexOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  auto mesh = symbolTable.lookupNearestSymbolFrom<MeshOp>(*this, getMeshAttr());
  if (!mesh)
    return emitOpError("names unknown mesh ") << getMeshAttr();
  for (unsigned index = 0; index < getGroups().size(); ++index)
    for (StringRef axis : getGroup(index))
      if (!mesh.getAxisIndex(axis) && axis != DistDialect::kMicrobatchAxisName)
        return emitOpError("mesh @")
               << mesh.getSymName() << " has no axis \"" << axis << "\"";
  return success();
}

//===----------------------------------------------------------------------===//
// Pipeline units
//===----------------------------------------------------------------------===//

LogicalResult MicrobatchSliceOp::verify() {
  auto input = cast<RankedTensorType>(getInput().getType());
  auto result = cast<RankedTensorType>(getResult().getType());
  int64_t parts = getMicrobatches();
  SmallVector<int64_t> expected(input.getShape());
  if (parts < 1 || input.getRank() == 0 || expected[0] % parts != 0 ||
      input.getElementType() != result.getElementType())
    return emitOpError("expects a batch whose dim 0 splits into ")
           << parts << " microbatches";
  expected[0] /= parts;
  if (result.getShape() != ArrayRef<int64_t>(expected))
    return emitOpError("expects a result of ")
           << parts << "th of dim 0 of the input, got " << result;
  return success();
}

//===----------------------------------------------------------------------===//
// Point to point
//===----------------------------------------------------------------------===//

/// Checks that `axis` is an axis of the mesh and `peer` a coordinate on it.
static LogicalResult verifyPeer(Operation *op, FlatSymbolRefAttr meshName,
                                StringRef axis, int64_t peer, int64_t tag,
                                SymbolTableCollection &symbolTable) {
  auto mesh = symbolTable.lookupNearestSymbolFrom<MeshOp>(op, meshName);
  if (!mesh)
    return op->emitOpError("names unknown mesh ") << meshName;
  std::optional<int64_t> size = mesh.getAxisSize(axis);
  if (!size)
    return op->emitOpError("mesh @")
           << mesh.getSymName() << " has no axis \"" << axis << "\"";
  if (peer < 0 || peer >= *size)
    return op->emitOpError("peer ") << peer << " is not a coordinate of axis \""
                                    << axis << "\" (size " << *size << ")";
  if (tag < 0)
    return op->emitOpError("expects a tag of 0 or more, got ") << tag;
  return success();
}

LogicalResult SendOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  return verifyPeer(*this, getMeshAttr(), getMeshAxis(), getPeer(), getTag(),
                    symbolTable);
}

LogicalResult RecvOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  return verifyPeer(*this, getMeshAttr(), getMeshAxis(), getPeer(), getTag(),
                    symbolTable);
}
