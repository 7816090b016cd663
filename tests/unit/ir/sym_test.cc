#include "src/ir/sym.h"

#include <gtest/gtest.h>
#include <map>
#include <vector>

#include "src/ir/shape_env.h"

namespace tcc {
namespace {

SymExpr S(const char* n) { return SymExpr::symbol(n); }
SymExpr C(int64_t v) { return SymExpr::constant(v); }

TEST(SymExpr, CanonicalFormIsOrderIndependent) {
  EXPECT_EQ((S("seq") * C(4)).str(), "seq*4");
  EXPECT_EQ((C(4) * S("seq")), (S("seq") * C(4)));
  EXPECT_EQ((S("batch") * S("seq")).str(), "batch*seq");
  EXPECT_EQ((S("seq") * S("batch")), (S("batch") * S("seq")));
  EXPECT_EQ((S("seq") - C(1)).str(), "seq-1");
  EXPECT_EQ((C(8) - S("seq") * C(2)).str(), "-seq*2+8");
  EXPECT_EQ((S("a") - S("a")).str(), "0");
}

TEST(SymExpr, ExactDivision) {
  SymExpr e = S("batch") * S("seq") * C(4);
  ASSERT_TRUE(e.exact_div(C(4)));
  EXPECT_EQ(e.exact_div(C(4))->str(), "batch*seq");
  EXPECT_EQ(e.exact_div(S("seq"))->str(), "batch*4");
  EXPECT_FALSE(e.exact_div(C(3)));
  EXPECT_FALSE(S("seq").exact_div(S("batch")));
  EXPECT_EQ((S("s") * C(12) + C(24)).floordiv(C(12)).str(), "s+2");
}

// A divisor of several terms divides as a polynomial: a view's -1 over a
// length s-1 (a slice x[:, 1:], a convolution's output) is its element count
// 64*b*(s-1) over the other dims' 16*b*(s-1), which is 4 at every binding.
TEST(SymExpr, ExactDivisionByAPolynomial) {
  SymExpr b = S("b"), s = S("s");
  EXPECT_EQ((b * (s - C(1)) * C(64)).exact_div(b * (s - C(1)) * C(16)), C(4));
  EXPECT_EQ((s * s - C(1)).exact_div(s + C(1)), s - C(1));
  EXPECT_EQ((b * s * s * C(6) + b * s * C(3)).exact_div(s * C(2) + C(1)), b * s * C(3));
  EXPECT_FALSE((s * s + C(1)).exact_div(s + C(1)));
  EXPECT_FALSE((s * C(2) + C(1)).exact_div(s + C(1)));
  EXPECT_FALSE((s * C(2) + C(2)).exact_div(s * C(4) + C(4)));
  EXPECT_EQ((b * (s - C(1)) * C(64)).floordiv(b * (s - C(1)) * C(16)).str(), "4");
}

// Sizes are never negative; a floor division by a positive constant d is
// bounded by N - d + 1 <= d*(N//d) <= N, which decides torch.chunk's last
// piece (its end 2*((seq+1)//2) lies at or past seq) and leaves the rest
// undecided.
TEST(SymExpr, ProvablyNonnegative) {
  SymExpr half_up = (S("seq") + C(1)).floordiv(C(2));
  EXPECT_TRUE(C(0).provably_nonnegative());
  EXPECT_TRUE(S("seq").provably_nonnegative());
  EXPECT_TRUE((S("batch") * S("seq") * C(4) + S("seq") + C(1)).provably_nonnegative());
  EXPECT_TRUE(half_up.provably_nonnegative());
  EXPECT_TRUE((half_up * C(2) - S("seq")).provably_nonnegative());
  EXPECT_TRUE((S("seq") - S("seq").floordiv(C(2))).provably_nonnegative());
  EXPECT_TRUE((S("seq") - half_up).provably_nonnegative());
  EXPECT_FALSE(C(-1).provably_nonnegative());
  EXPECT_FALSE((S("seq") - C(1)).provably_nonnegative());
  EXPECT_FALSE((S("a") - S("b")).provably_nonnegative());
  EXPECT_FALSE((S("seq") - C(3)).floordiv(C(2)).provably_nonnegative());
  EXPECT_FALSE((S("seq").floordiv(C(2)) - S("seq")).provably_nonnegative());
  EXPECT_FALSE((S("seq") - half_up * C(2)).provably_nonnegative());
  EXPECT_FALSE(S("a").floordiv(S("b")).provably_nonnegative());
}

// What it proves holds: every sum of up to three terms c*seq, c*((seq+r)//d)
// and a constant that it calls non-negative is so at seq = 0..40.
TEST(SymExpr, ProvablyNonnegativeIsSound) {
  std::vector<SymExpr> terms;
  for (int64_t c : {-2, -1, 1, 2, 3}) {
    terms.push_back(S("seq") * C(c));
    for (int64_t d : {2, 3, 4})
      for (int64_t r : {-1, 0, 1, 3}) terms.push_back((S("seq") + C(r)).floordiv(C(d)) * C(c));
  }
  int proven = 0;
  for (const SymExpr& a : terms)
    for (const SymExpr& b : terms)
      for (int64_t k : {-2, -1, 0, 1}) {
        SymExpr e = a + b + C(k);
        if (!e.provably_nonnegative()) continue;
        ++proven;
        for (int64_t seq = 0; seq <= 40; ++seq) ASSERT_GE(*e.evaluate({{"seq", seq}}), 0) << e.str() << " at " << seq;
      }
  EXPECT_GT(proven, 1000);
}

// The terms a divisor divides leave the division ((q*d + r)//d == q + r//d):
// torch.export's 32*h through three stride-2 convolutions is 4*h, not a nest
// of divisions, so sizes derived from it compare equal to multiples of h.
TEST(SymExpr, FloorDivisionTakesOutTheTermsItDivides) {
  EXPECT_EQ((S("h") * C(32) - C(1)).floordiv(C(2)).str(), "h*16-1");
  SymExpr x = S("h") * C(32);
  for (int i = 0; i < 3; ++i) x = (x - C(1)).floordiv(C(2)) + C(1);
  EXPECT_EQ(x.str(), "h*4");
  EXPECT_EQ((S("b") * S("s") + S("w")).floordiv(S("s")).str(), "(w)//(s)+b");
  EXPECT_EQ((S("h") * C(-4) + S("w") + C(3)).floordiv(C(-2)).str(), "(w+3)//(-2)+h*2");
  for (const SymExpr& e : {(S("b") * S("s") + S("w")).floordiv(S("s")), (S("h") * C(-4) + S("w") + C(3)).floordiv(C(-2))})
    EXPECT_EQ(SymExpr::parse(e.str()), e) << e.str();
  for (int64_t h = -9; h <= 9; ++h)
    for (int64_t w = -9; w <= 9; ++w) {
      std::map<std::string, int64_t> env{{"h", h}, {"w", w}};
      for (int64_t d : {-3, -2, 2, 3, 5}) {
        SymExpr num = S("h") * C(6) + S("w") * C(10) - C(7);
        int64_t n = 6 * h + 10 * w - 7, q = n / d - ((n % d != 0) && ((n < 0) != (d < 0)));
        EXPECT_EQ(num.floordiv(C(d)).evaluate(env), q) << num.str() << " // " << d << " at h=" << h << ", w=" << w;
      }
    }
}

// A positive divisor keeps the numerator's constant in [0, d), so sizes reached
// along different paths compare equal: a stride-2 window's (s-1)//2+1 and
// torch.chunk's (s+1)//2, or their squares in a weight gradient's batch.
TEST(SymExpr, FloorDivisionKeepsItsConstantBelowThePositiveDivisor) {
  SymExpr s = S("s"), b = S("b");
  EXPECT_EQ((s - C(1)).floordiv(C(2)) + C(1), (s + C(1)).floordiv(C(2)));
  SymExpr window = (s - C(1)).floordiv(C(2)) + C(1), chunk = (s + C(1)).floordiv(C(2));
  EXPECT_EQ(window * window * b, chunk * chunk * b);
  EXPECT_EQ((s - C(3)).floordiv(C(2)).str(), "(s+1)//(2)-2");
  EXPECT_EQ((S("w") + C(7)).floordiv(C(3)).str(), "(w+1)//(3)+2");
  EXPECT_EQ((s * b - C(6)).floordiv(C(4)).str(), "(b*s+2)//(4)-2");
  EXPECT_EQ((s + C(1)).floordiv(C(2)).str(), "(s+1)//(2)");
  for (int64_t v = -7; v <= 7; ++v)
    EXPECT_EQ((s * b - C(6)).floordiv(C(4)).evaluate({{"s", v}, {"b", 3}}), (3 * v - 6 + 64) / 4 - 16) << v;
}

// (N//a + R)//b == (N + a*R)//(a*b) for positive a and b: wav2vec2's feature
// encoder (kernel 10 stride 5, then kernel 3 stride 2) computes its length as
// nested divisions, which torch writes as one. Checked against integer floor
// division over negative and positive lengths.
TEST(SymExpr, NestedDivisionsByPositiveConstantsMerge) {
  SymExpr L = S("L");
  SymExpr conv1 = (L - C(10)).floordiv(C(5)) + C(1);
  SymExpr conv2 = (conv1 - C(3)).floordiv(C(2)) + C(1);
  EXPECT_EQ(conv2.str(), "(L)//(10)-1");
  EXPECT_EQ(((L.floordiv(C(5))).floordiv(C(2))).floordiv(C(2)), L.floordiv(C(20)));
  EXPECT_EQ((L.floordiv(C(3)) * C(2)).floordiv(C(2)).str(), "(L)//(3)");
  auto floor_div = [](int64_t n, int64_t d) { return n / d - ((n % d != 0) && ((n < 0) != (d < 0))); };
  for (int64_t a : {2, 3, 5})
    for (int64_t bb : {2, 4, 7})
      for (int64_t r : {-3, 0, 2})
        for (int64_t l = -30; l <= 30; ++l)
          for (int64_t m = 0; m <= 2; ++m) {
            SymExpr e = (L.floordiv(C(a)) + S("m") * C(r) + C(r)).floordiv(C(bb));
            EXPECT_EQ(e.evaluate({{"L", l}, {"m", m}}), floor_div(floor_div(l, a) + m * r + r, bb))
                << e.str() << " at L=" << l << ", m=" << m;
          }
}

// torch writes a size padded up to a multiple of 4 (Swin's windows) as sympy
// prints it; the window count divides exactly.
TEST(SymExpr, ParsesSympyMod) {
  std::optional<SymExpr> padded = SymExpr::parse("h + (Mod(4 - (Mod(h, 4)), 4))");
  ASSERT_TRUE(padded);
  std::optional<SymExpr> windows = SymExpr::parse("((h + (Mod(4 - (Mod(h, 4)), 4)))//4)");
  ASSERT_TRUE(windows);
  for (int64_t h = 1; h <= 20; ++h) {
    EXPECT_EQ(padded->evaluate({{"h", h}}), (h + 3) / 4 * 4) << padded->str() << " at h=" << h;
    EXPECT_EQ(windows->evaluate({{"h", h}}), (h + 3) / 4) << windows->str() << " at h=" << h;
  }
  EXPECT_EQ(*windows * C(4), *padded);
  EXPECT_FALSE(SymExpr::parse("Mod(h, 0)"));
  EXPECT_FALSE(SymExpr::parse("Mod(h 4)"));
}

// Swin's windows: a Reshape's b*32*(h - h//2)*(w - w//2) elements against
// the ceil((h)/2)*ceil(w/2) torch writes; equal though no canonical form
// shows it.
TEST(SymExpr, IdentityOfFloorDivisionsIsDecidedByItsResidueClasses) {
  SymExpr h = S("h"), w = S("w"), b = S("b");
  SymExpr ceil_h = (h + C(1)).floordiv(C(2)), ceil_w = (w + C(1)).floordiv(C(2));
  EXPECT_TRUE((ceil_h - h + h.floordiv(C(2))).identically_zero());
  EXPECT_TRUE((b * C(32) * (h - h.floordiv(C(2))) * (w - w.floordiv(C(2))) - b * C(32) * ceil_h * ceil_w)
                  .identically_zero());
  EXPECT_TRUE(((ceil_h + C(1)).floordiv(C(2)) - (h + C(3)).floordiv(C(4))).identically_zero());
  EXPECT_FALSE((ceil_h - h.floordiv(C(2))).identically_zero());  // 1 at odd h only
  EXPECT_FALSE((h.floordiv(C(3)) - h.floordiv(C(2))).identically_zero());
  // Zero, but undecided: a numerator of degree 2, a symbolic divisor.
  EXPECT_FALSE(((h * h + h).floordiv(C(2)) * C(2) - h * h - h).identically_zero());
  EXPECT_FALSE(h.floordiv(h * C(2)).identically_zero());
  EXPECT_TRUE(C(0).identically_zero());
  EXPECT_FALSE(C(3).identically_zero());
}

TEST(SymExpr, OpaqueFloorDivisionRoundTripsAndSubstitutes) {
  SymExpr e = (S("seq") + C(1)).floordiv(C(2));
  EXPECT_EQ(e.str(), "(seq+1)//(2)");
  auto parsed = SymExpr::parse(e.str());
  ASSERT_TRUE(parsed);
  EXPECT_EQ(*parsed, e);
  EXPECT_EQ(e.evaluate({{"seq", 7}}), 4);
  EXPECT_EQ(C(-7).floordiv(C(2)).constant_value(), -4);
}

// A split-K GEMM's workspace is a division whose numerator holds divisions.
TEST(SymExpr, NestedFloorDivisionsEvaluate) {
  SymExpr tiles = (S("seq") + C(31)).floordiv(C(32));
  SymExpr e = (tiles * S("seq") + tiles * C(63)).floordiv(C(64));
  EXPECT_EQ(e.str(), "((seq+31)//(32)*seq+(seq+31)//(32)*63)//(64)");
  EXPECT_EQ(e.evaluate({{"seq", 8}}), (1 * 8 + 1 * 63) / 64);
  EXPECT_EQ(e.evaluate({{"seq", 100}}), (4 * 100 + 4 * 63) / 64);
  SymExpr inverted = S("n").floordiv((S("m") + C(1)).floordiv(C(2)));
  EXPECT_EQ(inverted.evaluate({{"n", 20}, {"m", 7}}), 5);
  auto parsed = SymExpr::parse(e.str());
  ASSERT_TRUE(parsed);
  EXPECT_EQ(parsed->evaluate({{"seq", 100}}), e.evaluate({{"seq", 100}}));
  EXPECT_EQ(S("n").floordiv(S("m")).evaluate({{"n", 5}, {"m", 0}}), std::nullopt);
  EXPECT_EQ(S("n").floordiv(S("m")).evaluate({{"n", 5}}), std::nullopt);
}

// A strided convolution's output area (kernel 3, padding 1, stride 2): a
// product of two divisions, and a division negated. Both must read back as
// they were, since * and // bind left to right: "(h+1)//(2)*(w+1)//(2)" would
// be ((h+1)//2*(w+1))//2.
TEST(SymExpr, ProductsAndNegationsOfDivisionsRoundTrip) {
  SymExpr oh = (S("h") - C(1)).floordiv(C(2)) + C(1), ow = (S("w") - C(1)).floordiv(C(2)) + C(1);
  SymExpr area = oh * ow * S("n") * C(16);
  EXPECT_EQ(area.str(), "(h+1)//(2)*((w+1)//(2))*n*16");
  EXPECT_EQ(C(8) - oh, SymExpr::parse("-((h+1)//(2))+8"));
  EXPECT_EQ((C(8) - oh).str(), "-((h+1)//(2))+8");
  const std::map<std::string, int64_t> at = {{"h", 16}, {"w", 9}, {"n", 2}};
  for (const SymExpr& e : {area, C(8) - oh, oh * oh - ow * C(3)}) {
    auto parsed = SymExpr::parse(e.str());
    ASSERT_TRUE(parsed) << e.str();
    EXPECT_EQ(*parsed, e) << e.str();
    EXPECT_EQ(parsed->evaluate(at), e.evaluate(at)) << e.str();
  }
  EXPECT_EQ(area.evaluate(at), 8 * 5 * 2 * 16);
  EXPECT_EQ((C(8) - oh).evaluate(at), 8 - 8);
}

TEST(SymExpr, ParseRoundTrip) {
  for (const char* t : {"batch*seq*4+1", "-seq*2+8", "seq", "0", "768", "a*b-c"}) {
    auto e = SymExpr::parse(t);
    ASSERT_TRUE(e) << t;
    EXPECT_EQ(e->str(), t);
  }
  EXPECT_FALSE(SymExpr::parse("a+"));
  EXPECT_FALSE(SymExpr::parse("a//0"));
  EXPECT_FALSE(SymExpr::parse("99999999999999999999"));
}

TEST(ShapeEnv, UnifyPrefersOlderSymbols) {
  ShapeEnv env;
  env.declare("batch");
  Dim s = env.fresh();
  EXPECT_TRUE(env.unify(s, Dim::symbol("batch")));
  EXPECT_EQ(env.canonical(s).str(), "batch");
  Dim t = env.fresh();
  EXPECT_TRUE(env.unify(t, Dim(768)));
  EXPECT_EQ(env.canonical(Dim(t.expr() * SymExpr::symbol("batch"))).str(), "batch*768");
  EXPECT_FALSE(env.unify(Dim(3), Dim(4)));
  EXPECT_FALSE(env.unify(t, Dim(767)));
}

// An expression linear in one symbol fixes it; one with no integer solution
// is a contradiction; a product of symbols is recorded without a binding.
TEST(ShapeEnv, UnifySolvesEqualitiesLinearInASymbol) {
  ShapeEnv env;
  for (const char* s : {"b", "c", "d", "e", "f"}) env.declare(s);
  auto dim = [](const char* text) { return Dim(*SymExpr::parse(text)); };
  EXPECT_TRUE(env.unify(dim("b+1"), Dim(24)));
  EXPECT_EQ(env.canonical(dim("b")).str(), "23");
  EXPECT_TRUE(env.unify(dim("c*2"), dim("d*4")));  // fixes c: d = c/2 is not integral
  EXPECT_EQ(env.canonical(dim("d")).str(), "d");
  EXPECT_EQ(env.canonical(dim("c")).str(), "d*2");
  EXPECT_FALSE(env.unify(dim("e*2"), Dim(23)));
  EXPECT_EQ(env.canonical(dim("e")).str(), "e");
  EXPECT_FALSE(env.unify(dim("e"), dim("e+1")));
  const size_t learned = env.equalities().size();
  EXPECT_TRUE(env.unify(dim("e*f"), Dim(24)));
  EXPECT_EQ(env.canonical(dim("e*f")).str(), "e*f");
  EXPECT_EQ(env.equalities().size(), learned + 1);
}

// A symbol inside a division is no linear unknown: (b*s*8)//(s*256) == 2 (a
// reshape's -1 that does not divide) is recorded, solves nothing, and setting
// s to 0 to isolate it (which divided by zero) is never tried.
TEST(ShapeEnv, UnifyLeavesSymbolsInsideDivisionsAlone) {
  ShapeEnv env;
  for (const char* s : {"b", "s"}) env.declare(s);
  Dim q(*SymExpr::parse("b*s*8"));
  q = Dim(q.expr().floordiv(*SymExpr::parse("s*256")));
  ASSERT_TRUE(q.expr().mentions_in_division("s"));
  EXPECT_FALSE(SymExpr::parse("b+s")->mentions_in_division("s"));
  const size_t learned = env.equalities().size();
  EXPECT_TRUE(env.unify(q, Dim(2)));
  EXPECT_EQ(env.equalities().size(), learned + 1);
  EXPECT_EQ(env.canonical(Dim(*SymExpr::parse("s"))).str(), "s");
}

}  // namespace
}  // namespace tcc
