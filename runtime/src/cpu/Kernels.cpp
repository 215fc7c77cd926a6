//===- Kernels.cpp - The CPU backend's kernels of the nn ops --------------===//
//
// Every nn op on local row-major tensors. Float math is f32, with double
// accumulators for reductions, norms and the optimizers; the ops that only
// move data (select, constant, broadcast, reshape, transpose, slice, concat)
// take any element type, as the dialect allows. Each kernel first checks its
// tensors and attributes against the op's rules (the same rules as the nn
// verifiers) and answers a message rather than touch memory it should not.
//
//===----------------------------------------------------------------------===//

#include "tessera/runtime/Kernels.h"
#include "tessera/runtime/LrSchedule.h"
#include "tessera/runtime/Random.h"
#include "tessera/runtime/SequencePlace.h"
#include "tessera/runtime/Threads.h"

#include "ArrayMath.h"
#include "FusedKernel.h"
#include "ThreadPool.h"
#include "VectorMath.h"

#include <cblas.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <limits>
#include <numeric>
#include <sstream>
#include <type_traits>
#include <unordered_map>

using namespace tessera;
using namespace tessera::runtime;

//===----------------------------------------------------------------------===//
// KernelAttrs
//===----------------------------------------------------------------------===//

std::optional<int64_t> KernelAttrs::getInt(const std::string &name) const {
  auto it = ints.find(name);
  if (it == ints.end())
    return std::nullopt;
  return it->second;
}

std::optional<double> KernelAttrs::getFloat(const std::string &name) const {
  auto it = floats.find(name);
  if (it == floats.end())
    return std::nullopt;
  return it->second;
}

const std::vector<int64_t> *
KernelAttrs::getList(const std::string &name) const {
  auto it = lists.find(name);
  return it == lists.end() ? nullptr : &it->second;
}

const std::string *KernelAttrs::getBytes(const std::string &name) const {
  auto it = bytes.find(name);
  return it == bytes.end() ? nullptr : &it->second;
}

//===----------------------------------------------------------------------===//
// Messages and checks
//===----------------------------------------------------------------------===//

namespace {
/// Streams an integer list or a shape as `[2, 8, 64]`.
struct ListText {
  const std::vector<int64_t> &values;
};

std::ostream &operator<<(std::ostream &os, ListText list) {
  return os << formatShape(list.values);
}

/// Streams "1 input" or "2 inputs".
struct CountText {
  size_t count;
  const char *noun;
};

std::ostream &operator<<(std::ostream &os, CountText text) {
  return os << text.count << " " << text.noun << (text.count == 1 ? "" : "s");
}
} // namespace

template <typename... Args> static std::string concat(const Args &...args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}

namespace tessera::runtime::detail {
/// One kernel invocation: the op (every message starts with its name), its
/// attributes and its tensors. The `expect*` checks record the first failure
/// and return false, so a kernel chains them with `&&` and returns on the
/// first one that fails; runCpuKernel answers the recorded message.
class KernelCall {
public:
  KernelCall(const std::string &op, const KernelAttrs &attrs,
             const std::vector<const Tensor *> &inputs,
             const std::vector<Tensor *> &outputs, bool checkOnly = false)
      : op(op), attrs(attrs), inputs(inputs), outputs(outputs),
        checkOnly(checkOnly) {}

  /// A call that only checks (checkKernel): each kernel returns after its
  /// checks, before it reads or writes any element.
  bool isCheckOnly() const { return checkOnly; }

  const std::string &getOp() const { return op; }
  const KernelAttrs &getAttrs() const { return attrs; }
  const std::vector<const Tensor *> &getInputs() const { return inputs; }
  const std::vector<Tensor *> &getOutputs() const { return outputs; }
  const Tensor &in(size_t index) const { return *inputs[index]; }
  Tensor &out(size_t index) const { return *outputs[index]; }
  size_t getNumInputs() const { return inputs.size(); }
  const std::string &getMessage() const { return message; }

  /// Records `<op>: <args...>` (keeping an earlier failure); returns false.
  template <typename... Args> bool fail(const Args &...args) {
    if (message.empty())
      message = concat(op, ": ", args...);
    return false;
  }

  /// As fail, for what only the data shows (a label outside the
  /// vocabulary): the plan was fine, the inputs were not.
  template <typename... Args> bool failOnData(const Args &...args) {
    dataError = message.empty();
    return fail(args...);
  }
  bool isDataError() const { return dataError; }

  /// Checks the numbers of tensors and that each has memory for its shape.
  bool expectArity(size_t numInputs, size_t numOutputs) {
    if (inputs.size() != numInputs || outputs.size() != numOutputs)
      return fail("expects ", CountText{numInputs, "input"}, " and ",
                  CountText{numOutputs, "output"}, ", got ", inputs.size(),
                  " and ", outputs.size());
    return expectMemory();
  }

  /// As expectArity, for variadic ops taking at least `minInputs`.
  bool expectVariadicArity(size_t minInputs, size_t numOutputs) {
    if (inputs.size() < minInputs || outputs.size() != numOutputs)
      return fail("expects at least ", CountText{minInputs, "input"}, " and ",
                  CountText{numOutputs, "output"}, ", got ", inputs.size(),
                  " and ", outputs.size());
    return expectMemory();
  }

  /// Float ops compute in f32 only; other float types get a message naming
  /// the backend's limit rather than the op's (the dialect allows them).
  bool expectF32(const Tensor &tensor, const char *role) {
    if (tensor.dtype == DType::F32)
      return true;
    if (isFloat(tensor.dtype))
      return fail("the kernels compute f32 (bf16 and f16 widened), got ",
                  getDTypeName(tensor.dtype));
    return fail("expects a float ", role, ", got ", getDTypeName(tensor.dtype));
  }

  bool expectDType(const Tensor &tensor, DType dtype, const char *role) {
    if (tensor.dtype == dtype)
      return true;
    return fail("expects ", role, " of element type ", getDTypeName(dtype),
                ", got ", getDTypeName(tensor.dtype));
  }

  /// Indices and labels are i32 or i64.
  bool expectIndex(const Tensor &tensor, const char *role) {
    if (tensor.dtype == DType::I32 || tensor.dtype == DType::I64)
      return true;
    return fail("expects ", role, " of element type i32 or i64, got ",
                getDTypeName(tensor.dtype));
  }

  bool expectShape(const Tensor &tensor, const std::vector<int64_t> &shape,
                   const char *role) {
    if (tensor.shape == shape)
      return true;
    return fail("expects ", role, " of shape ", ListText{shape}, ", got ",
                ListText{tensor.shape});
  }

  /// Checks that `dims` are distinct dims of a tensor of rank `rank`.
  bool expectDims(const std::vector<int64_t> &dims, int64_t rank,
                  const char *what) {
    std::vector<bool> seen(rank, false);
    for (int64_t dim : dims) {
      if (dim < 0 || dim >= rank)
        return fail(what, " ", dim, " is out of range for rank ", rank);
      if (seen[dim])
        return fail(what, " ", dim, " appears twice");
      seen[dim] = true;
    }
    return true;
  }

  std::optional<int64_t> getInt(const char *name) {
    std::optional<int64_t> value = attrs.getInt(name);
    if (!value)
      fail("missing integer attribute '", name, "'");
    return value;
  }

  /// The attribute getters have no defaults: a plan carries every
  /// attribute of an op, defaults included (the exporter writes what the op
  /// holds), so the op definition is their one source.
  std::optional<double> getFloat(const char *name) {
    std::optional<double> value = attrs.getFloat(name);
    if (!value)
      fail("missing float attribute '", name, "'");
    return value;
  }

  const std::vector<int64_t> *getList(const char *name) {
    const std::vector<int64_t> *value = attrs.getList(name);
    if (!value)
      fail("missing integer-list attribute '", name, "'");
    return value;
  }

  const std::string *getBytes(const char *name) {
    const std::string *value = attrs.getBytes(name);
    if (!value)
      fail("missing bytes attribute '", name, "'");
    return value;
  }

private:
  bool expectMemory() {
    auto check = [&](const Tensor *tensor, const char *kind, size_t index) {
      if (!tensor)
        return fail(kind, " #", index, " is null");
      for (int64_t size : tensor->shape)
        if (size < 0)
          return fail(kind, " #", index, " has a negative size in shape ",
                      ListText{tensor->shape});
      if (!tensor->data && tensor->getNumElements() > 0)
        return fail(kind, " #", index, " has no memory");
      return true;
    };
    for (size_t i = 0; i < inputs.size(); ++i)
      if (!check(inputs[i], "input", i))
        return false;
    for (size_t i = 0; i < outputs.size(); ++i)
      if (!check(outputs[i], "output", i))
        return false;
    return true;
  }

  const std::string &op;
  const KernelAttrs &attrs;
  const std::vector<const Tensor *> &inputs;
  const std::vector<Tensor *> &outputs;
  bool checkOnly;
  bool dataError = false;
  std::string message;
};
} // namespace tessera::runtime::detail

using tessera::runtime::detail::KernelCall;

/// The fewest elements a kernel gives a thread: below that, waking one
/// costs more than it saves.
constexpr int64_t kElementsPerThread = 1 << 15;

//===----------------------------------------------------------------------===//
// Strided views
//===----------------------------------------------------------------------===//

/// Row-major strides, in elements.
static std::vector<int64_t> getStrides(const std::vector<int64_t> &shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (int64_t dim = static_cast<int64_t>(shape.size()) - 2; dim >= 0; --dim)
    strides[dim] = strides[dim + 1] * shape[dim + 1];
  return strides;
}

namespace {
/// Visits the indices of `shape` in row-major order, keeping the offset of
/// the current one in a buffer where dim d advances by `strides[d]`. A zero
/// stride repeats data (broadcast), permuted strides read a transposed buffer
/// and a base offset starts a slice, so one loop serves every view that the
/// shape ops, the reductions and the dot's operand layout need.
class StridedWalk {
public:
  StridedWalk(const std::vector<int64_t> &shape, std::vector<int64_t> strides,
              int64_t base = 0)
      : shape(shape), strides(std::move(strides)), index(shape.size(), 0),
        offset(base) {}

  int64_t getOffset() const { return offset; }

  /// Moves to the index `linear` places after the first in row-major order.
  void seek(int64_t linear) {
    for (int64_t dim = static_cast<int64_t>(shape.size()) - 1; dim >= 0;
         --dim) {
      offset += (linear % shape[dim] - index[dim]) * strides[dim];
      index[dim] = linear % shape[dim];
      linear /= shape[dim];
    }
  }

  void next() {
    for (int64_t dim = static_cast<int64_t>(shape.size()) - 1; dim >= 0;
         --dim) {
      offset += strides[dim];
      if (++index[dim] < shape[dim])
        return;
      offset -= strides[dim] * shape[dim];
      index[dim] = 0;
    }
  }

private:
  const std::vector<int64_t> &shape;
  std::vector<int64_t> strides;
  std::vector<int64_t> index;
  int64_t offset;
};
} // namespace

/// Rows and columns of a block of gatherTiled, which it copies through a
/// buffer of 16 KB for 4-byte elements. On the GPT weight gradients' 2048 x
/// 512 transposes, 64 took 1.3 ms, 32 1.5 ms and 16 1.8 ms.
constexpr int64_t kTransposeTile = 64;

/// gatherFixed's view when the source's contiguous dim is `rowDim` of the
/// result and not its last (a transpose): per index of the other dims, the
/// (rowDim, last) plane moves block by block. A block's source rows are
/// copied whole into a buffer, and its result rows are written from there.
/// Reading a result row from the source instead touches a cache line per
/// element, and on a power-of-two stride all of them fall in one cache set:
/// a 2048 x 512 transpose took 2.8 ms that way, against 1.3 ms blocked.
template <size_t ElementBytes>
static void gatherTiled(const uint8_t *src, const std::vector<int64_t> &shape,
                        const std::vector<int64_t> &strides, int64_t base,
                        size_t rowDim, uint8_t *dst) {
  size_t last = shape.size() - 1;
  std::vector<int64_t> dstStrides = getStrides(shape);
  std::vector<int64_t> outerShape, outerSrc, outerDst;
  for (size_t dim = 0; dim < last; ++dim)
    if (dim != rowDim) {
      outerShape.push_back(shape[dim]);
      outerSrc.push_back(strides[dim]);
      outerDst.push_back(dstStrides[dim]);
    }
  int64_t rows = shape[rowDim], cols = shape[last];
  int64_t srcColStride = strides[last], dstRowStride = dstStrides[rowDim];
  int64_t rowBlocks = (rows + kTransposeTile - 1) / kTransposeTile;
  cpu::parallelFor(
      getNumElements(outerShape) * rowBlocks,
      std::max<int64_t>(kElementsPerThread / (kTransposeTile * cols), 1),
      [&](int64_t begin, int64_t end) {
        uint8_t buffer[kTransposeTile][kTransposeTile * ElementBytes];
        StridedWalk srcWalk(outerShape, outerSrc, base),
            dstWalk(outerShape, outerDst);
        int64_t outer = begin / rowBlocks;
        srcWalk.seek(outer);
        dstWalk.seek(outer);
        for (int64_t block = begin; block < end; ++block) {
          if (block / rowBlocks != outer) {
            ++outer;
            srcWalk.next();
            dstWalk.next();
          }
          int64_t i0 = block % rowBlocks * kTransposeTile;
          int64_t i1 = std::min(rows, i0 + kTransposeTile);
          const uint8_t *from = src + srcWalk.getOffset() * ElementBytes;
          uint8_t *to = dst + dstWalk.getOffset() * ElementBytes;
          for (int64_t j0 = 0; j0 < cols; j0 += kTransposeTile) {
            int64_t j1 = std::min(cols, j0 + kTransposeTile);
            // The block's source rows, each contiguous, into the buffer;
            // then its result rows out of it.
            for (int64_t j = j0; j < j1; ++j)
              std::memcpy(buffer[j - j0],
                          from + (i0 + j * srcColStride) * ElementBytes,
                          (i1 - i0) * ElementBytes);
            for (int64_t i = i0; i < i1; ++i)
              for (int64_t j = j0; j < j1; ++j)
                std::memcpy(to + (i * dstRowStride + j) * ElementBytes,
                            buffer[j - j0] + (i - i0) * ElementBytes,
                            ElementBytes);
          }
        }
      });
}

/// Element moves go through fixed-size memcpy, which compiles to one load and
/// store and, unlike a cast to an integer type, is defined for any dtype.
/// A row (the last dim) at a time: a contiguous one is one memcpy (a bias
/// broadcast over rows, a transpose that keeps the last dim).
template <size_t ElementBytes>
static void gatherFixed(const uint8_t *src, const std::vector<int64_t> &shape,
                        const std::vector<int64_t> &strides, int64_t base,
                        uint8_t *dst) {
  int64_t count = getNumElements(shape);
  if (count == 0)
    return;
  if (shape.empty()) {
    std::memcpy(dst, src + base * ElementBytes, ElementBytes);
    return;
  }
  int64_t row = shape.back(), stride = strides.back();
  if (stride != 1)
    for (size_t dim = 0; dim + 1 < shape.size(); ++dim)
      if (strides[dim] == 1 && shape[dim] > 1)
        return gatherTiled<ElementBytes>(src, shape, strides, base, dim, dst);
  std::vector<int64_t> outerShape(shape.begin(), shape.end() - 1);
  cpu::parallelFor(
      count / row, std::max<int64_t>(kElementsPerThread / row, 1),
      [&](int64_t begin, int64_t end) {
        StridedWalk walk(outerShape, {strides.begin(), strides.end() - 1},
                         base);
        walk.seek(begin);
        for (int64_t r = begin; r < end; ++r, walk.next()) {
          const uint8_t *from = src + walk.getOffset() * ElementBytes;
          uint8_t *to = dst + r * row * ElementBytes;
          if (stride == 1) {
            std::memcpy(to, from, row * ElementBytes);
            continue;
          }
          for (int64_t j = 0; j < row; ++j)
            std::memcpy(to + j * ElementBytes, from + j * stride * ElementBytes,
                        ElementBytes);
        }
      });
}

