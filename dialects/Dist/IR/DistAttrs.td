//===- DistAttrs.td - dist dialect attributes --------------*- tablegen -*-===//

#ifndef TESSERA_DIST_ATTRS
#define TESSERA_DIST_ATTRS

include "dialects/Dist/IR/DistBase.td"

def Dist_DimShardingAttr : Dist_Attr<"DimSharding", "dim_sharding"> {
  let summary = "how one tensor dimension is split over mesh axes";
  let description = [{
    The mesh axes that split one dimension, major to minor: `{}` (not split),
    `{"dp"}`, `{"dp", "tp"}`. A trailing `?` marks the dimension open, so
    propagation may add axes to it (`{?}`, `{"dp", ?}`); without it the
    dimension is closed. An optional priority `pN` follows (`{"dp"}p0`):
    propagation applies lower numbers first. It appears inside
    `#dist.sharding`; alone it is written `#dist.dim_sharding<{"dp", ?}p1>`.
  }];
  let parameters = (ins
    ArrayRefParameter<"::mlir::StringAttr", "mesh axes, major to minor">:$axes,
    "bool":$isOpen,
    OptionalParameter<"std::optional<int64_t>">:$priority);
  let hasCustomAssemblyFormat = 1;
  let extraClassDeclaration = [{
    bool isClosed() const { return !getIsOpen(); }
  }];
}

def Dist_ShardingAttr : Dist_Attr<"Sharding", "sharding"> {
  let summary = "how a tensor is split over a device mesh";
  let description = [{
    One entry per tensor dimension (see `#dist.dim_sharding`), then optional
    fields: `replicated={"x"}` names axes along which the value is explicitly
    replicated (propagation does not split it over them), and
    `unreduced={"tp"}` names axes along which each device holds a partial sum.
    `flat={"dp"}` stores the piece the dims give a device flat, as FSDP's
    FlatParameter does: its elements in row-major order, padded with zeros
    to a multiple of the flat axes' group size and split evenly over them,
    so the device holds a 1-d tensor of `ceil(elements / group)` elements.
    ZeRO stores a parameter so when no dim divides evenly; only pointwise
    ops and resharding read such a value. An axis appears at most once in a
    sharding.

    ```mlir
    #dist.sharding<@mesh, [{"dp"}, {"tp", ?}p1], replicated={"pp"}>
    #dist.sharding<@mesh, [{?}, {"tp", ?}p0], flat={"dp"}>
    ```
  }];
  let parameters = (ins
    "::mlir::FlatSymbolRefAttr":$mesh,
    ArrayRefParameter<"DimShardingAttr", "per-dimension shardings">:$dims,
    OptionalArrayRefParameter<"::mlir::StringAttr">:$replicatedAxes,
    OptionalArrayRefParameter<"::mlir::StringAttr">:$unreducedAxes,
    OptionalArrayRefParameter<"::mlir::StringAttr">:$flatAxes);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let builders = [
    AttrBuilderWithInferredContext<(ins "::mlir::FlatSymbolRefAttr":$mesh,
        "::llvm::ArrayRef<DimShardingAttr>":$dims), [{
      return $_get(mesh.getContext(), mesh, dims,
                   ::llvm::ArrayRef<::mlir::StringAttr>(),
                   ::llvm::ArrayRef<::mlir::StringAttr>(),
                   ::llvm::ArrayRef<::mlir::StringAttr>());
    }]>
  ];
  let extraClassDeclaration = [{
    int64_t getRank() const { return getDims().size(); }
    /// Every axis the sharding names, in dims, replicated, unreduced and
    /// flat.
    ::llvm::SmallVector<::mlir::StringAttr> getAllAxes() const;
  }];
}

#endif // TESSERA_DIST_ATTRS
