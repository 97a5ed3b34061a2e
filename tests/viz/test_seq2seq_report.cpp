// atto inspect on a seq2seq run: the cross-attention, encoder and decoder self-attention and
// next-token numbers embedded in index.html equal what Seq2Seq::encode/decode compute for the
// greedy (or forced) translation.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include <unistd.h>

#include "autograd/tape.h"
#include "base/error.h"
#include "generate/seq2seq_decode.h"
#include "io/file.h"
#include "run/run_dir.h"
#include "train/trainer.h"
#include "viz/seq2seq_report.h"
#include "viz/viz_support.h"

using namespace atto;
using namespace atto::viz;
using atto::test::occurrences;
namespace fs = std::filesystem;

namespace {


// A tiny seq2seq run (60 training steps), shared by the tests of this file.
class Seq2SeqReport : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / fmt::format("atto-viz-s2s-{}", ::getpid());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    const std::vector<std::string> en = {"a dog runs", "a cat sleeps", "the dog sleeps", "the cat runs"};
    const std::vector<std::string> de = {"ein hund laeuft", "eine katze schlaeft", "der hund schlaeft",
                                         "die katze laeuft"};
    std::string src, tgt;
    for (int rep = 0; rep < 3; ++rep)
      for (size_t i = 0; i < en.size(); ++i) src += en[i] + "\n", tgt += de[i] + "\n";
    io::write_file_atomic((dir_ / "d.en").string(), src);
    io::write_file_atomic((dir_ / "d.de").string(), tgt);
    RunConfig c = default_run_config(Task::Seq2Seq);
    c.data.src = (dir_ / "d.en").string();
    c.data.tgt = (dir_ / "d.de").string();
    c.data.tokenizer = TokenizerKind::Word;
    c.seq2seq.d_model = 16;
    c.seq2seq.n_heads = 2;
    c.seq2seq.n_enc_layers = 2;
    c.seq2seq.n_dec_layers = 3;
    c.seq2seq.max_len = 8;
    c.seq2seq.dropout = 0.0f;
    c.train.steps = 60;  // enough for a greedy translation of a few tokens (0.1 s)
    c.train.warmup = 10;
    c.train.lr = 3e-3f;
    c.train.eval_every = 60;
    c.train.eval_bleu = 0;
    c.train.best_by = BestBy::Loss;
    c.train.threads = 1;
    train_run(c, {.out_dir = run(), .progress = nullptr});
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }
  static std::string run() { return (dir_ / "run").string(); }
  static fs::path dir_;
};
fs::path Seq2SeqReport::dir_;

struct Seq2SeqTraced {
  std::vector<nn::BlockTrace> enc, dec;
  std::vector<float> logits;  // [T, V]
};
Seq2SeqTraced trace(Seq2Seq& m, const std::vector<int32_t>& src, const std::vector<int32_t>& tgt) {
  NoGradGuard ng;
  m.eval();
  Seq2SeqTraced t;
  nn::BlockRecorder enc(t.enc), dec(t.dec);
  const Tensor mem = m.encode(src, 1, static_cast<int64_t>(src.size()), {}, &enc);
  t.logits = m.decode(tgt, 1, static_cast<int64_t>(tgt.size()), mem, {}, {}, &dec).contiguous().to_vector();
  return t;
}

// weights[l][h] of kind `k` in the page data equal the trace's [1, NH, R, K] tensors; rows sum to 1.
void expect_weights(const nlohmann::json& a, const std::vector<nn::BlockTrace>& blocks, bool cross, bool causal) {
  ASSERT_EQ(a["layers"].get<size_t>(), blocks.size());
  for (size_t l = 0; l < blocks.size(); ++l) {
    const Tensor& w = cross ? blocks[l].cross_weights : blocks[l].attn_weights;
    const std::vector<float> d = w.contiguous().to_vector();
    const int64_t NH = w.size(1), R = w.size(2), K = w.size(3);
    ASSERT_EQ(a["heads"], NH);
    ASSERT_EQ(a["rows"], R);
    ASSERT_EQ(a["cols"], K);
    for (int64_t h = 0; h < NH; ++h)
      for (int64_t i = 0; i < R; ++i) {
        double row = 0;
        for (int64_t j = 0; j < K; ++j) {
          const float got = a["weights"][l][h][i][j].get<float>();
          EXPECT_EQ(got, d[static_cast<size_t>((h * R + i) * K + j)])
              << "layer " << l << " head " << h << " (" << i << ", " << j << ")";
          if (causal && j > i) {
            EXPECT_EQ(got, 0.0f) << "decoder self-attention above the diagonal, layer " << l << " head " << h;
          }
          row += got;
        }
        EXPECT_NEAR(row, 1.0, 1e-5) << "row " << i << " of layer " << l << " head " << h;
      }
  }
}

}  // namespace

