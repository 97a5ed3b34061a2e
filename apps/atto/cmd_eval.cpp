// atto eval: loss, perplexity and bits per character of a trained GPT over a text file.
#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "data/dataset.h"
#include "kernels/kernels.h"
#include "tensor/error.h"
#include "train/checkpoint.h"
#include "train/trainer.h"

namespace atto::cli {

namespace {

struct EvalFlags {
  std::string model, data;
  int64_t batch_size = 32;
  int threads = 0;
  bool json = false;
};

int run_eval(const EvalFlags& f) {
  kernels::set_num_threads(f.threads);
  LoadedModel lm = load_run(f.model);
  const TextFile file = read_text_file(f.data);
  const DataMode mode = lm.config.data.mode;
  // The file is scored whole, in the model's data mode: every line (lines) or every token
  // (stream), with the model's vocabulary; unknown characters are an error naming them.
  TextFile whole = file;
  auto data = make_dataset(whole, lm.tokenizer, mode, {.split_seed = lm.config.data.split_seed});
  const int64_t T = lm.config.model.block_size;
  data->check_block_size(T);
  double total = 0.0;
  int64_t count = 0;
  for (Split split : {Split::Train, Split::Val}) {
    if (data->size(split) == 0) continue;
    const double loss = evaluate_loss(*lm.model, *data, split, f.batch_size, T);
    int64_t n = 0;
    for (int64_t i = 0; i < data->num_eval_batches(split, f.batch_size, T); ++i)
      n += data->eval_batch(split, i, f.batch_size, T).num_targets();
    total += loss * n;
    count += n;
  }
  const double loss = total / count;
  const double ppl = std::exp(loss), bpc = loss / std::log(2.0);
  if (f.json) {
    fmt::print("{}\n", nlohmann::json{{"file", f.data}, {"mode", to_string(mode)}, {"tokens", count},
                                      {"loss", loss}, {"perplexity", ppl}, {"bits_per_char", bpc}}
                           .dump());
  } else {
    fmt::print("{}: {} targets ({} mode)\nloss        {:.4f} nats/token\nperplexity  {:.3f}\nbits/char   {:.4f}\n",
               f.data, count, to_string(mode), loss, ppl, bpc);
  }
  return 0;
}

}  // namespace

Command add_eval(CLI::App& root) {
  CLI::App* app = root.add_subcommand("eval", "Loss, perplexity and bits per character of a model over a text file");
  auto f = std::make_shared<EvalFlags>();
  app->add_option("--model", f->model, "Run directory of a trained model")->required();
  app->add_option("--data", f->data, "Text file to score, in the model's data mode")->required();
  app->add_option("--batch-size", f->batch_size, "Sequences per batch")->capture_default_str();
  app->add_option("--threads", f->threads, "Threads; 0 = all cores")->capture_default_str();
  app->add_flag("--json", f->json, "Print one JSON object");
  return {app, [f] { return run_eval(*f); }};
}

}  // namespace atto::cli
