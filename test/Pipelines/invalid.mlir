// RUN: not tessera-opt %s --tessera-compile-pipeline="zero=1" 2>&1 | FileCheck %s --check-prefix=ZERO
// RUN: not tessera-opt %s --tessera-compile-pipeline="pp=2" 2>&1 | FileCheck %s --check-prefix=PP
// RUN: not tessera-opt %s --tessera-compile-pipeline="schedule=zigzag" 2>&1 | FileCheck %s --check-prefix=SCHEDULE
// RUN: not tessera-opt %s --tessera-compile-pipeline="reshard-after-forward=0" 2>&1 | FileCheck %s --check-prefix=RESHARD
// RUN: not tessera-opt %s --tessera-compile-pipeline="lr=fast" 2>&1 | FileCheck %s --check-prefix=LR
// RUN: not tessera-opt %s --tessera-compile-pipeline="initial-loss-scale=inf" 2>&1 | FileCheck %s --check-prefix=INFINITE
// RUN: not tessera-opt %s --tessera-compile-pipeline="recompute=full" 2>&1 | FileCheck %s --check-prefix=RECOMPUTE

// Tests that the compile pipeline refuses options another option needs
// (ZeRO shards AdamW's state; a pipeline pipelines a train step) and values
// its options do not take, naming the choices.
// ZERO: error: --zero needs --train adamw (the optimizer state it shards)
// PP: error: --pp and --microbatches pipeline a train step: give --train
// SCHEDULE: for the --schedule option: got 'zigzag', expected gpipe, 1f1b, interleaved, zb-h1, 2bw or pipedream
// RESHARD: for the --reshard-after-forward option: '0' is not supported
// LR: for the --lr option: expects a number, got 'fast'
// INFINITE: for the --initial-loss-scale option: expects a finite number, got 'inf'
// RECOMPUTE: error: --recompute recomputes a train step's activations: give --train
module {}
