//===- Data.cpp - tessera-run --data: a token file's batches --------------===//

#include "tessera/runtime/training/Data.h"

#include "tessera/runtime/Executor.h"
#include "tessera/runtime/Plan.h"

#include <map>

using namespace tessera;
using namespace tessera::runtime;

Expected<std::unique_ptr<DataFeed>>
DataFeed::create(const std::string &path, const plan::Plan &plan,
                 const plan::Program &program, const Mesh &mesh, int64_t rank,
                 uint64_t seed) {
  // The step's integer data arguments by their index in the step, over
  // every stage's program: the first two are the inputs and the labels.
  std::map<int64_t, plan::Argument> data;
  for (const plan::Program &each : plan.programs())
    for (int i = 0; i < each.arguments_size(); ++i)
      for (const auto &[source, tensor] : getStepTensors(each.arguments(i), i))
        if (tensor.role() == plan::DATA &&
            (tensor.dtype() == plan::I32 || tensor.dtype() == plan::I64))
          data.emplace(source, tensor);
  auto shapeOf = [](const plan::Argument &argument) {
    return std::vector<int64_t>(argument.global_shape().begin(),
                                argument.global_shape().end());
  };
  if (data.size() < 2 ||
      shapeOf(data.begin()->second) !=
          shapeOf(std::next(data.begin())->second) ||
      data.begin()->second.global_shape_size() != 2)
    return invalidArgument(
        "--data feeds a language model's tokens and labels: the plan's step "
        "takes no two integer data arguments of one [batch, seq] shape");
  auto inputs = data.begin(), labels = std::next(inputs);
  int64_t batch = inputs->second.global_shape(0);
  int64_t seq = inputs->second.global_shape(1);

  Expected<std::unique_ptr<TokenFile>> opened = TokenFile::open(path);
  if (!opened.ok())
    return opened.getStatus();
  std::unique_ptr<TokenFile> file = opened.take();
  for (auto fed : {inputs, labels}) {
    int64_t bound = fed->second.index_bound();
    if (bound > 0 && file->getVocab() > bound)
      return dataError("token file '" + path + "' has a vocabulary of " +
                       std::to_string(file->getVocab()) +
                       " ids, more than the model's " + std::to_string(bound));
  }
  Expected<TokenBatches> batches =
      TokenBatches::create(*file, batch, seq, seed);
  if (!batches.ok())
    return batches.getStatus();
  std::unique_ptr<DataFeed> feed(
      new DataFeed(std::move(file), batches.take(), batch, seq));

  // Each element's place in the global batch, as this rank's piece holds it.
  OwnedTensor places(DType::I64, {batch, seq});
  for (int64_t i = 0; i < batch * seq; ++i)
    places.view.as<int64_t>()[i] = i + 1;
  for (int i = 0; i < program.arguments_size(); ++i) {
    const plan::Argument &argument = program.arguments(i);
    int64_t source = argument.has_source_index() ? argument.source_index() : i;
    if (source != inputs->first && source != labels->first)
      continue;
    feed->fed.push_back(
        {i, source == labels->first ? 1 : 0, getDType(argument.dtype()),
         takeLocalPiece(places.view, getLayout(argument), mesh, rank)});
  }
  return feed;
}

DataFeed::~DataFeed() {
  if (next.valid())
    next.wait();
}

Status DataFeed::readSamples(int64_t step, std::vector<Sample> &samples) {
  samples.assign(batch, Sample());
  for (const Fed &each : fed) {
    const int64_t *places = each.positions.view.as<int64_t>();
    for (int64_t k = 0, e = each.positions.view.getNumElements(); k < e; ++k) {
      if (places[k] <= 0)
        continue;
      Sample &sample = samples[(places[k] - 1) / seq];
      if (!sample.ids.empty())
        continue;
      sample.start = batches.getSampleStart(step, (places[k] - 1) / seq);
      sample.ids.resize(seq + 1);
      if (Status status = file->read(sample.start, seq + 1, sample.ids.data());
          !status.ok())
        return status;
    }
  }
  return Status::success();
}

Expected<std::vector<OwnedTensor>> DataFeed::read(int64_t step) {
  std::vector<Sample> samples;
  if (Status status = readSamples(step, samples); !status.ok())
    return status;
  std::vector<OwnedTensor> pieces;
  for (const Fed &each : fed) {
    OwnedTensor piece(each.dtype, each.positions.view.shape);
    const int64_t *places = each.positions.view.as<int64_t>();
    for (int64_t k = 0, e = piece.view.getNumElements(); k < e; ++k) {
      uint32_t id = 0;
      if (places[k] > 0) {
        int64_t row = (places[k] - 1) / seq, column = (places[k] - 1) % seq;
        const Sample &sample = samples[row];
        id = sample.ids[column + each.shift];
        if (id >= file->getVocab())
          return dataError("token file '" + file->getPath() + "': id " +
                           std::to_string(id) + " at position " +
                           std::to_string(sample.start + column + each.shift) +
                           " is not below its vocabulary of " +
                           std::to_string(file->getVocab()));
      }
      if (each.dtype == DType::I32)
        piece.view.as<int32_t>()[k] = static_cast<int32_t>(id);
      else
        piece.view.as<int64_t>()[k] = id;
    }
    pieces.push_back(std::move(piece));
  }
  return pieces;
}

void DataFeed::prefetch(int64_t step) {
  if (next.valid())
    next.wait();
  prefetched = step;
  next = std::async(std::launch::async, [this, step] { return read(step); });
}

Status DataFeed::fill(int64_t step, std::vector<OwnedTensor> &locals) {
  Expected<std::vector<OwnedTensor>> pieces =
      prefetched == step ? next.get() : read(step);
  prefetched = -1;
  if (!pieces.ok())
    return pieces.getStatus();
  for (size_t k = 0; k < fed.size(); ++k)
    locals[fed[k].argument] = std::move((*pieces)[k]);
  return Status::success();
}
