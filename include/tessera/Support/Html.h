//===- Html.h - Text written into HTML and SVG pages ------------*- C++ -*-===//
//
// A page draws names it reads from its inputs (a model's, a machine's, a
// mesh axis's): written as they are, a name holding `<img onerror=...>` would
// run script in the browser of whoever opens the page. Every string a page
// or figure writes passes through escapeHtml first.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_SUPPORT_HTML_H
#define TESSERA_SUPPORT_HTML_H

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/raw_ostream.h"

#include <string>

namespace tessera {

/// `text` as HTML or SVG (XML) text or attribute value: `&`, `<`, `>`, `"`
/// and `'` as character references, so that it can open no tag and close no
/// attribute.
inline std::string escapeHtml(llvm::StringRef text) {
  std::string escaped;
  llvm::raw_string_ostream os(escaped);
  llvm::printHTMLEscaped(text, os);
  return escaped;
}

} // namespace tessera

#endif // TESSERA_SUPPORT_HTML_H
