// The trainer: exact resume, best checkpoint, divergence handling, run-directory safety.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "base/error.h"
#include "io/file.h"
#include "io/safetensors.h"
#include "kernels/kernels.h"
#include "run/run_dir.h"
#include "support.h"
#include "train/checkpoint.h"
#include "train/trainer.h"

using namespace atto;
using atto::test::error_of;
using ::testing::HasSubstr;
namespace fs = std::filesystem;

namespace {

using atto::test::TempDir;

// A small names-like file the test makes itself; `seed` and `max_syll` make another text of the same
// characters.
std::string write_names(const TempDir& dir, const char* file = "names.txt", uint64_t seed = 5, int lines = 300,
                        int max_syll = 3) {
  const char* syll[] = {"ma", "ri", "an", "el", "jo", "li", "sa", "on", "ka", "te"};
  std::string text;
  Rng r(seed);
  for (int i = 0; i < lines; ++i) {
    const int n = 1 + static_cast<int>(r.below(static_cast<uint64_t>(max_syll)));
    for (int j = 0; j < n; ++j) text += syll[r.below(10)];
    text += "\n";
  }
  const std::string path = dir / file;
  io::write_file_atomic(path, text);
  return path;
}

RunConfig tiny_config(const std::string& data) {
  RunConfig c;
  c.data.path = data;
  c.gpt.n_layers = 2;
  c.gpt.n_heads = 2;
  c.gpt.d_model = 16;
  c.gpt.dropout = 0.1f;  // exercises the dropout RNG across the resume
  c.train.batch_size = 8;
  c.train.steps = 200;
  c.train.warmup = 10;
  c.train.eval_every = 50;
  c.train.log_every = 25;
  c.train.threads = 1;
  return c;
}

std::vector<std::pair<std::string, std::vector<float>>> weights(const std::string& path) {
  const auto f = io::load_safetensors(path);
  std::vector<std::pair<std::string, std::vector<float>>> out;
  for (const auto& n : f.names) out.emplace_back(n, f.get(n).to_vector());
  return out;
}

// A new run as `atto train` makes it: the defaults, then the few keys a user gives.
RunConfig new_run(const std::string& data, int64_t steps) {
  RunConfig c = default_run_config(Task::Gpt);
  c.data.path = data;
  c.train.steps = steps;
  c.train.batch_size = 8;
  c.train.warmup = 5;
  c.train.eval_every = steps;
  c.train.log_every = steps;
  c.train.threads = 1;
  return c;
}

// Run A: size tiny (d_model 32, 2 layers, 4 heads), 100 steps on names.
TrainResult train_source(const TempDir& dir, const std::string& data) {
  RunConfig a = new_run(data, 100);
  a.train.size = "tiny";
  a.gpt.dropout = 0.0f;
  return train_run(a, {.out_dir = dir / "A", .progress = nullptr});
}

// A fine-tuning run from A with a learning rate too small to move any weight (0 means auto).
RunConfig frozen(const TempDir& dir, const std::string& data) {
  RunConfig b = new_run(data, 1);
  b.train.init_from = dir / "A";
  b.train.lr = 1e-30f;
  b.train.min_lr = 0.0f;
  b.train.warmup = 0;
  b.train.schedule = optim::ScheduleKind::Constant;
  return b;
}

}  // namespace

TEST(Trainer, ResumeIsBitExact) {
  TempDir dir;
  const std::string data = write_names(dir);
  RunConfig straight = tiny_config(data);
  train_run(straight, {.out_dir = dir / "straight", .progress = nullptr});

  RunConfig first = tiny_config(data);
  first.train.steps = 100;
  first.train.decay_steps = 200;  // the same schedule as the straight run
  train_run(first, {.out_dir = dir / "split", .progress = nullptr});
  RunConfig again = load_run_config(dir / "split");
  again.train.steps = 200;
  const TrainResult r = train_run(again, {.out_dir = dir / "split", .resume = true, .progress = nullptr});
  EXPECT_EQ(r.steps, 200);

  const auto a = weights(dir / "straight/train_state.safetensors");
  const auto b = weights(dir / "split/train_state.safetensors");
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].first, b[i].first);
    EXPECT_EQ(a[i].second, b[i].second) << a[i].first;  // bit for bit
  }
  EXPECT_EQ(weights(dir / "straight/model.safetensors"), weights(dir / "split/model.safetensors"));
}

