#include "src/diag/errors.h"

namespace tcc {

std::string DiagLocation::str() const {
  std::string s;
  if (!file.empty()) s += file + ": ";
  if (!node_name.empty() || !op_type.empty()) {
    s += "node '" + node_name + "'";
    if (!op_type.empty()) s += " (" + op_type + ")";
    if (!source.empty()) s += " at " + source;
    s += ": ";
  }
  return s;
}

InternalErrorStream::InternalErrorStream(const char* file, int line, const char* cond) {
  os_ << file << ":" << line << ": check failed: " << cond << " ";
}

InternalErrorStream::~InternalErrorStream() noexcept(false) { throw InternalError(os_.str()); }

}  // namespace tcc
