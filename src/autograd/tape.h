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
// - After backward the tape is cleared, releasing saved activations; their buffers go back to
//   the caching allocator and the next step reuses them.
// - One tape per thread. There is no retain_graph: backward consumes the tape.
#pragma once

#include <functional>
#include <string>
#include <vector>

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

class Tape {
 public:
  using BackwardFn = std::function<void()>;

  void record(const char* op, BackwardFn fn);
  // Seeds loss.grad with `grad_output` (ones for a one-element loss when undefined), runs
  // every node newest first, then clears the tape.
  void backward(Tensor loss, const Tensor& grad_output = Tensor());
  void clear();
  size_t size() const { return nodes_.size(); }
  // Names of the recorded ops, oldest first (for tests and debugging).
  std::vector<std::string> op_names() const;

 private:
  struct Node {
    const char* op;
    BackwardFn fn;
  };
  std::vector<Node> nodes_;
};

// The calling thread's tape.
Tape& tape();

// tape().backward(loss, grad_output).
void backward(const Tensor& loss, const Tensor& grad_output = Tensor());

// True when grad mode is on and one of the tensors requires grad: the op must record.
bool any_requires_grad(std::initializer_list<const Tensor*> inputs);

}  // namespace atto
