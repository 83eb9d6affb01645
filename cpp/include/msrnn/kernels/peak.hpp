// The arithmetic peak of this core module on this CPU, for benchmarks: no float32 product the module
// computes can run faster. Each of the core's threads runs `iterations` rounds of kChains independent
// vector multiply-adds, in the widest vectors the module's instruction set has (x86-64-v4: AVX-512 FMA,
// 16 floats; x86-64-v3: AVX2 FMA, 8 floats; otherwise a multiply and an add on 4 floats):
//   x_{n+1} = a x_n + c   on every lane, from x_0 = 0.001 * (lane index within the thread)
// A benchmark times the call and divides `flops` by the time. `checksum` (the sum of every lane's x
// after the last round, summed in thread order) lets a test check that the arithmetic ran.
#pragma once

#include <cstdint>

namespace msrnn {

struct PeakRun {
  double flops = 0;     // 2 * iterations * lanes * threads
  double checksum = 0;  // sum over threads and lanes of x_iterations
  int threads = 1;      // the core's thread count at the call
  int lanes = 0;        // floats per thread: kChains * vector width
  int vector_floats = 0;
  bool fused = false;  // one fused multiply-add instruction per round and vector (FMA), else two
};

// a and c as in the header comment; iterations >= 1.
PeakRun multiply_add_peak(std::int64_t iterations, float a, float c);

}  // namespace msrnn
