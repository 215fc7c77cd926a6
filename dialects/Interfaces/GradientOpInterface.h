//===- GradientOpInterface.h - reverse-mode derivatives ----------*- C++
//-*-===//

#ifndef TESSERA_INTERFACES_GRADIENTOPINTERFACE_H
#define TESSERA_INTERFACES_GRADIENTOPINTERFACE_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpDefinition.h"

#include "dialects/Interfaces/GradientOpInterface.h.inc"

#endif // TESSERA_INTERFACES_GRADIENTOPINTERFACE_H
