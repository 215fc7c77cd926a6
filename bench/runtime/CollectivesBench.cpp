//===- CollectivesBench.cpp - MPI collective bus bandwidth ----------------===//
//
// Run: mpirun -np 4 --oversubscribe build/bin/tessera-bench-collectives
// Times all_reduce, all_gather and reduce_scatter of the MPI communicator
// over one mesh axis of all ranks, from 1 KiB to 64 MiB, and reports the
// algorithm and bus bandwidth with nccl-tests' conventions: size is the
// larger buffer, algbw = size / time, busbw = algbw * 2(n-1)/n for
// all_reduce and * (n-1)/n for all_gather and reduce_scatter.
//
//===----------------------------------------------------------------------===//

#include "tessera/runtime/Communicator.h"

#include <mpi.h>

#include <cstdio>
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
    std::printf("%-15s %12s %10s %12s %12s\n", "collective", "size (B)",
                "time (us)", "algbw (GB/s)", "busbw (GB/s)");
  double n = size;
  for (int64_t bytes = 1024; bytes <= (int64_t(64) << 20); bytes *= 4) {
    int64_t elements = bytes / 4;
    elements -= elements % size;
    OwnedTensor big(DType::F32, {elements});
    OwnedTensor big2(DType::F32, {elements});
    OwnedTensor small(DType::F32, {elements / size});
    struct Case {
      const char *name;
      double factor;
      std::function<Status()> run;
    };
    Case cases[] = {
        {"all_reduce", 2 * (n - 1) / n,
         [&] {
           return comm->allReduce(big.view, big2.view, Reduction::Sum, axes);
         }},
        {"all_gather", (n - 1) / n,
         [&] { return comm->allGather(small.view, big.view, 0, axes); }},
        {"reduce_scatter", (n - 1) / n,
         [&] {
           return comm->reduceScatter(big.view, small.view, 0, Reduction::Sum,
                                      axes);
         }},
    };
    int iterations = bytes <= (1 << 20) ? 50 : 5;
    for (Case &c : cases) {
      double start = 0;
      // The first run warms up; every run must succeed.
      for (int i = 0; i <= iterations; ++i) {
        if (Status status = c.run(); !status.ok()) {
          std::fprintf(stderr, "%s\n", status.message().c_str());
          MPI_Abort(MPI_COMM_WORLD, 1);
        }
        if (i == 0) {
          MPI_Barrier(MPI_COMM_WORLD);
          start = MPI_Wtime();
        }
      }
      double seconds = (MPI_Wtime() - start) / iterations;
      double maxSeconds = 0;
      MPI_Reduce(&seconds, &maxSeconds, 1, MPI_DOUBLE, MPI_MAX, 0,
                 MPI_COMM_WORLD);
      if (rank == 0) {
        double algbw = elements * 4.0 / maxSeconds / 1e9;
        std::printf("%-15s %12lld %10.1f %12.3f %12.3f\n", c.name,
                    static_cast<long long>(elements * 4), maxSeconds * 1e6,
                    algbw, algbw * c.factor);
      }
    }
  }
  comm.reset();
  MPI_Finalize();
  return 0;
}
