//===- ShardingRuleOpInterface.cpp - Factor sharding rule interface -------===//

#include "dialects/Interfaces/ShardingRuleOpInterface.h"

// Defined out of line so that PartitionContext's vtable is emitted once,
// here.
tessera::PartitionContext::~PartitionContext() = default;

#include "dialects/Interfaces/ShardingRuleOpInterface.cpp.inc"
