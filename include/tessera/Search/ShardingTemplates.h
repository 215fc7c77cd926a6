//===- ShardingTemplates.h - Megatron-LM, SP, CP and EP annotations -*- C++ -*-===//
//
// The hand-written layouts of transformer parallelism, which the model
// generators and the plan search both apply.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_SEARCH_SHARDINGTEMPLATES_H
#define TESSERA_SEARCH_SHARDINGTEMPLATES_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringRef.h"

namespace tessera {

/// Annotates a model for Megatron-LM on a mesh @mesh ["dp"=dp, "tp"=tp]
/// (replacing any mesh and argument shardings), read from its dataflow, not
/// its names: data split on its first (batch) dim over "dp"; a weight matrix
/// that a dot reads with a whole activation split by columns over "tp" (q,
/// k, v, each part of a fused q/k/v weight, the MLP's first projections),
/// and its bias with it; one that a dot reads with an activation computed
/// from such a product split by rows (the attention output, the MLP's last
/// projection); MLP layers then alternate. Embedding tables are split on
/// the vocabulary over "tp" with `vocabParallel` (and a tied LM head with
/// them), as Megatron-LM does, else whole; other parameters are left for
/// propagation.
void annotateMegatron(mlir::ModuleOp module, int64_t dp, int64_t tp,
                      bool vocabParallel = true);

/// Megatron-LM's sequence parallelism (Korthikanti et al. 2022) on a model
/// annotated by annotateMegatron, read from its structure: the input of
/// every layer norm or RMSNorm over [batch, sequence, hidden] (the residual
/// stream) is constrained to the sequence split over "tp"; a norm's output that
/// a column-parallel projection reads is constrained split, then whole on
/// the sequence; a row-parallel projection's result is constrained to
/// partial sums over "tp". The partitioner then all-gathers before each
/// tensor-parallel region and reduce-scatters after it, where Megatron
/// all-reduces, and the gradients do the reverse; layer norms, residual
/// adds and the LM head run on a slice of the sequence.
void annotateSequenceParallel(mlir::ModuleOp module);

/// Context parallelism on a model annotated by annotateMegatron: the mesh
/// gets a "cp" axis between "dp" and "tp" (of `cp` devices; --mesh resizes
/// it), the
/// data's sequence dim is split over it, and so is every activation
/// computed from it, per token. `kind` says how attention, which reads the
/// whole sequence, is computed:
/// - "ring" (ring attention, Liu et al. 2023): each nn.attention gets
///   `ring`; each device keeps its piece of the queries and the keys and
///   values pass around the "cp" ring, one block per step, combined by
///   their log-sum-exps; the backward passes their gradients around with
///   them.
/// - "ulysses" (DeepSpeed-Ulysses, Jacobs et al. 2023): each
///   nn.attention's queries are constrained to their heads split over "tp"
///   and then "cp" and the whole sequence. The partitioner exchanges heads
///   for sequence by an all_to_all over "cp" before the attention (for the
///   queries, keys and values) and back after it, and the backward does
///   the reverse. The heads should divide by tp x cp (else they are
///   padded).
/// - "all-gather" (as Llama 3 trains): each attention computes its
///   piece of the queries, causal by its piece's position, against the keys
///   and values gathered whole over "cp"; the backward reduce-scatters
///   their gradients.
void annotateContextParallel(mlir::ModuleOp module, llvm::StringRef kind,
                             int64_t cp = 1);

/// Expert parallelism (GShard; DeepSpeed-MoE) on a model annotated by
/// annotateMegatron, read from its structure: the mesh gets an "ep" axis of
/// `ep` devices after "dp" (--mesh resizes it) that splits the data's batch
/// with "dp", and the experts' weights (the parameters a dot batches over
/// their first dim, and vectors added to their products) on their experts
/// dim. Each expert dot's input is constrained to the experts split over
/// "ep" and the combine's to the experts whole: the partitioner exchanges
/// tokens for experts by an all_to_all over "ep" before the experts and
/// back after them. The router stays whole (annotateMegatron does not
/// split it).
void annotateExpertParallel(mlir::ModuleOp module, int64_t ep);

/// The experts' parameters of a mixture of experts in `function` (those
/// annotateExpertParallel splits), by argument number, with their experts
/// dim; empty in a model without experts.
llvm::DenseMap<unsigned, int64_t>
getExpertParameters(mlir::func::FuncOp function);

} // namespace tessera

#endif // TESSERA_SEARCH_SHARDINGTEMPLATES_H
