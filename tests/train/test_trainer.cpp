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
#include "support.h"
#include "train/checkpoint.h"
#include "train/trainer.h"

using namespace atto;
namespace fs = std::filesystem;

namespace {

using atto::test::TempDir;

// A small names-like file the test makes itself.
std::string write_names(const TempDir& dir) {
  const char* syll[] = {"ma", "ri", "an", "el", "jo", "li", "sa", "on", "ka", "te"};
  std::string text;
  Rng r(5);
  for (int i = 0; i < 300; ++i) {
    const int n = 1 + static_cast<int>(r.below(3));
    for (int j = 0; j < n; ++j) text += syll[r.below(10)];
    text += "\n";
  }
  const std::string path = dir / "names.txt";
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
