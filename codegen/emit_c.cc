#include "codegen/emit_c.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <set>
#include <string_view>

#include "src/diag/errors.h"
#include "src/ops/kernel_roles.h"

namespace tcc::emitc {

namespace {

using kir::Instr;
using kir::Op;

// Helpers both targets share; TCC_FN is `static inline` on the host and
// `__device__ __forceinline__` on CUDA. The f16 and bf16 conversions round to
// nearest even, as src/ir/dtype.cc does.
constexpr std::string_view kCommonPrelude = R"(TCC_FN float tcc_bf2f(uint16_t b) { return tcc_bits_float((uint32_t)b << 16); }
TCC_FN uint16_t tcc_f2bf(float f) {
  uint32_t x = tcc_float_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u);
  return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}
TCC_FN int64_t tcc_fdiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  return a % b != 0 && ((a < 0) != (b < 0)) ? q - 1 : q;
}
TCC_FN int64_t tcc_sdiv(int64_t a, int64_t b) { return b == 0 ? 0 : b == -1 ? (int64_t)(0 - (uint64_t)a) : a / b; }
TCC_FN uint64_t tcc_udiv(uint64_t a, uint64_t b) { return b == 0 ? 0 : a / b; }
TCC_FN int64_t tcc_smod(int64_t a, int64_t b) {
  if (b == 0 || b == -1) return 0;
  int64_t r = a % b;
  return r != 0 && ((r < 0) != (b < 0)) ? r + b : r;
}
TCC_FN int64_t tcc_sfmod(int64_t a, int64_t b) { return b == 0 || b == -1 ? 0 : a % b; }
TCC_FN uint64_t tcc_umod(uint64_t a, uint64_t b) { return b == 0 ? 0 : a % b; }
TCC_FN float tcc_mod(float a, float b) {
  float r = fmodf(a, b);
  if (r != r) return r;
  if (r == 0) return copysignf(0.0f, b);
  return (r < 0) != (b < 0) ? r + b : r;
}
TCC_FN double tcc_mod(double a, double b) {
  double r = fmod(a, b);
  if (r != r) return r;
  if (r == 0) return copysign(0.0, b);
  return (r < 0) != (b < 0) ? r + b : r;
}
TCC_FN int64_t tcc_ipow(int64_t b, int64_t e) {
  if (e < 0) return b == 1 ? 1 : b == -1 ? (e % 2 ? -1 : 1) : 0;
  uint64_t r = 1, x = (uint64_t)b;
  for (; e > 0; e >>= 1) {
    if (e & 1) r *= x;
    x *= x;
  }
  return (int64_t)r;
}
template <class T> TCC_FN T tcc_max(T a, T b) { return a != a || b != b ? a + b : a < b ? b : a; }
template <class T> TCC_FN T tcc_min(T a, T b) { return a != a || b != b ? a + b : b < a ? b : a; }
template <class T> TCC_FN T tcc_f2i(double v, T lo, T hi) {
  return v != v ? (T)0 : v <= (double)lo ? lo : v >= (double)hi ? hi : (T)v;
}
)";

constexpr std::string_view kHostPrelude = R"(#include <cmath>
#include <cstdint>
#include <cstring>
#define TCC_FN static inline
TCC_FN float tcc_bits_float(uint32_t b) { float f; std::memcpy(&f, &b, 4); return f; }
TCC_FN uint32_t tcc_float_bits(float f) { uint32_t b; std::memcpy(&b, &f, 4); return b; }
TCC_FN double tcc_bits_double(uint64_t b) { double d; std::memcpy(&d, &b, 8); return d; }
TCC_FN float tcc_h2f(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  if (exp == 0) return tcc_bits_float(tcc_float_bits((float)mant * 5.9604644775390625e-08f) | sign);
  if (exp == 31) return tcc_bits_float(sign | 0x7f800000u | (mant << 13));
  return tcc_bits_float(sign | ((exp + 112) << 23) | (mant << 13));
}
TCC_FN uint16_t tcc_f2h(float f) {
  uint32_t x = tcc_float_bits(f), sign = (x >> 16) & 0x8000u, a = x & 0x7fffffffu;
  if (a >= 0x7f800000u) return (uint16_t)(sign | 0x7c00u | (a > 0x7f800000u ? 0x200u : 0u));
  if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);
  if (a < 0x38800000u) return (uint16_t)(sign | (uint32_t)rintf(tcc_bits_float(a) * 16777216.0f));
  uint32_t h = (((a >> 23) - 112) << 10) | ((a & 0x7fffffu) >> 13), rest = a & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;
  return (uint16_t)(sign | h);
}
)";

// NVRTC compiles without the C library headers: fixed-width types are defined
// here, f16 conversions are single PTX instructions.
constexpr std::string_view kCudaPrelude = R"(typedef signed char int8_t;
typedef short int16_t;
typedef int int32_t;
typedef long long int64_t;
typedef unsigned char uint8_t;
typedef unsigned short uint16_t;
typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;
#define TCC_FN __device__ __forceinline__
TCC_FN float tcc_bits_float(uint32_t b) { return __uint_as_float(b); }
TCC_FN uint32_t tcc_float_bits(float f) { return __float_as_uint(f); }
TCC_FN double tcc_bits_double(uint64_t b) { return __longlong_as_double((long long)b); }
TCC_FN float tcc_h2f(uint16_t h) { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f; }
TCC_FN uint16_t tcc_f2h(float f) { uint16_t h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; }
)";

