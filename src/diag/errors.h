// The errors every part of tcc throws (logging is src/log/log.h).
//
// Two kinds of failure are kept apart, as Halide's user_error / internal_error:
//  - InputError: the user's model, trace or flags are wrong. The message names the
//    file, the node and what was expected; the driver exits with code 2.
//  - InternalError: an invariant of tcc itself broke (a bug). Exit code 3.
// A CI gate that trips is not an error: commands return ExitCode::GateTripped.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>

namespace tcc {

enum class ExitCode : int { Ok = 0, GateTripped = 1, InputError = 2, InternalError = 3 };

// Where a diagnostic points: the file being read and, when known, the node.
struct DiagLocation {
  std::string file;       // model or trace path
  std::string node_name;  // node name in the graph (may be empty)
  std::string op_type;    // op type of that node (may be empty)
  std::string source;     // source location the exporter recorded (may be empty)
  // A location naming only the file: an error about the whole graph.
  static DiagLocation in_file(std::string file) {
    DiagLocation l;
    l.file = std::move(file);
    return l;
  }
  std::string str() const;
};

class Error : public std::runtime_error {
 public:
  Error(ExitCode code, const std::string& msg) : std::runtime_error(msg), code_(code) {}
  ExitCode code() const { return code_; }

 private:
  ExitCode code_;
};

class InputError : public Error {
 public:
  explicit InputError(const std::string& msg) : Error(ExitCode::InputError, msg) {}
  InputError(const DiagLocation& loc, const std::string& msg)
      : Error(ExitCode::InputError, loc.str() + msg) {}
};

class InternalError : public Error {
 public:
  explicit InternalError(const std::string& msg)
      : Error(ExitCode::InternalError, "internal error: " + msg) {}
};

// Builds a message with operator<< and throws it when the temporary dies.
// Used by TCC_CHECK so that call sites read like a stream.
class InternalErrorStream {
 public:
  InternalErrorStream(const char* file, int line, const char* cond);
  template <typename T>
  InternalErrorStream& operator<<(const T& v) {
    os_ << v;
    return *this;
  }
  [[noreturn]] ~InternalErrorStream() noexcept(false);

 private:
  std::ostringstream os_;
};

// An invariant of tcc's own code. Never use it for properties of user input.
#define TCC_CHECK(cond) \
  if (cond) {           \
  } else                \
    ::tcc::InternalErrorStream(__FILE__, __LINE__, #cond)

}  // namespace tcc
