//===- TensorData.cpp - ONNX tensors' elements and element types ----------===//

#include "GraphImporter.h"

#include "llvm/ADT/APFloat.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/Path.h"

#include <cmath>
#include <cstring>
#include <limits>

using namespace mlir;
using namespace tessera;
using namespace tessera::onnx_import;

llvm::Error onnx_import::makeError(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

llvm::Expected<int64_t> onnx_import::getCheckedSize(ArrayRef<int64_t> shape,
                                                    int64_t limit,
                                                    llvm::StringRef what) {
  // The dims but zeros must multiply within the limit too: strides are
  // products of them.
  int64_t size = 1, nonZero = 1;
  for (int64_t dim : shape) {
    if (dim < 0)
      return makeError(what + " has a negative dim (" + llvm::Twine(dim) + ")");
    if (__builtin_mul_overflow(nonZero, std::max<int64_t>(dim, 1), &nonZero) ||
        nonZero > limit)
      return makeError(what + " has more than 2^" +
                       llvm::Twine(llvm::Log2_64(limit)) + " elements");
    size *= dim;
  }
  return size;
}

int64_t HostTensor::getSize() const {
  int64_t size = 1;
  for (int64_t dim : shape)
    size *= dim;
  return size;
}

bool onnx_import::isFloatType(int32_t elementType) {
  return elementType == onnx::TensorProto::FLOAT ||
         elementType == onnx::TensorProto::DOUBLE ||
         elementType == onnx::TensorProto::FLOAT16 ||
         elementType == onnx::TensorProto::BFLOAT16;
}

llvm::SmallVector<int64_t> HostTensor::getInts() const {
  llvm::SmallVector<int64_t> ints;
  ints.reserve(values.size());
  for (double value : values) {
    // INT64_MAX and INT64_MIN are ONNX's "to the end" in Slice; a NaN
    // (a float cast to an integer) is taken as 0.
    if (std::isnan(value))
      ints.push_back(0);
    else if (value >= 9.2e18)
      ints.push_back(std::numeric_limits<int64_t>::max());
    else if (value <= -9.2e18)
      ints.push_back(std::numeric_limits<int64_t>::min());
    else
      ints.push_back(static_cast<int64_t>(value));
  }
  return ints;
}

Type onnx_import::getElementType(MLIRContext *context, int32_t elementType) {
  Builder builder(context);
  switch (elementType) {
  case onnx::TensorProto::FLOAT:
    return builder.getF32Type();
  case onnx::TensorProto::DOUBLE:
    return builder.getF64Type();
  case onnx::TensorProto::FLOAT16:
    return builder.getF16Type();
  case onnx::TensorProto::BFLOAT16:
    return builder.getBF16Type();
  case onnx::TensorProto::INT64:
    return builder.getI64Type();
  case onnx::TensorProto::INT32:
    return builder.getI32Type();
  case onnx::TensorProto::BOOL:
    return builder.getI1Type();
  default:
    return nullptr;
  }
}

std::string onnx_import::getElementTypeName(int32_t elementType) {
  if (onnx::TensorProto::DataType_IsValid(elementType))
    return onnx::TensorProto::DataType_Name(
        static_cast<onnx::TensorProto::DataType>(elementType));
  return "type " + std::to_string(elementType);
}

/// Bytes per element of the types Tessera holds; 0 for the others.
static size_t getElementBytes(int32_t elementType) {
  switch (elementType) {
  case onnx::TensorProto::DOUBLE:
  case onnx::TensorProto::INT64:
    return 8;
  case onnx::TensorProto::FLOAT:
  case onnx::TensorProto::INT32:
    return 4;
  case onnx::TensorProto::FLOAT16:
  case onnx::TensorProto::BFLOAT16:
    return 2;
  case onnx::TensorProto::BOOL:
    return 1;
  default:
    return 0;
  }
}

/// A 16-bit float's value from its bits, by LLVM's APFloat.
static double sixteenBitsToDouble(const llvm::fltSemantics &semantics,
                                  uint16_t bits) {
  return llvm::APFloat(semantics, llvm::APInt(16, bits)).convertToDouble();
}

static llvm::Expected<int64_t> getElementCount(const onnx::TensorProto &tensor);

llvm::Error onnx_import::checkElementCount(const onnx::TensorProto &tensor) {
  llvm::Expected<int64_t> count = getElementCount(tensor);
  return count ? llvm::Error::success() : count.takeError();
}

static llvm::Expected<int64_t>
getElementCount(const onnx::TensorProto &tensor) {
  return getCheckedSize(
      SmallVector<int64_t>(tensor.dims().begin(), tensor.dims().end()),
      kMaxElements, "tensor '" + tensor.name() + "'");
}

/// Whether `path` is `directory` or lies under it; both canonical.
static bool isInside(llvm::StringRef path, llvm::StringRef directory) {
  if (!path.starts_with(directory))
    return false;
  return path.size() == directory.size() ||
         llvm::sys::path::is_separator(directory.back()) ||
         llvm::sys::path::is_separator(path[directory.size()]);
}

namespace {
/// Where a tensor's external data lies: a regular file, inside the model's
/// directory, that holds `length` bytes at `offset` when it was checked.
struct ExternalData {
  std::string location;
  std::string path;
  /// The file that was checked, so that one put in its place since is not
  /// read.
  llvm::sys::fs::UniqueID fileID;
  uint64_t offset = 0;
  uint64_t length = 0;
};
} // namespace

/// Finds and checks a tensor's external data before a byte of it is read:
/// its location must be relative and name, through any symbolic links, a
/// regular file inside the model's directory, and that file must hold the
/// tensor's bytes (its `length` where its element type is not one Tessera
/// holds) at its offset. The physical directory of a model that is itself a
/// symbolic link counts as its directory too: a Hugging Face cache links
/// both the model and its data into one `blobs` folder.
static llvm::Expected<ExternalData>
findExternalData(const onnx::TensorProto &tensor, llvm::StringRef modelPath) {
  const std::string &name = tensor.name();
  ExternalData data;
  std::optional<uint64_t> length;
  for (const onnx::StringStringEntryProto &entry : tensor.external_data()) {
    llvm::StringRef value = entry.value();
    if (entry.key() == "location") {
      data.location = entry.value();
    } else if (entry.key() == "offset" || entry.key() == "length") {
      uint64_t number;
      if (value.getAsInteger(10, number))
        return makeError("tensor '" + name + "': external data " + entry.key() +
                         " '" + value + "' is not a number");
      if (entry.key() == "offset")
        data.offset = number;
      else
        length = number;
    }
  }
  llvm::StringRef location = data.location;
  if (location.empty())
    return makeError("tensor '" + name +
                     "' has external data without a location");
  auto refuse = [&](const llvm::Twine &what) {
    return makeError("tensor '" + name + "': external data '" + location +
                     "' " + what);
  };

  // The location as written: relative, and not climbing out. A NUL would
  // end the path the system opens early.
  if (location.contains('\0'))
    return refuse("holds a NUL character");
  if (llvm::sys::path::is_absolute(location) ||
      llvm::sys::path::has_root_name(location))
    return refuse("is an absolute path, expected one relative to the "
                  "model's directory");
  llvm::SmallString<256> lexical(location);
  llvm::sys::path::remove_dots(lexical, /*remove_dot_dot=*/true);
  if (llvm::sys::path::begin(lexical) != llvm::sys::path::end(lexical) &&
      *llvm::sys::path::begin(lexical) == "..")
    return refuse("points outside the model's directory");

  // The location as resolved: symbolic links may not lead out either.
  llvm::StringRef directory = llvm::sys::path::parent_path(modelPath);
  if (directory.empty())
    directory = ".";
  llvm::SmallString<256> joined(directory), realDirectory, realPath;
  llvm::sys::path::append(joined, location);
  if (std::error_code error =
          llvm::sys::fs::real_path(directory, realDirectory))
    return makeError("tensor '" + name + "': cannot resolve the model's " +
                     "directory '" + directory + "': " + error.message());
  if (std::error_code error = llvm::sys::fs::real_path(joined, realPath))
    return refuse("cannot be read: " + error.message());
  if (!isInside(realPath, realDirectory)) {
    llvm::SmallString<256> realModel;
    if (llvm::sys::fs::real_path(modelPath, realModel) ||
        !isInside(realPath, llvm::sys::path::parent_path(realModel)))
      return refuse("resolves to '" + realPath +
                    "', outside the model's directory '" + realDirectory + "'");
  }
  data.path = realPath.str().str();

  llvm::sys::fs::file_status status;
  if (std::error_code error = llvm::sys::fs::status(data.path, status))
    return refuse("cannot be read: " + error.message());
  if (status.type() != llvm::sys::fs::file_type::regular_file)
    return refuse("is not a regular file");
  data.fileID = status.getUniqueID();
  uint64_t fileBytes = status.getSize();
  if (data.offset > fileBytes)
    return refuse("is " + llvm::Twine(fileBytes) + " bytes, its offset " +
                  llvm::Twine(data.offset) + " is past the end");

  if (size_t elementBytes = getElementBytes(tensor.data_type())) {
    llvm::Expected<int64_t> count = getElementCount(tensor);
    if (!count)
      return count.takeError();
    data.length = *count * elementBytes;
    if (length && *length != data.length)
      return refuse("has length " + llvm::Twine(*length) +
                    ", the tensor's shape needs " + llvm::Twine(data.length) +
                    " bytes");
  } else {
    data.length = length.value_or(fileBytes - data.offset);
  }
  if (data.length > fileBytes - data.offset)
    return refuse("is " + llvm::Twine(fileBytes) + " bytes, the tensor needs " +
                  llvm::Twine(data.length) + " at offset " +
                  llvm::Twine(data.offset));
  return data;
}

/// Reads checked external data with bounded reads: a file that shrank since
/// the check is an error, not a fault of a mapping or zeros.
static llvm::Error readExternalData(const onnx::TensorProto &tensor,
                                    const ExternalData &data,
                                    std::vector<uint8_t> &bytes) {
  auto fail = [&](const llvm::Twine &what) {
    return makeError("tensor '" + tensor.name() + "': external data '" +
                     data.location + "' " + what);
  };
  llvm::Expected<llvm::sys::fs::file_t> file =
      llvm::sys::fs::openNativeFileForRead(data.path);
  if (!file)
    return fail("cannot be read: " + llvm::toString(file.takeError()));
  bytes.resize(data.length);
  auto readAll = [&]() -> llvm::Error {
    llvm::sys::fs::file_status status;
    if (std::error_code error = llvm::sys::fs::status(*file, status))
      return fail("cannot be read: " + error.message());
    if (status.getUniqueID() != data.fileID)
      return fail("was replaced by another file after it was checked");
    for (uint64_t done = 0; done < data.length;) {
      llvm::MutableArrayRef<char> rest(
          reinterpret_cast<char *>(bytes.data()) + done, data.length - done);
      llvm::Expected<size_t> read =
          llvm::sys::fs::readNativeFileSlice(*file, rest, data.offset + done);
      if (!read)
        return fail("cannot be read: " + llvm::toString(read.takeError()));
      if (*read == 0)
        return fail("ended at byte " + llvm::Twine(data.offset + done) +
                    " while read, the tensor needs " +
                    llvm::Twine(data.length) + " at offset " +
                    llvm::Twine(data.offset));
      done += *read;
    }
    return llvm::Error::success();
  };
  llvm::Error error = readAll();
  llvm::sys::fs::closeFile(*file);
  return error;
}

static llvm::Error checkExternalData(const onnx::GraphProto &graph,
                                     llvm::StringRef modelPath);

static llvm::Error checkExternalData(const onnx::TensorProto &tensor,
                                     llvm::StringRef modelPath) {
  if (tensor.data_location() != onnx::TensorProto::EXTERNAL)
    return llvm::Error::success();
  llvm::Expected<ExternalData> data = findExternalData(tensor, modelPath);
  return data ? llvm::Error::success() : data.takeError();
}

static llvm::Error checkExternalData(const onnx::SparseTensorProto &tensor,
                                     llvm::StringRef modelPath) {
  if (llvm::Error error = checkExternalData(tensor.values(), modelPath))
    return error;
  return checkExternalData(tensor.indices(), modelPath);
}

static llvm::Error checkExternalData(
    const google::protobuf::RepeatedPtrField<onnx::NodeProto> &nodes,
    llvm::StringRef modelPath) {
  for (const onnx::NodeProto &node : nodes)
    for (const onnx::AttributeProto &attr : node.attribute()) {
      if (attr.has_t())
        if (llvm::Error error = checkExternalData(attr.t(), modelPath))
          return error;
      if (attr.has_sparse_tensor())
        if (llvm::Error error =
                checkExternalData(attr.sparse_tensor(), modelPath))
          return error;
      if (attr.has_g())
        if (llvm::Error error = checkExternalData(attr.g(), modelPath))
          return error;
      for (const onnx::TensorProto &tensor : attr.tensors())
        if (llvm::Error error = checkExternalData(tensor, modelPath))
          return error;
      for (const onnx::SparseTensorProto &tensor : attr.sparse_tensors())
        if (llvm::Error error = checkExternalData(tensor, modelPath))
          return error;
      for (const onnx::GraphProto &graph : attr.graphs())
        if (llvm::Error error = checkExternalData(graph, modelPath))
          return error;
    }
  return llvm::Error::success();
}

static llvm::Error checkExternalData(const onnx::GraphProto &graph,
                                     llvm::StringRef modelPath) {
  for (const onnx::TensorProto &tensor : graph.initializer())
    if (llvm::Error error = checkExternalData(tensor, modelPath))
      return error;
  for (const onnx::SparseTensorProto &tensor : graph.sparse_initializer())
    if (llvm::Error error = checkExternalData(tensor, modelPath))
      return error;
  return checkExternalData(graph.node(), modelPath);
}

llvm::Error onnx_import::checkExternalData(const onnx::ModelProto &model,
                                           llvm::StringRef modelPath) {
  if (llvm::Error error = ::checkExternalData(model.graph(), modelPath))
    return error;
  for (const onnx::FunctionProto &function : model.functions())
    if (llvm::Error error = ::checkExternalData(function.node(), modelPath))
      return error;
  return llvm::Error::success();
}

llvm::Expected<TensorBytes>
onnx_import::readTensorBytes(const onnx::TensorProto &tensor,
                             llvm::StringRef modelPath) {
  const std::string &name = tensor.name();
  size_t elementBytes = getElementBytes(tensor.data_type());
  if (!elementBytes)
    return makeError("tensor '" + name + "' has element type " +
                     getElementTypeName(tensor.data_type()) +
                     ", which Tessera does not hold");
  llvm::Expected<int64_t> count = getElementCount(tensor);
  if (!count)
    return count.takeError();
  uint64_t bytes = *count * elementBytes;
  TensorBytes data;
  auto sizeMismatch = [&](uint64_t got) {
    return makeError("tensor '" + name + "' holds " + llvm::Twine(got) +
                     " bytes of data, its shape needs " + llvm::Twine(bytes));
  };

  if (tensor.data_location() == onnx::TensorProto::EXTERNAL) {
    llvm::Expected<ExternalData> external = findExternalData(tensor, modelPath);
    if (!external)
      return external.takeError();
    if (llvm::Error error = readExternalData(tensor, *external, data.converted))
      return std::move(error);
    data.bytes = data.converted;
    return data;
  }

  if (tensor.has_raw_data()) {
    const std::string &raw = tensor.raw_data();
    if (raw.size() != bytes)
      return sizeMismatch(raw.size());
    data.bytes =
        llvm::ArrayRef(reinterpret_cast<const uint8_t *>(raw.data()), bytes);
    return data;
  }

  data.converted.resize(bytes);
  auto copy = [&](const auto &field, auto cast) -> llvm::Error {
    if (static_cast<uint64_t>(field.size()) != static_cast<uint64_t>(*count))
      return sizeMismatch(field.size() * elementBytes);
    for (int64_t i = 0; i < *count; ++i) {
      auto value = cast(field.Get(i));
      std::memcpy(data.converted.data() + i * elementBytes, &value,
                  elementBytes);
    }
    return llvm::Error::success();
  };
  llvm::Error error = llvm::Error::success();
  switch (tensor.data_type()) {
  case onnx::TensorProto::FLOAT:
    error = copy(tensor.float_data(), [](float v) { return v; });
    break;
  case onnx::TensorProto::DOUBLE:
    error = copy(tensor.double_data(), [](double v) { return v; });
    break;
  case onnx::TensorProto::INT64:
    error = copy(tensor.int64_data(), [](int64_t v) { return v; });
    break;
  case onnx::TensorProto::INT32:
    error = copy(tensor.int32_data(), [](int32_t v) { return v; });
    break;
  case onnx::TensorProto::FLOAT16:
  case onnx::TensorProto::BFLOAT16:
    error = copy(tensor.int32_data(),
                 [](int32_t v) { return static_cast<uint16_t>(v); });
    break;
  case onnx::TensorProto::BOOL:
    error = copy(tensor.int32_data(),
                 [](int32_t v) { return static_cast<uint8_t>(v != 0); });
    break;
  }
  if (error)
    return std::move(error);
  data.bytes = data.converted;
  return data;
}

llvm::Expected<HostTensor>
onnx_import::readTensor(const onnx::TensorProto &tensor,
                        llvm::StringRef modelPath) {
  llvm::Expected<TensorBytes> read = readTensorBytes(tensor, modelPath);
  if (!read)
    return read.takeError();
  llvm::ArrayRef<uint8_t> *bytes = &read->bytes;
  HostTensor host;
  host.elementType = tensor.data_type();
  host.shape.assign(tensor.dims().begin(), tensor.dims().end());
  size_t elementBytes = getElementBytes(host.elementType);
  size_t count = bytes->size() / elementBytes;
  host.values.resize(count);
  const uint8_t *data = bytes->data();
  for (size_t i = 0; i < count; ++i) {
    const uint8_t *element = data + i * elementBytes;
    auto load = [&](auto value) {
      std::memcpy(&value, element, sizeof(value));
      return value;
    };
    switch (host.elementType) {
    case onnx::TensorProto::FLOAT:
      host.values[i] = load(float());
      break;
    case onnx::TensorProto::DOUBLE:
      host.values[i] = load(double());
      break;
    case onnx::TensorProto::INT64:
      host.values[i] = static_cast<double>(load(int64_t()));
      break;
    case onnx::TensorProto::INT32:
      host.values[i] = load(int32_t());
      break;
    case onnx::TensorProto::FLOAT16:
      host.values[i] =
          sixteenBitsToDouble(llvm::APFloat::IEEEhalf(), load(uint16_t()));
      break;
    case onnx::TensorProto::BFLOAT16:
      host.values[i] =
          sixteenBitsToDouble(llvm::APFloat::BFloat(), load(uint16_t()));
      break;
    case onnx::TensorProto::BOOL:
      host.values[i] = load(uint8_t()) != 0;
      break;
    }
  }
  return host;
}

SmallVector<int64_t> onnx_import::getStrides(ArrayRef<int64_t> shape) {
  SmallVector<int64_t> strides(shape.size(), 1);
  for (int64_t i = static_cast<int64_t>(shape.size()) - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * shape[i + 1];
  return strides;
}

std::optional<SmallVector<int64_t>>
onnx_import::getBroadcastShape(ArrayRef<int64_t> lhs, ArrayRef<int64_t> rhs) {
  size_t rank = std::max(lhs.size(), rhs.size());
  SmallVector<int64_t> shape(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t a = i < rank - lhs.size() ? 1 : lhs[i - (rank - lhs.size())];
    int64_t b = i < rank - rhs.size() ? 1 : rhs[i - (rank - rhs.size())];
    if (a != b && a != 1 && b != 1)
      return std::nullopt;
    shape[i] = a == 1 ? b : a;
  }
  return shape;
}

HostTensor onnx_import::broadcastHost(const HostTensor &tensor,
                                      ArrayRef<int64_t> shape) {
  if (ArrayRef<int64_t>(tensor.shape) == shape)
    return tensor;
  HostTensor result;
  result.elementType = tensor.elementType;
  result.shape.assign(shape.begin(), shape.end());
  int64_t size = result.getSize();
  result.values.resize(size);
  size_t rank = shape.size(), offset = rank - tensor.shape.size();
  SmallVector<int64_t> strides = getStrides(tensor.shape);
  SmallVector<int64_t> resultStrides = getStrides(shape);
  for (int64_t index = 0; index < size; ++index) {
    int64_t source = 0;
    for (size_t dim = offset; dim < rank; ++dim) {
      int64_t coordinate = index / resultStrides[dim] % shape[dim];
      if (tensor.shape[dim - offset] != 1)
        source += coordinate * strides[dim - offset];
    }
    result.values[index] = tensor.values[source];
  }
  return result;
}