// The stop flag (the CLI's Ctrl-C) ends training after the current step with the state saved, and
// the resumed run ends where an uninterrupted one does. train_run leaves the thread count alone.
TEST(Trainer, StopFlagSavesTheStateAndResumeFinishesTheRun) {
  TempDir dir;
  const std::string data = write_names(dir);
  kernels::set_num_threads(1);
  RunConfig c = tiny_config(data);
  c.train.threads = 2;  // recorded in config.json; the CLI applies it, train_run does not
  std::atomic<bool> stop{true};
  const TrainResult r = train_run(c, {.out_dir = dir / "stopped", .progress = nullptr, .stop = &stop});
  EXPECT_EQ(kernels::num_threads(), 1);
  kernels::set_num_threads(0);
  EXPECT_TRUE(r.interrupted);
  EXPECT_EQ(r.steps, 1);
  EXPECT_TRUE(fs::exists(dir / "stopped/train_state.safetensors"));
  const TrainResult done =
      train_run(load_run_config(dir / "stopped"), {.out_dir = dir / "stopped", .resume = true, .progress = nullptr});
  EXPECT_FALSE(done.interrupted);
  EXPECT_EQ(done.steps, 200);
  train_run(tiny_config(data), {.out_dir = dir / "straight", .progress = nullptr});
  EXPECT_EQ(weights(dir / "straight/train_state.safetensors"), weights(dir / "stopped/train_state.safetensors"));
}

TEST(Trainer, KeepsBestCheckpointAndWritesMetrics) {
  TempDir dir;
  RunConfig c = tiny_config(write_names(dir));
  c.train.steps = 60;
  c.train.eval_every = 20;
  const TrainResult r = train_run(c, {.out_dir = dir / "run", .progress = nullptr});
  EXPECT_EQ(r.metric, Metric::ValLoss);
  EXPECT_LT(r.best_score, std::log(27.0));  // better than uniform
  for (const char* f : {"config.json", "tokenizer.json", "model.safetensors", "train_state.safetensors"})
    EXPECT_TRUE(fs::exists(dir / (std::string("run/") + f))) << f;
  std::ifstream m(dir / "run/metrics.jsonl");
  int evals = 0, logs = 0;
  for (std::string line; std::getline(m, line);) {
    const auto j = nlohmann::json::parse(line);
    evals += j.contains("val_loss");
    logs += j.contains("train_loss");
  }
  EXPECT_EQ(evals, 3);
  EXPECT_EQ(logs, 3);  // steps 25, 50 and the last
  // The saved best model evaluates to the recorded best loss.
  LoadedModel lm = load_run(dir / "run");
  EXPECT_EQ(lm.model->num_parameters(), r.num_parameters);
}

TEST(Trainer, RefusesToOverwriteARunAndResumeNeedsState) {
  TempDir dir;
  RunConfig c = tiny_config(write_names(dir));
  c.train.steps = 5;
  train_run(c, {.out_dir = dir / "run", .progress = nullptr});
  const auto before = weights(dir / "run/model.safetensors");
  try {
    train_run(c, {.out_dir = dir / "run", .progress = nullptr});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("already holds a run"), std::string::npos) << e.what();
  }
  EXPECT_EQ(weights(dir / "run/model.safetensors"), before);
  fs::remove(dir / "run/train_state.safetensors");
  RunConfig again = load_run_config(dir / "run");
  again.train.steps = 10;
  EXPECT_THROW(train_run(again, {.out_dir = dir / "run", .resume = true, .progress = nullptr}), Error);
}

