// RUN: not tessera-opt %s --tessera-propagate=mode=eager 2>&1 | FileCheck %s

// Tests that an unknown propagation mode is rejected.
// CHECK: for the --mode option: got 'eager', expected aggressive or conservative
module {}
