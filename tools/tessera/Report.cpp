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
#include "tessera/runtime/Plan.h"

#include "llvm/Support/FileSystem.h"
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

/// The JSON in `path`; the error names the file.
static llvm::Expected<llvm::json::Value> readJson(const std::string &path) {
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> file =
      llvm::MemoryBuffer::getFile(path);
  if (!file)
    return llvm::createStringError("cannot read '" + path +
                                   "': " + file.getError().message());
  llvm::Expected<llvm::json::Value> json =
      llvm::json::parse((*file)->getBuffer());
  if (!json)
    return llvm::createStringError(
        "'" + path + "' is not JSON: " + llvm::toString(json.takeError()));
  return json;
}

int cli::runReport() {
  // The output is checked first: nothing is drawn for a page that cannot
  // be written.
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

  std::optional<llvm::json::Value> trace;
  if (!reportTrace.empty()) {
    std::string path = reportTrace;
    if (llvm::sys::fs::is_directory(path))
      path += "/trace.json";
    llvm::Expected<llvm::json::Value> json = readJson(path);
    if (!json)
      return reportError(json.takeError());
    trace = std::move(*json);
    inputs.trace = &*trace;
  }

  for (const std::string &path : reportScaling) {
    llvm::Expected<llvm::json::Value> json = readJson(path);
    if (!json)
      return reportError(json.takeError());
    llvm::Expected<ScalingCurve> curve = parseScalingCurve(*json);
    if (!curve)
      return reportError("'" + path + "': " + toString(curve.takeError()));
    const llvm::json::Object *object = json->getAsObject();
    std::string model = object->getString("model").value_or(path).str();
    std::string machine = object->getString("machine").value_or("").str();
    inputs.figures.push_back(
        {llvm::formatv("{0} scaling of {1}",
                       curve->mode == ScalingMode::Strong ? "Strong" : "Weak",
                       llvm::sys::path::filename(model))
             .str(),
         getScalingSvg(*curve, model, machine)});
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
