//===- Report.cpp - A plan as one self-contained HTML page ----------------===//
//
// See Report.h. Every figure is SVG written here, laid out on a fixed grid:
// a label column on the left, a plot area, a legend above. Each shape
// carries a class (the test counts them in a browser) and a <title> with its
// numbers.
//
//===----------------------------------------------------------------------===//

#include "tessera/Export/Report.h"

#include "dialects/Dist/IR/DistOps.h"
#include "tessera/Support/Html.h"

#include "plan.pb.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cmath>
#include <map>

using namespace tessera;

namespace {

/// 1536 -> "1.5 KiB".
std::string formatBytes(double bytes) {
  const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int unit = 0;
  while (bytes >= 1024 && unit < 4) {
    bytes /= 1024;
    ++unit;
  }
  return unit == 0 ? llvm::formatv("{0} B", int64_t(bytes)).str()
                   : llvm::formatv("{0:f1} {1}", bytes, units[unit]).str();
}

/// Three significant digits: 0.000125, 15, 2.5e+03.
std::string formatNumber(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.3g", value);
  return text;
}

int64_t getDTypeBytes(plan::DType dtype) {
  switch (dtype) {
  case plan::F64:
  case plan::I64:
    return 8;
  case plan::F16:
  case plan::BF16:
    return 2;
  case plan::I1:
    return 1;
  default:
    return 4;
  }
}

int64_t getBufferBytes(const plan::Program &program, int64_t id) {
  if (id < 0 || id >= program.buffers_size())
    return 0;
  const plan::Buffer &buffer = program.buffers(id);
  int64_t elements = 1;
  for (int64_t size : buffer.shape())
    elements *= size;
  return elements * getDTypeBytes(buffer.dtype());
}

/// "F1" -> ('F', 1); none for another name.
std::optional<std::pair<char, int64_t>> parseUnitName(llvm::StringRef name) {
  if (name.size() < 2 || !llvm::StringRef("FBW").contains(name.front()))
    return std::nullopt;
  int64_t stage;
  if (name.drop_front().getAsInteger(10, stage) || stage < 0)
    return std::nullopt;
  return std::make_pair(name.front(), stage);
}

std::string getProgramLabel(const plan::Plan &plan, int64_t index) {
  const plan::Program &program = plan.programs(index);
  std::vector<int64_t> ranks(program.ranks().begin(), program.ranks().end());
  llvm::sort(ranks);
  return llvm::formatv("program {0} (ranks {1})", index, formatRanks(ranks));
}

//===----------------------------------------------------------------------===//
// Figures
//===----------------------------------------------------------------------===//

constexpr double kWidth = 960, kLabel = 190, kRight = 20, kRowHeight = 26,
                 kTop = 40;

/// The opening tag of a figure of class `kind`.
void writeSvgStart(llvm::raw_ostream &os, llvm::StringRef kind, double height) {
  os << llvm::formatv("<svg class=\"{0}\" xmlns=\"http://www.w3.org/2000/"
                      "svg\" width=\"{1}\" height=\"{2}\" font-family=\"sans-"
                      "serif\" font-size=\"12\">\n",
                      kind, kWidth, height);
}

const char *getUnitColor(char kind) {
  return kind == 'F'   ? "#4e79a7"
         : kind == 'B' ? "#59a14f"
         : kind == 'W' ? "#b07aa1"
                       : "#9c9c9c";
}

void writeLegend(llvm::raw_ostream &os,
                 llvm::ArrayRef<std::pair<std::string, std::string>> items) {
  double x = kLabel;
  for (const auto &item : items) {
    os << llvm::formatv("<rect class=\"legend\" x=\"{0}\" y=\"12\" "
                        "width=\"12\" height=\"12\" fill=\"{1}\"/>"
                        "<text x=\"{2}\" y=\"22\">{3}</text>\n",
                        x, item.second, x + 16, escapeHtml(item.first));
    x += 24 + 7.5 * item.first.size();
  }
}

/// The schedule as rows of units against time.
std::string drawSchedule(llvm::ArrayRef<UnitSpan> spans,
                         llvm::ArrayRef<std::string> labels,
                         llvm::StringRef timeUnit) {
  std::map<int64_t, int64_t> rowOf;
  for (const UnitSpan &span : spans)
    rowOf.emplace(span.row, 0);
  int64_t next = 0;
  for (auto &entry : rowOf)
    entry.second = next++;
  double begin = spans.front().start, end = spans.front().end;
  for (const UnitSpan &span : spans) {
    begin = std::min(begin, span.start);
    end = std::max(end, span.end);
  }
  double scale = (kWidth - kLabel - kRight) / std::max(end - begin, 1e-9);
  double height = kTop + kRowHeight * rowOf.size() + 30;
  std::string text;
  llvm::raw_string_ostream os(text);
  writeSvgStart(os, "schedule", height);
  std::vector<std::pair<std::string, std::string>> legend;
  for (const auto &kind :
       {std::make_pair('F', "forward"), std::make_pair('B', "backward"),
        std::make_pair('W', "weight gradient"),
        std::make_pair('U', "optimizer update")})
    if (llvm::any_of(spans, [&](const UnitSpan &span) {
          return span.kind == kind.first;
        }))
      legend.push_back({kind.second, getUnitColor(kind.first)});
  writeLegend(os, legend);
  for (const auto &[row, index] : rowOf) {
    double y = kTop + kRowHeight * index;
    std::string label = row < int64_t(labels.size()) ? labels[row] : "";
    os << llvm::formatv("<text x=\"{0}\" y=\"{1}\" text-anchor=\"end\">{2}"
                        "</text>\n",
                        kLabel - 8, y + 16, escapeHtml(label));
    os << llvm::formatv("<rect x=\"{0}\" y=\"{1}\" width=\"{2}\" height=\"{3}\""
                        " fill=\"#f2f2f2\"/>\n",
                        kLabel, y + 2, kWidth - kLabel - kRight,
                        kRowHeight - 4);
  }
  for (const UnitSpan &span : spans) {
    double x = kLabel + (span.start - begin) * scale;
    double width = std::max((span.end - span.start) * scale, 0.5);
    double y = kTop + kRowHeight * rowOf[span.row];
    std::string what =
        span.kind == 'U' ? std::string("the optimizer update")
                         : llvm::formatv("{0}{1} of microbatch {2}", span.kind,
                                         span.stage, span.microbatch)
                               .str();
    os << llvm::formatv(
        "<g><title>{0}: {1} to {2} {3}</title>"
        "<rect class=\"unit {4}\" x=\"{5:f2}\" y=\"{6}\" width=\"{7:f2}\" "
        "height=\"{8}\" fill=\"{9}\" stroke=\"white\" stroke-width=\"0.5\"/>",
        escapeHtml(what), formatNumber(span.start - begin),
        formatNumber(span.end - begin), escapeHtml(timeUnit), span.kind, x,
        y + 2, width, kRowHeight - 4, getUnitColor(span.kind));
    if (width >= 14 && span.kind != 'U')
      os << llvm::formatv("<text x=\"{0:f2}\" y=\"{1}\" text-anchor=\"middle\""
                          " fill=\"white\">{2}</text>",
                          x + width / 2, y + 17, span.microbatch);
    os << "</g>\n";
  }
  os << llvm::formatv("<text x=\"{0}\" y=\"{1}\">0</text><text x=\"{2}\" "
                      "y=\"{1}\" text-anchor=\"end\">{3} {4}</text>\n",
                      kLabel, height - 8, kWidth - kRight,
                      formatNumber(end - begin), escapeHtml(timeUnit));
  os << "</svg>\n";
  return text;
}

struct MemoryCategory {
  const char *name, *color;
  int64_t bytes;
};

std::vector<MemoryCategory> getCategories(const plan::MemoryBreakdown &peak) {
  return {{"parameters", "#4e79a7", peak.parameter_bytes()},
          {"gradients", "#f28e2b", peak.gradient_bytes()},
          {"optimizer state", "#e15759", peak.optimizer_state_bytes()},
          {"activations", "#76b7b2", peak.activation_bytes()},
          {"communication", "#59a14f", peak.communication_bytes()}};
}

/// Each program's live bytes at its peak by category, its arena, and the
/// device's capacity.
std::string drawMemory(const plan::Plan &plan, std::optional<double> capacity) {
  double most = 0;
  for (const plan::Program &program : plan.programs())
    most = std::max(most, double(program.arena_bytes()));
  // A capacity a hundred times the largest arena would leave the bars
  // invisible: it is named instead of drawn.
  bool drawCapacity = capacity && *capacity <= 100 * most;
  if (drawCapacity)
    most = std::max(most, *capacity);
  double scale = (kWidth - kLabel - kRight - 80) / std::max(most, 1.0);
  double height = kTop + kRowHeight * plan.programs_size() + 30;
  std::string text;
  llvm::raw_string_ostream os(text);
  writeSvgStart(os, "memory", height);
  std::vector<std::pair<std::string, std::string>> legend;
  for (const MemoryCategory &category : getCategories({}))
    legend.push_back({category.name, category.color});
  legend.push_back({"arena", "#000000"});
  if (capacity)
    legend.push_back({"capacity", "#d62728"});
  writeLegend(os, legend);
  for (int64_t index = 0; index < plan.programs_size(); ++index) {
    const plan::Program &program = plan.programs(index);
    double y = kTop + kRowHeight * index;
    os << llvm::formatv("<text x=\"{0}\" y=\"{1}\" text-anchor=\"end\">{2}"
                        "</text>\n",
                        kLabel - 8, y + 16,
                        escapeHtml(getProgramLabel(plan, index)));
    double x = kLabel;
    for (const MemoryCategory &category :
         getCategories(program.peak_memory())) {
      if (category.bytes <= 0)
        continue;
      double width = category.bytes * scale;
      os << llvm::formatv("<g><title>{0}: {1}</title><rect class=\"memory-"
                          "bar\" x=\"{2:f2}\" y=\"{3}\" width=\"{4:f2}\" "
                          "height=\"{5}\" fill=\"{6}\"/></g>\n",
                          category.name, formatBytes(category.bytes), x, y + 2,
                          width, kRowHeight - 4, category.color);
      x += width;
    }
    double arena = kLabel + program.arena_bytes() * scale;
    os << llvm::formatv("<g><title>arena: {0}</title><line class=\"arena\" "
                        "x1=\"{1:f2}\" x2=\"{1:f2}\" y1=\"{2}\" y2=\"{3}\" "
                        "stroke=\"black\" stroke-width=\"2\"/></g>"
                        "<text x=\"{4:f2}\" y=\"{5}\">{0}</text>\n",
                        formatBytes(program.arena_bytes()), arena, y + 1,
                        y + kRowHeight - 1, arena + 6, y + 16);
  }
  if (capacity && !drawCapacity)
    os << llvm::formatv("<text class=\"capacity\" x=\"{0}\" y=\"{1}\" "
                        "text-anchor=\"end\" fill=\"#d62728\">capacity "
                        "{2}, off this scale</text>\n",
                        kWidth - kRight, height - 8, formatBytes(*capacity));
  if (drawCapacity) {
    double x = kLabel + *capacity * scale;
    os << llvm::formatv("<g><title>capacity: {0}</title><line class=\""
                        "capacity\" x1=\"{1:f2}\" x2=\"{1:f2}\" y1=\"{2}\" "
                        "y2=\"{3}\" stroke=\"#d62728\" stroke-dasharray=\"5 "
                        "3\" stroke-width=\"2\"/></g>\n",
                        formatBytes(*capacity), x, kTop - 4, height - 26);
  }
  os << "</svg>\n";
  return text;
}

const char *getCollectiveColor(llvm::StringRef kind) {
  return llvm::StringSwitch<const char *>(kind)
      .Case("all_reduce", "#4e79a7")
      .Case("all_gather", "#59a14f")
      .Case("reduce_scatter", "#f28e2b")
      .Case("all_to_all", "#e15759")
      .Case("broadcast", "#76b7b2")
      .Case("collective_permute", "#edc948")
      .Default("#b07aa1");
}

/// One bar per program and group of axes: its bytes per step by kind.
std::string
drawCollectives(const plan::Plan &plan,
                llvm::ArrayRef<std::vector<CollectiveTotal>> totals) {
  struct Row {
    std::string label;
    std::vector<const CollectiveTotal *> parts;
    int64_t bytes = 0;
  };
  std::vector<Row> rows;
  std::vector<std::string> kinds;
  for (size_t index = 0; index < totals.size(); ++index)
    for (const CollectiveTotal &total : totals[index]) {
      std::string label =
          (plan.programs_size() > 1 ? "program " + std::to_string(index) + ": "
                                    : std::string()) +
          (total.axes.empty() ? "(no axis)" : total.axes);
      if (rows.empty() || rows.back().label != label)
        rows.push_back({label, {}, 0});
      rows.back().parts.push_back(&total);
      rows.back().bytes += total.bytes;
      if (!llvm::is_contained(kinds, total.kind))
        kinds.push_back(total.kind);
    }
  int64_t most = 1;
  for (const Row &row : rows)
    most = std::max(most, row.bytes);
  double scale = (kWidth - kLabel - kRight - 80) / double(most);
  double height = kTop + kRowHeight * rows.size() + 10;
  std::string text;
  llvm::raw_string_ostream os(text);
  writeSvgStart(os, "collectives", height);
  std::vector<std::pair<std::string, std::string>> legend;
  for (const std::string &kind : kinds)
    legend.push_back({kind, getCollectiveColor(kind)});
  writeLegend(os, legend);
  for (size_t index = 0; index < rows.size(); ++index) {
    const Row &row = rows[index];
    double y = kTop + kRowHeight * index, x = kLabel;
    os << llvm::formatv("<text x=\"{0}\" y=\"{1}\" text-anchor=\"end\">{2}"
                        "</text>\n",
                        kLabel - 8, y + 16, escapeHtml(row.label));
    for (const CollectiveTotal *part : row.parts) {
      double width = part->bytes * scale;
      os << llvm::formatv("<g><title>{0} over {1}: {2} per step in {3} "
                          "calls</title><rect class=\"collective-bar\" "
                          "x=\"{4:f2}\" y=\"{5}\" width=\"{6:f2}\" "
                          "height=\"{7}\" fill=\"{8}\"/></g>\n",
                          escapeHtml(part->kind), escapeHtml(part->axes),
                          formatBytes(part->bytes), part->count, x, y + 2,
                          std::max(width, 0.5), kRowHeight - 4,
                          getCollectiveColor(part->kind));
      x += width;
    }
    os << llvm::formatv("<text x=\"{0:f2}\" y=\"{1}\">{2}</text>\n", x + 6,
                        y + 16, formatBytes(row.bytes));
  }
  os << "</svg>\n";
  return text;
}

const char *getCollectiveName(plan::CollectiveKind kind) {
  switch (kind) {
  case plan::ALL_REDUCE:
    return "all_reduce";
  case plan::ALL_GATHER:
    return "all_gather";
  case plan::REDUCE_SCATTER:
    return "reduce_scatter";
  case plan::ALL_TO_ALL:
    return "all_to_all";
  case plan::BROADCAST:
    return "broadcast";
  case plan::COLLECTIVE_PERMUTE:
    return "collective_permute";
  default:
    return nullptr; // all_slice keeps a piece: no communication
  }
}

} // namespace