// Block-wide reduction for blocks of whole warps: each warp combines its lanes
// with shuffles, warp results meet in shared memory, and every warp combines
// those, so all threads return the block's result without another barrier.
constexpr std::string_view kCudaReduce = R"(struct tcc_sum { template <class T> TCC_FN T operator()(T a, T b) const { return a + b; } };
struct tcc_prod { template <class T> TCC_FN T operator()(T a, T b) const { return a * b; } };
struct tcc_maxop { template <class T> TCC_FN T operator()(T a, T b) const { return tcc_max(a, b); } };
struct tcc_minop { template <class T> TCC_FN T operator()(T a, T b) const { return tcc_min(a, b); } };
template <class T, class Op> TCC_FN T tcc_block_reduce(T v, Op op, T identity) {
  __shared__ T partial[32];
  for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  __syncthreads();
  if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = v;
  __syncthreads();
  v = (threadIdx.x & 31) < (blockDim.x >> 5) ? partial[threadIdx.x & 31] : identity;
  for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
)";

// Inclusive scan (sum) of v over the block's threads in x order, for blocks of
// whole warps: each warp scans its lanes with shuffles, warps' sums meet in
// shared memory, and each thread adds those of the warps before its own.
// *total is the block's sum, for the next tile's carry.
constexpr std::string_view kCudaScan = R"(template <class T> TCC_FN T tcc_block_scan(T v, T* total) {
  __shared__ T warp_sums[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (int o = 1; o < 32; o <<= 1) {
    T u = __shfl_up_sync(0xffffffffu, v, o);
    if (lane >= o) v += u;
  }
  __syncthreads();
  if (lane == 31) warp_sums[warp] = v;
  __syncthreads();
  T before = 0, all = 0;
  for (int w = 0; w < (int)(blockDim.x >> 5); ++w) {
    if (w < warp) before += warp_sums[w];
    all += warp_sums[w];
  }
  *total = all;
  return v + before;
}
)";

// A combining store's atomic update of an element of 4 or 8 bytes: read it,
// combine, and compare-and-swap the bits, again until no other thread wrote
// the element between the read and the swap.
constexpr std::string_view kCudaAtomic = R"(template <int N> struct tcc_word;
template <> struct tcc_word<4> { typedef unsigned int type; };
template <> struct tcc_word<8> { typedef unsigned long long type; };
template <class T, class Op> TCC_FN void tcc_atomic(T* p, T v, Op op) {
  typedef typename tcc_word<sizeof(T)>::type W;
  union { W w; T t; } seen, next;
  seen.w = *(volatile W*)p;
  for (;;) {
    next.t = op(seen.t, v);
    W before = atomicCAS((W*)p, seen.w, next.w);
    if (before == seen.w) return;
    seen.w = before;
  }
}
)";

// Translates SymExpr's canonical text (+, -, *, //, parentheses, integers and
// symbol names) to C++, which needs floor division spelled as a call.
class SizeExprPrinter {
 public:
  explicit SizeExprPrinter(const std::string& text) : t_(text) {}
  std::string run() {
    std::string e = expr();
    TCC_CHECK(p_ == t_.size()) << "unexpected text in size expression '" << t_ << "' at " << p_;
    return e;
  }

 private:
  bool eat(std::string_view tok) {
    if (t_.compare(p_, tok.size(), tok) != 0) return false;
    p_ += tok.size();
    return true;
  }
  std::string expr() {
    std::string e = term();
    for (;;) {
      if (eat("+")) e += " + " + term();
      else if (eat("-")) e += " - " + term();
      else return e;
    }
  }
  std::string term() {
    std::string e = unary();
    for (;;) {
      if (eat("//")) e = "tcc_fdiv(" + e + ", " + unary() + ")";
      else if (eat("*")) e += "*" + unary();
      else return e;
    }
  }
  std::string unary() { return eat("-") ? "-" + unary() : atom(); }
  std::string atom() {
    TCC_CHECK(p_ < t_.size()) << "truncated size expression '" << t_ << "'";
    if (eat("(")) {
      std::string e = expr();
      TCC_CHECK(eat(")")) << "unbalanced size expression '" << t_ << "'";
      return "(" + e + ")";
    }
    size_t s = p_;
    if (std::isdigit(static_cast<unsigned char>(t_[p_]))) {
      while (p_ < t_.size() && std::isdigit(static_cast<unsigned char>(t_[p_]))) ++p_;
      return t_.substr(s, p_ - s);
    }
    while (p_ < t_.size() && (std::isalnum(static_cast<unsigned char>(t_[p_])) || t_[p_] == '_')) ++p_;
    TCC_CHECK(p_ > s) << "unexpected character in size expression '" << t_ << "'";
    return size_var(t_.substr(s, p_ - s));
  }

  const std::string& t_;
  size_t p_ = 0;
};

bool is_small_float(DType t) { return t == DType::F16 || t == DType::BF16; }
bool computes_in_float(DType t) { return t == DType::F32 || is_small_float(t) || is_fp8(t) || t == DType::F4E2M1; }
bool is_unsigned(DType t) { return is_integer(t) && !is_signed(t); }

std::string v(int i) { return "v" + std::to_string(i); }

// "(x)" unless x is already one token.
std::string paren(const std::string& x) {
  bool token = std::all_of(x.begin(), x.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
  return token ? x : "(" + x + ")";
}

std::string print_double(double d, int digits) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.*g", digits, d);
  std::string s = buf;
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return s;
}

// The bounds tcc_f2i saturates to, as C++ integer literals.
std::pair<std::string, std::string> int_bounds(DType t) {
  switch (t) {
    case DType::I8: return {"-128", "127"};
    case DType::I16: return {"-32768", "32767"};
    case DType::I32: return {"(-2147483647 - 1)", "2147483647"};
    case DType::I64: return {"(-9223372036854775807LL - 1)", "9223372036854775807LL"};
    case DType::U8: return {"0", "255"};
    case DType::U16: return {"0", "65535"};
    case DType::U32: return {"0", "4294967295u"};
    case DType::U64: return {"0", "18446744073709551615ull"};
    default: TCC_CHECK(false) << "no integer bounds for " << dtype_name(t); return {};
  }
}