/// Writes the view of `src` with `shape`, `strides` and `base` (in elements)
/// to `dst` in row-major order.
static void gatherElements(const void *src, size_t elementBytes,
                           const std::vector<int64_t> &shape,
                           const std::vector<int64_t> &strides, int64_t base,
                           void *dst) {
  auto *from = static_cast<const uint8_t *>(src);
  auto *to = static_cast<uint8_t *>(dst);
  switch (elementBytes) {
  case 1:
    return gatherFixed<1>(from, shape, strides, base, to);
  case 2:
    return gatherFixed<2>(from, shape, strides, base, to);
  case 4:
    return gatherFixed<4>(from, shape, strides, base, to);
  case 8:
    return gatherFixed<8>(from, shape, strides, base, to);
  }
}

/// Copies `src` permuted into `dst`: result dim i is source dim `perm[i]`.
static void permuteElements(const Tensor &src, const std::vector<int64_t> &perm,
                            void *dst) {
  std::vector<int64_t> srcStrides = getStrides(src.shape);
  std::vector<int64_t> shape, strides;
  for (int64_t dim : perm) {
    shape.push_back(src.shape[dim]);
    strides.push_back(srcStrides[dim]);
  }
  gatherElements(src.data, getDTypeBytes(src.dtype), shape, strides, 0, dst);
}

/// Copies whole buffers; an output that aliases its input needs no copy.
static void copyBytes(void *dst, const void *src, size_t bytes) {
  if (dst != src && bytes)
    std::memmove(dst, src, bytes);
}

namespace {
/// A shape seen around one dim: element (o, j, i) of the [outer, size, inner]
/// split lies at `(o * size + j) * inner + i`.
struct DimSplit {
  int64_t outer, size, inner;
};
} // namespace

static DimSplit splitAround(const std::vector<int64_t> &shape, int64_t dim) {
  return {
      getNumElements(std::vector<int64_t>(shape.begin(), shape.begin() + dim)),
      shape[dim],
      getNumElements(
          std::vector<int64_t>(shape.begin() + dim + 1, shape.end()))};
}

//===----------------------------------------------------------------------===//
// Linear algebra
//===----------------------------------------------------------------------===//

static bool isIdentity(const std::vector<int64_t> &perm) {
  for (size_t i = 0; i < perm.size(); ++i)
    if (perm[i] != static_cast<int64_t>(i))
      return false;
  return true;
}

static std::vector<int64_t>
concatDims(std::initializer_list<const std::vector<int64_t> *> groups) {
  std::vector<int64_t> result;
  for (const std::vector<int64_t> *group : groups)
    result.insert(result.end(), group->begin(), group->end());
  return result;
}

namespace {
/// One GEMM operand as a stack of row-major [rows, cols] f32 matrices. BLAS
/// reads a stored [cols, rows] matrix as transposed, so an operand whose dims
/// come as (batch, rows, cols) or (batch, cols, rows) is used in place (the
/// common x·W and Q·Kᵀ cases); any other order is permuted into a copy.
class GemmOperand {
public:
  GemmOperand(const Tensor &tensor, const std::vector<int64_t> &batchDims,
              const std::vector<int64_t> &rowDims,
              const std::vector<int64_t> &colDims)
      : data(tensor.as<float>()) {
    std::vector<int64_t> straight =
        concatDims({&batchDims, &rowDims, &colDims});
    if (isIdentity(straight))
      return;
    if (isIdentity(concatDims({&batchDims, &colDims, &rowDims}))) {
      transposed = true;
      return;
    }
    copy.resize(tensor.getNumElements());
    permuteElements(tensor, straight, copy.data());
    data = copy.data();
  }
  GemmOperand(const GemmOperand &) = delete;
  GemmOperand &operator=(const GemmOperand &) = delete;

  const float *getMatrix(int64_t index, int64_t rows, int64_t cols) const {
    return data + index * rows * cols;
  }
  CBLAS_TRANSPOSE getTranspose() const {
    return transposed ? CblasTrans : CblasNoTrans;
  }
  /// The leading dimension of the stored (not the logical) matrix.
  int getLeadingDim(int64_t rows, int64_t cols) const {
    return static_cast<int>(transposed ? rows : cols);
  }

private:
  const float *data;
  bool transposed = false;
  std::vector<float> copy;
};
} // namespace

/// The dims of a rank-`rank` operand that are neither batching nor
/// contracting, in order.
static std::vector<int64_t> getFreeDims(int64_t rank,
                                        const std::vector<int64_t> &batch,
                                        const std::vector<int64_t> &contract) {
  std::vector<int64_t> free;
  for (int64_t dim = 0; dim < rank; ++dim)
    if (std::find(batch.begin(), batch.end(), dim) == batch.end() &&
        std::find(contract.begin(), contract.end(), dim) == contract.end())
      free.push_back(dim);
  return free;
}

static int64_t getSizeOf(const Tensor &tensor,
                         const std::vector<int64_t> &dims) {
  int64_t size = 1;
  for (int64_t dim : dims)
    size *= tensor.shape[dim];
  return size;
}

/// Rows of a piece of splitGemm: whole multiples of this. OpenBLAS
/// computes a row-major C as its column-major transpose, our rows its
/// columns, in micro-kernel tiles of a fixed number of them (4 to 24 by CPU;
/// 12 on Zen); a row at the same offset in a tile is summed alike whatever
/// the call's row count, one in another offset may not be (on Zen, 10% of
/// the elements differ in the last bit). 48 is a multiple of every tile.
/// Columns are never split: on Zen no column split gave the same bits.
constexpr int64_t kGemmPieceAlign = 48;
/// The least M·N·K of a piece of splitGemm. OpenBLAS takes another path
/// (its small-matrix kernels) at or below 100³ on some CPUs: a GEMM whose
/// pieces would fall there runs whole, so that each element is computed
/// alike on any thread count.
constexpr double kGemmPieceWork = 2e6;

/// C = op(A) op(B), row-major [m, n], over the kernel threads. OpenBLAS runs
/// on one thread: its workers spin between calls, and on two cores they
/// took the second from every other kernel (attention and the fused
/// kernels ran no faster on two threads than on one). The rows are split
/// here instead, a piece per thread, each an OpenBLAS call that blocks K as
/// the whole would: the same bits on any thread count.
static void splitGemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int64_t m,
                      int64_t n, int64_t k, const float *a, int lda,
                      const float *b, int ldb, float *c) {
  auto gemm = [&](int64_t rows, const float *pa, float *pc) {
    cblas_sgemm(CblasRowMajor, ta, tb, static_cast<int>(rows),
                static_cast<int>(n), static_cast<int>(k), 1.0f, pa, lda, b,
                ldb, 0.0f, pc, static_cast<int>(n));
  };
  int64_t blocks = (m + kGemmPieceAlign - 1) / kGemmPieceAlign;
  int64_t pieces = std::min<int64_t>(getKernelThreads(), blocks);
  // The smallest piece holds blocks / pieces blocks, the last one short.
  double smallest = static_cast<double>(blocks / std::max<int64_t>(pieces, 1) *
                                            kGemmPieceAlign -
                                        (blocks * kGemmPieceAlign - m)) *
                    static_cast<double>(n) * k;
  if (pieces <= 1 || smallest <= kGemmPieceWork)
    return gemm(m, a, c);
  cpu::parallelFor(blocks, 1, [&](int64_t begin, int64_t end) {
    int64_t first = begin * kGemmPieceAlign;
    int64_t size = std::min(m, end * kGemmPieceAlign) - first;
    gemm(size, a + first * (ta == CblasNoTrans ? lda : 1), c + first * n);
  });
}

