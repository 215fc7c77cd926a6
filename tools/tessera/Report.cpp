//===- Report.cpp - tessera report ----------------------------------------===//
//
//   tessera report PLAN -o REPORT.html [--trace DIR|FILE] [--machine NAME]
//                  [--scaling CURVE.json ...]
//
// Draws a plan (and a traced run of it, and scaling curves of tessera plan
// --scaling --json) as one self-contained HTML page (tessera/Export/
// Report.h).
//
//===----------------------------------------------------------------------===//

#include "Commands.h"

#include "tessera/Analysis/MachineModel.h"
#include "tessera/Export/Report.h"
#include "tessera/Search/PlanReport.h"
#include "tessera/Support/Nesting.h"
#include "tessera/runtime/Plan.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

using namespace tessera;
using namespace tessera::cli;
namespace cl = llvm::cl;

cl::SubCommand &cli::reportCommand() {
  static cl::SubCommand command(
      "report", "Draw a plan as one self-contained HTML page: its pipeline "
                "schedule, memory per device, collectives per step, and "
                "optionally a traced run and scaling curves");
  return command;
}

static cl::opt<std::string> reportPlan(cl::Positional, cl::Required,
                                       cl::desc("<plan>"),
                                       cl::sub(reportCommand()));
static cl::opt<std::string> reportOutput("o", cl::desc("The HTML page"),
                                         cl::value_desc("file"), cl::Required,
                                         cl::sub(reportCommand()));
static cl::opt<std::string> reportTrace(
    "trace",
    cl::desc("A run's trace: the directory of tessera-run --trace (its "
             "trace.json) or a merged trace file"),
    cl::value_desc("DIR|FILE"), cl::sub(reportCommand()));
static cl::opt<std::string> reportMachine(
    "machine",
    cl::desc("A machines/<name>.json preset or a machine file: draws its "
             "device's memory"),
    cl::sub(reportCommand()));
static cl::list<std::string> reportScaling(
    "scaling",
    cl::desc("A curve of tessera plan --scaling ... --json (repeatable)"),
    cl::value_desc("FILE.json"), cl::sub(reportCommand()));

/// The JSON in `path`; the error names the file. Text nested deeper than
/// kMaxNestingDepth is refused before llvm::json, which recurses once per
/// level, could overflow its stack on it.
static llvm::Expected<llvm::json::Value> readJson(const std::string &path) {
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> file =
      llvm::MemoryBuffer::getFile(path);
  if (!file)
    return llvm::createStringError("cannot read '" + path +
                                   "': " + file.getError().message());
  llvm::StringRef text = (*file)->getBuffer();
  if (std::optional<size_t> deep = findNestingOverflow(text, kMaxNestingDepth))
    return llvm::createStringError(
        llvm::formatv("'{0}' is nested deeper than {1} levels (at byte {2})",
                      path, kMaxNestingDepth, *deep));
  llvm::Expected<llvm::json::Value> json = llvm::json::parse(text);
  if (!json)
    return llvm::createStringError(
        "'" + path + "' is not JSON: " + llvm::toString(json.takeError()));
  return json;
}

/// The file --trace names: its directory's trace.json, or itself.
static std::string getTraceFile() {
  if (llvm::sys::fs::is_directory(reportTrace))
    return reportTrace + "/trace.json";
  return reportTrace;
}

/// An input of the report: what it is ("the plan") and its file.
struct InputFile {
  std::string role, path;
};

/// Every file the report reads.
static std::vector<InputFile> getInputFiles() {
  std::vector<InputFile> inputs = {{"the plan", reportPlan}};
  if (!reportTrace.empty())
    inputs.push_back({"the trace", getTraceFile()});
  if (!reportMachine.empty())
    inputs.push_back({"the machine file",
                      getMachineFilePath(reportMachine, getMachinesDir())});
  for (const std::string &path : reportScaling)
    inputs.push_back({"the scaling curve", path});
  return inputs;
}