TEST_F(Seq2SeqReport, AttentionInTheJsonIsTheModelsOwn) {
  InspectOptions opt;
  opt.src = "a dog runs";
  const Report r = inspect_run(run(), opt);
  const nlohmann::json d = extract_data(r.html);
  EXPECT_EQ(d["task"], "seq2seq");

  LoadedSeq2Seq lm = load_seq2seq_run(run());
  const std::vector<int32_t> src = lm.src_tok->encode("a dog runs");
  ASSERT_EQ(src.size(), 3u);
  const gen::Hypothesis h = gen::translate_batch(*lm.model, {src}, {})[0][0];
  std::vector<int32_t> tgt = {lm.tgt_tok->bos_id()};
  tgt.insert(tgt.end(), h.tokens.begin(), h.tokens.end());
  // A few decoder positions, so that the causal triangle below has entries to check.
  ASSERT_GE(tgt.size(), 3u) << "the tiny model's greedy translation is too short: " << lm.tgt_tok->decode(h.tokens);
  EXPECT_EQ(d["input"]["src_ids"].get<std::vector<int32_t>>(), src);
  EXPECT_EQ(d["input"]["tgt_ids"].get<std::vector<int32_t>>(), tgt);
  EXPECT_EQ(d["input"]["tgt_tokens"][0], "<bos>");
  EXPECT_EQ(d["input"]["translation"], lm.tgt_tok->decode(h.tokens));
  EXPECT_NE(r.html.find("id=\"atto-translation\""), std::string::npos);

  const Seq2SeqTraced ref = trace(*lm.model, src, tgt);
  const auto& a = d["attention"];
  ASSERT_EQ(ref.enc.size(), 2u);
  ASSERT_EQ(ref.dec.size(), 3u);
  expect_weights(a["cross"], ref.dec, /*cross=*/true, /*causal=*/false);
  expect_weights(a["decoder"], ref.dec, false, true);
  expect_weights(a["encoder"], ref.enc, false, false);
  EXPECT_EQ(a["cross"]["row_tokens"], d["input"]["tgt_tokens"]);
  EXPECT_EQ(a["cross"]["col_tokens"], d["input"]["src_tokens"]);

  // One map per layer and head and kind, marked for the page's self-check.
  EXPECT_EQ(occurrences(r.html, "data-kind=\"cross\""), 3u * 2u);
  EXPECT_EQ(occurrences(r.html, "data-kind=\"decoder\""), 3u * 2u);
  EXPECT_EQ(occurrences(r.html, "data-kind=\"encoder\""), 2u * 2u);
  EXPECT_EQ(occurrences(r.html, "class=\"atto-attn\""), 16u);
  int cross = 0;
  const auto T = static_cast<size_t>(tgt.size());
  for (const Figure& f : r.figures) {
    cross += f.section == "cross_attention";
    if (f.section == "dec_attention") {
      EXPECT_EQ(occurrences(f.svg, "class=\"cell masked\""), T * (T - 1) / 2) << f.id;
    }
    if (f.section == "cross_attention" || f.section == "enc_attention") {
      EXPECT_EQ(occurrences(f.svg, "class=\"cell masked\""), 0u) << f.id;
    }
  }
  EXPECT_EQ(cross, 6);
  // Residual norms for every layer; decoder layers include the cross-attention update.
  ASSERT_EQ(d["residual"]["decoder"].size(), 3u);
  ASSERT_EQ(d["residual"]["encoder"].size(), 2u);
  EXPECT_EQ(d["residual"]["decoder"][1]["cross"].size(), T);
  EXPECT_FALSE(d["residual"]["encoder"][0].contains("cross"));
  // Two embedding figures (source and target vocabularies differ), training curves from metrics.jsonl.
  int emb = 0, loss = 0;
  for (const Figure& f : r.figures) emb += f.section == "embeddings", loss += f.id == "loss";
  EXPECT_EQ(emb, 2);
  EXPECT_EQ(loss, 1);
}