/// nn.dot as one sgemm per batch index over [batch, M, K] x [batch, K, N].
static void runDot(KernelCall &c) {
  if (!c.expectArity(2, 1) || !c.expectF32(c.in(0), "lhs") ||
      !c.expectF32(c.in(1), "rhs") || !c.expectF32(c.out(0), "result"))
    return;
  const Tensor &lhs = c.in(0), &rhs = c.in(1);
  const std::vector<int64_t> *lhsBatch = c.getList("lhs_batching_dims");
  const std::vector<int64_t> *rhsBatch = c.getList("rhs_batching_dims");
  const std::vector<int64_t> *lhsContract = c.getList("lhs_contracting_dims");
  const std::vector<int64_t> *rhsContract = c.getList("rhs_contracting_dims");
  if (!lhsBatch || !rhsBatch || !lhsContract || !rhsContract)
    return;
  if (lhsBatch->size() != rhsBatch->size()) {
    c.fail("has ", lhsBatch->size(), " lhs batching dims but ",
           rhsBatch->size(), " rhs batching dims");
    return;
  }
  if (lhsContract->size() != rhsContract->size()) {
    c.fail("has ", lhsContract->size(), " lhs contracting dims but ",
           rhsContract->size(), " rhs contracting dims");
    return;
  }
  if (!c.expectDims(concatDims({lhsBatch, lhsContract}), lhs.getRank(),
                    "lhs dim") ||
      !c.expectDims(concatDims({rhsBatch, rhsContract}), rhs.getRank(),
                    "rhs dim"))
    return;
  auto expectPaired = [&](const std::vector<int64_t> &lhsDims,
                          const std::vector<int64_t> &rhsDims,
                          const char *kind) {
    for (size_t i = 0; i < lhsDims.size(); ++i) {
      int64_t lhsSize = lhs.shape[lhsDims[i]], rhsSize = rhs.shape[rhsDims[i]];
      if (lhsSize != rhsSize)
        return c.fail("lhs ", kind, " dim ", lhsDims[i], " has size ", lhsSize,
                      " but rhs dim ", rhsDims[i], " has size ", rhsSize);
    }
    return true;
  };
  if (!expectPaired(*lhsBatch, *rhsBatch, "batching") ||
      !expectPaired(*lhsContract, *rhsContract, "contracting"))
    return;

  std::vector<int64_t> lhsFree =
      getFreeDims(lhs.getRank(), *lhsBatch, *lhsContract);
  std::vector<int64_t> rhsFree =
      getFreeDims(rhs.getRank(), *rhsBatch, *rhsContract);
  std::vector<int64_t> resultShape;
  for (int64_t dim : *lhsBatch)
    resultShape.push_back(lhs.shape[dim]);
  for (int64_t dim : lhsFree)
    resultShape.push_back(lhs.shape[dim]);
  for (int64_t dim : rhsFree)
    resultShape.push_back(rhs.shape[dim]);
  if (!c.expectShape(c.out(0), resultShape, "result"))
    return;

  if (c.isCheckOnly())
    return;
  int64_t batch = getSizeOf(lhs, *lhsBatch), m = getSizeOf(lhs, lhsFree),
          n = getSizeOf(rhs, rhsFree), k = getSizeOf(lhs, *lhsContract);
  float *result = c.out(0).as<float>();
  if (batch * m * n == 0)
    return;
  if (k == 0) {
    std::fill(result, result + batch * m * n, 0.0f);
    return;
  }
  if (m > INT_MAX || n > INT_MAX || k > INT_MAX) {
    c.fail("matrix of [", m, ", ", k, "] x [", k, ", ", n,
           "] exceeds the sizes BLAS indexes");
    return;
  }
  GemmOperand a(lhs, *lhsBatch, lhsFree, *lhsContract);
  GemmOperand b(rhs, *rhsBatch, *rhsContract, rhsFree);
  auto gemm = [&](int64_t index) {
    splitGemm(a.getTranspose(), b.getTranspose(), m, n, k,
              a.getMatrix(index, m, k), a.getLeadingDim(m, k),
              b.getMatrix(index, k, n), b.getLeadingDim(k, n),
              result + index * m * n);
  };
  // A batch splits over the threads by its matrices, each one whole.
  if (batch >= getKernelThreads()) {
    cpu::parallelFor(batch, 1, [&](int64_t begin, int64_t end) {
      for (int64_t index = begin; index < end; ++index)
        gemm(index);
    });
    return;
  }
  for (int64_t index = 0; index < batch; ++index)
    gemm(index);
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

// Elementwise loops read element i of every input before writing element i,
// so an output may alias an input (an in-place update).

/// An elementwise op of ArrayMath.h on same-shaped f32 tensors.
static void runArrayMath(KernelCall &c) {
  const cpu::ArrayMath *math = cpu::findArrayMath(c.getOp());
  if (!math) {
    c.fail("has no array math");
    return;
  }
  size_t arity = math->arity;
  if (!c.expectArity(arity, 1))
    return;
  for (size_t i = 0; i < arity; ++i)
    if (!c.expectF32(c.in(i), arity == 1 ? "input"
                              : i == 0   ? "lhs"
                                         : "rhs") ||
        !c.expectShape(c.in(i), c.in(0).shape, i == 0 ? "input" : "rhs"))
      return;
  if (!c.expectF32(c.out(0), "result") ||
      !c.expectShape(c.out(0), c.in(0).shape, "result"))
    return;
  if (c.isCheckOnly())
    return;
  const float *a = c.in(0).as<float>(), *b = c.in(arity - 1).as<float>();
  float *y = c.out(0).as<float>();
  cpu::parallelFor(c.in(0).getNumElements(), kElementsPerThread,
                   [&](int64_t begin, int64_t end) {
                     math->fn(a + begin, b + begin, y + begin, end - begin);
                   });
}

/// nn.clamp: NaN stays NaN.
static void runClamp(KernelCall &c) {
  std::optional<double> min = c.getFloat("min"), max = c.getFloat("max");
  if (!min || !max)
    return;
  if (!c.expectArity(1, 1) || !c.expectF32(c.in(0), "input") ||
      !c.expectF32(c.out(0), "result") ||
      !c.expectShape(c.out(0), c.in(0).shape, "result") || c.isCheckOnly())
    return;
  float lo = static_cast<float>(*min), hi = static_cast<float>(*max);
  const float *x = c.in(0).as<float>();
  float *y = c.out(0).as<float>();
  for (int64_t i = 0, e = c.in(0).getNumElements(); i < e; ++i)
    y[i] = cpu::clampElement(x[i], lo, hi);
}

template <size_t ElementBytes>
static void selectFixed(const uint8_t *condition, const uint8_t *onTrue,
                        const uint8_t *onFalse, uint8_t *result,
                        int64_t count) {
  for (int64_t i = 0; i < count; ++i)
    std::memcpy(result + i * ElementBytes,
                (condition[i] ? onTrue : onFalse) + i * ElementBytes,
                ElementBytes);
}

static void runSelect(KernelCall &c) {
  if (!c.expectArity(3, 1) || !c.expectDType(c.in(0), DType::I1, "condition"))
    return;
  const Tensor &onTrue = c.in(1);
  std::pair<const Tensor *, const char *> others[] = {{&c.in(2), "on_false"},
                                                      {&c.out(0), "result"}};
  for (const auto &[tensor, role] : others)
    if (!c.expectDType(*tensor, onTrue.dtype, role) ||
        !c.expectShape(*tensor, onTrue.shape, role))
      return;
  if (!c.expectShape(c.in(0), onTrue.shape, "condition"))
    return;
  if (c.isCheckOnly())
    return;
  auto *condition = c.in(0).as<const uint8_t>();
  auto *t = onTrue.as<const uint8_t>(), *f = c.in(2).as<const uint8_t>();
  auto *result = c.out(0).as<uint8_t>();
  int64_t count = onTrue.getNumElements();
  switch (getDTypeBytes(onTrue.dtype)) {
  case 1:
    return selectFixed<1>(condition, t, f, result, count);
  case 2:
    return selectFixed<2>(condition, t, f, result, count);
  case 4:
    return selectFixed<4>(condition, t, f, result, count);
  case 8:
    return selectFixed<8>(condition, t, f, result, count);
  }
}

template <typename T, typename Cmp>
static void compareWith(const Tensor &lhs, const Tensor &rhs, Tensor &result,
                        Cmp cmp) {
  const T *a = lhs.as<T>(), *b = rhs.as<T>();
  auto *r = result.as<uint8_t>();
  for (int64_t i = 0, e = lhs.getNumElements(); i < e; ++i)
    r[i] = cmp(a[i], b[i]) ? 1 : 0;
}

template <typename T>
static void compareAs(const Tensor &lhs, const Tensor &rhs, Tensor &result,
                      int64_t predicate) {
  switch (predicate) {
  case 0:
    return compareWith<T>(lhs, rhs, result, std::equal_to<T>());
  case 1:
    return compareWith<T>(lhs, rhs, result, std::not_equal_to<T>());
  case 2:
    return compareWith<T>(lhs, rhs, result, std::less<T>());
  case 3:
    return compareWith<T>(lhs, rhs, result, std::less_equal<T>());
  case 4:
    return compareWith<T>(lhs, rhs, result, std::greater<T>());
  case 5:
    return compareWith<T>(lhs, rhs, result, std::greater_equal<T>());
  }
}

/// nn.compare; the predicate is the ComparePredicate case (eq, ne, lt, le,
/// gt, ge = 0..5). i1 operands compare as 0 and 1.
static void runCompare(KernelCall &c) {
  if (!c.expectArity(2, 1))
    return;
  std::optional<int64_t> predicate = c.getInt("predicate");
  if (!predicate)
    return;
  if (*predicate < 0 || *predicate > 5) {
    c.fail("predicate ", *predicate,
           " is not one of eq, ne, lt, le, gt, ge (0 to 5)");
    return;
  }
  const Tensor &lhs = c.in(0), &rhs = c.in(1);
  if (isFloat(lhs.dtype) && !c.expectF32(lhs, "lhs"))
    return;
  if (!c.expectDType(rhs, lhs.dtype, "rhs") ||
      !c.expectShape(rhs, lhs.shape, "rhs") ||
      !c.expectDType(c.out(0), DType::I1, "result") ||
      !c.expectShape(c.out(0), lhs.shape, "result"))
    return;
  if (c.isCheckOnly())
    return;
  switch (lhs.dtype) {
  case DType::F32:
    return compareAs<float>(lhs, rhs, c.out(0), *predicate);
  case DType::I32:
    return compareAs<int32_t>(lhs, rhs, c.out(0), *predicate);
  case DType::I64:
    return compareAs<int64_t>(lhs, rhs, c.out(0), *predicate);
  case DType::I1:
    return compareAs<uint8_t>(lhs, rhs, c.out(0), *predicate);
  default:
    return; // Other floats were refused above.
  }
}

namespace {
/// An i1 element: one byte; any nonzero byte reads as true.
struct Bool {
  uint8_t byte;
};
} // namespace

/// Float to integer truncates toward zero and saturates, NaN giving 0: the C++
/// conversion is undefined outside the target's range, and a kernel must not
/// be.
template <typename To> static To truncateToInt(float x) {
  if (std::isnan(x))
    return 0;
  double value = x;
  if (value >= static_cast<double>(std::numeric_limits<To>::max()))
    return std::numeric_limits<To>::max();
  if (value <= static_cast<double>(std::numeric_limits<To>::min()))
    return std::numeric_limits<To>::min();
  return static_cast<To>(value);
}

/// Converts one element as nn.cast does; conversions to i1 test `x != 0` and
/// integer narrowing wraps (two's complement), as StableHLO's convert.
template <typename To, typename From> static To convertElement(From x) {
  if constexpr (std::is_same_v<From, Bool>)
    return convertElement<To>(static_cast<int32_t>(x.byte != 0));
  else if constexpr (std::is_same_v<To, Bool>)
    return Bool{static_cast<uint8_t>(x != From(0))};
  else if constexpr (std::is_integral_v<To> && std::is_floating_point_v<From>)
    return truncateToInt<To>(x);
  else
    return static_cast<To>(x);
}

/// Calls `fn` with a value of the C++ type of a castable dtype; false for the
/// others.
template <typename Fn> static bool withCastType(DType dtype, Fn fn) {
  switch (dtype) {
  case DType::F32:
    fn(float());
    return true;
  case DType::I32:
    fn(int32_t());
    return true;
  case DType::I64:
    fn(int64_t());
    return true;
  case DType::I1:
    fn(Bool());
    return true;
  default:
    return false;
  }
}

static void runCast(KernelCall &c) {
  if (!c.expectArity(1, 1) || !c.expectShape(c.out(0), c.in(0).shape, "result"))
    return;
  const Tensor &input = c.in(0);
  Tensor &result = c.out(0);
  auto isCastable = [](DType dtype) {
    return withCastType(dtype, [](auto) {});
  };
  if (!isCastable(input.dtype) || !isCastable(result.dtype)) {
    c.fail("the kernels cast between f32, bf16, f16, i32, i64 and i1, got ",
           getDTypeName(input.dtype), " to ", getDTypeName(result.dtype));
    return;
  }
  if (c.isCheckOnly())
    return;
  withCastType(input.dtype, [&](auto from) {
    withCastType(result.dtype, [&](auto to) {
      using From = decltype(from);
      using To = decltype(to);
      // Elements are copied in and out through memcpy: Bool and the
      // executor's buffers are only bytes.
      auto *src = input.as<const uint8_t>();
      auto *dst = result.as<uint8_t>();
      for (int64_t i = 0, e = input.getNumElements(); i < e; ++i) {
        From x;
        std::memcpy(&x, src + i * sizeof(From), sizeof(From));
        To y = convertElement<To>(x);
        std::memcpy(dst + i * sizeof(To), &y, sizeof(To));
      }
    });
  });
}

/// nn.constant: `value` holds either every element or one (a splat).
static void runConstant(KernelCall &c) {
  if (!c.expectArity(0, 1))
    return;
  const std::string *value = c.getBytes("value");
  if (!value)
    return;
  Tensor &result = c.out(0);
  if (c.isCheckOnly())
    return;
  size_t elementBytes = getDTypeBytes(result.dtype);
  if (value->size() == elementBytes) {
    // A splat: filled as words of the element's width, at memset's speed.
    auto fill = [&](auto word) {
      std::memcpy(&word, value->data(), sizeof word);
      std::fill_n(static_cast<decltype(word) *>(result.data),
                  result.getNumElements(), word);
    };
    switch (elementBytes) {
    case 1:
      return fill(uint8_t());
    case 2:
      return fill(uint16_t());
    case 4:
      return fill(uint32_t());
    case 8:
      return fill(uint64_t());
    }
    auto *dst = result.as<uint8_t>();
    for (int64_t i = 0, e = result.getNumElements(); i < e; ++i)
      std::memcpy(dst + i * elementBytes, value->data(), elementBytes);
    return;
  }
  if (value->size() != result.getBytes()) {
    c.fail("value has ", value->size(), " bytes, expected ", elementBytes,
           " (a splat) or ", result.getBytes(), " (", result.getNumElements(),
           " ", getDTypeName(result.dtype), " elements)");
    return;
  }
  copyBytes(result.data, value->data(), value->size());
}

/// The first position of a piece of `size` along a split dim: the piece
/// index in input `input` (nn.OffsetOpInterface's), if the kernel has it,
/// times the size; 0 for a whole dim. Fails (none) on a malformed index.
static std::optional<int64_t> readPieceOffset(KernelCall &c, int64_t input,
                                              int64_t size) {
  if (static_cast<int64_t>(c.getNumInputs()) <= input)
    return 0;
  const Tensor &piece = c.in(input);
  if (!c.expectDType(piece, DType::I64, "piece") ||
      !c.expectShape(piece, {1}, "piece"))
    return std::nullopt;
  return c.isCheckOnly() ? 0 : piece.as<int64_t>()[0] * size;
}

/// nn.iota: each element its index along `dim`.
static void runIota(KernelCall &c) {
  if (!(c.getNumInputs() == 1 ? c.expectArity(1, 1) : c.expectArity(0, 1)))
    return;
  Tensor &result = c.out(0);
  std::optional<int64_t> dim = c.getInt("dim");
  if (!dim)
    return;
  if (*dim < 0 || *dim >= result.getRank()) {
    c.fail("expects dim in [0, ", result.getRank(), "), got ", *dim);
    return;
  }
  if (result.dtype != DType::F32 && !c.expectIndex(result, "result"))
    return;
  int64_t size = result.shape[*dim];
  std::optional<int64_t> offset = readPieceOffset(c, 0, size);
  if (!offset || c.isCheckOnly())
    return;
  // Row-major: the index along dim repeats `inner` times and wraps at its
  // size.
  int64_t inner = 1;
  for (int64_t d = *dim + 1; d < result.getRank(); ++d)
    inner *= result.shape[d];
  for (int64_t i = 0, e = result.getNumElements(); i < e; ++i) {
    int64_t index = *offset + i / inner % size;
    switch (result.dtype) {
    case DType::F32:
      result.as<float>()[i] = static_cast<float>(index);
      break;
    case DType::I32:
      result.as<int32_t>()[i] = static_cast<int32_t>(index);
      break;
    default:
      result.as<int64_t>()[i] = index;
      break;
    }
  }
}

/// nn.broadcast: operand dim i is result dim dims[i]; a size-1 operand dim
/// and every new dim read with stride 0.
static void runBroadcast(KernelCall &c) {
  if (!c.expectArity(1, 1))
    return;
  const std::vector<int64_t> *dims = c.getList("dims");
  if (!dims)
    return;
  const Tensor &input = c.in(0);
  Tensor &result = c.out(0);
  if (!c.expectDType(result, input.dtype, "result"))
    return;
  if (static_cast<int64_t>(dims->size()) != input.getRank()) {
    c.fail("expects one dim per operand dim (", input.getRank(), "), got ",
           ListText{*dims});
    return;
  }
  std::vector<int64_t> inputStrides = getStrides(input.shape);
  std::vector<int64_t> strides(result.getRank(), 0);
  for (size_t index = 0; index < dims->size(); ++index) {
    int64_t dim = (*dims)[index];
    if (dim < 0 || dim >= result.getRank()) {
      c.fail("dim ", dim, " is out of range for result rank ",
             result.getRank());
      return;
    }
    if (index > 0 && dim <= (*dims)[index - 1]) {
      c.fail("expects increasing dims, got ", ListText{*dims});
      return;
    }
    int64_t inSize = input.shape[index];
    if (inSize != 1 && inSize != result.shape[dim]) {
      c.fail("operand dim ", index, " of size ", inSize,
             " cannot broadcast to size ", result.shape[dim], " of result dim ",
             dim);
      return;
    }
    if (inSize != 1)
      strides[dim] = inputStrides[index];
  }
  if (c.isCheckOnly())
    return;
  gatherElements(input.data, getDTypeBytes(input.dtype), result.shape, strides,
                 0, result.data);
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

namespace {
enum class ReduceKind { Sum, Max, Mean };
} // namespace

/// Calls fn(row) for each row of `features` elements of `tensor`, the rows
/// split over the kernel threads.
template <typename Fn>
static void forEachRow(const Tensor &tensor, int64_t features, Fn fn) {
  cpu::parallelFor(tensor.getNumElements() / features,
                   std::max<int64_t>(kElementsPerThread / features, 1),
                   [&](int64_t begin, int64_t end) {
                     for (int64_t row = begin; row < end; ++row)
                       fn(row);
                   });
}

/// The sum of f(j) for j < n in double, as eight interleaved partial sums
/// added in a fixed order: they vectorise, and a row's sum does not depend
/// on where the row lies.
template <typename F> TESSERA_CLONES static double sumInLanes(int64_t n, F f) {
  constexpr int64_t kLanes = 8;
  double partial[kLanes] = {};
  int64_t whole = n - n % kLanes;
  for (int64_t j = 0; j < whole; j += kLanes)
    for (int64_t k = 0; k < kLanes; ++k)
      partial[k] += f(j + k);
  for (int64_t j = whole; j < n; ++j)
    partial[j - whole] += f(j);
  return ((partial[0] + partial[4]) + (partial[1] + partial[5])) +
         ((partial[2] + partial[6]) + (partial[3] + partial[7]));
}

/// slots[j] += x[j] for j < n: a row added into a row of sums (a bias
/// gradient's), in AVX2 where the CPU has it.
TESSERA_CLONES static void addRow(const float *x, double *slots, int64_t n) {
  for (int64_t j = 0; j < n; ++j)
    slots[j] += x[j];
}

static void runReduce(KernelCall &c, ReduceKind kind) {
  if (!c.expectArity(1, 1) || !c.expectF32(c.in(0), "input") ||
      !c.expectF32(c.out(0), "result"))
    return;
  const Tensor &input = c.in(0);
  const std::vector<int64_t> *dims = c.getList("dims");
  if (!dims || !c.expectDims(*dims, input.getRank(), "dim"))
    return;
  std::vector<bool> reduced(input.getRank(), false);
  for (int64_t dim : *dims)
    reduced[dim] = true;
  std::vector<int64_t> resultShape;
  for (int64_t dim = 0; dim < input.getRank(); ++dim)
    if (!reduced[dim])
      resultShape.push_back(input.shape[dim]);
  if (!c.expectShape(c.out(0), resultShape, "result"))
    return;

  if (c.isCheckOnly())
    return;
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

//===----------------------------------------------------------------------===//
// Shape manipulation
//===----------------------------------------------------------------------===//

static void runReshape(KernelCall &c) {
  if (!c.expectArity(1, 1) || !c.expectDType(c.out(0), c.in(0).dtype, "result"))
    return;
  if (c.in(0).getNumElements() != c.out(0).getNumElements()) {
    c.fail("cannot reshape ", c.in(0).getNumElements(), " elements into ",
           c.out(0).getNumElements());
    return;
  }
  if (c.isCheckOnly())
    return;
  copyBytes(c.out(0).data, c.in(0).data, c.in(0).getBytes());
}

static void runTranspose(KernelCall &c) {
  if (!c.expectArity(1, 1) || !c.expectDType(c.out(0), c.in(0).dtype, "result"))
    return;
  const Tensor &input = c.in(0);
  const std::vector<int64_t> *perm = c.getList("permutation");
  if (!perm)
    return;
  if (static_cast<int64_t>(perm->size()) != input.getRank()) {
    c.fail("expects a permutation of ", input.getRank(), " dims, got ",
           ListText{*perm});
    return;
  }
  if (!c.expectDims(*perm, input.getRank(), "permutation entry"))
    return;
  std::vector<int64_t> resultShape;
  for (int64_t dim : *perm)
    resultShape.push_back(input.shape[dim]);
  if (!c.expectShape(c.out(0), resultShape, "result"))
    return;
  if (c.isCheckOnly())
    return;
  permuteElements(input, *perm, c.out(0).data);
}

static void runSlice(KernelCall &c) {
  if (!c.expectArity(1, 1) || !c.expectDType(c.out(0), c.in(0).dtype, "result"))
    return;
  const Tensor &input = c.in(0);
  const std::vector<int64_t> *start = c.getList("start");
  const std::vector<int64_t> *limit = c.getList("limit");
  if (!start || !limit)
    return;
  int64_t rank = input.getRank();
  if (static_cast<int64_t>(start->size()) != rank ||
      static_cast<int64_t>(limit->size()) != rank) {
    c.fail("expects start and limit of rank ", rank, ", got ", start->size(),
           " and ", limit->size());
    return;
  }
  std::vector<int64_t> strides = getStrides(input.shape);
  std::vector<int64_t> resultShape;
  int64_t base = 0;
  for (int64_t dim = 0; dim < rank; ++dim) {
    int64_t size = input.shape[dim], from = (*start)[dim], to = (*limit)[dim];
    if (from < 0 || from > to || to > size) {
      c.fail("dim ", dim, " of size ", size, " cannot be sliced [", from, ", ",
             to, ")");
      return;
    }
    resultShape.push_back(to - from);
    base += from * strides[dim];
  }
  if (!c.expectShape(c.out(0), resultShape, "result"))
    return;
  if (c.isCheckOnly())
    return;
  gatherElements(input.data, getDTypeBytes(input.dtype), resultShape, strides,
                 base, c.out(0).data);
}

static void runConcat(KernelCall &c) {
  if (!c.expectVariadicArity(1, 1))
    return;
  std::optional<int64_t> dim = c.getInt("dim");
  if (!dim)
    return;
  const Tensor &first = c.in(0);
  if (*dim < 0 || *dim >= first.getRank()) {
    c.fail("dim ", *dim, " is out of range for rank ", first.getRank());
    return;
  }
  std::vector<int64_t> resultShape = first.shape;
  for (size_t index = 1; index < c.getNumInputs(); ++index) {
    const Tensor &input = c.in(index);
    if (input.dtype != first.dtype) {
      c.fail("input #", index, " has element type ", getDTypeName(input.dtype),
             ", expected ", getDTypeName(first.dtype));
      return;
    }
    std::vector<int64_t> expected = first.shape;
    expected[*dim] = input.getRank() == first.getRank() ? input.shape[*dim] : 0;
    if (input.shape != expected) {
      c.fail("input #", index, " has shape ", ListText{input.shape},
             ", which does not match ", ListText{first.shape}, " outside dim ",
             *dim);
      return;
    }
    resultShape[*dim] += input.shape[*dim];
  }
  if (!c.expectDType(c.out(0), first.dtype, "result") ||
      !c.expectShape(c.out(0), resultShape, "result"))
    return;

  if (c.isCheckOnly())
    return;
  // Each input contributes one contiguous run per index of the dims before
  // `dim`; the runs interleave in the result.
  int64_t outer = splitAround(first.shape, *dim).outer;
  auto *dst = c.out(0).as<uint8_t>();
  for (int64_t o = 0; o < outer; ++o) {
    for (size_t index = 0; index < c.getNumInputs(); ++index) {
      const Tensor &input = c.in(index);
      size_t runBytes = input.getBytes() / std::max<int64_t>(outer, 1);
      // A padding written in place (Buffer.overwrites): the first input's
      // bytes are already there.
      const uint8_t *src = input.as<const uint8_t>() + o * runBytes;
      if (src != dst)
        std::memcpy(dst, src, runBytes);
      dst += runBytes;
    }
  }
}

//===----------------------------------------------------------------------===//
// Neural-network layers
//===----------------------------------------------------------------------===//

/// Softmax or log-softmax along `dim`; a softmax scales its input first
/// (rounded to f32, as nn.mul would) and, when causal, gives no weight to
/// the keys after each row's query (as nn.causal_mask's -infinity would).
static void runSoftmax(KernelCall &c, bool log) {
  if (!c.expectArity(1, 1) || !c.expectF32(c.in(0), "input") ||
      !c.expectF32(c.out(0), "result") ||
      !c.expectShape(c.out(0), c.in(0).shape, "result"))
    return;
  std::optional<int64_t> dim = c.getInt("dim");
  std::optional<double> scaleAttr = log ? 1.0 : c.getFloat("scale");
  std::optional<int64_t> causalAttr = log ? 0 : c.getInt("causal");
  if (!dim || !scaleAttr || !causalAttr)
    return;
  const Tensor &input = c.in(0);
  int64_t rank = input.getRank();
  if (*dim < 0 || *dim >= rank) {
    c.fail("dim ", *dim, " is out of range for rank ", rank);
    return;
  }
  bool causal = *causalAttr != 0;
  if (causal && (rank < 2 || *dim != rank - 1)) {
    c.fail("a causal softmax expects scores [..., query, key] and dim ",
           rank - 1, ", got rank ", rank, " and dim ", *dim);
    return;
  }
  if (c.isCheckOnly() || input.getNumElements() == 0)
    return;
  // Named, not bound: a lambda below captures them (C++17).
  DimSplit split = splitAround(input.shape, *dim);
  int64_t outer = split.outer, size = split.size, inner = split.inner;
  auto scale = static_cast<float>(*scaleAttr);
  int64_t queries = causal ? input.shape[rank - 2] : 1;
  if (inner == 1) {
    // Rows in a row: the exps vectorised, summed in double. A causal row
    // has the keys up to its query; the rest are 0.
    forEachRow(input, size, [&](int64_t o) {
      const float *x = input.as<float>() + o * size;
      float *y = c.out(0).as<float>() + o * size;
      int64_t seen = causal ? std::min(size, o % queries + 1) : size;
      const float *v = x; // The scaled row.
      if (scale != 1.0f) {
        for (int64_t j = 0; j < seen; ++j)
          y[j] = x[j] * scale;
        v = y;
      }
      float max = -std::numeric_limits<float>::infinity();
      for (int64_t j = 0; j < seen; ++j)
        max = std::max(max, v[j]);
      if (log) {
        for (int64_t j = 0; j < size; ++j)
          y[j] = x[j] - max;
        cpu::vectorExp(y, y, size);
        double sum = sumInLanes(size, [&](int64_t j) { return double(y[j]); });
        float logSum = static_cast<float>(std::log(sum));
        for (int64_t j = 0; j < size; ++j)
          y[j] = (x[j] - max) - logSum;
        return;
      }
      for (int64_t j = 0; j < seen; ++j)
        y[j] = v[j] - max;
      cpu::vectorExp(y, y, seen);
      double sum = sumInLanes(seen, [&](int64_t j) { return double(y[j]); });
      float reciprocal = static_cast<float>(1.0 / sum);
      for (int64_t j = 0; j < seen; ++j)
        y[j] *= reciprocal;
      std::fill(y + seen, y + size, 0.0f);
    });
    return;
  }
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      const float *x = input.as<float>() + o * size * inner + i;
      float *y = c.out(0).as<float>() + o * size * inner + i;
      auto at = [&](int64_t j) { return double(x[j * inner] * scale); };
      // Subtracting the maximum keeps exp from overflowing.
      double max = -std::numeric_limits<double>::infinity();
      for (int64_t j = 0; j < size; ++j)
        max = std::max(max, at(j));
      double sum = 0;
      for (int64_t j = 0; j < size; ++j)
        sum += std::exp(at(j) - max);
      double logSum = std::log(sum);
      for (int64_t j = 0; j < size; ++j) {
        double shifted = at(j) - max;
        y[j * inner] = log ? shifted - logSum : std::exp(shifted - logSum);
      }
    }
  }
}

/// Checks a norm's input and a per-feature parameter of its last dim.
static bool expectNorm(KernelCall &c, size_t numInputs) {
  if (!c.expectArity(numInputs, 1) || !c.expectF32(c.in(0), "input") ||
      !c.expectF32(c.out(0), "result") ||
      !c.expectShape(c.out(0), c.in(0).shape, "result"))
    return false;
  if (c.in(0).getRank() == 0)
    return c.fail("expects an input of rank at least 1");
  std::vector<int64_t> paramShape = {c.in(0).shape.back()};
  const char *names[] = {"gamma", "beta"};
  for (size_t index = 1; index < numInputs; ++index)
    if (!c.expectF32(c.in(index), names[index - 1]) ||
        !c.expectShape(c.in(index), paramShape, names[index - 1]))
      return false;
  return true;
}

/// A row's mean (0 for RMS norm) and 1 / sqrt(variance + epsilon) (the
/// mean square for RMS norm). Two passes: the one-pass E[x²] - E[x]²
/// cancels badly in f32 data.
TESSERA_CLONES static void getRowStatistics(const float *x, int64_t features,
                                            bool rms, double epsilon,
                                            double &mean, double &rstd) {
  mean = rms ? 0.0 : sumInLanes(features, [&](int64_t j) {
                       return double(x[j]);
                     }) / features;
  double variance = sumInLanes(
      features, [&](int64_t j) { return (x[j] - mean) * (x[j] - mean); });
  rstd = 1.0 / std::sqrt(variance / features + epsilon);
}

static void runLayerNorm(KernelCall &c) {
  if (!expectNorm(c, 3))
    return;
  std::optional<double> epsilon = c.getFloat("epsilon");
  if (!epsilon)
    return;
  const Tensor &input = c.in(0);
  int64_t features = input.shape.back();
  if (features == 0)
    return;
  if (c.isCheckOnly())
    return;
  const float *gamma = c.in(1).as<float>(), *beta = c.in(2).as<float>();
  forEachRow(input, features, [&](int64_t row) {
    const float *x = input.as<float>() + row * features;
    float *y = c.out(0).as<float>() + row * features;
    double mean, rstd;
    getRowStatistics(x, features, /*rms=*/false, *epsilon, mean, rstd);
    for (int64_t j = 0; j < features; ++j)
      y[j] = (x[j] - mean) * rstd * gamma[j] + beta[j];
  });
}

static void runRmsNorm(KernelCall &c) {
  if (!expectNorm(c, 2))
    return;
  std::optional<double> epsilon = c.getFloat("epsilon");
  if (!epsilon)
    return;
  const Tensor &input = c.in(0);
  int64_t features = input.shape.back();
  if (features == 0)
    return;
  if (c.isCheckOnly())
    return;
  const float *gamma = c.in(1).as<float>();
  forEachRow(input, features, [&](int64_t row) {
    const float *x = input.as<float>() + row * features;
    float *y = c.out(0).as<float>() + row * features;
    double mean, rstd;
    getRowStatistics(x, features, /*rms=*/true, *epsilon, mean, rstd);
    for (int64_t j = 0; j < features; ++j)
      y[j] = x[j] * rstd * gamma[j];
  });
}

/// One row of nn.layer_norm_grad or nn.rms_norm_grad: the forward's
/// statistics again, then dx and x̂ (see the ops' descriptions).
TESSERA_CLONES static void getNormGradRow(const float *x, const float *dy,
                                          const float *gamma, float *dx,
                                          float *xhat, int64_t features,
                                          bool rms, double epsilon) {
  double mean, rstd;
  getRowStatistics(x, features, rms, epsilon, mean, rstd);
  // g = dy · gamma; the row means of g and g · x̂.
  auto g = [&](int64_t j) { return static_cast<double>(dy[j]) * gamma[j]; };
  double meanG = rms ? 0.0 : sumInLanes(features, g) / features;
  double meanGX =
      sumInLanes(features,
                 [&](int64_t j) { return g(j) * (x[j] - mean) * rstd; }) /
      features;
  for (int64_t j = 0; j < features; ++j) {
    double normalized = (x[j] - mean) * rstd;
    dx[j] = rstd * (g(j) - meanG - normalized * meanGX);
    xhat[j] = normalized;
  }
}

/// nn.layer_norm_grad and nn.rms_norm_grad, row by row.
static void runNormGrad(KernelCall &c, bool rms) {
  if (!c.expectArity(3, 2) || !c.expectF32(c.in(0), "input") ||
      !c.expectF32(c.in(1), "gamma") ||
      !c.expectF32(c.in(2), "result gradient") ||
      !c.expectShape(c.in(2), c.in(0).shape, "result gradient"))
    return;
  const Tensor &input = c.in(0);
  if (input.getRank() == 0) {
    c.fail("expects an input of rank at least 1");
    return;
  }
  int64_t features = input.shape.back();
  if (!c.expectShape(c.in(1), {features}, "gamma") ||
      !c.expectF32(c.out(0), "input gradient") ||
      !c.expectShape(c.out(0), input.shape, "input gradient") ||
      !c.expectF32(c.out(1), "normalized input") ||
      !c.expectShape(c.out(1), input.shape, "normalized input"))
    return;
  std::optional<double> epsilon = c.getFloat("epsilon");
  if (!epsilon || c.isCheckOnly() || features == 0)
    return;
  const float *gamma = c.in(1).as<float>();
  forEachRow(input, features, [&](int64_t row) {
    const float *x = input.as<float>() + row * features;
    const float *dy = c.in(2).as<float>() + row * features;
    float *dx = c.out(0).as<float>() + row * features;
    float *xhat = c.out(1).as<float>() + row * features;
    getNormGradRow(x, dy, gamma, dx, xhat, features, rms, *epsilon);
  });
}

static int64_t readIndex(const Tensor &tensor, int64_t i) {
  return tensor.dtype == DType::I32 ? tensor.as<int32_t>()[i]
                                    : tensor.as<int64_t>()[i];
}

/// The key and place of a random op's draw of `shape` (nn.random_uniform,
/// nn.dropout, nn.attention's dropout): the step at input `stepInput`, then
/// the piece index if the op is on a piece, whose `global_shape` places it,
/// and `numOutputs` outputs. Fails the call if they do not fit.
static bool getRandomDraw(KernelCall &c, size_t stepInput, size_t numOutputs,
                          const std::vector<int64_t> &shape, uint64_t &seed,
                          uint64_t &step, random::PiecePlace &place) {
  if (!c.expectVariadicArity(stepInput + 1, numOutputs) ||
      c.getNumInputs() > stepInput + 2)
    return c.fail("expects the step and at most a piece index after it, got ",
                  c.getNumInputs() - stepInput, " inputs");
  std::optional<int64_t> seedAttr = c.getInt("seed");
  if (!seedAttr || !c.expectIndex(c.in(stepInput), "step") ||
      !c.expectShape(c.in(stepInput), {}, "step"))
    return false;
  std::vector<int64_t> globalShape;
  const Tensor *piece = nullptr;
  if (c.getNumInputs() == stepInput + 2) {
    piece = &c.in(stepInput + 1);
    const std::vector<int64_t> *global = c.getList("global_shape");
    if (!global || !c.expectDType(*piece, DType::I64, "piece") ||
        !c.expectShape(*piece, {static_cast<int64_t>(shape.size())}, "piece"))
      return false;
    globalShape = *global;
  }
  if (std::string error = random::makePiecePlace(shape, globalShape, place);
      !error.empty())
    return c.fail(error);
  // The piece index is data, known when the kernel runs.
  if (piece && !c.isCheckOnly())
    if (int dim = place.setPieceIndex(piece->as<int64_t>()); dim >= 0)
      return c.failOnData("piece ", piece->as<int64_t>()[dim], " of size ",
                          shape[dim], " lies outside dim ", dim, " of size ",
                          globalShape[dim]);
  seed = static_cast<uint64_t>(*seedAttr);
  if (!c.isCheckOnly())
    step = static_cast<uint64_t>(readIndex(c.in(stepInput), 0));
  return true;
}

/// nn.random_uniform: numbers in [0, 1) by the element's global index.
static void runRandomUniform(KernelCall &c) {
  if (!c.expectVariadicArity(1, 1) || !c.expectF32(c.out(0), "result"))
    return;
  Tensor &result = c.out(0);
  uint64_t seed = 0, step = 0;
  random::PiecePlace place;
  if (!getRandomDraw(c, 0, 1, result.shape, seed, step, place) ||
      c.isCheckOnly())
    return;
  float *y = result.as<float>();
  for (int64_t i = 0, e = result.getNumElements(); i < e; ++i)
    y[i] = random::uniformAt(seed, step, place.getGlobalIndex(i));
}

/// nn.dropout: x / (1 - rate) where the element's number is at least rate.
static void runDropout(KernelCall &c) {
  if (!c.expectVariadicArity(2, 1) || !c.expectF32(c.in(0), "input") ||
      !c.expectF32(c.out(0), "result") ||
      !c.expectShape(c.out(0), c.in(0).shape, "result"))
    return;
  std::optional<double> rate = c.getFloat("rate");
  random::Dropout drop;
  if (!rate ||
      !getRandomDraw(c, 1, 1, c.in(0).shape, drop.seed, drop.step,
                     drop.place) ||
      c.isCheckOnly())
    return;
  drop.rate = static_cast<float>(*rate);
  const float *x = c.in(0).as<float>();
  float *y = c.out(0).as<float>();
  // A row of the last dim at a time.
  int64_t width = c.in(0).shape.empty() ? 1 : c.in(0).shape.back();
  std::vector<float> scales(width);
  for (int64_t row = 0, e = c.in(0).getNumElements(); row < e; row += width) {
    drop.getRowScales(row, width, scales.data());
    for (int64_t i = 0; i < width; ++i)
      y[row + i] = x[row + i] * scales[i];
  }
}

/// nn.embedding. An index outside the table gives a zero row: with a
/// vocab-split table each rank looks up the indices in its own rows, placed
/// by its piece index, and the partial results are summed.
static void runEmbedding(KernelCall &c) {
  if (!(c.getNumInputs() == 3 ? c.expectArity(3, 1) : c.expectArity(2, 1)) ||
      !c.expectF32(c.in(0), "table") || !c.expectIndex(c.in(1), "indices") ||
      !c.expectF32(c.out(0), "result"))
    return;
  const Tensor &table = c.in(0), &indices = c.in(1);
  if (table.getRank() != 2) {
    c.fail("expects a table of rank 2 ([vocab, hidden]), got shape ",
           ListText{table.shape});
    return;
  }
  int64_t vocab = table.shape[0], hidden = table.shape[1];
  std::vector<int64_t> resultShape = indices.shape;
  resultShape.push_back(hidden);
  std::optional<int64_t> offset = readPieceOffset(c, 2, vocab);
  if (!offset || !c.expectShape(c.out(0), resultShape, "result"))
    return;
  if (c.isCheckOnly())
    return;
  float *result = c.out(0).as<float>();
  for (int64_t i = 0, e = indices.getNumElements(); i < e; ++i) {
    int64_t index = readIndex(indices, i) - *offset;
    float *row = result + i * hidden;
    if (index < 0 || index >= vocab)
      std::fill(row, row + hidden, 0.0f);
    else
      std::copy_n(table.as<float>() + index * hidden, hidden, row);
  }
}

/// nn.embedding_grad: row gradients summed into the table at their indices;
/// an index outside the table adds nothing.
static void runEmbeddingGrad(KernelCall &c) {
  if (!(c.getNumInputs() == 3 ? c.expectArity(3, 1) : c.expectArity(2, 1)) ||
      !c.expectF32(c.in(0), "gradient") || !c.expectIndex(c.in(1), "indices") ||
      !c.expectF32(c.out(0), "result"))
    return;
  const Tensor &grad = c.in(0), &indices = c.in(1);
  Tensor &table = c.out(0);
  std::vector<int64_t> rowShape = indices.shape;
  if (table.getRank() != 2 || grad.getRank() != indices.getRank() + 1) {
    c.fail("expects a [vocab, hidden] result and a gradient of shape "
           "indices ++ [hidden]");
    return;
  }
  rowShape.push_back(table.shape[1]);
  int64_t vocab = table.shape[0], hidden = table.shape[1];
  std::optional<int64_t> offset = readPieceOffset(c, 2, vocab);
  if (!offset || !c.expectShape(grad, rowShape, "gradient"))
    return;
  if (c.isCheckOnly())
    return;
  float *rows = table.as<float>();
  std::fill(rows, rows + vocab * hidden, 0.0f);
  for (int64_t i = 0, e = indices.getNumElements(); i < e; ++i) {
    int64_t index = readIndex(indices, i) - *offset;
    if (index < 0 || index >= vocab)
      continue;
    const float *from = grad.as<float>() + i * hidden;
    float *to = rows + index * hidden;
    for (int64_t h = 0; h < hidden; ++h)
      to[h] += from[h];
  }
}

/// nn.one_hot: 1 at each label, 0 elsewhere (a label outside the depth
/// gives a zero row); with a piece index, a piece of the classes.
static void runOneHot(KernelCall &c) {
  if (!(c.getNumInputs() == 2 ? c.expectArity(2, 1) : c.expectArity(1, 1)) ||
      !c.expectIndex(c.in(0), "labels") || !c.expectF32(c.out(0), "result"))
    return;
  const Tensor &labels = c.in(0);
  Tensor &result = c.out(0);
  if (result.getRank() != labels.getRank() + 1) {
    c.fail("expects a result of rank ", labels.getRank() + 1);
    return;
  }
  std::vector<int64_t> shape = labels.shape;
  int64_t depth = result.shape.back();
  shape.push_back(depth);
  std::optional<int64_t> offset = readPieceOffset(c, 1, depth);
  if (!offset || !c.expectShape(result, shape, "result"))
    return;
  if (c.isCheckOnly())
    return;
  float *out = result.as<float>();
  std::fill(out, out + result.getNumElements(), 0.0f);
  for (int64_t i = 0, e = labels.getNumElements(); i < e; ++i) {
    int64_t label = readIndex(labels, i) - *offset;
    if (label >= 0 && label < depth)
      out[i * depth + label] = 1.0f;
  }
}

/// nn.moe_dispatch: each group's choices [tokens, k] take their experts'
/// slots in GShard's order (first choices in token order, then second
/// ones, ...) while slots last.
static void runMoeDispatch(KernelCall &c) {
  if (!c.expectArity(1, 1) || !c.expectIndex(c.in(0), "indices") ||
      !c.expectF32(c.out(0), "result"))
    return;
  const Tensor &indices = c.in(0);
  Tensor &mask = c.out(0);
  if (indices.getRank() < 2 || mask.getRank() != indices.getRank() + 1) {
    c.fail("expects indices [..., tokens, k] and a result [..., tokens, "
           "experts, capacity]");
    return;
  }
  int64_t experts = mask.shape[mask.getRank() - 2];
  int64_t capacity = mask.shape.back();
  std::vector<int64_t> shape(indices.shape.begin(), indices.shape.end() - 1);
  shape.push_back(experts);
  shape.push_back(capacity);
  if (!c.expectShape(mask, shape, "result") || c.isCheckOnly())
    return;
  int64_t k = indices.shape.back();
  int64_t tokens = indices.shape[indices.getRank() - 2];
  int64_t groups = indices.getNumElements() / std::max<int64_t>(tokens * k, 1);
  float *out = mask.as<float>();
  std::fill(out, out + mask.getNumElements(), 0.0f);
  std::vector<int64_t> taken(experts);
  for (int64_t group = 0; group < groups; ++group) {
    std::fill(taken.begin(), taken.end(), 0);
    for (int64_t choice = 0; choice < k; ++choice)
      for (int64_t token = 0; token < tokens; ++token) {
        int64_t row = group * tokens + token;
        int64_t expert = readIndex(indices, row * k + choice);
        if (expert < 0 || expert >= experts || taken[expert] >= capacity)
          continue;
        out[(row * experts + expert) * capacity + taken[expert]++] = 1.0f;
      }
  }
}

namespace {
/// gather's and scatter_add's layout around `axis`: `outer` rows before it,
/// `inner` elements after it, `whole` the full tensor's size along it
/// (gathered from, scattered into) and `picked` the indices' size.
struct AxisLayout {
  int64_t outer = 1, inner = 1, whole = 0, picked = 0;
};
} // namespace

/// Checks a gather (`gather`) or scatter_add: the whole tensor (the input,
/// the result), the indices and the picked tensor (the result, the source),
/// the indices with the whole tensor's dims but at `axis`, the picked
/// tensor with the indices' shape.
static std::optional<AxisLayout> checkIndexedAxis(KernelCall &c,
                                                  const Tensor &whole,
                                                  const Tensor &indices,
                                                  const Tensor &picked) {
  std::optional<int64_t> axis = c.getInt("axis");
  if (!axis || !c.expectF32(whole, "values") ||
      !c.expectIndex(indices, "indices") || !c.expectF32(picked, "values"))
    return std::nullopt;
  if (*axis < 0 || *axis >= whole.getRank()) {
    c.fail("expects axis in [0, ", whole.getRank(), "), got ", *axis);
    return std::nullopt;
  }
  std::vector<int64_t> shape = whole.shape;
  if (indices.getRank() == whole.getRank())
    shape[*axis] = indices.shape[*axis];
  if (!c.expectShape(indices, shape, "indices") ||
      !c.expectShape(picked, shape, "values"))
    return std::nullopt;
  AxisLayout layout;
  for (int64_t dim = 0; dim < *axis; ++dim)
    layout.outer *= whole.shape[dim];
  for (int64_t dim = *axis + 1; dim < whole.getRank(); ++dim)
    layout.inner *= whole.shape[dim];
  layout.whole = whole.shape[*axis];
  layout.picked = shape[*axis];
  return layout;
}

/// The flat offsets of indices element `i` in the picked tensor (itself)
/// and in the whole tensor, or nothing (recorded) when its index is out of
/// range.
static std::optional<int64_t> getWholeOffset(KernelCall &c,
                                             const AxisLayout &layout,
                                             const Tensor &indices, int64_t i) {
  int64_t index = readIndex(indices, i);
  if (index < 0 || index >= layout.whole) {
    c.failOnData("index ", index, " at position ", i, " is outside [0, ",
                 layout.whole, ")");
    return std::nullopt;
  }
  int64_t inner = i % layout.inner, row = i / layout.inner / layout.picked;
  return (row * layout.whole + index) * layout.inner + inner;
}

static void runGather(KernelCall &c) {
  if (!c.expectArity(2, 1))
    return;
  std::optional<AxisLayout> layout =
      checkIndexedAxis(c, c.in(0), c.in(1), c.out(0));
  if (!layout || c.isCheckOnly())
    return;
  const float *input = c.in(0).as<float>();
  float *result = c.out(0).as<float>();
  for (int64_t i = 0, e = c.out(0).getNumElements(); i < e; ++i) {
    std::optional<int64_t> from = getWholeOffset(c, *layout, c.in(1), i);
    if (!from)
      return;
    result[i] = input[*from];
  }
}

static void runScatterAdd(KernelCall &c) {
  if (!c.expectArity(2, 1))
    return;
  std::optional<AxisLayout> layout =
      checkIndexedAxis(c, c.out(0), c.in(1), c.in(0));
  if (!layout || c.isCheckOnly())
    return;
  const float *source = c.in(0).as<float>();
  float *result = c.out(0).as<float>();
  std::fill(result, result + c.out(0).getNumElements(), 0.0f);
  for (int64_t i = 0, e = c.in(0).getNumElements(); i < e; ++i) {
    std::optional<int64_t> to = getWholeOffset(c, *layout, c.in(1), i);
    if (!to)
      return;
    result[*to] += source[i];
  }
}

/// nn.top_k along the last dim: descending, NaN first, ties by index.
static void runTopK(KernelCall &c) {
  if (!c.expectArity(1, 2) || !c.expectF32(c.in(0), "input") ||
      !c.expectF32(c.out(0), "values") ||
      !c.expectDType(c.out(1), DType::I64, "indices"))
    return;
  const Tensor &input = c.in(0);
  std::optional<int64_t> k = c.getInt("k");
  if (!k)
    return;
  if (input.getRank() == 0 || *k < 1 || *k > input.shape.back()) {
    c.fail("expects k in [1, ", input.getRank() ? input.shape.back() : 0,
           "], got ", *k);
    return;
  }
  std::vector<int64_t> shape = input.shape;
  shape.back() = *k;
  if (!c.expectShape(c.out(0), shape, "values") ||
      !c.expectShape(c.out(1), shape, "indices") || c.isCheckOnly())
    return;
  int64_t size = input.shape.back(), rows = input.getNumElements() / size;
  std::vector<int64_t> order(size);
  for (int64_t row = 0; row < rows; ++row) {
    const float *x = input.as<float>() + row * size;
    for (int64_t i = 0; i < size; ++i)
      order[i] = i;
    std::partial_sort(order.begin(), order.begin() + *k, order.end(),
                      [x](int64_t a, int64_t b) {
                        bool nanA = x[a] != x[a], nanB = x[b] != x[b];
                        if (nanA != nanB)
                          return nanA;
                        if (!nanA && x[a] != x[b])
                          return x[a] > x[b];
                        return a < b;
                      });
    for (int64_t j = 0; j < *k; ++j) {
      c.out(0).as<float>()[row * *k + j] = x[order[j]];
      c.out(1).as<int64_t>()[row * *k + j] = order[j];
    }
  }
}

static void runCrossEntropy(KernelCall &c) {
  if (!c.expectArity(2, 1) || !c.expectF32(c.in(0), "logits") ||
      !c.expectIndex(c.in(1), "labels") || !c.expectF32(c.out(0), "result"))
    return;
  const Tensor &logits = c.in(0), &labels = c.in(1);
  if (logits.getRank() == 0) {
    c.fail("expects logits of rank at least 1");
    return;
  }
  std::vector<int64_t> positions(logits.shape.begin(), logits.shape.end() - 1);
  if (!c.expectShape(labels, positions, "labels") ||
      !c.expectShape(c.out(0), positions, "result"))
    return;
  if (c.isCheckOnly())
    return;
  int64_t vocab = logits.shape.back();
  float *result = c.out(0).as<float>();
  for (int64_t i = 0, e = labels.getNumElements(); i < e; ++i)
    if (int64_t label = readIndex(labels, i); label < 0 || label >= vocab) {
      c.failOnData("label ", label, " at position ", i, " is outside [0, ",
                   vocab, ")");
      return;
    }
  if (vocab == 0)
    return;
  forEachRow(logits, vocab, [&](int64_t i) {
    thread_local std::vector<float> exps;
    exps.resize(vocab);
    const float *x = logits.as<float>() + i * vocab;
    float max = *std::max_element(x, x + vocab);
    for (int64_t j = 0; j < vocab; ++j)
      exps[j] = x[j] - max;
    cpu::vectorExp(exps.data(), exps.data(), vocab);
    double sum = sumInLanes(vocab, [&](int64_t j) { return double(exps[j]); });
    result[i] =
        static_cast<float>(max + std::log(sum) - x[readIndex(labels, i)]);
  });
}

//===----------------------------------------------------------------------===//
// Fused attention
//===----------------------------------------------------------------------===//

namespace {
/// nn.attention's sizes: q [b, heads, s, d], k [b, kv, t, d], v [b, kv, t,
/// dv], and its attributes.
struct AttentionDims {
  int64_t batch, heads, kvHeads, queries, keys, d, dv;
  float scale;
  bool causal;
  /// Dropout of the probabilities [b, heads, s, t].
  random::Dropout dropout;

  /// The dropout's factors of `count` probabilities of (b, h, query) from
  /// key `key` on.
  void getKeep(int64_t b, int64_t h, int64_t query, int64_t key, int64_t count,
               float *scales) const {
    dropout.getRowScales(((b * heads + h) * queries + query) * keys + key,
                         count, scales);
  }

  /// Where the queries and the keys sit in the sequence: a piece of the
  /// queries, a ring block's, or a sequence stored in zigzag order.
  SequencePlace queryPlace, keyPlace;

  /// The keys of run `run` of the keys (SequencePlace) that query `query`
  /// sees: the run's first ones, all of them or with `causal` those up to
  /// its position.
  int64_t getVisibleKeys(int64_t query, int64_t run) const {
    int64_t runKeys = keyPlace.getRunRows();
    return causal ? std::clamp<int64_t>(queryPlace.getPosition(query) -
                                            keyPlace.getRunPosition(run) + 1,
                                        0, runKeys)
                  : runKeys;
  }
  /// The rows of the query tile from `query` on: at most `tile`, within
  /// its run of the queries (whose positions follow one another).
  int64_t getQueryTileRows(int64_t query, int64_t tile) const {
    int64_t runRows = queryPlace.getRunRows();
    return std::min({tile, queries - query, runRows - query % runRows});
  }
  /// Offsets of (batch, head)'s rows in q (and the result), and of its kv
  /// head's in k and v.
  int64_t getQueryOffset(int64_t b, int64_t h) const {
    return (b * heads + h) * queries;
  }
  int64_t getKeyOffset(int64_t b, int64_t h) const {
    return (b * kvHeads + h / (heads / kvHeads)) * keys;
  }
};

/// The query and key tiles of the CPU kernels: a block of scores of
/// kQueryTile x kKeyTile is the only memory beyond O(s).
constexpr int64_t kQueryTile = 64, kKeyTile = 256;
/// The backward keeps a query tile's scores from its log-sum-exp pass to
/// its gradient pass where they fit in this many floats (4 MiB: keys up
/// to 16384), and makes them again where they do not.
constexpr int64_t kKeptScores = int64_t(1) << 20;

/// A key tile a query tile sees some of: keys `start` to `start + cols`,
/// within run `run` of the keys (SequencePlace), which begins at key
/// `runStart`; `offset` keys of the query tile's earlier key tiles before
/// it.
struct KeyTile {
  int64_t start, cols, run, runStart, offset;

  /// The tile's keys that query `query` sees, from its first.
  int64_t getVisible(const AttentionDims &n, int64_t query) const {
    return std::clamp<int64_t>(runStart + n.getVisibleKeys(query, run) - start,
                               0, cols);
  }
};

/// The key tiles that the query tile of `rows` from `query` sees some of:
/// per run of the keys, its keys up to those its last query sees (the
/// queries of a tile are of one run), in kKeyTile tiles.
void getKeyTiles(const AttentionDims &n, int64_t query, int64_t rows,
                 std::vector<KeyTile> &tiles) {
  tiles.clear();
  int64_t offset = 0;
  for (int64_t run = 0; run < n.keyPlace.getRuns(); ++run) {
    int64_t runStart = run * n.keyPlace.getRunRows();
    int64_t end = runStart + n.getVisibleKeys(query + rows - 1, run);
    for (int64_t start = runStart; start < end; start += kKeyTile) {
      int64_t cols = std::min(kKeyTile, end - start);
      tiles.push_back({start, cols, run, runStart, offset});
      offset += cols;
    }
  }
}
} // namespace

/// Checks the tensors every attention kernel has: q, k and v, then for a
/// gradient the forward's result and its gradient (and a ring block's
/// log-sum-exps, `withLse`); the outputs the result (and a block's
/// log-sum-exps), or dq, dk and dv. Answers the sizes, scale and causal
/// still unset.
static std::optional<AttentionDims>
checkAttentionTensors(KernelCall &c, bool gradient, bool withLse) {
  size_t tensors = (gradient ? 5 : 3) + (gradient && withLse ? 1 : 0);
  const char *names[] = {"q", "k", "v", "result", "result gradient", "lse"};
  for (size_t i = 0; i < tensors; ++i)
    if (!c.expectF32(c.in(i), names[i]))
      return std::nullopt;
  const Tensor &q = c.in(0), &k = c.in(1), &v = c.in(2);
  if (q.getRank() != 4 || k.getRank() != 4 || v.getRank() != 4) {
    c.fail("expects q, k and v of rank 4, got ranks ", q.getRank(), ", ",
           k.getRank(), ", ", v.getRank());
    return std::nullopt;
  }
  AttentionDims n{q.shape[0], q.shape[1], k.shape[1], q.shape[2], k.shape[2],
                  q.shape[3], v.shape[3], 0,          false};
  n.queryPlace = SequencePlace::get(0, n.queries, n.queries, 0);
  n.keyPlace = SequencePlace::get(0, n.keys, n.keys, 0);
  if (n.kvHeads == 0 || n.heads % n.kvHeads != 0) {
    c.fail("expects kv heads dividing the query heads, got ", n.kvHeads,
           " for ", n.heads);
    return std::nullopt;
  }
  std::vector<int64_t> result = {n.batch, n.heads, n.queries, n.dv},
                       rows = {n.batch, n.heads, n.queries};
  if (!c.expectShape(k, {n.batch, n.kvHeads, n.keys, n.d}, "k") ||
      !c.expectShape(v, {n.batch, n.kvHeads, n.keys, n.dv}, "v"))
    return std::nullopt;
  if (gradient) {
    if (!c.expectShape(c.in(3), result, "result") ||
        !c.expectShape(c.in(4), result, "result gradient") ||
        (withLse && !c.expectShape(c.in(5), rows, "lse")))
      return std::nullopt;
    for (size_t i = 0; i < 3; ++i)
      if (!c.expectF32(c.out(i), names[i]) ||
          !c.expectShape(c.out(i), c.in(i).shape, names[i]))
        return std::nullopt;
  } else if (!c.expectF32(c.out(0), "result") ||
             !c.expectShape(c.out(0), result, "result") ||
             (withLse && (!c.expectF32(c.out(1), "lse") ||
                          !c.expectShape(c.out(1), rows, "lse")))) {
    return std::nullopt;
  }
  return n;
}

/// Checks nn.attention's or nn.attention_grad's tensors (see
/// checkAttentionTensors), then the dropout's step and piece index if any.
static std::optional<AttentionDims> checkAttention(KernelCall &c,
                                                   bool gradient) {
  size_t tensors = gradient ? 5 : 3, outputs = gradient ? 3 : 1;
  if (!c.expectVariadicArity(tensors, outputs))
    return std::nullopt;
  std::optional<AttentionDims> dims = checkAttentionTensors(c, gradient, false);
  if (!dims)
    return std::nullopt;
  AttentionDims n = *dims;
  std::optional<double> scale = c.getFloat("scale");
  std::optional<int64_t> causal = c.getInt("causal");
  std::optional<double> dropout = c.getFloat("dropout");
  if (!scale || !causal || !dropout)
    return std::nullopt;
  n.scale = static_cast<float>(*scale);
  n.causal = *causal != 0;
  n.dropout.rate = static_cast<float>(*dropout);
  if (!(n.dropout.rate >= 0 && n.dropout.rate < 1)) {
    c.fail("expects a dropout rate in [0, 1), got ", n.dropout.rate);
    return std::nullopt;
  }
  // Then the step (a scalar) where it drops, and the piece index where it
  // is a piece of the draw [b, heads, s, t].
  size_t extra = c.getNumInputs() - tensors;
  bool hasStep = extra > 0 && c.in(tensors).getRank() == 0;
  if (n.dropout.rate > 0 && !hasStep) {
    c.fail("expects the step its dropout mask is drawn for");
    return std::nullopt;
  }
  std::vector<int64_t> draw = {n.batch, n.heads, n.queries, n.keys};
  if (hasStep && !getRandomDraw(c, tensors, outputs, draw, n.dropout.seed,
                                n.dropout.step, n.dropout.place))
    return std::nullopt;
  if (!hasStep && extra > 0) {
    // A causal piece without dropout: the piece places the queries alone.
    if (!n.causal || extra > 1) {
      c.fail("expects a piece index without a step only when causal, got ",
             extra, " inputs after ", tensors == 3 ? "q, k, v" : "the tensors");
      return std::nullopt;
    }
    const std::vector<int64_t> *global = c.getList("global_shape");
    if (!global)
      return std::nullopt;
    if (std::string error =
            random::makePiecePlace(draw, *global, n.dropout.place);
        !error.empty()) {
      c.fail(error);
      return std::nullopt;
    }
    if (!c.expectDType(c.in(tensors), DType::I64, "piece") ||
        !c.expectShape(c.in(tensors), {4}, "piece"))
      return std::nullopt;
    const int64_t *index = c.in(tensors).as<int64_t>();
    if (!c.isCheckOnly())
      if (int dim = n.dropout.place.setPieceIndex(index); dim >= 0) {
        c.failOnData("piece ", index[dim], " of size ", draw[dim],
                     " lies outside dim ", dim, " of size ", (*global)[dim]);
        return std::nullopt;
      }
  }
  // A causal piece of the queries starts at its piece index times them.
  size_t piece = hasStep ? tensors + 1 : tensors;
  bool hasPiece = c.getNumInputs() > piece;
  if (n.causal && hasPiece && !c.isCheckOnly())
    n.queryPlace = SequencePlace::get(c.in(piece).as<int64_t>()[2] * n.queries,
                                      n.queries, n.queries, 0);
  std::optional<int64_t> zigzag = c.getInt("zigzag");
  if (!zigzag)
    return std::nullopt;
  if (*zigzag != 0) {
    // The whole sequence, stored in zigzag order.
    if (*zigzag < 0 || !n.causal || hasStep || hasPiece ||
        n.queries != n.keys || n.queries % (2 * *zigzag) != 0) {
      c.fail("expects zigzag order (", *zigzag,
             ") only causal, without dropout or a piece, on as many queries "
             "as keys in 2 zigzag chunks, got ",
             n.queries, " queries and ", n.keys, " keys");
      return std::nullopt;
    }
    n.queryPlace = SequencePlace::get(0, n.queries, n.queries, *zigzag);
    n.keyPlace = SequencePlace::get(0, n.keys, n.keys, *zigzag);
  }
  return n;
}

/// The largest of x[j] for j < n (-inf for none), in sixteen lanes that
/// vectorise: a row's running maximum is otherwise a chain of dependent
/// compares, a fifth of the attention kernels' time.
TESSERA_CLONES static float maxInLanes(const float *x, int64_t n) {
  constexpr int64_t kLanes = 16;
  float lanes[kLanes];
  std::fill(lanes, lanes + kLanes, -std::numeric_limits<float>::infinity());
  int64_t whole = n - n % kLanes;
  for (int64_t j = 0; j < whole; j += kLanes)
    for (int64_t k = 0; k < kLanes; ++k)
      lanes[k] = std::max(lanes[k], x[j + k]);
  for (int64_t j = whole; j < n; ++j)
    lanes[j - whole] = std::max(lanes[j - whole], x[j]);
  float largest = lanes[0];
  for (int64_t k = 1; k < kLanes; ++k)
    largest = std::max(largest, lanes[k]);
  return largest;
}

/// x[j] = exp(x[j] - shift) for j < n; answers their sum.
static float expShiftedAndSum(float *x, int64_t n, float shift) {
  for (int64_t j = 0; j < n; ++j)
    x[j] -= shift;
  cpu::vectorExp(x, x, n);
  return static_cast<float>(sumInLanes(n, [&](int64_t j) { return x[j]; }));
}

/// scores[r][c] = scale · q[r] · k[c] for a tile of `rows` queries and
/// `cols` keys (row-major, `cols` wide).
static void scoreTile(const AttentionDims &n, const float *q, const float *k,
                      int64_t rows, int64_t cols, float *scores) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, cols, n.d, n.scale,
              q, n.d, k, n.d, 0.0f, scores, cols);
}

