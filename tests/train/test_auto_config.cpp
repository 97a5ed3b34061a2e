// The settings a run takes from its data (train/auto_config.h), and --time's duration syntax.
#include <gtest/gtest.h>

#include "base/error.h"
#include "train/auto_config.h"
#include "train/progress.h"

using namespace atto;

namespace {

GptDataFacts names_facts() {  // names.txt: 31,033 training lines, longest 15 characters
  return {.mode = DataMode::Lines, .train_tokens = 221'000, .min_block = 16, .max_block = INT64_MAX};
}
GptDataFacts shakespeare_facts() {  // tinyshakespeare: 1,003,854 / 111,540 characters
  return {.mode = DataMode::Stream, .train_tokens = 1'003'854, .min_block = 1, .max_block = 111'539};
}

}  // namespace

TEST(AutoConfig, NamesGetTheSmallModelInLinesMode) {
  RunConfig c = default_run_config(Task::Gpt);
  const auto why = resolve_gpt_auto(c, names_facts());
  EXPECT_EQ(c.train.size, "small");
  EXPECT_EQ(c.gpt.d_model, 128);
  EXPECT_EQ(c.gpt.n_layers, 6);
  EXPECT_EQ(c.gpt.n_heads, 4);
  EXPECT_EQ(c.gpt.block_size, 16);  // longest line + 1
  EXPECT_EQ(c.train.batch_size, 64);
  EXPECT_EQ(c.train.steps, 11700);     // 12M tokens / (64 x 16), to 100
  EXPECT_FLOAT_EQ(c.train.lr, 2e-3f);  // lines mode
  EXPECT_EQ(c.train.warmup, 100);
  EXPECT_FLOAT_EQ(c.gpt.dropout, 0.2f);
  EXPECT_FLOAT_EQ(c.train.weight_decay, 0.3f);  // lines mode, AdamW
  EXPECT_GE(why.size(), 7u);                    // one reason per choice
  EXPECT_NO_THROW(c.train.validate());
  EXPECT_NO_THROW(c.train.lr_schedule().validate());
}

TEST(AutoConfig, ProseGetsAStreamContextAndTokenBatches) {
  RunConfig c = default_run_config(Task::Gpt);
  resolve_gpt_auto(c, shakespeare_facts());
  EXPECT_EQ(c.train.size, "small");
  EXPECT_EQ(c.gpt.block_size, 64);
  EXPECT_EQ(c.train.batch_size, 32);  // 2048 tokens a step
  EXPECT_EQ(c.train.steps, 3900);     // 8M tokens / 2048
  EXPECT_FLOAT_EQ(c.train.lr, 1e-3f);
  EXPECT_FLOAT_EQ(c.gpt.dropout, 0.1f);
  EXPECT_FLOAT_EQ(c.train.weight_decay, 0.1f);
  // SGD adds the decay to the gradient: none unless given; a given value is kept.
  RunConfig sgd = default_run_config(Task::Gpt);
  sgd.train.optimizer = optim::OptimizerKind::SGD;
  resolve_gpt_auto(sgd, shakespeare_facts());
  EXPECT_FLOAT_EQ(sgd.train.weight_decay, 0.0f);
  RunConfig given = default_run_config(Task::Gpt);
  given.train.weight_decay = 0.05f;
  resolve_gpt_auto(given, names_facts());
  EXPECT_FLOAT_EQ(given.train.weight_decay, 0.05f);
}

TEST(AutoConfig, SizeFollowsTheCorpus) {
  EXPECT_EQ(gpt_size_for(40), "tiny");
  EXPECT_EQ(gpt_size_for(19'999), "tiny");
  EXPECT_EQ(gpt_size_for(20'000), "small");
  EXPECT_EQ(gpt_size_for(2'999'999), "small");
  EXPECT_EQ(gpt_size_for(3'000'000), "medium");
  EXPECT_EQ(gpt_size_for(1'000'000'000), "large");
  EXPECT_EQ(seq2seq_size_for(260'000), "small");
  EXPECT_EQ(seq2seq_size_for(900'000), "base");
  // A tiny corpus: a small model, no dropout (learn it by heart), at least 500 steps.
  RunConfig c = default_run_config(Task::Gpt);
  resolve_gpt_auto(c, {.mode = DataMode::Lines, .train_tokens = 40, .min_block = 17, .max_block = INT64_MAX});
  EXPECT_EQ(c.train.size, "tiny");
  EXPECT_EQ(c.gpt.d_model, 32);
  EXPECT_FLOAT_EQ(c.gpt.dropout, 0.0f);
  EXPECT_FLOAT_EQ(c.train.weight_decay, 0.1f);
  EXPECT_FLOAT_EQ(c.train.lr, 2e-3f);
  EXPECT_GE(c.train.steps, 500);
  // A short stream: the context is cut to what the data allows.
  RunConfig s = default_run_config(Task::Gpt);
  resolve_gpt_auto(s, {.mode = DataMode::Stream, .train_tokens = 5000, .min_block = 1, .max_block = 40});
  EXPECT_EQ(s.gpt.block_size, 32);
  RunConfig s2 = default_run_config(Task::Gpt);
  resolve_gpt_auto(s2, {.mode = DataMode::Stream, .train_tokens = 30'000, .min_block = 1, .max_block = 40});
  EXPECT_EQ(s2.gpt.block_size, 40);
}

TEST(AutoConfig, EveryGivenFieldWins) {
  RunConfig c = default_run_config(Task::Gpt);
  c.gpt.d_model = 48;  // not a multiple of the rung's 4 heads? it is: 48 / 4
  c.gpt.n_heads = 3;
  c.gpt.dropout = 0.0f;
  c.train.steps = 123;
  c.train.lr = 5e-4f;
  c.train.batch_size = 7;
  c.gpt.block_size = 20;
  resolve_gpt_auto(c, names_facts());
  EXPECT_EQ(c.gpt.d_model, 48);
  EXPECT_EQ(c.gpt.n_heads, 3);
  EXPECT_EQ(c.gpt.n_layers, 6);  // left out: the rung's
  EXPECT_FLOAT_EQ(c.gpt.dropout, 0.0f);
  EXPECT_EQ(c.train.steps, 123);
  EXPECT_EQ(c.train.warmup, 12);  // min(100, 123 / 10)
  EXPECT_FLOAT_EQ(c.train.lr, 5e-4f);
  EXPECT_EQ(c.train.batch_size, 7);
  EXPECT_EQ(c.gpt.block_size, 20);
  // An explicit size picks that rung whatever the data.
  RunConfig big = default_run_config(Task::Gpt);
  big.train.size = "medium";
  resolve_gpt_auto(big, names_facts());
  EXPECT_EQ(big.gpt.d_model, 256);
  EXPECT_EQ(big.gpt.n_layers, 6);
  RunConfig bad = default_run_config(Task::Gpt);
  bad.train.size = "huge";
  try {
    resolve_gpt_auto(bad, names_facts());
    FAIL() << "an unknown size was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tiny, small, medium, large"), std::string::npos) << e.what();
  }
  // A plain RunConfig{} has concrete values: nothing is auto.
  RunConfig plain;
  const GPTConfig before = plain.gpt;
  EXPECT_TRUE(resolve_gpt_auto(plain, names_facts()).size() == 1u);  // only the size note
  EXPECT_EQ(plain.gpt.d_model, before.d_model);
  EXPECT_EQ(plain.train.steps, RunConfig{}.train.steps);
}

TEST(AutoConfig, Seq2SeqBySizeAndVocabulary) {
  RunConfig rev = default_run_config(Task::Seq2Seq);
  resolve_seq2seq_auto(rev, {.train_tokens = 260'000, .tgt_vocab = 14});  // digit reversal
  EXPECT_EQ(rev.train.size, "small");
  EXPECT_EQ(rev.seq2seq.d_model, 64);
  EXPECT_EQ(rev.seq2seq.n_enc_layers, 2);
  EXPECT_EQ(rev.seq2seq.n_dec_layers, 2);
  EXPECT_EQ(rev.train.batch_tokens, 2048);
  EXPECT_EQ(rev.train.steps, 1500);
  EXPECT_FLOAT_EQ(rev.train.lr, 2e-3f);
  EXPECT_EQ(rev.train.warmup, 100);
  EXPECT_FLOAT_EQ(rev.seq2seq.dropout, 0.0f);  // a symbolic task
  RunConfig m30 = default_run_config(Task::Seq2Seq);
  resolve_seq2seq_auto(m30, {.train_tokens = 900'000, .tgt_vocab = 8000});
  EXPECT_EQ(m30.train.size, "base");
  EXPECT_EQ(m30.seq2seq.d_model, 256);
  EXPECT_EQ(m30.seq2seq.n_enc_layers, 3);
  EXPECT_EQ(m30.train.batch_tokens, 4096);
  EXPECT_EQ(m30.train.steps, 2500);
  EXPECT_EQ(m30.train.warmup, 800);
  EXPECT_FLOAT_EQ(m30.seq2seq.dropout, 0.1f);
  EXPECT_NO_THROW(m30.train.validate());
  // A symbolic task stays small however many tokens (reversal with the char tokenizer).
  RunConfig chars = default_run_config(Task::Seq2Seq);
  resolve_seq2seq_auto(chars, {.train_tokens = 900'000, .tgt_vocab = 15});
  EXPECT_EQ(chars.train.size, "small");
}

TEST(AutoConfig, TimeBudgetLeavesTheStepsToThePlanner) {
  RunConfig c = default_run_config(Task::Gpt);
  c.train.time_budget = 300.0;
  resolve_gpt_auto(c, names_facts());
  EXPECT_EQ(c.train.steps, kAutoInt);
  EXPECT_EQ(c.train.warmup, kAutoWarmup);  // decided with the steps
}

// An lr below the default cosine floor (--lr 1e-5 for fine-tuning) lowers the floor to lr / 10;
// a floor the user sets above lr is still an error naming --min-lr.
TEST(AutoConfig, TheDefaultCosineFloorFollowsASmallLr) {
  TrainConfig t;
  t.lr = 1e-5f;
  EXPECT_NO_THROW(t.validate());
  EXPECT_FLOAT_EQ(t.lr_schedule().min_lr, 1e-6f);
  EXPECT_FLOAT_EQ(t.lr_schedule().at(t.steps), 1e-6f);
  t.lr = 6e-4f;
  EXPECT_FLOAT_EQ(t.lr_schedule().min_lr, kDefaultMinLr);  // above the floor: the floor as it is
  t.lr = 1e-5f;
  t.min_lr = 2e-4f;
  try {
    t.validate();
    FAIL() << "a --min-lr above --lr was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--min-lr"), std::string::npos) << e.what();
  }
}

TEST(Duration, ParsesUnitsAndRejectsTheRest) {
  EXPECT_DOUBLE_EQ(parse_duration("90", "--time"), 90.0);
  EXPECT_DOUBLE_EQ(parse_duration("90s", "--time"), 90.0);
  EXPECT_DOUBLE_EQ(parse_duration("5m", "--time"), 300.0);
  EXPECT_DOUBLE_EQ(parse_duration("2.5m", "--time"), 150.0);
  EXPECT_DOUBLE_EQ(parse_duration("1h30m", "--time"), 5400.0);
  EXPECT_DOUBLE_EQ(parse_duration("1m30s", "--time"), 90.0);
  for (const char* bad : {"", "0", "0s", "-5m", "5x", "m", "five", "1h30", "nan", "inf", "+3s"}) {
    try {
      parse_duration(bad, "--time");
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("--time"), std::string::npos) << e.what();
    }
  }
}
