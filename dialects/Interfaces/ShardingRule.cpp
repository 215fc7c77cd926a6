//===- ShardingRule.cpp - Factor-based sharding rules of ops --------------===//

#include "dialects/Interfaces/ShardingRule.h"

#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/Sequence.h"
#include "llvm/ADT/SmallBitVector.h"

#include <numeric>

using namespace mlir;
using namespace tessera;

llvm::StringRef tessera::stringifyFactorKind(FactorKind kind) {
  switch (kind) {
  case FactorKind::Parallel:
    return "parallel";
  case FactorKind::Reduction:
    return "reduction";
  case FactorKind::NeedReplication:
    return "need_replication";
  }
  llvm_unreachable("unknown factor kind");
}

//===----------------------------------------------------------------------===//
// ShardingRule
//===----------------------------------------------------------------------===//

static llvm::ArrayRef<int64_t> getShapeOrScalar(Type type) {
  if (auto shaped = dyn_cast<ShapedType>(type))
    return shaped.getShape();
  return {};
}

static LogicalResult
verifyTensorFactors(llvm::function_ref<InFlightDiagnostic()> emitError,
                    llvm::ArrayRef<Factor> factors, const TensorFactors &dims,
                    Type type, StringRef what, unsigned index,
                    llvm::SmallBitVector &used) {
  llvm::ArrayRef<int64_t> shape = getShapeOrScalar(type);
  if (dims.size() != shape.size())
    return emitError() << "sharding rule of " << what << " #" << index
                       << " has " << dims.size() << " dims, expected "
                       << shape.size();
  llvm::SmallBitVector seen(factors.size());
  for (auto [dim, dimFactors] : llvm::enumerate(dims)) {
    int64_t product = 1;
    for (int64_t factor : dimFactors) {
      if (factor < 0 || factor >= static_cast<int64_t>(factors.size()))
        return emitError() << "sharding rule of " << what << " #" << index
                           << " names factor " << factor << ", expected < "
                           << factors.size();
      if (seen.test(factor))
        return emitError() << "sharding rule of " << what << " #" << index
                           << " uses factor "
                           << ShardingRule::getFactorName(factor) << " twice";
      seen.set(factor);
      used.set(factor);
      product *= factors[factor].size;
    }
    if (!ShapedType::isDynamic(shape[dim]) && product != shape[dim])
      return emitError() << "sharding rule of " << what << " #" << index
                         << " dim " << dim << " has factors of size " << product
                         << ", expected " << shape[dim];
  }
  return success();
}

LogicalResult
ShardingRule::verify(llvm::function_ref<InFlightDiagnostic()> emitError,
                     TypeRange operandTypes, TypeRange resultTypes) const {
  if (operands.size() != operandTypes.size() ||
      results.size() != resultTypes.size())
    return emitError() << "sharding rule describes " << operands.size()
                       << " operands and " << results.size()
                       << " results, expected " << operandTypes.size()
                       << " and " << resultTypes.size();
  llvm::SmallBitVector used(factors.size());
  for (auto [index, dims] : llvm::enumerate(operands))
    if (failed(verifyTensorFactors(emitError, factors, dims,
                                   operandTypes[index], "operand", index,
                                   used)))
      return failure();
  for (auto [index, dims] : llvm::enumerate(results))
    if (failed(verifyTensorFactors(emitError, factors, dims, resultTypes[index],
                                   "result", index, used)))
      return failure();
  if (!used.all())
    return emitError() << "sharding rule factor "
                       << getFactorName(used.find_first_unset())
                       << " maps to no tensor dim";
  return success();
}

std::string ShardingRule::getFactorName(int64_t index) {
  constexpr int64_t kLetters = 'z' - 'i' + 1;
  if (index < kLetters)
    return std::string(1, static_cast<char>('i' + index));
  return "z_" + std::to_string(index - kLetters + 1);
}

static void printTensors(llvm::raw_ostream &os,
                         llvm::ArrayRef<TensorFactors> tensors) {
  os << "(";
  llvm::interleaveComma(tensors, os, [&](const TensorFactors &dims) {
    os << "[";
    llvm::interleaveComma(dims, os, [&](llvm::ArrayRef<int64_t> dimFactors) {
      for (int64_t factor : dimFactors)
        os << ShardingRule::getFactorName(factor);
    });
    os << "]";
  });
  os << ")";
}

bool ShardingRule::isReducedIn(unsigned result, int64_t factor) const {
  return factors[factor].kind == FactorKind::Reduction &&
         llvm::none_of(results[result], [&](ArrayRef<int64_t> dimFactors) {
           return llvm::is_contained(dimFactors, factor);
         });
}

void ShardingRule::print(llvm::raw_ostream &os) const {
  printTensors(os, operands);
  os << " -> ";
  printTensors(os, results);
  os << " {";
  llvm::interleaveComma(
      llvm::seq<int64_t>(0, factors.size()), os, [&](int64_t factor) {
        os << getFactorName(factor) << "=" << factors[factor].size;
      });
  os << "}";
  for (FactorKind kind : {FactorKind::Reduction, FactorKind::NeedReplication}) {
    auto ofKind = llvm::make_filter_range(
        llvm::seq<int64_t>(0, factors.size()),
        [&](int64_t factor) { return factors[factor].kind == kind; });
    if (ofKind.empty())
      continue;
    os << " " << stringifyFactorKind(kind) << "={";
    llvm::interleaveComma(ofKind, os,
                          [&](int64_t factor) { os << getFactorName(factor); });
    os << "}";
  }
}

std::string ShardingRule::str() const {
  std::string result;
  llvm::raw_string_ostream os(result);
  print(os);
  return result;
}

