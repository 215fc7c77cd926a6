// RUN: not tessera-opt %s --tessera-train-step=optimizer=lamb 2>&1 | FileCheck %s

// Tests that an unknown optimizer is rejected.
// CHECK: error: unknown optimizer 'lamb', expected adamw or sgd
module {}
