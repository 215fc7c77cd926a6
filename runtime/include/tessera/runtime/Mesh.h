//===- Mesh.h - Ranks, coordinates and groups of a device mesh ---*- C++
//-*-===//

#ifndef TESSERA_RUNTIME_MESH_H
#define TESSERA_RUNTIME_MESH_H

#include <cstdint>
#include <string>
#include <vector>

namespace tessera::runtime {

/// The group of ranks a collective over some mesh axes runs in, seen from
/// one rank: ranks that differ only in those axes.
struct Group {
  /// Identifies the group among the groups over the same axes.
  int64_t color = 0;
  /// This rank's index in the group: row-major over the axes as listed.
  int64_t index = 0;
  int64_t size = 1;
};

/// A device mesh: axes major to minor, rank = row-major index.
class Mesh {
public:
  Mesh() = default;
  Mesh(std::vector<std::string> names, std::vector<int64_t> sizes);

  int64_t getNumDevices() const;
  const std::vector<std::string> &getAxisNames() const { return names; }
  const std::vector<int64_t> &getAxisSizes() const { return sizes; }
  /// -1 when the mesh has no such axis.
  int64_t getAxisIndex(const std::string &axis) const;
  /// The rank's coordinate along each axis.
  std::vector<int64_t> getCoordinates(int64_t rank) const;
  /// The rank at `coordinates` (one per axis); its inverse.
  int64_t getRank(const std::vector<int64_t> &coordinates) const;
  /// The group of `rank` over `axes` (which must be mesh axes).
  Group getGroup(int64_t rank, const std::vector<std::string> &axes) const;

private:
  std::vector<std::string> names;
  std::vector<int64_t> sizes;
};

} // namespace tessera::runtime

#endif // TESSERA_RUNTIME_MESH_H
