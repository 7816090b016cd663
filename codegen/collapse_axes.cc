#include "codegen/collapse_axes.h"

namespace tcc::kir {

namespace {

bool addresses(const Instr& in) { return in.op == Op::Load || in.op == Op::Store; }

}  // namespace

Kernel collapse_axes(Kernel k) {
  if ((k.kind != Kind::Pointwise && k.kind != Kind::Reduction) || k.domain.size() < 2) return k;
  size_t outer = k.domain.size() - static_cast<size_t>(k.reduce_axes);
  std::vector<bool> read_by_coord(k.domain.size(), false);
  for (const Instr& in : k.body)
    if (in.op == Op::Coord) read_by_coord[static_cast<size_t>(in.axis)] = true;
  // From the innermost pair outwards, so that a merged axis may merge again.
  for (size_t d = k.domain.size() - 1; d-- > 0;) {
    if (d + 1 == outer || read_by_coord[d] || read_by_coord[d + 1]) continue;
    bool contiguous = true;
    for (const Instr& in : k.body)
      if (addresses(in)) contiguous = contiguous && in.index.strides[d] == in.index.strides[d + 1] * k.domain[d + 1];
    if (!contiguous) continue;
    k.domain[d] = k.domain[d] * k.domain[d + 1];
    k.domain.erase(k.domain.begin() + static_cast<std::ptrdiff_t>(d + 1));
    read_by_coord.erase(read_by_coord.begin() + static_cast<std::ptrdiff_t>(d + 1));
    for (Instr& in : k.body) {
      if (addresses(in)) {
        std::vector<SymExpr>& s = in.index.strides;
        s[d] = s[d + 1];
        s.erase(s.begin() + static_cast<std::ptrdiff_t>(d + 1));
      }
      if (in.op == Op::Coord && in.axis > static_cast<int>(d)) --in.axis;
    }
    if (d + 1 < outer) --outer;
    else --k.reduce_axes;
  }
  return k;
}

}  // namespace tcc::kir
