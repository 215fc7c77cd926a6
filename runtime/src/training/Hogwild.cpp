//===- Hogwild.cpp - tessera-run --hogwild: lock-free SGD in threads ------===//

#include "tessera/runtime/training/Hogwild.h"

#include "tessera/runtime/Communicator.h"
#include "tessera/runtime/Executor.h"
#include "tessera/runtime/HostMemory.h"
#include "tessera/runtime/Plan.h"
#include "tessera/runtime/Threads.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>

using namespace tessera;
using namespace tessera::runtime;

namespace {

/// A shared parameter and its SGD learning rate.
struct SharedParam {
  OwnedTensor value;
  float lr;
};

/// The learning rate of each parameter's update in the servers' program:
/// an error unless every update is nn.sgd without weight decay (which
/// would touch every element, not only those a gradient touches).
Expected<std::map<std::string, float>>
getLearningRates(const plan::Plan &plan) {
  const plan::Program &update = plan.parameter_server().servers().programs(0);
  std::map<int64_t, std::string> gradientOf; // buffer -> parameter
  for (const plan::Argument &argument : update.arguments())
    if (argument.role() == plan::GRADIENT)
      gradientOf[argument.buffer()] = argument.name();
  std::map<std::string, float> rates;
  for (const plan::Instruction &instruction : update.instructions()) {
    if (!instruction.has_kernel())
      continue;
    const plan::Kernel &kernel = instruction.kernel();
    auto gradient = kernel.inputs_size() > 1 ? gradientOf.find(kernel.inputs(1))
                                             : gradientOf.end();
    if (gradient == gradientOf.end())
      continue;
    if (kernel.op() != "nn.sgd")
      return invalidArgument(
          "--hogwild runs SGD steps, but the plan updates '" +
          gradient->second + "' by " + kernel.op() +
          " (compile it with --train sgd)");
    KernelAttrs attrs = getKernelAttrs(kernel);
    if (attrs.getFloat("weight_decay").value_or(0) != 0)
      return invalidArgument("--hogwild updates only the elements a gradient "
                             "touches, but the plan's weight decay of '" +
                             gradient->second +
                             "' touches every one (compile it without "
                             "--weight-decay)");
    rates[gradient->second] = attrs.getFloat("lr").value_or(0);
  }
  if (rates.size() != gradientOf.size())
    return invalidPlan("the servers' program updates not every parameter");
  return rates;
}

/// Reads and writes a shared float without a lock: a torn value is
/// impossible (32-bit words), a lost update is Hogwild's price.
float loadShared(const float *address) {
  float value;
  __atomic_load(address, &value, __ATOMIC_RELAXED);
  return value;
}
void storeShared(float *address, float value) {
  __atomic_store(address, &value, __ATOMIC_RELAXED);
}

} // namespace

