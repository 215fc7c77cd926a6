//===- DistAttrs.cpp - dist dialect attributes ----------------------------===//

#include "dialects/Dist/IR/DistAttrs.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace tessera::dist;

#include "dialects/Dist/IR/DistEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/Dist/IR/DistAttrs.cpp.inc"

//===----------------------------------------------------------------------===//
// Axis lists: {"a", "b"}
//===----------------------------------------------------------------------===//

/// Parses `"a", "b"` up to the closing brace (already opened); with
/// `allowOpen`, a final `?` sets `isOpen`.
static ParseResult parseAxisList(AsmParser &parser,
                                 SmallVectorImpl<StringAttr> &axes,
                                 bool allowOpen, bool &isOpen) {
  isOpen = false;
  if (succeeded(parser.parseOptionalRBrace()))
    return success();
  do {
    if (allowOpen && succeeded(parser.parseOptionalQuestion())) {
      isOpen = true;
      break;
    }
    std::string axis;
    if (parser.parseString(&axis))
      return failure();
    axes.push_back(parser.getBuilder().getStringAttr(axis));
  } while (succeeded(parser.parseOptionalComma()));
  return parser.parseRBrace();
}

static void printAxisList(AsmPrinter &printer, ArrayRef<StringAttr> axes,
                          bool isOpen = false) {
  printer << "{";
  llvm::interleaveComma(axes, printer, [&](StringAttr axis) {
    printer.printString(axis.getValue());
  });
  if (isOpen)
    printer << (axes.empty() ? "?" : ", ?");
  printer << "}";
}

//===----------------------------------------------------------------------===//
// DimShardingAttr
//===----------------------------------------------------------------------===//

/// Parses `{"dp", ?}p1` (no angle brackets).
static DimShardingAttr parseDimShardingBody(AsmParser &parser) {
  SmallVector<StringAttr> axes;
  bool isOpen;
  if (parser.parseLBrace() ||
      parseAxisList(parser, axes, /*allowOpen=*/true, isOpen))
    return {};
  std::optional<int64_t> priority;
  StringRef keyword;
  SMLoc loc = parser.getCurrentLocation();
  if (succeeded(parser.parseOptionalKeyword(&keyword))) {
    int64_t value;
    if (!keyword.consume_front("p") || keyword.getAsInteger(10, value) ||
        value < 0) {
      parser.emitError(loc, "expected a priority 'p<N>' with N >= 0");
      return {};
    }
    priority = value;
  }
  return DimShardingAttr::get(parser.getContext(), axes, isOpen, priority);
}

static void printDimShardingBody(AsmPrinter &printer, DimShardingAttr dim) {
  printAxisList(printer, dim.getAxes(), dim.getIsOpen());
  if (dim.getPriority())
    printer << "p" << *dim.getPriority();
}

Attribute DimShardingAttr::parse(AsmParser &parser, Type) {
  if (parser.parseLess())
    return {};
  DimShardingAttr dim = parseDimShardingBody(parser);
  if (!dim || parser.parseGreater())
    return {};
  return dim;
}

void DimShardingAttr::print(AsmPrinter &printer) const {
  printer << "<";
  printDimShardingBody(printer, *this);
  printer << ">";
}

//===----------------------------------------------------------------------===//
// ShardingAttr
//===----------------------------------------------------------------------===//

Attribute ShardingAttr::parse(AsmParser &parser, Type) {
  FlatSymbolRefAttr mesh;
  SmallVector<DimShardingAttr> dims;
  if (parser.parseLess() || parser.parseAttribute(mesh) || parser.parseComma())
    return {};
  auto parseDim = [&]() -> ParseResult {
    DimShardingAttr dim = parseDimShardingBody(parser);
    if (!dim)
      return failure();
    dims.push_back(dim);
    return success();
  };
  if (parser.parseCommaSeparatedList(AsmParser::Delimiter::Square, parseDim))
    return {};

  // Optional fields, each at most once: `replicated=`, `unreduced=`,
  // `flat=`.
  constexpr StringLiteral fields[] = {"replicated", "unreduced", "flat"};
  SmallVector<StringAttr> axes[3];
  bool seen[3] = {false, false, false};
  while (succeeded(parser.parseOptionalComma())) {
    StringRef field;
    SMLoc loc = parser.getCurrentLocation();
    if (parser.parseKeyword(&field))
      return {};
    const StringLiteral *it = llvm::find(fields, field);
    if (it == std::end(fields)) {
      parser.emitError(loc,
                       "expected 'replicated', 'unreduced' or 'flat', got '")
          << field << "'";
      return {};
    }
    size_t index = it - std::begin(fields);
    if (seen[index]) {
      parser.emitError(loc, "field '") << field << "' given twice";
      return {};
    }
    seen[index] = true;
    bool isOpen;
    if (parser.parseEqual() || parser.parseLBrace() ||
        parseAxisList(parser, axes[index], /*allowOpen=*/false, isOpen))
      return {};
  }
  if (parser.parseGreater())
    return {};
  return parser.getChecked<ShardingAttr>(parser.getContext(), mesh, dims,
                                         axes[0], axes[1], axes[2]);
}

void ShardingAttr::print(AsmPrinter &printer) const {
  printer << "<";
  printer.printAttributeWithoutType(getMesh());
  printer << ", [";
  llvm::interleaveComma(getDims(), printer, [&](DimShardingAttr dim) {
    printDimShardingBody(printer, dim);
  });
  printer << "]";
  if (!getReplicatedAxes().empty()) {
    printer << ", replicated=";
    printAxisList(printer, getReplicatedAxes());
  }
  if (!getUnreducedAxes().empty()) {
    printer << ", unreduced=";
    printAxisList(printer, getUnreducedAxes());
  }
  if (!getFlatAxes().empty()) {
    printer << ", flat=";
    printAxisList(printer, getFlatAxes());
  }
  printer << ">";
}

LogicalResult ShardingAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                   FlatSymbolRefAttr mesh,
                                   ArrayRef<DimShardingAttr> dims,
                                   ArrayRef<StringAttr> replicatedAxes,
                                   ArrayRef<StringAttr> unreducedAxes,
                                   ArrayRef<StringAttr> flatAxes) {
  if (!mesh)
    return emitError() << "sharding needs a mesh";
  llvm::DenseSet<StringAttr> seen;
  auto check = [&](StringAttr axis) -> LogicalResult {
    if (!seen.insert(axis).second)
      return emitError() << "mesh axis \"" << axis.getValue()
                         << "\" appears twice in the sharding";
    return success();
  };
  for (DimShardingAttr dim : dims)
    for (StringAttr axis : dim.getAxes())
      if (failed(check(axis)))
        return failure();
  for (StringAttr axis :
       llvm::concat<const StringAttr>(replicatedAxes, unreducedAxes, flatAxes))
    if (failed(check(axis)))
      return failure();
  // A flat piece holds whole values: its sums are completed before it is
  // flattened.
  if (!flatAxes.empty() && !unreducedAxes.empty())
    return emitError() << "a flat sharding cannot be unreduced";
  return success();
}

SmallVector<StringAttr> ShardingAttr::getAllAxes() const {
  SmallVector<StringAttr> axes;
  for (DimShardingAttr dim : getDims())
    llvm::append_range(axes, dim.getAxes());
  llvm::append_range(axes, getReplicatedAxes());
  llvm::append_range(axes, getUnreducedAxes());
  llvm::append_range(axes, getFlatAxes());
  return axes;
}

void DistDialect::registerAttributes() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "dialects/Dist/IR/DistAttrs.cpp.inc"
      >();
}
