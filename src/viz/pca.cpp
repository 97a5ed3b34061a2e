#include "viz/pca.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "base/error.h"

namespace atto::viz {

namespace {

// One Jacobi rotation zeroing a[p][q] (Numerical Recipes' formulation), applied to the rows and
// columns of a and to the columns of v.
void rotate(std::vector<double>& a, std::vector<double>& v, int64_t n, int64_t p, int64_t q) {
  auto A = [&](int64_t i, int64_t j) -> double& { return a[static_cast<size_t>(i * n + j)]; };
  auto V = [&](int64_t i, int64_t j) -> double& { return v[static_cast<size_t>(i * n + j)]; };
  const double apq = A(p, q);
  const double theta = (A(q, q) - A(p, p)) / (2.0 * apq);
  const double t = std::abs(theta) > 1e150
                       ? 0.5 / theta
                       : (theta >= 0 ? 1.0 : -1.0) / (std::abs(theta) + std::sqrt(theta * theta + 1));
  const double c = 1.0 / std::sqrt(t * t + 1), s = t * c;
  A(p, p) -= t * apq;
  A(q, q) += t * apq;
  A(p, q) = A(q, p) = 0.0;
  for (int64_t k = 0; k < n; ++k) {
    if (k != p && k != q) {
      const double akp = A(k, p), akq = A(k, q);
      A(k, p) = A(p, k) = c * akp - s * akq;
      A(k, q) = A(q, k) = s * akp + c * akq;
    }
    const double vkp = V(k, p), vkq = V(k, q);
    V(k, p) = c * vkp - s * vkq;
    V(k, q) = s * vkp + c * vkq;
  }
}

// Makes the entry of largest magnitude positive (ties: the lowest index).
void fix_sign(std::vector<double>& u) {
  size_t best = 0;
  for (size_t i = 1; i < u.size(); ++i)
    if (std::abs(u[i]) > std::abs(u[best])) best = i;
  if (!u.empty() && u[best] < 0)
    for (double& x : u) x = -x;
}

}  // namespace

Eigen symmetric_eigen(std::vector<double> a, int64_t n) {
  ATTO_CHECK(n >= 1 && static_cast<int64_t>(a.size()) == n * n, "symmetric_eigen: {} values for {} x {}", a.size(), n,
             n);
  std::vector<double> v(static_cast<size_t>(n * n), 0.0);
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i * n + i)] = 1.0;
  double total = 0.0;
  for (double x : a) total += x * x;
  for (int sweep = 0; sweep < 100; ++sweep) {
    double off = 0.0;
    for (int64_t p = 0; p < n; ++p)
      for (int64_t q = p + 1; q < n; ++q) off += a[static_cast<size_t>(p * n + q)] * a[static_cast<size_t>(p * n + q)];
    if (off <= 1e-30 * total || off == 0.0) break;
    for (int64_t p = 0; p < n; ++p)
      for (int64_t q = p + 1; q < n; ++q)
        if (a[static_cast<size_t>(p * n + q)] != 0.0) rotate(a, v, n, p, q);
  }
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t i, int64_t j) {
    return a[static_cast<size_t>(i * n + i)] > a[static_cast<size_t>(j * n + j)];
  });
  Eigen e;
  for (int64_t i : order) {
    e.values.push_back(a[static_cast<size_t>(i * n + i)]);
    std::vector<double> u(static_cast<size_t>(n));
    for (int64_t k = 0; k < n; ++k) u[static_cast<size_t>(k)] = v[static_cast<size_t>(k * n + i)];
    fix_sign(u);
    e.vectors.push_back(std::move(u));
  }
  return e;
}

