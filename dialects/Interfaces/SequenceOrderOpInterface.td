//===- SequenceOrderOpInterface.td - the order of tokens ---*- tablegen -*-===//

#ifndef TESSERA_INTERFACES_SEQUENCEORDEROPINTERFACE
#define TESSERA_INTERFACES_SEQUENCEORDEROPINTERFACE

include "mlir/IR/OpBase.td"

def SequenceOrderOpInterface : OpInterface<"SequenceOrderOpInterface"> {
  let cppNamespace = "::tessera";
  let description = [{
    How an op depends on the order of a sequence's tokens where its factor
    sharding rule does not tell. `--tessera-zigzag-context` stores a
    sequence in zigzag order (2n chunks stored as 0, 2n - 1, 1, 2n - 2,
    ...) so that causal ring attention costs every device of the ring the
    same; it follows the order through the ops' sharding rules, and reads
    this interface for what a rule cannot say:

    - an op whose results depend on the tokens' order (`nn.causal_mask`
      compares places) keeps the sequence in order
      (`dependsOnTokenOrder`);
    - an op whose rule reads operands along the sequence by place, but
      which computes the same on them in any order they share
      (`nn.attention`'s keys and values), names them
      (`getSequenceOperands`, `getSequenceResults`);
    - such an op that compares the tokens' positions (causal attention)
      is balanced when it computes as a ring (`isRing`), and compares the
      positions of the stored chunks once told their order
      (`canStoreZigzag`, `getZigzagOrder`, `setZigzagOrder`).

    An op without the interface depends on the order only as its rule
    says.
  }];

  let methods = [
    InterfaceMethod<[{
        Returns whether the op's results depend on the order of the tokens
        of a sequence it reads beyond what its sharding rule says: it masks
        by place (a causal `nn.softmax`, `nn.causal_mask`) or serves the
        tokens first come (`nn.moe_dispatch` fills the experts' capacity
        in token order). A sequence that reaches it stays in order. False
        by default.
      }],
      "bool", "dependsOnTokenOrder", (ins), "", [{ return false; }]>,
    InterfaceMethod<[{
        Returns the operands that hold one sequence whole, each with the
        dim that holds it, for an op that computes the same on them in any
        order they share although its rule reads some of them by place
        (`nn.attention`'s queries, keys and values in dim 2: the keys and
        values permuted alike give each query the same softmax). None by
        default: the rule tells.
      }],
      "::llvm::SmallVector<::std::pair<unsigned, int64_t>>",
      "getSequenceOperands", (ins), "", [{ return {}; }]>,
    InterfaceMethod<[{
        Returns the results that hold the sequence of
        `getSequenceOperands` in its operands' order, each with its dim
        (`nn.attention`'s result in dim 2). None by default.
      }],
      "::llvm::SmallVector<::std::pair<unsigned, int64_t>>",
      "getSequenceResults", (ins), "", [{ return {}; }]>,
    InterfaceMethod<[{
        Returns whether the op compares the positions of its sequence
        operands' tokens (a causal `nn.attention` hides the keys after each
        query): in another order, it must be told the order. False by
        default.
      }],
      "bool", "comparesPositions", (ins), "", [{ return false; }]>,
    InterfaceMethod<[{
        Returns whether the op computes as a ring over its sequence's
        pieces (`nn.attention` with `ring`): comparing positions, each
        ring step waits for the device with the most work, which the
        zigzag order balances. False by default.
      }],
      "bool", "isRing", (ins), "", [{ return false; }]>,
    InterfaceMethod<[{
        Returns whether the op can compare the positions of a sequence
        stored in zigzag order (`setZigzagOrder`): `nn.attention` can,
        unless it drops probabilities drawn by place or computes a piece
        of the queries placed in the whole. False by default.
      }],
      "bool", "canStoreZigzag", (ins), "", [{ return false; }]>,
    InterfaceMethod<[{
        Returns `n` where the op's sequence is stored in zigzag order of
        `2 n` chunks (`nn.attention`'s `zigzag`); 0, in order, by default.
      }],
      "int64_t", "getZigzagOrder", (ins), "", [{ return 0; }]>,
    InterfaceMethod<[{
        Stores the op's sequence in zigzag order of `2 n` chunks: it then
        compares the positions of the stored chunks. Called only where
        `canStoreZigzag`, so unreachable by default.
      }],
      "void", "setZigzagOrder", (ins "int64_t":$n), "",
      [{ llvm_unreachable("the op cannot store a zigzag order"); }]>,
  ];
}

#endif // TESSERA_INTERFACES_SEQUENCEORDEROPINTERFACE
