// atto._core: the Python extension over atto's C API (include/atto/atto.h). The
// Pythonic layer (keyword arguments, docstrings, result classes) is atto/__init__.py; this file
// turns C calls into Python objects, releases the GIL while atto computes, and turns statuses
// into atto.Error (atto.InvalidArgumentError, also a ValueError, for bad arguments).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <utility>
#include <vector>

#include "atto/atto.h"

namespace py = pybind11;

namespace {

PyObject* g_error = nullptr;      // atto.Error
PyObject* g_arg_error = nullptr;  // atto.InvalidArgumentError(atto.Error, ValueError)

// How a failing status becomes a Python exception: whether bad input (ATTO_ERR_BAD_INPUT) is a bad
// argument of this call (a prompt with a character the vocabulary lacks) or a bad file (a run
// directory that is not one).
enum class BadInput { IsArgument, IsFile };

struct StatusError {
  atto_status status;
  std::string message;
  bool argument;
};

[[noreturn]] void raise_status(atto_status s, BadInput bad_input) {
  const bool argument = s == ATTO_ERR_INVALID_ARGUMENT || (s == ATTO_ERR_BAD_INPUT && bad_input == BadInput::IsArgument);
  throw StatusError{s, atto_last_error(), argument};
}

void check(atto_status s, BadInput bad_input = BadInput::IsArgument) {
  if (s != ATTO_OK) raise_status(s, bad_input);
}

void set_python_error(const StatusError& e) {
  PyObject* cls = e.argument ? g_arg_error : g_error;
  py::object exc = py::reinterpret_borrow<py::object>(cls)(e.message);
  exc.attr("status") = py::str(atto_status_name(e.status));
  PyErr_SetObject(cls, exc.ptr());
}

[[noreturn]] void argument_error(const std::string& msg) {
  throw StatusError{ATTO_ERR_INVALID_ARGUMENT, msg, true};
}

// atto's texts are UTF-8 bytes; a byte-level BPE sample may end inside a character.
py::str text(const char* s, size_t len) {
  PyObject* o = PyUnicode_DecodeUTF8(s, static_cast<Py_ssize_t>(len), "replace");
  if (!o) throw py::error_already_set();
  return py::reinterpret_steal<py::str>(o);
}

atto_vocab vocab_of(const std::string& v) {
  if (v == "source") return ATTO_VOCAB_SOURCE;
  if (v == "target") return ATTO_VOCAB_TARGET;
  argument_error("vocab must be 'source' or 'target', got '" + v + "'");
}

// A pending Python exception raised inside a callback that atto called with the GIL released:
// kept until the C call returns, then raised in the caller.
struct PendingError {
  std::optional<py::error_already_set> error;
  void rethrow() {
    if (error) {
      py::error_already_set e = std::move(*error);
      error.reset();
      throw e;
    }
  }
};

// ---- Model ------------------------------------------------------------------------------------

// One open model and its context. Every call releases the GIL and holds life_ shared (close()
// holds it exclusively, so no call sees a model being freed); calls that run the context
// (generate, score, logits, set_threads) also hold ctx_, one at a time, as the C API requires.
// Locks are always taken after the GIL is released: a callback that takes the GIL while a lock
// is held cannot deadlock with a thread waiting for that lock.
class Model {
 public:
  Model(const std::string& path, int32_t threads) {
    atto_status s;
    {
      py::gil_scoped_release nogil;
      s = atto_model_open(path.c_str(), &m_);
    }
    check(s, BadInput::IsFile);
    atto_context_params p = atto_context_default_params();
    p.n_threads = threads;
    if ((s = atto_context_new(m_, &p, &c_)) != ATTO_OK) {
      atto_model_free(std::exchange(m_, nullptr));
      check(s);
    }
  }
  ~Model() {  // no other reference is left: no call is running
    atto_context_free(c_);
    atto_model_free(m_);
  }
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  void close() {
    py::gil_scoped_release nogil;
    std::unique_lock<std::shared_mutex> lock(life_);
    atto_context_free(std::exchange(c_, nullptr));
    atto_model_free(std::exchange(m_, nullptr));
  }
  bool closed() const { return m_ == nullptr; }

