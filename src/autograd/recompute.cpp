// recompute (autograd/tape.h): a function's activations recomputed in the backward instead of kept.
#include "autograd/detail.h"

namespace atto {

namespace {

// Sets grad mode for its lifetime (the outer backward runs its nodes with grad mode off).
class GradModeScope {
 public:
  explicit GradModeScope(bool on) : prev_(grad_enabled()) { set_grad_enabled(on); }
  ~GradModeScope() { set_grad_enabled(prev_); }
  GradModeScope(const GradModeScope&) = delete;
  GradModeScope& operator=(const GradModeScope&) = delete;

 private:
  bool prev_;
};

// Puts an Rng in a given state for its lifetime, then back in the state it had.
class RngReplay {
 public:
  RngReplay(Rng* rng, const Rng& state) : rng_(rng) {
    if (rng_ == nullptr) return;
    now_ = *rng_;
    *rng_ = state;
  }
  ~RngReplay() {
    if (rng_ != nullptr) *rng_ = now_;
  }
  RngReplay(const RngReplay&) = delete;
  RngReplay& operator=(const RngReplay&) = delete;

 private:
  Rng* rng_;
  Rng now_;
};

// The backward of one recomputed call: f again on leaves of the inputs' values, recorded on a tape
// of its own with rng as it was at the first call, seeded with out's gradient g; then each
// input's gradient passed on, taken whole when it has none yet (the bits it would have had
// without recomputation), added otherwise.
void run_again(const RecomputeFn& f, const std::vector<Tensor>& inputs, const Tensor& out, const Tensor& g, Rng* rng,
               const Rng& start) {
  std::vector<Tensor> leaves;
  leaves.reserve(inputs.size());
  for (const Tensor& x : inputs) {
    Tensor l = x.defined() ? x.detach() : Tensor();
    if (x.defined() && x.requires_grad()) l.set_requires_grad(true);
    leaves.push_back(l);
  }
  Tape inner;
  {
    const TapeScope scope(inner);
    const GradModeScope grad(true);
    Tensor y;
    {
      const RngReplay replay(rng, start);
      y = f(leaves);
    }
    ATTO_CHECK(y.shape() == out.shape() && y.requires_grad(),
               "recompute: the second forward gave shape {} (requires grad {}), the first {}", shape_str(y.shape()),
               y.requires_grad(), shape_str(out.shape()));
    y.set_grad(g);
    inner.backward_seeded(y);
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& x = inputs[i];
    const Tensor gl = leaves[i].defined() ? leaves[i].grad() : Tensor();
    if (!x.defined() || !x.requires_grad() || !gl.defined()) continue;
    if (!x.grad().defined()) {
      Tensor h = x;
      h.set_grad(gl);
    } else {
      float* gx = detail::grad_ptr(x);
      kernels::add_forward(gx, gx, gl.data(), x.numel());
    }
  }
}

bool any_wants_grad(const std::vector<Tensor>& ts) {
  for (const Tensor& t : ts)
    if (t.defined() && t.requires_grad()) return true;
  return false;
}

}  // namespace

Tensor recompute(const RecomputeFn& f, const std::vector<Tensor>& inputs, const std::vector<Tensor>& params, Rng* rng) {
  if (!grad_enabled() || !(any_wants_grad(inputs) || any_wants_grad(params))) return f(inputs);
  if (Tape& t = tape(); t.watching()) {
    t.note_inputs(inputs);
    t.note_inputs(params);
  }
  const Rng start = rng != nullptr ? *rng : Rng();
  Tensor out;
  {
    const NoGradGuard ng;
    out = f(inputs);
  }
  detail::mark_output(out);
  tape().record("recompute", out, [f, inputs, out, rng, start]() {
    const Tensor g = out.grad();
    if (g.defined()) run_again(f, inputs, out, g, rng, start);
  });
  return out;
}

}  // namespace atto
