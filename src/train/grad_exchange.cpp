#include "train/grad_exchange.h"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

#include "base/error.h"
#include "kernels/kernels.h"

namespace atto {

bool Collective::wait(Request& r, const char* what, const std::atomic<bool>* cancel) {
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  // Yield for the first 2 ms (a message between ranks takes microseconds, and a rank that
  // waits here has nothing else to run), then sleep between polls: a long wait must not take a
  // core from the backward pass.
  for (int polls = 0; !r.test(); ++polls) {
    if (cancel != nullptr && cancel->load()) return false;
    const double waited = std::chrono::duration<double>(Clock::now() - t0).count();
    if (waited < 2e-3) {
      sched_yield();
      continue;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(20));
    if (waited > timeout_s)
      abort(
          fmt::format("no answer from the other ranks for {:.0f} s while {} (a rank died, hangs, or the "
                      "network is down; --dist-timeout sets the wait); the last checkpoint in the run directory "
                      "is intact",
                      timeout_s, what));
  }
  return true;
}

GradExchange::GradExchange(Collective& c, const std::vector<std::vector<Tensor>>& params, bool overlap)
    : c_(c),
      params_(params),
      overlap_(overlap),
      rank_(c.rank()),
      ranks_(c.size()),
      shards_(static_cast<int>(params.size())) {
  ATTO_CHECK(!params_.empty(), "GradExchange: no shards");
  final_ = std::vector<std::atomic<bool>>(params_.size() * params_[0].size());
  build_buckets();
  if (overlap_) thread_ = std::thread([this] { loop(); });  // else finish() runs the exchange itself
}

GradExchange::~GradExchange() {
  {
    std::lock_guard<std::mutex> l(mu_);
    quit_ = true;
    cancelled_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

// Buckets in backward order (the model's parameters are listed from the input up, and the
// backward reaches the last ones first), each at least kBucketFloats unless it is the last.
void GradExchange::build_buckets() {
  const std::vector<Tensor>& p = params_[0];
  bucket_of_.assign(p.size(), 0);
  for (size_t j = p.size(); j-- > 0;) {
    if (buckets_.empty() || buckets_.back()->floats >= kBucketFloats) buckets_.push_back(std::make_unique<Bucket>());
    Bucket& b = *buckets_.back();
    b.params.push_back(j);
    b.offsets.push_back(b.floats);
    b.floats += p[j].numel();
    bucket_of_[j] = buckets_.size() - 1;
  }
  // Message tags name (bucket, shard): MPI promises tags up to 32767.
  ATTO_CHECK(static_cast<int64_t>(buckets_.size()) * shards_ <= 32767,
             "GradExchange: {} gradient buckets x {} shards exceed MPI's tag range; use fewer shards per rank",
             buckets_.size(), shards_);
  const auto N = static_cast<size_t>(ranks_), S = static_cast<size_t>(shards_);
  for (auto& bp : buckets_) {
    Bucket& b = *bp;
    for (size_t j = 0; j <= N; ++j) {
      const int64_t at = b.floats * static_cast<int64_t>(j) / ranks_;
      if (j < N) b.seg_offset.push_back(static_cast<int>(at));
      if (j > 0) b.seg_count.push_back(static_cast<int>(at) - b.seg_offset[j - 1]);
    }
    b.out.resize(S * N);
    for (size_t s = 0; s < S; ++s)
      for (size_t j = 0; j < N; ++j)
        if (static_cast<int>(j) != rank_)
          b.out[s * N + j].assign(static_cast<size_t>(part_floats(b, static_cast<int>(j))), 0.0f);
    b.in.resize(S * N);
    for (size_t g = 0; g < S * N; ++g)
      if (static_cast<int>(g / S) != rank_) b.in[g].assign(static_cast<size_t>(part_floats(b, rank_)), 0.0f);
    b.total.assign(static_cast<size_t>(b.floats), 0.0f);
    b.defined.assign(b.params.size(), 0.0f);
  }
  bucket_ready_.assign(buckets_.size(), false);
}

void GradExchange::begin() {
  std::unique_lock<std::mutex> l(mu_);
  cv_.wait(l, [&] { return step_done_; });
  const auto S = static_cast<int>(params_.size());
  for (auto& b : buckets_) b->pending = S * static_cast<int>(b->params.size());
  for (auto& f : final_) f = false;
  bucket_ready_.assign(buckets_.size(), false);
  if (c_.rank() > 0)  // this rank's model is a shard of the global batch: its gradient starts anew
    for (const Tensor& t : params_[0]) Tensor(t).clear_grad();
  cancelled_ = false;
  if (!overlap_) return;
  step_done_ = false;
  step_open_ = true;
  l.unlock();
  cv_.notify_all();
}

void GradExchange::ready(int shard, size_t param) {
  const size_t P = params_[0].size();
  if (final_[static_cast<size_t>(shard) * P + param].exchange(true)) return;
  const size_t k = bucket_of_[param];
  if (buckets_[k]->pending.fetch_sub(1) == 1) {
    std::lock_guard<std::mutex> l(mu_);
    bucket_ready_[k] = true;
    cv_.notify_all();
  }
}

void GradExchange::finish() {
  const size_t P = params_[0].size();
  for (size_t s = 0; s < params_.size(); ++s)
    for (size_t i = 0; i < P; ++i) ready(static_cast<int>(s), i);
  if (overlap_) {
    std::unique_lock<std::mutex> l(mu_);
    cv_.wait(l, [&] { return step_done_; });
  } else {
    run_step();  // on this thread: no hand-over to wait for
  }
  // Totals whose parameter had no gradient on this rank: a buffer of its own (the exchange
  // thread allocates nothing).
  for (auto& bp : buckets_) {
    const Bucket& b = *bp;
    for (size_t j = 0; j < b.params.size(); ++j) {
      Tensor t = params_[0][b.params[j]];
      if (b.defined[j] == 0.0f || t.grad().defined()) continue;
      Tensor g = Tensor::empty(t.shape());
      std::memcpy(g.data(), b.total.data() + b.offsets[j], sizeof(float) * static_cast<size_t>(t.numel()));
      t.set_grad(g);
    }
  }
}

void GradExchange::cancel() {
  {
    std::lock_guard<std::mutex> l(mu_);
    cancelled_ = true;
  }
  cv_.notify_all();
  std::unique_lock<std::mutex> l(mu_);
  cv_.wait(l, [&] { return step_done_; });
}

void GradExchange::loop() {
  for (;;) {
    {
      std::unique_lock<std::mutex> l(mu_);
      cv_.wait(l, [&] { return step_open_ || quit_; });
      if (quit_) return;
      step_open_ = false;
    }
    run_step();
    {
      std::lock_guard<std::mutex> l(mu_);
      step_done_ = true;
    }
    cv_.notify_all();
  }
}

// Keeps the messages in flight moving (MPI progresses them inside its calls).
void GradExchange::progress() {
  for (auto& b : buckets_) {
    for (auto& r : b->sends) r->test();
    for (auto& r : b->recvs) r->test();
    if (b->gather) b->gather->test();
  }
}

bool GradExchange::wait_ready(size_t k) {
  std::unique_lock<std::mutex> l(mu_);
  while (!bucket_ready_[k] && !cancelled_) {
    if (!in_flight()) {  // nothing to move along: sleep until a shard reports
      cv_.wait(l, [&] { return bucket_ready_[k] || cancelled_; });
      break;
    }
    cv_.wait_for(l, std::chrono::microseconds(200));
    l.unlock();
    progress();
    l.lock();
  }
  return !cancelled_;
}

// Whether a send or gather of this step is still moving (a posted receive needs no help
// until its sender is ready, and the sender's own polls move it).
bool GradExchange::in_flight() {
  for (auto& b : buckets_) {
    for (auto& r : b->sends)
      if (!r->test()) return true;
    if (b->gather && !b->gather->test()) return true;
  }
  return false;
}

// Local shard s's parts of bucket k, one per other rank, sent as soon as the bucket is final.
void GradExchange::send_parts(size_t k) {
  Bucket& b = *buckets_[k];
  const auto np = b.params.size();
  for (int s = 0; s < shards_; ++s)
    for (int j = 0; j < ranks_; ++j) {
      if (j == rank_) continue;
      std::vector<float>& part = b.out[static_cast<size_t>(s * ranks_ + j)];
      const int64_t lo = b.seg_offset[static_cast<size_t>(j)], hi = lo + b.seg_count[static_cast<size_t>(j)];
      for (size_t i = 0; i < np; ++i) {
        const Tensor g = params_[static_cast<size_t>(s)][b.params[i]].grad();
        part[i] = g.defined() ? 1.0f : 0.0f;
        const int64_t a = std::max(lo, b.offsets[i]), e = std::min(hi, b.offsets[i] + params_[0][b.params[i]].numel());
        if (g.defined() && a < e)
          std::memcpy(part.data() + np + (a - lo), g.data() + (a - b.offsets[i]),
                      sizeof(float) * static_cast<size_t>(e - a));
      }
      b.sends.push_back(c_.send(part.data(), static_cast<int64_t>(part.size()), j, static_cast<int>(k) * shards_ + s));
    }
}

// This rank's segment of bucket k once every part has arrived: the parts added in global shard
// order, a part's parameter copied where the sum has none yet (one process's order and rule).
// Then the segment goes to every rank. False when the step was cancelled.
bool GradExchange::reduce_segment(size_t k) {
  Bucket& b = *buckets_[k];
  for (auto& r : b.recvs)
    if (!c_.wait(*r, "receiving gradients", &cancelled_)) return false;
  const auto np = b.params.size();
  const int64_t lo = b.seg_offset[static_cast<size_t>(rank_)], hi = lo + b.seg_count[static_cast<size_t>(rank_)];
  const int G = shards_ * ranks_;
  std::fill(b.defined.begin(), b.defined.end(), 0.0f);
  for (size_t i = 0; i < np; ++i) {
    const int64_t off = b.offsets[i], a = std::max(lo, off), e = std::min(hi, off + params_[0][b.params[i]].numel());
    float* d = b.total.data() + a;
    for (int g = 0; g < G; ++g) {
      const float* src = nullptr;
      if (g / shards_ == rank_) {
        const Tensor t = params_[static_cast<size_t>(g % shards_)][b.params[i]].grad();
        if (t.defined()) src = t.data() + (a - off);
      } else {
        const std::vector<float>& part = b.in[static_cast<size_t>(g)];
        if (part[i] != 0.0f) src = part.data() + np + (a - lo);
      }
      if (src == nullptr) continue;
      if (a < e) {
        if (b.defined[i] == 0.0f)
          std::memcpy(d, src, sizeof(float) * static_cast<size_t>(e - a));
        else
          kernels::add_forward(d, d, src, e - a);
      }
      b.defined[i] = 1.0f;
    }
  }
  b.gather = c_.all_gather_floats(b.total.data(), b.seg_count, b.seg_offset);
  return true;
}

// The global sum into the model's gradient buffers where they exist (finish() does the rest).
void GradExchange::write_totals(Bucket& b) {
  for (size_t j = 0; j < b.params.size(); ++j) {
    if (b.defined[j] == 0.0f) continue;
    const Tensor& p = params_[0][b.params[j]];
    Tensor g = p.grad();
    if (g.defined())
      std::memcpy(g.data(), b.total.data() + b.offsets[j], sizeof(float) * static_cast<size_t>(p.numel()));
  }
}

void GradExchange::run_step() {
  const auto K = buckets_.size();
  const int G = shards_ * ranks_;
  for (size_t k = 0; k < K; ++k) {  // every part of this rank's segments, posted up front
    Bucket& b = *buckets_[k];
    for (int g = 0; g < G; ++g)
      if (g / shards_ != rank_)
        b.recvs.push_back(c_.recv(b.in[static_cast<size_t>(g)].data(), part_floats(b, rank_), g / shards_,
                                  static_cast<int>(k) * shards_ + g % shards_));
  }
  // Buckets as they become final; a segment is summed as soon as its parts are in (in bucket
  // order: every rank starts the gathers in the same order).
  size_t reduced = 0;
  auto arrived = [&](size_t k) {
    for (auto& r : buckets_[k]->recvs)
      if (!r->test()) return false;
    return true;
  };
  for (size_t k = 0; k < K; ++k) {
    if (!wait_ready(k)) return;
    send_parts(k);
    for (; reduced <= k && arrived(reduced); ++reduced)
      if (!reduce_segment(reduced)) return;
  }
  for (; reduced < K; ++reduced)
    if (!reduce_segment(reduced)) return;
  for (auto& b : buckets_) {
    if (!c_.wait(*b->gather, "gathering the summed gradients", &cancelled_)) return;
    write_totals(*b);
  }
  for (auto& b : buckets_) {
    for (auto& r : b->sends)
      if (!c_.wait(*r, "sending gradients", &cancelled_)) return;
    b->sends.clear();
    b->recvs.clear();
    b->gather.reset();
  }
}

}  // namespace atto