// A C math function for the compute type: expf for float, exp for double.
std::string math(const char* name, DType t, const std::string& args) {
  TCC_CHECK(is_float(t)) << name << " on " << dtype_name(t);
  return std::string(name) + (computes_in_float(t) ? "f" : "") + "(" + args + ")";
}

// Integer arithmetic wraps around in 64 bits, as the interpreter's does, without
// signed overflow: operands go through uint64_t and the result back to T.
std::string wrapping(const char* op, DType t, const std::string& a, const std::string& b) {
  return "(" + std::string(compute_type(t)) + ")((uint64_t)" + a + " " + op + " (uint64_t)" + b + ")";
}

const Instr& arg(const kir::Kernel& k, const Instr& in, size_t a) {
  TCC_CHECK(a < in.args.size()) << op_name(in.op) << " in kernel " << k.name << " lacks argument " << a;
  return k.body.at(static_cast<size_t>(in.args[a]));
}

// The conversions between float and the 8-bit float t, spelled out from its
// format for both targets (CUDA's cuda_fp8.h has only two of the four types):
// tcc_<t>2f decodes exactly, tcc_f2<t> rounds to nearest even, saturating or
// not, as fp8_to_float and float_to_fp8 (src/ir/dtype.cc) do.
std::string fp8_conversions(DType t) {
  const Fp8Format f = fp8_format(t);
  const std::string name(dtype_name(t)), m = std::to_string(f.mantissa), max = std::to_string(f.max_code) + "u";
  const std::string mask = std::to_string((1 << f.mantissa) - 1) + "u", emin = std::to_string(1 - f.bias);
  const std::string nan = f.fnuz ? "0x80u" : "sign | 0x7fu";
  std::string s = "TCC_FN float tcc_" + name + "2f(uint8_t b) {\n";
  s += "  uint32_t sign = (uint32_t)(b & 0x80u) << 24, code = b & 0x7fu;\n";
  if (f.fnuz) s += "  if (b == 0x80u) return tcc_bits_float(0x7fc00000u);\n";
  if (f.inf) s += "  if (code == " + max + " + 1u) return tcc_bits_float(sign | 0x7f800000u);\n";
  if (f.max_code < 0x7f) s += "  if (code > " + max + ") return tcc_bits_float(sign | 0x7fc00000u);\n";
  s += "  if ((code >> " + m + ") == 0) return tcc_bits_float(sign | tcc_float_bits((float)code * " +
       print_double(std::ldexp(1.0, 1 - f.bias - f.mantissa), 17) + "f));\n";
  s += "  return tcc_bits_float(sign | (((code >> " + m + ") + " + std::to_string(127 - f.bias) + "u) << 23) | ((code & " +
       mask + ") << " + std::to_string(23 - f.mantissa) + "));\n}\n";
  s += "TCC_FN uint8_t tcc_f2" + name + "(float v, bool saturate) {\n";
  s += "  uint32_t x = tcc_float_bits(v), sign = (x >> 24) & 0x80u, a = x & 0x7fffffffu;\n";
  s += "  if (a > 0x7f800000u) return (uint8_t)(" + nan + ");\n";
  s += "  uint32_t code = " + max + " + 1u;\n";
  s += "  if (a < 0x7f800000u) {\n";
  s += "    int e = (int)(a >> 23) - 127, shift = " + std::to_string(23 - f.mantissa) + " + (e < " + emin + " ? " + emin +
       " - e : 0);\n";
  s += "    uint32_t m = (a & 0x7fffffu) | (a >= 0x800000u ? 0x800000u : 0u);\n";
  s += "    code = 0;\n";
  s += "    if (shift <= 25) {\n";
  s += "      uint32_t rest = m & ((1u << shift) - 1u), half = 1u << (shift - 1);\n";
  s += "      code = m >> shift;\n";
  s += "      if (e >= " + emin + ") code = ((uint32_t)(e - (" + emin + ") + 1) << " + m + ") | (code & " + mask + ");\n";
  s += "      if (rest > half || (rest == half && (code & 1u))) ++code;\n";
  s += "    }\n  }\n";
  s += "  if (code > " + max + ") return (uint8_t)(saturate ? sign | " + max + " : " +
       (f.inf ? "sign | (" + max + " + 1u)" : nan) + ");\n";
  s += std::string("  return (uint8_t)(") + (f.fnuz ? "code == 0 ? 0u : " : "") + "sign | code);\n}\n";
  return s;
}

// The conversions of a 4-bit type, as src/ir/dtype.cc's: tcc_f4e2m12f decodes
// an f4e2m1 code, (2 + mantissa) * 2^(exponent - 2) or mantissa / 2 when the
// exponent is 0; tcc_f2f4e2m1 rounds to nearest even between the codes'
// midpoints and saturates, NaN to 0x8; tcc_i4 and tcc_u4 keep an integer's low
// four bits, i4 sign-extended.
std::string four_bit_conversions(DType t) {
  switch (t) {
    case DType::F4E2M1:
      return "TCC_FN float tcc_f4e2m12f(uint8_t b) {\n"
             "  uint32_t e = (b >> 1) & 3u, mant = b & 1u;\n"
             "  float a = e == 0 ? 0.5f * (float)mant : (float)(2u + mant) * tcc_bits_float((e + 125u) << 23);\n"
             "  return (b & 8u) ? -a : a;\n"
             "}\n"
             "TCC_FN uint8_t tcc_f2f4e2m1(float v) {\n"
             "  uint32_t x = tcc_float_bits(v), sign = (x >> 28) & 8u;\n"
             "  float a = tcc_bits_float(x & 0x7fffffffu);\n"
             "  if (a != a) return 8u;\n"
             "  return (uint8_t)(sign | (a <= 0.25f ? 0u : a < 0.75f ? 1u : a <= 1.25f ? 2u : a < 1.75f ? 3u\n"
             "                         : a <= 2.5f ? 4u : a < 3.5f ? 5u : a <= 5.0f ? 6u : 7u));\n"
             "}\n";
    case DType::I4: return "TCC_FN int8_t tcc_i4(int64_t v) { return (int8_t)(((v & 15) ^ 8) - 8); }\n";
    case DType::U4: return "TCC_FN uint8_t tcc_u4(int64_t v) { return (uint8_t)(v & 15); }\n";
    default: TCC_CHECK(false) << dtype_name(t) << " is not a 4-bit type"; return "";
  }
}

}  // namespace