TEST_F(Seq2SeqReport, ForcedTargetAndNextTokenAtTheLastPosition) {
  LoadedSeq2Seq lm = load_seq2seq_run(run());
  InspectOptions opt;
  opt.src = "the cat runs";
  opt.tgt = "die katze";
  const Seq2SeqView v = collect_seq2seq(*lm.model, *lm.src_tok, *lm.tgt_tok, opt.src, opt.tgt);
  const Report r = build_seq2seq_report(v, nullptr, {}, opt);
  const nlohmann::json d = extract_data(r.html);
  std::vector<int32_t> tgt = {lm.tgt_tok->bos_id()};
  for (int32_t id : lm.tgt_tok->encode("die katze")) tgt.push_back(id);
  EXPECT_EQ(d["input"]["tgt_ids"].get<std::vector<int32_t>>(), tgt);
  EXPECT_TRUE(d["input"]["forced"].get<bool>());
  const Seq2SeqTraced ref = trace(*lm.model, lm.src_tok->encode("the cat runs"), tgt);
  // The next-token bars: softmax of the logits at the last target position.
  const int64_t V = lm.model->config().tgt_vocab;
  const float* last = ref.logits.data() + (tgt.size() - 1) * V;
  double mx = -1e30, z = 0;
  for (int64_t i = 0; i < V; ++i) mx = std::max(mx, static_cast<double>(last[i]));
  for (int64_t i = 0; i < V; ++i) z += std::exp(last[i] - mx);
  const auto& nt = d["next_token"];
  for (size_t k = 0; k < nt["ids"].size(); ++k) {
    const int32_t id = nt["ids"][k].get<int32_t>();
    EXPECT_NEAR(nt["stages"][0]["probs"][k].get<double>(), std::exp(last[id] - mx) / z, 1e-6);
  }
  expect_weights(d["attention"]["cross"], ref.dec, true, false);
  // A shared vocabulary gives one embedding figure.
  Seq2SeqView shared = v;
  shared.config.share_embeddings = true;
  int emb = 0;
  for (const Figure& f : build_seq2seq_report(shared, nullptr, {}, opt).figures) emb += f.section == "embeddings";
  EXPECT_EQ(emb, 1);
}

TEST_F(Seq2SeqReport, WrongInputFlagsAreUsageErrors) {
  InspectOptions opt;
  opt.text = "a dog runs";  // --text is for GPT runs
  EXPECT_THROW(inspect_run(run(), opt), UsageError);
  opt.text.clear();  // no --src
  EXPECT_THROW(inspect_run(run(), opt), UsageError);
  opt.src = "a dog";
  EXPECT_THROW(inspect_gpt_run(run(), opt), UsageError);  // --src on the GPT path
}

TEST(Seq2SeqMetrics, ValidationBleuIsReadAndDrawn) {
  const fs::path dir = fs::temp_directory_path() / fmt::format("atto-viz-bleu-{}", ::getpid());
  fs::create_directories(dir);
  const std::string metrics = (dir / "metrics.jsonl").string();
  io::write_file_atomic(metrics,
                        "{\"step\": 5, \"train_loss\": 3.1}\n"
                        "{\"step\": 10, \"val_loss\": 3.0, \"val_bleu\": 12.5}\n"
                        "{\"step\": 20, \"val_loss\": 2.0, \"val_bleu\": 20.25}\n");
  std::vector<std::string> notes;
  const TrainingCurves c = read_metrics(metrics, notes);
  fs::remove_all(dir);
  EXPECT_TRUE(notes.empty());
  EXPECT_EQ(c.val_bleu_step, (std::vector<double>{10, 20}));
  EXPECT_EQ(c.val_bleu, (std::vector<double>{12.5, 20.25}));
}
