//===- OptimizerOpInterface.h - optimizer update steps ----------*- C++ -*-===//

#ifndef TESSERA_INTERFACES_OPTIMIZEROPINTERFACE_H
#define TESSERA_INTERFACES_OPTIMIZEROPINTERFACE_H

#include "mlir/IR/OpDefinition.h"

#include "dialects/Interfaces/OptimizerOpInterface.h.inc"

#endif // TESSERA_INTERFACES_OPTIMIZEROPINTERFACE_H
