//===- Nesting.h - How deep a text nests, before a parser recurses -*- C++
//-*-===//
//
// MLIR's and llvm::json's parsers recurse once per level of nesting: a file
// nested some thousands deep overflows their stack (and the crash handler
// can then hang in malloc). Inputs are checked against a limit first.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_SUPPORT_NESTING_H
#define TESSERA_SUPPORT_NESTING_H

#include "llvm/ADT/StringRef.h"

#include <cstddef>
#include <optional>

namespace tessera {

/// Nesting no input Tessera reads comes near (models nest tens deep).
inline constexpr unsigned kMaxNestingDepth = 1000;

/// The offset in `text` of the first bracket ( `(`, `[`, `{` or `<` ) that
/// opens level `limit + 1`, outside string literals ("..." with backslash
/// escapes) and `//` comments; none where the text nests no deeper. A `>`
/// after `-` (an MLIR arrow) closes nothing.
inline std::optional<size_t> findNestingOverflow(llvm::StringRef text,
                                                 unsigned limit) {
  unsigned depth = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '"') {
      for (++i; i < text.size() && text[i] != '"'; ++i)
        if (text[i] == '\\')
          ++i;
    } else if (c == '/' && text.substr(i).starts_with("//")) {
      i = text.find('\n', i);
      if (i == llvm::StringRef::npos)
        return std::nullopt;
    } else if (c == '(' || c == '[' || c == '{' || c == '<') {
      if (++depth > limit)
        return i;
    } else if ((c == ')' || c == ']' || c == '}' ||
                (c == '>' && (i == 0 || text[i - 1] != '-'))) &&
               depth > 0) {
      --depth;
    }
  }
  return std::nullopt;
}

} // namespace tessera

#endif // TESSERA_SUPPORT_NESTING_H
