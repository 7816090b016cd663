#include "frontends/onnx/tensor_io.h"

#include "src/diag/diagnostics.h"

namespace tcc {

Tensor read_tensor_pb(const std::string& path, std::string* name) { throw InputError(path + ": being written"); }
void write_tensor_pb(const std::string& path, const Tensor& t, const std::string& name) {
  throw InputError(path + ": being written");
}
Tensor read_npy(const std::string& path) { throw InputError(path + ": being written"); }
void write_npy(const std::string& path, const Tensor& t) { throw InputError(path + ": being written"); }

}  // namespace tcc
