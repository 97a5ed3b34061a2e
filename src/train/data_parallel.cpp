#include "train/data_parallel.h"

#include <algorithm>
#include <array>
#include <cstring>

#include "autograd/tape.h"
#include "base/error.h"
#include "kernels/kernels.h"
#include "models/gpt.h"
#include "models/seq2seq.h"

namespace atto {

DataParallel::DataParallel(nn::Module& model, int shards, const MakeReplica& make_replica, Collective* collective,
                           bool overlap)
    : collective_(collective) {
  ATTO_CHECK(shards >= 1, "data parallel: shards must be >= 1, got {}", shards);
  if (collective_ != nullptr && collective_->size() > 1) {
    ranks_ = collective_->size();
    first_shard_ = collective_->rank() * shards;
  } else {
    collective_ = nullptr;
  }
  models_.push_back(&model);
  for (int s = 1; s < shards; ++s) {
    replicas_.push_back(make_replica());
    ATTO_CHECK(replicas_.back() != nullptr, "data parallel: make_replica returned no module");
    replicas_.back()->alias_parameters(model);
    models_.push_back(replicas_.back().get());
    rngs_.push_back(std::make_unique<Rng>());
  }
  for (nn::Module* m : models_) {
    params_.emplace_back();
    for (const NamedParameter& p : m->trainable_parameters()) params_.back().push_back(p.tensor);
    ATTO_CHECK(params_.back().size() == params_.front().size(),
               "data parallel: a replica has {} parameters, the model {}", params_.back().size(),
               params_.front().size());
  }
  if (collective_ != nullptr) exchange_ = std::make_unique<GradExchange>(*collective_, params_, overlap);
}

DataParallel::~DataParallel() = default;

std::pair<int64_t, int64_t> DataParallel::rows(int shard, int64_t B) const {
  const int64_t S = global_shards(), g = first_shard_ + shard;
  return {B * g / S, B * (g + 1) / S};
}

void DataParallel::run(int64_t B, const std::function<void(int, nn::Module&, int64_t, int64_t)>& fn) {
  nn::Module& main = *models_[0];
  if (exchange_) exchange_->begin();
  if (main.rng() != nullptr) main.set_rng(main.rng(), rows(0, B).first);  // rank r > 0: not row 0
  for (int s = 1; s < shards(); ++s) {
    nn::Module& r = *models_[static_cast<size_t>(s)];
    Rng* rng = nullptr;
    if (main.rng() != nullptr) {
      rng = rngs_[static_cast<size_t>(s - 1)].get();
      *rng = *main.rng();  // the same dropout seeds as the model draws this step
    }
    r.set_rng(rng, rows(s, B).first);
    r.train(main.training());
  }
  const bool watch = exchange_ && exchange_->overlap();
  // Without ranks, a parameter's gradients are summed as soon as every shard's is final, and
  // the replicas' are dropped then: a replica holds its gradients of a few layers at a time,
  // not of the whole model (the same additions in the same order as after the shards).
  const bool early = !exchange_ && shards() > 1;
  if (early) begin_early_sum(B);
  try {
    kernels::run_shards(shards(), [&](int s) {
      const auto [r0, r1] = rows(s, B);
      if (r1 <= r0) return;
      if (watch) tape().watch(params_[static_cast<size_t>(s)], [this, s](size_t i) { exchange_->ready(s, i); });
      if (early) tape().watch(params_[static_cast<size_t>(s)], [this](size_t i) { early_ready(i); });
      try {
        fn(s, model(s), r0, r1);
      } catch (...) {
        tape().clear();  // this thread's partial forward must not reach a later backward
        throw;
      }
      if (tape().watching()) tape().clear();  // a shard that ran no backward
    });
  } catch (...) {
    if (exchange_) exchange_->cancel();
    throw;
  }
  if (exchange_)
    exchange_->finish();
  else
    sum_local_gradients();
  for (size_t s = 1; s < params_.size(); ++s)
    for (const Tensor& p : params_[s]) {
      Tensor t = p;
      t.clear_grad();
    }
}

void DataParallel::begin_early_sum(int64_t B) {
  int with_rows = 0;
  for (int s = 0; s < shards(); ++s) with_rows += rows(s, B).second > rows(s, B).first ? 1 : 0;
  const size_t n = params_[0].size();
  if (ready_n_ != n) ready_ = std::make_unique<std::atomic<int>[]>(n), ready_n_ = n;
  for (size_t i = 0; i < n; ++i) ready_[i].store(with_rows == 0 ? -1 : 0, std::memory_order_relaxed);
  shards_with_rows_ = with_rows;
}

void DataParallel::early_ready(size_t i) {
  // The shard that finishes parameter i last adds (its acquire sees the others' gradients).
  if (ready_[i].fetch_add(1, std::memory_order_acq_rel) + 1 != shards_with_rows_) return;
  sum_parameter(i);
  ready_[i].store(-1, std::memory_order_relaxed);  // summed: sum_local_gradients skips it
}

void DataParallel::sum_parameter(size_t i) {
  Tensor dst = params_[0][i];
  for (size_t s = 1; s < params_.size(); ++s) {
    Tensor p = params_[s][i];
    const Tensor g = p.grad();
    if (!g.defined()) continue;
    if (!dst.grad().defined())
      dst.set_grad(g);
    else if (g.data() != dst.grad().data())
      kernels::add_forward(dst.grad().data(), dst.grad().data(), g.data(), dst.numel());
    p.clear_grad();
  }
}

void DataParallel::sum_local_gradients() {
  // Sum the gradients into the model's: per parameter in shard order, all parameters in one
  // parallel pass (elementwise chunks, so the same bits for any thread count). A shard's buffer
  // is handed over where the model has none yet.
  const std::vector<Tensor>& into = params_[0];
  sum_index_.clear();
  sum_n_.clear();
  for (size_t i = 0; i < into.size(); ++i) {
    if (ready_n_ == into.size() && ready_[i].load(std::memory_order_relaxed) < 0) continue;  // summed early
    Tensor dst = into[i];
    bool adds = false;
    for (size_t s = 1; s < params_.size(); ++s) {
      const Tensor g = params_[s][i].grad();
      if (!g.defined()) continue;
      if (!dst.grad().defined())
        dst.set_grad(g);
      else
        adds = true;
    }
    if (!adds) continue;
    sum_index_.push_back(i);
    sum_n_.push_back(dst.numel());
  }
  kernels::for_each_chunk(sum_n_.data(), sum_n_.size(), 4096, 1 << 14, [&](size_t k, int64_t b, int64_t e) {
    const size_t i = sum_index_[k];
    float* d = into[i].grad().data() + b;
    for (size_t s = 1; s < params_.size(); ++s) {
      const Tensor g = params_[s][i].grad();
      if (g.defined() && g.data() != d - b) kernels::add_forward(d, d, g.data() + b, e - b);
    }
  });
}

int resolve_shards(int shards, int64_t B, int ranks) {
  ATTO_CHECK(shards >= 0, "--shards must be >= 0 (0 = auto), got {}", shards);
  ATTO_CHECK(B >= 1, "data parallel: the batch must have at least 1 row, got {}", B);
  if (ranks <= 1) return static_cast<int>(std::min<int64_t>(shards == 0 ? 2 : shards, B));
  const int64_t want = shards == 0 ? 1 : shards;
  ATTO_CHECK(want * ranks <= B,
             "{} ranks x {} shards need batches of at least {} rows, but a batch has {}: raise --batch-size or run "
             "fewer ranks",
             ranks, want, want * ranks, B);
  return static_cast<int>(want);
}

namespace {

// After a step's shards on every rank: the batch loss as one process sums its shards' shares
// (in global shard order), and rank 0's dropout Rng state on every rank (rank 0 ran shard 0 on
// the model, whose draws advance it; a rank whose shard had no counted target drew nothing).
double sync_ranks(DataParallel& dp, const std::vector<double>& loss) {
  Rng* rng = dp.model(0).rng();
  std::string mine(sizeof(double) * loss.size(), '\0');
  std::memcpy(mine.data(), loss.data(), mine.size());
  std::array<uint64_t, 4> state{};
  if (rng != nullptr) state = rng->state();
  mine.append(reinterpret_cast<const char*>(state.data()), sizeof(state));
  const std::vector<std::string> all = dp.collective()->all_gather_same_size(mine);  // shards agree
  double total = 0.0;
  for (const std::string& r : all) {
    ATTO_CHECK(r.size() == mine.size(), "data parallel: a rank runs {} shards, this one {}",
               (r.size() - sizeof(state)) / sizeof(double), loss.size());
    for (size_t i = 0; i < loss.size(); ++i) {
      double v;
      std::memcpy(&v, r.data() + i * sizeof(double), sizeof(double));
      total += v;
    }
  }
  if (rng != nullptr) {
    std::memcpy(state.data(), all[0].data() + mine.size() - sizeof(state), sizeof(state));
    rng->set_state(state);
  }
  return total;
}

// Every shard's forward and backward. targets: the whole batch's, row_len per row (what the
// loss counts: entries other than ce.ignore_index); loss_of(model, r0, r1) is the mean loss of
// rows [r0, r1). Shard s seeds its backward with n_s / n * loss_scale; returns the batch's mean.
template <class LossOf>
double forward_backward_shards(DataParallel& dp, int64_t B, const std::vector<int32_t>& targets, int64_t row_len,
                               const CrossEntropyOptions& ce, float loss_scale, const LossOf& loss_of) {
  auto count = [&](int64_t r0, int64_t r1) -> int64_t {
    return std::count_if(targets.begin() + r0 * row_len, targets.begin() + r1 * row_len,
                         [&](int32_t t) { return t != ce.ignore_index; });
  };
  const int64_t n = count(0, B);
  std::vector<double> loss(static_cast<size_t>(dp.shards()), 0.0);
  dp.run(B, [&](int s, nn::Module& m, int64_t r0, int64_t r1) {
    const int64_t ns = count(r0, r1);
    if (ns == 0 && dp.global_shards() > 1) return;  // nothing counts in these rows
    Tensor l = loss_of(m, r0, r1);
    // This shard's share of the batch mean: ns / n of it (exactly 1 with one shard).
    const float share = dp.global_shards() == 1 ? 1.0f : static_cast<float>(ns) / static_cast<float>(n);
    loss[static_cast<size_t>(s)] = static_cast<double>(l.item()) * share;
    const float seed = share * loss_scale;
    backward(l, seed == 1.0f ? Tensor() : Tensor::scalar(seed));
  });
  if (dp.collective() != nullptr) return sync_ranks(dp, loss);
  double total = 0.0;
  for (double v : loss) total += v;
  return total;
}

void check_mean(const CrossEntropyOptions& ce, const char* fn) {
  ATTO_CHECK(ce.reduction == CrossEntropyOptions::Reduction::Mean,
             "{}: the loss is a mean over the batch's targets (reduction Sum is not supported)", fn);
}

}  // namespace

double gpt_forward_backward(DataParallel& dp, const std::vector<int32_t>& x, const std::vector<int32_t>& y, int64_t B,
                            int64_t T, float loss_scale, const CrossEntropyOptions& ce) {
  check_mean(ce, "gpt_forward_backward");
  const auto BT = static_cast<size_t>(B * T);
  ATTO_CHECK(B >= 1 && T >= 1 && x.size() == BT && y.size() == BT,
             "gpt_forward_backward: a [{}, {}] batch needs {} ids and targets, got {} and {}", B, T, BT, x.size(),
             y.size());
  auto rows = [&](const std::vector<int32_t>& v, int64_t r0, int64_t r1) {
    return std::vector<int32_t>(v.begin() + r0 * T, v.begin() + r1 * T);
  };
  return forward_backward_shards(dp, B, y, T, ce, loss_scale, [&](nn::Module& m, int64_t r0, int64_t r1) {
    auto* gpt = dynamic_cast<GPT*>(&m);
    ATTO_CHECK(gpt != nullptr, "gpt_forward_backward: a shard's model is not a GPT");
    return gpt->loss(rows(x, r0, r1), rows(y, r0, r1), r1 - r0, T, ce);
  });
}

double seq2seq_forward_backward(DataParallel& dp, const Seq2SeqBatch& b, float loss_scale,
                                const CrossEntropyOptions& ce) {
  check_mean(ce, "seq2seq_forward_backward");
  ATTO_CHECK(b.B >= 1, "seq2seq_forward_backward: the batch has no rows");
  return forward_backward_shards(dp, b.B, b.tgt_out, b.T, ce, loss_scale, [&](nn::Module& m, int64_t r0, int64_t r1) {
    auto* model = dynamic_cast<Seq2Seq*>(&m);
    ATTO_CHECK(model != nullptr, "seq2seq_forward_backward: a shard's model is not a Seq2Seq");
    Seq2SeqBatch part;  // one shard: the batch itself, no copy
    const Seq2SeqBatch& sb = r0 == 0 && r1 == b.B ? b : (part = slice_rows(b, r0, r1));
    const Tensor memory = model->encode(sb.src, sb.B, sb.S, sb.src_mask);
    return cross_entropy(model->decode(sb.tgt_in, sb.B, sb.T, memory, sb.src_mask, sb.tgt_mask), sb.tgt_out, ce);
  });
}

}  // namespace atto
