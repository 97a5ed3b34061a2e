#include "train/grad_exchange.h"

#include <sched.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "base/error.h"
#include "kernels/kernels.h"

namespace atto {

bool Collective::wait(Request& r, const char* what, const std::atomic<bool>* cancel) {
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  // Yield a while (a message between ranks on one machine takes microseconds), then sleep
  // between polls: the exchange thread must not take a core from the backward pass.
  for (int polls = 0; !r.test(); ++polls) {
    if (cancel != nullptr && cancel->load()) return false;
    if (polls < 200) {
      sched_yield();
      continue;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(50));
    if ((polls & 1023) == 0 && std::chrono::duration<double>(Clock::now() - t0).count() > timeout_s)
      abort(
          fmt::format("rank {} on {}: no answer from the other ranks for {:.0f} s while {} (a rank died, hangs, "
                      "or the network is down); the last checkpoint in the run directory is intact",
                      rank(), host(), timeout_s, what));
  }
  return true;
}

GradExchange::GradExchange(Collective& c, const std::vector<std::vector<Tensor>>& params, bool overlap)
    : c_(c), params_(params), overlap_(overlap) {
  ATTO_CHECK(!params_.empty(), "GradExchange: no shards");
  final_ = std::vector<std::atomic<bool>>(params_.size() * params_[0].size());
  build_buckets();
  thread_ = std::thread([this] { loop(); });
}

GradExchange::~GradExchange() {
  {
    std::lock_guard<std::mutex> l(mu_);
    quit_ = true;
    cancelled_ = true;
  }
  cv_.notify_all();
  thread_.join();
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
  for (auto& b : buckets_) {
    const auto n = static_cast<size_t>(b->floats) + b->params.size();
    b->partial.assign(n, 0.0f);
    b->total.assign(n, 0.0f);
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
  step_done_ = false;
  step_open_ = true;
  cancelled_ = false;
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
  std::unique_lock<std::mutex> l(mu_);
  cv_.wait(l, [&] { return step_done_; });
  l.unlock();
  // Totals whose parameter had no gradient on this rank: a buffer of its own (the exchange
  // thread allocates nothing).
  const bool last = c_.rank() == c_.size() - 1;
  for (auto& bp : buckets_) {
    const Bucket& b = *bp;
    const std::vector<float>& src = last ? b.partial : b.total;
    for (size_t j = 0; j < b.params.size(); ++j) {
      Tensor t = params_[0][b.params[j]];
      if (src[static_cast<size_t>(b.floats) + j] == 0.0f || t.grad().defined()) continue;
      Tensor g = Tensor::empty(t.shape());
      std::memcpy(g.data(), src.data() + b.offsets[j], sizeof(float) * static_cast<size_t>(t.numel()));
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
  for (auto& b : buckets_)
    for (auto* r : {b->recv.get(), b->send.get(), b->bcast.get()})
      if (r != nullptr) r->test();
}

void GradExchange::wait_ready(size_t k) {
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
}

// Whether a send or broadcast of this step is still moving (a posted receive needs no help
// until its sender is ready, and the sender's own polls move it).
bool GradExchange::in_flight() {
  for (auto& b : buckets_)
    for (auto* r : {b->send.get(), b->bcast.get()})
      if (r != nullptr && !r->test()) return true;
  return false;
}

// The bucket's partial sum: the previous rank's (ranks > 0) or nothing, plus this rank's
// shards in order. A gradient is added as one process adds it: copied where the sum has none.
void GradExchange::add_local(Bucket& b, bool from_partial) {
  float* buf = b.partial.data();
  for (size_t j = 0; j < b.params.size(); ++j) {
    float& defined = buf[static_cast<size_t>(b.floats) + j];
    if (!from_partial) defined = 0.0f;
    float* d = buf + b.offsets[j];
    for (const std::vector<Tensor>& shard : params_) {
      const Tensor& p = shard[b.params[j]];
      const Tensor g = p.grad();
      if (!g.defined()) continue;
      const auto n = p.numel();
      if (defined == 0.0f)
        std::memcpy(d, g.data(), sizeof(float) * static_cast<size_t>(n));
      else
        kernels::add_forward(d, d, g.data(), n);
      defined = 1.0f;
    }
  }
}

// The global sum into the model's gradient buffers where they exist (finish() does the rest).
void GradExchange::write_totals(Bucket& b) {
  const float* src = (c_.rank() == c_.size() - 1 ? b.partial : b.total).data();
  for (size_t j = 0; j < b.params.size(); ++j) {
    if (src[static_cast<size_t>(b.floats) + j] == 0.0f) continue;
    const Tensor& p = params_[0][b.params[j]];
    Tensor g = p.grad();
    if (g.defined()) std::memcpy(g.data(), src + b.offsets[j], sizeof(float) * static_cast<size_t>(p.numel()));
  }
}

void GradExchange::run_step() {
  const int r = c_.rank(), N = c_.size();
  const auto K = buckets_.size();
  for (size_t k = 0; k < K; ++k) {
    Bucket& b = *buckets_[k];
    if (r > 0) b.recv = c_.recv(b.partial.data(), static_cast<int64_t>(b.partial.size()), r - 1, static_cast<int>(k));
  }
  for (size_t k = 0; k < K; ++k) {
    wait_ready(k);
    if (cancelled_) return;
    Bucket& b = *buckets_[k];
    const auto n = static_cast<int64_t>(b.partial.size());
    if (r > 0 && !c_.wait(*b.recv, "receiving a gradient bucket", &cancelled_)) return;
    add_local(b, r > 0);
    if (r < N - 1) b.send = c_.send(b.partial.data(), n, r + 1, static_cast<int>(k));
    b.bcast = c_.broadcast(r == N - 1 ? b.partial.data() : b.total.data(), n, N - 1);
  }
  for (size_t k = 0; k < K; ++k) {
    Bucket& b = *buckets_[k];
    if (!c_.wait(*b.bcast, "broadcasting the summed gradients", &cancelled_)) return;
    write_totals(b);
  }
  for (auto& b : buckets_) {
    if (b->send && !c_.wait(*b->send, "sending a gradient bucket", &cancelled_)) return;
    b->recv.reset();
    b->send.reset();
    b->bcast.reset();
  }
}

}  // namespace atto
