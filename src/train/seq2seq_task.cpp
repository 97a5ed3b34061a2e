// Seq2SeqTask: the encoder-decoder learning a parallel corpus.
#include <algorithm>
#include <cmath>
#include <filesystem>

#include <fmt/format.h>

#include "base/error.h"
#include "data/parallel.h"
#include "data/seq2seq_batches.h"
#include "generate/seq2seq_decode.h"
#include "io/file.h"
#include "metrics/bleu.h"
#include "train/auto_config.h"
#include "train/checkpoint.h"
#include "train/data_parallel.h"
#include "train/task.h"

namespace atto {

namespace fs = std::filesystem;

namespace {

ParallelCorpus read_corpus(const DataConfig& d) {
  if (!d.path.empty()) return read_parallel_tsv(d.path);
  return read_parallel(d.src, d.tgt);
}

std::string corpus_fingerprint(const ParallelCorpus& c) {
  std::string all;
  for (const auto& p : c.pairs) all += p.src + '\t' + p.tgt + '\n';
  return fingerprint_bytes(all);
}

TokenizerOptions tokenizer_options(const DataConfig& d) {
  TokenizerOptions o;
  o.type = d.tokenizer;
  o.vocab_size = d.tokenizer_vocab_size;
  if (o.type == TokenizerKind::Spm && o.vocab_size <= 0) o.vocab_size = 8000;
  return o;
}

class Seq2SeqTask final : public TrainTask {
 public:
  Seq2SeqTask(RunConfig& cfg, const std::string& dir, bool resume, Rng& init_rng, const DistOptions& dist) : cfg_(cfg) {
    ParallelCorpus corpus = read_corpus(cfg.data);
    const std::string fp = corpus_fingerprint(corpus);
    if (resume && !cfg.data.fingerprint.empty())
      ATTO_CHECK(fp == cfg.data.fingerprint,
                 "the training corpus has changed since this run started (fingerprint {} "
                 "vs {} in config.json): start a new run instead",
                 fp, cfg.data.fingerprint);
    cfg.data.fingerprint = fp;
    summary_ = corpus.summary();
    // Validation: explicit files, or a seeded split of the corpus.
    ParallelCorpus train_c, val_c;
    if (!cfg.data.valid_src.empty() || !cfg.data.valid_tgt.empty()) {
      ATTO_CHECK(!cfg.data.valid_src.empty() && !cfg.data.valid_tgt.empty(),
                 "give both --valid-src and --valid-tgt (or neither, for a seeded split)");
      train_c = std::move(corpus);
      val_c = read_parallel(cfg.data.valid_src, cfg.data.valid_tgt);
    } else {
      ATTO_CHECK(corpus.pairs.size() >= 2, "{}: at least 2 sentence pairs are needed to split off validation data",
                 corpus.summary());
      const TrainValSplit split = split_train_val(static_cast<int64_t>(corpus.pairs.size()), cfg.data.split_seed);
      train_c = corpus;
      train_c.pairs = select(corpus.pairs, split.train);
      val_c = corpus;
      val_c.pairs = select(corpus.pairs, split.val);
      val_is_train_ = split.val_is_train;
    }
    build_tokenizers(train_c, dir, resume);
    Seq2SeqConfig& m = cfg.seq2seq;
    m.src_vocab = src_tok_->vocab_size();
    m.tgt_vocab = tgt_tok_->vocab_size();
    m.share_embeddings = cfg.data.shared_vocab;
    train_ = encode_pairs(train_c, *src_tok_, *tgt_tok_);
    int64_t tokens = 0;
    for (const EncodedPair& p : train_) tokens += static_cast<int64_t>(p.src.size() + p.tgt.size());
    auto_notes_ = resolve_seq2seq_auto(cfg, {.train_tokens = tokens, .tgt_vocab = m.tgt_vocab});
    m.validate();
    filter_ = filter_by_length(train_, m.max_len, m.max_len - 1);  // BOS/EOS take one target position
    ATTO_CHECK(!train_.empty(), "no training pair fits --max-len {}: raise it", m.max_len);
    val_ = encode_pairs(val_c, *src_tok_, *tgt_tok_);
    val_filter_ = filter_by_length(val_, m.max_len, m.max_len - 1);
    ATTO_CHECK(!val_.empty(), "no validation pair fits --max-len {}: raise it", m.max_len);
    for (const auto& p : val_c.pairs) val_refs_.push_back(p.tgt);
    for (const auto& p : val_c.pairs) val_sources_.push_back(src_tok_->encode(p.src));
    const BucketOptions bo = bucket_options();
    batches_ = bucket_batches(train_, bo);
    val_batches_ = bucket_batches(val_, bo);
    model_ = with_recompute(std::make_unique<Seq2Seq>(m, init_rng), cfg.train);
    int64_t most_rows = 1;  // shards are capped by the largest batch's rows
    for (const auto& idx : batches_) most_rows = std::max<int64_t>(most_rows, static_cast<int64_t>(idx.size()));
    Rng scratch(0);  // the replicas' own initial values are replaced by the model's
    dp_ = std::make_unique<DataParallel>(
        *model_, resolve_shards(cfg.train.shards, most_rows, dist.ranks()),
        [&] { return with_recompute(std::make_unique<Seq2Seq>(m, scratch), cfg.train); }, dist.collective, dist.overlap);
  }

