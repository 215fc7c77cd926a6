//===- CompileOptions.h - The options of one tessera compile ----*- C++ -*-===//
//
// Everything `tessera compile` and `tessera verify` decide, as the options
// of the registered pipeline --tessera-compile-pipeline: what the CLI parses,
// what --auto's plan sets, and what tessera-opt replays.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_PIPELINES_COMPILEOPTIONS_H
#define TESSERA_PIPELINES_COMPILEOPTIONS_H

#include "tessera/Transforms/PassOptions.h"

#include "mlir/Pass/PassOptions.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Format.h"

#include <cmath>

namespace tessera {

/// A double that printed pipelines carry exactly: raw_ostream prints doubles
/// with six decimals, which would change a replayed learning rate.
struct ExactDouble {
  double value = 0;
  ExactDouble() = default;
  ExactDouble(double value) : value(value) {}
  operator double() const { return value; }
};

/// The shortest decimal that reads back as the same double.
inline llvm::raw_ostream &operator<<(llvm::raw_ostream &os, ExactDouble x) {
  for (int digits = 1; digits < 17; ++digits) {
    std::string text;
    llvm::raw_string_ostream(text) << llvm::format("%.*g", digits, x.value);
    double back;
    if (!llvm::StringRef(text).getAsDouble(back) && back == x.value)
      return os << text;
  }
  return os << llvm::format("%.17g", x.value);
}

/// Reads `arg` as the value of the floating option `option`; on an error
/// reports it, naming the option and the value, and returns true (as
/// llvm::cl parsers do). NaN and the infinities are refused: APFloat reads
/// "nan" and "inf", and a number too large for a double becomes an infinity,
/// and no option of Tessera means anything by them (a NaN loss scale would
/// fall back to the default, an infinite one skip every step). Every
/// floating option of the CLI and of the compile pipeline reads its value
/// here.
inline bool parseFiniteDouble(llvm::cl::Option &option, llvm::StringRef arg,
                              double &value) {
  double parsed = 0;
  if (arg.getAsDouble(parsed))
    return option.error("expects a number, got '" + arg + "'");
  if (!std::isfinite(parsed))
    return option.error("expects a finite number, got '" + arg + "'");
  value = parsed;
  return false;
}

/// llvm::cl's parser of doubles, refusing NaN and the infinities
/// (parseFiniteDouble): `cl::opt<double, false, FiniteDoubleParser>`.
class FiniteDoubleParser : public llvm::cl::parser<double> {
public:
  FiniteDoubleParser(llvm::cl::Option &option) : parser(option) {}
  bool parse(llvm::cl::Option &option, llvm::StringRef argName,
             llvm::StringRef arg, double &value) {
    return parseFiniteDouble(option, arg, value);
  }
};

} // namespace tessera

namespace llvm::cl {
/// Reads an ExactDouble as a finite double (tessera::parseFiniteDouble).
template <>
class parser<tessera::ExactDouble> : public basic_parser<tessera::ExactDouble> {
public:
  parser(Option &option) : basic_parser(option) {}
  bool parse(Option &option, StringRef argName, StringRef arg,
             tessera::ExactDouble &value) {
    return tessera::parseFiniteDouble(option, arg, value.value);
  }
  StringRef getValueName() const override { return "number"; }
  void printOptionDiff(const Option &option, const tessera::ExactDouble &value,
                       const OptionValue<tessera::ExactDouble> &,
                       size_t globalWidth) const {
    printOptionName(option, globalWidth);
    outs() << "= " << value << "\n";
  }
};
} // namespace llvm::cl

namespace tessera {

struct CompileOptions : mlir::PassPipelineOptions<CompileOptions> {
  // The mesh (--tessera-set-mesh).
  Option<std::string> mesh{*this, "mesh",
                           llvm::cl::desc("Axis sizes of the model's mesh: "
                                          "dp=2,tp=4 (empty: as annotated)")};