std::string prelude(Target t, const std::vector<kir::Kernel>& kernels) {
  std::string s(t == Target::Host ? kHostPrelude : kCudaPrelude);
  s += kCommonPrelude;
  std::set<DType> narrow;
  for (const kir::Kernel& k : kernels) {
    for (const kir::Buffer& b : k.buffers)
      if (is_fp8(b.dtype) || is_4bit(b.dtype)) narrow.insert(b.dtype);
    for (const Instr& in : k.body)
      if (is_fp8(in.dtype) || is_4bit(in.dtype)) narrow.insert(in.dtype);
  }
  for (DType f : narrow) s += is_fp8(f) ? fp8_conversions(f) : four_bit_conversions(f);
  if (t == Target::Cuda) {
    s += kCudaReduce;
    s += kCudaScan;
    s += kCudaAtomic;
  }
  return s;
}

std::string size_var(const std::string& symbol) { return "s_" + symbol; }

std::string size_expr(const SymExpr& e) { return SizeExprPrinter(e.str()).run(); }

bool divisible_by(const SymExpr& e, int64_t d) { return e.exact_div(SymExpr::constant(d)).has_value(); }

std::string cuda_signature(const kir::Kernel& k, bool workspace, int launch_bound, int min_blocks) {
  std::string out = "extern \"C\" __global__ ";
  if (launch_bound > 0)
    out += "__launch_bounds__(" + std::to_string(launch_bound) +
           (min_blocks > 0 ? ", " + std::to_string(min_blocks) : std::string()) + ") ";
  out += "void " + k.name + "(";
  std::string sep;
  for (size_t b = 0; b < k.buffers.size(); ++b) {
    const kir::Buffer& buf = k.buffers[b];
    out += sep + (buf.output ? "" : "const ") + storage_type(buf.dtype) + "* __restrict__ p" + std::to_string(b);
    sep = ", ";
  }
  for (const std::string& s : k.size_params) {
    out += sep + "int64_t " + size_var(s);
    sep = ", ";
  }
  if (workspace) {
    out += sep + "void* __restrict__ ws";
    sep = ", ";
  }
  if (kir::draws_random(k)) out += sep + "const uint64_t* __restrict__ ro";
  return out + ") {\n";
}

std::string host_signature(const kir::Kernel& k) {
  std::string out = "extern \"C\" void " + k.name + "(void* const* buffers, const int64_t* sizes) {\n";
  for (size_t b = 0; b < k.buffers.size(); ++b) {
    const kir::Buffer& buf = k.buffers[b];
    std::string type = std::string(buf.output ? "" : "const ") + storage_type(buf.dtype) + "*";
    out += "  " + type + " p" + std::to_string(b) + " = (" + type + ")buffers[" + std::to_string(b) + "];\n";
  }
  for (size_t s = 0; s < k.size_params.size(); ++s)
    out += "  const int64_t " + size_var(k.size_params[s]) + " = sizes[" + std::to_string(s) + "];\n";
  if (kir::draws_random(k))
    out += "  const uint64_t* ro = (const uint64_t*)buffers[" + std::to_string(k.buffers.size()) + "];\n";
  return out + "  (void)buffers;\n  (void)sizes;\n";
}

namespace {

std::string random_offset_advance(Target t) {
  if (t == Target::Cuda)
    return std::string("\nextern \"C\" __global__ void ") + kRandomOffsetAdvance + "(uint64_t* ro) { *ro += 1; }\n";
  return std::string("\nextern \"C\" void ") + kRandomOffsetAdvance +
         "(void* const* buffers, const int64_t*) { *(uint64_t*)buffers[0] += 1; }\n";
}

// conv_epilogue_kernel(y)'s definition: on CUDA a block row per plane striding
// along it, on the host a loop over the planes.
std::string conv_epilogue(DType y, Target t) {
  const std::string name = conv_epilogue_kernel(y), store = storage_type(y), compute = compute_type(y);
  const std::string zero = "(" + compute + ")0";
  // One element's update and one plane's setup, each line led by `in`.
  auto element = [&](const std::string& at, const std::string& in) {
    return in + compute + " v = " + decode("row[" + at + "]", y) + " + b;\n" +
           in + "if (res) v += " + decode("res[" + at + "]", y) + ";\n" +
           in + "if (relu && v < " + zero + ") v = " + zero + ";\n" +
           in + "row[" + at + "] = " + encode("v", y) + ";\n";
  };
  auto plane_setup = [&](const std::string& p, const std::string& in) {
    return in + "const " + compute + " b = bias ? " + decode("bias[" + p + " % channels]", y) + " : " + zero + ";\n" +
           in + store + "* row = y + " + p + " * plane;\n" +
           in + "const " + store + "* res = residual ? residual + " + p + " * plane : nullptr;\n";
  };
  if (t == Target::Cuda)
    return "\nextern \"C\" __global__ void " + name + "(" + store + "* y, const " + store + "* bias, const " + store +
           "* residual, int64_t planes, int64_t plane, int64_t channels, int64_t relu) {\n" +
           "  (void)planes;\n" + plane_setup("(int64_t)blockIdx.x", "  ") +
           "  for (int64_t i = (int64_t)blockIdx.y * blockDim.x + threadIdx.x; i < plane;\n"
           "       i += (int64_t)gridDim.y * blockDim.x) {\n" +
           element("i", "    ") + "  }\n}\n";
  return "\nextern \"C\" void " + name + "(void* const* buffers, const int64_t* sizes) {\n" +
         "  " + store + "* y = (" + store + "*)buffers[0];\n" +
         "  const " + store + "* bias = (const " + store + "*)buffers[1];\n" +
         "  const " + store + "* residual = (const " + store + "*)buffers[2];\n" +
         "  const int64_t planes = sizes[0], plane = sizes[1], channels = sizes[2], relu = sizes[3];\n" +
         "  for (int64_t p = 0; p < planes; ++p) {\n" + plane_setup("p", "    ") +
         "    for (int64_t i = 0; i < plane; ++i) {\n" + element("i", "      ") + "    }\n  }\n}\n";
}

}  // namespace

