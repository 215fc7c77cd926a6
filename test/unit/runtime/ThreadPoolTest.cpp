//===- ThreadPoolTest.cpp - the CPU kernels' threads ----------------------===//

#include "cpu/ThreadPool.h"
#include "tessera/runtime/Kernels.h"
#include "tessera/runtime/Threads.h"

#include <cblas.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <mutex>
#include <vector>

using namespace tessera::runtime;

namespace {

/// Restores one thread when a test ends.
struct Threads {
  explicit Threads(int threads) { setKernelThreads(threads); }
  ~Threads() { setKernelThreads(1); }
};

TEST(ThreadPoolTest, CoversEachElementOnceInChunksOfAtLeastTheGrain) {
  for (int threads : {1, 2, 3, 5}) {
    Threads scoped(threads);
    EXPECT_EQ(getKernelThreads(), threads);
    for (int64_t count : {0, 1, 7, 100, 1001}) {
      std::vector<std::atomic<int>> seen(count);
      std::mutex mutex;
      std::vector<std::pair<int64_t, int64_t>> chunks;
      cpu::parallelFor(count, 10, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i)
          ++seen[i];
        std::lock_guard<std::mutex> guard(mutex);
        chunks.push_back({begin, end});
      });
      for (int64_t i = 0; i < count; ++i)
        EXPECT_EQ(seen[i], 1) << "element " << i << " of " << count;
      EXPECT_LE(static_cast<int64_t>(chunks.size()),
                std::max<int64_t>(1, std::min<int64_t>(threads, count / 10)));
    }
  }
}

TEST(ThreadPoolTest, ManyShortRegionsRunEachChunkOnce) {
  // Regions back to back, of 1 to 4 chunks on 4 threads (on fewer cores):
  // a worker left out of one region may look only while the next is set
  // up, and must run neither a chunk twice nor one of another region.
  Threads scoped(4);
  std::vector<std::atomic<int>> seen(4);
  for (int region = 0; region < 5000; ++region) {
    int chunks = 1 + region % 4;
    cpu::parallelFor(chunks, 1, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i)
        ++seen[i];
    });
    for (int i = 0; i < 4; ++i)
      ASSERT_EQ(seen[i].exchange(0), i < chunks ? 1 : 0)
          << "region " << region << ", chunk " << i;
  }
}

TEST(ThreadPoolTest, ANestedRegionRunsWhole) {
  Threads scoped(2);
  std::atomic<int> inner{0};
  cpu::parallelFor(2, 1, [&](int64_t, int64_t) {
    cpu::parallelFor(100, 1, [&](int64_t begin, int64_t end) {
      EXPECT_EQ(begin, 0);
      EXPECT_EQ(end, 100);
      ++inner;
    });
  });
  EXPECT_EQ(inner, 2);
}

TEST(ThreadPoolTest, OpenBlasRunsOnOneThread) {
  // Whatever it started with and whatever the kernel threads: GEMMs split
  // over the kernels' pool, each piece on one OpenBLAS thread.
  openblas_set_num_threads(2);
  setKernelThreads(1);
  EXPECT_EQ(openblas_get_num_threads(), 1);
  {
    Threads threads(2);
    EXPECT_EQ(openblas_get_num_threads(), 1);
  }
  EXPECT_EQ(openblas_get_num_threads(), 1);
}

TEST(ThreadPoolTest, DefaultsToTheCoresOfThisRank) {
  int alone = getDefaultKernelThreads(1, /*progressThread=*/false);
  EXPECT_GE(alone, 1);
  EXPECT_EQ(getDefaultKernelThreads(1, /*progressThread=*/true),
            std::max(alone - 1, 1));
  EXPECT_EQ(getDefaultKernelThreads(1 << 20, /*progressThread=*/false), 1);
}

OwnedTensor makeInput(std::vector<int64_t> shape, int seed) {
  OwnedTensor tensor(DType::F32, std::move(shape));
  float *data = tensor.view.as<float>();
  for (int64_t i = 0, e = tensor.view.getNumElements(); i < e; ++i)
    data[i] = std::sin(0.37f * static_cast<float>(i) + seed);
  return tensor;
}

/// Runs `op` on fresh outputs of `shapes` with the given threads.
std::vector<OwnedTensor> run(int threads, const std::string &op,
                             const KernelAttrs &attrs,
                             const std::vector<const OwnedTensor *> &inputs,
                             const std::vector<std::vector<int64_t>> &shapes) {
  Threads scoped(threads);
  std::vector<OwnedTensor> outputs;
  for (const std::vector<int64_t> &shape : shapes)
    outputs.emplace_back(DType::F32, shape);
  std::vector<const Tensor *> in;
  for (const OwnedTensor *tensor : inputs)
    in.push_back(&tensor->view);
  std::vector<Tensor *> out;
  for (OwnedTensor &tensor : outputs)
    out.push_back(&tensor.view);
  EXPECT_EQ(runCpuKernel(op, attrs, in, out).message(), "") << op;
  return outputs;
}

