//===- NoCuda.cpp - The CUDA entry points of a build without CUDA ---------===//

#include "tessera/runtime/Communicator.h"
#include "tessera/runtime/Device.h"

using namespace tessera::runtime;

static const char *kNoCuda =
    "this build of Tessera has no CUDA backend (configure it where nvcc, "
    "cuBLAS and NCCL are installed, with TESSERA_ENABLE_CUDA=ON)";

bool tessera::runtime::hasCudaBackend() { return false; }
int tessera::runtime::getCudaDeviceCount() { return 0; }

Expected<std::unique_ptr<Device>> tessera::runtime::createCudaDevice(int) {
  return unavailable(kNoCuda);
}

Expected<std::unique_ptr<Communicator>>
tessera::runtime::createNcclCommunicator(const Mesh &, Device &, double,
                                         Rendezvous *) {
  return unavailable(kNoCuda);
}