//===----------------------------------------------------------------------===//
// ShardingRuleBuilder
//===----------------------------------------------------------------------===//

ShardingRuleBuilder::ShardingRuleBuilder(TypeRange operandTypes,
                                         TypeRange resultTypes) {
  for (Type type : operandTypes)
    operands.emplace_back(getShapeOrScalar(type).size());
  for (Type type : resultTypes)
    results.emplace_back(getShapeOrScalar(type).size());
}

void ShardingRuleBuilder::appendFactor(
    llvm::SmallVector<TensorFactors> &tensors, unsigned tensor, int64_t dim,
    int64_t factor) {
  if (dim == kNoDim)
    return;
  assert(dim >= 0 && dim < static_cast<int64_t>(tensors[tensor].size()) &&
         "factor mapped to a dim out of range");
  tensors[tensor][dim].push_back(factor);
}

int64_t ShardingRuleBuilder::addFactor(llvm::ArrayRef<int64_t> operandDims,
                                       llvm::ArrayRef<int64_t> resultDims,
                                       int64_t size, FactorKind kind) {
  assert(operandDims.size() <= operands.size() &&
         resultDims.size() <= results.size() && "too many dims given");
  int64_t factor = factors.size();
  factors.push_back({size, kind});
  for (auto [operand, dim] : llvm::enumerate(operandDims))
    appendFactor(operands, operand, dim, factor);
  for (auto [result, dim] : llvm::enumerate(resultDims))
    appendFactor(results, result, dim, factor);
  return factor;
}

ShardingRuleBuilder &
ShardingRuleBuilder::addPointwise(llvm::ArrayRef<int64_t> shape,
                                  llvm::ArrayRef<int64_t> exceptDims,
                                  FactorKind exceptKind) {
  for (auto [dim, size] : llvm::enumerate(shape)) {
    llvm::SmallVector<int64_t> operandDims(operands.size(), dim);
    llvm::SmallVector<int64_t> resultDims(results.size(), dim);
    FactorKind kind =
        llvm::is_contained(exceptDims, dim) ? exceptKind : FactorKind::Parallel;
    addFactor(operandDims, resultDims, size, kind);
  }
  return *this;
}

ShardingRuleBuilder &
ShardingRuleBuilder::addReshape(llvm::ArrayRef<int64_t> inShape,
                                llvm::ArrayRef<int64_t> outShape) {
  auto addIn = [&](int64_t dim, int64_t size, FactorKind kind) {
    addFactor({dim}, {kNoDim}, size, kind);
  };
  auto addOut = [&](int64_t dim, int64_t size, FactorKind kind) {
    addFactor({kNoDim}, {dim}, size, kind);
  };
  bool allPositive = llvm::all_of(inShape, [](int64_t s) { return s > 0; }) &&
                     llvm::all_of(outShape, [](int64_t s) { return s > 0; });
  if (!allPositive) {
    for (auto [dim, size] : llvm::enumerate(inShape))
      addIn(dim, size, FactorKind::NeedReplication);
    for (auto [dim, size] : llvm::enumerate(outShape))
      addOut(dim, size, FactorKind::NeedReplication);
    return *this;
  }

  // Walk both shapes from the major end. `inLeft` and `outLeft` are the parts
  // of the current dims that no factor covers yet; both sides start at the
  // same flat stride, so a common divisor of the two is a shared major factor.
  size_t nIn = inShape.size(), nOut = outShape.size();
  size_t i = 0, j = 0;
  int64_t inLeft = nIn ? inShape[0] : 1, outLeft = nOut ? outShape[0] : 1;
  bool inCovered = false, outCovered = false;
  auto nextIn = [&] {
    ++i;
    inLeft = i < nIn ? inShape[i] : 1;
    inCovered = false;
  };
  auto nextOut = [&] {
    ++j;
    outLeft = j < nOut ? outShape[j] : 1;
    outCovered = false;
  };
  while (i < nIn || j < nOut) {
    if (i < nIn && inLeft == 1) {
      if (!inCovered)
        addIn(i, 1, FactorKind::Parallel);
      nextIn();
      continue;
    }
    if (j < nOut && outLeft == 1) {
      if (!outCovered)
        addOut(j, 1, FactorKind::Parallel);
      nextOut();
      continue;
    }
    if (i >= nIn || j >= nOut)
      break; // element counts differ; the op verifier reports it
    int64_t common = std::gcd(inLeft, outLeft);
    if (common > 1) {
      addFactor({static_cast<int64_t>(i)}, {static_cast<int64_t>(j)}, common);
      inLeft /= common;
      outLeft /= common;
      inCovered = outCovered = true;
      continue;
    }
    // The remaining parts are coprime: take dims on both sides until their
    // products meet; each piece is its own factor that cannot be split.
    int64_t inProduct = inLeft, outProduct = outLeft;
    addIn(i, inLeft, FactorKind::NeedReplication);
    addOut(j, outLeft, FactorKind::NeedReplication);
    while (inProduct != outProduct) {
      if (inProduct < outProduct) {
        if (i + 1 >= nIn)
          break;
        nextIn();
        inProduct *= inLeft;
        addIn(i, inLeft, FactorKind::NeedReplication);
      } else {
        if (j + 1 >= nOut)
          break;
        nextOut();
        outProduct *= outLeft;
        addOut(j, outLeft, FactorKind::NeedReplication);
      }
    }
    nextIn();
    nextOut();
  }
  return *this;
}

ShardingRule ShardingRuleBuilder::build() {
  return ShardingRule(std::move(factors), std::move(operands),
                      std::move(results));
}
