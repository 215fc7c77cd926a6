//===- Location.h - Locations as messages print them ------------*- C++ -*-===//

#ifndef TESSERA_SUPPORT_LOCATION_H
#define TESSERA_SUPPORT_LOCATION_H

#include "mlir/IR/Location.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <string>

namespace tessera {

/// `file:line:col`, or the location as it prints.
inline std::string formatLocation(mlir::Location loc) {
  if (auto file = llvm::dyn_cast<mlir::FileLineColLoc>(loc))
    return llvm::formatv("{0}:{1}:{2}", file.getFilename().getValue(),
                         file.getLine(), file.getColumn())
        .str();
  std::string text;
  llvm::raw_string_ostream os(text);
  loc.print(os);
  return text;
}

} // namespace tessera

#endif // TESSERA_SUPPORT_LOCATION_H