  nn::Module& model() override { return *model_; }
  const std::vector<std::string>& auto_notes() const override { return auto_notes_; }

  double forward_backward(Rng& data_rng, float loss_scale) override {
    const Seq2SeqBatch b = make_batch(train_, batches_[data_rng.below(batches_.size())]);
    last_tokens_ = b.num_tokens();
    CrossEntropyOptions ce;
    ce.label_smoothing = cfg_.train.label_smoothing;
    return seq2seq_forward_backward(*dp_, b, loss_scale, ce);
  }
  int64_t last_batch_tokens() const override { return last_tokens_; }

  Evaluation evaluate() override {
    NoGradGuard ng;
    model_->eval();
    Evaluation e;
    double total = 0.0;
    int64_t count = 0;
    for (const auto& idx : val_batches_) {
      const Seq2SeqBatch b = make_batch(val_, idx);
      const int64_t c = b.num_targets();
      total += static_cast<double>(cross_entropy(forward(b), b.tgt_out).item()) * c;
      count += c;
    }
    e.loss = total / static_cast<double>(std::max<int64_t>(count, 1));
    if (cfg_.train.eval_bleu != 0 && std::isfinite(e.loss)) {  // decoding refuses non-finite logits
      e.metric = bleu();
      e.has_metric = true;
      e.metric_name = "bleu";
    }
    model_->train();
    e.on_train_set = val_is_train_;
    return e;
  }

  std::string summary() const override {
    const std::string split = val_is_train_
                                  ? fmt::format(
                                        "all {} pairs trained on (too few to hold any out: validation scores the "
                                        "training set)",
                                        train_.size())
                                  : fmt::format("{} train / {} val pairs", train_.size(), val_.size());
    return fmt::format(
        "seq2seq Transformer, {} parameters; {}; {}; vocabularies {} / {} ({}); "
        "{} batches of <= {} tokens, {} shard{}{}",
        model_->num_parameters(), summary_, split, src_tok_->vocab_size(), tgt_tok_->vocab_size(),
        to_string(cfg_.data.tokenizer), batches_.size(), bucket_options().max_tokens, dp_->shards(),
        dp_->shards() == 1 ? "" : "s", filter_.dropped > 0 ? "; " + filter_.summary() : "");
  }

