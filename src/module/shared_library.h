// A shared library opened with dlopen: a module's host kernels (host.so).
#pragma once

#include <string>

namespace tcc {

// A loaded shared library (dlopen); closes on destruction.
class SharedLibrary {
 public:
  explicit SharedLibrary(const std::string& path);  // InputError naming the file on failure
  ~SharedLibrary();
  SharedLibrary(const SharedLibrary&) = delete;
  SharedLibrary& operator=(const SharedLibrary&) = delete;
  // Null when the symbol is absent.
  void* symbol(const std::string& name) const;

 private:
  void* handle_ = nullptr;
};

}  // namespace tcc
