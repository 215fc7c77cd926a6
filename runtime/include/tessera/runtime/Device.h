//===- Device.h - Where a program's buffers live and kernels run -*- C++
//-*-===//
//
// The executor keeps a program's arena on a device and runs its kernels
// there: the CPU (host memory, the CPU kernels) or a CUDA GPU (device
// memory, the CUDA kernels and cuBLASLt on a compute stream). Collectives go
// through a Communicator that works on the same device's memory (MPI for the
// CPU, NCCL for a GPU).
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_DEVICE_H
#define TESSERA_RUNTIME_DEVICE_H

#include "tessera/runtime/Kernels.h"
#include "tessera/runtime/Mesh.h"
#include "tessera/runtime/Ops.h"
#include "tessera/runtime/Status.h"
#include "tessera/runtime/Tensor.h"

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace tessera::runtime {

class Rendezvous;

class Communicator;

/// Work may run asynchronously (on a stream, in order); copyToHost and
/// synchronize wait for it.
class Device {
public:
  virtual ~Device();

  /// "cpu" or "cuda:<ordinal>".
  virtual std::string getName() const = 0;
  /// `bytes` of device memory (zeroed on the CPU, undefined on a GPU),
  /// given back by deallocate (before the device is destroyed).
  virtual Status allocate(size_t bytes, void *&data) = 0;
  virtual void deallocate(void *data) = 0;
  virtual Status copyToDevice(void *dst, const void *src, size_t bytes) = 0;
  virtual Status copyToHost(void *dst, const void *src, size_t bytes) = 0;
  /// A copy between two places of device memory.
  virtual Status copyWithin(void *dst, const void *src, size_t bytes) = 0;
  /// This device's kernel of the nn op `op`, owned by the device's registry
  /// (valid as long as the device); an op it has no kernel for fails with
  /// "unknown kernel '<op>'". The executor finds every kernel of a program
  /// once, when it loads it.
  virtual Expected<const Kernel *> findKernel(const std::string &op) = 0;
  /// findKernel of an op of the table by its id (the executor's own uses:
  /// nn.slice for all_slice, nn.add for accumulations, nn.constant for
  /// axis indices).
  Expected<const Kernel *> findKernel(OpId op) {
    return findKernel(getOpInfo(op).name);
  }
  /// Runs `kernel` (found by this device's findKernel) on device tensors
  /// (see CpuKernel::run).
  virtual Status runKernel(const Kernel &kernel, const KernelAttrs &attrs,
                           const std::vector<const Tensor *> &inputs,
                           const std::vector<Tensor *> &outputs) = 0;
  /// findKernel, then runKernel: for tools and tests that run one op.
  Status runKernel(const std::string &op, const KernelAttrs &attrs,
                   const std::vector<const Tensor *> &inputs,
                   const std::vector<Tensor *> &outputs);
  /// Waits for all work queued so far.
  virtual Status synchronize() = 0;
};

/// The CPU: host memory and the CPU kernels.
std::unique_ptr<Device> createCpuDevice();

/// Whether this build has the CUDA backend, and how many GPUs this process
/// sees (0 without the backend or without a GPU).
bool hasCudaBackend();
int getCudaDeviceCount();

/// The GPU `ordinal` with its compute stream and cuBLASLt handle; fails when
/// the build has no CUDA backend or the GPU is unusable.
Expected<std::unique_ptr<Device>> createCudaDevice(int ordinal);

/// The NCCL communicator of a mesh on `device` (a CUDA device of this
/// process). The unique id travels, and gatherToRoot runs, over
/// `rendezvous` where given (a torchrun-style start), else over MPI, which
/// must be initialized; either way the world's size must be the mesh's.
/// Collectives run on their own stream, ordered after the device's compute
/// stream with events. A collective that does not finish within
/// `timeoutSeconds` aborts the communicator with an error. Fails without
/// the CUDA backend.
Expected<std::unique_ptr<Communicator>>
createNcclCommunicator(const Mesh &mesh, Device &device, double timeoutSeconds,
                       Rendezvous *rendezvous = nullptr);

} // namespace tessera::runtime

#endif // TESSERA_RUNTIME_DEVICE_H