/// nn.attention: per (batch, head), query tiles against key tiles with an
/// online softmax (FlashAttention's forward): each tile's scores are made,
/// exponentiated against the running row maximum, and multiplied into the
/// running output, which is rescaled when the maximum grows.
/// The forward of `n` into `out`, and each query row's log-sum-exp into
/// `lse` where given (-infinity, with an output of 0, for a row that sees
/// no key).
static void computeAttention(const AttentionDims &n, const float *q,
                             const float *k, const float *v, float *out,
                             float *lse) {
  const float minusInfinity = -std::numeric_limits<float>::infinity();
  // The (batch, head) pairs split over the kernel threads.
  cpu::parallelFor(n.batch * n.heads, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> scores(kQueryTile * kKeyTile);
    std::vector<float> acc(kQueryTile * n.dv), rowMax(kQueryTile),
        rowSum(kQueryTile), keepRow(kKeyTile);
    std::vector<KeyTile> keyTiles;
    for (int64_t pair = begin; pair < end; ++pair) {
      int64_t b = pair / n.heads, h = pair % n.heads;
      const float *qh = q + n.getQueryOffset(b, h) * n.d;
      const float *kh = k + n.getKeyOffset(b, h) * n.d;
      const float *vh = v + n.getKeyOffset(b, h) * n.dv;
      float *oh = out + n.getQueryOffset(b, h) * n.dv;
      for (int64_t i0 = 0, rows; i0 < n.queries; i0 += rows) {
        rows = n.getQueryTileRows(i0, kQueryTile);
        std::fill(acc.begin(), acc.end(), 0.0f);
        std::fill(rowMax.begin(), rowMax.end(), minusInfinity);
        std::fill(rowSum.begin(), rowSum.end(), 0.0f);
        getKeyTiles(n, i0, rows, keyTiles);
        for (const KeyTile &keyTile : keyTiles) {
          int64_t j0 = keyTile.start, cols = keyTile.cols;
          scoreTile(n, qh + i0 * n.d, kh + j0 * n.d, rows, cols, scores.data());
          for (int64_t r = 0; r < rows; ++r) {
            float *row = scores.data() + r * cols;
            int64_t visible = keyTile.getVisible(n, i0 + r);
            float newMax = std::max(rowMax[r], maxInLanes(row, visible));
            // A row that sees no key of this tile adds nothing.
            float rescale =
                newMax == minusInfinity ? 1.0f : std::exp(rowMax[r] - newMax);
            float sum = expShiftedAndSum(row, visible, newMax);
            std::fill(row + visible, row + cols, 0.0f);
            rowSum[r] = rowSum[r] * rescale + sum;
            rowMax[r] = newMax;
            for (int64_t e = 0; e < n.dv; ++e)
              acc[r * n.dv + e] *= rescale;
            // The softmax sums every probability; the values see the kept.
            if (n.dropout.rate > 0) {
              n.getKeep(b, h, i0 + r, j0, visible, keepRow.data());
              for (int64_t col = 0; col < visible; ++col)
                row[col] *= keepRow[col];
            }
          }
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, n.dv,
                      cols, 1.0f, scores.data(), cols, vh + j0 * n.dv, n.dv,
                      1.0f, acc.data(), n.dv);
        }
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t e = 0; e < n.dv; ++e)
            oh[(i0 + r) * n.dv + e] =
                rowSum[r] > 0 ? acc[r * n.dv + e] / rowSum[r] : 0.0f;
        if (lse)
          for (int64_t r = 0; r < rows; ++r)
            lse[n.getQueryOffset(b, h) + i0 + r] =
                rowSum[r] > 0 ? rowMax[r] + std::log(rowSum[r]) : minusInfinity;
      }
    }
  });
}