namespace {

// Covariance route: eigenvectors of X^T X / d ([C, C]) are the components.
std::vector<std::vector<double>> components_from_covariance(const std::vector<double>& xc, int64_t N, int64_t C,
                                                            double d, int k, std::vector<double>& vars) {
  std::vector<double> cov(static_cast<size_t>(C * C), 0.0);
  for (int64_t i = 0; i < C; ++i)
    for (int64_t j = i; j < C; ++j) {
      double s = 0.0;
      for (int64_t r = 0; r < N; ++r) s += xc[static_cast<size_t>(r * C + i)] * xc[static_cast<size_t>(r * C + j)];
      cov[static_cast<size_t>(i * C + j)] = cov[static_cast<size_t>(j * C + i)] = s / d;
    }
  Eigen e = symmetric_eigen(std::move(cov), C);
  vars.assign(e.values.begin(), e.values.begin() + k);
  e.vectors.resize(static_cast<size_t>(k));
  return e.vectors;
}

// Gram route, for fewer points than dimensions (N < C): the eigenvectors u of X X^T / d
// ([N, N]) give the components X^T u / |X^T u| with the same eigenvalues.
std::vector<std::vector<double>> components_from_gram(const std::vector<double>& xc, int64_t N, int64_t C, double d,
                                                      int k, std::vector<double>& vars) {
  std::vector<double> g(static_cast<size_t>(N * N), 0.0);
  for (int64_t i = 0; i < N; ++i)
    for (int64_t j = i; j < N; ++j) {
      double s = 0.0;
      for (int64_t c = 0; c < C; ++c) s += xc[static_cast<size_t>(i * C + c)] * xc[static_cast<size_t>(j * C + c)];
      g[static_cast<size_t>(i * N + j)] = g[static_cast<size_t>(j * N + i)] = s / d;
    }
  const Eigen e = symmetric_eigen(std::move(g), N);
  std::vector<std::vector<double>> comps;
  for (int j = 0; j < k; ++j) {
    std::vector<double> w(static_cast<size_t>(C), 0.0);
    const bool have = j < N && e.values[static_cast<size_t>(j)] > 0.0;
    if (have)
      for (int64_t r = 0; r < N; ++r)
        for (int64_t c = 0; c < C; ++c)
          w[static_cast<size_t>(c)] +=
              xc[static_cast<size_t>(r * C + c)] * e.vectors[static_cast<size_t>(j)][static_cast<size_t>(r)];
    double norm = 0.0;
    for (double x : w) norm += x * x;
    norm = std::sqrt(norm);
    if (norm > 0)
      for (double& x : w) x /= norm;
    fix_sign(w);
    vars.push_back(have ? e.values[static_cast<size_t>(j)] : 0.0);
    comps.push_back(std::move(w));
  }
  return comps;
}

}  // namespace

Pca pca(const Matrix& x, int k) {
  const int64_t N = x.rows, C = x.cols;
  ATTO_CHECK(N >= 1 && C >= 1, "pca: need at least one point and one dimension, got [{}, {}]", N, C);
  ATTO_CHECK(k >= 1 && k <= C, "pca: k = {} components of {}-dimensional data", k, C);
  Pca out;
  out.mean.assign(static_cast<size_t>(C), 0.0);
  for (int64_t r = 0; r < N; ++r)
    for (int64_t c = 0; c < C; ++c) out.mean[static_cast<size_t>(c)] += x.at(r, c);
  for (double& m : out.mean) m /= static_cast<double>(N);
  std::vector<double> xc(static_cast<size_t>(N * C));
  double total = 0.0;
  for (int64_t r = 0; r < N; ++r)
    for (int64_t c = 0; c < C; ++c) {
      const double v = x.at(r, c) - out.mean[static_cast<size_t>(c)];
      xc[static_cast<size_t>(r * C + c)] = v;
      total += v * v;
    }
  const double d = N > 1 ? static_cast<double>(N - 1) : 1.0;
  total /= d;
  out.components = N < C ? components_from_gram(xc, N, C, d, k, out.variances)
                         : components_from_covariance(xc, N, C, d, k, out.variances);
  for (double v : out.variances) out.explained.push_back(total > 0 ? v / total : 0.0);
  out.projected = Matrix(N, k);
  for (int64_t r = 0; r < N; ++r)
    for (int j = 0; j < k; ++j) {
      double s = 0.0;
      for (int64_t c = 0; c < C; ++c)
        s += xc[static_cast<size_t>(r * C + c)] * out.components[static_cast<size_t>(j)][static_cast<size_t>(c)];
      out.projected.at(r, j) = static_cast<float>(s);
    }
  return out;
}

}  // namespace atto::viz
