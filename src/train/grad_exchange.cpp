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
// backward reaches the last ones first), each at least kBucketFloats unless it is the last; with
// many ranks a bucket grows so that each rank's segment stays >= 16K floats (fewer, larger
// messages).
void GradExchange::build_buckets() {
  const std::vector<Tensor>& p = params_[0];
  const int64_t want = std::max<int64_t>(kBucketFloats, int64_t{1 << 14} * ranks_);
  bucket_of_.assign(p.size(), 0);
  for (size_t j = p.size(); j-- > 0;) {
    if (buckets_.empty() || buckets_.back()->floats >= want) buckets_.push_back(std::make_unique<Bucket>());
    Bucket& b = *buckets_.back();
    b.params.push_back(j);
    b.offsets.push_back(b.floats);
    b.floats += p[j].numel();
    bucket_of_[j] = buckets_.size() - 1;
  }
  const auto G = static_cast<size_t>(shards_ * ranks_);
  for (auto& bp : buckets_) {
    Bucket& b = *bp;
    cut_pieces(b);
    b.flags_out.assign(static_cast<size_t>(shards_), std::vector<float>(b.params.size(), 0.0f));
    b.flags_in.resize(G);
    b.in.resize(G);
    int64_t mine = 0;
    for (const Piece& pc : b.pieces)
      if (pc.owner == rank_) mine += pc.n;
    for (size_t g = 0; g < G; ++g)
      if (static_cast<int>(g) / shards_ != rank_) {
        b.flags_in[g].assign(b.params.size(), 0.0f);
        b.in[g].assign(static_cast<size_t>(mine), 0.0f);
      }
    b.total.assign(static_cast<size_t>(b.floats), 0.0f);
    b.defined.assign(b.params.size(), 0.0f);
  }
  bucket_ready_.assign(buckets_.size(), false);
}

// Segment r of a bucket is floats [floats * r / N, floats * (r + 1) / N); a piece is where a
// segment meets a parameter.
void GradExchange::cut_pieces(Bucket& b) {
  int64_t staged = 0;
  for (int r = 0; r < ranks_; ++r) {
    const int64_t lo = b.floats * r / ranks_, hi = b.floats * (r + 1) / ranks_;
    for (size_t j = 0; j < b.params.size(); ++j) {
      const int64_t off = b.offsets[j], a = std::max(lo, off), e = std::min(hi, off + params_[0][b.params[j]].numel());
      if (a >= e) continue;
      Piece pc{j, a - off, e - a, r, -1};
      if (r == rank_) {
        pc.staged = staged;
        staged += pc.n;
      }
      b.pieces.push_back(pc);
    }
  }
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
    for (auto& r : b->bcasts) r->test();
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
    for (auto& r : b->bcasts)
      if (!r->test()) return true;
  }
  return false;
}

// Receives for bucket k, in the order the senders send: from each other rank, for each of its
// shards, the flags, then the parts of the pieces this rank owns.
void GradExchange::post_receives(size_t k) {
  Bucket& b = *buckets_[k];
  for (int r = 0; r < ranks_; ++r) {
    if (r == rank_) continue;
    for (int s = 0; s < shards_; ++s) {
      const auto g = static_cast<size_t>(r * shards_ + s);
      b.recvs.push_back(c_.recv(b.flags_in[g].data(), static_cast<int64_t>(b.params.size()), r, 0));
      for (const Piece& pc : b.pieces)
        if (pc.owner == rank_) b.recvs.push_back(c_.recv(b.in[g].data() + pc.staged, pc.n, r, 0));
    }
  }
}

// Local shard s's flags to every other rank and its parts to their owners, straight from the
// gradient buffers, as soon as the bucket is final.
void GradExchange::send_parts(size_t k) {
  Bucket& b = *buckets_[k];
  b.sent0.assign(b.pieces.size(), nullptr);
  for (int s = 0; s < shards_; ++s) {
    std::vector<float>& flags = b.flags_out[static_cast<size_t>(s)];
    std::vector<const float*> data(b.params.size(), nullptr);
    for (size_t j = 0; j < b.params.size(); ++j) {
      const Tensor g = params_[static_cast<size_t>(s)][b.params[j]].grad();
      flags[j] = g.defined() ? 1.0f : 0.0f;
      if (g.defined()) data[j] = g.data();
    }
    for (int r = 0; r < ranks_; ++r) {
      if (r == rank_) continue;
      b.sends.push_back(c_.send(flags.data(), static_cast<int64_t>(flags.size()), r, 0));
      for (size_t i = 0; i < b.pieces.size(); ++i) {
        const Piece& pc = b.pieces[i];
        if (pc.owner != r) continue;
        // No gradient: an empty message (the flag says so; a receive may be longer than its message).
        const float* src = data[pc.j];
        b.sends.push_back(src != nullptr ? c_.send(src + pc.at, pc.n, r, 0) : c_.send(src, 0, r, 0));
        if (s == 0) b.sent0[i] = b.sends.back().get();
      }
    }
  }
}

