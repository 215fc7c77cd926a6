//===- ShardingRuleOpInterface.cpp - Factor sharding rule interface -------===//

#include "dialects/Interfaces/ShardingRuleOpInterface.h"

#include "dialects/Interfaces/ShardingRuleOpInterface.cpp.inc"
