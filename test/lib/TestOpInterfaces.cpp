//===- TestOpInterfaces.cpp - remarks with sharding rules and costs -------===//

#include "test/lib/TestPasses.h"

#include "dialects/Dist/IR/DistOps.h"
#include "dialects/Interfaces/CostOpInterface.h"
#include "dialects/Interfaces/ShardingRuleOpInterface.h"

namespace tessera::test {
#define GEN_PASS_DEF_TESTOPINTERFACESPASS
#include "test/lib/TestPasses.h.inc"
} // namespace tessera::test

using namespace mlir;

namespace {
struct TestOpInterfacesPass
    : tessera::test::impl::TestOpInterfacesPassBase<TestOpInterfacesPass> {
  void runOnOperation() override {
    bool failedRule = false;
    getOperation()->walk([&](Operation *op) {
      if (auto ruleOp = dyn_cast<tessera::ShardingRuleOpInterface>(op)) {
        tessera::ShardingRule rule = ruleOp.getShardingRule();
        if (failed(rule.verify([&] { return op->emitError(); },
                               op->getOperandTypes(), op->getResultTypes()))) {
          failedRule = true;
          return;
        }
        op->emitRemark("sharding rule: ") << rule.str();
      }
      if (auto collective =
              dyn_cast<tessera::dist::CollectiveOpInterface>(op)) {
        SymbolTableCollection symbols;
        tessera::dist::MeshOp mesh = collective.getMesh(symbols);
        InFlightDiagnostic remark = op->emitRemark("collective: axes=");
        remark << collective.getMeshAxes();
        if (mesh)
          remark << " group=" << collective.getGroupSize(mesh);
        remark << " bytes=" << collective.getBytesPerDevice();
      }
      if (auto costOp = dyn_cast<tessera::CostOpInterface>(op))
        op->emitRemark("cost: flops=")
            << costOp.getFlops() << " bytes=" << costOp.getBytesAccessed();
    });
    if (failedRule)
      signalPassFailure();
  }
};
} // namespace
