//===- MpiCommunicator.cpp - Collectives over MPI sub-communicators -------===//
//
// One MPI communicator per set of mesh axes (MPI_Comm_split of the world by
// the coordinates outside the axes); dim-wise collectives pack their pieces
// contiguously around the MPI call.
//
//===----------------------------------------------------------------------===//

#include "tessera/runtime/Communicator.h"

#include <mpi.h>

#include <algorithm>
#include <cstring>
#include <map>

using namespace tessera::runtime;

namespace {

class MpiCommunicator final : public Communicator {
public:
  MpiCommunicator(Mesh mesh, int rank, int size)
      : mesh(std::move(mesh)), rank(rank), size(size) {}
  ~MpiCommunicator() override {
    for (auto &[axes, comm] : comms)
      MPI_Comm_free(&comm);
  }

  int64_t getRank() const override { return rank; }
  int64_t getNumRanks() const override { return size; }

  std::string allReduce(const Tensor &in, const Tensor &out,
                        Reduction reduction, const Axes &axes) override;
  std::string allGather(const Tensor &in, const Tensor &out, int64_t dim,
                        const Axes &axes) override;
  std::string reduceScatter(const Tensor &in, const Tensor &out, int64_t dim,
                            Reduction reduction, const Axes &axes) override;
  std::string allToAll(const Tensor &in, const Tensor &out, int64_t splitDim,
                       int64_t concatDim, const Axes &axes) override;
  std::string broadcast(const Tensor &in, const Tensor &out, int64_t root,
                        const Axes &axes) override;
  std::string collectivePermute(const Tensor &in, const Tensor &out,
                                const std::vector<int64_t> &pairs,
                                const Axes &axes) override;
  std::string gatherToRoot(const Tensor &in,
                           std::vector<uint8_t> &out) override;
  [[noreturn]] void abort(int code) override {
    MPI_Abort(MPI_COMM_WORLD, code);
    std::abort();
  }

private:
  MPI_Comm getComm(const Axes &axes);
  static std::string check(int status, const char *what);

  Mesh mesh;
  int rank, size;
  std::map<Axes, MPI_Comm> comms;
};

/// The MPI type to reduce elements of `dtype` with; null when MPI cannot.
MPI_Datatype getReduceType(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return MPI_FLOAT;
  case DType::F64:
    return MPI_DOUBLE;
  case DType::I32:
    return MPI_INT32_T;
  case DType::I64:
    return MPI_INT64_T;
  default:
    return MPI_DATATYPE_NULL;
  }
}

MPI_Op getOp(Reduction reduction) {
  switch (reduction) {
  case Reduction::Max:
    return MPI_MAX;
  case Reduction::Min:
    return MPI_MIN;
  case Reduction::Sum:
  case Reduction::Avg:
    return MPI_SUM;
  }
  return MPI_SUM;
}

/// Divides every element by `count` (the average of a sum).
void divideBy(const Tensor &tensor, int64_t count) {
  int64_t n = tensor.getNumElements();
  if (tensor.dtype == DType::F32)
    for (int64_t i = 0; i < n; ++i)
      tensor.as<float>()[i] /= count;
  else if (tensor.dtype == DType::F64)
    for (int64_t i = 0; i < n; ++i)
      tensor.as<double>()[i] /= count;
  else if (tensor.dtype == DType::I32)
    for (int64_t i = 0; i < n; ++i)
      tensor.as<int32_t>()[i] /= count;
  else if (tensor.dtype == DType::I64)
    for (int64_t i = 0; i < n; ++i)
      tensor.as<int64_t>()[i] /= count;
}

/// A contiguous scratch tensor shaped like `like` with `dim` resized.
OwnedTensor makeScratch(const Tensor &like, int64_t dim, int64_t dimSize) {
  std::vector<int64_t> shape = like.shape;
  shape[dim] = dimSize;
  return OwnedTensor(like.dtype, shape);
}

} // namespace

