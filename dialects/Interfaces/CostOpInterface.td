//===- CostOpInterface.td - FLOP and byte counts of ops ----*- tablegen -*-===//

#ifndef TESSERA_INTERFACES_COSTOPINTERFACE
#define TESSERA_INTERFACES_COSTOPINTERFACE

include "mlir/IR/OpBase.td"

def CostOpInterface : OpInterface<"CostOpInterface"> {
  let cppNamespace = "::tessera";
  let description = [{
    Gives the work an op does, computed from its static shapes: the floating
    point operations and the bytes it reads and writes. The cost model turns
    these into time with a roofline over the machine model; they count the
    global (unsharded) op when the op has global shapes and one device's share
    after partitioning.

    Conventions: a multiply-add is two FLOPs; an elementwise arithmetic
    operation is one FLOP per element, and a transcendental function is counted
    at the number of FLOPs its usual expansion takes (documented at each op).
  }];

  let methods = [
    InterfaceMethod<[{
        Returns the floating point operations the op performs.
      }],
      "int64_t", "getFlops", (ins)>,
    InterfaceMethod<[{
        Returns the bytes the op moves to and from memory: by default every
        operand read once and every result written once.
      }],
      "int64_t", "getBytesAccessed", (ins), [{}], [{
        return ::tessera::getDefaultBytesAccessed($_op);
      }]>,
  ];
}

#endif // TESSERA_INTERFACES_COSTOPINTERFACE