static void runAttention(KernelCall &c) {
  std::optional<AttentionDims> dims = checkAttention(c, /*gradient=*/false);
  if (!dims || c.isCheckOnly())
    return;
  computeAttention(*dims, c.in(0).as<float>(), c.in(1).as<float>(),
                   c.in(2).as<float>(), c.out(0).as<float>(), nullptr);
}

/// nn.attention_grad (FlashAttention's backward): a first pass recomputes
/// each query row's log-sum-exp, then every tile's probabilities are made
/// again from it, and the tile adds its terms to dv, dq and dk (a kv head's
/// from each query head of its group).
/// The gradients of `n` into dq, dk and dv (set whole), from the forward's
/// output and its gradient; with `givenLse` (a ring block's: the rows'
/// log-sum-exps over every block), the probabilities are made against it
/// instead of the rows' own.
static void computeAttentionGrad(const AttentionDims &n, const float *q,
                                 const float *k, const float *v,
                                 const float *out, const float *dout,
                                 const float *givenLse, float *dq, float *dk,
                                 float *dv) {
  std::fill(dq, dq + n.batch * n.heads * n.queries * n.d, 0.0f);
  std::fill(dk, dk + n.batch * n.kvHeads * n.keys * n.d, 0.0f);
  std::fill(dv, dv + n.batch * n.kvHeads * n.keys * n.dv, 0.0f);
  const float minusInfinity = -std::numeric_limits<float>::infinity();
  // The (batch, kv head) pairs split over the kernel threads, each taking
  // its group's query heads in order (they add to its dk and dv).
  int64_t group = n.heads / n.kvHeads;
  cpu::parallelFor(n.batch * n.kvHeads, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> probs(kQueryTile * kKeyTile),
        dprobs(kQueryTile * kKeyTile);
    // With dropout: each probability's keep factor, and the kept ones.
    std::vector<float> keep, kept;
    if (n.dropout.rate > 0) {
      keep.resize(kQueryTile * kKeyTile);
      kept.resize(kQueryTile * kKeyTile);
    }
    // Per query of a tile: the running maximum and sum of its scores'
    // exps, their log-sum-exp, and rowsum(do · o).
    std::vector<float> rowMax(kQueryTile), rowSum(kQueryTile),
        logSumExp(kQueryTile), rowDot(kQueryTile);
    std::vector<float> scores(std::min(kKeptScores, kQueryTile * n.keys));
    std::vector<KeyTile> keyTiles;
    for (int64_t pair = begin; pair < end; ++pair)
      for (int64_t b = pair / n.kvHeads, h = pair % n.kvHeads * group,
                   last = h + group;
           h < last; ++h) {
        int64_t qOffset = n.getQueryOffset(b, h),
                kOffset = n.getKeyOffset(b, h);
        const float *qh = q + qOffset * n.d, *kh = k + kOffset * n.d,
                    *vh = v + kOffset * n.dv, *oh = out + qOffset * n.dv,
                    *doh = dout + qOffset * n.dv;
        float *dqh = dq + qOffset * n.d, *dkh = dk + kOffset * n.d,
              *dvh = dv + kOffset * n.dv;
        for (int64_t i0 = 0, rows; i0 < n.queries; i0 += rows) {
          rows = n.getQueryTileRows(i0, kQueryTile);
          getKeyTiles(n, i0, rows, keyTiles);
          int64_t seen = keyTiles.empty()
                             ? 0
                             : keyTiles.back().offset + keyTiles.back().cols;
          // The log-sum-exp of each query's scores, and rowsum(do · o). The
          // scores stay for the tiles below where they fit (a key tile at
          // its offset times the rows), and are made again where they do
          // not. A given log-sum-exp needs no first pass.
          bool keepScores = !givenLse && rows * seen <= kKeptScores;
          std::fill(rowMax.begin(), rowMax.end(), minusInfinity);
          std::fill(rowSum.begin(), rowSum.end(), 0.0f);
          for (const KeyTile &keyTile : keyTiles) {
            if (givenLse)
              break;
            int64_t j0 = keyTile.start, cols = keyTile.cols;
            float *tile = keepScores ? scores.data() + keyTile.offset * rows
                                     : probs.data();
            scoreTile(n, qh + i0 * n.d, kh + j0 * n.d, rows, cols, tile);
            for (int64_t r = 0; r < rows; ++r) {
              const float *row = tile + r * cols;
              int64_t visible = keyTile.getVisible(n, i0 + r);
              float newMax = std::max(rowMax[r], maxInLanes(row, visible));
              if (newMax == minusInfinity)
                continue;
              float *shifted = dprobs.data();
              std::copy(row, row + visible, shifted);
              float sum = expShiftedAndSum(shifted, visible, newMax);
              rowSum[r] = rowSum[r] * std::exp(rowMax[r] - newMax) + sum;
              rowMax[r] = newMax;
            }
          }
          for (int64_t r = 0; r < rows; ++r) {
            logSumExp[r] = givenLse ? givenLse[qOffset + i0 + r]
                                    : rowMax[r] + std::log(rowSum[r]);
            const float *dor = doh + (i0 + r) * n.dv,
                        *outr = oh + (i0 + r) * n.dv;
            rowDot[r] = static_cast<float>(
                sumInLanes(n.dv, [&](int64_t e) { return dor[e] * outr[e]; }));
          }
          for (const KeyTile &keyTile : keyTiles) {
            int64_t j0 = keyTile.start, cols = keyTile.cols;
            float *tile = probs.data();
            if (keepScores)
              tile = scores.data() + keyTile.offset * rows;
            else
              scoreTile(n, qh + i0 * n.d, kh + j0 * n.d, rows, cols, tile);
            for (int64_t r = 0; r < rows; ++r) {
              float *row = tile + r * cols;
              int64_t visible = keyTile.getVisible(n, i0 + r);
              float shift = logSumExp[r];
              for (int64_t col = 0; col < visible; ++col)
                row[col] -= shift;
              cpu::vectorExp(row, row, visible);
              std::fill(row + visible, row + cols, 0.0f);
              if (n.dropout.rate > 0) {
                float *z = keep.data() + r * cols;
                n.getKeep(b, h, i0 + r, j0, cols, z);
                for (int64_t col = 0; col < cols; ++col)
                  kept[r * cols + col] = z[col] * row[col];
              }
            }
            // dv += (z p)ᵀ do; dp = do vᵀ.
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, cols, n.dv,
                        rows, 1.0f, n.dropout.rate > 0 ? kept.data() : tile,
                        cols, doh + i0 * n.dv, n.dv, 1.0f, dvh + j0 * n.dv,
                        n.dv);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, cols,
                        n.dv, 1.0f, doh + i0 * n.dv, n.dv, vh + j0 * n.dv, n.dv,
                        0.0f, dprobs.data(), cols);
            // ds = p · (z dp - rowsum(do · o)), in place of dp.
            if (n.dropout.rate > 0)
              for (int64_t e = 0; e < rows * cols; ++e)
                dprobs[e] *= keep[e];
            for (int64_t r = 0; r < rows; ++r) {
              float *ds = dprobs.data() + r * cols;
              const float *p = tile + r * cols;
              float dot = rowDot[r];
              for (int64_t col = 0; col < cols; ++col)
                ds[col] = p[col] * (ds[col] - dot);
            }
            // dq += scale · ds k; dk += scale · dsᵀ q.
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, n.d,
                        cols, n.scale, dprobs.data(), cols, kh + j0 * n.d, n.d,
                        1.0f, dqh + i0 * n.d, n.d);
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, cols, n.d,
                        rows, n.scale, dprobs.data(), cols, qh + i0 * n.d, n.d,
                        1.0f, dkh + j0 * n.d, n.d);
          }
        }
      }
  });
}

