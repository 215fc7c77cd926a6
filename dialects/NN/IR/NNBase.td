//===- NNBase.td - nn dialect definition and type constraints -*- tablegen -*-===//

#ifndef TESSERA_NN_BASE
#define TESSERA_NN_BASE

include "mlir/IR/OpBase.td"
include "mlir/IR/EnumAttr.td"

def NN_Dialect : Dialect {
  let name = "nn";
  let cppNamespace = "::tessera::nn";
  let summary = "Model operations of neural-network training graphs";
  let description = [{
    The `nn` dialect holds the operations of a model and its training step on
    statically shaped tensors with value semantics and global (unsharded)
    shapes: a
    general dot, elementwise math, reductions, shape manipulation, the layers
    of GPT-style transformers and fused optimizer updates.

    Every op infers its result type where the operands and attributes fix it,
    implements `ShardingRuleOpInterface` (how its dims may be split) and
    `CostOpInterface` (FLOPs and bytes from shapes).

    A function argument that is a trainable parameter carries its name in the
    `nn.param` attribute, e.g. `%w: tensor<16x64xf32> {nn.param = "fc1.w"}`;
    arguments without it are data. A function result that is the gradient of
    a parameter carries `nn.grad_of` with the parameter's name.
  }];
  let hasConstantMaterializer = 1;
  let hasRegionArgAttrVerify = 1;
  let hasRegionResultAttrVerify = 1;
}

class NN_Op<string mnemonic, list<Trait> traits = []>
    : Op<NN_Dialect, mnemonic, traits>;

//===----------------------------------------------------------------------===//
// Type constraints
//===----------------------------------------------------------------------===//

def NN_Float : AnyTypeOf<[F64, F32, F16, BF16]>;
def NN_Index : AnyTypeOf<[I32, I64]>;

// Models have static global shapes: sharding and partitioning divide them.
def NN_FloatTensor : StaticShapeTensorOf<[F64, F32, F16, BF16]>;
def NN_IndexTensor : StaticShapeTensorOf<[I32, I64]>;
def NN_BoolTensor : StaticShapeTensorOf<[I1]>;
def NN_AnyTensor : StaticShapeTensorOf<[F64, F32, F16, BF16, I1, I32, I64]>;
def NN_ScalarIndexTensor : 0DTensorOf<[I32, I64]>;

//===----------------------------------------------------------------------===//
// Enums
//===----------------------------------------------------------------------===//

def NN_ComparePredicate : I32EnumAttr<"ComparePredicate",
    "comparison predicate of nn.compare", [
      I32EnumAttrCase<"eq", 0>, I32EnumAttrCase<"ne", 1>,
      I32EnumAttrCase<"lt", 2>, I32EnumAttrCase<"le", 3>,
      I32EnumAttrCase<"gt", 4>, I32EnumAttrCase<"ge", 5>]> {
  let cppNamespace = "::tessera::nn";
}

def NN_LrSchedule : I32EnumAttr<"LrSchedule",
    "how nn.adamw's learning rate follows the step counter", [
      I32EnumAttrCase<"constant", 0>, I32EnumAttrCase<"linear", 1>,
      I32EnumAttrCase<"cosine", 2>]> {
  let cppNamespace = "::tessera::nn";
}

#endif // TESSERA_NN_BASE
