// atto/kernels/threads.cpp: one knob for the thread count of OpenMP and OpenBLAS.
#include <cblas.h>
#include <omp.h>

#include "kernels/kernels.h"

namespace atto::kernels {

void set_num_threads(int n) {
  if (n <= 0) n = omp_get_num_procs();
  omp_set_num_threads(n);
  // The OpenMP build of OpenBLAS follows omp_get_max_threads() anyway; set it for clarity.
  openblas_set_num_threads(n);
}

int num_threads() { return omp_get_max_threads(); }

}  // namespace atto::kernels
