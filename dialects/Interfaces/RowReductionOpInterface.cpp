//===- RowReductionOpInterface.cpp - Reductions over rows -----------------===//

#include "dialects/Interfaces/RowReductionOpInterface.h"

#include "dialects/Interfaces/RowReductionOpInterface.cpp.inc"
