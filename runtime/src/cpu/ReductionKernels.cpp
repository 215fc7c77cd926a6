//===- ReductionKernels.cpp - The CPU's reductions ------------------------===//
//
// nn.reduce_sum, nn.reduce_max and nn.reduce_mean over any dims.
//
//===----------------------------------------------------------------------===//

#include "KernelSupport.h"

#include <cmath>
#include <limits>

using namespace tessera;
using namespace tessera::runtime;

namespace tessera::runtime::cpu {

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

namespace {
enum class ReduceKind { Sum, Max, Mean };
} // namespace

/// slots[j] += x[j] for j < n: a row added into a row of sums (a bias
/// gradient's), in AVX2 where the CPU has it.
TESSERA_CLONES static void addRow(const float *x, double *slots, int64_t n) {
  for (int64_t j = 0; j < n; ++j)
    slots[j] += x[j];
}

static void runReduce(KernelCall &c, ReduceKind kind) {
  const Tensor &input = c.in(0);
  const std::vector<int64_t> *dims = c.getList("dims");
  std::vector<bool> reduced(input.getRank(), false);
  for (int64_t dim : *dims)
    reduced[dim] = true;
  const std::vector<int64_t> &resultShape = c.out(0).shape;
  // Walk the input in order while tracking where each element lands: the
  // result's strides on kept dims, 0 on reduced ones.
  std::vector<int64_t> resultStrides = getStrides(resultShape);
  std::vector<int64_t> strides(input.getRank(), 0);
  for (int64_t dim = 0, kept = 0; dim < input.getRank(); ++dim)
    if (!reduced[dim])
      strides[dim] = resultStrides[kept++];
  double init =
      kind == ReduceKind::Max ? -std::numeric_limits<double>::infinity() : 0.0;
  std::vector<double> acc(getNumElements(resultShape), init);
  const float *x = input.as<float>();
  // A row (the last dim) at a time: summed into one slot when it is
  // reduced, added into a row of slots when it is kept.
  std::vector<int64_t> rowShape = input.shape, rowStrides = strides;
  int64_t row = 1, stride = 0;
  if (!rowShape.empty()) {
    row = rowShape.back();
    stride = rowStrides.back();
    rowShape.pop_back();
    rowStrides.pop_back();
  }
  int64_t rows = row ? input.getNumElements() / row : 0;
  StridedWalk walk(rowShape, rowStrides);
  for (int64_t r = 0; r < rows; ++r, walk.next()) {
    const float *xr = x + r * row;
    double *slots = acc.data() + walk.getOffset();
    if (kind == ReduceKind::Max) {
      for (int64_t j = 0; j < row; ++j) {
        double &slot = slots[j * stride];
        if (xr[j] > slot || std::isnan(xr[j]))
          slot = xr[j]; // NaN sticks: nothing compares greater than it.
      }
    } else if (stride == 0) {
      *slots += sumInLanes(row, [&](int64_t j) { return double(xr[j]); });
    } else if (stride == 1) {
      addRow(xr, slots, row);
    } else {
      for (int64_t j = 0; j < row; ++j)
        slots[j * stride] += xr[j];
    }
  }
  double count = getNumElements(input.shape) /
                 static_cast<double>(std::max<int64_t>(acc.size(), 1));
  float *result = c.out(0).as<float>();
  for (size_t i = 0; i < acc.size(); ++i)
    result[i] = kind == ReduceKind::Mean ? acc[i] / count : acc[i];
}

void runReduceSum(KernelCall &c) { runReduce(c, ReduceKind::Sum); }
void runReduceMax(KernelCall &c) { runReduce(c, ReduceKind::Max); }
void runReduceMean(KernelCall &c) { runReduce(c, ReduceKind::Mean); }

} // namespace tessera::runtime::cpu