  void write_files(const std::string& dir) const override {
    for (const auto& [sub, tok] : {std::pair{"src", src_tok_.get()}, std::pair{"tgt", tgt_tok_.get()}}) {
      const std::string d = run_path(dir, sub);
      fs::create_directories(d);
      tok->write_files(d);
      io::write_json_atomic(run_path(d, "tokenizer.json"), tok->to_json());
    }
  }

 private:
  BucketOptions bucket_options() const {
    BucketOptions bo;
    const TrainConfig& t = cfg_.train;
    bo.max_tokens = t.batch_tokens > 0 ? t.batch_tokens : t.batch_size * (2 * cfg_.seq2seq.max_len);
    bo.max_sentences = t.batch_tokens > 0 ? 0 : t.batch_size;
    return bo;
  }

  Tensor forward(const Seq2SeqBatch& b) {
    Tensor memory = model_->encode(b.src, b.B, b.S, b.src_mask);
    return model_->decode(b.tgt_in, b.B, b.T, memory, b.src_mask, b.tgt_mask);
  }

  void build_tokenizers(const ParallelCorpus& train_c, const std::string& dir, bool resume) {
    if (resume) {
      src_tok_ = load_tokenizer_file(run_path(run_path(dir, "src"), "tokenizer.json"));
      tgt_tok_ = load_tokenizer_file(run_path(run_path(dir, "tgt"), "tokenizer.json"));
      return;
    }
    // Trained in a scratch folder (SentencePiece writes a model file); write_files copies them
    // into the run directory once it exists.
    const fs::path scratch = fs::temp_directory_path() / fmt::format("atto-tok-{}", ::getpid());
    const TokenizerOptions o = tokenizer_options(cfg_.data);
    if (cfg_.data.shared_vocab) {
      std::vector<std::string> both = train_c.sources();
      for (auto& t : train_c.targets()) both.push_back(t);
      src_tok_ = train_tokenizer(o, both, (scratch / "shared").string());
      tgt_tok_ = load_tokenizer_json(src_tok_->to_json(), "shared tokenizer", (scratch / "shared").string());
    } else {
      src_tok_ = train_tokenizer(o, train_c.sources(), (scratch / "src").string());
      tgt_tok_ = train_tokenizer(o, train_c.targets(), (scratch / "tgt").string());
    }
    fs::remove_all(scratch);
  }

  double bleu() {
    const int64_t n = cfg_.train.eval_bleu < 0 ? static_cast<int64_t>(val_sources_.size())
                                               : std::min<int64_t>(cfg_.train.eval_bleu, val_sources_.size());
    const std::vector<std::vector<int32_t>> sources(val_sources_.begin(), val_sources_.begin() + n);
    const std::vector<std::string> refs(val_refs_.begin(), val_refs_.begin() + n);
    std::vector<std::string> hyps;
    for (const auto& h : gen::translate_all(*model_, sources, gen::DecodeOptions{} /* greedy */, 64))
      hyps.push_back(h.empty() ? std::string() : tgt_tok_->decode(h[0].tokens));
    return metrics::corpus_bleu(hyps, {refs}).score;
  }

  RunConfig& cfg_;
  std::string summary_;
  std::unique_ptr<Tokenizer> src_tok_, tgt_tok_;
  std::vector<EncodedPair> train_, val_;
  LengthFilterReport filter_, val_filter_;
  std::vector<std::vector<int32_t>> val_sources_;
  std::vector<std::string> val_refs_;
  std::vector<std::vector<int64_t>> batches_, val_batches_;
  std::unique_ptr<Seq2Seq> model_;
  std::unique_ptr<DataParallel> dp_;
  int64_t last_tokens_ = 0;
  bool val_is_train_ = false;
  std::vector<std::string> auto_notes_;
};

}  // namespace

std::unique_ptr<TrainTask> make_seq2seq_task(RunConfig& cfg, const std::string& dir, bool resume, Rng& init_rng,
                                             const DistOptions& dist) {
  return std::make_unique<Seq2SeqTask>(cfg, dir, resume, init_rng, dist);
}

}  // namespace atto