  void set_threads(int32_t n) {
    with_context([&](atto_context* c) { check(atto_context_set_threads(c, n)); });
  }

  py::dict info() {
    atto_model_info i{};
    with_model([&](const atto_model* m) { check(atto_model_info_get(m, &i)); });
    py::dict d;
    d["task"] = i.task == ATTO_TASK_SEQ2SEQ ? "seq2seq" : "gpt";
    d["vocab_size"] = i.vocab_size;
    d["tgt_vocab_size"] = i.tgt_vocab_size;
    d["context"] = i.context;
    d["n_params"] = i.n_params;
    d["d_model"] = i.d_model;
    d["n_heads"] = i.n_heads;
    d["n_kv_heads"] = i.n_kv_heads;
    d["rope_base"] = i.rope_base;
    d["n_layers"] = i.n_layers;
    d["n_dec_layers"] = i.n_dec_layers;
    d["lines_mode"] = i.lines_mode;
    d["eos_token"] = i.eos_token;
    return d;
  }

  std::vector<int32_t> tokenize(const std::string& s, const std::string& vocab) {
    const atto_vocab v = vocab_of(vocab);
    std::vector<int32_t> ids;
    with_model([&](const atto_model* m) {
      size_t n = 0;
      const atto_status st = atto_tokenize(m, v, s.data(), s.size(), nullptr, 0, &n);
      if (st != ATTO_ERR_BUFFER_TOO_SMALL) check(st);
      ids.resize(n);
      check(atto_tokenize(m, v, s.data(), s.size(), ids.data(), ids.size(), &n));
    });
    return ids;
  }

  py::str detokenize(const std::vector<int32_t>& ids, const std::string& vocab) {
    const atto_vocab v = vocab_of(vocab);
    std::string out;
    with_model([&](const atto_model* m) {
      size_t len = 0;
      const atto_status st = atto_detokenize(m, v, ids.data(), ids.size(), nullptr, 0, &len);
      if (st != ATTO_ERR_BUFFER_TOO_SMALL) check(st);
      out.assign(len + 1, '\0');
      check(atto_detokenize(m, v, ids.data(), ids.size(), out.data(), out.size(), &len));
      out.resize(len);
    });
    return text(out.data(), out.size());
  }

  py::str token_text(int32_t token, const std::string& vocab) {
    const atto_vocab v = vocab_of(vocab);
    std::string out;
    with_model([&](const atto_model* m) {
      size_t len = 0;
      const atto_status st = atto_token_to_piece(m, v, token, nullptr, 0, &len);
      if (st != ATTO_ERR_BUFFER_TOO_SMALL) check(st);
      out.assign(len + 1, '\0');
      check(atto_token_to_piece(m, v, token, out.data(), out.size(), &len));
      out.resize(len);
    });
    return text(out.data(), out.size());
  }

  py::list generate(const std::string& prompt, int64_t n, const py::dict& kw, py::object on_text);
  py::tuple score(const std::string& s);
  py::array_t<float> logits(const std::vector<int32_t>& tokens);
  py::dict weights();
  py::tuple inspect(const std::string& text);
  py::list translate(const std::vector<std::string>& sources, const py::dict& kw);
  py::array_t<float> translate_logits(const std::string& source, const std::vector<int32_t>& prefix);

 private:
  // f(model) with the GIL released and the model kept open; a closed model is a bad argument.
  template <typename F>
  void with_model(F&& f) {
    py::gil_scoped_release nogil;
    std::shared_lock<std::shared_mutex> lock(life_);
    if (!m_) argument_error("the model is closed");
    f(static_cast<const atto_model*>(m_));
  }
  // f(context), also one call at a time on the context.
  template <typename F>
  void with_context(F&& f) {
    py::gil_scoped_release nogil;
    std::shared_lock<std::shared_mutex> lock(life_);
    std::lock_guard<std::mutex> ctx_lock(ctx_);
    if (!c_) argument_error("the model is closed");
    f(c_);
  }

