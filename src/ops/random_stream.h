// tcc's random streams: the draws of the random ops (RandomUniform,
// RandomNormal and their *Like forms, Bernoulli, Multinomial, training-mode
// Dropout), computed by one definition that the reference kernels call and
// that builds the ops' kernel expressions, so that a compiled module draws
// the interpreter's bits.
//
// The generator is Philox4x32-10 (Salmon, Moraes, Dror, Shaw: "Parallel
// random numbers: as easy as 1, 2, 3", SC'11), counter-based: element i of a
// node's output at call k of a module (its random offset, docs/MODULE.md) is
// drawn from the block of counter (low and high 32 bits of i, low and high
// 32 bits of k) under the node's key (random_key), with no state between
// elements, so a kernel computes any element from its index and the offset
// alone. The mappings from the block's four 32-bit words w0..w3
// (docs/MODULE.md):
//   uniform  u = (w0 * 2^21 + (w1 >> 11)) * 2^-53, in [0, 1) with 53 bits;
//   normal   z = sqrt(-2 log(1 - u)) * cos(2 pi v), Box-Muller, v the uniform
//            of w2 and w3 as u is of w0 and w1;
// all arithmetic in double.
#pragma once

#include <array>
#include <cstdint>

namespace tcc {

class Node;
class ScalarBuilder;

using PhiloxBlock = std::array<uint32_t, 4>;
using PhiloxKey = std::array<uint32_t, 2>;

// The ten rounds of Philox4x32 on `counter` under `key`.
PhiloxBlock philox4x32_10(PhiloxBlock counter, PhiloxKey key);

// A random node's key: the bits of its float `seed` attribute (Dropout's
// integer seed counts as the float of its value) and 0; a node without a seed
// has seed 0's key, so one seed is one stream.
PhiloxKey random_key(const Node& n);

// The draws for element `index` of the stream of `key` at random offset `offset`.
double uniform_draw(PhiloxKey key, int64_t index, uint64_t offset);
double normal_draw(PhiloxKey key, int64_t index, uint64_t offset);

// The same draws as kernel expressions (f64 values) of the point's element
// index, the row-major position of the point in n's output 0, at the
// module's random offset (ScalarBuilder::random_offset).
int uniform_draw(const Node& n, ScalarBuilder& b);
int normal_draw(const Node& n, ScalarBuilder& b);

}  // namespace tcc
