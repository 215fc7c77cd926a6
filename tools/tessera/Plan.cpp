//===- Plan.cpp - tessera plan --------------------------------------------===//

#include "Commands.h"

#include "tessera/Search/PlanReport.h"
#include "tessera/Search/Planner.h"

#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace tessera;
using namespace tessera::cli;
namespace cl = llvm::cl;

cl::SubCommand &cli::planCommand() {
  static cl::SubCommand command(
      "plan", "Search the DP/TP/PP training plan of a GPT-style model "
              "against a machine model");
  return command;
}

static cl::opt<std::string> planModel(cl::Positional, cl::Required,
                                      cl::desc("<model.mlir>"),
                                      cl::sub(planCommand()));
static cl::opt<std::string>
    machineName("machine",
                cl::desc("A machines/<name>.json preset or a machine file"),
                cl::Required, cl::sub(planCommand()));
static cl::opt<int64_t> planDevices("devices", cl::desc("Number of devices"),
                                    cl::Required, cl::sub(planCommand()));
static cl::opt<int64_t> pinDp("dp", cl::desc("Pin the data-parallel size"),
                              cl::sub(planCommand()));
static cl::opt<int64_t> pinTp("tp", cl::desc("Pin the tensor-parallel size"),
                              cl::sub(planCommand()));
static cl::opt<int64_t> pinPp("pp", cl::desc("Pin the pipeline stages"),
                              cl::sub(planCommand()));
static cl::opt<int64_t>
    pinMicrobatches("microbatches", cl::desc("Pin the microbatches per step"),
                    cl::sub(planCommand()));
static cl::opt<int64_t> pinZero("zero", cl::desc("Pin the ZeRO stage (0-3)"),
                                cl::sub(planCommand()));
/// A yes-or-no pin, named as its option reads it.
enum class Switch { Off, On };
static constexpr EnumName<Switch> kTrueFalseNames[] = {
    {"true", Switch::On, ""}, {"false", Switch::Off, ""}};
static constexpr EnumName<Switch> kOnOffNames[] = {{"on", Switch::On, ""},
                                                   {"off", Switch::Off, ""}};
TESSERA_ENUM_OPTION_PARSER(Switch);
static cl::opt<Switch> pinReshardAfterForward(
    "reshard-after-forward",
    cl::desc("Pin ZeRO-3's regather: true (gather again for the backward) "
             "or false (keep the forward's gathers; shown as zero 3k)"),
    enumValues(kTrueFalseNames), cl::sub(planCommand()));
static cl::opt<PipelineSchedule> pinSchedule("schedule",
                                             cl::desc("Pin the schedule"),
                                             enumValues(kPipelineScheduleNames),
                                             cl::sub(planCommand()));
static cl::opt<Recompute> pinRecompute("recompute",
                                       cl::desc("Pin recomputation"),
                                       enumValues(kRecomputeNames),
                                       cl::sub(planCommand()));
static cl::opt<Switch> pinSequenceParallel("sequence-parallel",
                                           cl::desc("Pin sequence parallelism"),
                                           enumValues(kOnOffNames),
                                           cl::sub(planCommand()));
static cl::opt<Precision> planPrecision("precision", cl::desc("Precision"),
                                        cl::init(Precision::Mixed),
                                        enumValues(kPrecisionNames),
                                        cl::sub(planCommand()));
static cl::opt<int64_t> planTop("top", cl::desc("Plans to show"), cl::init(5),
                                cl::sub(planCommand()));
static cl::opt<bool> planJson("json", cl::desc("Print JSON"),
                              cl::sub(planCommand()));

/// Sets `to` when `option` was given.
template <typename T, typename U>
static void pin(const cl::opt<T> &option, std::optional<U> &to) {
  if (option.getNumOccurrences())
    to = option.getValue();
}