//===----------------------------------------------------------------------===//
// The schedule
//===----------------------------------------------------------------------===//

llvm::Expected<std::vector<UnitSpan>>
tessera::simulateSchedule(const plan::Plan &plan) {
  struct Entry {
    char kind;
    int64_t stage, microbatch;
    double seconds;
  };
  std::vector<std::vector<Entry>> rows(plan.programs_size());
  int64_t stages = 0;
  bool splitBackward = false;
  for (const plan::Program &program : plan.programs())
    for (const plan::Unit &unit : program.units())
      if (auto parsed = parseUnitName(unit.name())) {
        stages = std::max(stages, parsed->second + 1);
        splitBackward |= parsed->first == 'W';
      }
  for (int64_t index = 0; index < plan.programs_size(); ++index) {
    const plan::Program &program = plan.programs(index);
    for (const plan::ScheduleEntry &entry : program.schedule()) {
      if (entry.unit() < 0 || entry.unit() >= program.units_size())
        continue;
      const plan::Unit &unit = program.units(entry.unit());
      auto parsed = parseUnitName(unit.name());
      if (!parsed)
        return llvm::createStringError(
            "program %lld runs a unit named '%s', expected F, B or W and "
            "its stage",
            static_cast<long long>(index), unit.name().c_str());
      double seconds = parsed->first == 'F' || splitBackward ? 1 : 2;
      // A unit without instructions (a first stage's input gradients)
      // takes no time.
      if (unit.end() <= unit.begin())
        seconds = 0;
      rows[index].push_back(
          {parsed->first, parsed->second, entry.microbatch(), seconds});
    }
  }
  // Each row runs its entries in order, each once the unit it needs is done.
  std::map<std::tuple<char, int64_t, int64_t>, double> done;
  std::vector<size_t> next(rows.size(), 0);
  std::vector<double> free(rows.size(), 0);
  std::vector<UnitSpan> spans;
  for (bool progress = true; progress;) {
    progress = false;
    for (size_t row = 0; row < rows.size(); ++row)
      for (; next[row] < rows[row].size(); ++next[row]) {
        const Entry &entry = rows[row][next[row]];
        std::optional<std::tuple<char, int64_t, int64_t>> needs;
        if (entry.kind == 'F' && entry.stage > 0)
          needs = {'F', entry.stage - 1, entry.microbatch};
        else if (entry.kind == 'B')
          needs = entry.stage + 1 < stages
                      ? std::make_tuple('B', entry.stage + 1, entry.microbatch)
                      : std::make_tuple('F', entry.stage, entry.microbatch);
        else if (entry.kind == 'W')
          needs = {'B', entry.stage, entry.microbatch};
        double start = free[row];
        if (needs) {
          auto it = done.find(*needs);
          if (it == done.end())
            break;
          start = std::max(start, it->second);
        }
        free[row] = start + entry.seconds;
        done[{entry.kind, entry.stage, entry.microbatch}] = free[row];
        if (entry.seconds > 0)
          spans.push_back({int64_t(row), entry.kind, entry.stage,
                           entry.microbatch, start, free[row]});
        progress = true;
      }
  }
  for (size_t row = 0; row < rows.size(); ++row)
    if (next[row] < rows[row].size()) {
      const Entry &entry = rows[row][next[row]];
      return llvm::createStringError(
          "the schedule of program %zu never runs %c%lld of microbatch %lld: "
          "the unit it waits for runs nowhere before it",
          row, entry.kind, static_cast<long long>(entry.stage),
          static_cast<long long>(entry.microbatch));
    }
  return spans;
}

