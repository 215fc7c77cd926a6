// RUN: not tessera-opt %s --tessera-propagate=mode=eager 2>&1 | FileCheck %s

// Tests that an unknown propagation mode is rejected.
// CHECK: error: unknown propagation mode 'eager', expected aggressive or conservative
module {}
