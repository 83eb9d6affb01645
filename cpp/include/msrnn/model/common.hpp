// Common definitions of the multiscale-rnn C++ core.
//
// Size letters, used in every header and in every shape comment:
//   T  time steps in a chunk          B  batch columns (streams)
//   E  input / embedding size         H  hidden size of a layer or cell
//   V  vocabulary size                L  number of layers
//   K  fast cells or order            N  T*B, all columns of a chunk
//
// Layout: column-major Eigen matrices with one column per (step, stream); the columns of step t
// are t*B .. t*B+B-1, so each step is a contiguous (H, B) block. Hidden state is (H, B).
// Every kernel is a template on the scalar S and instantiated for float (training) and double
// (gradient checks).
#pragma once

#include <Eigen/Core>

#include <array>
#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace msrnn {

using Index = Eigen::Index;

template <class S> using Mat = Eigen::Matrix<S, Eigen::Dynamic, Eigen::Dynamic, Eigen::ColMajor>;
template <class S> using Vec = Eigen::Matrix<S, Eigen::Dynamic, 1>;
template <class S> using MatMap = Eigen::Map<Mat<S>>;
template <class S> using CMatMap = Eigen::Map<const Mat<S>>;
template <class S> using VecMap = Eigen::Map<Vec<S>>;
template <class S> using CVecMap = Eigen::Map<const Vec<S>>;

// Columns [t*B, (t+1)*B) of a matrix with T*B columns: the block of step t.
template <class M> inline auto step_block(M& m, Index t, Index B) { return m.middleCols(t * B, B); }

// Build an error message from pieces: msrnn::cat("expected ", 3, " got ", 4).
template <class... A> std::string cat(const A&... a) {
  std::ostringstream s;
  (s << ... << a);
  return s.str();
}

// Argument errors become ValueError in Python; index errors (bad token ids) become IndexError.
#define MSRNN_CHECK(cond, ...)                                           \
  do {                                                                   \
    if (!(cond)) throw std::invalid_argument(::msrnn::cat(__VA_ARGS__)); \
  } while (0)

// A named piece of recurrent state, e.g. ("h_l0", (H, B)).
template <class S> struct NamedState {
  std::string name;
  Mat<S> value;  // (rows, B)
};

// The core's random generator: xoshiro256** seeded through splitmix64. Its whole state is four
// 64-bit words, saved in checkpoints, so a resumed run draws the same numbers.
class Rng {
 public:
  explicit Rng(std::uint64_t seed = 0) { seed_with(seed); }
  void seed_with(std::uint64_t seed) {
    for (auto& w : s_) {
      seed += 0x9E3779B97F4A7C15ULL;
      std::uint64_t z = seed;
      z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
      z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
      w = z ^ (z >> 31);
    }
  }
  std::uint64_t next() {
    const std::uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const std::uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }
  // Uniform in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  std::array<std::uint64_t, 4> state() const { return s_; }
  void set_state(const std::array<std::uint64_t, 4>& s) {
    MSRNN_CHECK(s[0] | s[1] | s[2] | s[3], "random generator state must not be all zeros");
    s_ = s;
  }

 private:
  static std::uint64_t rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  std::array<std::uint64_t, 4> s_{};
};

// Thread count used by Eigen's matrix products and the core's OpenMP loops.
void set_num_threads(int n);
int get_num_threads();

}  // namespace msrnn
