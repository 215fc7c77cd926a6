//===- ShardingRuleOpInterface.h - Factor sharding rule interface -*- C++
//-*-===//

#ifndef TESSERA_INTERFACES_SHARDINGRULEOPINTERFACE_H
#define TESSERA_INTERFACES_SHARDINGRULEOPINTERFACE_H

#include "dialects/Interfaces/PadContext.h"
#include "dialects/Interfaces/PartitionContext.h"
#include "dialects/Interfaces/ShardingRule.h"
#include "mlir/IR/OpDefinition.h"

#include <optional>
#include <utility>

#include "dialects/Interfaces/ShardingRuleOpInterface.h.inc"

#endif // TESSERA_INTERFACES_SHARDINGRULEOPINTERFACE_H
