//===- Machine.cpp - The machine a pass option names ----------------------===//

#include "tessera/Transforms/Passes.h"

using namespace mlir;
using namespace tessera;

FailureOr<std::optional<MachineModel>>
tessera::loadOptionalMachine(Operation *op, StringRef name) {
  if (name.empty())
    return std::optional<MachineModel>();
  llvm::Expected<MachineModel> loaded =
      loadMachineModel(name, getMachinesDir());
  if (!loaded)
    return op->emitError("cannot load machine '")
           << name << "': " << llvm::toString(loaded.takeError());
  return std::optional<MachineModel>(std::move(*loaded));
}
