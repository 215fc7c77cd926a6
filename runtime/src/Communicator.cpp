//===- Communicator.cpp - Shared pieces of every communicator -------------===//

#include "tessera/runtime/Communicator.h"

#include <cstring>

using namespace tessera::runtime;

Communicator::~Communicator() = default;
PendingCollective::~PendingCollective() = default;

namespace {
class FailedCollective final : public PendingCollective {
public:
  explicit FailedCollective(std::string error) : error(std::move(error)) {}
  std::string wait() override { return error; }

private:
  std::string error;
};
} // namespace

Pending tessera::runtime::makeFailedCollective(std::string error) {
  return std::make_unique<FailedCollective>(std::move(error));
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

void tessera::runtime::slicePiece(const Tensor &in, const Tensor &out,
                                  int64_t dim, int64_t index, int64_t count) {
  DimView view(in, dim);
  size_t elementBytes = getDTypeBytes(in.dtype);
  size_t pieceBytes = view.size / count * view.inner * elementBytes;
  const auto *src = static_cast<const uint8_t *>(in.data);
  auto *dst = static_cast<uint8_t *>(out.data);
  for (int64_t o = 0; o < view.outer; ++o)
    std::memcpy(dst + o * pieceBytes,
                src + (o * view.size * view.inner) * elementBytes +
                    index * pieceBytes,
                pieceBytes);
}

void tessera::runtime::placePiece(const Tensor &piece, const Tensor &out,
                                  int64_t dim, int64_t index, int64_t count) {
  DimView view(out, dim);
  size_t elementBytes = getDTypeBytes(out.dtype);
  size_t pieceBytes = view.size / count * view.inner * elementBytes;
  const auto *src = static_cast<const uint8_t *>(piece.data);
  auto *dst = static_cast<uint8_t *>(out.data);
  for (int64_t o = 0; o < view.outer; ++o)
    std::memcpy(dst + (o * view.size * view.inner) * elementBytes +
                    index * pieceBytes,
                src + o * pieceBytes, pieceBytes);
}
