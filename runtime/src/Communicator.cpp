//===- Communicator.cpp - Shared pieces of every communicator -------------===//

#include "tessera/runtime/Communicator.h"

#include <cstring>

using namespace tessera::runtime;

Communicator::~Communicator() = default;
PendingCollective::~PendingCollective() = default;

namespace {
class FinishedCollective final : public PendingCollective {
public:
  explicit FinishedCollective(Status status) : status(std::move(status)) {}
  Status wait() override { return status; }

private:
  Status status;
};
} // namespace

Pending tessera::runtime::makeFinishedCollective(Status status) {
  return std::make_unique<FinishedCollective>(std::move(status));
}

namespace {
/// A tensor seen as [outer, dim, inner] around one dimension.
struct DimView {
  int64_t outer = 1, size = 1, inner = 1;
  DimView(const Tensor &tensor, int64_t dim) {
    for (int64_t d = 0; d < dim; ++d)
      outer *= tensor.shape[d];
    size = tensor.shape[dim];
    for (int64_t d = dim + 1; d < tensor.getRank(); ++d)
      inner *= tensor.shape[d];
  }
};
} // namespace

/// Copies piece `index` of `count` along `dim` of `whole` to or from the
/// contiguous `piece`.
static void copyPiece(const Tensor &whole, const Tensor &piece, int64_t dim,
                      int64_t index, int64_t count, bool intoPiece) {
  DimView view(whole, dim);
  size_t elementBytes = getDTypeBytes(whole.dtype);
  size_t pieceBytes = view.size / count * view.inner * elementBytes;
  auto *wholeBytes = static_cast<uint8_t *>(whole.data);
  auto *pieceBytesPtr = static_cast<uint8_t *>(piece.data);
  for (int64_t o = 0; o < view.outer; ++o) {
    uint8_t *w = wholeBytes + (o * view.size * view.inner) * elementBytes +
                 index * pieceBytes;
    uint8_t *p = pieceBytesPtr + o * pieceBytes;
    if (intoPiece)
      std::memcpy(p, w, pieceBytes);
    else
      std::memcpy(w, p, pieceBytes);
  }
}

void tessera::runtime::slicePiece(const Tensor &in, const Tensor &out,
                                  int64_t dim, int64_t index, int64_t count) {
  copyPiece(in, out, dim, index, count, /*intoPiece=*/true);
}

bool tessera::runtime::isOutermost(const std::vector<int64_t> &shape,
                                   int64_t dim) {
  for (int64_t d = 0; d < dim; ++d)
    if (shape[d] != 1)
      return false;
  return true;
}

void tessera::runtime::placePiece(const Tensor &piece, const Tensor &out,
                                  int64_t dim, int64_t index, int64_t count) {
  copyPiece(out, piece, dim, index, count, /*intoPiece=*/false);
}
