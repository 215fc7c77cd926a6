//===- Json.h - The JSON the runtime writes ---------------------*- C++ -*-===//
//
// The runtime has no LLVM (llvm::json); what it writes as JSON (safetensors
// headers, traces) quotes its strings here.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_SRC_JSON_H
#define TESSERA_RUNTIME_SRC_JSON_H

#include <cstdio>
#include <string>

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

} // namespace tessera::runtime

#endif // TESSERA_RUNTIME_SRC_JSON_H