TEST(Trainer, DivergenceStopsWithoutCorruptingCheckpoints) {
  TempDir dir;
  RunConfig c = tiny_config(write_names(dir));
  c.gpt.dropout = 0.0f;
  c.train.steps = 200;
  c.train.eval_every = 1;
  c.train.warmup = 0;
  c.train.schedule = optim::ScheduleKind::Constant;
  c.train.lr = 1e30f;  // blows the weights up within a few steps
  c.train.grad_clip = 0.0f;
  try {
    train_run(c, {.out_dir = dir / "run", .progress = nullptr});
    FAIL() << "training with lr 1e30 did not stop";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("diverged"), std::string::npos) << e.what();
  }
  for (const char* f : {"run/model.safetensors", "run/train_state.safetensors"}) {
    if (!fs::exists(dir / f)) continue;
    for (const auto& [name, v] : weights(dir / f))
      for (float x : v) ASSERT_TRUE(std::isfinite(x)) << f << " " << name;
  }
}

// Fine-tuning (--init-from): the run starts from a model's weights, architecture and tokenizer.
TEST(Finetune, StartsFromTheSourceAndLearnsFasterThanFromScratch) {
  TempDir dir;
  const std::string names = write_names(dir);
  const TrainResult a = train_source(dir, names);

  // lr ~0 for one step: the weights are A's, bit for bit, and so is the validation loss.
  const TrainResult b = train_run(frozen(dir, names), {.out_dir = dir / "B", .progress = nullptr});
  EXPECT_TRUE(weights(dir / "A/model.safetensors") == weights(dir / "B/model.safetensors"));
  EXPECT_EQ(b.best_score, a.best_score);
  const RunConfig saved = load_run_config(dir / "B");
  EXPECT_EQ(saved.train.init_from, std::string(dir / "A"));
  EXPECT_EQ(saved.gpt.d_model, 32);
  EXPECT_EQ(saved.gpt.dropout, 0.0f);  // fine-tuning's default

  // A different text of the same characters: the loss at step 0 is A's on it.
  const std::string other = write_names(dir, "other.txt", 11, 200, 2);
  const double start = train_run(frozen(dir, other), {.out_dir = dir / "C0", .progress = nullptr}).best_score;
  constexpr int64_t kSteps = 30;
  RunConfig ft = new_run(other, kSteps);
  ft.train.init_from = dir / "A";
  ft.train.lr = 1e-3f;
  const TrainResult tuned = train_run(ft, {.out_dir = dir / "C", .progress = nullptr});
  EXPECT_LT(tuned.last_val_loss, start);
  RunConfig scratch = new_run(other, kSteps);
  scratch.train.size = "tiny";
  scratch.gpt.dropout = 0.0f;
  const TrainResult fresh = train_run(scratch, {.out_dir = dir / "S", .progress = nullptr});
  EXPECT_LT(tuned.last_val_loss, fresh.last_val_loss);

  // Resume of a fine-tuned run is bit-exact (and never reads A again: it is gone).
  RunConfig half = ft;
  half.train.steps = kSteps / 2;
  half.train.decay_steps = kSteps;
  RunConfig straight = ft;
  straight.train.decay_steps = kSteps;
  train_run(straight, {.out_dir = dir / "straight", .progress = nullptr});
  train_run(half, {.out_dir = dir / "split", .progress = nullptr});
  std::filesystem::rename(dir / "A", dir / "A.moved");
  RunConfig again = load_run_config(dir / "split");
  again.train.steps = kSteps;
  train_run(again, {.out_dir = dir / "split", .resume = true, .progress = nullptr});
  EXPECT_TRUE(weights(dir / "straight/train_state.safetensors") == weights(dir / "split/train_state.safetensors"));
}