  atto_model* m_ = nullptr;
  atto_context* c_ = nullptr;
  std::shared_mutex life_;
  std::mutex ctx_;
};

template <typename T>
T opt(const py::dict& kw, const char* key, T fallback) {
  return kw.contains(key) && !kw[key].is_none() ? kw[key].cast<T>() : fallback;
}

// generate()'s token callback (GIL taken): Python's signal handlers (Ctrl-C), then the caller's
// on_text(index, piece). An exception from either ends every sample and is raised when
// atto_generate returns.
struct GenerateState {
  py::object on_text;  // None: no streaming
  PendingError pending;
};

bool on_piece(int64_t index, const char* piece, size_t len, int32_t, void* user) {
  auto* st = static_cast<GenerateState*>(user);
  if (st->pending.error) return false;
  py::gil_scoped_acquire gil;
  if (PyErr_CheckSignals() != 0) {
    st->pending.error.emplace();
    return false;
  }
  if (st->on_text.is_none()) return true;
  try {
    const py::object r = st->on_text(index, text(piece, len));
    return r.is_none() || r.cast<bool>();
  } catch (py::error_already_set& e) {
    st->pending.error.emplace(std::move(e));
    return false;
  }
}

// generate(prompt, n, sampler): the sampler's keys are atto_sample_params's fields.
py::list Model::generate(const std::string& prompt, int64_t n, const py::dict& kw, py::object on_text) {
  atto_sample_params p = atto_sample_default_params();
  p.temperature = opt<float>(kw, "temperature", p.temperature);
  p.top_k = opt<int32_t>(kw, "top_k", p.top_k);
  p.top_p = opt<float>(kw, "top_p", p.top_p);
  p.min_p = opt<float>(kw, "min_p", p.min_p);
  p.repetition_penalty = opt<float>(kw, "repetition_penalty", p.repetition_penalty);
  p.repetition_last_n = opt<int32_t>(kw, "repetition_last_n", p.repetition_last_n);
  p.greedy = opt<bool>(kw, "greedy", p.greedy);
  p.seed = opt<uint64_t>(kw, "seed", p.seed);
  p.max_tokens = opt<int64_t>(kw, "max_tokens", p.max_tokens);
  p.frequency_penalty = opt<float>(kw, "frequency_penalty", p.frequency_penalty);
  p.presence_penalty = opt<float>(kw, "presence_penalty", p.presence_penalty);
  const auto bias = opt<std::map<int32_t, float>>(kw, "logit_bias", {});
  std::vector<int32_t> bias_ids;
  std::vector<float> bias_values;
  for (const auto& [id, b] : bias) bias_ids.push_back(id), bias_values.push_back(b);
  p.logit_bias_tokens = bias_ids.data();
  p.logit_bias_values = bias_values.data();
  p.n_logit_bias = bias_ids.size();
  const std::vector<std::string> stop = opt<std::vector<std::string>>(kw, "stop", {});
  std::vector<const char*> stops;
  for (const std::string& s : stop) stops.push_back(s.c_str());
  p.stop = stops.data();
  p.n_stop = stops.size();
  GenerateState state{std::move(on_text), {}};
  atto_strings* out = nullptr;
  atto_status s = ATTO_OK;
  with_context([&](atto_context* c) { s = atto_generate(c, prompt.c_str(), n, &p, on_piece, &state, &out); });
  std::unique_ptr<atto_strings, void (*)(atto_strings*)> owned(out, atto_strings_free);
  state.pending.rethrow();
  check(s);
  py::list r;
  for (size_t i = 0; i < atto_strings_count(out); ++i) {
    size_t len = 0;
    const char* t = atto_strings_get(out, i, &len);
    r.append(text(t, len));
  }
  return r;
}

// (tokens, logprobs, total_nll, mean_nll)
py::tuple Model::score(const std::string& s) {
  atto_scores sc{};
  atto_status st = ATTO_OK;
  with_context([&](atto_context* c) { st = atto_score(c, s.data(), s.size(), &sc); });
  check(st);
  std::vector<int32_t> tokens(sc.tokens, sc.tokens + sc.n);
  py::array_t<double> logprobs(static_cast<py::ssize_t>(sc.n));
  std::copy(sc.logprobs, sc.logprobs + sc.n, logprobs.mutable_data());
  py::tuple r = py::make_tuple(tokens, logprobs, sc.total_nll, sc.mean_nll);
  atto_scores_free(&sc);
  return r;
}

py::array_t<float> Model::logits(const std::vector<int32_t>& tokens) {
  atto_model_info i{};
  with_model([&](const atto_model* m) { check(atto_model_info_get(m, &i)); });
  py::array_t<float> out(static_cast<py::ssize_t>(i.vocab_size));
  float* dst = out.mutable_data();
  with_context([&](atto_context* c) {
    check(atto_logits(c, tokens.data(), tokens.size(), dst, static_cast<size_t>(i.vocab_size)));
  });
  return out;
}

// name -> read-only float32 array over the model's own memory (no copy); one capsule owns the
// list (atto_weights: it keeps the tensors alive, also after close()) and frees it when the
// last array goes.
py::dict Model::weights() {
  atto_weights* list = nullptr;
  with_model([&](const atto_model* m) { check(atto_model_weights(m, &list)); });
  py::capsule owner(list, [](void* p) { atto_weights_free(static_cast<atto_weights*>(p)); });
  py::dict d;
  for (size_t i = 0; i < atto_weights_count(list); ++i) {
    atto_weight w{};
    if (!atto_weights_get(list, i, &w)) continue;
    std::vector<py::ssize_t> shape(w.shape, w.shape + w.ndim);
    py::array_t<float> a(shape, w.data, owner);
    a.attr("setflags")(py::arg("write") = false);
    d[py::str(w.name)] = a;
  }
  return d;
}

// inspect(text) -> (ids, attention, residual): one traced forward pass (atto_inspect). The two
// float32 arrays lie over the inspection's memory (no copy), which one capsule frees when the
// last of them goes; they are the caller's alone, so they stay writable.
py::tuple Model::inspect(const std::string& s) {
  atto_inspection* x = nullptr;
  atto_status st = ATTO_OK;
  with_context([&](atto_context* c) { st = atto_inspect(c, s.data(), s.size(), &x); });
  check(st);
  py::capsule owner(x, [](void* p) { atto_inspection_free(static_cast<atto_inspection*>(p)); });
  const int32_t* ids = atto_inspection_tokens(x);
  std::vector<int32_t> tokens(ids, ids + atto_inspection_n_tokens(x));
  int64_t a[4] = {}, r[3] = {};
  const float* attention = atto_inspection_attention(x, a);
  const float* residual = atto_inspection_residual(x, r);
  py::array_t<float> att(std::vector<py::ssize_t>(a, a + 4), attention, owner);
  py::array_t<float> res(std::vector<py::ssize_t>(r, r + 3), residual, owner);
  return py::make_tuple(tokens, att, res);
}

// translate(sources, params): per source, n_best (text, score) pairs, best first.
py::list Model::translate(const std::vector<std::string>& sources, const py::dict& kw) {
  atto_translate_params p = atto_translate_default_params();
  p.beam = opt<int32_t>(kw, "beam", p.beam);
  p.n_best = opt<int32_t>(kw, "n_best", p.n_best);
  p.length_penalty = opt<float>(kw, "length_penalty", p.length_penalty);
  p.max_len_a = opt<float>(kw, "max_len_a", p.max_len_a);
  p.max_len_b = opt<int32_t>(kw, "max_len_b", p.max_len_b);
  std::vector<const char*> src;
  for (const std::string& s : sources) src.push_back(s.c_str());
  atto_strings* out = nullptr;
  with_context([&](atto_context* c) { check(atto_translate(c, src.data(), src.size(), &p, &out)); });
  std::unique_ptr<atto_strings, void (*)(atto_strings*)> owned(out, atto_strings_free);
  py::list r;
  for (size_t i = 0; i < sources.size(); ++i) {
    py::list hyps;
    for (size_t j = 0; j < static_cast<size_t>(p.n_best); ++j) {
      const size_t k = i * static_cast<size_t>(p.n_best) + j;
      size_t len = 0;
      const char* t = atto_strings_get(out, k, &len);
      hyps.append(py::make_tuple(text(t, len), atto_strings_score(out, k)));
    }
    r.append(hyps);
  }
  return r;
}

py::array_t<float> Model::translate_logits(const std::string& source, const std::vector<int32_t>& prefix) {
  atto_model_info i{};
  with_model([&](const atto_model* m) { check(atto_model_info_get(m, &i)); });
  py::array_t<float> out(static_cast<py::ssize_t>(i.tgt_vocab_size));
  float* dst = out.mutable_data();
  with_context([&](atto_context* c) {
    check(atto_translate_logits(c, source.c_str(), prefix.data(), prefix.size(), dst,
                                static_cast<size_t>(i.tgt_vocab_size)));
  });
  return out;
}

py::dict translate_defaults() {
  const atto_translate_params p = atto_translate_default_params();
  py::dict d;
  d["beam"] = p.beam;
  d["n_best"] = p.n_best;
  d["length_penalty"] = p.length_penalty;
  d["max_len_a"] = p.max_len_a;
  d["max_len_b"] = p.max_len_b;
  return d;
}

// ---- training ---------------------------------------------------------------------------------

struct TrainState {
  py::object progress;  // callable(dict) -> bool or None; None: no callback
  PendingError pending;
};

bool on_progress(const atto_train_progress* p, void* user) {
  auto* st = static_cast<TrainState*>(user);
  if (st->pending.error) return false;
  py::gil_scoped_acquire gil;
  if (PyErr_CheckSignals() != 0) {  // Ctrl-C: stop (the run saves its state), then raise
    st->pending.error.emplace();
    return false;
  }
  if (st->progress.is_none()) return true;
  try {
    py::dict d;
    d["step"] = p->step;
    d["total_steps"] = p->total_steps;
    d["train_loss"] = p->train_loss;
    d["val_loss"] = std::isnan(p->val_loss) ? py::object(py::none()) : py::object(py::float_(p->val_loss));
    d["best_score"] = p->best_score;
    d["metric"] = p->metric == ATTO_METRIC_BLEU ? "bleu" : "val_loss";
    d["elapsed_s"] = p->elapsed_s;
    d["tokens_per_s"] = p->tokens_per_s;
    const py::object r = st->progress(d);
    return r.is_none() || r.cast<bool>();
  } catch (py::error_already_set& e) {
    st->pending.error.emplace(std::move(e));
    return false;
  }
}

py::dict train(const std::string& config_json, const std::string& out_dir, bool resume, bool force, int32_t threads,
               py::object progress) {
  TrainState state{std::move(progress), {}};
  atto_train_params p = atto_train_default_params();
  p.config_json = config_json.c_str();
  p.out_dir = out_dir.c_str();
  p.resume = resume;
  p.force = force;
  p.n_threads = threads;
  p.on_progress = on_progress;
  p.user = &state;
  atto_train_result r{};
  atto_status s;
  {
    py::gil_scoped_release nogil;
    s = atto_train(&p, &r);
  }
  state.pending.rethrow();
  // A bad key or value of the configuration is a bad argument of train(); a data file that is
  // missing or unreadable is not (atto.Error). The C API reports both as ATTO_ERR_BAD_INPUT; the
  // configuration's messages name config_json (the train settings) or the model's config.
  const std::string msg = atto_last_error();
  if (s == ATTO_ERR_BAD_INPUT && (msg.find("config_json") != std::string::npos || msg.starts_with("GPT config:") ||
                                  msg.starts_with("seq2seq config:")))
    raise_status(ATTO_ERR_BAD_INPUT, BadInput::IsArgument);
  if (s != ATTO_ERR_STOPPED) check(s, BadInput::IsFile);
  py::dict d;
  d["steps"] = r.steps;
  d["best_score"] = r.best_score;
  d["metric"] = r.metric == ATTO_METRIC_BLEU ? "bleu" : "val_loss";
  d["best_step"] = r.best_step;
  d["last_train_loss"] = r.last_train_loss;
  d["seconds"] = r.seconds;
  d["n_params"] = r.n_params;
  d["interrupted"] = r.interrupted;
  return d;
}

py::dict sample_defaults() {
  const atto_sample_params p = atto_sample_default_params();
  py::dict d;
  d["temperature"] = p.temperature;
  d["top_k"] = p.top_k;
  d["top_p"] = p.top_p;
  d["min_p"] = p.min_p;
  d["repetition_penalty"] = p.repetition_penalty;
  d["repetition_last_n"] = p.repetition_last_n;
  d["greedy"] = p.greedy;
  d["frequency_penalty"] = p.frequency_penalty;
  d["presence_penalty"] = p.presence_penalty;
  d["seed"] = p.seed;
  d["max_tokens"] = p.max_tokens;
  return d;
}

}  // namespace

