// atto/autograd/tape.h: reverse-mode autodiff by a tape recorded as the forward runs.
//
//   Tensor w = Tensor::randn({3, 4}, rng).set_requires_grad(true);
//   Tensor loss = sum(mul(linear(x, w), r));   // each op appends one node to the tape
//   backward(loss);                            // runs the nodes in reverse; w.grad() is set
//   { NoGradGuard ng; Tensor y = linear(x, w); }   // inference: nothing is recorded
//
// How it works
// - Every differentiable op (autograd/ops.h) checks shapes, allocates its output, calls a
//   kernel, and, when grad mode is on and an input requires grad, appends a node to the
//   calling thread's tape. The node is a closure holding the tensors its backward needs.
// - backward(loss) seeds d(loss)/d(loss) = 1 and runs the nodes newest first. The tape is in
//   the order the forward ran, so when a node runs, every consumer of its output has already
//   added its share to that output's gradient. Gradients accumulate (+=) into
//   tensor.grad(), as in PyTorch: call zero_grad() on parameters between steps.
// - A node releases its output's gradient after it runs (nothing reads it later), so backward
//   holds only the gradients still in flight, not one per activation. Leaves (parameters and
//   inputs) are never op outputs: their gradients stay.
// - After backward the tape is cleared, releasing saved activations; their buffers go back to
//   the caching allocator and the next step reuses them.
// - One tape per thread. There is no retain_graph: backward consumes the tape.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "tensor/rng.h"
#include "tensor/tensor.h"

namespace atto {

// Whether ops record onto the tape (thread-local; on by default).
bool grad_enabled();
void set_grad_enabled(bool on);

// Turns recording off for its lifetime (evaluation, sampling).
class NoGradGuard {
 public:
  NoGradGuard() : prev_(grad_enabled()) { set_grad_enabled(false); }
  ~NoGradGuard() { set_grad_enabled(prev_); }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool prev_;
};

// Time spent per op kind while profiling (see Tape::set_profiling).
struct OpTime {
  std::string op;
  int64_t calls = 0;         // forward calls recorded
  double forward_ms = 0.0;   // time charged to the op's forwards
  double backward_ms = 0.0;  // time of its backward nodes
};

class Tape {
 public:
  using BackwardFn = std::function<void()>;

  // `out` is the op's output: once the node has run, every consumer of `out` has run before it,
  // so out's gradient is dead and is released (as PyTorch frees non-leaf gradients); its buffer
  // goes back to the caching allocator for the next node. Pass an undefined tensor to keep it.
  void record(const char* op, const Tensor& out, BackwardFn fn);
  // Seeds loss.grad with `grad_output` (ones for a one-element loss when undefined), runs
  // every node newest first, then clears the tape.
  void backward(Tensor loss, const Tensor& grad_output = Tensor());
  // The same with out's gradient already set (out.set_grad): it is the seed, taken as it is.
  void backward_seeded(const Tensor& out);
  void clear();
  size_t size() const { return nodes_.size(); }
  // Names of the recorded ops, oldest first (for tests and debugging).
  std::vector<std::string> op_names() const;

  // Profiling (off by default; what `atto bench train --profile` uses). When on, record()
  // charges the wall time since the previous record() or mark() to the recorded op's forward
  // (the op's checks, allocation and kernel, plus any module code since the previous op), and
  // backward() times each node. Ops that run without recording (NoGradGuard) are not seen.
  void set_profiling(bool on);
  bool profiling() const { return profiling_; }
  void mark();                          // the next recorded op's forward time starts now
  std::vector<OpTime> profile() const;  // sorted by total time, largest first
  void reset_profile();

  // Gradient-ready callbacks, for sending gradients while the backward still runs
  // (train/grad_exchange.h). While watching, every op notes the first node that may touch each
  // watched leaf (any_requires_grad sees its inputs before it records its node); backward()
  // then calls on_final(i) for leaf i on this thread as soon as every node that may add to its
  // gradient has run, and for a leaf no op used after the last node. backward() and clear()
  // end the watch.
  void watch(const std::vector<Tensor>& leaves, std::function<void(size_t)> on_final);
  bool watching() const { return on_final_ != nullptr; }
  void note_inputs(std::initializer_list<const Tensor*> inputs);
  void note_inputs(const std::vector<Tensor>& inputs);

 private:
  using Clock = std::chrono::steady_clock;
  bool profiling_ = false;
  Clock::time_point last_{};
  std::unordered_map<std::string, OpTime> times_;

  struct Node {
    const char* op;
    Tensor out;
    BackwardFn fn;
  };
  std::vector<Node> nodes_;
  void run_node(Node& node);
  void run_nodes();  // newest first, grad mode off; then clears the tape

  std::unordered_map<const void*, size_t> watched_;  // leaf id -> its index in first_use_
  std::vector<int64_t> first_use_;                   // per watched leaf: first node that may touch it (-1: none)
  std::function<void(size_t)> on_final_;
  void run_nodes_watched();
};

// The calling thread's tape: its own, or the one a TapeScope put in its place.
Tape& tape();

// Makes `t` the calling thread's tape for its lifetime (recompute's second forward and its
// backward run on a tape of their own, inside a node of the outer one).
class TapeScope {
 public:
  explicit TapeScope(Tape& t);
  ~TapeScope();
  TapeScope(const TapeScope&) = delete;
  TapeScope& operator=(const TapeScope&) = delete;

 private:
  Tape* prev_;
};

// Activation recomputation (checkpointing; `atto train --recompute`): returns f(inputs) and keeps
// only `inputs` for the backward, not what f's ops would save (for a transformer block, about
// 15 floats a token per model dimension instead of 1). The forward runs f without recording.
// One node holds the inputs; when the backward reaches it, it runs f again with recording on a
// tape of its own, seeds that output with the gradient of the first, runs that tape's backward,
// and passes the inputs' gradients on. The second forward gives the first's bits (every kernel
// is deterministic; `rng`, the dropout Rng that f draws from, or nullptr, is put back to its
// state at the first call for it and restored afterwards), so every gradient has the bits it
// has without recomputation. Parameters f reads are leaves: their gradients accumulate where
// they would. `params` lists them for gradient-ready callbacks (Tape::watch); it may be empty
// when the tape is not watching. Without grad mode or an input or parameter that requires
// grad, this is f(inputs).
using RecomputeFn = std::function<Tensor(const std::vector<Tensor>&)>;
Tensor recompute(const RecomputeFn& f, const std::vector<Tensor>& inputs, const std::vector<Tensor>& params, Rng* rng);

// tape().backward(loss, grad_output).
void backward(const Tensor& loss, const Tensor& grad_output = Tensor());

// True when grad mode is on and one of the tensors requires grad: the op must record.
bool any_requires_grad(std::initializer_list<const Tensor*> inputs);

}  // namespace atto
