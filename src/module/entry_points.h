// A dlopen'd library's entry points, each declared once. A library's table is
// a list macro, LIST(X), calling X(member, function, "symbol") per entry: the
// member's name, the function as the library's header declares it (its type),
// and the symbol to look up (the ABI name, which a header may spell through a
// macro: cuMemAlloc is cuMemAlloc_v2). TCC_ENTRY_MEMBER declares the members;
// resolve_entries fills them from an opened library.
#pragma once

#include <dlfcn.h>

namespace tcc {

#define TCC_ENTRY_MEMBER(member, function, symbol) decltype(&::function) member = nullptr;
#define TCC_ENTRY_RESOLVE(member, function, symbol) ok = resolve_entry(lib, symbol, table.member) && ok;

// One entry point of `lib`; false (and fn null) where the library lacks it.
template <typename F>
bool resolve_entry(void* lib, const char* name, F*& fn) {
  fn = reinterpret_cast<F*>(dlsym(lib, name));
  return fn != nullptr;
}

// Fills every member of `table` that LIST names; false where any is missing.
#define TCC_RESOLVE_ENTRIES(LIST, lib_, table_) \
  [&](void* lib, auto& table) {                 \
    bool ok = true;                             \
    LIST(TCC_ENTRY_RESOLVE)                     \
    return ok;                                  \
  }(lib_, table_)

}  // namespace tcc
