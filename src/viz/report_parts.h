// atto/viz/report_parts.h: the figure builders shared by the GPT report (report.cpp) and the
// seq2seq report (seq2seq_report.cpp). Internal to src/viz: each one appends its figures to
// r.figures and its numbers to r.data under the given key.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "models/gpt.h"
#include "viz/report.h"

namespace atto::viz::detail {

// A float as the JSON number with the shortest decimal form that reads back as the same float.
nlohmann::json jf(float f);
nlohmann::json jrow(const Matrix& m, int64_t r);
nlohmann::json jmatrix(const Matrix& m);
nlohmann::json jdoubles(const std::vector<double>& v);

// The L2 norm of each position of a [1, T, C] tensor (the residual-stream figures).
std::vector<double> row_norms(const Tensor& t);

// cap evenly spaced indices of [0, n) (all of them when n <= cap), first and last included.
std::vector<int64_t> sample_indices(int64_t n, int64_t cap);

// Next-token bars (figure "next_token", data "next_token") for logits [V] after the token `after`.
void next_token_figure(Report& r, const InspectOptions& o, const std::vector<float>& last_logits,
                       const std::vector<std::string>& vocab, const std::string& after);

struct EmbeddingFigure {
  std::string id = "embeddings_pca";  // figure id
  std::string key = "embeddings";     // data key
  std::string title = "Token embeddings (wte), projected by PCA";
  std::string caption;  // empty = the GPT caption
};
// PCA scatter of an embedding table [V, C] with one label per row.
void embedding_figure(Report& r, const Matrix& table, const std::vector<std::string>& vocab, const EmbeddingFigure& f);

// Positional table heatmap + cosine similarity to position 0 (figures "positions",
// "position_similarity", data "positions").
void position_figures(Report& r, const InspectOptions& opt, const Matrix& P, PosKind kind);

// Loss (+ BLEU when logged) and learning-rate plots; a note when there are no loss records.
void training_figures(Report& r, const TrainingCurves* c);

}  // namespace atto::viz::detail
