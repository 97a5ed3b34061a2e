// train_and_generate: the C++ API (atto/atto.hpp) end to end.
//   train_and_generate train DATA OUT_DIR    trains a tiny GPT on DATA (one name per line) into
//                                            OUT_DIR, printing its progress, then loads the run
//                                            and prints 10 samples (seed 42)
//   train_and_generate score RUN_DIR TEXT... the total negative log-likelihood of each text, in
//                                            the words of `atto score --model RUN_DIR TEXT...`
// Every failing call throws atto::Exception; its message says what is wrong.
#include <cmath>
#include <cstdio>
#include <string>

#include <atto/atto.hpp>

namespace {

// A JSON string literal of s (the data path goes into config_json).
std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

int train_and_generate(const std::string& data, const std::string& out_dir) {
  atto::TrainParams t;
  t.config_json = R"({"data": )" + json_string(data) +
                  R"(, "steps": 60, "d_model": 32, "n_heads": 2, "n_layers": 1, "log_every": 10, "eval_every": 30})";
  t.out_dir = out_dir;
  t.force = true;
  t.n_threads = 1;
  const atto_train_result r = atto::train(t, [](const atto_train_progress& p) {
    std::printf("step %lld/%lld  train loss %.4f", static_cast<long long>(p.step),
                static_cast<long long>(p.total_steps), p.train_loss);
    if (!std::isnan(p.val_loss)) std::printf("  val loss %.4f", p.val_loss);
    std::printf("\n");
    return true;  // false would stop here (the run is saved; resume it with TrainParams::resume)
  });
  std::printf("trained %lld steps in %.2f s: %lld parameters, best %s %.4f at step %lld\n",
              static_cast<long long>(r.steps), r.seconds, static_cast<long long>(r.n_params),
              r.metric == ATTO_METRIC_BLEU ? "BLEU" : "val loss", r.best_score, static_cast<long long>(r.best_step));

  atto::Model model(out_dir);
  model.set_threads(1);
  atto::SampleParams p;
  p.seed = 42;
  for (const std::string& s : model.generate("", 10, p)) std::printf("%s\n", s.c_str());
  return 0;
}

int score(const std::string& run_dir, char** texts, int n) {
  atto::Model model(run_dir);
  for (int i = 0; i < n; ++i) {
    const atto::Scores s = model.score(texts[i]);
    std::printf("%s\n  total -log p %.4f nats over %zu tokens, mean %.4f nats/token\n", texts[i], s.total_nll,
                s.logprobs.size(), s.mean_nll);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  try {
    if (mode == "train" && argc == 4) return train_and_generate(argv[2], argv[3]);
    if (mode == "score" && argc >= 4) return score(argv[2], argv + 3, argc - 3);
  } catch (const atto::Exception& e) {
    std::fprintf(stderr, "train_and_generate: %s (%s)\n", e.what(), atto_status_name(e.status()));
    return 1;
  }
  std::fprintf(stderr, "usage: %s train DATA OUT_DIR\n       %s score RUN_DIR TEXT...\n", argv[0], argv[0]);
  return 2;
}
