//===- CollectivesBench.cpp - MPI collective bus bandwidth ----------------===//
//
// Run: mpirun -np 4 --oversubscribe build/bin/tessera-bench-collectives
//        [MAX_BYTES (default 64 MiB)]
// Times all_reduce, all_gather and reduce_scatter of the MPI communicator
// over one mesh axis of all ranks, from 1 KiB to 64 MiB, and reports the
// algorithm and bus bandwidth with nccl-tests' conventions: size is the
// larger buffer, algbw = size / time, busbw = algbw * 2(n-1)/n for
// all_reduce and * (n-1)/n for all_gather and reduce_scatter. Next to each,
// the bare non-blocking MPI call on the same buffers (MPI_Iallreduce,
// MPI_Iallgather, MPI_Ireduce_scatter_block, then MPI_Wait) and the ratio
// of the two times (issue 27: at most 1.1). Each is timed three times
// (seven up to 64 KiB), interleaved with the other, and keeps its best
// mean: a call of a few microseconds on a shared machine is otherwise
// mostly noise.
//
//===----------------------------------------------------------------------===//

#include "tessera/runtime/Communicator.h"

#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>

using namespace tessera::runtime;

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  Mesh mesh({"x"}, {size});
  Expected<std::unique_ptr<Communicator>> created = createMpiCommunicator(mesh);
  if (!created.ok()) {
    std::fprintf(stderr, "%s\n", created.message().c_str());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  std::unique_ptr<Communicator> comm = created.take();
  const Axes axes = {"x"};
  if (rank == 0)
    std::printf("%-15s %12s %10s %12s %12s %10s %8s\n", "collective",
                "size (B)", "time (us)", "algbw (GB/s)", "busbw (GB/s)",
                "MPI (us)", "ratio");
  double n = size;
  int64_t maxBytes = argc > 1 ? std::atoll(argv[1]) : int64_t(64) << 20;
  for (int64_t bytes = 1024; bytes <= maxBytes; bytes *= 4) {
    int64_t elements = bytes / 4;
    elements -= elements % size;
    OwnedTensor big(DType::F32, {elements});
    OwnedTensor big2(DType::F32, {elements});
    OwnedTensor small(DType::F32, {elements / size});
    struct Case {
      const char *name;
      double factor;
      std::function<Status()> run;
      std::function<int(MPI_Request *)> bare;
    };
    int pieceCount = static_cast<int>(elements / size);
    Case cases[] = {
        {"all_reduce", 2 * (n - 1) / n,
         [&] {
           return comm->allReduce(big.view, big2.view, Reduction::Sum, axes);
         },
         [&](MPI_Request *request) {
           return MPI_Iallreduce(big.view.data, big2.view.data,
                                 static_cast<int>(elements), MPI_FLOAT, MPI_SUM,
                                 MPI_COMM_WORLD, request);
         }},
        {"all_gather", (n - 1) / n,
         [&] { return comm->allGather(small.view, big.view, 0, axes); },
         [&](MPI_Request *request) {
           return MPI_Iallgather(small.view.data, pieceCount, MPI_FLOAT,
                                 big.view.data, pieceCount, MPI_FLOAT,
                                 MPI_COMM_WORLD, request);
         }},
        {"reduce_scatter", (n - 1) / n,
         [&] {
           return comm->reduceScatter(big.view, small.view, 0, Reduction::Sum,
                                      axes);
         },
         [&](MPI_Request *request) {
           return MPI_Ireduce_scatter_block(big.view.data, small.view.data,
                                            pieceCount, MPI_FLOAT, MPI_SUM,
                                            MPI_COMM_WORLD, request);
         }},
    };
    int iterations = bytes <= (64 << 10)   ? 1000
                     : bytes <= (1 << 20)  ? 100
                     : bytes <= (16 << 20) ? 20
                                           : 5;
    // The slowest rank's mean time of `iterations` runs after a warm-up
    // (every run must succeed).
    auto time = [&](const std::function<bool()> &run) {
      double start = 0;
      for (int i = 0; i <= iterations; ++i) {
        if (!run())
          MPI_Abort(MPI_COMM_WORLD, 1);
        if (i == 0) {
          MPI_Barrier(MPI_COMM_WORLD);
          start = MPI_Wtime();
        }
      }
      double seconds = (MPI_Wtime() - start) / iterations, maxSeconds = 0;
      MPI_Reduce(&seconds, &maxSeconds, 1, MPI_DOUBLE, MPI_MAX, 0,
                 MPI_COMM_WORLD);
      return maxSeconds;
    };
    for (Case &c : cases) {
      double seconds = 1e30, bare = 1e30;
      // Small calls, a few microseconds each, get more rounds: one
      // descheduled rank moves a round's mean by more than the 10% the
      // ratio is held to.
      int rounds = bytes <= (64 << 10) ? 7 : 3;
      for (int round = 0; round < rounds; ++round) {
        seconds =
            std::min(seconds, time([&] {
                       Status status = c.run();
                       if (!status.ok())
                         std::fprintf(stderr, "%s\n", status.message().c_str());
                       return status.ok();
                     }));
        bare = std::min(bare, time([&] {
                          MPI_Request request;
                          return c.bare(&request) == MPI_SUCCESS &&
                                 MPI_Wait(&request, MPI_STATUS_IGNORE) ==
                                     MPI_SUCCESS;
                        }));
      }
      if (rank == 0) {
        double algbw = elements * 4.0 / seconds / 1e9;
        std::printf("%-15s %12lld %10.1f %12.3f %12.3f %10.1f %8.2f\n", c.name,
                    static_cast<long long>(elements * 4), seconds * 1e6, algbw,
                    algbw * c.factor, bare * 1e6, seconds / bare);
      }
    }
  }
  comm.reset();
  MPI_Finalize();
  return 0;
}
