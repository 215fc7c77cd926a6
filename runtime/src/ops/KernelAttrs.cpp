//===- KernelAttrs.cpp - An op's attributes at one launch -----------------===//

#include "tessera/runtime/KernelAttrs.h"

using namespace tessera::runtime;

std::optional<int64_t> KernelAttrs::getInt(const std::string &name) const {
  auto it = ints.find(name);
  if (it == ints.end())
    return std::nullopt;
  return it->second;
}

std::optional<double> KernelAttrs::getFloat(const std::string &name) const {
  auto it = floats.find(name);
  if (it == floats.end())
    return std::nullopt;
  return it->second;
}

const std::vector<int64_t> *
KernelAttrs::getList(const std::string &name) const {
  auto it = lists.find(name);
  return it == lists.end() ? nullptr : &it->second;
}

const std::string *KernelAttrs::getBytes(const std::string &name) const {
  auto it = bytes.find(name);
  return it == bytes.end() ? nullptr : &it->second;
}
