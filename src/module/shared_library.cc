#include "src/module/shared_library.h"

#include <dlfcn.h>

#include "src/diag/errors.h"

namespace tcc {

SharedLibrary::SharedLibrary(const std::string& path) {
  handle_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle_ == nullptr) {
    const char* why = dlerror();
    throw InputError("cannot load '" + path + "': " + (why != nullptr ? why : "unknown error"));
  }
}

SharedLibrary::~SharedLibrary() {
  if (handle_ != nullptr) dlclose(handle_);
}

void* SharedLibrary::symbol(const std::string& name) const { return dlsym(handle_, name.c_str()); }

}  // namespace tcc
