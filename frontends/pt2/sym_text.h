// torch's symbolic sizes as text -> SymExpr.
//
// torch.export writes each symbolic size as sympy's srepr
// ("Mul(Integer(2), Symbol('s23', positive=True, integer=True))"); older
// releases wrote sympy's str ("2*s23"). Both are read: srepr's Symbol,
// Integer, Add, Mul, Pow with a small non-negative integer exponent, FloorDiv
// and CleanDiv; anything else (Max, Mod, rationals) is nullopt, and the caller
// says which value it was.
#pragma once

#include <optional>
#include <string>

#include "src/ir/sym.h"

namespace tcc {

std::optional<SymExpr> parse_torch_sym(const std::string& text);

}  // namespace tcc
