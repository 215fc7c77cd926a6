//===- PassOptions.h - Typed choices of Tessera's pass options --*- C++ -*-===//
//
// The enum options of the passes and of the compile pipeline, each named in
// one table (EnumNames.h) that pass options, the CLI, printed pipelines and
// --help share.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_TRANSFORMS_PASSOPTIONS_H
#define TESSERA_TRANSFORMS_PASSOPTIONS_H

#include "tessera/Analysis/CostModel.h"
#include "tessera/Support/EnumNames.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/raw_ostream.h"

namespace tessera {

/// The optimizer of a train step (--tessera-train-step); None: no train step
/// (the compile pipeline compiles the model's function as it is).
enum class Optimizer { None, AdamW, Sgd };
/// The optimizers --tessera-train-step builds.
inline constexpr EnumName<Optimizer> kOptimizerNames[] = {
    {"adamw", Optimizer::AdamW, "AdamW with decoupled weight decay"},
    {"sgd", Optimizer::Sgd, "SGD with L2 weight decay"}};
/// The compile pipeline's choices: a train step with one of them, or none.
inline constexpr EnumName<Optimizer> kTrainNames[] = {
    {"none", Optimizer::None, "compile the model's function as it is"},
    {"adamw", Optimizer::AdamW, "an AdamW train step"},
    {"sgd", Optimizer::Sgd, "an SGD train step"}};

/// The types a train step computes in.
enum class TrainPrecision { Model, Mixed };
inline constexpr EnumName<TrainPrecision> kTrainPrecisionNames[] = {
    {"model", TrainPrecision::Model, "the model's types"},
    {"mixed", TrainPrecision::Mixed,
     "f32 master weights and optimizer state for a bf16/f16 model"}};

/// How a train step's learning rate follows the step counter (nn.adamw's
/// `schedule`).
enum class LrScheduleKind { Constant, Linear, Cosine };
inline constexpr EnumName<LrScheduleKind> kLrScheduleNames[] = {
    {"constant", LrScheduleKind::Constant, "lr after the warmup"},
    {"linear", LrScheduleKind::Linear,
     "lr down to min-lr in a straight line by decay-steps"},
    {"cosine", LrScheduleKind::Cosine,
     "lr down to min-lr along half a cosine by decay-steps"}};

/// A ZeRO stage: how much of the model state it splits over the
/// data-parallel axes.
enum class ZeroStage {
  None = 0,
  OptimizerState = 1,
  Gradients = 2,
  Parameters = 3
};
inline constexpr EnumName<ZeroStage> kZeroStageNames[] = {
    {"0", ZeroStage::None, "no ZeRO"},
    {"1", ZeroStage::OptimizerState, "optimizer state sharded"},
    {"2", ZeroStage::Gradients, "and gradients"},
    {"3", ZeroStage::Parameters, "and parameters (FSDP)"}};

/// Which program of parameter-server training --tessera-parameter-server
/// makes of a train step.
enum class ServerPart { Worker, Server };
inline constexpr EnumName<ServerPart> kServerPartNames[] = {
    {"worker", ServerPart::Worker,
     "the workers' forward and backward: the loss and the gradients"},
    {"server", ServerPart::Server,
     "the servers' updates of the parameters and optimizer state"}};

/// How propagation resolves factors whose tensors disagree.
enum class PropagationMode { Aggressive, Conservative };
inline constexpr EnumName<PropagationMode> kPropagationModeNames[] = {
    {"aggressive", PropagationMode::Aggressive,
     "keep the candidate cheapest to reshard to"},
    {"conservative", PropagationMode::Conservative,
     "keep only the candidates' common prefix"}};

/// ZeRO-3's gathers for the backward pass, as FSDP's reshard_after_forward:
/// `true` gathers the parameter from its shard again (FULL_SHARD), `false`
/// keeps the forward's gather (SHARD_GRAD_OP), and a group size N keeps a
/// piece per group of N devices after the forward and gathers within it
/// (FSDP2's reshard_after_forward=N).
struct ReshardAfterForward {
  enum class Kind { Shard, Keep, Group };
  Kind kind = Kind::Shard;
  /// With Kind::Group: the devices of a group.
  int64_t groupSize = 0;

  static ReshardAfterForward shard() { return {}; }
  static ReshardAfterForward keep() { return {Kind::Keep, 0}; }
  static ReshardAfterForward group(int64_t size) { return {Kind::Group, size}; }
  bool operator==(const ReshardAfterForward &other) const {
    return kind == other.kind && groupSize == other.groupSize;
  }
};

/// "true", "false" or the group size, as the option reads.
inline llvm::raw_ostream &operator<<(llvm::raw_ostream &os,
                                     const ReshardAfterForward &value) {
  switch (value.kind) {
  case ReshardAfterForward::Kind::Shard:
    return os << "true";
  case ReshardAfterForward::Kind::Keep:
    return os << "false";
  case ReshardAfterForward::Kind::Group:
    return os << value.groupSize;
  }
  llvm_unreachable("unknown reshard-after-forward kind");
}

} // namespace tessera

// Their options read the names of the tables above.
TESSERA_ENUM_OPTION_PARSER(tessera::Optimizer);
TESSERA_ENUM_OPTION_PARSER(tessera::TrainPrecision);
TESSERA_ENUM_OPTION_PARSER(tessera::ZeroStage);
TESSERA_ENUM_OPTION_PARSER(tessera::PropagationMode);

namespace llvm::cl {
/// Reads reshard-after-forward: true, false or a group size of at least 1.
template <>
class parser<tessera::ReshardAfterForward>
    : public basic_parser<tessera::ReshardAfterForward> {
public:
  parser(Option &option) : basic_parser(option) {}
  bool parse(Option &option, StringRef argName, StringRef arg,
             tessera::ReshardAfterForward &value) {
    int64_t size;
    if (arg == "true")
      value = tessera::ReshardAfterForward::shard();
    else if (arg == "false")
      value = tessera::ReshardAfterForward::keep();
    else if (!arg.getAsInteger(10, size) && size >= 1)
      value = tessera::ReshardAfterForward::group(size);
    else
      return option.error("'" + arg +
                          "' is not supported: it takes true (gather the "
                          "parameter again for the backward), false (keep "
                          "the forward's gather) or the size of the group to "
                          "reshard to after the forward");
    return false;
  }
  StringRef getValueName() const override { return "true|false|N"; }
  void printOptionDiff(const Option &option,
                       const tessera::ReshardAfterForward &value,
                       const OptionValue<tessera::ReshardAfterForward> &,
                       size_t globalWidth) const {
    printOptionName(option, globalWidth);
    outs() << "= " << value << "\n";
  }
};
} // namespace llvm::cl

#endif // TESSERA_TRANSFORMS_PASSOPTIONS_H