std::string module_helpers(const std::vector<kir::Kernel>& kernels, Target t) {
  std::string out;
  if (std::any_of(kernels.begin(), kernels.end(), kir::draws_random)) out += random_offset_advance(t);
  std::set<DType> epilogues;
  for (const kir::Kernel& k : kernels) {
    if (k.kind != kir::Kind::Conv || !k.conv->has_epilogue()) continue;
    auto y = std::find_if(k.buffers.begin(), k.buffers.end(), [](const kir::Buffer& b) { return b.output; });
    TCC_CHECK(y != k.buffers.end()) << "conv kernel " << k.name << " has no output";
    epilogues.insert(y->dtype);
  }
  for (DType y : epilogues) out += conv_epilogue(y, t);
  return out;
}

const char* compute_type(DType t) {
  switch (t) {
    case DType::F32:
    case DType::F16:
    case DType::BF16:
    case DType::F8E4M3FN:
    case DType::F8E4M3FNUZ:
    case DType::F8E5M2:
    case DType::F8E5M2FNUZ:
    case DType::F4E2M1: return "float";
    case DType::F64: return "double";
    case DType::I8:
    case DType::I4: return "int8_t";
    case DType::I16: return "int16_t";
    case DType::I32: return "int32_t";
    case DType::I64: return "int64_t";
    case DType::U8:
    case DType::U4: return "uint8_t";
    case DType::U16: return "uint16_t";
    case DType::U32: return "uint32_t";
    case DType::U64: return "uint64_t";
    case DType::Bool: return "bool";
    default: TCC_CHECK(false) << "kernels do not compute " << dtype_name(t); return "";
  }
}

const char* storage_type(DType t) {
  if (is_small_float(t)) return "uint16_t";
  if (t == DType::Bool || is_fp8(t) || t == DType::F4E2M1) return "uint8_t";
  return compute_type(t);
}

const char* accumulator_type(DType t) {
  if (is_float(t)) return compute_type(t);
  TCC_CHECK(is_integer(t)) << "reductions of " << dtype_name(t) << " are not generated";
  return is_signed(t) ? "int64_t" : "uint64_t";
}

std::string convert(const std::string& x, DType from, DType to) {
  if (from == to) return x;
  std::string as_float = computes_in_float(from) ? x
                         : is_integer(from)      ? "(float)(double)" + paren(x)
                                                 : "(float)" + paren(x);
  if (is_fp8(to)) return decode("tcc_f2" + std::string(dtype_name(to)) + "(" + as_float + ", true)", to);
  if (to == DType::F4E2M1) return decode("tcc_f2f4e2m1(" + as_float + ")", to);
  if (to == DType::I4 || to == DType::U4) {  // through int64, wrapping as Tensor::set_f64 and set_i64 do
    const std::string wide = is_float(from) ? convert(x, from, DType::I64) : "(int64_t)" + paren(x);
    return "tcc_" + std::string(dtype_name(to)) + "(" + wide + ")";
  }
  switch (to) {
    case DType::F16: return "tcc_h2f(tcc_f2h(" + as_float + "))";
    case DType::BF16: return "tcc_bf2f(tcc_f2bf(" + as_float + "))";
    case DType::F32: return as_float;
    case DType::F64: return "(double)" + paren(x);
    case DType::Bool: return "(" + paren(x) + " != 0)";
    default: break;
  }
  TCC_CHECK(is_integer(to)) << "cast to " << dtype_name(to);
  if (is_float(from)) {
    auto [lo, hi] = int_bounds(to);
    return "tcc_f2i<" + std::string(compute_type(to)) + ">((double)" + paren(x) + ", " + lo + ", " + hi + ")";
  }
  return "(" + std::string(compute_type(to)) + ")" + paren(x);
}

std::string decode(const std::string& element, DType stored) {
  if (stored == DType::F16) return "tcc_h2f(" + element + ")";
  if (stored == DType::BF16) return "tcc_bf2f(" + element + ")";
  if (is_fp8(stored) || stored == DType::F4E2M1)
    return "tcc_" + std::string(dtype_name(stored)) + "2f(" + element + ")";
  if (stored == DType::Bool) return "(" + element + " != 0)";
  return element;
}

std::string encode(const std::string& value, DType stored) {
  if (stored == DType::F16) return "tcc_f2h(" + value + ")";
  if (stored == DType::BF16) return "tcc_f2bf(" + value + ")";
  if (is_fp8(stored)) return "tcc_f2" + std::string(dtype_name(stored)) + "(" + value + ", false)";
  if (stored == DType::F4E2M1) return "tcc_f2f4e2m1(" + value + ")";
  if (stored == DType::Bool) return "(uint8_t)" + paren(value);
  return value;
}

