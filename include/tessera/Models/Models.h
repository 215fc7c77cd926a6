//===- Models.h - Generators of nn IR for standard models -------*- C++ -*-===//
//
// `tessera model gpt|mlp` builds its models here; tests and benchmarks use
// the same builders.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_MODELS_MODELS_H
#define TESSERA_MODELS_MODELS_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/Error.h"

#include <string>

namespace tessera {

/// Mixture-of-experts layers in place of a decoder's MLP, as GShard
/// (Lepikhin et al. 2020) and Mixtral (Jiang et al. 2024) build them: a
/// router (a [hidden, experts] weight) scores each token's experts by a
/// softmax, nn.top_k picks `topK` of them, and their probabilities,
/// renormalized over the picks, weight the experts' outputs. Each group of
/// `groupSize` tokens of a sequence (GShard's groups; the whole sequence by
/// default) fills its experts' `getExpertCapacity` slots in GShard's order
/// (nn.moe_dispatch); tokens past an expert's capacity skip it. The
/// experts are the model's MLP with a leading experts dim on every weight,
/// computed as batched dots over it. Each layer adds Switch/Mixtral's
/// load-balancing loss, `auxLossCoef · experts · Σ_e f_e · P_e` with f_e the
/// share of routed choices and P_e the mean probability of expert e in a
/// group, averaged over the groups, to the cross-entropy.
struct MoeConfig {
  /// Experts per layer; 0 for the dense MLP.
  int64_t experts = 0;
  int64_t topK = 2;
  double capacityFactor = 1.25;
  double auxLossCoef = 0.01;
  /// Tokens routed together, dividing the sequence; 0 for the sequence. The
  /// dispatch mask of a group holds groupSize x experts x capacity
  /// elements: smaller groups bound it (GShard's), at the cost of capacity
  /// balanced over fewer tokens.
  int64_t groupSize = 0;

