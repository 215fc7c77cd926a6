//===- PlanLoaderFuzzer.cpp - libFuzzer harness of the plan loader --------===//
//
// Any byte string goes through what tessera-run does with a plan file before
// it executes anything: parse, then validate. Neither may crash, hang or
// read out of bounds; a plan that validates must be one the executor can
// index safely. Build and run with scripts/fuzz-plan-loader.sh.
//
// Most inputs come from a mutator that knows the plan's protobuf (Debian
// has no libprotobuf-mutator): it parses the input, changes one to three
// fields anywhere in the message tree through protobuf's reflection (an
// integer to one that breaks arithmetic or to its neighbour, an enum to
// any number, a string to another of the plan's, an element of a repeated
// field removed, changed or copied, a message cleared) and writes it back,
// so that the plans stay well-formed protobuf and reach the validator's
// checks instead of the parser's.
//
//===----------------------------------------------------------------------===//

#include "tessera/runtime/Plan.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>
#include <google/protobuf/stubs/logging.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

/// Every message of `message`'s tree, itself first.
void collectMessages(Message *message, std::vector<Message *> &messages) {
  messages.push_back(message);
  const Reflection *reflection = message->GetReflection();
  std::vector<const FieldDescriptor *> fields;
  reflection->ListFields(*message, &fields);
  for (const FieldDescriptor *field : fields) {
    if (field->cpp_type() != FieldDescriptor::CPPTYPE_MESSAGE)
      continue;
    if (!field->is_repeated()) {
      collectMessages(reflection->MutableMessage(message, field), messages);
      continue;
    }
    for (int i = 0; i < reflection->FieldSize(*message, field); ++i)
      collectMessages(reflection->MutableRepeatedMessage(message, field, i),
                      messages);
  }
}

/// An integer near `value`, or one that breaks sizes and offsets.
int64_t mutateInteger(int64_t value, std::mt19937_64 &random) {
  constexpr int64_t kInteresting[] = {
      0,
      1,
      -1,
      2,
      3,
      7,
      64,
      4096,
      std::numeric_limits<int32_t>::max(),
      int64_t(std::numeric_limits<int32_t>::max()) + 1,
      int64_t(1) << 40,
      int64_t(1) << 62,
      std::numeric_limits<int64_t>::max(),
      std::numeric_limits<int64_t>::min()};
  switch (random() % 4) {
  case 0:
    return static_cast<int64_t>(static_cast<uint64_t>(value) + 1);
  case 1:
    return static_cast<int64_t>(static_cast<uint64_t>(value) - 1);
  case 2:
    return static_cast<int64_t>(static_cast<uint64_t>(value) << 1);
  default:
    return kInteresting[random() % std::size(kInteresting)];
  }
}

/// Sets element `index` of repeated `field` (or the field itself, for
/// index -1) of `message` to a mutation of its value.
void mutateScalar(Message *message, const FieldDescriptor *field, int index,
                  const std::vector<std::string> &strings,
                  std::mt19937_64 &random) {
  const Reflection *reflection = message->GetReflection();
  bool repeated = index >= 0;
  switch (field->cpp_type()) {
  case FieldDescriptor::CPPTYPE_INT64: {
    int64_t value = repeated
                        ? reflection->GetRepeatedInt64(*message, field, index)
                        : reflection->GetInt64(*message, field);
    value = mutateInteger(value, random);
    repeated ? reflection->SetRepeatedInt64(message, field, index, value)
             : reflection->SetInt64(message, field, value);
    return;
  }
  case FieldDescriptor::CPPTYPE_INT32: {
    int32_t value = repeated
                        ? reflection->GetRepeatedInt32(*message, field, index)
                        : reflection->GetInt32(*message, field);
    value = static_cast<int32_t>(mutateInteger(value, random));
    repeated ? reflection->SetRepeatedInt32(message, field, index, value)
             : reflection->SetInt32(message, field, value);
    return;
  }
  case FieldDescriptor::CPPTYPE_UINT64: {
    uint64_t value = static_cast<uint64_t>(mutateInteger(0, random));
    repeated ? reflection->SetRepeatedUInt64(message, field, index, value)
             : reflection->SetUInt64(message, field, value);
    return;
  }
  case FieldDescriptor::CPPTYPE_UINT32: {
    auto value = static_cast<uint32_t>(mutateInteger(0, random));
    repeated ? reflection->SetRepeatedUInt32(message, field, index, value)
             : reflection->SetUInt32(message, field, value);
    return;
  }
  case FieldDescriptor::CPPTYPE_DOUBLE:
  case FieldDescriptor::CPPTYPE_FLOAT: {
    constexpr double kValues[] = {0.0,
                                  -1.0,
                                  1e300,
                                  -1e-300,
                                  std::numeric_limits<double>::infinity(),
                                  std::numeric_limits<double>::quiet_NaN()};
    double value = kValues[random() % std::size(kValues)];
    if (field->cpp_type() == FieldDescriptor::CPPTYPE_FLOAT)
      repeated
          ? reflection->SetRepeatedFloat(message, field, index,
                                         static_cast<float>(value))
          : reflection->SetFloat(message, field, static_cast<float>(value));
    else
      repeated ? reflection->SetRepeatedDouble(message, field, index, value)
               : reflection->SetDouble(message, field, value);
    return;
  }
  case FieldDescriptor::CPPTYPE_BOOL: {
    bool value = repeated ? reflection->GetRepeatedBool(*message, field, index)
                          : reflection->GetBool(*message, field);
    repeated ? reflection->SetRepeatedBool(message, field, index, !value)
             : reflection->SetBool(message, field, !value);
    return;
  }
  case FieldDescriptor::CPPTYPE_ENUM: {
    int value = static_cast<int>(random() % 12) - 1;
    repeated ? reflection->SetRepeatedEnumValue(message, field, index, value)
             : reflection->SetEnumValue(message, field, value);
    return;
  }
  case FieldDescriptor::CPPTYPE_STRING: {
    std::string value =
        strings.empty() ? std::string() : strings[random() % strings.size()];
    repeated ? reflection->SetRepeatedString(message, field, index, value)
             : reflection->SetString(message, field, value);
    return;
  }
  case FieldDescriptor::CPPTYPE_MESSAGE:
    return;
  }
}

