//===- Protocol.cpp - The parameter server's messages -----------------------===//

#include "Protocol.h"

#include <chrono>
#include <fstream>
#include <sstream>

#include <unistd.h>

namespace tessera::runtime::ps {

std::string getHostName() {
  char name[64] = {};
  gethostname(name, sizeof name - 1);
  return name;
}

Header makeHeader(MessageType type, int64_t worker) {
  Header header{};
  header.type = type;
  header.worker = static_cast<int32_t>(worker);
  header.pid = getpid();
  std::string host = getHostName();
  std::strncpy(header.host, host.c_str(), sizeof header.host - 1);
  return header;
}

double getWallSeconds() {
  return std::chrono::duration<double>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string getServerFile(const std::string &dir, int64_t server,
                          const char *suffix) {
  return dir + "/server" + std::to_string(server) + suffix;
}

std::string getWorkerPidFile(const std::string &dir, int64_t worker) {
  return dir + "/worker" + std::to_string(worker) + ".pid";
}

std::string readText(const std::string &path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

void addInto(std::vector<float> &sum, const void *bytes, DType dtype) {
  if (dtype == DType::F32) {
    const float *values = static_cast<const float *>(bytes);
    for (size_t i = 0; i < sum.size(); ++i)
      sum[i] += values[i];
    return;
  }
  const uint16_t *values = static_cast<const uint16_t *>(bytes);
  for (size_t i = 0; i < sum.size(); ++i)
    sum[i] += halfToFloat(dtype, values[i]);
}

void storeScaled(const std::vector<float> &values, float scale,
                 Tensor &tensor) {
  for (size_t i = 0; i < values.size(); ++i) {
    float value = scale == 1 ? values[i] : values[i] * scale;
    if (tensor.dtype == DType::F32)
      tensor.as<float>()[i] = value;
    else
      tensor.as<uint16_t>()[i] = floatToHalf(tensor.dtype, value);
  }
}

} // namespace tessera::runtime::ps