  // The train step (--tessera-train-step).
  Option<Optimizer> train{
      *this, "train",
      llvm::cl::desc("Compile the training step with this optimizer"),
      llvm::cl::init(Optimizer::None), enumValues(kTrainNames)};
  Option<ExactDouble> lr{*this, "lr", llvm::cl::desc("Learning rate"),
                         llvm::cl::init(ExactDouble(1e-3))};
  Option<ExactDouble> weightDecay{
      *this, "weight-decay", llvm::cl::desc("Weight decay of the optimizer"),
      llvm::cl::init(ExactDouble(0.0))};
  Option<LrScheduleKind> lrSchedule{
      *this, "lr-schedule",
      llvm::cl::desc("How the learning rate follows the step counter"),
      llvm::cl::init(LrScheduleKind::Constant), enumValues(kLrScheduleNames)};
  Option<int64_t> warmupSteps{*this, "warmup-steps",
                              llvm::cl::desc("Steps of linear warmup"),
                              llvm::cl::init(0)};
  Option<int64_t> decaySteps{
      *this, "decay-steps",
      llvm::cl::desc("The step by which a schedule reaches min-lr"),
      llvm::cl::init(0)};
  Option<ExactDouble> minLr{*this, "min-lr",
                            llvm::cl::desc("The learning rate a schedule "
                                           "decays to"),
                            llvm::cl::init(ExactDouble(0.0))};
  Option<ExactDouble> clipGrad{
      *this, "clip-grad",
      llvm::cl::desc("Clip the gradients to this global norm (0: none)"),
      llvm::cl::init(ExactDouble(0.0))};
  Option<bool> lossScale{
      *this, "loss-scale",
      llvm::cl::desc("Dynamic loss scaling (f16 mixed precision)"),
      llvm::cl::init(false)};
  Option<ExactDouble> initialLossScale{
      *this, "initial-loss-scale",
      llvm::cl::desc("The first loss scale (0: 2^16, 2^15 for an f16 loss)"),
      llvm::cl::init(ExactDouble(0.0))};
  Option<int64_t> lossScaleWindow{
      *this, "loss-scale-window",
      llvm::cl::desc("Steps without an overflow before the scale doubles"),
      llvm::cl::init(2000)};
  Option<TrainPrecision> precision{
      *this, "precision", llvm::cl::desc("The types the train step uses"),
      llvm::cl::init(TrainPrecision::Model), enumValues(kTrainPrecisionNames)};

  // Recomputation (--tessera-recompute).
  Option<Recompute> recompute{
      *this, "recompute",
      llvm::cl::desc("What the backward recomputes of the forward"),
      llvm::cl::init(Recompute::None), enumValues(kRecomputeNames)};

  // ZeRO (--tessera-zero).
  Option<ZeroStage> zero{
      *this, "zero", llvm::cl::desc("ZeRO stage (an AdamW train step)"),
      llvm::cl::init(ZeroStage::None), enumValues(kZeroStageNames)};
  ListOption<std::string> zeroAxes{
      *this, "zero-axes",
      llvm::cl::desc("The data-parallel mesh axes, major first (default dp)")};
  Option<ReshardAfterForward> reshardAfterForward{
      *this, "reshard-after-forward",
      llvm::cl::desc("ZeRO-3: true (gather again for the backward), false "
                     "(keep the forward's gathers) or a group size"),
      llvm::cl::init(ReshardAfterForward::shard())};
  Option<bool> zeroUnits{
      *this, "zero-units",
      llvm::cl::desc("Store each unit's parameters and their state in one "
                     "flat buffer (FSDP's FlatParameter)"),
      llvm::cl::init(true)};

  // Propagation (--tessera-propagate).
  Option<PropagationMode> propagation{
      *this, "propagation",
      llvm::cl::desc("How propagation resolves conflicts"),
      llvm::cl::init(PropagationMode::Aggressive),
      enumValues(kPropagationModeNames)};
  Option<std::string> machine{
      *this, "machine",
      llvm::cl::desc("A machine file or preset: propagation resolves "
                     "conflicts by their time on it")};

  // Ring attention's causal load balance (--tessera-zigzag-context).
  Option<bool> zigzag{
      *this, "zigzag",
      llvm::cl::desc("Store the sequence in zigzag order where causal ring "
                     "attention splits it over \"cp\""),
      llvm::cl::init(true)};

