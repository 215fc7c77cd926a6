//===- Json.h - The JSON the runtime reads and writes -----------*- C++ -*-===//
//
// The runtime has no LLVM (llvm::json); what it writes as JSON (safetensors
// headers, traces) quotes its strings here, and what it reads (safetensors
// headers and indices) goes through one reader here, which refuses deep
// nesting and takes time linear in the text, so that a hostile file is
// refused at once with a message, never a crash or a long wait.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_SRC_JSON_H
#define TESSERA_RUNTIME_SRC_JSON_H

#include "tessera/runtime/Status.h"

#include <cstdio>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tessera::runtime {

/// `text` as a JSON string, quotes included.
inline std::string quoteJson(const std::string &text) {
  std::string quoted = "\"";
  for (unsigned char c : text) {
    if (c == '"' || c == '\\') {
      quoted += '\\';
      quoted += c;
    } else if (c < 0x20) {
      char escape[8];
      std::snprintf(escape, sizeof escape, "\\u%04x", c);
      quoted += escape;
    } else {
      quoted += c;
    }
  }
  return quoted + "\"";
}

/// The deepest nesting of arrays and objects that parseJson takes: far
/// more than any file the runtime reads needs, few enough that the
/// recursive reader's stack stays small.
inline constexpr int kMaxJsonDepth = 1000;

/// A JSON value as parseJson reads it.
struct JsonValue {
  enum class Kind { Null, Boolean, Number, String, Array, Object };
  Kind kind = Kind::Null;
  bool boolean = false;
  double number = 0;
  std::string string;
  std::vector<JsonValue> array;
  /// An object's members in the order of the text, each name once.
  std::vector<std::pair<std::string, JsonValue>> members;

  bool isObject() const { return kind == Kind::Object; }
  /// The member named `name` of an object, or null.
  const JsonValue *find(std::string_view name) const;
};

/// Reads `text`: one JSON value (RFC 8259), with only whitespace around it.
/// Fails with a data error "at byte N: <what was expected>" on malformed
/// JSON, on arrays and objects nested deeper than kMaxJsonDepth, and on an
/// object that names a member twice. Takes time linear in the text (and
/// n log n in an object's members).
Expected<JsonValue> parseJson(std::string_view text);

} // namespace tessera::runtime

#endif // TESSERA_RUNTIME_SRC_JSON_H