int tessera::runtime::runHogwild(const plan::Plan &plan,
                                 const HogwildOptions &options) {
  auto fail = [](const std::string &message) {
    std::fprintf(stderr, "tessera-run: error: %s\n", message.c_str());
    return 1;
  };
  Expected<std::map<std::string, float>> rates = getLearningRates(plan);
  if (!rates.ok())
    return fail(rates.message());
  const plan::Program &program = plan.programs(0);
  Mesh mesh = getMesh(plan);
  int64_t workers = mesh.getNumDevices();
  // A plan too big for this machine is refused before anything is made:
  // one worker's needs, which each thread has, bound the whole from below.
  if (Status status = checkHostMemory(program, HostMemoryUse()); !status.ok())
    return fail(status.message());
  // The shared parameters, generated as a run generates them.
  std::map<std::string, SharedParam> shared;
  for (int i = 0; i < program.arguments_size(); ++i) {
    const plan::Argument &argument = program.arguments(i);
    if (argument.role() != plan::PARAM)
      continue;
    if (argument.dtype() != plan::F32)
      return fail("--hogwild updates f32 parameters, '" + argument.name() +
                  "' is not");
    Expected<OwnedTensor> value = makeGlobalInput(
        argument, options.seed,
        argument.has_source_index() ? argument.source_index() : i);
    if (!value.ok())
      return fail(value.message());
    shared[argument.name()] = {value.take(), rates->at(argument.name())};
  }
  int lossResult = -1;
  for (int i = 0; i < program.results_size() && lossResult < 0; ++i)
    if (program.results(i).grad_of().empty())
      lossResult = i;

  // Each thread computes alone: the kernels run on it, not on a pool the
  // threads would share.
  setKernelThreads(1);
  std::mutex lock;
  std::atomic<int64_t> next{1};
  std::vector<double> losses(options.steps + 1, 0), ends(options.steps + 1);
  std::vector<Status> errors(options.threads);
  auto start = std::chrono::steady_clock::now();
  auto work = [&](int thread) {
    // A worker of the plan: its data piece is that of worker
    // `thread % workers`, each step's batch its own (drawn by the step).
    int64_t rank = thread % workers;
    std::unique_ptr<Communicator> communicator = createLocalCommunicator(rank);
    std::unique_ptr<Device> device = createCpuDevice();
    Executor executor(program, mesh, *communicator, device.get());
    Expected<std::vector<OwnedTensor>> made =
        makeLocalInputs(program, mesh, rank, options.seed);
    if (!made.ok()) {
      errors[thread] = made.getStatus();
      return;
    }
    std::vector<OwnedTensor> results, locals = made.take();
    for (int64_t step; (step = next++) <= options.steps;) {
      setStepCounters(program, step, locals);
      for (int i = 0; i < program.arguments_size(); ++i) {
        const plan::Argument &argument = program.arguments(i);
        Tensor &local = locals[i].view;
        if (argument.role() == plan::PARAM) {
          std::unique_lock<std::mutex> held(lock, std::defer_lock);
          if (options.locked)
            held.lock();
          const float *from = shared.at(argument.name()).value.view.as<float>();
          float *to = local.as<float>();
          for (int64_t e = 0; e < local.getNumElements(); ++e)
            to[e] = loadShared(from + e);
        }
      }
      if (Status status = executor.run(locals, results); !status.ok()) {
        errors[thread] =
            status.withPrefix("step " + std::to_string(step) + ": ");
        return;
      }
      // A worker's gradient is its part of the plan's step: alone, it
      // stands for its batch's step.
      {
        std::unique_lock<std::mutex> held(lock, std::defer_lock);
        if (options.locked)
          held.lock();
        for (int i = 0; i < program.results_size(); ++i) {
          const std::string &name = program.results(i).grad_of();
          if (name.empty())
            continue;
          SharedParam &param = shared.at(name);
          float scale = param.lr * static_cast<float>(workers);
          const float *gradient = results[i].view.as<float>();
          float *value = param.value.view.as<float>();
          for (int64_t e = 0; e < results[i].view.getNumElements(); ++e)
            if (gradient[e] != 0)
              storeShared(value + e,
                          loadShared(value + e) - scale * gradient[e]);
        }
      }
      if (lossResult >= 0)
        losses[step] = getScalar(results[lossResult].view);
      ends[step] = std::chrono::duration<double>(
                       std::chrono::steady_clock::now() - start)
                       .count();
    }
  };
  std::vector<std::thread> threads;
  for (int thread = 0; thread < options.threads; ++thread)
    threads.emplace_back(work, thread);
  for (std::thread &thread : threads)
    thread.join();
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  for (const Status &error : errors)
    if (!error.ok())
      return fail(error.message());

  auto mean = [&](int64_t from, int64_t to) {
    double total = 0;
    for (int64_t step = from; step <= to; ++step)
      total += losses[step];
    return total / (to - from + 1);
  };
  int64_t window = std::min<int64_t>(10, options.steps);
  std::printf("hogwild: %d thread%s, %s, %lld steps in %.3f s (%.1f steps/s); "
              "loss %.6f over the first %lld steps, %.6f over the last\n",
              options.threads, options.threads == 1 ? "" : "s",
              options.locked ? "locked" : "lock-free",
              static_cast<long long>(options.steps), seconds,
              options.steps / seconds, mean(1, window),
              static_cast<long long>(window),
              mean(options.steps - window + 1, options.steps));
  if (!options.dumpLosses.empty()) {
    std::FILE *file = std::fopen(options.dumpLosses.c_str(), "w");
    if (!file)
      return fail("cannot write '" + options.dumpLosses + "'");
    for (int64_t step = 1; step <= options.steps; ++step)
      std::fprintf(file, "%.9g\n", losses[step]);
    std::fclose(file);
  }
  if (!options.metrics.empty()) {
    std::FILE *file = std::fopen(options.metrics.c_str(), "w");
    if (!file)
      return fail("cannot write '" + options.metrics + "'");
    for (int64_t step = 1; step <= options.steps; ++step)
      std::fprintf(file,
                   "{\"step\": %lld, \"loss\": %.9g, \"seconds\": %.6f}\n",
                   static_cast<long long>(step), losses[step], ends[step]);
    std::fclose(file);
  }
  return 0;
}