static void runAttentionGrad(KernelCall &c) {
  std::optional<AttentionDims> dims = checkAttention(c, /*gradient=*/true);
  if (!dims || c.isCheckOnly())
    return;
  computeAttentionGrad(*dims, c.in(0).as<float>(), c.in(1).as<float>(),
                       c.in(2).as<float>(), c.in(3).as<float>(),
                       c.in(4).as<float>(), nullptr, c.out(0).as<float>(),
                       c.out(1).as<float>(), c.out(2).as<float>());
}

/// Checks nn.attention_block's or nn.attention_block_grad's tensors (q, k,
/// v, then for the gradient o, do and the log-sum-exps, then the index in
/// the ring; the outputs o and the log-sum-exps, or dq, dk and dv) and
/// places the block: its queries from index × queries, its keys from the
/// index of the device they came from, (index - ring_step) mod ring_size,
/// times the keys.
static std::optional<AttentionDims> checkAttentionBlock(KernelCall &c,
                                                        bool gradient) {
  size_t tensors = gradient ? 6 : 3, outputs = gradient ? 3 : 2;
  if (!c.expectArity(tensors + 1, outputs))
    return std::nullopt;
  std::optional<AttentionDims> dims = checkAttentionTensors(c, gradient, true);
  if (!dims)
    return std::nullopt;
  AttentionDims n = *dims;
  const Tensor &index = c.in(tensors);
  if (!c.expectDType(index, DType::I64, "index") ||
      !c.expectShape(index, {1}, "index"))
    return std::nullopt;
  std::optional<double> scale = c.getFloat("scale");
  std::optional<int64_t> causal = c.getInt("causal"),
                         step = c.getInt("ring_step"),
                         size = c.getInt("ring_size"),
                         zigzag = c.getInt("zigzag");
  if (!scale || !causal || !step || !size || !zigzag)
    return std::nullopt;
  if (*size < 1 || *step < 0 || *step >= *size) {
    c.fail("expects 0 <= ring_step < ring_size, got ", *step, " and ", *size);
    return std::nullopt;
  }
  // In zigzag order each device holds whole chunks.
  if (*zigzag != 0 &&
      (*zigzag < 0 || *causal == 0 || n.queries != n.keys ||
       2 * *zigzag % *size != 0 || n.queries % (2 * *zigzag / *size) != 0)) {
    c.fail("expects zigzag order (", *zigzag,
           ") only causal, on as many queries as keys, in whole chunks of "
           "2 zigzag over the ring of ",
           *size, ", got ", n.queries, " queries and ", n.keys, " keys");
    return std::nullopt;
  }
  n.scale = static_cast<float>(*scale);
  n.causal = *causal != 0;
  if (!c.isCheckOnly()) {
    int64_t at = index.as<int64_t>()[0];
    if (at < 0 || at >= *size) {
      c.failOnData("index ", at, " lies outside the ring of ", *size);
      return std::nullopt;
    }
    int64_t from = (at - *step + *size) % *size;
    n.queryPlace = SequencePlace::get(at * n.queries, n.queries,
                                      *size * n.queries, *zigzag);
    n.keyPlace =
        SequencePlace::get(from * n.keys, n.keys, *size * n.keys, *zigzag);
  }
  return n;
}

