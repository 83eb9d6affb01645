#include "msrnn/model/common.hpp"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace msrnn {

void set_num_threads(int n) {
  MSRNN_CHECK(n >= 1, "thread count must be at least 1, got ", n);
#ifdef _OPENMP
  omp_set_num_threads(n);
#endif
  Eigen::setNbThreads(n);
}

int get_num_threads() { return Eigen::nbThreads(); }

}  // namespace msrnn