namespace {
/// The most microseconds a trace's times count: a double counts them
/// exactly below 2^53 (285 years), and no run's clock reads more.
constexpr double kMaxTraceMicroseconds = 0x1p53;

/// Fails naming the field of trace event `index` whose rank or times no run
/// has: a rank past the most devices a plan runs on (the page would draw a
/// row for every rank below it), a time not finite or past
/// kMaxTraceMicroseconds (the axes would be scaled by infinity).
llvm::Error checkTraceEvent(size_t index, int64_t pid, double ts, double dur) {
  if (pid < 0 || pid >= dist::kMaxDevices)
    return llvm::createStringError(llvm::formatv(
        "\"pid\" of trace event {0} is {1}, expected a rank from 0 to {2} "
        "(2^20 devices are the most a plan runs on)",
        index, pid, dist::kMaxDevices - 1));
  if (!std::isfinite(ts) || std::abs(ts) > kMaxTraceMicroseconds)
    return llvm::createStringError(llvm::formatv(
        "\"ts\" of trace event {0} is {1}, expected a finite time in "
        "microseconds from -2^53 to 2^53",
        index, formatNumber(ts)));
  if (!std::isfinite(dur) || dur < 0 || dur > kMaxTraceMicroseconds)
    return llvm::createStringError(llvm::formatv(
        "\"dur\" of trace event {0} is {1}, expected a finite duration in "
        "microseconds from 0 to 2^53",
        index, formatNumber(dur)));
  return llvm::Error::success();
}
} // namespace