static void runAttentionBlock(KernelCall &c) {
  std::optional<AttentionDims> dims = checkAttentionBlock(c, false);
  if (!dims || c.isCheckOnly())
    return;
  computeAttention(*dims, c.in(0).as<float>(), c.in(1).as<float>(),
                   c.in(2).as<float>(), c.out(0).as<float>(),
                   c.out(1).as<float>());
}

static void runAttentionBlockGrad(KernelCall &c) {
  std::optional<AttentionDims> dims = checkAttentionBlock(c, true);
  if (!dims || c.isCheckOnly())
    return;
  computeAttentionGrad(
      *dims, c.in(0).as<float>(), c.in(1).as<float>(), c.in(2).as<float>(),
      c.in(3).as<float>(), c.in(4).as<float>(), c.in(5).as<float>(),
      c.out(0).as<float>(), c.out(1).as<float>(), c.out(2).as<float>());
}

static void runCausalMask(KernelCall &c) {
  if (!c.expectArity(1, 1) || !c.expectF32(c.in(0), "input") ||
      !c.expectF32(c.out(0), "result") ||
      !c.expectShape(c.out(0), c.in(0).shape, "result"))
    return;
  const Tensor &input = c.in(0);
  if (input.getRank() < 2) {
    c.fail("expects scores of rank at least 2 ([..., query, key]), got rank ",
           input.getRank());
    return;
  }
  std::optional<double> fill = c.getFloat("fill");
  if (!fill || c.isCheckOnly() || input.getNumElements() == 0)
    return;
  int64_t queries = input.shape[input.getRank() - 2];
  int64_t keys = input.shape.back();
  const float *x = input.as<float>();
  float *y = c.out(0).as<float>();
  const float masked = static_cast<float>(*fill);
  // Row r holds query r % queries: its keys up to it are kept.
  forEachRow(input, keys, [&](int64_t row) {
    int64_t seen = std::min(keys, row % queries + 1);
    std::copy(x + row * keys, x + row * keys + seen, y + row * keys);
    std::fill(y + row * keys + seen, y + (row + 1) * keys, masked);
  });
}

//===----------------------------------------------------------------------===//
// Optimizer updates
//===----------------------------------------------------------------------===//

static void runSgd(KernelCall &c) {
  if (!c.expectArity(2, 1) || !c.expectF32(c.in(0), "param") ||
      !c.expectF32(c.in(1), "grad") || !c.expectF32(c.out(0), "result") ||
      !c.expectShape(c.in(1), c.in(0).shape, "grad") ||
      !c.expectShape(c.out(0), c.in(0).shape, "result"))
    return;
  std::optional<double> lr = c.getFloat("lr");
  std::optional<double> weightDecay = c.getFloat("weight_decay");
  if (!lr || !weightDecay)
    return;
  if (c.isCheckOnly())
    return;
  const float *param = c.in(0).as<float>(), *grad = c.in(1).as<float>();
  float *result = c.out(0).as<float>();
  for (int64_t i = 0, e = c.in(0).getNumElements(); i < e; ++i)
    result[i] = param[i] - *lr * (grad[i] + *weightDecay * param[i]);
}

namespace {
/// The constants of one nn.adamw step, in f32 as the update computes.
struct AdamWStep {
  float lr, beta1, beta2, epsilon, weightDecay;
  /// The reciprocals of the step's bias corrections, 1 / (1 - beta^step).
  float inverseCorrection1, inverseCorrection2;
  /// What unscaling and clipping multiply the gradient by (1: neither).
  float clipScale;
};
} // namespace

/// Elements per tile of nn.adamw: its seven arrays of them stay in L1.
constexpr int64_t kAdamWTile = 256;

/// nn.adamw on a tile of at most kAdamWTile elements, in f32 as PyTorch's
/// AdamW: a double division and square root per element made the update
/// bound by arithmetic, at twice the time of its memory traffic. The tile
/// is copied in and out, so that the outputs may be the inputs (the update
/// is written in place) and the loop still vectorises.
TESSERA_CLONES static void updateAdamW(const float *param, const float *grad,
                                       const float *m, const float *v,
                                       float *newParam, float *newM,
                                       float *newV, int64_t n,
                                       const AdamWStep &s) {
  float p[kAdamWTile], g[kAdamWTile], mt[kAdamWTile], vt[kAdamWTile];
  std::copy_n(param, n, p);
  std::copy_n(grad, n, g);
  std::copy_n(m, n, mt);
  std::copy_n(v, n, vt);
  for (int64_t i = 0; i < n; ++i) {
    float gi = g[i];
    float mi = s.beta1 * mt[i] + (1.0f - s.beta1) * gi;
    float vi = s.beta2 * vt[i] + (1.0f - s.beta2) * gi * gi;
    float update = mi * s.inverseCorrection1 /
                   (std::sqrt(vi * s.inverseCorrection2) + s.epsilon);
    float pi = p[i];
    mt[i] = mi;
    vt[i] = vi;
    p[i] = pi - s.lr * (update + s.weightDecay * pi);
  }
  std::copy_n(p, n, newParam);
  std::copy_n(mt, n, newM);
  std::copy_n(vt, n, newV);
}

/// nn.adamw's peak learning rate, with its schedule's attributes checked
/// (the rate of a step is getScheduledLr's).
static std::optional<double> getAdamWLearningRate(KernelCall &c) {
  std::optional<double> lr = c.getFloat("lr"), minLr = c.getFloat("min_lr");
  std::optional<int64_t> schedule = c.getInt("schedule"),
                         warmup = c.getInt("warmup_steps"),
                         decay = c.getInt("decay_steps");
  if (!lr || !minLr || !schedule || !warmup || !decay)
    return std::nullopt;
  if (*schedule < 0 || *schedule > static_cast<int64_t>(LrSchedule::Cosine)) {
    c.fail("unknown learning-rate schedule ", *schedule);
    return std::nullopt;
  }
  return lr;
}

