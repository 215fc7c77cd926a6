//===- OpIds.h - The ids of the nn ops a plan may launch --------*- C++ -*-===//
//
// The enums that Ops.def defines, alone, for code that nvcc compiles for the
// GPU as well as for the host (the CUDA backend's element math).
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_OPIDS_H
#define TESSERA_RUNTIME_OPIDS_H

#include <cstdint>

namespace tessera::runtime {

/// An nn op of the runtime's table (Ops.def), in the table's order.
enum class OpId : uint8_t {
#define TESSERA_OP(Id, Name) Id,
#include "tessera/runtime/Ops.def"
};

/// The elementwise math ops (Ops.def's TESSERA_MAP_OP), in the table's
/// order: binary, then unary.
enum class MapOp : int32_t {
#define TESSERA_OP(Id, Name)
#define TESSERA_MAP_OP(Id, Name, Arity) Id,
#include "tessera/runtime/Ops.def"
};

} // namespace tessera::runtime

#endif // TESSERA_RUNTIME_OPIDS_H
