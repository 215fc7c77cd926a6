//===- RowReductionOpInterface.td - reductions over rows ---*- tablegen -*-===//

#ifndef TESSERA_INTERFACES_ROWREDUCTIONOPINTERFACE
#define TESSERA_INTERFACES_ROWREDUCTIONOPINTERFACE

include "mlir/IR/OpBase.td"

def RowReductionOpInterface : OpInterface<"RowReductionOpInterface"> {
  let cppNamespace = "::tessera";
  let description = [{
    An op that reduces each row of its input along one dim and needs the
    whole row to do it (`nn.softmax`, `nn.log_softmax`, `nn.cross_entropy`:
    the row's max and its sum of exponentials), so that its sharding rule
    keeps that dim whole, but that is made of reductions and elementwise ops
    that compute on pieces of the row. Where propagation left the dim split,
    `--tessera-decompose-split-reductions` has the op build those ops in its
    place, so that the partitioner does not gather the input.

    The op builds its decomposition (nn ops) and the caller lays it out: the
    op tells it, per value built, which layout the value takes
    (`RowLayout`), and the pass turns that into a `dist.sharding`, so that
    the op's dialect need not know the dist dialect.
  }];

  let methods = [
    InterfaceMethod<[{
        Returns the input the op reduces and the dim of it reduced over; none
        where the op cannot compute on pieces of the row (a causal softmax
        masks keys by their global positions).
      }],
      "::std::optional<::tessera::RowReduction>", "getRowReduction", (ins)>,
    InterfaceMethod<[{
        Builds, at the builder's insertion point, the ops the op is made of
        (`s = x - max(x)`, `e = exp(s)` and `sum(e)` along the reduced dim,
        then the op's combination of them; a narrow float input is widened
        to f32 first) and returns the value that replaces the op's result,
        of the result's type. Calls `annotate` on each value right after
        building it, with the layout it takes: `Input` for a value shaped as
        the input, `Row` for one value per row, `Result` for the value
        returned and the one it is cast from. Leaves the op for the caller
        to replace. Only for an op with a row reduction (`getRowReduction`).
      }],
      "::mlir::Value", "decomposeRowReduction",
      (ins "::mlir::OpBuilder &":$builder,
           "::llvm::function_ref<void(::mlir::Value, ::tessera::RowLayout)>":$annotate)>,
  ];
}

#endif // TESSERA_INTERFACES_ROWREDUCTIONOPINTERFACE