std::string literal(double d, DType t) {
  if (is_float(t)) {
    bool single = computes_in_float(t);
    if (std::isnan(d)) return single ? "tcc_bits_float(0x7fc00000u)" : "tcc_bits_double(0x7ff8000000000000ull)";
    if (std::isinf(d))
      return std::string(d < 0 ? "-" : "") + (single ? "tcc_bits_float(0x7f800000u)" : "tcc_bits_double(0x7ff0000000000000ull)");
    return single ? print_double(static_cast<float>(d), 9) + "f" : print_double(d, 17);
  }
  if (t == DType::Bool) return d != 0 ? "true" : "false";
  TCC_CHECK(is_integer(t)) << "constant of " << dtype_name(t);
  if (t == DType::U64) return std::to_string(d >= 18446744073709551615.0 ? UINT64_MAX : static_cast<uint64_t>(d)) + "ull";
  if (d <= -9223372036854775808.0) return "(int64_t)(-9223372036854775807LL - 1)";
  int64_t i = d >= 9223372036854775807.0 ? INT64_MAX : static_cast<int64_t>(d);
  return "(" + std::string(compute_type(t)) + ")" + paren(std::to_string(i) + (t == DType::I64 ? "LL" : ""));
}

std::string index_expr(const kir::Index& ix) {
  std::string s;
  for (size_t d = 0; d < ix.strides.size(); ++d) {
    const SymExpr& st = ix.strides[d];
    if (st == SymExpr()) continue;
    if (!s.empty()) s += " + ";
    s += "c" + std::to_string(d);
    if (st != SymExpr::constant(1)) s += "*" + paren(size_expr(st));
  }
  if (ix.offset != SymExpr()) s += (s.empty() ? "" : " + ") + paren(size_expr(ix.offset));
  return s.empty() ? "0" : s;
}

bool is_reduce(Op op) {
  return op == Op::ReduceSum || op == Op::ReduceMax || op == Op::ReduceMin || op == Op::ReduceProd;
}

std::string instr_expr(const kir::Kernel& k, int i) {
  const Instr& in = k.body.at(static_cast<size_t>(i));
  DType t = in.dtype;
  std::string T = compute_type(t);
  auto a = [&](size_t n) { return v(in.args.at(n)); };
  auto lit = [&](double d) { return literal(d, t); };
  bool flt = is_float(t);
  switch (in.op) {
    case Op::Const: return lit(in.value);
    case Op::SizeValue: return convert(paren(size_expr(in.size)), DType::I64, t);
    case Op::Coord: return convert("c" + std::to_string(in.axis), DType::I64, t);
    case Op::RandomOffset: return "(*ro)";
    case Op::Cast: return convert(a(0), arg(k, in, 0).dtype, t);
    case Op::Neg: return flt ? "-" + a(0) : wrapping("-", t, "0", a(0));
    case Op::Abs:
      if (flt) return math("fabs", t, a(0));
      return is_unsigned(t) ? a(0) : "(" + a(0) + " < 0 ? " + wrapping("-", t, "0", a(0)) + " : " + a(0) + ")";
    case Op::Exp: return math("exp", t, a(0));
    case Op::Log: return math("log", t, a(0));
    case Op::Sqrt: return math("sqrt", t, a(0));
    case Op::Tanh: return math("tanh", t, a(0));
    case Op::Erf: return math("erf", t, a(0));
    case Op::Sin: return math("sin", t, a(0));
    case Op::Cos: return math("cos", t, a(0));
    case Op::Tan: return math("tan", t, a(0));
    case Op::Asin: return math("asin", t, a(0));
    case Op::Acos: return math("acos", t, a(0));
    case Op::Atan: return math("atan", t, a(0));
    case Op::Sinh: return math("sinh", t, a(0));
    case Op::Cosh: return math("cosh", t, a(0));
    case Op::Asinh: return math("asinh", t, a(0));
    case Op::Acosh: return math("acosh", t, a(0));
    case Op::Atanh: return math("atanh", t, a(0));
    case Op::Floor: return math("floor", t, a(0));
    case Op::Ceil: return math("ceil", t, a(0));
    case Op::Round: return math("rint", t, a(0));  // halves to even in the default rounding mode
    case Op::Reciprocal: return lit(1) + " / " + a(0);
    case Op::Sigmoid: return lit(1) + " / (" + lit(1) + " + " + math("exp", t, "-" + a(0)) + ")";
    case Op::Relu: return "(" + a(0) + " < " + lit(0) + " ? " + lit(0) + " : " + a(0) + ")";
    case Op::Sign:
      if (flt) return "(" + a(0) + " > 0 ? " + lit(1) + " : " + a(0) + " < 0 ? " + lit(-1) + " : " + a(0) + " == " + a(0) + " ? " + lit(0) + " : " + a(0) + ")";
      return "(" + T + ")(" + a(0) + " > 0 ? 1 : " + a(0) + " < 0 ? -1 : 0)";
    case Op::Not: return "!" + a(0);
    case Op::BitNot: return "(" + T + ")~" + a(0);
    case Op::IsNaN: return "(" + a(0) + " != " + a(0) + ")";
    case Op::Add: return flt ? a(0) + " + " + a(1) : wrapping("+", t, a(0), a(1));
    case Op::Sub: return flt ? a(0) + " - " + a(1) : wrapping("-", t, a(0), a(1));
    case Op::Mul: return flt ? a(0) + " * " + a(1) : wrapping("*", t, a(0), a(1));
    case Op::Div:
      if (flt) return a(0) + " / " + a(1);
      return "(" + T + ")" + (is_signed(t) ? "tcc_sdiv(" : "tcc_udiv(") + a(0) + ", " + a(1) + ")";
    case Op::Mod:
      if (flt) return "tcc_mod(" + a(0) + ", " + a(1) + ")";
      return "(" + T + ")" + (is_signed(t) ? "tcc_smod(" : "tcc_umod(") + a(0) + ", " + a(1) + ")";
    case Op::Fmod:
      if (flt) return math("fmod", t, a(0) + ", " + a(1));
      return "(" + T + ")" + (is_signed(t) ? "tcc_sfmod(" : "tcc_umod(") + a(0) + ", " + a(1) + ")";
    case Op::Pow: {
      DType et = arg(k, in, 1).dtype;
      if (flt) {
        std::string e = compute_type(et) == T ? a(1) : "(" + T + ")" + a(1);
        return math("pow", t, a(0) + ", " + e);
      }
      if (is_float(et)) {
        auto [lo, hi] = int_bounds(t);
        return "tcc_f2i<" + T + ">(pow((double)" + a(0) + ", (double)" + a(1) + "), " + lo + ", " + hi + ")";
      }
      return "(" + T + ")tcc_ipow((int64_t)" + a(0) + ", (int64_t)" + a(1) + ")";
    }
    case Op::BitAnd: return "(" + T + ")(" + a(0) + " & " + a(1) + ")";
    case Op::BitOr: return "(" + T + ")(" + a(0) + " | " + a(1) + ")";
    case Op::BitXor: return "(" + T + ")(" + a(0) + " ^ " + a(1) + ")";
    case Op::ShiftLeft:
    case Op::ShiftRight: {
      // An amount outside [0, width) reads as at least the width once unsigned.
      std::string in_range = "(uint64_t)" + a(1) + " < " + std::to_string(dtype_size(t) * 8);
      std::string shifted = in.op == Op::ShiftLeft ? "(" + T + ")((uint64_t)" + a(0) + " << " + a(1) + ")"
                                                   : "(" + T + ")(" + a(0) + " >> " + a(1) + ")";
      std::string out = in.op == Op::ShiftRight && is_signed(t) ? "(" + T + ")(" + a(0) + " < 0 ? -1 : 0)" : lit(0);
      return "(" + in_range + " ? " + shifted + " : " + out + ")";
    }
    case Op::Max: return "tcc_max(" + a(0) + ", " + a(1) + ")";
    case Op::Min: return "tcc_min(" + a(0) + ", " + a(1) + ")";
    case Op::And: return "(" + a(0) + " && " + a(1) + ")";
    case Op::Or: return "(" + a(0) + " || " + a(1) + ")";
    case Op::Xor: return "(" + a(0) + " != " + a(1) + ")";
    case Op::Equal: return "(" + a(0) + " == " + a(1) + ")";
    case Op::Less: return "(" + a(0) + " < " + a(1) + ")";
    case Op::LessOrEqual: return "(" + a(0) + " <= " + a(1) + ")";
    case Op::Greater: return "(" + a(0) + " > " + a(1) + ")";
    case Op::GreaterOrEqual: return "(" + a(0) + " >= " + a(1) + ")";
    case Op::Where: return "(" + a(0) + " ? " + a(1) + " : " + a(2) + ")";
    default: break;
  }
  TCC_CHECK(false) << "kernel " << k.name << ": %" << i << " (" << op_name(in.op) << ") is not an expression";
  return "";
}

