//===- OptimizerOpInterface.cpp - optimizer update steps ------------------===//

#include "dialects/Interfaces/OptimizerOpInterface.h"

#include "dialects/Interfaces/OptimizerOpInterface.cpp.inc"