/// Fails where the page would be written over one of the report's inputs
/// (the same file by identity, through a link or another spelling of its
/// path included): opening the page empties that input before it is read.
static llvm::Error checkOutputIsNoInput(llvm::StringRef output) {
  for (const InputFile &input : getInputFiles()) {
    bool same = false;
    // An error means one of the two does not exist: then they differ.
    if (!llvm::sys::fs::equivalent(output, input.path, same) && same)
      return llvm::createStringError("cannot write '" + output + "': it is " +
                                     input.role + " '" + input.path +
                                     "', an input of the report");
  }
  return llvm::Error::success();
}

/// The units of the trace --trace names; the error names the file.
static llvm::Expected<std::vector<UnitSpan>> readTracedUnits() {
  std::string path = getTraceFile();
  llvm::Expected<llvm::json::Value> json = readJson(path);
  if (!json)
    return json.takeError();
  llvm::Expected<std::vector<UnitSpan>> units = getTracedSchedule(*json);
  if (!units)
    return llvm::createStringError("'" + path +
                                   "': " + toString(units.takeError()));
  return units;
}

/// The figure of the scaling curve in `path`; the error names the file.
static llvm::Expected<ReportFigure> readScalingFigure(const std::string &path) {
  llvm::Expected<llvm::json::Value> json = readJson(path);
  if (!json)
    return json.takeError();
  llvm::Expected<ScalingCurve> curve = parseScalingCurve(*json);
  if (!curve)
    return llvm::createStringError("'" + path +
                                   "': " + toString(curve.takeError()));
  const llvm::json::Object *object = json->getAsObject();
  std::string model = object->getString("model").value_or(path).str();
  std::string machine = object->getString("machine").value_or("").str();
  return ReportFigure{
      llvm::formatv("{0} scaling of {1}",
                    curve->mode == ScalingMode::Strong ? "Strong" : "Weak",
                    llvm::sys::path::filename(model))
          .str(),
      getScalingSvg(*curve, model, machine)};
}

int cli::runReport() {
  // The output is checked first: nothing is drawn for a page that cannot
  // be written, and no input is emptied by opening it.
  if (llvm::Error error = checkOutputIsNoInput(reportOutput))
    return reportError(std::move(error));
  std::error_code error;
  llvm::raw_fd_ostream page(reportOutput, error);
  if (error)
    return reportError("cannot write '" + reportOutput +
                       "': " + error.message());

  runtime::Expected<plan::Plan> plan = runtime::loadPlan(reportPlan);
  if (!plan.ok())
    return reportError(plan.message());
  ReportInputs inputs;
  inputs.plan = &*plan;
  inputs.planName = llvm::sys::path::filename(reportPlan).str();

  if (!reportMachine.empty()) {
    llvm::Expected<MachineModel> machine =
        loadMachineModel(reportMachine, getMachinesDir());
    if (!machine)
      return reportError(machine.takeError());
    inputs.capacityBytes = machine->memoryBytes;
    inputs.machineName = machine->name;
  }

  if (!reportTrace.empty()) {
    llvm::Expected<std::vector<UnitSpan>> units = readTracedUnits();
    if (!units)
      return reportError(units.takeError());
    inputs.tracedUnits = std::move(*units);
  }

  for (const std::string &path : reportScaling) {
    llvm::Expected<ReportFigure> figure = readScalingFigure(path);
    if (!figure)
      return reportError(figure.takeError());
    inputs.figures.push_back(std::move(*figure));
  }

  llvm::Expected<std::string> html = renderReport(inputs);
  if (!html)
    return reportError("cannot draw '" + reportPlan +
                       "': " + toString(html.takeError()));
  page << *html;
  page.close();
  if (page.has_error())
    return reportError("cannot write '" + reportOutput +
                       "': " + page.error().message());
  llvm::outs() << "wrote '" << reportOutput << "'\n";
  return 0;
}
