//===- EnumNames.h - One name table per enum option -------------*- C++ -*-===//
//
// An option's choices are named once, in a table next to the enum; parsing
// (llvm::cl and pass options), printing (pass pipelines, reports, JSON) and
// --help all read that table.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_SUPPORT_ENUMNAMES_H
#define TESSERA_SUPPORT_ENUMNAMES_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/ErrorHandling.h"

#include <optional>
#include <string>

namespace tessera {

/// One choice of an enum option: the name users write, and its help text.
template <typename T> struct EnumName {
  llvm::StringRef name;
  T value;
  llvm::StringRef description;
};

/// The name of `value` in `names` (a table of EnumName<T>).
template <typename Names, typename T>
llvm::StringRef getEnumName(const Names &names, T value) {
  for (const EnumName<T> &entry : names)
    if (entry.value == value)
      return entry.name;
  llvm_unreachable("an enum value without a name");
}

/// The value named `name` in `names`, if any.
template <typename T, size_t N>
std::optional<T> parseEnumName(const EnumName<T> (&names)[N],
                               llvm::StringRef name) {
  for (const EnumName<T> &entry : names)
    if (entry.name == name)
      return entry.value;
  return std::nullopt;
}

/// "a, b or c": the names, for messages.
template <typename T, size_t N>
std::string joinEnumNames(const EnumName<T> (&names)[N]) {
  std::string joined;
  for (size_t i = 0; i < N; ++i) {
    if (i)
      joined += i + 1 == N ? " or " : ", ";
    joined += names[i].name.str();
  }
  return joined;
}

/// An llvm::cl modifier (like cl::values) that gives an enum option the
/// choices of a name table: `cl::opt<T> x("x", enumValues(kTNames))`, or in a
/// TableGen pass option's extra flags.
template <typename T> struct EnumValues {
  llvm::ArrayRef<EnumName<T>> names;
  template <typename Opt> void apply(Opt &option) const {
    for (const EnumName<T> &entry : names)
      option.getParser().addLiteralOption(entry.name, entry.value,
                                          entry.description);
  }
};
template <typename T, size_t N>
EnumValues<T> enumValues(const EnumName<T> (&names)[N]) {
  return {names};
}

/// llvm::cl's parser of an enum option (as cl::parser<T>), whose error
/// names the choices: "got 'zigzag', expected gpipe, 1f1b or interleaved".
/// Specialize cl::parser<T> with TESSERA_ENUM_OPTION_PARSER(T) right after
/// the enum, before any option of it.
template <typename T> class EnumOptionParser : public llvm::cl::generic_parser_base {
protected:
  class OptionInfo : public GenericOptionInfo {
  public:
    OptionInfo(llvm::StringRef name, T value, llvm::StringRef help)
        : GenericOptionInfo(name, help), V(value) {}
    llvm::cl::OptionValue<T> V;
  };
  llvm::SmallVector<OptionInfo, 8> Values;

public:
  EnumOptionParser(llvm::cl::Option &option) : generic_parser_base(option) {}
  using parser_data_type = T;

  unsigned getNumOptions() const override { return Values.size(); }
  llvm::StringRef getOption(unsigned n) const override {
    return Values[n].Name;
  }
  llvm::StringRef getDescription(unsigned n) const override {
    return Values[n].HelpStr;
  }
  const llvm::cl::GenericOptionValue &getOptionValue(unsigned n) const override {
    return Values[n].V;
  }

  bool parse(llvm::cl::Option &option, llvm::StringRef argName,
             llvm::StringRef arg, T &value) {
    llvm::StringRef name = Owner.hasArgStr() ? arg : argName;
    std::string expected;
    for (size_t i = 0; i < Values.size(); ++i) {
      if (Values[i].Name == name) {
        value = Values[i].V.getValue();
        return false;
      }
      if (i)
        expected += i + 1 == Values.size() ? " or " : ", ";
      expected += Values[i].Name;
    }
    return option.error("got '" + name + "', expected " + expected);
  }

  template <typename U>
  void addLiteralOption(llvm::StringRef name, const U &value,
                        llvm::StringRef help) {
    Values.push_back(OptionInfo(name, static_cast<T>(value), help));
    AddLiteralOption(Owner, name);
  }
  void removeLiteralOption(llvm::StringRef name) {
    Values.erase(Values.begin() + findOption(name));
  }
};

} // namespace tessera

#define TESSERA_ENUM_OPTION_PARSER(T)                                          \
  template <>                                                                  \
  class llvm::cl::parser<T> : public ::tessera::EnumOptionParser<T> {          \
  public:                                                                      \
    using EnumOptionParser::EnumOptionParser;                                  \
  }

#endif // TESSERA_SUPPORT_ENUMNAMES_H
