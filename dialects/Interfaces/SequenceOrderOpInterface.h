//===- SequenceOrderOpInterface.h - the order of tokens ---------*- C++ -*-===//

#ifndef TESSERA_INTERFACES_SEQUENCEORDEROPINTERFACE_H
#define TESSERA_INTERFACES_SEQUENCEORDEROPINTERFACE_H

#include "mlir/IR/OpDefinition.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/ErrorHandling.h"

#include <utility>

#include "dialects/Interfaces/SequenceOrderOpInterface.h.inc"

#endif // TESSERA_INTERFACES_SEQUENCEORDEROPINTERFACE_H