std::string define(const kir::Kernel& k, int i) {
  const Instr& in = k.body.at(static_cast<size_t>(i));
  std::string rhs;
  if (in.op == Op::Load) {
    const kir::Buffer& b = k.buffers.at(static_cast<size_t>(in.buffer));
    std::string at = index_expr(in.index);
    if (in.dynamic >= 0) at += " + " + v(in.dynamic) + "*" + paren(size_expr(in.dynamic_stride));
    rhs = convert(decode("p" + std::to_string(in.buffer) + "[" + at + "]", b.dtype), b.dtype, in.dtype);
    if (!in.args.empty()) rhs = "(" + v(in.args[0]) + " ? " + rhs + " : " + literal(0, in.dtype) + ")";
  } else {
    rhs = instr_expr(k, i);
  }
  return "const " + std::string(compute_type(in.dtype)) + " " + v(i) + " = " + rhs + ";\n";
}

std::string store(const kir::Kernel& k, int i, Target target) {
  const Instr& in = k.body.at(static_cast<size_t>(i));
  const kir::Buffer& b = k.buffers.at(static_cast<size_t>(in.buffer));
  TCC_CHECK(b.output) << "kernel " << k.name << " stores to input '" << b.name << "'";
  std::string at = index_expr(in.index);
  if (in.dynamic >= 0) at += " + " + v(in.dynamic) + "*" + paren(size_expr(in.dynamic_stride));
  std::string element = "p" + std::to_string(in.buffer) + "[" + at + "]";
  std::string value = encode(convert(v(in.args.at(0)), arg(k, in, 0).dtype, b.dtype), b.dtype);
  std::string guard = in.args.size() > 1 ? "if (" + v(in.args[1]) + ") " : "";
  if (in.accumulate == kir::Accumulate::None) return guard + element + " = " + value + ";\n";
  TCC_CHECK(atomic_update_dtype(b.dtype)) << "kernel " << k.name << " accumulates into " << dtype_name(b.dtype);
  std::string type = storage_type(b.dtype);
  if (target == Target::Host) {
    bool flt = is_float(b.dtype);
    std::string combined;
    switch (in.accumulate) {
      case kir::Accumulate::Add:
        if (flt) return guard + element + " += " + value + ";\n";
        combined = wrapping("+", b.dtype, element, value);
        break;
      case kir::Accumulate::Mul:
        if (flt) return guard + element + " *= " + value + ";\n";
        combined = wrapping("*", b.dtype, element, value);
        break;
      case kir::Accumulate::Max: combined = "tcc_max<" + type + ">(" + element + ", " + value + ")"; break;
      case kir::Accumulate::Min: combined = "tcc_min<" + type + ">(" + element + ", " + value + ")"; break;
      case kir::Accumulate::None: break;
    }
    return guard + element + " = " + combined + ";\n";
  }
  // atomicAdd takes f32, f64 and i32 as they are, i64 as the unsigned bits it wraps the same way.
  if (in.accumulate == kir::Accumulate::Add && b.dtype == DType::I64)
    return guard + "atomicAdd((unsigned long long*)&" + element + ", (unsigned long long)" + value + ");\n";
  if (in.accumulate == kir::Accumulate::Add) return guard + "atomicAdd(&" + element + ", " + value + ");\n";
  const char* op = in.accumulate == kir::Accumulate::Mul ? "tcc_prod" : in.accumulate == kir::Accumulate::Max ? "tcc_maxop" : "tcc_minop";
  return guard + "tcc_atomic<" + type + ">(&" + element + ", " + value + ", " + op + "());\n";
}

