// The run loader's checks before it builds a model (config.json against model.safetensors's
// header; block_size / max_len bounds; finite weights) and the removal of stale temporary files
// of killed saves when a run is opened (issue 17, points 2, 3 and 4).
#include <gmock/gmock.h>
#include <omp.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <map>

#include "base/error.h"
#include "io/file.h"
#include "io/safetensors.h"
#include "optim/param_groups.h"
#include "support.h"
#include "train/checkpoint.h"
#include "train/trainer.h"

using namespace atto;
namespace fs = std::filesystem;

namespace {

using atto::test::error_of;
using atto::test::TempDir;
using ::testing::HasSubstr;

// A GPT run of a few steps on a names-like file (learned positions: block_size has a tensor).
std::string tiny_gpt_run(const TempDir& dir, PosKind pos = PosKind::Learned) {
  std::string text;
  for (const char* a : {"ma", "ri", "an", "el", "jo"})
    for (const char* b : {"li", "sa", "on", "ka", "te", "mo"}) text += std::string(a) + b + "\n";
  io::write_file_atomic(dir / "names.txt", text);
  RunConfig c;
  c.data.path = dir / "names.txt";
  c.gpt.n_layers = 2;
  c.gpt.n_heads = 2;
  c.gpt.d_model = 16;
  c.gpt.pos = pos;
  c.train.batch_size = 8;
  c.train.steps = 3;
  c.train.eval_every = 3;
  c.train.threads = 1;
  const std::string run = dir / (pos == PosKind::Learned ? "run" : "run_sin");
  train_run(c, {.out_dir = run, .progress = nullptr});
  return run;
}

// config.json of `run` with model[key] = value.
void set_model_key(const std::string& run, const std::string& section, const std::string& key, nlohmann::json value) {
  nlohmann::json j = io::read_json(run_path(run, "config.json"));
  j[section][key] = std::move(value);
  io::write_json_atomic(run_path(run, "config.json"), j);
}

}  // namespace

// Each damaged dimension is reported from the header, naming both files, the key, the value
// and the tensor's shape, before the model is built. The old loader built the model first: with
// block_size 1000000000 it asked for a [1e9, 16] position table (64 GB) before any shape check.
TEST(LoadRun, ConfigDimensionsAreCheckedAgainstTheWeightsFirst) {
  TempDir dir;
  const std::string run = tiny_gpt_run(dir);
  const std::string cfg = run_path(run, "config.json");
  const std::string weights = run_path(run, "model.safetensors");
  const nlohmann::json good = io::read_json(cfg);
  const int64_t block = good["model"]["block_size"];
  struct Case {
    const char* key;
    int64_t value;
    std::string tensor, shape;
  };
  const std::vector<Case> cases{
      {"block_size", 1000000000, "transformer.wpe.weight", fmt::format("[{}, 16]", block)},
      {"d_model", 32, "transformer.wpe.weight", "16]"},
      {"d_ff", 100, "transformer.h.0.mlp.c_fc.weight", "[64, 16]"},
  };
  for (const Case& c : cases) {
    set_model_key(run, "model", c.key, c.value);
    const std::string e = error_of([&] { load_run(run); });
    EXPECT_THAT(e, HasSubstr(cfg));
    EXPECT_THAT(e, HasSubstr(weights));
    EXPECT_THAT(e, HasSubstr(fmt::format("{} is {}", c.key, c.value)));
    EXPECT_THAT(e, HasSubstr("'" + c.tensor + "'"));
    EXPECT_THAT(e, HasSubstr(c.shape));
    io::write_json_atomic(cfg, good);
  }
  set_model_key(run, "model", "n_layers", 5);
  const std::string e = error_of([&] { load_run(run); });
  EXPECT_THAT(e, HasSubstr(cfg));
  EXPECT_THAT(e, HasSubstr("n_layers is 5"));
  EXPECT_THAT(e, HasSubstr("holds 2 layers"));
  EXPECT_THAT(e, HasSubstr("transformer.h."));
  io::write_json_atomic(cfg, good);
  EXPECT_NO_THROW(load_run(run));
}