PYBIND11_MODULE(_core, m) {
  m.doc() = "atto's C API for Python (the public interface is the atto package)";
  g_error = PyErr_NewExceptionWithDoc("atto.Error",
                                      "An error reported by atto; str(e) is atto's message, e.status its status "
                                      "('ATTO_ERR_BAD_INPUT', ...).",
                                      PyExc_Exception, nullptr);
  py::tuple bases = py::make_tuple(py::handle(g_error), py::handle(PyExc_ValueError));
  g_arg_error = PyErr_NewExceptionWithDoc("atto.InvalidArgumentError",
                                          "A bad argument (an atto.Error and a ValueError): a value out of range, "
                                          "a text the vocabulary cannot encode, an unknown configuration key.",
                                          bases.ptr(), nullptr);
  m.attr("Error") = py::handle(g_error);
  m.attr("InvalidArgumentError") = py::handle(g_arg_error);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const StatusError& e) {
      set_python_error(e);
    }
  });

  m.def("version", [] { return std::string(atto_version()); });
  m.def("sample_defaults", &sample_defaults);
  m.def("translate_defaults", &translate_defaults);
  m.def("train", &train, py::arg("config_json"), py::arg("out_dir"), py::arg("resume"), py::arg("force"),
        py::arg("threads"), py::arg("progress"));

  py::class_<Model>(m, "Model")
      .def(py::init<const std::string&, int32_t>(), py::arg("path"), py::arg("threads") = 0)
      .def("close", &Model::close)
      .def_property_readonly("closed", &Model::closed)
      .def("set_threads", &Model::set_threads)
      .def("info", &Model::info)
      .def("tokenize", &Model::tokenize, py::arg("text"), py::arg("vocab") = "source")
      .def("detokenize", &Model::detokenize, py::arg("ids"), py::arg("vocab") = "source")
      .def("token_text", &Model::token_text, py::arg("token"), py::arg("vocab") = "source")
      .def("generate", &Model::generate, py::arg("prompt"), py::arg("n"), py::arg("sampler"),
           py::arg("on_text") = py::none())
      .def("score", &Model::score, py::arg("text"))
      .def("logits", &Model::logits, py::arg("tokens"))
      .def("weights", &Model::weights)
      .def("inspect", &Model::inspect, py::arg("text"))
      .def("translate", &Model::translate, py::arg("sources"), py::arg("params"))
      .def("translate_logits", &Model::translate_logits, py::arg("source"), py::arg("prefix"));
}
