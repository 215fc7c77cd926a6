//===- DistBase.td - dist dialect definition ---------------*- tablegen -*-===//

#ifndef TESSERA_DIST_BASE
#define TESSERA_DIST_BASE

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

def Dist_Dialect : Dialect {
  let name = "dist";
  let cppNamespace = "::tessera::dist";
  let summary = "Device meshes, shardings and collectives";
  let description = [{
    The `dist` dialect says how a program is spread over devices: the logical
    device meshes (`dist.mesh`), the sharding of every tensor over a mesh
    (`#dist.sharding`), sharding constraints inside bodies, and the
    collectives that the partitioner inserts between per-device programs.

    ```mlir
    dist.mesh @mesh ["dp"=2, "tp"=4]

    func.func @mlp(%x: tensor<8x16xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {} ]>},
                   %w: tensor<16x64xf32> {dist.sharding = #dist.sharding<@mesh, [{}, {"tp"} ]>})
        -> (tensor<8x64xf32> {dist.sharding = #dist.sharding<@mesh, [{"dp"}, {"tp"} ]>})
    ```

    A device's id is its row-major index over the mesh axes (the last axis
    varies fastest). A collective runs within groups of devices that differ
    only in the listed axes; inside a group, a device's index is row-major
    over those axes in the order they are listed.
  }];
  let useDefaultAttributePrinterParser = 1;
  let hasOperationAttrVerify = 1;
  let hasRegionArgAttrVerify = 1;
  let hasRegionResultAttrVerify = 1;
  let extraClassDeclaration = [{
    /// The attribute holding a value's sharding on function arguments and
    /// results, and (one per result) on ops.
    static constexpr ::llvm::StringLiteral kShardingAttrName = "dist.sharding";
    /// On a collective: it is started on this stream (1 and up; 0 is the
    /// compute stream) and completes at the `dist.wait` of its result (a
    /// send of a pipeline unit without one: where `dist.schedule` says).
    static constexpr ::llvm::StringLiteral kStreamAttrName = "dist.stream";
    /// On an op of a model: the pipeline stage it starts (a cut point); the
    /// ops after it belong to that stage until the next annotated op.
    static constexpr ::llvm::StringLiteral kStageAttrName = "dist.stage";
    /// On a function: it is the program of the devices at this coordinate of
    /// the pipeline axis (`--tessera-pipeline` makes one per coordinate).
    static constexpr ::llvm::StringLiteral kPipelineRankAttrName =
        "dist.pipeline_rank";
    /// On an argument or result of a pipeline stage's function: its index in
    /// the function the stages were cut from, so that a run feeds and reads
    /// every stage consistently with the unpipelined program.
    static constexpr ::llvm::StringLiteral kSourceIndexAttrName =
        "dist.source_index";
    /// On a data argument of a pipeline stage's function: dim 0 holds this
    /// many microbatches major ("mb" first on its batch, before "ep"), so
    /// that a rank's piece is its piece of each microbatch, one after
    /// another (plan::Argument's microbatches_major).
    static constexpr ::llvm::StringLiteral kMicrobatchesMajorAttrName =
        "dist.microbatches_major";
    /// On a function: `--tessera-partition` made it the program of one
    /// device (its types are the local pieces). The export needs it on a
    /// function whose shardings name a mesh; passes that take the global
    /// program (microbatching) refuse it.
    static constexpr ::llvm::StringLiteral kPartitionedAttrName =
        "dist.partitioned";
    /// On an argument or result of a partitioned function that is stored
    /// flat (`flat=` in its sharding): its global shape, which the 1-d piece
    /// no longer shows.
    static constexpr ::llvm::StringLiteral kGlobalShapeAttrName =
        "dist.global_shape";
    /// On an argument or result of a function whose dims `--tessera-pad`
    /// padded: its shape before padding. The runtime pads the argument's
    /// pieces with zeros and cuts the result's padding off.
    static constexpr ::llvm::StringLiteral kUnpaddedShapeAttrName =
        "dist.unpadded_shape";
    /// On an integer argument that indexes a dim `--tessera-pad` padded
    /// (token ids of a grown vocab): the bound of its values before
    /// padding.
    static constexpr ::llvm::StringLiteral kIndexBoundAttrName =
        "dist.index_bound";
    /// On an argument or result of a train step that is a unit's flat
    /// buffer (the ZeRO pass's packing, FSDP's FlatParameter): its members
    /// in order, each `{name, shape, source}`, their elements one after
    /// another. `source` is the member's index in the step as written
    /// (which `dist.source_index` gives the others).
    static constexpr ::llvm::StringLiteral kMembersAttrName = "dist.members";
    /// On the first op of a unit of a pipeline schedule: its name, e.g.
    /// "F1" (the forward of stage 1), "B1", "W1" or "update" (the ops after
    /// the schedule); the ops after it belong to it until the next one.
    static constexpr ::llvm::StringLiteral kUnitAttrName = "dist.unit";
    /// On a pipeline stage's function: its schedule, a dictionary of
    ///  - `microbatches`;
    ///  - `units`: the names of its units, in program order, and
    ///    `unit_stages`, the stage of each;
    ///  - `entries`: triples (unit, microbatch, slot) in the order they run;
    ///    the slot is one per microbatch its stage holds, from its first
    ///    entry to its last (or the wait of a send whose value a later unit
    ///    reads), for the values whose lifetimes do not keep the microbatch
    ///    order (the export gives the others rings of their own);
    ///  - `send_waits`: triples (entry, send, microbatch): after that entry
    ///    the run of that send (numbered in program order among the units'
    ///    sends) on that microbatch is waited for.
    /// The ops before the first unit run once before the schedule, those
    /// from "update" on once after it.
    static constexpr ::llvm::StringLiteral kScheduleAttrName = "dist.schedule";
    /// The mesh axis that microbatching adds: microbatches as a mesh axis of
    /// time, which the pipeline pass turns into its schedule's runs.
    static constexpr ::llvm::StringLiteral kMicrobatchAxisName = "mb";

  private:
    void registerAttributes();
  public:
  }];
}

class Dist_Op<string mnemonic, list<Trait> traits = []>
    : Op<Dist_Dialect, mnemonic, traits>;

class Dist_Attr<string name, string attrMnemonic, list<Trait> traits = []>
    : AttrDef<Dist_Dialect, name, traits> {
  let mnemonic = attrMnemonic;
}

def Dist_ReductionKind : I32EnumAttr<"ReductionKind",
    "how a collective combines the values of a group", [
      I32EnumAttrCase<"sum", 0>, I32EnumAttrCase<"max", 1>,
      I32EnumAttrCase<"min", 2>, I32EnumAttrCase<"avg", 3>]> {
  let cppNamespace = "::tessera::dist";
}

#endif // TESSERA_DIST_BASE