TEST(Finetune, RefusesWhatConflictsWithTheSource) {
  TempDir dir;
  const std::string names = write_names(dir);
  train_source(dir, names);
  const std::string a = dir / "A";
  auto run = [&](const std::function<void(RunConfig&)>& change, const char* out) {
    RunConfig c = frozen(dir, names);
    change(c);
    return train_run(c, {.out_dir = dir / out, .progress = nullptr});
  };
  EXPECT_THAT(error_of([&] { run([](RunConfig& c) { c.gpt.d_model = 64; }, "x"); }),
              HasSubstr("--d-model 64 conflicts with --init-from " + a + " (d_model 32): leave it out"));
  EXPECT_THAT(error_of([&] { run([](RunConfig& c) { c.data.tokenizer = TokenizerKind::Bpe; }, "x"); }),
              HasSubstr("--tokenizer bpe conflicts with --init-from " + a));
  EXPECT_THAT(error_of([&] { run([](RunConfig& c) { c.train.size = "small"; }, "x"); }),
              HasSubstr("--size small conflicts with --init-from " + a));
  EXPECT_THAT(error_of([&] { run([](RunConfig& c) { c.data.tokenizer_vocab_size = 3; }, "x"); }),
              HasSubstr("--vocab-size 3 conflicts with --init-from " + a));
  EXPECT_THAT(error_of([&] { run([](RunConfig& c) { c.gpt.n_layers = 3; }, "x"); }), HasSubstr("--n-layers 3"));
  // The same values are accepted.
  EXPECT_NO_THROW(run(
      [](RunConfig& c) {
        c.gpt.d_model = 32;
        c.gpt.n_heads = 4;
        c.train.size = "tiny";
        c.data.tokenizer = TokenizerKind::Char;
      },
      "same"));
  // A source that is not there, or not a model.
  EXPECT_THAT(error_of([&] { run([&](RunConfig& c) { c.train.init_from = dir / "nothing"; }, "x"); }),
              HasSubstr(std::string(dir / "nothing")));
  EXPECT_THAT(error_of([&] { run([&](RunConfig& c) { c.train.init_from = names; }, "x"); }),
              HasSubstr("--init-from " + names + " is neither a directory"));
  std::filesystem::create_directories(dir / "empty");
  EXPECT_THAT(error_of([&] { run([&](RunConfig& c) { c.train.init_from = dir / "empty"; }, "x"); }),
              HasSubstr(std::string(dir / "empty")));
  // A character the source's tokenizer lacks is named.
  io::write_file_atomic(dir / "z.txt", "mari\nzoe\n");
  EXPECT_THAT(error_of([&] { run([&](RunConfig& c) { c.data.path = dir / "z.txt"; }, "x"); }),
              HasSubstr("'z' (U+007A) at line 2 column 1"));
  // Lines data needs a boundary token: a stream-mode source's char tokenizer has none.
  RunConfig stream = new_run(names, 5);
  stream.data.mode = DataMode::Stream;
  stream.train.size = "tiny";
  train_run(stream, {.out_dir = dir / "stream", .progress = nullptr});
  EXPECT_THAT(error_of([&] { run([&](RunConfig& c) { c.train.init_from = dir / "stream"; }, "x"); }),
              HasSubstr("has no boundary token to end a line: train with --mode stream"));
  EXPECT_FALSE(std::filesystem::exists(dir / "x/config.json"));
}

