//===- Ops.cpp - The runtime's table of nn ops ----------------------------===//

#include "tessera/runtime/Ops.h"

#include <unordered_map>

using namespace tessera::runtime;

namespace {
/// Ops.def as entries, in OpId order.
constexpr OpInfo kOps[] = {
#define TESSERA_OP(Id, Name) {OpId::Id, Name, OpKind::Compute, MapOp(), 0},
#define TESSERA_MOVE_OP(Id, Name) {OpId::Id, Name, OpKind::Move, MapOp(), 0},
#define TESSERA_MAP_OP(Id, Name, Arity)                                        \
  {OpId::Id, Name, OpKind::Map, MapOp::Id, Arity},
#include "tessera/runtime/Ops.def"
};
static_assert(sizeof(kOps) / sizeof(kOps[0]) == kNumOps);
} // namespace

const OpInfo &tessera::runtime::getOpInfo(OpId id) {
  return kOps[static_cast<size_t>(id)];
}

Expected<const OpInfo *> tessera::runtime::findOp(const std::string &name) {
  static const std::unordered_map<std::string, const OpInfo *> byName = [] {
    std::unordered_map<std::string, const OpInfo *> table;
    for (const OpInfo &op : kOps)
      table.emplace(op.name, &op);
    return table;
  }();
  auto it = byName.find(name);
  if (it == byName.end())
    return invalidPlan("unknown kernel '" + name + "'");
  return it->second;
}