int cli::runPlan(MLIRContext &context) {
  llvm::Expected<std::unique_ptr<ModelFile>> file =
      loadModelFile(context, planModel);
  if (!file)
    return reportError(file.takeError());
  ModuleOp model = *(*file)->module;
  llvm::Expected<ModelShape> shape = getModelShape(model);
  if (!shape)
    return reportError(shape.takeError());
  llvm::Expected<MachineModel> machine =
      loadMachineModel(machineName, kMachinesDir);
  if (!machine)
    return reportError(machine.takeError());
  if (planDevices < 1 ||
      (machine->getMaxDevices() && planDevices > machine->getMaxDevices()))
    return reportError(
        llvm::formatv("--devices must be between 1 and {0} for machine '{1}'",
                      machine->getMaxDevices(), machine->name));

  SearchPins pins;
  pin(pinDp, pins.dp);
  pin(pinTp, pins.tp);
  pin(pinPp, pins.pp);
  pin(pinMicrobatches, pins.microbatches);
  pin(pinZero, pins.zero);
  if (pinReshardAfterForward.getNumOccurrences())
    pins.reshardAfterForward = pinReshardAfterForward == Switch::On;
  pin(pinSchedule, pins.schedule);
  pin(pinRecompute, pins.recompute);
  if (pinSequenceParallel.getNumOccurrences())
    pins.sequenceParallel = pinSequenceParallel == Switch::On;
  pins.precision = planPrecision;

  SearchResult result = searchPlans(*shape, *machine, planDevices, pins, model);
  size_t shown =
      std::min<size_t>(std::max<int64_t>(planTop, 1), result.plans.size());
  if (planJson) {
    llvm::json::Array plans;
    for (const PlanEstimate &plan : ArrayRef(result.plans).take_front(shown))
      plans.push_back(toJson(plan));
    llvm::json::Object root{{"machine", machine->name},
                            {"devices", planDevices.getValue()},
                            {"considered", result.considered},
                            {"over_memory", result.overMemory},
                            {"plans", std::move(plans)}};
    llvm::outs() << llvm::formatv("{0:2}\n",
                                  llvm::json::Value(std::move(root)));
    return result.plans.empty() ? 1 : 0;
  }
  llvm::outs() << llvm::formatv(
      "plan: {0} on {1} x {2} ({3} layers, hidden {4}, {5} parameters, batch "
      "{6}); {7} plans considered, {8} over {9:f1} GB of device memory\n",
      planModel, planDevices.getValue(), machine->name, shape->layers,
      shape->hidden, formatCount(shape->parameters), shape->batch,
      result.considered, result.overMemory, machine->memoryBytes / 1e9);
  if (result.plans.empty())
    return reportError("no plan fits in device memory; add devices or allow "
                       "ZeRO, recomputation or pipelining");
  llvm::outs() << llvm::formatv(
      "{0,4} {1,5} {2,4} {3,4} {4,5} {5,4} {6,-11} {7,-9} {8,3} {9,10} "
      "{10,6} {11,10}\n",
      "rank", "dp", "tp", "pp", "mb", "zero", "schedule", "recompute", "sp",
      "step (s)", "MFU", "mem (GB)");
  for (auto [rank, plan] :
       llvm::enumerate(ArrayRef(result.plans).take_front(shown))) {
    const PlanChoice &c = plan.choice;
    llvm::outs() << llvm::formatv(
        "{0,4} {1,5} {2,4} {3,4} {4,5} {5,4} {6,-11} {7,-9} {8,3} {9,10:f3} "
        "{10,5:f1}% {11,10:f1}\n",
        rank + 1, c.dp, c.tp, c.pp, c.microbatches, getZeroName(c),
        getEnumName(kPipelineScheduleNames, c.schedule),
        getEnumName(kRecomputeNames, c.recompute),
        c.sequenceParallel ? "on" : "off", plan.stepTimeSeconds, 100 * plan.mfu,
        plan.peakMemoryBytes / 1e9);
  }
  if (std::optional<WinReason> why = getWinReason(result.plans)) {
    const PlanChoice &a = why->winner, &b = why->rival;
    llvm::outs() << llvm::formatv(
        "why: dp={0} tp={1} pp={2} beats the best dp={3} tp={4} pp={5} by "
        "{6:f1}%: its {7} takes {8:e2} s against {9:e2} s\n",
        a.dp, a.tp, a.pp, b.dp, b.tp, b.pp, 100 * why->slowerFraction,
        why->part, why->winnerSeconds, why->rivalSeconds);
  }
  return 0;
}