/// One change to a random field of `message`.
void mutateMessage(Message *message, const std::vector<std::string> &strings,
                   std::mt19937_64 &random) {
  const google::protobuf::Descriptor *descriptor = message->GetDescriptor();
  const Reflection *reflection = message->GetReflection();
  if (descriptor->field_count() == 0)
    return;
  const FieldDescriptor *field =
      descriptor->field(static_cast<int>(random() % descriptor->field_count()));
  bool isMessage = field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE;
  if (!field->is_repeated()) {
    if (!isMessage)
      mutateScalar(message, field, -1, strings, random);
    else if (reflection->HasField(*message, field))
      reflection->ClearField(message, field);
    else
      reflection->MutableMessage(message, field);
    return;
  }
  int size = reflection->FieldSize(*message, field);
  switch (size == 0 ? 2 : random() % 3) {
  case 0: // One element goes.
    reflection->SwapElements(message, field, static_cast<int>(random() % size),
                             size - 1);
    reflection->RemoveLast(message, field);
    return;
  case 1: // One element changes (a message's own fields change elsewhere).
    if (!isMessage)
      mutateScalar(message, field, static_cast<int>(random() % size), strings,
                   random);
    return;
  default: // One more element: a copy of another, or a new one.
    if (isMessage) {
      Message *added = reflection->AddMessage(message, field);
      if (size > 0)
        added->CopyFrom(reflection->GetRepeatedMessage(
            *message, field, static_cast<int>(random() % size)));
      return;
    }
    switch (field->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT64:
      reflection->AddInt64(message, field, mutateInteger(0, random));
      return;
    case FieldDescriptor::CPPTYPE_INT32:
      reflection->AddInt32(message, field,
                           static_cast<int32_t>(mutateInteger(0, random)));
      return;
    case FieldDescriptor::CPPTYPE_STRING:
      reflection->AddString(
          message, field,
          strings.empty() ? std::string() : strings[random() % strings.size()]);
      return;
    case FieldDescriptor::CPPTYPE_ENUM:
      reflection->AddEnumValue(message, field, static_cast<int>(random() % 12));
      return;
    default:
      return;
    }
  }
}

/// The string values of `message`'s tree (names, axes): what a string field
/// is set to.
void collectStrings(const Message &message, std::vector<std::string> &strings) {
  const Reflection *reflection = message.GetReflection();
  std::vector<const FieldDescriptor *> fields;
  reflection->ListFields(message, &fields);
  for (const FieldDescriptor *field : fields) {
    if (field->cpp_type() == FieldDescriptor::CPPTYPE_STRING &&
        strings.size() < 64) {
      if (field->is_repeated())
        for (int i = 0; i < reflection->FieldSize(message, field); ++i)
          strings.push_back(reflection->GetRepeatedString(message, field, i));
      else
        strings.push_back(reflection->GetString(message, field));
    } else if (field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      if (field->is_repeated())
        for (int i = 0; i < reflection->FieldSize(message, field); ++i)
          collectStrings(reflection->GetRepeatedMessage(message, field, i),
                         strings);
      else
        collectStrings(reflection->GetMessage(message, field), strings);
    }
  }
}

} // namespace

extern "C" size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t maxSize);

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size,
                                          size_t maxSize, unsigned seed) {
  std::mt19937_64 random(seed);
  tessera::plan::Plan plan;
  // A quarter of the mutations are libFuzzer's own, on bytes.
  if (random() % 4 == 0 || !plan.ParseFromArray(data, static_cast<int>(size)))
    return LLVMFuzzerMutate(data, size, maxSize);
  std::vector<std::string> strings;
  collectStrings(plan, strings);
  for (int changes = 1 + static_cast<int>(random() % 3); changes > 0;
       --changes) {
    // Collected again each time: a removal frees the messages below it.
    std::vector<Message *> messages;
    collectMessages(&plan, messages);
    mutateMessage(messages[random() % messages.size()], strings, random);
  }
  std::string written;
  if (!plan.SerializeToString(&written) || written.size() > maxSize)
    return LLVMFuzzerMutate(data, size, maxSize);
  std::memcpy(data, written.data(), written.size());
  return written.size();
}

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  // Protobuf logs every malformed string field; the fuzzer makes millions.
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  tessera::plan::Plan plan;
  if (!plan.ParseFromArray(data, static_cast<int>(size)))
    return 0;
  if (!tessera::runtime::validatePlan(plan).ok())
    return 0;
  // A valid plan: every buffer a program names is in range and its arena
  // view fits; touch them as the executor would.
  for (const auto &program : plan.programs())
    for (const auto &instruction : program.instructions())
      for (int64_t id : instruction.frees())
        (void)program.buffers(id).arena_offset_bytes();
  return 0;
}
