// The IR verifier: structural invariants every pass must preserve.
//
// Checks that every value is defined once, before its uses (in this graph or an
// enclosing one), that nodes are in topological order (so there are no cycles),
// that graph outputs are defined, and that tensor types are well formed (no
// negative static dims). Run between passes in debug builds and in tests.
#pragma once

#include <string>
#include <vector>

#include "src/ir/graph.h"

namespace tcc {

// Empty when the graph is well formed; otherwise one message per problem,
// each naming the node or value.
std::vector<std::string> verify(const Graph& g);
// Throws an InputError listing the problems (for models read from disk).
void verify_or_throw(const Graph& g);

}  // namespace tcc
