// Training the encoder-decoder end to end through the library: the toy English->Spanish set of
// the classic from-scratch tutorials, and digit-sequence reversal.
#include <gtest/gtest.h>

#include "data/synth.h"
#include "generate/seq2seq_decode.h"
#include "io/file.h"
#include "support.h"
#include "train/checkpoint.h"
#include "train/trainer.h"

using namespace atto;

namespace {
using atto::test::TempDir;

std::vector<std::string> translate_lines(LoadedSeq2Seq& lm, const std::vector<std::string>& lines, int64_t beam) {
  std::vector<std::vector<int32_t>> src;
  for (const auto& l : lines) src.push_back(lm.src_tok->encode(l));
  gen::DecodeOptions o;
  o.beam = beam;
  std::vector<std::string> out;
  for (const auto& h : gen::translate_batch(*lm.model, src, o)) out.push_back(lm.tgt_tok->decode(h[0].tokens));
  return out;
}
const std::vector<std::string> kToyEn = {"hello my name", "hello messi", "my name is messi"};
const std::vector<std::string> kToyEs = {"hola mi nombre", "hola messi", "mi nombre es messi"};

// A seq2seq run on `reps` copies of the toy pairs (word tokenizer, 2 heads, no dropout, 1 thread).
RunConfig toy_run(const TempDir& dir, int reps, int64_t d_model, int64_t layers) {
  std::string src, tgt;
  for (int rep = 0; rep < reps; ++rep)
    for (size_t i = 0; i < kToyEn.size(); ++i) src += kToyEn[i] + "\n", tgt += kToyEs[i] + "\n";
  io::write_file_atomic(dir / "toy.en", src);
  io::write_file_atomic(dir / "toy.es", tgt);
  RunConfig c = default_run_config(Task::Seq2Seq);
  c.data.src = dir / "toy.en";
  c.data.tgt = dir / "toy.es";
  c.data.tokenizer = TokenizerKind::Word;
  c.seq2seq.d_model = d_model;
  c.seq2seq.n_heads = 2;
  c.seq2seq.n_enc_layers = c.seq2seq.n_dec_layers = layers;
  c.seq2seq.max_len = 8;
  c.seq2seq.dropout = 0.0f;
  c.train.threads = 1;
  return c;
}
}  // namespace

TEST(Seq2SeqTraining, LearnsTheToyEnglishSpanishSet) {
  TempDir dir;
  const std::vector<std::string>& en = kToyEn;
  const std::vector<std::string>& es = kToyEs;
  // A few copies so that the seeded validation split leaves all three in training.
  RunConfig c = toy_run(dir, 4, 32, 2);
  c.train.steps = 150;
  c.train.warmup = 20;
  c.train.lr = 3e-3f;
  c.train.eval_every = 150;
  c.train.eval_bleu = 0;
  c.train.best_by = BestBy::Loss;
  c.train.threads = 1;
  train_run(c, {.out_dir = dir / "run", .progress = nullptr});
  LoadedSeq2Seq lm = load_seq2seq_run(dir / "run");
  EXPECT_EQ(translate_lines(lm, en, 1), es);
  EXPECT_EQ(translate_lines(lm, en, 3), es);
}

// A run that keeps its best checkpoint by BLEU cannot resume with BLEU off (nor the reverse): its
// saved best (minus BLEU) would be compared with validation losses. Refused before any change.
TEST(Seq2SeqTraining, ResumeKeepsTheMetricOfTheBestCheckpoint) {
  TempDir dir;
  RunConfig c = toy_run(dir, 1, 16, 1);
  c.train.steps = 10;
  c.train.eval_every = 10;
  c.train.eval_bleu = 3;
  c.train.best_by = BestBy::Bleu;
  const TrainResult r = train_run(c, {.out_dir = dir / "run", .progress = nullptr});
  EXPECT_EQ(r.metric, Metric::Bleu);
  const std::string before = io::read_file(dir / "run/config.json");
  RunConfig off = c;
  off.train.steps = 20;
  off.train.eval_bleu = 0;
  const std::string msg = test::error_of([&] { train_run(off, {.out_dir = dir / "run", .resume = true, .progress = nullptr}); });
  EXPECT_NE(msg.find("keeps its best checkpoint by BLEU"), std::string::npos) << msg;
  EXPECT_NE(msg.find("--eval-bleu above 0"), std::string::npos) << msg;
  EXPECT_EQ(io::read_file(dir / "run/config.json"), before);  // nothing changed
  RunConfig on = c;  // the same metric resumes
  on.train.steps = 20;
  EXPECT_EQ(train_run(on, {.out_dir = dir / "run", .resume = true, .progress = nullptr}).steps, 20);
}

// The ctest budget: >= 95% exact-match accuracy on held-out reversals. 700 steps at
// lr 2e-3 sat on the edge: rounding-level changes to the kernels moved the accuracy between
// 0.74 and 1.0, and at 1200 steps one of seven seeds still fell below 0.95 (at lr 2e-3 and at
// 1e-3). At 1500 steps and lr 1e-3, seeds 1, 3, 5, 6 and the default gave 0.987 to 1.0.
TEST(SlowSeq2SeqTraining, ReversesDigitSequences) {
  TempDir dir;
  write_synth(SynthTask::Reverse, 6000, {.seed = 1}, dir / "rev");
  const auto test = make_synth(SynthTask::Reverse, 300, {.seed = 2});
  RunConfig c = default_run_config(Task::Seq2Seq);
  c.data.src = dir / "rev.src";
  c.data.tgt = dir / "rev.tgt";
  c.data.tokenizer = TokenizerKind::Word;
  c.seq2seq.d_model = 64;
  c.seq2seq.n_heads = 4;
  c.seq2seq.n_enc_layers = c.seq2seq.n_dec_layers = 2;
  c.seq2seq.max_len = 16;
  c.seq2seq.dropout = 0.0f;
  c.train.steps = 1500;
  c.train.warmup = 100;
  c.train.lr = 1e-3f;
  c.train.batch_tokens = 2048;
  c.train.eval_every = c.train.steps;
  c.train.eval_bleu = 0;
  c.train.best_by = BestBy::Loss;
  train_run(c, {.out_dir = dir / "run", .progress = nullptr});
  LoadedSeq2Seq lm = load_seq2seq_run(dir / "run");
  std::vector<std::string> src, want;
  for (const auto& [s, t] : test) src.push_back(s), want.push_back(t);
  const auto got = translate_lines(lm, src, 1);
  int correct = 0;
  for (size_t i = 0; i < got.size(); ++i) correct += got[i] == want[i];
  const double acc = static_cast<double>(correct) / got.size();
  RecordProperty("accuracy", std::to_string(acc));
  EXPECT_GE(acc, 0.95) << correct << " of " << got.size() << " exact; e.g. '" << src[0] << "' -> '" << got[0] << "'";
}