std::string MpiCommunicator::check(int status, const char *what) {
  if (status == MPI_SUCCESS)
    return "";
  char message[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(status, message, &length);
  return std::string(what) + " failed: " + std::string(message, length);
}

MPI_Comm MpiCommunicator::getComm(const Axes &axes) {
  auto it = comms.find(axes);
  if (it != comms.end())
    return it->second;
  Group group = mesh.getGroup(rank, axes);
  MPI_Comm comm;
  MPI_Comm_split(MPI_COMM_WORLD, static_cast<int>(group.color),
                 static_cast<int>(group.index), &comm);
  comms[axes] = comm;
  return comm;
}

std::string MpiCommunicator::allReduce(const Tensor &in, const Tensor &out,
                                       Reduction reduction, const Axes &axes) {
  MPI_Datatype type = getReduceType(in.dtype);
  if (type == MPI_DATATYPE_NULL)
    return std::string("all_reduce of ") + getDTypeName(in.dtype) +
           " is not supported";
  std::string error =
      check(MPI_Allreduce(in.data, out.data, in.getNumElements(), type,
                          getOp(reduction), getComm(axes)),
            "MPI_Allreduce");
  if (error.empty() && reduction == Reduction::Avg)
    divideBy(out, mesh.getGroup(rank, axes).size);
  return error;
}

std::string MpiCommunicator::allGather(const Tensor &in, const Tensor &out,
                                       int64_t dim, const Axes &axes) {
  int64_t count = mesh.getGroup(rank, axes).size;
  OwnedTensor gathered(in.dtype, {static_cast<int64_t>(in.getBytes()) * count});
  std::string error = check(MPI_Allgather(in.data, in.getBytes(), MPI_BYTE,
                                          gathered.view.data, in.getBytes(),
                                          MPI_BYTE, getComm(axes)),
                            "MPI_Allgather");
  if (!error.empty())
    return error;
  Tensor piece = in;
  for (int64_t i = 0; i < count; ++i) {
    piece.data = static_cast<uint8_t *>(gathered.view.data) + i * in.getBytes();
    placePiece(piece, out, dim, i, count);
  }
  return "";
}

std::string MpiCommunicator::reduceScatter(const Tensor &in, const Tensor &out,
                                           int64_t dim, Reduction reduction,
                                           const Axes &axes) {
  MPI_Datatype type = getReduceType(in.dtype);
  if (type == MPI_DATATYPE_NULL)
    return std::string("reduce_scatter of ") + getDTypeName(in.dtype) +
           " is not supported";
  int64_t count = mesh.getGroup(rank, axes).size;
  // Pieces along `dim`, packed one after another.
  std::vector<uint8_t> packed(in.getBytes());
  Tensor piece = out;
  for (int64_t i = 0; i < count; ++i) {
    piece.data = packed.data() + i * out.getBytes();
    slicePiece(in, piece, dim, i, count);
  }
  std::string error = check(
      MPI_Reduce_scatter_block(packed.data(), out.data, out.getNumElements(),
                               type, getOp(reduction), getComm(axes)),
      "MPI_Reduce_scatter_block");
  if (error.empty() && reduction == Reduction::Avg)
    divideBy(out, count);
  return error;
}

std::string MpiCommunicator::allToAll(const Tensor &in, const Tensor &out,
                                      int64_t splitDim, int64_t concatDim,
                                      const Axes &axes) {
  int64_t count = mesh.getGroup(rank, axes).size;
  size_t pieceBytes = in.getBytes() / count;
  std::vector<uint8_t> sent(in.getBytes()), received(in.getBytes());
  OwnedTensor shape = makeScratch(in, splitDim, in.shape[splitDim] / count);
  Tensor piece = shape.view;
  for (int64_t i = 0; i < count; ++i) {
    piece.data = sent.data() + i * pieceBytes;
    slicePiece(in, piece, splitDim, i, count);
  }
  std::string error = check(
      MPI_Alltoall(sent.data(), pieceBytes, MPI_BYTE, received.data(),
                   pieceBytes, MPI_BYTE, getComm(axes)),
      "MPI_Alltoall");
  if (!error.empty())
    return error;
  for (int64_t i = 0; i < count; ++i) {
    piece.data = received.data() + i * pieceBytes;
    placePiece(piece, out, concatDim, i, count);
  }
  return "";
}

std::string MpiCommunicator::broadcast(const Tensor &in, const Tensor &out,
                                       int64_t root, const Axes &axes) {
  std::memcpy(out.data, in.data, in.getBytes());
  return check(MPI_Bcast(out.data, out.getBytes(), MPI_BYTE,
                         static_cast<int>(root), getComm(axes)),
               "MPI_Bcast");
}

std::string MpiCommunicator::collectivePermute(
    const Tensor &in, const Tensor &out, const std::vector<int64_t> &pairs,
    const Axes &axes) {
  MPI_Comm comm = getComm(axes);
  int64_t index = mesh.getGroup(rank, axes).index;
  std::memset(out.data, 0, out.getBytes());
  std::vector<MPI_Request> requests;
  for (size_t i = 0; i + 1 < pairs.size(); i += 2) {
    int64_t source = pairs[i], target = pairs[i + 1];
    if (source == index && target == index) {
      std::memcpy(out.data, in.data, in.getBytes());
      continue;
    }
    MPI_Request request;
    if (source == index) {
      MPI_Isend(in.data, in.getBytes(), MPI_BYTE, static_cast<int>(target), 0,
                comm, &request);
      requests.push_back(request);
    }
    if (target == index) {
      MPI_Irecv(out.data, out.getBytes(), MPI_BYTE, static_cast<int>(source),
                0, comm, &request);
      requests.push_back(request);
    }
  }
  return check(MPI_Waitall(requests.size(), requests.data(),
                           MPI_STATUSES_IGNORE),
               "MPI_Waitall");
}

std::string MpiCommunicator::gatherToRoot(const Tensor &in,
                                          std::vector<uint8_t> &out) {
  if (rank == 0)
    out.resize(in.getBytes() * size);
  return check(MPI_Gather(in.data, in.getBytes(), MPI_BYTE,
                          rank == 0 ? out.data() : nullptr, in.getBytes(),
                          MPI_BYTE, 0, MPI_COMM_WORLD),
               "MPI_Gather");
}

std::unique_ptr<Communicator>
tessera::runtime::createMpiCommunicator(const Mesh &mesh, std::string &error) {
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size != mesh.getNumDevices()) {
    error = "the plan's mesh has " + std::to_string(mesh.getNumDevices()) +
            " devices but the job has " + std::to_string(size) +
            " ranks (mpirun -np " + std::to_string(mesh.getNumDevices()) + ")";
    return nullptr;
  }
  // Errors come back as return codes so that a failing rank can say why
  // before it aborts the job.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  return std::make_unique<MpiCommunicator>(mesh, rank, size);
}
