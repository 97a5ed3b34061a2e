// The field table of run/config_fields.h: config.json and the flags agree because both come from it.
#include "run/config_fields.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "support.h"

namespace atto {
namespace {

using test::error_of;
using ::testing::HasSubstr;
using ::testing::Not;
using json = nlohmann::json;

// Flags given on a pretend command line.
auto flags(std::map<std::string, std::string> given) {
  return [given](const std::string& name) -> std::optional<std::string> {
    auto it = given.find(name);
    if (it == given.end()) return std::nullopt;
    return it->second;
  };
}

template <typename F>
std::string usage_error_of(F&& f) {
  try {
    f();
  } catch (const UsageError& e) {
    return e.what();
  }
  return "(no atto::UsageError)";
}

TEST(ConfigFields, EachKeyAndFlagIsDeclaredOnce) {
  std::set<std::string> keys, own_flags;
  for (const ConfigField& f : config_fields()) {
    const std::string where = std::string(to_string(f.section)) + "." + f.key;
    // The model section has one key per task, so a key may repeat only for the other task.
    const std::string task = f.task ? to_string(*f.task) : "both";
    EXPECT_TRUE(keys.insert(where + "/" + task).second) << where;
    if (f.flag) {
      EXPECT_TRUE(own_flags.insert(flag_name(f.flag)).second) << f.flag;
      EXPECT_STRNE(f.help, "") << f.flag;
    }
    // A flag is the key's name with '-' for '_' (except --time, a duration for time_budget_s).
    if (f.flag && std::string(f.key) != "time_budget_s" && std::string(f.key) != "data") {
      std::string expect = "--" + std::string(f.key);
      for (char& c : expect) c = c == '_' ? '-' : c;
      EXPECT_EQ(flag_name(f.flag), expect);
    }
  }
  for (const ConfigField& f : config_fields())
    if (f.fallback_flag) {
      EXPECT_TRUE(own_flags.count(flag_name(f.fallback_flag))) << f.key;
    }
}

TEST(ConfigFields, ConfigJsonRoundTripsEveryKeyOfBothTasks) {
  for (Task task : {Task::Gpt, Task::Seq2Seq}) {
    RunConfig c = default_run_config(task);
    c.train.steps = 123;
    c.train.lr = 0.25f;
    c.data.tokenizer = TokenizerKind::Spm;
    c.train.best_by = BestBy::Bleu;
    c.gpt.pre_norm = c.seq2seq.pre_norm = false;
    const json j = to_json(c);
    EXPECT_EQ(j["task"], to_string(task));
    const RunConfig back = run_config_from_json(j, "config.json");
    EXPECT_EQ(to_json(back), j);
    EXPECT_EQ(back.train.steps, 123);
    EXPECT_EQ(back.data.tokenizer, TokenizerKind::Spm);
    // Every row of the task (model rows of the other task excepted) is in the file.
    for (const ConfigField& f : config_fields()) {
      const bool model_of_other = f.section == Section::Model && f.task && *f.task != task;
      EXPECT_EQ(j[to_string(f.section)].contains(f.key), !model_of_other) << f.key;
    }
  }
}

TEST(ConfigFields, ConfigJsonErrorsNameTheFileAndKey) {
  RunConfig c = default_run_config(Task::Gpt);
  EXPECT_THAT(error_of([&] {
                apply_config_json(c, json{{"train", {{"steps", "ten"}}}}, "my.json");
              }),
              HasSubstr("my.json: key 'steps' = \"ten\": expected an integer"));
  EXPECT_THAT(error_of([&] { apply_config_json(c, json{{"seed", -1}}, "my.json"); }), HasSubstr("non-negative"));
  EXPECT_THAT(error_of([&] {
                apply_config_json(c, json{{"threads", 1ll << 40}}, "my.json");
              }),
              HasSubstr("out of range"));
  EXPECT_THAT(error_of([&] {
                apply_config_json(c, json{{"model", {{"max_len", 9}}}}, "my.json");
              }),
              HasSubstr("unknown key \"max_len\" in section 'model'"));
  EXPECT_THAT(error_of([&] {
                apply_config_json(c, json{{"tokenizer", "wordpiece"}}, "my.json");
              }),
              HasSubstr("use char, bpe or spm (GPT), char, word or spm (seq2seq)"));
  EXPECT_THAT(error_of([&] {
                apply_config_json(c, json{{"task", "lm"}}, "my.json");
              }),
              HasSubstr("use gpt or seq2seq"));
}

// The tokenizer's size and the model's vocabulary are two keys (data.tokenizer_vocab_size,
// model.vocab_size); atto 0.9's config.json called the first data.vocab_size, and still reads.
TEST(ConfigFields, TheTokenizersSizeAndTheModelsVocabularyAreTwoKeys) {
  RunConfig c = default_run_config(Task::Gpt);
  apply_config_json(c, json::parse(R"({"data": {"tokenizer_vocab_size": 300}, "model": {"vocab_size": 70}})"), "t");
  EXPECT_EQ(c.data.tokenizer_vocab_size, 300);
  EXPECT_EQ(c.gpt.vocab_size, 70);
  const json j = to_json(c);
  EXPECT_EQ(j["data"]["tokenizer_vocab_size"], 300);
  EXPECT_FALSE(j["data"].contains("vocab_size"));
  EXPECT_EQ(j["model"]["vocab_size"], 70);
  RunConfig flat = default_run_config(Task::Gpt);  // flat keys (the C API's config_json)
  apply_config_json(flat, json::parse(R"({"tokenizer_vocab_size": 500, "vocab_size": 80})"), "t");
  EXPECT_EQ(flat.data.tokenizer_vocab_size, 500);
  EXPECT_EQ(flat.gpt.vocab_size, 80);
  RunConfig old = default_run_config(Task::Gpt);
  apply_config_json(old, json::parse(R"({"format_version": 1, "data": {"vocab_size": 400}})"), "t");
  EXPECT_EQ(old.data.tokenizer_vocab_size, 400);
  EXPECT_EQ(old.gpt.vocab_size, default_run_config(Task::Gpt).gpt.vocab_size);
  // Both flags set it: --tokenizer-vocab-size (the key's name) and --vocab-size.
  RunConfig f = default_run_config(Task::Gpt);
  apply_flags(f, false, flags({{"--tokenizer-vocab-size", "600"}}));
  EXPECT_EQ(f.data.tokenizer_vocab_size, 600);
}

TEST(ConfigFields, FlagsSetTheirKeyForTheRunsTask) {
  RunConfig g = default_run_config(Task::Gpt);
  apply_flags(g, false,
              flags({{"--d-model", "96"},
                     {"--n-layers", "3"},
                     {"--ffn", "swiglu"},
                     {"--bias", "false"},
                     {"--lr", "3e-4"},
                     {"--seed", "7"}}));
  EXPECT_EQ(g.gpt.d_model, 96);
  EXPECT_EQ(g.gpt.n_layers, 3);
  EXPECT_EQ(g.gpt.activation, nn::Activation::SwiGLU);
  EXPECT_FALSE(g.gpt.bias);
  EXPECT_FLOAT_EQ(g.train.lr, 3e-4f);
  EXPECT_EQ(g.train.seed, 7u);

  // seq2seq: --n-layers sets both stacks unless --n-enc-layers/--n-dec-layers say otherwise,
  // --shared-vocab also shares the embeddings.
  RunConfig s = default_run_config(Task::Seq2Seq);
  apply_flags(s, false,
              flags({{"--d-model", "64"},
                     {"--n-layers", "3"},
                     {"--n-dec-layers", "2"},
                     {"--shared-vocab", "true"},
                     {"--tokenizer", "word"}}));
  EXPECT_EQ(s.seq2seq.d_model, 64);
  EXPECT_EQ(s.gpt.d_model, default_run_config(Task::Seq2Seq).gpt.d_model);  // the GPT side is untouched
  EXPECT_EQ(s.seq2seq.n_enc_layers, 3);
  EXPECT_EQ(s.seq2seq.n_dec_layers, 2);
  EXPECT_TRUE(s.data.shared_vocab);
  EXPECT_TRUE(s.seq2seq.share_embeddings);
  EXPECT_EQ(s.data.tokenizer, TokenizerKind::Word);

  // --time is a duration, and it leaves the number of steps to the plan.
  RunConfig t = default_run_config(Task::Gpt);
  t.train.steps = 500;
  apply_flags(t, false, flags({{"--time", "1m30s"}}));
  EXPECT_DOUBLE_EQ(t.train.time_budget, 90.0);
  EXPECT_EQ(t.train.steps, kAutoInt);
}

TEST(ConfigFields, BadFlagsAreUsageErrorsNamingTheFlag) {
  RunConfig g = default_run_config(Task::Gpt);
  EXPECT_THAT(usage_error_of([&] {
                apply_flags(g, false, flags({{"--steps", "10x"}}));
              }),
              HasSubstr("--steps expects an integer, got '10x'"));
  EXPECT_THAT(usage_error_of([&] {
                apply_flags(g, false, flags({{"--lr", "fast"}}));
              }),
              HasSubstr("--lr expects a number"));
  EXPECT_THAT(usage_error_of([&] {
                apply_flags(g, false, flags({{"--norm", "batchnorm"}}));
              }),
              HasSubstr("--norm batchnorm: unknown norm"));
  EXPECT_THAT(usage_error_of([&] {
                apply_flags(g, false, flags({{"--src", "a.txt"}}));
              }),
              HasSubstr("--src is for --task seq2seq; this run's task is gpt"));
  RunConfig s = default_run_config(Task::Seq2Seq);
  EXPECT_THAT(usage_error_of([&] {
                apply_flags(s, false, flags({{"--block-size", "64"}}));
              }),
              HasSubstr("--block-size is for --task gpt"));
  EXPECT_THAT(error_of([&] { apply_flags(g, false, flags({{"--time", "soon"}})); }), HasSubstr("--time 'soon'"));
}

TEST(ConfigFields, ResumeAllowsExactlyTheMarkedFlagsAndListsThem) {
  RunConfig s = default_run_config(Task::Seq2Seq);
  apply_flags(s, true, flags({{"--steps", "900"}, {"--eval-bleu", "50"}, {"--threads", "1"}}));
  EXPECT_EQ(s.train.steps, 900);
  EXPECT_EQ(s.train.eval_bleu, 50);
  const std::string msg = usage_error_of([&] { apply_flags(s, true, flags({{"--lr", "0.1"}})); });
  EXPECT_THAT(msg, HasSubstr("--lr cannot be changed when resuming"));
  for (const ConfigField& f : config_fields()) {
    if (!f.flag) continue;
    if (f.on_resume)
      EXPECT_THAT(msg, HasSubstr(flag_name(f.flag)));
    else
      EXPECT_THAT(msg, Not(HasSubstr(flag_name(f.flag) + ","))) << f.flag;
  }
  EXPECT_THAT(msg, HasSubstr("--eval-bleu"));  // allowed, so listed (it once was not)
}

// The C API asks the same rules by config key: the keys a resume may change are exactly the
// marked fields', and the refusal lists them as keys, not flags.
TEST(ConfigFields, ResumeRulesByKeyAreTheFlagsRules) {
  for (const ConfigField& f : config_fields()) EXPECT_EQ(changeable_on_resume(f.key), f.on_resume) << f.key;
  EXPECT_FALSE(changeable_on_resume("no_such_key"));
  const std::string msg = usage_error_of([] { refuse_on_resume("config_json key 'lr'", false); });
  EXPECT_THAT(msg, HasSubstr("config_json key 'lr' cannot be changed when resuming"));
  EXPECT_THAT(msg, HasSubstr("eval_bleu"));
  EXPECT_THAT(msg, Not(HasSubstr("--eval-bleu")));
}

// A new run's data, named as the caller's user writes a key.
TEST(ConfigFields, NewRunNeedsItsDataNamedAsTheCallerWritesIt) {
  const auto cli = [](const std::string& key) { return "--" + key; };
  RunConfig g = default_run_config(Task::Gpt);
  EXPECT_THAT(usage_error_of([&] { check_new_run_inputs(g, cli); }), HasSubstr("no training data: give --data"));
  g.data.path = "names.txt";
  EXPECT_NO_THROW(check_new_run_inputs(g, cli));
  RunConfig s = default_run_config(Task::Seq2Seq);
  s.data.src = "train.en";
  const std::string msg = usage_error_of([&] { check_new_run_inputs(s, cli); });
  EXPECT_THAT(msg, HasSubstr("--src and --tgt (or --data"));
  s.data.tgt = "train.de";
  EXPECT_NO_THROW(check_new_run_inputs(s, cli));
  RunConfig t = default_run_config(Task::Seq2Seq);
  t.data.path = "pairs.tsv";
  EXPECT_NO_THROW(check_new_run_inputs(t, cli));
}

TEST(ConfigFields, HelpDefaultsAreTheTasksDefaults) {
  std::map<std::string, std::string> shown;
  for (const ConfigField& f : config_fields())
    if (f.section == Section::Train || f.section == Section::Model) shown[f.key] = default_text(f);
  EXPECT_EQ(shown["beta2"], "0.99");
  EXPECT_EQ(shown["eval_bleu"], "500");  // seq2seq's: only seq2seq uses it
  EXPECT_EQ(shown["steps"], "auto");
  EXPECT_EQ(shown["ffn"], "gelu");
}

}  // namespace
}  // namespace atto
