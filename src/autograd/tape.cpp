#include "autograd/tape.h"

#include <algorithm>

#include "base/error.h"

namespace atto {

namespace {
thread_local bool g_grad_enabled = true;
thread_local Tape* g_tape_override = nullptr;  // a TapeScope's tape
}

bool grad_enabled() { return g_grad_enabled; }
void set_grad_enabled(bool on) { g_grad_enabled = on; }

Tape& tape() {
  thread_local Tape t;
  return g_tape_override != nullptr ? *g_tape_override : t;
}

TapeScope::TapeScope(Tape& t) : prev_(g_tape_override) { g_tape_override = &t; }
TapeScope::~TapeScope() { g_tape_override = prev_; }

void Tape::record(const char* op, const Tensor& out, BackwardFn fn) {
  nodes_.push_back(Node{op, out, std::move(fn)});
  if (profiling_) {
    const auto now = Clock::now();
    OpTime& t = times_[op];
    t.calls++;
    t.forward_ms += std::chrono::duration<double, std::milli>(now - last_).count();
    last_ = Clock::now();
  }
}

void Tape::run_node(Node& node) {
  node.fn();
  if (node.out.defined()) node.out.clear_grad();
}

void Tape::set_profiling(bool on) {
  profiling_ = on;
  last_ = Clock::now();
}

void Tape::mark() { last_ = Clock::now(); }

std::vector<OpTime> Tape::profile() const {
  std::vector<OpTime> out;
  for (const auto& [name, t] : times_) {
    out.push_back(t);
    out.back().op = name;
  }
  std::sort(out.begin(), out.end(), [](const OpTime& a, const OpTime& b) {
    const double ta = a.forward_ms + a.backward_ms, tb = b.forward_ms + b.backward_ms;
    return ta != tb ? ta > tb : a.op < b.op;
  });
  return out;
}

void Tape::reset_profile() { times_.clear(); }

void Tape::backward(Tensor loss, const Tensor& grad_output) {
  ATTO_CHECK(loss.defined(), "backward: the loss is an undefined tensor");
  ATTO_CHECK(loss.requires_grad(),
             "backward: the loss does not require grad (no input requires grad, or it was "
             "computed under NoGradGuard)");
  loss.ensure_grad();
  Tensor g = loss.grad();
  if (grad_output.defined()) {
    ATTO_CHECK(grad_output.shape() == loss.shape(), "backward: grad_output shape {} differs from the loss shape {}",
               shape_str(grad_output.shape()), shape_str(loss.shape()));
    const auto v = grad_output.to_vector();
    float* p = g.data();
    for (size_t i = 0; i < v.size(); ++i) p[i] += v[i];
  } else {
    ATTO_CHECK(loss.numel() == 1, "backward: the loss has shape {}; pass grad_output for a non-scalar output",
               shape_str(loss.shape()));
    g.data()[0] += 1.0f;
  }
  run_nodes();
}

void Tape::backward_seeded(const Tensor& out) {
  ATTO_CHECK(out.defined() && out.requires_grad() && out.grad().defined(),
             "backward_seeded: the output has no gradient to start from");
  run_nodes();
}

void Tape::run_nodes() {
  // Run newest first. A node may not record new nodes (backward is not differentiable).
  const bool prev = grad_enabled();
  set_grad_enabled(false);
  try {
    if (watching()) {
      run_nodes_watched();
    } else if (profiling_) {
      for (auto it = nodes_.rbegin(); it != nodes_.rend(); ++it) {
        const auto t0 = Clock::now();
        run_node(*it);
        times_[it->op].backward_ms += std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
      }
    } else {
      for (auto it = nodes_.rbegin(); it != nodes_.rend(); ++it) run_node(*it);
    }
  } catch (...) {
    set_grad_enabled(prev);
    clear();
    throw;
  }
  set_grad_enabled(prev);
  clear();
}

void Tape::clear() {
  // Destroy newest first so saved tensors are released in reverse order of creation.
  while (!nodes_.empty()) nodes_.pop_back();
  watched_.clear();
  first_use_.clear();
  on_final_ = nullptr;
}

void Tape::watch(const std::vector<Tensor>& leaves, std::function<void(size_t)> on_final) {
  ATTO_CHECK(nodes_.empty(), "Tape::watch: the tape already holds {} nodes; watch before the forward", nodes_.size());
  watched_.clear();
  for (size_t i = 0; i < leaves.size(); ++i) watched_[leaves[i].id()] = i;
  first_use_.assign(leaves.size(), -1);
  on_final_ = std::move(on_final);
}

void Tape::note_inputs(std::initializer_list<const Tensor*> inputs) {
  for (const Tensor* t : inputs) {
    if (t == nullptr || !t->defined()) continue;
    const auto it = watched_.find(t->id());
    if (it != watched_.end() && first_use_[it->second] < 0)
      first_use_[it->second] = static_cast<int64_t>(nodes_.size());  // the node this op records next
  }
}

void Tape::note_inputs(const std::vector<Tensor>& inputs) {
  for (const Tensor& t : inputs) note_inputs({&t});
}

// backward()'s node loop with the ready callbacks: leaves by first use, newest first; once node i
// has run, no node left may touch a leaf first used at i or later.
void Tape::run_nodes_watched() {
  std::vector<size_t> order(first_use_.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return first_use_[a] > first_use_[b]; });
  size_t next = 0;
  const auto fn = on_final_;
  for (auto i = static_cast<int64_t>(nodes_.size()) - 1; i >= 0; --i) {
    run_node(nodes_[static_cast<size_t>(i)]);
    for (; next < order.size() && first_use_[order[next]] >= i; ++next) fn(order[next]);
  }
  for (; next < order.size(); ++next) fn(order[next]);
}

std::vector<std::string> Tape::op_names() const {
  std::vector<std::string> names;
  names.reserve(nodes_.size());
  for (const auto& n : nodes_) names.emplace_back(n.op);
  return names;
}

void backward(const Tensor& loss, const Tensor& grad_output) { tape().backward(loss, grad_output); }

bool any_requires_grad(std::initializer_list<const Tensor*> inputs) {
  if (!grad_enabled()) return false;
  if (Tape& t = tape(); t.watching()) t.note_inputs(inputs);
  return std::any_of(inputs.begin(), inputs.end(),
                     [](const Tensor* t) { return t && t->defined() && t->requires_grad(); });
}

}  // namespace atto