llvm::Expected<std::vector<UnitSpan>>
tessera::getTracedSchedule(const llvm::json::Value &trace) {
  const llvm::json::Array *events = trace.getAsArray();
  if (const llvm::json::Object *object = trace.getAsObject())
    events = object->getArray("traceEvents");
  if (!events)
    return llvm::createStringError(
        "the trace is not Chrome trace JSON: expected a \"traceEvents\" list");
  struct Event {
    int64_t rank, step;
    double start, end;
    llvm::StringRef name;
    bool unit;
  };
  std::vector<Event> spans;
  int64_t last = 0;
  for (auto [index, value] : llvm::enumerate(*events)) {
    const llvm::json::Object *event = value.getAsObject();
    if (!event || event->getString("ph") != "X")
      continue;
    std::optional<int64_t> pid = event->getInteger("pid");
    std::optional<double> ts = event->getNumber("ts"),
                          dur = event->getNumber("dur");
    const llvm::json::Object *args = event->getObject("args");
    std::optional<int64_t> step =
        args ? args->getInteger("step") : std::optional<int64_t>();
    if (!pid || !ts || !dur || !step)
      continue;
    if (llvm::Error error = checkTraceEvent(index, *pid, *ts, *dur))
      return std::move(error);
    bool unit = event->getInteger("tid") == -1;
    spans.push_back({*pid, *step, *ts, *ts + *dur,
                     event->getString("name").value_or(""), unit});
    if (unit)
      last = std::max(last, *step);
  }
  std::map<int64_t, double> origin;
  for (const Event &event : spans)
    if (event.step == last) {
      auto [it, added] = origin.emplace(event.rank, event.start);
      it->second = std::min(it->second, event.start);
    }
  std::vector<UnitSpan> units;
  for (const Event &event : spans) {
    if (!event.unit || event.step != last)
      continue;
    // "F1.3": the forward of stage 1 on microbatch 3; "update": the
    // instructions after the last unit. Other spans are not drawn.
    auto [name, microbatch] = event.name.split('.');
    std::optional<std::pair<char, int64_t>> parsed =
        event.name == "update" ? std::make_pair('U', int64_t(-1))
                               : parseUnitName(name);
    int64_t index = -1;
    if (!parsed || (parsed->first != 'U' && microbatch.getAsInteger(10, index)))
      continue;
    double zero = origin[event.rank];
    // Microseconds to milliseconds.
    units.push_back({event.rank, parsed->first, parsed->second, index,
                     (event.start - zero) / 1000, (event.end - zero) / 1000});
  }
  return units;
}