  // Parameter-server training (--tessera-parameter-server).
  Option<int64_t> servers{
      *this, "ps",
      llvm::cl::desc("Train on this many parameter servers, the mesh's "
                     "devices being the workers (0: none)"),
      llvm::cl::init(0)};
  Option<std::string> consistency{
      *this, "consistency",
      llvm::cl::desc("How the parameter servers apply the workers' "
                     "gradients: sync, async or ssp=K"),
      llvm::cl::init("sync")};
  Option<ServerPart> serverPart{
      *this, "ps-part",
      llvm::cl::desc("The program of parameter-server training to compile "
                     "(tessera compile joins both into one plan)"),
      llvm::cl::init(ServerPart::Worker), enumValues(kServerPartNames)};

  // PipeDream-2BW's weight update semantics (--tessera-weight-stash).
  Option<bool> weightStash{
      *this, "weight-stash",
      llvm::cl::desc("Compute each step's gradients at the weights of the "
                     "step before, keeping them as state (PipeDream-2BW: "
                     "W(t+1) = W(t) - lr * grad f(W(t-1)))"),
      llvm::cl::init(false)};
  // PipeDream's on one device: each parameter's delay, name:d, as its
  // pipeline rank lags (tessera verify reads them from the pipelined plan).
  ListOption<std::string> stashDelays{
      *this, "stash-delays",
      llvm::cl::desc("With --schedule pipedream on one device: per "
                     "parameter, name:d, read it as it was d steps before")};

  // Pipelining (--tessera-microbatch, --tessera-pipeline).
  Option<int64_t> pipelineStages{
      *this, "pp",
      llvm::cl::desc("Pipeline stages, run along the mesh axis \"pp\""),
      llvm::cl::init(1)};
  Option<int64_t> microbatches{
      *this, "microbatches",
      llvm::cl::desc("Microbatches per step (gradient accumulation)"),
      llvm::cl::init(1)};
  Option<PipelineSchedule> schedule{*this, "schedule",
                                    llvm::cl::desc("The pipeline schedule"),
                                    llvm::cl::init(PipelineSchedule::OneFOneB),
                                    enumValues(kPipelineScheduleNames)};
  Option<int64_t> virtualStages{
      *this, "virtual",
      llvm::cl::desc("Stages per pipeline rank (interleaved)"),
      llvm::cl::init(1)};

  // Overlap (--tessera-schedule).
  Option<bool> overlap{*this, "overlap",
                       llvm::cl::desc("Start collectives early on the "
                                      "communication stream"),
                       llvm::cl::init(false)};
  Option<int64_t> prefetch{*this, "prefetch",
                           llvm::cl::desc("Collectives in flight at once"),
                           llvm::cl::init(1)};
  Option<int64_t> bucketBytes{
      *this, "bucket-bytes",
      llvm::cl::desc("Bucket reductions smaller than this (0: none)"),
      llvm::cl::init(0)};
  Option<bool> gatherUnits{
      *this, "gather-units",
      llvm::cl::desc("Gather each unit's parameters in one all_gather"),
      llvm::cl::init(true)};
  Option<int64_t> memoryLimit{
      *this, "memory-limit",
      llvm::cl::desc("Bytes of collective results in flight (0: no limit)"),
      llvm::cl::init(0)};

  // Fusion (--tessera-fuse-elementwise).
  Option<bool> fuse{*this, "fuse",
                    llvm::cl::desc("Fuse chains of elementwise ops into one "
                                   "kernel each"),
                    llvm::cl::init(true)};

  // Export (--tessera-export).
  Option<std::string> output{*this, "output", llvm::cl::desc("The plan file"),
                             llvm::cl::init("-")};
  Option<bool> text{*this, "text",
                    llvm::cl::desc("Write the plan in protobuf text format"),
                    llvm::cl::init(false)};

  /// Whether the options pipeline the train step (stages or microbatches).
  bool isPipelined() const { return pipelineStages > 1 || microbatches > 1; }
};

} // namespace tessera

#endif // TESSERA_PIPELINES_COMPILEOPTIONS_H
