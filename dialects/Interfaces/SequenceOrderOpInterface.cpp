//===- SequenceOrderOpInterface.cpp - the order of tokens -----------------===//

#include "dialects/Interfaces/SequenceOrderOpInterface.h"

#include "dialects/Interfaces/SequenceOrderOpInterface.cpp.inc"