static void runAdamW(KernelCall &c) {
  // A clipped update reads the step's global gradient norm too, and a
  // loss-scaled one the scale after it.
  size_t inputs = std::clamp<size_t>(c.getNumInputs(), 5, 7);
  bool clipped = inputs >= 6, scaled = inputs == 7;
  if (!c.expectArity(inputs, 3))
    return;
  const std::vector<int64_t> &shape = c.in(0).shape;
  const char *inputNames[] = {"param", "grad", "m", "v"};
  // A mixed-precision update reads a 16-bit gradient, widened.
  DType gradType = c.in(1).dtype;
  bool narrowGrad = gradType == DType::BF16 || gradType == DType::F16;
  for (size_t index = 0; index < 4; ++index)
    if ((!(index == 1 && narrowGrad) &&
         !c.expectF32(c.in(index), inputNames[index])) ||
        !c.expectShape(c.in(index), shape, inputNames[index]))
      return;
  const char *outputNames[] = {"new_param", "new_m", "new_v"};
  for (size_t index = 0; index < 3; ++index)
    if (!c.expectF32(c.out(index), outputNames[index]) ||
        !c.expectShape(c.out(index), shape, outputNames[index]))
      return;
  if (!c.expectIndex(c.in(4), "step") || !c.expectShape(c.in(4), {}, "step"))
    return;
  if (clipped && (!c.expectF32(c.in(5), "grad_norm") ||
                  !c.expectShape(c.in(5), {}, "grad_norm")))
    return;
  if (scaled && (!c.expectF32(c.in(6), "loss_scale") ||
                 !c.expectShape(c.in(6), {}, "loss_scale")))
    return;
  std::optional<double> lr = getAdamWLearningRate(c);
  std::optional<double> beta1 = c.getFloat("beta1");
  std::optional<double> beta2 = c.getFloat("beta2");
  std::optional<double> epsilon = c.getFloat("epsilon");
  std::optional<double> weightDecay = c.getFloat("weight_decay");
  std::optional<double> maxGradNorm = c.getFloat("max_grad_norm");
  if (!lr || !beta1 || !beta2 || !epsilon || !weightDecay || !maxGradNorm)
    return;
  if (c.isCheckOnly())
    return;
  int64_t step = readIndex(c.in(4), 0);
  if (step < 1) {
    // Step 0 would divide by a zero bias correction.
    c.failOnData("expects a step of at least 1 (steps count from 1), got ",
                 step);
    return;
  }
  const float *param = c.in(0).as<float>();
  const float *m = c.in(2).as<float>(), *v = c.in(3).as<float>();
  float *newParam = c.out(0).as<float>(), *newM = c.out(1).as<float>(),
        *newV = c.out(2).as<float>();
  int64_t e = c.in(0).getNumElements();
  // An overflow skips the step: the state stays as it is.
  float norm = clipped ? c.in(5).as<float>()[0] : 0.0f;
  if (!isFiniteNorm(norm)) {
    for (auto [from, to] : {std::pair{param, newParam}, {m, newM}, {v, newV}})
      if (from != to)
        std::copy_n(from, e, to);
    return;
  }
  AdamWStep s = {
      static_cast<float>(
          getScheduledLr(static_cast<LrSchedule>(*c.getInt("schedule")), *lr,
                         *c.getFloat("min_lr"), *c.getInt("warmup_steps"),
                         *c.getInt("decay_steps"), step)),
      static_cast<float>(*beta1),
      static_cast<float>(*beta2),
      static_cast<float>(*epsilon),
      static_cast<float>(*weightDecay),
      static_cast<float>(1 / (1 - std::pow(*beta1, static_cast<double>(step)))),
      static_cast<float>(1 / (1 - std::pow(*beta2, static_cast<double>(step)))),
      clipped ? getGradientFactor(norm, static_cast<float>(*maxGradNorm),
                                  scaled ? c.in(6).as<float>()[0] : 1.0f)
              : 1.0f};
  int64_t tiles = (e + kAdamWTile - 1) / kAdamWTile;
  cpu::parallelFor(tiles, kElementsPerThread / kAdamWTile,
                   [&](int64_t begin, int64_t end) {
                     float wide[kAdamWTile];
                     for (int64_t i = begin * kAdamWTile;
                          i < std::min(e, end * kAdamWTile); i += kAdamWTile) {
                       int64_t n = std::min(kAdamWTile, e - i);
                       const float *grad = c.in(1).as<float>() + i;
                       if (narrowGrad) {
                         const uint16_t *bits = c.in(1).as<uint16_t>() + i;
                         for (int64_t j = 0; j < n; ++j)
                           wide[j] = halfToFloat(gradType, bits[j]);
                         grad = wide;
                       }
                       // Unscaled and clipped, as PyTorch scales the
                       // gradient in place before the step.
                       if (s.clipScale != 1.0f) {
                         for (int64_t j = 0; j < n; ++j)
                           wide[j] = grad[j] * s.clipScale;
                         grad = wide;
                       }
                       updateAdamW(param + i, grad, m + i, v + i, newParam + i,
                                   newM + i, newV + i, n, s);
                     }
                   });
}

/// nn.sum_squares: in double, over fixed blocks summed in order, so that
/// the sum does not depend on the threads.
static void runSumSquares(KernelCall &c) {
  if (!c.expectArity(1, 1) || !c.expectF32(c.out(0), "result") ||
      !c.expectShape(c.out(0), {}, "result"))
    return;
  DType dtype = c.in(0).dtype;
  if (dtype != DType::F32 && !isHalf(dtype)) {
    c.fail("expects a float input, got ", getDTypeName(dtype));
    return;
  }
  if (c.isCheckOnly())
    return;
  constexpr int64_t kBlock = 4096;
  int64_t n = c.in(0).getNumElements();
  std::vector<double> blocks((n + kBlock - 1) / kBlock, 0.0);
  cpu::parallelFor(blocks.size(), kElementsPerThread / kBlock,
                   [&](int64_t begin, int64_t end) {
                     for (int64_t b = begin; b < end; ++b) {
                       double sum = 0;
                       for (int64_t i = b * kBlock, e = std::min(n, i + kBlock);
                            i < e; ++i) {
                         double x = dtype == DType::F32
                                        ? c.in(0).as<float>()[i]
                                        : halfToFloat(
                                              dtype, c.in(0).as<uint16_t>()[i]);
                         sum += x * x;
                       }
                       blocks[b] = sum;
                     }
                   });
  c.out(0).as<float>()[0] =
      static_cast<float>(std::accumulate(blocks.begin(), blocks.end(), 0.0));
}

//===----------------------------------------------------------------------===//
// Fusion
//===----------------------------------------------------------------------===//

/// nn.fused: its expression program (FusedKernel.h).
static void runFused(KernelCall &c) {
  if (!c.expectVariadicArity(0, c.getAttrs().fusedResults.size()))
    return;
  std::string error = cpu::runFusedProgram(c.getAttrs(), c.getInputs(),
                                           c.getOutputs(), c.isCheckOnly());
  if (!error.empty())
    c.fail(error);
}

//===----------------------------------------------------------------------===//
// Dispatch
//===----------------------------------------------------------------------===//

using KernelFn = CpuKernel::Fn;

/// The registry: built once, never changed, so that a found kernel lives as
/// long as the process.
static const std::unordered_map<std::string, CpuKernel> &getKernels() {
  static const std::unordered_map<std::string, CpuKernel> kernels = [] {
    std::unordered_map<std::string, CpuKernel> table;
    for (const auto &[op, fn] :
         std::initializer_list<std::pair<const char *, KernelFn>>{
             // Linear algebra.
             {"nn.dot", runDot},
             // Elementwise.
             {"nn.add", runArrayMath},
             {"nn.sub", runArrayMath},
             {"nn.mul", runArrayMath},
             {"nn.div", runArrayMath},
             {"nn.max", runArrayMath},
             {"nn.min", runArrayMath},
             {"nn.pow", runArrayMath},
             {"nn.clamp", runClamp},
             {"nn.random_uniform", runRandomUniform},
             {"nn.dropout", runDropout},
             {"nn.neg", runArrayMath},
             {"nn.exp", runArrayMath},
             {"nn.log", runArrayMath},
             {"nn.sqrt", runArrayMath},
             {"nn.rsqrt", runArrayMath},
             {"nn.tanh", runArrayMath},
             {"nn.sin", runArrayMath},
             {"nn.cos", runArrayMath},
             {"nn.sigmoid", runArrayMath},
             {"nn.abs", runArrayMath},
             {"nn.erf", runArrayMath},
             {"nn.relu", runArrayMath},
             {"nn.gelu", runArrayMath},
             {"nn.silu", runArrayMath},
             {"nn.select", runSelect},
             {"nn.compare", runCompare},
             {"nn.cast", runCast},
             {"nn.constant", runConstant},
             {"nn.iota", runIota},
             {"nn.broadcast", runBroadcast},
             // Reductions.
             {"nn.reduce_sum",
              [](KernelCall &c) { runReduce(c, ReduceKind::Sum); }},
             {"nn.reduce_max",
              [](KernelCall &c) { runReduce(c, ReduceKind::Max); }},
             {"nn.reduce_mean",
              [](KernelCall &c) { runReduce(c, ReduceKind::Mean); }},
             // Shape manipulation.
             {"nn.reshape", runReshape},
             {"nn.transpose", runTranspose},
             {"nn.slice", runSlice},
             {"nn.concat", runConcat},
             // Layers.
             {"nn.softmax",
              [](KernelCall &c) { runSoftmax(c, /*log=*/false); }},
             {"nn.log_softmax",
              [](KernelCall &c) { runSoftmax(c, /*log=*/true); }},
             {"nn.layer_norm", runLayerNorm},
             {"nn.rms_norm", runRmsNorm},
             {"nn.layer_norm_grad",
              [](KernelCall &c) { runNormGrad(c, /*rms=*/false); }},
             {"nn.rms_norm_grad",
              [](KernelCall &c) { runNormGrad(c, /*rms=*/true); }},
             {"nn.embedding", runEmbedding},
             {"nn.embedding_grad", runEmbeddingGrad},
             {"nn.gather", runGather},
             {"nn.scatter_add", runScatterAdd},
             {"nn.top_k", runTopK},
             {"nn.one_hot", runOneHot},
             {"nn.moe_dispatch", runMoeDispatch},
             {"nn.cross_entropy", runCrossEntropy},
             {"nn.causal_mask", runCausalMask},
             {"nn.attention", runAttention},
             {"nn.attention_block", runAttentionBlock},
             {"nn.attention_block_grad", runAttentionBlockGrad},
             {"nn.attention_grad", runAttentionGrad},
             // Optimizer updates.
             {"nn.sgd", runSgd},
             {"nn.adamw", runAdamW},
             {"nn.sum_squares", runSumSquares},
             // Fusion.
             {"nn.fused", runFused},
         })
      table.emplace(op, CpuKernel(op, fn));
    return table;
  }();
  return kernels;
}

/// A constant's elements are stored in its own dtype: a 16-bit float
/// constant computed in f32 has them widened too, in `wideAttrs`. Returns
/// the attributes to compute with.
static const KernelAttrs &
widenConstantValue(const std::string &op, const KernelAttrs &attrs,
                   const std::vector<Tensor *> &outputs,
                   KernelAttrs &wideAttrs) {
  if (op == "nn.constant" && !outputs.empty() && outputs[0] &&
      isHalf(outputs[0]->dtype)) {
    wideAttrs = attrs;
    if (const std::string *raw = attrs.getBytes("value")) {
      std::string wide(raw->size() / 2 * 4, '\0');
      for (size_t i = 0; i < raw->size() / 2; ++i) {
        uint16_t bits;
        std::memcpy(&bits, raw->data() + 2 * i, 2);
        float value = halfToFloat(outputs[0]->dtype, bits);
        std::memcpy(&wide[4 * i], &value, 4);
      }
      wideAttrs.bytes["value"] = wide;
    }
    return wideAttrs;
  }
  return attrs;
}

/// A kernel's message as a status: the data-dependent checks (a label
/// outside the vocabulary, a step below 1) are data errors, the others
/// arguments that do not fit.
static Status getStatus(const KernelCall &call, bool dataDependent) {
  if (call.getMessage().empty())
    return Status::success();
  return Status(dataDependent ? StatusCode::DataError
                              : StatusCode::InvalidArgument,
                call.getMessage());
}

/// Runs a kernel whose 16-bit float tensors have been widened to f32:
/// bf16 and f16 are storage formats here, and the math is f32 (as tensor
/// cores accumulate), rounded to nearest even when the results are narrowed.
static Status runWidened(KernelFn kernel, const std::string &op,
                         const KernelAttrs &attrs,
                         const std::vector<const Tensor *> &inputs,
                         const std::vector<Tensor *> &outputs) {
  std::vector<OwnedTensor> wideInputs, wideOutputs;
  std::vector<const Tensor *> ins;
  std::vector<Tensor *> outs;
  wideInputs.reserve(inputs.size());
  wideOutputs.reserve(outputs.size());
  for (const Tensor *input : inputs) {
    if (input && isHalf(input->dtype)) {
      wideInputs.push_back(widenToF32(*input));
      ins.push_back(&wideInputs.back().view);
    } else {
      ins.push_back(input);
    }
  }
  for (Tensor *output : outputs) {
    if (output && isHalf(output->dtype)) {
      wideOutputs.emplace_back(DType::F32, output->shape);
      outs.push_back(&wideOutputs.back().view);
    } else {
      outs.push_back(output);
    }
  }
  KernelAttrs wideAttrs;
  KernelCall call(op, widenConstantValue(op, attrs, outputs, wideAttrs), ins,
                  outs);
  kernel(call);
  if (!call.getMessage().empty())
    return getStatus(call, call.isDataError());
  size_t next = 0;
  for (Tensor *output : outputs)
    if (output && isHalf(output->dtype))
      narrowFromF32(wideOutputs[next++].view, *output);
  return Status::success();
}

Kernel::~Kernel() = default;

Expected<const CpuKernel *> runtime::findCpuKernel(const std::string &op) {
  const auto &kernels = getKernels();
  auto it = kernels.find(op);
  if (it == kernels.end())
    return invalidPlan(concat("unknown kernel '", op, "'"));
  return &it->second;
}

Status CpuKernel::run(const KernelAttrs &attrs,
                      const std::vector<const Tensor *> &inputs,
                      const std::vector<Tensor *> &outputs) const {
  auto isHalfTensor = [](const Tensor *t) { return t && isHalf(t->dtype); };
  if (std::any_of(inputs.begin(), inputs.end(), isHalfTensor) ||
      std::any_of(outputs.begin(), outputs.end(), isHalfTensor))
    return runWidened(fn, getOp(), attrs, inputs, outputs);
  KernelCall call(getOp(), attrs, inputs, outputs);
  fn(call);
  return getStatus(call, call.isDataError());
}

Status CpuKernel::check(const KernelAttrs &attrs,
                        const std::vector<const Tensor *> &inputs,
                        const std::vector<Tensor *> &outputs) const {
  // 16-bit floats are computed in f32: check views of them as f32 (the
  // element count is what matters; no element is read).
  std::vector<Tensor> views;
  views.reserve(inputs.size() + outputs.size());
  auto widen = [&](const Tensor *tensor) -> Tensor * {
    if (!tensor)
      return nullptr;
    views.push_back(*tensor);
    if (isHalf(tensor->dtype))
      views.back().dtype = DType::F32;
    return &views.back();
  };
  std::vector<const Tensor *> ins;
  std::vector<Tensor *> outs;
  for (const Tensor *input : inputs)
    ins.push_back(widen(input));
  for (Tensor *output : outputs)
    outs.push_back(widen(output));
  KernelAttrs wideAttrs;
  KernelCall call(getOp(),
                  widenConstantValue(getOp(), attrs, outputs, wideAttrs), ins,
                  outs, /*checkOnly=*/true);
  fn(call);
  return getStatus(call, /*dataDependent=*/false);
}

Status runtime::runCpuKernel(const std::string &op, const KernelAttrs &attrs,
                             const std::vector<const Tensor *> &inputs,
                             const std::vector<Tensor *> &outputs) {
  Expected<const CpuKernel *> kernel = findCpuKernel(op);
  if (!kernel.ok())
    return kernel.getStatus();
  return (*kernel)->run(attrs, inputs, outputs);
}

Status runtime::checkKernel(const std::string &op, const KernelAttrs &attrs,
                            const std::vector<const Tensor *> &inputs,
                            const std::vector<Tensor *> &outputs) {
  Expected<const CpuKernel *> kernel = findCpuKernel(op);
  if (!kernel.ok())
    return kernel.getStatus();
  return (*kernel)->check(attrs, inputs, outputs);
}
