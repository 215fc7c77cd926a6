//===- GradientOpInterface.cpp - reverse-mode derivatives -----------------===//

#include "dialects/Interfaces/GradientOpInterface.h"

#include "dialects/Interfaces/GradientOpInterface.cpp.inc"
