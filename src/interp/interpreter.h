// The reference interpreter: runs a graph on the CPU, one op at a time, with
// the kernels registered in src/ops/. It is the oracle every generated kernel
// is checked against, so its kernels favour clarity and exactness (float math
// in double, rounded once to the output dtype) over speed.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "src/ir/graph.h"

namespace tcc {

class Interpreter {
 public:
  Interpreter() = default;
  // For eval_node outside a run: the symbols a caller bound (a module's
  // binding), which tcc::Reshape, tcc::Range and the like evaluate their
  // symbolic dims with.
  explicit Interpreter(std::map<std::string, int64_t> symbols) : symbols_(std::move(symbols)) {}

  // Runs g with inputs given by name; returns the graph outputs in order.
  // A missing input, or one whose dtype or rank disagrees with the graph, is an
  // InputError naming it. Each input dim that is exactly one symbol binds that
  // symbol to the given size (two inputs disagreeing is an InputError naming both).
  std::vector<Tensor> run(const Graph& g, const std::map<std::string, Tensor>& inputs);
  // The same, and every value the graph's nodes computed, by name, into *computed.
  std::vector<Tensor> run(const Graph& g, const std::map<std::string, Tensor>& inputs,
                          std::map<std::string, Tensor>* computed);

  // The symbols bound by the last run(): what tcc::Reshape / tcc::Expand
  // evaluate their symbolic target dims with.
  const std::map<std::string, int64_t>& symbols() const { return symbols_; }

  // The random offset the random ops draw at (docs/MODULE.md, "Random ops"):
  // 0 unless set, as a module's first call; `tcc run --random-offset K` runs
  // the reference at call K of a module.
  uint64_t random_offset() const { return random_offset_; }
  void set_random_offset(uint64_t offset) { random_offset_ = offset; }

  // Runs a region with positional inputs; the region may read values of the
  // scopes that are running (the enclosing graph's values).
  std::vector<Tensor> run_region(const Graph& g, const std::vector<Tensor>& inputs);

  // Runs one node's reference kernel on the given inputs (null = absent).
  std::vector<Tensor> eval_node(const Node& n, const std::vector<const Tensor*>& inputs);
  // The same for a node outside a running graph whose regions read values of
  // its graph (Node::captures): `captured` holds them.
  std::vector<Tensor> eval_node(const Node& n, const std::vector<const Tensor*>& inputs,
                                std::unordered_map<const Value*, Tensor> captured);

 private:
  using Scope = std::unordered_map<const Value*, Tensor>;
  // A scope on the stack of running scopes for as long as this lives.
  struct Entered {
    Entered(std::vector<Scope*>& scopes, Scope& scope) : scopes(scopes) { scopes.push_back(&scope); }
    ~Entered() { scopes.pop_back(); }
    std::vector<Scope*>& scopes;
  };
  void bind_symbols(const Graph& g, const Value& in, const Tensor& t);
  std::vector<Tensor> run_scope(const Graph& g, Scope& scope);
  const Tensor* lookup(const Value* v) const;
  std::vector<Scope*> scopes_;  // innermost last
  std::map<std::string, int64_t> symbols_;
  std::map<std::string, std::string> symbol_sources_;  // symbol -> "input 'x' dim 1", for conflicts
  uint64_t random_offset_ = 0;
};

// Checks that a tensor fits a declared type: dtype, rank and every static dim;
// a sequence or optional, its kind and each element.
// Returns an empty string when it fits, otherwise what differs.
std::string mismatch_with_type(const Tensor& t, const Type& type);

}  // namespace tcc