// Sinusoidal positions have no tensor: block_size is bounded by kMaxPositions, and the message
// names the file and says so.
TEST(LoadRun, SinusoidalBlockSizeIsBounded) {
  TempDir dir;
  const std::string run = tiny_gpt_run(dir, PosKind::Sinusoidal);
  set_model_key(run, "model", "block_size", 1000000000);
  const std::string e = error_of([&] { load_run(run); });
  EXPECT_THAT(e, HasSubstr(run_path(run, "config.json")));
  EXPECT_THAT(e, HasSubstr("block_size is 1000000000, outside [1, 65536]"));
  EXPECT_THAT(e, HasSubstr("sinusoidal positions have no tensor"));
}

// A NaN in one weight tensor is refused at load, naming the file and the tensor. The attention
// kernels treat a row of NaN scores as fully masked, so the logits of `atto sample` can stay
// finite while the weights are broken (it printed samples and exited 0).
TEST(LoadRun, NonFiniteWeightsAreRefused) {
  TempDir dir;
  const std::string run = tiny_gpt_run(dir);
  const std::string weights = run_path(run, "model.safetensors");
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    io::SafetensorsFile f = io::load_safetensors(weights);
    std::vector<std::pair<std::string, Tensor>> tensors;
    for (const std::string& n : f.names) tensors.emplace_back(n, f.get(n));
    const Tensor& ln = f.get("transformer.h.1.ln_1.weight");
    const_cast<float*>(ln.data())[3] = bad;
    io::save_safetensors(weights + ".bad", tensors, f.metadata);
    fs::rename(weights, weights + ".good");
    fs::rename(weights + ".bad", weights);
    const std::string e = error_of([&] { load_run(run); });
    EXPECT_THAT(e, HasSubstr(weights));
    EXPECT_THAT(e, HasSubstr("'transformer.h.1.ln_1.weight'"));
    EXPECT_THAT(e, HasSubstr("non-finite"));
    EXPECT_THAT(e, HasSubstr("element 3"));
    fs::rename(weights + ".good", weights);
  }
  EXPECT_NO_THROW(load_run(run));
}

// Leftovers of killed saves go when a run is opened (loader and resume); a live process's
// temporary file stays (it may be saving into this run right now).
TEST(LoadRun, StaleTempFilesAreRemovedWhenARunIsOpened) {
  TempDir dir;
  const std::string run = tiny_gpt_run(dir);
  const pid_t dead = ::fork();
  if (dead == 0) ::_exit(0);
  ::waitpid(dead, nullptr, 0);
  const std::string stale = run_path(run, fmt::format("model.safetensors.tmp.{}.0", dead).c_str());
  const std::string stale2 = run_path(run, fmt::format("train_state.safetensors.tmp.{}.1", dead).c_str());
  const std::string live = run_path(run, fmt::format("model.safetensors.tmp.{}.7", ::getppid()).c_str());
  for (const std::string& p : {stale, stale2, live}) io::write_file_atomic(p, "partial");
  load_run(run);
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_FALSE(fs::exists(stale2));
  EXPECT_TRUE(fs::exists(live));

  io::write_file_atomic(stale, "partial");
  RunConfig c = load_run_config(run);
  c.train.steps = 4;
  train_run(c, {.out_dir = run, .resume = true, .progress = nullptr});
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_TRUE(fs::exists(live));
}

// A run directory the loader cannot write to still loads (the clean-up is best effort).
TEST(LoadRun, ReadOnlyRunStillLoads) {
  TempDir dir;
  const std::string run = tiny_gpt_run(dir);
  const std::string stale = run_path(run, "model.safetensors.tmp.999999999.0");
  io::write_file_atomic(stale, "partial");
  atto::test::open_to_others(dir.path());
  fs::permissions(run, fs::perms::owner_write | fs::perms::group_write | fs::perms::others_write,
                  fs::perm_options::remove);
  // As the user nobody where the tests run as root: the run loads, and loading it removes
  // nothing (the stale temporary file stays).
  EXPECT_TRUE(atto::test::run_unprivileged([&] {
    omp_set_num_threads(1);
    (void)load_run(run);
    return true;
  }));
  fs::permissions(run, fs::perms::owner_write, fs::perm_options::add);
  EXPECT_TRUE(fs::exists(stale));
}

