//===- CpuDevice.cpp - The CPU as a device: host memory, CPU kernels ------===//

#include "tessera/runtime/Device.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

using namespace tessera::runtime;

Device::~Device() = default;

namespace {
class CpuDevice final : public Device {
public:
  std::string getName() const override { return "cpu"; }
  std::string allocate(size_t bytes, void *&data) override {
    data = std::calloc(std::max<size_t>(bytes, 1), 1);
    return data ? ""
                : "out of host memory for " + std::to_string(bytes) + " bytes";
  }
  void deallocate(void *data) override { std::free(data); }
  std::string copyToDevice(void *dst, const void *src, size_t bytes) override {
    if (bytes)
      std::memcpy(dst, src, bytes);
    return "";
  }
  std::string copyToHost(void *dst, const void *src, size_t bytes) override {
    return copyToDevice(dst, src, bytes);
  }
  std::string copyWithin(void *dst, const void *src, size_t bytes) override {
    return copyToDevice(dst, src, bytes);
  }
  std::string runKernel(const std::string &op, const KernelAttrs &attrs,
                        const std::vector<const Tensor *> &inputs,
                        const std::vector<Tensor *> &outputs) override {
    return runCpuKernel(op, attrs, inputs, outputs);
  }
  std::string synchronize() override { return ""; }
};
} // namespace

std::unique_ptr<Device> tessera::runtime::createCpuDevice() {
  return std::make_unique<CpuDevice>();
}