std::string reduce_identity(const Instr& r) {
  DType t = r.dtype;
  bool flt = is_float(t);
  DType acc = flt ? t : is_signed(t) ? DType::I64 : DType::U64;
  switch (r.op) {
    case Op::ReduceSum: return literal(0, acc);
    case Op::ReduceProd: return literal(1, acc);
    case Op::ReduceMax:
      if (flt) return literal(-INFINITY, acc);
      return is_signed(t) ? literal(-9223372036854775808.0, acc) : "0ull";
    case Op::ReduceMin:
      if (flt) return literal(INFINITY, acc);
      return is_signed(t) ? literal(9223372036854775807.0, acc) : "18446744073709551615ull";
    default: break;
  }
  TCC_CHECK(false) << op_name(r.op) << " is not a reduction";
  return "";
}

std::string reduce_step(const Instr& r, const std::string& acc, const std::string& x) {
  DType t = r.dtype;
  std::string A = accumulator_type(t);
  std::string xa = A == compute_type(t) ? x : "(" + A + ")" + x;
  switch (r.op) {
    case Op::ReduceSum:
      return acc + " = " + (is_float(t) ? acc + " + " + xa : wrapping("+", is_signed(t) ? DType::I64 : DType::U64, acc, xa)) + ";";
    case Op::ReduceProd:
      return acc + " = " + (is_float(t) ? acc + " * " + xa : wrapping("*", is_signed(t) ? DType::I64 : DType::U64, acc, xa)) + ";";
    case Op::ReduceMax: return acc + " = tcc_max(" + acc + ", " + xa + ");";
    case Op::ReduceMin: return acc + " = tcc_min(" + acc + ", " + xa + ");";
    default: break;
  }
  TCC_CHECK(false) << op_name(r.op) << " is not a reduction";
  return "";
}

std::vector<bool> closure(const kir::Kernel& k, const std::vector<int>& roots, const std::vector<bool>& stop) {
  std::vector<bool> in(k.body.size(), false);
  std::vector<int> work(roots.begin(), roots.end());
  while (!work.empty()) {
    int i = work.back();
    work.pop_back();
    if (in[i]) continue;
    in[i] = true;
    if (stop[i]) continue;
    for (int a : k.body[i].args) work.push_back(a);
  }
  return in;
}

bool scans(const kir::Kernel& k) {
  return std::any_of(k.body.begin(), k.body.end(), [](const Instr& in) { return in.op == Op::ScanSum; });
}

ReductionPlan plan_reduction(const kir::Kernel& k) {
  TCC_CHECK(k.kind == kir::Kind::Reduction) << k.name << " is not a reduction kernel";
  ReductionPlan p;
  size_t n = k.body.size();
  std::vector<int> stores;
  std::vector<bool> row(n), none(n, false);
  for (size_t i = 0; i < n; ++i) {
    row[i] = k.body[i].row;
    if (k.body[i].op == Op::Store) stores.push_back(static_cast<int>(i));
  }
  std::vector<bool> live = closure(k, stores, none);
  std::vector<int> level(n, 0);
  for (size_t i = 0; i < n; ++i) {
    const Instr& in = k.body[i];
    if (!live[i]) continue;
    if (is_reduce(in.op)) {
      level[i] = static_cast<int>(p.reductions.size()) + 1;
      p.reductions.push_back(static_cast<int>(i));
      continue;
    }
    if (!in.row) continue;
    for (int a : in.args) {
      TCC_CHECK(k.body[a].row) << "kernel " << k.name << ": row value %" << i << " reads element value %" << a;
      level[i] = std::max(level[i], level[a]);
    }
    if (in.op == Op::Store) p.row_stores.push_back(static_cast<int>(i));
  }
  p.row_values.resize(p.reductions.size() + 1);
  for (size_t i = 0; i < n; ++i)
    if (live[i] && row[i] && !is_reduce(k.body[i].op) && k.body[i].op != Op::Store)
      p.row_values[level[i]].push_back(static_cast<int>(i));
  // The element instructions of a closure (row values excluded).
  auto elements_of = [&](const std::vector<bool>& c) {
    std::vector<int> out;
    for (size_t i = 0; i < n; ++i)
      if (c[i] && !row[i]) out.push_back(static_cast<int>(i));
    return out;
  };
  auto elements = [&](const std::vector<int>& roots) { return elements_of(closure(k, roots, row)); };
  for (int r : p.reductions) {
    TCC_CHECK(k.body[r].args.size() == 1) << "kernel " << k.name << ": reduction %" << r << " takes one value";
    p.passes.push_back(elements({k.body[r].args[0]}));
  }
  std::vector<int> element_stores;
  for (int s : stores)
    if (!row[s]) element_stores.push_back(s);
  std::vector<bool> needs = closure(k, element_stores, row);
  std::vector<int> last = elements_of(needs);
  // Stores that read no reduction's result (a bias gradient's kernel also
  // stores the gradient it sums) join the first pass, which reads the same
  // elements anyway: one read of the inputs, and a single-pass body that splits.
  bool independent = true;
  for (size_t i = 0; i < n; ++i) independent = independent && !(needs[i] && row[i] && level[i] > 0);
  if (independent && !p.reductions.empty()) {
    std::vector<int> merged;
    std::set_union(p.passes[0].begin(), p.passes[0].end(), last.begin(), last.end(), std::back_inserter(merged));
    p.passes[0] = std::move(merged);
    last.clear();
  }
  p.passes.push_back(std::move(last));
  return p;
}

}  // namespace tcc::emitc