// ============================================================================================
// The strict train_state reader (issue 41, class 4)
// ============================================================================================
namespace {

// The run's model and optimizer, as the trainer builds them, to load a training state into.
struct Restorable {
  RunConfig cfg;
  Rng rng{0};
  GPT model;
  optim::AdamW opt;
  explicit Restorable(const std::string& run)
      : cfg(load_run_config(run)),
        model(cfg.gpt, rng),
        opt(optim::default_param_groups(model.named_parameters(), cfg.train.weight_decay),
            {cfg.train.beta1, cfg.train.beta2, cfg.train.eps}) {}
};

// A train_state file with its metadata (and tensors) as given.
void write_state(const io::SafetensorsFile& f, const std::string& path) {
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const std::string& n : f.names) tensors.emplace_back(n, f.get(n));
  io::save_safetensors(path, tensors, f.metadata);
}

std::string bytes_of(const std::string& path) { return io::read_file(path); }

}  // namespace

// Every metadata value is parsed whole and range-checked; a bad one names the file, the key and
// the value. Each of these was accepted before (or read as another number: "1e3" as 1, "20abc"
// as 20), or failed only after the run directory had been changed.
TEST(TrainState, EachBadValueIsRefusedNamingTheFileAndKey) {
  TempDir dir;
  const std::string run = tiny_gpt_run(dir);
  const io::SafetensorsFile good = io::load_safetensors(run_path(run, "train_state.safetensors"));
  EXPECT_NO_THROW(parse_train_state(good));
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"step", "-100"},
      {"step", "1e3"},
      {"step", "20abc"},
      {"step", ""},
      {"step", " 3"},
      {"step", "+3"},
      {"step", "03"},
      {"step", "99999999999999999999"},
      {"best_step", "-2"},
      {"best_step", "4"},  // after the state's step (3)
      {"evals_without_improvement", "-1"},
      {"evals_without_improvement", "9"},
      {"skipped_steps", "-1"},
      {"atto_format_version", "2"},
      {"atto_format_version", "0"},
      {"atto_format_version", "1.0"},
      {"data_rng", "1 2 3 4 junk"},
      {"data_rng", "1 2 3 4 "},
      {"data_rng", "0 0 0 0"},
      {"dropout_rng", "1 2 3"},
      {"dropout_rng", "1  2 3 4"},
      {"dropout_rng", "1 2 -3 4"},
      {"dropout_rng", "1 2 3 18446744073709551616"},
      {"best_val_loss", "nan"},
      {"best_val_loss", "inf"},
      {"best_val_loss", "abc"},
      {"best_val_loss", "1.5x"},
      {"elapsed_seconds", "-1"},
      {"elapsed_seconds", "-inf"},
  };
  for (const auto& [key, value] : bad) {
    io::SafetensorsFile f = good;
    f.metadata[key] = value;
    const std::string e = error_of([&] { parse_train_state(f); });
    EXPECT_THAT(e, HasSubstr(f.path + ": metadata '" + key + "'")) << key << " = '" << value << "'";
  }
  io::SafetensorsFile missing = good;
  missing.metadata.erase("skipped_steps");
  EXPECT_THAT(error_of([&] { parse_train_state(missing); }), HasSubstr("metadata key 'skipped_steps' is missing"));
  io::SafetensorsFile extra = good;
  extra.metadata["\x1b[2Jextra"] = "1";
  const std::string e = error_of([&] { parse_train_state(extra); });
  EXPECT_THAT(e, HasSubstr("unknown metadata key"));
  EXPECT_THAT(e, ::testing::Not(HasSubstr("\x1b")));  // echoed escaped
}

// A good state loads exactly: saving what was loaded gives the same bytes.
TEST(TrainState, AGoodStateLoadsBitIdentically) {
  TempDir dir;
  const std::string run = tiny_gpt_run(dir);
  const std::string path = run_path(run, "train_state.safetensors");
  Restorable r(run);
  const TrainState st = load_train_state(path, r.model, r.opt);
  EXPECT_EQ(st.step, 3);
  EXPECT_EQ(st.best_step, 3);
  save_train_state(dir / "again.safetensors", r.model, r.opt, st);
  EXPECT_EQ(bytes_of(dir / "again.safetensors"), bytes_of(path));
}

