//===- CpuDevice.cpp - The CPU as a device: host memory, CPU kernels ------===//

#include "tessera/runtime/Device.h"
#include "tessera/runtime/HostMemory.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

using namespace tessera::runtime;

Device::~Device() = default;

Status Device::runKernel(const std::string &op, const KernelAttrs &attrs,
                         const std::vector<const Tensor *> &inputs,
                         const std::vector<Tensor *> &outputs) {
  Expected<const Kernel *> kernel = findKernel(op);
  if (!kernel.ok())
    return kernel.getStatus();
  return runKernel(**kernel, attrs, inputs, outputs);
}

namespace {
class CpuDevice final : public Device {
public:
  using Device::runKernel;

  std::string getName() const override { return "cpu"; }
  /// Refuses more than this process can get (the machine's memory, or a
  /// ulimit below it): Linux would promise it and kill the process when the
  /// run touches it.
  Status allocate(size_t bytes, void *&data) override {
    HostMemoryLimit limit = getHostMemoryLimit();
    if (bytes > limit.bytes)
      return deviceError(formatBytes(bytes) + " are more than the " +
                         formatBytes(limit.bytes) + " of " + limit.source);
    data = std::calloc(std::max<size_t>(bytes, 1), 1);
    if (!data)
      return deviceError("out of host memory for " + formatBytes(bytes));
    return Status::success();
  }
  void deallocate(void *data) override { std::free(data); }
  Status copyToDevice(void *dst, const void *src, size_t bytes) override {
    if (bytes)
      std::memcpy(dst, src, bytes);
    return Status::success();
  }
  Status copyToHost(void *dst, const void *src, size_t bytes) override {
    return copyToDevice(dst, src, bytes);
  }
  Status copyWithin(void *dst, const void *src, size_t bytes) override {
    return copyToDevice(dst, src, bytes);
  }
  Expected<const Kernel *> findKernel(const std::string &op) override {
    Expected<const CpuKernel *> kernel = findCpuKernel(op);
    if (!kernel.ok())
      return kernel.getStatus();
    return static_cast<const Kernel *>(*kernel);
  }
  Status runKernel(const Kernel &kernel, const KernelAttrs &attrs,
                   const std::vector<const Tensor *> &inputs,
                   const std::vector<Tensor *> &outputs) override {
    // Every kernel this device hands out is a CpuKernel.
    return static_cast<const CpuKernel &>(kernel).run(attrs, inputs, outputs);
  }
  Status synchronize() override { return Status::success(); }
};
} // namespace

std::unique_ptr<Device> tessera::runtime::createCpuDevice() {
  return std::make_unique<CpuDevice>();
}