// LoRA (--lora-rank): only the adapters train; the base stays the source's, bit for bit, in
// model.safetensors; the adapters go to adapter.safetensors; load_run merges them exactly.
TEST(Lora, TrainsOnlyTheAdaptersAndLoadsMerged) {
  TempDir dir;
  const std::string names = write_names(dir);
  train_source(dir, names);
  const std::string other = write_names(dir, "other.txt", 11, 200, 2);
  const double start = train_run(frozen(dir, other), {.out_dir = dir / "C0", .progress = nullptr}).best_score;
  constexpr int64_t kSteps = 30;
  RunConfig l = new_run(other, kSteps);
  l.train.init_from = dir / "A";
  l.gpt.lora_rank = 4;
  l.gpt.lora_targets = "qkv,proj,fc,fc2";
  const TrainResult tuned = train_run(l, {.out_dir = dir / "L", .progress = nullptr});
  EXPECT_LT(tuned.last_val_loss, start);
  EXPECT_TRUE(weights(dir / "A/model.safetensors") == weights(dir / "L/model.safetensors"));
  const auto adapter = weights(dir / "L/adapter.safetensors");
  EXPECT_EQ(adapter.size(), 2u * 4u * 2u);  // 2 layers x 4 layers adapted x (A, B)
  for (const auto& [name, v] : adapter) EXPECT_TRUE(name.ends_with(".lora_A.weight") || name.ends_with(".lora_B.weight")) << name;
  // The training state holds the adapters and their moments only.
  for (const auto& [name, v] : weights(dir / "L/train_state.safetensors"))
    if (name != "optim.step") {
      EXPECT_NE(name.find(".lora_"), std::string::npos) << name;
    }
  EXPECT_EQ(load_run_config(dir / "L").gpt.lora_rank, 4);

  // load_run merges: its logits are the adapted model's.
  LoadedModel merged = load_run(dir / "L");
  EXPECT_EQ(merged.lora_adapter, std::string(dir / "L/adapter.safetensors"));
  EXPECT_FALSE(merged.model->config().lora());
  Rng rng(0);
  GPT adapted(load_run_config(dir / "L").gpt, rng);
  load_model_weights(dir / "L/model.safetensors", adapted, nn::Module::Which::Frozen);
  load_model_weights(dir / "L/adapter.safetensors", adapted, nn::Module::Which::Trainable);
  adapted.eval();
  const std::vector<int32_t> ids = {0, 3, 5, 2, 7, 1};
  {
    NoGradGuard no_grad;
    const std::vector<float> a = adapted.forward(ids, 1, 6).to_vector(), b = merged.model->forward(ids, 1, 6).to_vector();
    ASSERT_EQ(a.size(), b.size());
    float worst = 0.0f;
    for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(a[i] - b[i]));
    EXPECT_LT(worst, 1e-5f);
  }

  // Resume is bit-exact.
  RunConfig straight = l, half = l;
  straight.train.decay_steps = kSteps;
  half.train.decay_steps = kSteps;
  half.train.steps = kSteps / 2;
  train_run(straight, {.out_dir = dir / "straight", .progress = nullptr});
  train_run(half, {.out_dir = dir / "split", .progress = nullptr});
  RunConfig again = load_run_config(dir / "split");
  again.train.steps = kSteps;
  train_run(again, {.out_dir = dir / "split", .resume = true, .progress = nullptr});
  EXPECT_TRUE(weights(dir / "straight/train_state.safetensors") == weights(dir / "split/train_state.safetensors"));
  EXPECT_TRUE(weights(dir / "straight/model.safetensors") == weights(dir / "split/model.safetensors"));
}

TEST(Lora, RefusesWhatItCannotTrainOrLoad) {
  TempDir dir;
  const std::string names = write_names(dir);
  RunConfig c = new_run(names, 2);
  c.train.size = "tiny";
  c.gpt.lora_rank = 4;
  EXPECT_THAT(error_of([&] { train_run(c, {.out_dir = dir / "x", .progress = nullptr}); }),
              HasSubstr("--lora-rank 4: LoRA trains adapters over the frozen weights of a trained model"));
  train_source(dir, names);
  c.train.init_from = dir / "A";
  c.gpt.lora_targets = "qkv,ffn";
  EXPECT_THAT(error_of([&] { train_run(c, {.out_dir = dir / "x", .progress = nullptr}); }),
              HasSubstr("lora_targets \"qkv,ffn\": \"ffn\" is not a target"));
  c.gpt.lora_targets = "proj";
  train_run(c, {.out_dir = dir / "L", .progress = nullptr});
  EXPECT_NO_THROW(load_run(dir / "L"));
  // An adapter file that lacks a tensor is named.
  auto f = io::load_safetensors(dir / "L/adapter.safetensors");
  std::vector<std::pair<std::string, Tensor>> kept;
  for (const auto& n : f.names)
    if (n != "transformer.h.1.attn.c_proj.lora_B.weight") kept.emplace_back(n, f.get(n));
  io::save_safetensors(dir / "L/adapter.safetensors", kept, {});
  EXPECT_THAT(error_of([&] { load_run(dir / "L"); }),
              HasSubstr("adapter.safetensors: tensor 'transformer.h.1.attn.c_proj.lora_B.weight' is missing"));
  fs::remove(dir / "L/adapter.safetensors");
  EXPECT_THAT(error_of([&] { load_run(dir / "L"); }), HasSubstr("has not saved its adapters yet"));
  // Resuming without the frozen base is refused before anything changes.
  fs::remove(dir / "L/model.safetensors");
  RunConfig again = load_run_config(dir / "L");
  again.train.steps = 4;
  EXPECT_THAT(error_of([&] { train_run(again, {.out_dir = dir / "L", .resume = true, .progress = nullptr}); }),
              HasSubstr("model.safetensors is missing: this LoRA run keeps its frozen base weights there"));
}
