//===- StripSharding.cpp - The single-device program (--tessera-strip-sharding)
//-===//

#include "tessera/Transforms/Passes.h"

#include "dialects/Dist/IR/DistOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace tessera {
#define GEN_PASS_DEF_STRIPSHARDINGPASS
#include "tessera/Transforms/Passes.h.inc"
} // namespace tessera

#define DEBUG_TYPE "tessera-strip-sharding"

using namespace mlir;

namespace {
struct StripShardingPass
    : tessera::impl::StripShardingPassBase<StripShardingPass> {
  void runOnOperation() override {
    StringRef name = tessera::dist::DistDialect::kShardingAttrName;
    getOperation().walk([&](Operation *op) {
      if (auto function = dyn_cast<func::FuncOp>(op)) {
        for (unsigned i = 0; i < function.getNumArguments(); ++i)
          function.removeArgAttr(i, name);
        for (unsigned i = 0; i < function.getNumResults(); ++i)
          function.removeResultAttr(i, StringAttr::get(&getContext(), name));
        return;
      }
      op->removeAttr(name);
    });
    getOperation().walk([&](tessera::dist::ShardingConstraintOp constraint) {
      constraint.replaceAllUsesWith(constraint.getInput());
      constraint.erase();
    });
    for (auto mesh : llvm::make_early_inc_range(
             getOperation().getOps<tessera::dist::MeshOp>()))
      mesh.erase();
  }
};
} // namespace