// A NaN in an optimizer moment (or a negative second moment) is refused naming the file and the
// tensor; it used to surface as a diverged step blamed on --lr.
TEST(TrainState, DamagedTensorsAreRefusedNamingTheTensor) {
  TempDir dir;
  const std::string run = tiny_gpt_run(dir);
  const std::string path = run_path(run, "train_state.safetensors");
  const io::SafetensorsFile good = io::load_safetensors(path);
  const std::string avg = "optim.transformer.h.0.attn.c_attn.weight.exp_avg";
  const std::string sq = "optim.transformer.h.0.attn.c_attn.weight.exp_avg_sq";
  ASSERT_TRUE(good.contains(avg) && good.contains(sq));
  for (const auto& [name, value] : std::vector<std::pair<std::string, float>>{
           {avg, std::numeric_limits<float>::quiet_NaN()}, {sq, -1.0f}, {"model.lm_head.weight", INFINITY}}) {
    const io::SafetensorsFile f = io::load_safetensors(path);
    const_cast<float*>(f.get(name).data())[2] = value;
    write_state(f, dir / "bad.safetensors");
    Restorable r(run);
    const std::string e = error_of([&] { load_train_state(dir / "bad.safetensors", r.model, r.opt); });
    EXPECT_THAT(e, HasSubstr(dir / "bad.safetensors" + ": tensor '" + name + "'"));
    EXPECT_THAT(e, HasSubstr("element 2"));
  }
  // The step agrees with the optimizer's own count of steps.
  io::SafetensorsFile f = io::load_safetensors(path);
  f.metadata["step"] = f.metadata["best_step"] = "2";
  write_state(f, dir / "bad.safetensors");
  Restorable r(run);
  EXPECT_THAT(error_of([&] { load_train_state(dir / "bad.safetensors", r.model, r.opt); }),
              HasSubstr("metadata 'step' = 2 disagrees with the optimizer state, which has taken 3 steps"));
}

// A resume that fails on the state changes nothing in the run directory: config.json is not
// rewritten, metrics.jsonl not truncated, a stale temporary file not yet removed.
TEST(TrainState, AFailedResumeChangesNothing) {
  TempDir dir;
  const std::string run = tiny_gpt_run(dir);
  const std::string state = run_path(run, "train_state.safetensors");
  const std::string stale = run_path(run, "config.json.tmp.4194305.0");
  io::write_file_atomic(stale, "partial");
  for (const char* step : {"-100", "1000"}) {
    io::SafetensorsFile f = io::load_safetensors(state);
    f.metadata["step"] = step;
    write_state(f, state);
    std::map<std::string, std::string> before;
    for (const auto& entry : fs::directory_iterator(run)) before[entry.path()] = bytes_of(entry.path());
    RunConfig c = load_run_config(run);
    c.train.steps = 2000;
    const std::string e = error_of([&] { train_run(c, {.out_dir = run, .resume = true, .progress = nullptr}); });
    EXPECT_THAT(e, HasSubstr(state + ": metadata 'step'"));
    std::map<std::string, std::string> after;
    for (const auto& entry : fs::directory_iterator(run)) after[entry.path()] = bytes_of(entry.path());
    EXPECT_EQ(before, after) << step;
  }
}

// A run stopped before its first save: resuming it, or training into it again, says what to do.
TEST(TrainState, ARunThatNeverSavedAStepSaysWhatToDo) {
  TempDir dir;
  const std::string run = tiny_gpt_run(dir);
  fs::remove(run_path(run, "train_state.safetensors"));
  fs::remove(run_path(run, "model.safetensors"));
  RunConfig c = load_run_config(run);
  c.train.steps = 6;
  EXPECT_THAT(error_of([&] { train_run(c, {.out_dir = run, .resume = true, .progress = nullptr}); }),
              HasSubstr("never saved a step"));
  RunConfig fresh = c;
  const std::string e = error_of([&] { train_run(fresh, {.out_dir = run, .progress = nullptr}); });
  EXPECT_THAT(e, HasSubstr("never saved a step"));
  EXPECT_THAT(e, HasSubstr("--force"));
  EXPECT_THAT(e, ::testing::Not(HasSubstr("--resume")));
}