// Where piece p's sum goes on this rank: the model's gradient buffer, or `total` where the
// model has none (finish() hands it over).
float* GradExchange::dest_of(Bucket& b, const Piece& p) {
  Tensor g = params_[0][b.params[p.j]].grad();
  return g.defined() ? g.data() + p.at : b.total.data() + b.offsets[p.j] + p.at;
}

// Piece p (owned here) summed in global shard order into dest: the other ranks' parts that come
// first are added up in their receive buffer; then this rank's shards (the model's own part is
// already in dest when dest is its gradient), then the rest. A part is copied where the sum has
// none yet, as one process does.
void GradExchange::sum_piece(Bucket& b, const Piece& p, float* dest) {
  const size_t n = static_cast<size_t>(p.n);
  const float* acc = nullptr;  // the sum so far: a receive buffer, then dest
  auto add = [&](const float* src) {
    if (acc == nullptr) {
      std::memcpy(dest, src, sizeof(float) * n);
    } else {
      kernels::add_forward(dest, acc, src, p.n);  // acc + src: the same bits as src + acc
    }
    acc = dest;
  };
  float* prefix = nullptr;  // ranks before this one: summed in the first one's buffer
  for (int g = 0; g < rank_ * shards_; ++g) {
    if (b.flags_in[static_cast<size_t>(g)][p.j] == 0.0f) continue;
    float* src = b.in[static_cast<size_t>(g)].data() + p.staged;
    if (prefix == nullptr)
      prefix = src;
    else
      kernels::add_forward(prefix, prefix, src, p.n);
  }
  acc = prefix;
  for (int s = 0; s < shards_; ++s) {
    const Tensor g = params_[static_cast<size_t>(s)][b.params[p.j]].grad();
    if (!g.defined()) continue;
    const float* src = g.data() + p.at;
    if (src == dest) {  // the model's own part, already in place
      if (acc != nullptr) kernels::add_forward(dest, acc, dest, p.n);
      acc = dest;
    } else {
      if (acc != nullptr && acc != dest) {  // the prefix into dest first
        std::memcpy(dest, acc, sizeof(float) * n);
        acc = dest;
      }
      add(src);
    }
  }
  if (acc != nullptr && acc != dest) {
    std::memcpy(dest, acc, sizeof(float) * n);
    acc = dest;
  }
  for (int g = (rank_ + 1) * shards_; g < ranks_ * shards_; ++g)
    if (b.flags_in[static_cast<size_t>(g)][p.j] != 0.0f) add(b.in[static_cast<size_t>(g)].data() + p.staged);
}

// Bucket k once every part has arrived: this rank's pieces summed, then every piece broadcast by
// its owner (every rank posts the broadcasts in piece order). False when the step was cancelled.
bool GradExchange::reduce_bucket(size_t k) {
  Bucket& b = *buckets_[k];
  for (auto& r : b.recvs)
    if (!c_.wait(*r, "receiving gradients", &cancelled_)) return false;
  for (size_t j = 0; j < b.params.size(); ++j) {
    float any = 0.0f;
    for (int g = 0; g < ranks_ * shards_; ++g)
      any = std::max(any, g / shards_ == rank_ ? b.flags_out[static_cast<size_t>(g % shards_)][j]
                                               : b.flags_in[static_cast<size_t>(g)][j]);
    b.defined[j] = any;
  }
  for (size_t i = 0; i < b.pieces.size(); ++i) {
    const Piece& pc = b.pieces[i];
    if (b.defined[pc.j] == 0.0f) continue;  // no shard has it: nothing to send (on every rank)
    float* dest = dest_of(b, pc);
    if (pc.owner == rank_)
      sum_piece(b, pc, dest);
    else if (b.sent0[i] != nullptr && !c_.wait(*b.sent0[i], "sending gradients", &cancelled_))
      return false;  // dest is the buffer that send reads: the broadcast may overwrite it only after
    b.bcasts.push_back(c_.broadcast(dest, pc.n, pc.owner));
  }
  return true;
}

void GradExchange::run_step() {
  const auto K = buckets_.size();
  for (size_t k = 0; k < K; ++k) post_receives(k);
  // Buckets as they become final; a bucket is summed as soon as its parts are in (in bucket
  // order: every rank starts the broadcasts in the same order).
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
      if (!reduce_bucket(reduced)) return;
  }
  for (; reduced < K; ++reduced)
    if (!reduce_bucket(reduced)) return;
  for (auto& b : buckets_) {
    for (auto& r : b->bcasts)
      if (!c_.wait(*r, "broadcasting the summed gradients", &cancelled_)) return;
    for (auto& r : b->sends)
      if (!c_.wait(*r, "sending gradients", &cancelled_)) return;
    b->sends.clear();
    b->recvs.clear();
    b->bcasts.clear();
  }
}

}  // namespace atto
