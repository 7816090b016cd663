// One definition of the draws (random_stream.h) over two arithmetics: host
// integers and doubles for the reference kernels, kernel-expression values
// for the generated kernels. Words are kept in 64-bit unsigned integers below
// 2^32, so a 32 x 32-bit product is exact and its high and low halves are a
// shift and a mask.
#include "src/ops/random_stream.h"

#include <cmath>
#include <cstring>

#include "src/ir/graph.h"
#include "src/ops/pointwise.h"

namespace tcc {

namespace {

constexpr uint32_t kMultiplier0 = 0xD2511F53u, kMultiplier1 = 0xCD9E8D57u;
constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;  // the key's bump per round
constexpr double kTwoPi = 6.283185307179586476925286766559;
constexpr double kTwoToMinus53 = 1.0 / 9007199254740992.0;

// The reference kernels' arithmetic.
struct HostArithmetic {
  using Word = uint64_t;
  using Real = double;
  Word word(uint32_t k) { return k; }
  Word times(Word x, uint32_t m) { return x * m; }
  Word high(Word x) { return x >> 32; }
  Word low(Word x) { return x & 0xFFFFFFFFu; }
  Word bit_xor(Word x, Word y) { return x ^ y; }
  Real unit(Word w0, Word w1) { return static_cast<double>((w0 << 21) | (w1 >> 11)) * kTwoToMinus53; }
  Real one_minus(Real x) { return 1.0 - x; }
  Real scale(Real x, double c) { return c * x; }
  Real product(Real x, Real y) { return x * y; }
  Real log(Real x) { return std::log(x); }
  Real sqrt(Real x) { return std::sqrt(x); }
  Real cos(Real x) { return std::cos(x); }
};

// The generated kernels' arithmetic: the same steps as instructions.
struct KernelArithmetic {
  using Word = int;
  using Real = int;
  ScalarBuilder& b;
  Word word(uint32_t k) { return b.constant(DType::U64, k); }
  Word times(Word x, uint32_t m) { return b.op(ScalarOp::Mul, DType::U64, {x, word(m)}); }
  Word high(Word x) { return b.op(ScalarOp::ShiftRight, DType::U64, {x, word(32)}); }
  Word low(Word x) { return b.op(ScalarOp::BitAnd, DType::U64, {x, word(0xFFFFFFFFu)}); }
  Word bit_xor(Word x, Word y) { return b.op(ScalarOp::BitXor, DType::U64, {x, y}); }
  Real unit(Word w0, Word w1) {
    int bits = b.op(ScalarOp::BitOr, DType::U64,
                    {b.op(ScalarOp::ShiftLeft, DType::U64, {w0, word(21)}),
                     b.op(ScalarOp::ShiftRight, DType::U64, {w1, word(11)})});
    return scale(b.op(ScalarOp::Cast, DType::F64, {bits}), kTwoToMinus53);
  }
  Real one_minus(Real x) { return b.op(ScalarOp::Sub, DType::F64, {b.constant(DType::F64, 1.0), x}); }
  Real scale(Real x, double c) { return b.op(ScalarOp::Mul, DType::F64, {b.constant(DType::F64, c), x}); }
  Real product(Real x, Real y) { return b.op(ScalarOp::Mul, DType::F64, {x, y}); }
  Real log(Real x) { return b.op(ScalarOp::Log, DType::F64, {x}); }
  Real sqrt(Real x) { return b.op(ScalarOp::Sqrt, DType::F64, {x}); }
  Real cos(Real x) { return b.op(ScalarOp::Cos, DType::F64, {x}); }
};

// Philox4x32-10's rounds: each multiplies words 0 and 2 by the round's
// constants and crosses the products' halves with words 1 and 3 and the key,
// which grows by the Weyl constants between rounds.
template <class A>
std::array<typename A::Word, 4> rounds(A& a, std::array<typename A::Word, 4> c, PhiloxKey key) {
  using Word = typename A::Word;
  for (int round = 0; round < 10; ++round) {
    if (round > 0) key = {key[0] + kWeyl0, key[1] + kWeyl1};
    Word p0 = a.times(c[0], kMultiplier0), p1 = a.times(c[2], kMultiplier1);
    c = {a.bit_xor(a.bit_xor(a.high(p1), c[1]), a.word(key[0])), a.low(p1),
         a.bit_xor(a.bit_xor(a.high(p0), c[3]), a.word(key[1])), a.low(p0)};
  }
  return c;
}

// The block of element `index` at random offset `offset` (Words holding all
// 64 bits of each).
template <class A>
std::array<typename A::Word, 4> block(A& a, typename A::Word index, typename A::Word offset, PhiloxKey key) {
  return rounds(a, {a.low(index), a.high(index), a.low(offset), a.high(offset)}, key);
}

template <class A>
typename A::Real uniform(A& a, typename A::Word index, typename A::Word offset, PhiloxKey key) {
  auto w = block(a, index, offset, key);
  return a.unit(w[0], w[1]);
}

template <class A>
typename A::Real normal(A& a, typename A::Word index, typename A::Word offset, PhiloxKey key) {
  auto w = block(a, index, offset, key);
  auto radius = a.sqrt(a.scale(a.log(a.one_minus(a.unit(w[0], w[1]))), -2.0));
  return a.product(radius, a.cos(a.scale(a.unit(w[2], w[3]), kTwoPi)));
}

// The point's row-major position in n's output 0, as a u64.
int element_index(const Node& n, ScalarBuilder& b) {
  const Dims& shape = n.output(0)->type().shape();
  int index = b.constant(DType::I64, 0);
  SymExpr stride = SymExpr::constant(1);
  for (size_t axis = shape.size(); axis-- > 0;) {
    int step = stride.is_constant() ? b.constant(DType::I64, static_cast<double>(stride.constant_value()))
                                    : b.size(DType::I64, stride);
    int term = b.op(ScalarOp::Mul, DType::I64, {b.coordinate(n, static_cast<int>(axis)), step});
    index = b.op(ScalarOp::Add, DType::I64, {index, term});
    stride = stride * shape[axis].expr();
  }
  return b.op(ScalarOp::Cast, DType::U64, {index});
}

}  // namespace

PhiloxBlock philox4x32_10(PhiloxBlock counter, PhiloxKey key) {
  HostArithmetic a;
  std::array<uint64_t, 4> words = rounds(a, {counter[0], counter[1], counter[2], counter[3]}, key);
  return {static_cast<uint32_t>(words[0]), static_cast<uint32_t>(words[1]), static_cast<uint32_t>(words[2]),
          static_cast<uint32_t>(words[3])};
}

PhiloxKey random_key(const Node& n) {
  const Attribute* seed = n.attr("seed");
  float value = seed == nullptr                        ? 0.0f
                : seed->kind == Attribute::Kind::Int ? static_cast<float>(seed->i)
                                                       : seed->f;
  uint32_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  return {bits, 0};
}

double uniform_draw(PhiloxKey key, int64_t index, uint64_t offset) {
  HostArithmetic a;
  return uniform(a, static_cast<uint64_t>(index), offset, key);
}

double normal_draw(PhiloxKey key, int64_t index, uint64_t offset) {
  HostArithmetic a;
  return normal(a, static_cast<uint64_t>(index), offset, key);
}

int uniform_draw(const Node& n, ScalarBuilder& b) {
  KernelArithmetic a{b};
  int index = element_index(n, b);
  return uniform(a, index, b.random_offset(), random_key(n));
}

int normal_draw(const Node& n, ScalarBuilder& b) {
  KernelArithmetic a{b};
  int index = element_index(n, b);
  return normal(a, index, b.random_offset(), random_key(n));
}

}  // namespace tcc
