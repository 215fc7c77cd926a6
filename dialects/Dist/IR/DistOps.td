//===- DistOps.td - dist dialect operations ----------------*- tablegen -*-===//

#ifndef TESSERA_DIST_OPS
#define TESSERA_DIST_OPS

include "dialects/Dist/IR/DistAttrs.td"
include "dialects/Interfaces/GradientOpInterface.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

//===----------------------------------------------------------------------===//
// Mesh and sharding constraint
//===----------------------------------------------------------------------===//

def Dist_MeshOp : Dist_Op<"mesh", [Symbol]> {
  let summary = "a logical device mesh";
  let description = [{
    Declares a mesh of devices with named axes, listed major to minor. The
    device id is the row-major index over the axes (the last axis varies
    fastest); the mesh holds the product of the axis sizes, at most 2^20.
    The microbatch axis `"mb"` that `--tessera-microbatch` adds is time, not
    devices (a step's microbatches run one after another on the same
    devices): it counts no devices and holds at most 2^20 microbatches.

    ```mlir
    dist.mesh @mesh_dp_2_tp_4 ["dp"=2, "tp"=4]
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, StrArrayAttr:$axis_names,
                       DenseI64ArrayAttr:$shape);
  let assemblyFormat = [{
    $sym_name custom<MeshAxes>($axis_names, $shape) attr-dict
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    int64_t getRank() { return getShape().size(); }
    /// The number of devices of the mesh: the product of its axis sizes
    /// but the microbatch axis's.
    int64_t getNumDevices();
    /// The position of an axis, if the mesh has it.
    std::optional<int64_t> getAxisIndex(::llvm::StringRef axis);
    /// The size of an axis, if the mesh has it.
    std::optional<int64_t> getAxisSize(::llvm::StringRef axis);
  }];
}

def Dist_ShardingConstraintOp : Dist_Op<"sharding_constraint", [Pure,
    SameOperandsAndResultType, InferTypeOpInterface,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>,
    DeclareOpInterfaceMethods<GradientOpInterface>]> {
  let summary = "pins the sharding of a value inside a body";
  let description = [{
    Returns its operand, which must have the given sharding at this point;
    propagation treats it as a user annotation and the partitioner reshards
    into it when the producer disagrees.

    Its gradient is the same constraint on the result's gradient (without
    unreduced axes), as JAX transposes `with_sharding_constraint`: a value
    split over the sequence has its gradient split likewise (Megatron-LM's
    sequence parallelism).

    ```mlir
    %h = dist.sharding_constraint %y <@mesh, [{"dp"}, {"tp"} ]> : tensor<8x64xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input, Dist_ShardingAttr:$sharding);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input $sharding attr-dict `:` type($result)";
}

//===----------------------------------------------------------------------===//
// Collectives
//===----------------------------------------------------------------------===//

def Dist_CollectiveOpInterface : OpInterface<"CollectiveOpInterface"> {
  let cppNamespace = "::tessera::dist";
  let description = [{
    A collective over the groups of devices of a mesh that differ only in the
    listed mesh axes. Its operand and result are one device's local tensors.
    Collectives are pure: every device of the SPMD program runs the same
    ones, so one that nobody uses is removed on all devices alike.
  }];
  let methods = [
    InterfaceMethod<"The mesh the collective runs on.",
      "::mlir::FlatSymbolRefAttr", "getMeshAttr", (ins)>,
    InterfaceMethod<"The mesh axes that span a group, major to minor.",
      "::mlir::ArrayAttr", "getMeshAxes", (ins)>,
    InterfaceMethod<[{
        Checks the operand and result types against the group size; emits an
        error at the op on failure.
      }],
      "::llvm::LogicalResult", "verifyGroupShapes", (ins "int64_t":$groupSize)>,
  ];
  let extraClassDeclaration = [{
    /// Looks up the collective's mesh.
    MeshOp getMesh(::mlir::SymbolTableCollection &symbolTable);
    /// The number of devices of one group: the product of the axis sizes.
    int64_t getGroupSize(MeshOp mesh);
    /// Bytes of the local operand, i.e. what one device contributes.
    int64_t getOperandBytes();
    /// Bytes that leave each device in the collective as one message: the
    /// operand for all but all_slice, which moves nothing. The cost model
    /// turns this into time per algorithm (ring, tree) and link.
    int64_t getBytesPerDevice();
  }];
}

def Dist_WaitOp : Dist_Op<"wait", [SameOperandsAndResultType,
    InferTypeOpInterface]> {
  let summary = "completes a collective started on a stream";
  let description = [{
    The operand is the result of a collective that carries `dist.stream`:
    the collective starts where it stands and runs on that stream while the
    ops between it and this wait compute; its result may be read only
    through this op. `--tessera-schedule` places the pairs.

    ```mlir
    %g = dist.all_gather %w on @mesh ["dp"] dim = 0 {dist.stream = 1 : i64}
        : tensor<16x64xf32> -> tensor<64x64xf32>
    %y = nn.dot %x, %h ...    // overlaps the gather
    %w_full = dist.wait %g : tensor<64x64xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
  let hasVerifier = 1;
}

class Dist_CollectiveOp<string mnemonic, list<Trait> traits = []>
    : Dist_Op<mnemonic, !listconcat(traits, [Pure,
        DeclareOpInterfaceMethods<SymbolUserOpInterface>,
        DeclareOpInterfaceMethods<Dist_CollectiveOpInterface,
                                  ["verifyGroupShapes"]>])> {
  let results = (outs AnyRankedTensor:$result);
  let hasVerifier = 1;
  // A collective over a group of one device is its operand.
  let hasFolder = 1;
}

def Dist_AllReduceOp : Dist_CollectiveOp<"all_reduce",
    [SameOperandsAndResultType, InferTypeOpInterface]> {
  let summary = "combines the values of every device of a group";
  let description = [{
    Every device receives the elementwise combination (sum, max, min or
    average) of the group's operands. Completes the partial sums of a split
    contracting dimension.

    ```mlir
    %r = dist.all_reduce %p on @mesh ["tp"] sum : tensor<8x64xf32>
    ```
  }];
  let hasCanonicalizer = 1;
  let arguments = (ins AnyRankedTensor:$input, FlatSymbolRefAttr:$mesh,
                       StrArrayAttr:$mesh_axes, Dist_ReductionKind:$kind);
  let assemblyFormat = [{
    $input `on` $mesh $mesh_axes $kind attr-dict `:` type($result)
  }];
}

def Dist_AllGatherOp : Dist_CollectiveOp<"all_gather"> {
  let summary = "concatenates the group's tensors along one dimension";
  let description = [{
    The result's `dim` is the operand's times the group size: the pieces of
    the devices in group order. Turns a split dimension into a replicated
    one.

    ```mlir
    %g = dist.all_gather %x on @mesh ["tp"] dim = 1
        : tensor<8x16xf32> -> tensor<8x64xf32>
    ```
  }];
  let hasCanonicalizer = 1;
  let arguments = (ins AnyRankedTensor:$input, FlatSymbolRefAttr:$mesh,
                       StrArrayAttr:$mesh_axes, I64Attr:$dim);
  let assemblyFormat = [{
    $input `on` $mesh $mesh_axes `dim` `=` $dim attr-dict `:` type($input)
    `->` type($result)
  }];
}

def Dist_ReduceScatterOp : Dist_CollectiveOp<"reduce_scatter"> {
  let summary = "combines the group's tensors and splits the result";
  let description = [{
    Device `i` of the group receives piece `i` of the combined operands,
    split along `dim` (which the group size must divide).

    ```mlir
    %s = dist.reduce_scatter %p on @mesh ["tp"] dim = 0 sum
        : tensor<8x64xf32> -> tensor<2x64xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input, FlatSymbolRefAttr:$mesh,
                       StrArrayAttr:$mesh_axes, I64Attr:$dim,
                       Dist_ReductionKind:$kind);
  let assemblyFormat = [{
    $input `on` $mesh $mesh_axes `dim` `=` $dim $kind attr-dict `:`
    type($input) `->` type($result)
  }];
}

def Dist_AllToAllOp : Dist_CollectiveOp<"all_to_all"> {
  let summary = "moves a split from one dimension to another";
  let description = [{
    Each device splits its operand along `split_dim` into group-size pieces,
    sends piece `j` to device `j` of the group, and concatenates what it
    receives along `concat_dim` in group order.

    ```mlir
    %t = dist.all_to_all %x on @mesh ["tp"] split_dim = 1 concat_dim = 0
        : tensor<2x64xf32> -> tensor<8x16xf32>
    ```
  }];
  let hasCanonicalizer = 1;
  let arguments = (ins AnyRankedTensor:$input, FlatSymbolRefAttr:$mesh,
                       StrArrayAttr:$mesh_axes, I64Attr:$split_dim,
                       I64Attr:$concat_dim);
  let assemblyFormat = [{
    $input `on` $mesh $mesh_axes `split_dim` `=` $split_dim `concat_dim` `=`
    $concat_dim attr-dict `:` type($input) `->` type($result)
  }];
}

def Dist_AllSliceOp : Dist_CollectiveOp<"all_slice"> {
  let summary = "keeps this device's piece of a replicated tensor";
  let description = [{
    Device `i` of the group keeps piece `i` of its operand split along `dim`.
    No data moves: this is how a replicated value becomes split.

    ```mlir
    %s = dist.all_slice %x on @mesh ["tp"] dim = 1
        : tensor<8x64xf32> -> tensor<8x16xf32>
    ```
  }];
  let hasCanonicalizer = 1;
  let arguments = (ins AnyRankedTensor:$input, FlatSymbolRefAttr:$mesh,
                       StrArrayAttr:$mesh_axes, I64Attr:$dim);
  let assemblyFormat = [{
    $input `on` $mesh $mesh_axes `dim` `=` $dim attr-dict `:` type($input)
    `->` type($result)
  }];
}

def Dist_CollectivePermuteOp : Dist_CollectiveOp<"collective_permute",
    [SameOperandsAndResultType, InferTypeOpInterface]> {
  let summary = "sends each device's tensor to another device of its group";
  let description = [{
    `pairs` lists (source, target) group indices flattened:
    `[0, 1, 1, 2]` sends 0's tensor to 1 and 1's to 2. Each index is a source
    at most once and a target at most once; a device that is no target
    receives zeros.

    ```mlir
    %n = dist.collective_permute %x on @mesh ["pp"] pairs = [0, 1, 1, 0]
        : tensor<8x64xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input, FlatSymbolRefAttr:$mesh,
                       StrArrayAttr:$mesh_axes, DenseI64ArrayAttr:$pairs);
  let assemblyFormat = [{
    $input `on` $mesh $mesh_axes `pairs` `=` $pairs attr-dict `:` type($result)
  }];
}

def Dist_BroadcastOp : Dist_CollectiveOp<"broadcast",
    [SameOperandsAndResultType, InferTypeOpInterface]> {
  let summary = "copies one device's tensor to its whole group";
  let description = [{
    ```mlir
    %b = dist.broadcast %x on @mesh ["dp"] root = 0 : tensor<8x64xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input, FlatSymbolRefAttr:$mesh,
                       StrArrayAttr:$mesh_axes, I64Attr:$root);
  let assemblyFormat = [{
    $input `on` $mesh $mesh_axes `root` `=` $root attr-dict `:` type($result)
  }];
}

//===----------------------------------------------------------------------===//
// Point to point (pipeline stages)
//===----------------------------------------------------------------------===//

def Dist_SendOp : Dist_Op<"send",
    [SameOperandsAndResultType, InferTypeOpInterface,
     DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "sends a tensor to the device at another coordinate of an axis";
  let description = [{
    Sends the operand to the device whose mesh coordinates equal this
    device's except along `mesh_axis`, where it is `peer`; the matching
    `dist.recv` there names this device's coordinate and the same `tag`.
    The result is the operand, in flight: with `dist.stream` the send starts
    here and completes at the `dist.wait` of its result (the operand stays
    unchanged until then); without, it completes where it stands.

    ```mlir
    %s = dist.send %x on @mesh "pp" to 1 tag 4 {dist.stream = 1 : i64}
        : tensor<4x16x64xf32>
    ...
    %done = dist.wait %s : tensor<4x16x64xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input, FlatSymbolRefAttr:$mesh,
                       StrAttr:$mesh_axis, I64Attr:$peer, I64Attr:$tag);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = [{
    $input `on` $mesh $mesh_axis `to` $peer `tag` $tag attr-dict `:` type($result)
  }];
}

def Dist_RecvOp : Dist_Op<"recv", [
     DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "receives a tensor from the device at another coordinate of an axis";
  let description = [{
    The counterpart of `dist.send`: receives the tensor that the device at
    coordinate `peer` of `mesh_axis` (all other coordinates equal) sends
    with the same `tag`.

    ```mlir
    %x = dist.recv on @mesh "pp" from 0 tag 4 : tensor<4x16x64xf32>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$mesh, StrAttr:$mesh_axis,
                       I64Attr:$peer, I64Attr:$tag);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = [{
    `on` $mesh $mesh_axis `from` $peer `tag` $tag attr-dict `:` type($result)
  }];
}

def Dist_AxisIndexOp : Dist_Op<"axis_index", [Pure,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "a device's coordinate along groups of mesh axes";
  let description = [{
    For each group of mesh axes, the device's index in that group (row-major
    over the axes as listed, major to minor; 0 for an empty group). The
    partitioner makes one for each random op it splits: a piece's index
    along each dim of the tensor, from which the op places its piece.

    In a program of pipeline units, where the microbatch axis `"mb"` is time
    rather than devices (the mesh no longer has it), `"mb"` names the
    running microbatch of the unit.

    ```mlir
    // The piece of a [b, s, h] value split by "dp" and "tp" on b and h.
    %i = dist.axis_index @mesh [["dp"], [], ["tp"]] : tensor<3xi64>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$mesh,
      TypedArrayAttrBase<StrArrayAttr, "groups of mesh axes">:$groups);
  let results = (outs 1DTensorOf<[I64]>:$result);
  let assemblyFormat = "$mesh $groups attr-dict `:` type($result)";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The axes of group `index`.
    ::llvm::SmallVector<::llvm::StringRef> getGroup(unsigned index);
  }];
}

def Dist_MicrobatchSliceOp : Dist_Op<"microbatch_slice", [Pure]> {
  let summary = "the running microbatch's rows of a batch";
  let description = [{
    In a pipeline unit, which the runtime runs once per microbatch of its
    schedule (see `dist.schedule`): the rows of `input` that the running
    microbatch reads, the k-th of `microbatches` equal parts along dim 0.
    The plan makes it a view, without a copy.

    ```mlir
    %x = dist.microbatch_slice %batch of 4 : tensor<16x64xi32> -> tensor<4x64xi32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input, I64Attr:$microbatches);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = [{
    $input `of` $microbatches attr-dict `:` type($input) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Dist_AccumulateOp : Dist_Op<"accumulate",
    [SameOperandsAndResultType, InferTypeOpInterface]> {
  let summary = "a pipeline unit's value summed over the step's microbatches";
  let description = [{
    In a pipeline unit (see `dist.microbatch_slice`): the result is the sum
    of the operand over all microbatches of the step, and is read only
    after the schedule, by the ops that follow the units (a gradient
    accumulated for the optimizer). Each run of the unit adds its
    microbatch's operand; the first copies it.

    ```mlir
    %sum = dist.accumulate %grad : tensor<64x64xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

#endif // TESSERA_DIST_OPS
