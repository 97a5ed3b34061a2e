// atto/viz/pca.h: principal component analysis of a small dense dataset, written out
// (cyclic Jacobi eigen-decomposition of the C x C covariance), deterministic.
//
//   viz::Matrix wte(V, C, weights);                 // N points in C dimensions, row-major
//   viz::Pca p = viz::pca(wte, 2);
//   p.projected.at(i, 0);                           // coordinate of point i along PC1
//   p.components[0];                                // [C] unit vector of PC1
//   p.explained[0];                                 // fraction of the variance along PC1
//
// Conventions
// - Points are rows. The data is centred (column means subtracted) and the covariance is
//   X^T X / (N - 1) (N = 1: / 1), computed in double.
// - Components come in order of decreasing variance (ties: lower original index first).
// - Eigenvectors are defined up to sign; the sign is fixed so that the entry of largest
//   magnitude is positive (ties: lowest index), so the same data always gives the same picture.
// - Cost: O(C^3) per Jacobi sweep, usually < 10 sweeps; fine up to C of a few hundred.
#pragma once

#include <cstdint>
#include <vector>

#include "viz/figures.h"

namespace atto::viz {

struct Pca {
  std::vector<std::vector<double>> components;  // [k][C], unit length
  std::vector<double> variances;                // [k] eigenvalues of the covariance
  std::vector<double> explained;                // [k] variances / total variance (0 if total is 0)
  std::vector<double> mean;                     // [C]
  Matrix projected;                             // [N, k] coordinates of each point
};

// The top-k principal components of the rows of x ([N, C], N >= 1, 1 <= k <= C).
Pca pca(const Matrix& x, int k);

// Eigen-decomposition of a symmetric n x n matrix a (row-major): eigenvalues sorted in
// decreasing order and the matching eigenvectors (rows of `vectors`, sign fixed as above).
struct Eigen {
  std::vector<double> values;                // [n]
  std::vector<std::vector<double>> vectors;  // [n][n]
};
Eigen symmetric_eigen(std::vector<double> a, int64_t n);

}  // namespace atto::viz
