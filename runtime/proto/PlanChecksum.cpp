//===- PlanChecksum.cpp - A plan's checksum -------------------------------===//

#include "PlanChecksum.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/text_format.h>

#include <xxhash.h>

#include <string>

uint64_t tessera::plan::computeChecksum(Plan &plan) {
  uint64_t stored = plan.checksum();
  plan.clear_checksum();
  std::string bytes = serializePlan(plan);
  plan.set_checksum(stored);
  return XXH3_64bits(bytes.data(), bytes.size());
}

std::string tessera::plan::serializePlan(const Plan &plan, bool text) {
  std::string bytes;
  if (text)
    return google::protobuf::TextFormat::PrintToString(plan, &bytes)
               ? bytes
               : std::string();
  google::protobuf::io::StringOutputStream stream(&bytes);
  google::protobuf::io::CodedOutputStream coded(&stream);
  coded.SetSerializationDeterministic(true);
  bool written = plan.SerializeToCodedStream(&coded);
  coded.Trim();
  return written ? bytes : std::string();
}