//===----------------------------------------------------------------------===//
// Collectives
//===----------------------------------------------------------------------===//

std::vector<CollectiveTotal>
tessera::getCollectivesPerStep(const plan::Mesh &mesh,
                               const plan::Program &program) {
  std::map<std::string, int64_t> axisSizes;
  for (const plan::Mesh::Axis &axis : mesh.axes())
    axisSizes[axis.name()] = axis.size();
  // Instructions inside a unit run once per schedule entry of it.
  std::vector<int64_t> runs(program.instructions_size(), 1);
  for (int64_t unit = 0; unit < program.units_size(); ++unit) {
    int64_t count =
        llvm::count_if(program.schedule(), [&](const plan::ScheduleEntry &e) {
          return e.unit() == unit;
        });
    const plan::Unit &span = program.units(unit);
    for (int64_t i = std::max<int64_t>(span.begin(), 0);
         i < std::min<int64_t>(span.end(), program.instructions_size()); ++i)
      runs[i] = count;
  }
  std::map<std::pair<std::string, std::string>, CollectiveTotal> totals;
  for (int64_t i = 0; i < program.instructions_size(); ++i) {
    const plan::Instruction &instruction = program.instructions(i);
    std::string axes, kind;
    int64_t bytes = 0;
    if (instruction.has_collective()) {
      const plan::Collective &collective = instruction.collective();
      const char *name = getCollectiveName(collective.kind());
      if (!name)
        continue;
      // A group of one moves nothing.
      int64_t groupSize = 1;
      for (const std::string &axis : collective.mesh_axes())
        groupSize *= axisSizes.count(axis) ? axisSizes[axis] : 1;
      if (groupSize == 1)
        continue;
      kind = name;
      axes = llvm::join(collective.mesh_axes(), ",");
      bytes = std::max(getBufferBytes(program, collective.input()),
                       getBufferBytes(program, collective.output()));
    } else if (instruction.has_send_recv() &&
               instruction.send_recv().is_send()) {
      kind = "send";
      axes = instruction.send_recv().mesh_axis();
      bytes = getBufferBytes(program, instruction.send_recv().buffer());
    } else {
      continue;
    }
    CollectiveTotal &total = totals[{axes, kind}];
    total.axes = axes;
    total.kind = kind;
    total.count += runs[i];
    total.bytes += bytes * runs[i];
  }
  std::vector<CollectiveTotal> list;
  for (auto &entry : totals)
    list.push_back(std::move(entry.second));
  return list;
}

