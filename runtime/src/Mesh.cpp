//===- Mesh.cpp - Ranks, coordinates and groups of a device mesh ----------===//

#include "tessera/runtime/Mesh.h"

#include <algorithm>

using namespace tessera::runtime;

Mesh::Mesh(std::vector<std::string> names, std::vector<int64_t> sizes)
    : names(std::move(names)), sizes(std::move(sizes)) {}

int64_t Mesh::getNumDevices() const {
  int64_t devices = 1;
  for (int64_t size : sizes)
    devices *= size;
  return devices;
}

int64_t Mesh::getAxisIndex(const std::string &axis) const {
  auto it = std::find(names.begin(), names.end(), axis);
  return it == names.end() ? -1 : it - names.begin();
}

std::vector<int64_t> Mesh::getCoordinates(int64_t rank) const {
  std::vector<int64_t> coordinates(sizes.size());
  for (size_t axis = sizes.size(); axis-- > 0;) {
    coordinates[axis] = rank % sizes[axis];
    rank /= sizes[axis];
  }
  return coordinates;
}

int64_t Mesh::getRank(const std::vector<int64_t> &coordinates) const {
  int64_t rank = 0;
  for (size_t axis = 0; axis < sizes.size(); ++axis)
    rank = rank * sizes[axis] + coordinates[axis];
  return rank;
}

Group Mesh::getGroup(int64_t rank, const std::vector<std::string> &axes) const {
  std::vector<int64_t> coordinates = getCoordinates(rank);
  std::vector<bool> inGroup(sizes.size(), false);
  Group group;
  group.index = 0;
  group.size = 1;
  for (const std::string &axis : axes) {
    int64_t index = getAxisIndex(axis);
    inGroup[index] = true;
    group.index = group.index * sizes[index] + coordinates[index];
    group.size *= sizes[index];
  }
  group.color = 0;
  for (size_t axis = 0; axis < sizes.size(); ++axis)
    if (!inGroup[axis])
      group.color = group.color * sizes[axis] + coordinates[axis];
  return group;
}
