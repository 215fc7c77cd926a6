//===- TestPasses.h - passes that expose analyses to lit --------*- C++ -*-===//

#ifndef TESSERA_TEST_TESTPASSES_H
#define TESSERA_TEST_TESTPASSES_H

#include "mlir/Pass/Pass.h"

namespace tessera::test {

#define GEN_PASS_DECL
#define GEN_PASS_REGISTRATION
#include "test/lib/TestPasses.h.inc"

} // namespace tessera::test

#endif // TESSERA_TEST_TESTPASSES_H
