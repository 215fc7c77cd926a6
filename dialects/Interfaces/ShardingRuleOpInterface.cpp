//===- ShardingRuleOpInterface.cpp - Factor sharding rule interface -------===//

#include "dialects/Interfaces/ShardingRuleOpInterface.h"

// Defined out of line so that the contexts' vtables are emitted once, here.
tessera::PartitionContext::~PartitionContext() = default;
tessera::PadContext::~PadContext() = default;

#include "dialects/Interfaces/ShardingRuleOpInterface.cpp.inc"