  /// The tokens of a group in a sequence of `seq`.
  int64_t getGroupSize(int64_t seq) const {
    return groupSize ? groupSize : seq;
  }
};

/// Slots per expert and group of `tokens`: ⌈capacityFactor · topK ·
/// tokens / experts⌉, at most `tokens` (a token takes an expert once).
int64_t getExpertCapacity(const MoeConfig &config, int64_t tokens);

/// A GPT-style decoder: token plus learned position embedding, `layers`
/// pre-LN blocks (multi-head causal attention and a 4x GELU MLP, biases on
/// every linear layer), a final layer norm, an LM head tied to the token
/// embedding, and the mean cross-entropy loss.
struct GptConfig {
  int64_t layers = 2;
  int64_t hidden = 64;
  int64_t heads = 4;
  int64_t seq = 16;
  int64_t vocab = 256;
  int64_t batch = 2;
  /// Element type of parameters and activations: f32, bf16, f16 or f64.
  std::string dtype = "f32";
  /// "fused" (one nn.attention per block, no s x s scores kept) or
  /// "unfused" (the scores, mask, softmax and weighted sum as ops).
  std::string attention = "fused";
  /// Dropout, as nanoGPT's one rate (GPT-2's embd_pdrop, attn_pdrop and
  /// resid_pdrop): after the embeddings, of the attention probabilities, and
  /// of each block's attention and MLP outputs before they join the
  /// residual; 0 for none. The model then takes the step counter
  /// (nn.state "step") its masks are drawn for.
  double dropout = 0;
  /// "none", or "megatron": a mesh @mesh ["dp"=1, "tp"=1] (resize it with
  /// --mesh), the batch split over "dp", and Megatron-LM tensor parallelism
  /// over "tp": q/k/v and the first MLP weight split by columns, the output
  /// projections by rows. "megatron-sp" adds sequence parallelism
  /// (annotateSequenceParallel).
  std::string sharding = "none";
  /// With a megatron sharding: the token embedding, and so the tied LM
  /// head, split on the vocabulary over "tp" (Megatron-LM's vocab-parallel
  /// embedding and cross-entropy, its default); false keeps them whole.
  bool vocabParallel = true;
  /// With a megatron sharding: "none", or context parallelism over a "cp"
  /// axis (annotateContextParallel): "ring" by ring attention, "ulysses" by
  /// DeepSpeed-Ulysses' all-to-all of heads for sequence, "all-gather" by
  /// gathering the keys and values.
  std::string contextParallel = "none";
  /// Experts in place of the MLP (w1, b1, w2 and b2 of each expert stacked
  /// as blocks.<i>.moe.{w1,b1,w2,b2}, the router blocks.<i>.moe.router).
  /// With a megatron sharding the experts are split over an "ep" axis
  /// (annotateExpertParallel).
  MoeConfig moe;
};

/// A Llama-style decoder (Touvron et al. 2023): a token embedding,
/// `layers` pre-norm blocks, a final RMSNorm, an untied LM head and the
/// mean cross-entropy loss; no biases. A block is RMSNorm, grouped-query
/// causal attention (`kvHeads` key/value heads, each read by heads /
/// kvHeads query heads: nn.attention takes them so, the unfused ops repeat
/// them as Hugging Face's repeat_kv does) with
/// rotary position embeddings computed in the graph (nn.iota, nn.sin,
/// nn.cos, in f32, halves rotated as Hugging Face's rotate_half does), then
/// RMSNorm and a SwiGLU MLP: w2(silu(w1 x) * w3 x).
///
/// Parameters are named as Meta's checkpoints name them, without the
/// `.weight` suffix: `tok_embeddings`, `layers.<i>.attention_norm`,
/// `layers.<i>.attention.{wq,wk,wv,wo}`, `layers.<i>.ffn_norm`,
/// `layers.<i>.feed_forward.{w1,w2,w3}`, `norm`, `output`. Weights are
/// [in, out].
struct LlamaConfig {
  int64_t layers = 2;
  int64_t hidden = 64;
  int64_t heads = 4;
  int64_t kvHeads = 2;
  /// The SwiGLU width; 0 takes Llama's rule (getLlamaFfnHidden).
  int64_t ffnHidden = 0;
  int64_t seq = 16;
  int64_t vocab = 256;
  int64_t batch = 2;
  double ropeTheta = 10000;
  double normEps = 1e-5;
  std::string dtype = "f32";
  /// See GptConfig::attention and GptConfig::dropout.
  std::string attention = "fused";
  double dropout = 0;
  /// "none", "megatron" or "megatron-sp" (see GptConfig::sharding): q, k,
  /// v, w1 and w3 split by columns, wo and w2 by rows, the LM head by
  /// vocabulary.
  std::string sharding = "none";
  /// See GptConfig::vocabParallel: the token embedding split on the
  /// vocabulary.
  bool vocabParallel = true;
  /// See GptConfig::contextParallel.
  std::string contextParallel = "none";
  /// Experts in place of the SwiGLU MLP, as Mixtral: the router
  /// layers.<i>.feed_forward.gate and the experts' stacked weights
  /// layers.<i>.feed_forward.experts.{w1,w2,w3}. See GptConfig::moe.
  MoeConfig moe;
};

/// Llama's SwiGLU width when none is given: 2/3 of 4·hidden, rounded up to
/// a multiple of 256 (11008 for hidden 4096).
int64_t getLlamaFfnHidden(int64_t hidden);

/// A stack of `layers` linear layers with ReLU between them, trained on the
/// mean squared error against a target.
struct MlpConfig {
  int64_t layers = 2;
  int64_t input = 16;
  int64_t hidden = 64;
  int64_t output = 16;
  int64_t batch = 8;
  std::string dtype = "f32";
  /// "none", or "megatron": the batch over "dp" and the layers alternating
  /// column- and row-parallel over "tp" (see GptConfig::sharding).
  std::string sharding = "none";
};

/// A click-through-rate model (the seeds' Hogwild example): each example's
/// `features` hashed feature ids look up rows of a `[buckets, hidden]`
/// embedding table, summed (an embedding bag), and a logistic regression
/// (`weights` [hidden], `bias`) gives the click's logit. The function draws
/// its own batch each step (nn.random_uniform keyed by the step counter):
/// uniform ids, and clicks drawn from a generating model of the same form
/// whose table and weights are data arguments (`true_table`,
/// `true_weights`, generated by the run's seed). The loss is the mean
/// log-loss less the generating model's on the same batch: its optimum is
/// 0, which training approaches from above (a finite batch may go below).
struct CtrConfig {
  int64_t features = 8;
  int64_t buckets = 4096;
  int64_t hidden = 4;
  int64_t batch = 64;
  /// The generating model's logits are its bag's dot product times this,
  /// so that clicks depend on the features clearly.
  double sharpness = 4.0;
};

/// Checks a configuration: sizes positive, heads dividing hidden (and kv
/// heads dividing heads), a model small enough to build (at most 100000
/// layers, 2^50 parameters and 2^50 elements in one activation), known
/// sharding, attention and dtype. The error names the offending field.
llvm::Error validate(const GptConfig &config);
llvm::Error validate(const MlpConfig &config);
llvm::Error validate(const LlamaConfig &config);
llvm::Error validate(const CtrConfig &config);

/// The parameter count in closed form: 12·L·h² + 13·L·h + (V+s)·h for the
/// blocks and embeddings, plus 2·h for the final layer norm; with E experts
/// the MLP's 8·h² + 5·h per layer is E·(8·h² + 5·h) + h·E (the router).
int64_t getParameterCount(const GptConfig &config);
int64_t getParameterCount(const MlpConfig &config);
/// L·(2·h + 2·h² + 2·h·kv·d + 3·h·f) + 2·V·h + h, d = h / heads: with
/// Llama-2 7B's shape 6,738,415,616, with Llama-3 8B's 8,030,261,248. With
/// E experts 3·h·f becomes E·3·h·f + h·E (Mixtral 8x7B: 46,702,792,704).
int64_t getParameterCount(const LlamaConfig &config);
/// buckets·h + h + 1.
int64_t getParameterCount(const CtrConfig &config);

/// Builds a module with one function, `@gpt` or `@mlp`, whose trainable
/// arguments carry `nn.param` names. The configuration must validate.
mlir::OwningOpRef<mlir::ModuleOp> buildGpt(mlir::MLIRContext *context,
                                           const GptConfig &config);
mlir::OwningOpRef<mlir::ModuleOp> buildMlp(mlir::MLIRContext *context,
                                           const MlpConfig &config);
/// Builds `@llama`.
mlir::OwningOpRef<mlir::ModuleOp> buildLlama(mlir::MLIRContext *context,
                                             const LlamaConfig &config);
/// Builds `@ctr`, its batch over "dp" of a ["dp"=1] mesh.
mlir::OwningOpRef<mlir::ModuleOp> buildCtr(mlir::MLIRContext *context,
                                           const CtrConfig &config);

/// Sums the elements of the `nn.param` arguments of every function.
int64_t countParameters(mlir::ModuleOp module);

} // namespace tessera

#endif // TESSERA_MODELS_MODELS_H