/// Every kernel that splits over threads gives the same bits on 1 and 3.
TEST(ThreadPoolTest, KernelsGiveTheSameBitsOnAnyNumberOfThreads) {
  OwnedTensor x = makeInput({96, 1024}, 1), y = makeInput({96, 1024}, 2);
  OwnedTensor gamma = makeInput({1024}, 3), beta = makeInput({1024}, 4);
  OwnedTensor q = makeInput({2, 4, 64, 16}, 5),
              kv = makeInput({2, 2, 64, 16}, 6);
  OwnedTensor step(DType::I64, {});
  *step.view.as<int64_t>() = 3;
  // GEMMs split by rows and by columns, each with its split operand stored
  // straight and transposed, and a batch of them.
  OwnedTensor tall = makeInput({1000, 300}, 7),
              flat = makeInput({300, 1000}, 8), wide = makeInput({300, 200}, 9),
              narrow = makeInput({200, 300}, 10),
              stack = makeInput({3, 96, 1024}, 11);
  auto dotAttrs = [](std::vector<int64_t> lhsContracting,
                     std::vector<int64_t> rhsContracting, bool batched) {
    KernelAttrs dot;
    dot.lists["lhs_batching_dims"] =
        batched ? std::vector<int64_t>{0} : std::vector<int64_t>{};
    dot.lists["rhs_batching_dims"] = dot.lists["lhs_batching_dims"];
    dot.lists["lhs_contracting_dims"] = std::move(lhsContracting);
    dot.lists["rhs_contracting_dims"] = std::move(rhsContracting);
    return dot;
  };
  KernelAttrs straight = dotAttrs({1}, {0}, false),
              lhsTransposed = dotAttrs({0}, {0}, false),
              rhsTransposed = dotAttrs({1}, {1}, false),
              byBatch = dotAttrs({2}, {2}, true);
  KernelAttrs norm, attention, adamw, fused, transpose;
  transpose.lists["permutation"] = {1, 0};
  norm.floats["epsilon"] = 1e-5;
  attention.floats["scale"] = 0.25;
  attention.ints["causal"] = 1;
  attention.ints["zigzag"] = 0;
  attention.floats["dropout"] = 0;
  attention.ints["seed"] = 0;
  for (const char *name : {"lr", "beta1", "beta2", "epsilon", "weight_decay"})
    adamw.floats[name] = 0.01;
  adamw.floats["min_lr"] = 0;
  adamw.floats["max_grad_norm"] = 0;
  adamw.ints = {{"schedule", 0}, {"warmup_steps", 0}, {"decay_steps", 0}};
  fused.fusedSteps = {FusedStep{"nn.mul", {0, 1}, {}, DType::F32},
                      FusedStep{"nn.tanh", {2}, {}, DType::F32}};
  fused.fusedResults = {3};
  struct Case {
    const char *op;
    const KernelAttrs &attrs;
    std::vector<const OwnedTensor *> inputs;
    std::vector<std::vector<int64_t>> shapes;
  } cases[] = {
      {"nn.dot", straight, {&tall, &wide}, {{1000, 200}}},
      {"nn.dot", lhsTransposed, {&flat, &wide}, {{1000, 200}}},
      {"nn.dot", straight, {&narrow, &flat}, {{200, 1000}}},
      {"nn.dot", rhsTransposed, {&narrow, &tall}, {{200, 1000}}},
      {"nn.dot", byBatch, {&stack, &stack}, {{3, 96, 96}}},
      {"nn.tanh", {}, {&x}, {{96, 1024}}},
      {"nn.add", {}, {&x, &y}, {{96, 1024}}},
      {"nn.transpose", transpose, {&x}, {{1024, 96}}},
      {"nn.fused", fused, {&x, &y}, {{96, 1024}}},
      {"nn.layer_norm", norm, {&x, &gamma, &beta}, {{96, 1024}}},
      {"nn.layer_norm_grad", norm, {&x, &gamma, &y}, {{96, 1024}, {96, 1024}}},
      {"nn.adamw",
       adamw,
       {&x, &y, &y, &x, &step},
       {{96, 1024}, {96, 1024}, {96, 1024}}},
      {"nn.attention", attention, {&q, &kv, &kv}, {{2, 4, 64, 16}}},
      {"nn.attention_grad",
       attention,
       {&q, &kv, &kv, &q, &q},
       {{2, 4, 64, 16}, {2, 2, 64, 16}, {2, 2, 64, 16}}},
  };
  for (const Case &c : cases) {
    std::vector<OwnedTensor> one = run(1, c.op, c.attrs, c.inputs, c.shapes);
    std::vector<OwnedTensor> three = run(3, c.op, c.attrs, c.inputs, c.shapes);
    for (size_t i = 0; i < one.size(); ++i)
      EXPECT_EQ(std::memcmp(one[i].view.data, three[i].view.data,
                            one[i].view.getBytes()),
                0)
          << c.op << " output " << i;
  }
}

} // namespace