//===----------------------------------------------------------------------===//
// The page
//===----------------------------------------------------------------------===//

std::string tessera::formatRanks(llvm::ArrayRef<int64_t> ranks) {
  std::string text;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1)
      ++j;
    text += (text.empty() ? "" : ", ") + std::to_string(ranks[i]) +
            (j > i ? "-" + std::to_string(ranks[j]) : "");
    i = j + 1;
  }
  return text;
}

llvm::Expected<std::string> tessera::renderReport(const ReportInputs &inputs) {
  const plan::Plan &plan = *inputs.plan;
  std::string text;
  llvm::raw_string_ostream os(text);
  std::string title = "Tessera report: " + inputs.planName;
  os << "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">"
     << "\n<title>" << escapeHtml(title) << "</title>\n<style>\n"
     << "body { font-family: sans-serif; margin: 24px; color: #222; }\n"
     << "section { margin-bottom: 32px; }\n"
     << "p.caption { color: #555; max-width: 960px; }\n"
     << "table { border-collapse: collapse; }\n"
     << "td, th { border: 1px solid #ccc; padding: 2px 8px; "
     << "text-align: right; }\n"
     << "td:first-child, th:first-child { text-align: left; }\n"
     << "</style>\n</head>\n<body>\n<h1>" << escapeHtml(title) << "</h1>\n";
  std::vector<std::string> axes;
  int64_t ranks = 1;
  for (const plan::Mesh::Axis &axis : plan.mesh().axes()) {
    axes.push_back(axis.name() + "=" + std::to_string(axis.size()));
    ranks *= axis.size();
  }
  os << "<p id=\"summary\">Mesh " << escapeHtml(llvm::join(axes, " × ")) << " ("
     << ranks << " ranks), " << plan.programs_size()
     << (plan.programs_size() == 1 ? " program" : " programs");
  if (!plan.source_model().empty())
    os << ", compiled from <code>" << escapeHtml(plan.source_model())
       << "</code>";
  os << ".</p>\n";

  // The schedule: traced where a trace has units, else as the papers draw
  // it.
  os << "<section id=\"schedule\">\n<h2>Pipeline schedule</h2>\n";
  llvm::Expected<std::vector<UnitSpan>> simulated = simulateSchedule(plan);
  if (!simulated)
    return simulated.takeError();
  if (simulated->empty()) {
    os << "<p class=\"caption\">This plan has no pipeline: every rank runs "
          "its whole step as one program.</p>\n";
  } else {
    std::vector<std::string> labels;
    for (int64_t index = 0; index < plan.programs_size(); ++index)
      labels.push_back(getProgramLabel(plan, index));
    double busy = 0, end = 0;
    for (const UnitSpan &span : *simulated) {
      busy += span.end - span.start;
      end = std::max(end, span.end);
    }
    int64_t rows = llvm::count_if(plan.programs(), [](const auto &program) {
      return program.units_size() > 0;
    });
    os << drawSchedule(*simulated, labels, "units of time");
    os << llvm::formatv(
        "<p class=\"caption\">Each program's schedule entries in order, "
        "idealized: a forward takes one unit of time and a backward two (one "
        "for the input gradient and one for the weight gradient where the "
        "schedule splits them), and a unit starts once the unit it needs "
        "is done. The numbers are microbatches. Bubble: {0:f1}% of the "
        "programs' time.</p>\n",
        100.0 * (1 - busy / (end * rows)));
  }
  if (inputs.tracedUnits && !inputs.tracedUnits->empty()) {
    const std::vector<UnitSpan> &traced = *inputs.tracedUnits;
    std::vector<std::string> labels;
    int64_t most = 0;
    for (const UnitSpan &span : traced)
      most = std::max(most, span.row);
    for (int64_t rank = 0; rank <= most; ++rank)
      labels.push_back("rank " + std::to_string(rank));
    os << "<h3>As traced</h3>\n" << drawSchedule(traced, labels, "ms");
    os << "<p class=\"caption\">The last step of the trace, each rank's "
          "clock from its first event of the step (the ranks' clocks are "
          "not synchronized).</p>\n";
  } else if (inputs.tracedUnits) {
    os << "<p class=\"caption\">The trace has no pipeline units.</p>\n";
  }
  os << "</section>\n";

  // Memory.
  os << "<section id=\"memory\">\n<h2>Memory per device</h2>\n"
     << drawMemory(plan, inputs.capacityBytes)
     << "<p class=\"caption\">Each program's live bytes at the step where "
        "they peak, by what they hold; the black line is its arena (every "
        "buffer's place, its peak with fragmentation)";
  if (inputs.capacityBytes) {
    int64_t most = 0;
    for (const plan::Program &program : plan.programs())
      most = std::max(most, program.arena_bytes());
    os << llvm::formatv("; a {0} device has {1} (the dashed red line, where "
                        "it fits the scale), of which the largest arena "
                        "takes {2}%",
                        escapeHtml(inputs.machineName),
                        formatBytes(*inputs.capacityBytes),
                        formatNumber(100.0 * most / *inputs.capacityBytes));
  }
  os << ".</p>\n</section>\n";

  // Collectives.
  std::vector<std::vector<CollectiveTotal>> totals;
  bool any = false;
  for (const plan::Program &program : plan.programs()) {
    totals.push_back(getCollectivesPerStep(plan.mesh(), program));
    any |= !totals.back().empty();
  }
  os << "<section id=\"collectives\">\n<h2>Collectives per step</h2>\n";
  if (!any) {
    os << "<p class=\"caption\">The plan communicates nothing.</p>\n";
  } else {
    os << drawCollectives(plan, totals)
       << "<p class=\"caption\">What each device sends or reduces in one "
          "step, by the mesh axes of its group: a collective's larger "
          "buffer, a pipeline send's tensor, counted per microbatch inside "
          "pipeline units.</p>\n<table>\n<tr><th>program</th><th>axes</th>"
          "<th>kind</th><th>calls</th><th>bytes</th></tr>\n";
    for (size_t index = 0; index < totals.size(); ++index)
      for (const CollectiveTotal &total : totals[index])
        os << "<tr><td>" << index << "</td><td>" << escapeHtml(total.axes)
           << "</td><td>" << escapeHtml(total.kind) << "</td><td>"
           << total.count << "</td><td>" << formatBytes(total.bytes)
           << "</td></tr>\n";
    os << "</table>\n";
  }
  os << "</section>\n";

  for (const ReportFigure &figure : inputs.figures)
    os << "<section class=\"figure\">\n<h2>" << escapeHtml(figure.title)
       << "</h2>\n"
       << figure.svg << "</section>\n";
  os << "</body>\n</html>\n";
  return text;
}
