//===- Checks.h - The backend-neutral checks of the ops ---------*- C++ -*-===//
//
// What every backend checks of a launch before it touches an element: the
// numbers of tensors, their element types and shapes, and the attributes,
// against the op's rules (the nn verifiers' rules, on local tensors). One
// check per op of the table (Ops.def), in the file of its family
// (ElementwiseChecks.cpp, ...); the plan loader runs them on every kernel
// instruction, and each backend on every launch. A check reads no element:
// the tensors may live on a GPU. What only the data shows (a label outside
// the vocabulary, a piece index outside its dim) is the running kernel's to
// report.
//
// Where a kernel needs what its check worked out (nn.dot's dims, an
// attention's sizes), the check answers it, as PyTorch's meta functions do.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_OPS_CHECKS_H
#define TESSERA_RUNTIME_OPS_CHECKS_H

#include "FusedProgram.h"
#include "KernelCall.h"

#include "tessera/runtime/OpIds.h"

#include <optional>
#include <vector>

namespace tessera::runtime {

using detail::KernelCall;

/// The check of each op of the table: check<Id>, true when the call fits
/// (else the failure is recorded in `c`). The map ops share checkMap.
using CheckFn = bool (*)(KernelCall &c);
CheckFn getCheck(OpId op);
bool checkMap(KernelCall &c);
#define TESSERA_OP(Id, Name) bool check##Id(KernelCall &c);
#define TESSERA_MAP_OP(Id, Name, Arity)
#include "tessera/runtime/Ops.def"

/// The attributes to compute `op` with: a 16-bit float nn.constant's
/// elements are stored in its own dtype and computed in f32, so they are
/// widened too, into `wideAttrs`; any other op's are `attrs`.
const KernelAttrs &widenConstantValue(OpId op, const KernelAttrs &attrs,
                                      const std::vector<Tensor *> &outputs,
                                      KernelAttrs &wideAttrs);

/// nn.dot's dims: batching, contracting and free (neither), per operand.
struct DotDims {
  std::vector<int64_t> lhsBatch, rhsBatch, lhsContract, rhsContract, lhsFree,
      rhsFree;
};
/// checkDot, answering the dims.
std::optional<DotDims> checkDotDims(KernelCall &c);

/// A reduction over `dims` (the three reductions' check).
bool checkReduce(KernelCall &c);

/// Input `input`, where the kernel has it, is a piece index (an i64 [1])
/// placing a piece along a split dim (nn.OffsetOpInterface's).
bool checkPieceIndex(KernelCall &c, int64_t input);

/// A random op's draw of `shape` (nn.random_uniform, nn.dropout,
/// nn.attention's dropout): the seed, the step at input `stepInput`, then
/// the piece index if the op is on a piece, whose `global_shape` places
/// it, and `numOutputs` outputs.
bool checkRandomDraw(KernelCall &c, size_t stepInput, size_t numOutputs,
                     const std::vector<int64_t> &shape);

/// gather's and scatter_add's layout around `axis`: `outer` rows before it,
/// `inner` elements after it, `whole` the full tensor's size along it
/// (gathered from, scattered into) and `picked` the indices' size.
struct AxisLayout {
  int64_t outer = 1, inner = 1, whole = 0, picked = 0;
};
/// Checks a gather or scatter_add: the whole tensor (the input, the
/// result), the indices and the picked tensor (the result, the source), the
/// indices with the whole tensor's dims but at `axis`, the picked tensor
/// with the indices' shape; answers the layout.
std::optional<AxisLayout> checkIndexedAxis(KernelCall &c, const Tensor &whole,
                                           const Tensor &indices,
                                           const Tensor &picked);

/// An attention kernel's sizes (q [b, heads, s, d], k [b, kv, t, d],
/// v [b, kv, t, dv]), attributes and where its extra inputs are.
struct AttentionInputs {
  int64_t batch = 0, heads = 0, kvHeads = 0, queries = 0, keys = 0, d = 0,
          dv = 0;
  float scale = 0;
  bool causal = false;
  float dropoutRate = 0;
  int64_t zigzag = 0;
  /// nn.attention(_grad): the step of the dropout's draw and the piece
  /// index of the draw [b, heads, s, t], or -1.
  int64_t stepInput = -1, pieceInput = -1;
  /// nn.attention_block(_grad): the ring and the block's index in it.
  int64_t ringStep = 0, ringSize = 0, indexInput = -1;
};
/// nn.attention's or nn.attention_grad's check, answering its inputs.
std::optional<AttentionInputs> checkAttentionInputs(KernelCall &c,
                                                    bool gradient);
/// nn.attention_block's or nn.attention_block_grad's check, answering its
/// inputs.
std::optional<AttentionInputs> checkAttentionBlockInputs(KernelCall &c,
                                                         bool gradient);

} // namespace tessera::runtime

#endif // TESSERA_RUNTIME_OPS_CHECKS_H
