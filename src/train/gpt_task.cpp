// GptTask: a decoder-only GPT learning a text file (lines or stream data).
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <optional>

#include "base/error.h"
#include "data/dataset.h"
#include "data/token_dataset.h"
#include "io/file.h"
#include "models/gpt.h"
#include "train/auto_config.h"
#include "train/checkpoint.h"
#include "train/data_parallel.h"
#include "train/init_from.h"
#include "train/task.h"
#include "train/trainer.h"
#include "tokenize/spm_tokenizer.h"

namespace atto {

double evaluate_loss(GPT& model, const TextDataset& data, Split split, int64_t B, int64_t T, int64_t max_batches,
                     const std::vector<int32_t>* byte_lengths, double* bits_per_byte) {
  NoGradGuard no_grad;
  const bool was_training = model.training();
  model.eval();
  int64_t n = data.num_eval_batches(split, B, T);
  if (max_batches > 0) n = std::min(n, max_batches);
  double total = 0.0;
  int64_t count = 0, bytes = 0;
  for (int64_t i = 0; i < n; ++i) {
    const Batch b = data.eval_batch(split, i, B, T);
    const int64_t c = b.num_targets();
    if (c == 0) continue;
    total += static_cast<double>(model.loss(b.x, b.y, b.B, b.T).item()) * c;
    count += c;
    if (byte_lengths)
      for (int32_t y : b.y)
        if (y != kIgnoreIndex) bytes += (*byte_lengths)[static_cast<size_t>(y)];
  }
  model.train(was_training);
  ATTO_CHECK(count > 0, "evaluation: the {} split has no targets to score", to_string(split));
  if (bits_per_byte) *bits_per_byte = bytes > 0 ? total / (static_cast<double>(bytes) * std::log(2.0)) : 0.0;
  return total / count;
}

namespace {

// Whether two tokenizers give the same ids to every text: the same tokenizer.json (kind, vocabulary,
// merges, special tokens) and, for SentencePiece, the same pieces with the same scores and types.
bool same_tokenizer(const GptTokenizer& a, const GptTokenizer& b) {
  if (a.to_json() != b.to_json()) return false;
  const auto* sa = dynamic_cast<const SpmGptTokenizer*>(&a);
  const auto* sb = dynamic_cast<const SpmGptTokenizer*>(&b);
  if (!sa || !sb) return !sa && !sb;
  const std::vector<SpmPiece> pa = sa->pieces(), pb = sb->pieces();
  return sa->add_dummy_prefix() == sb->add_dummy_prefix() &&
         std::equal(pa.begin(), pa.end(), pb.begin(), pb.end(), [](const SpmPiece& x, const SpmPiece& y) {
           return x.piece == y.piece && x.score == y.score && x.type == y.type;
         });
}

class GptTask final : public TrainTask {
 public:
  GptTask(RunConfig& cfg, const std::string& dir, bool resume, Rng& init_rng, const DistOptions& dist) : cfg_(cfg) {
    ATTO_CHECK(cfg.data.tokenizer != TokenizerKind::Word, "--tokenizer {}: a GPT uses char, bpe or spm",
               to_string(cfg.data.tokenizer));
    if (!resume && cfg.gpt.lora() && cfg.train.init_from.empty())
      throw UsageError(fmt::format(
          "--lora-rank {}: LoRA trains adapters over the frozen weights of a trained model; give that model with "
          "--init-from RUN, HF_GPT2_DIR or FILE.gguf (docs/finetune.md)",
          cfg.gpt.lora_rank));
    std::optional<LoadedModel> source;  // fine-tuning: a new run from a model (train/init_from.h)
    if (!resume && !cfg.train.init_from.empty()) source = adopt_init_from(cfg);
    if (is_prepared_corpus(cfg.data.path)) {
      open_prepared(cfg, dir, resume);
      // Fine-tuning on token files: they must hold SOURCE's ids (atto data prepare --model SOURCE).
      ATTO_CHECK(!source || same_tokenizer(*tok_, *source->tokenizer),
                 "--data {} was prepared with another tokenizer than --init-from {}'s: prepare the text with atto "
                 "data prepare --model {} (or give the text file)",
                 cfg.data.path, cfg.train.init_from, cfg.train.init_from);
    } else {
      open_text(cfg, dir, resume, source ? source->tokenizer : nullptr);
    }
    byte_lengths_ = token_byte_lengths(*tok_);
    GPTConfig& m = cfg.gpt;
    const GptDataFacts facts{.mode = cfg.data.mode,
                             .train_tokens = data_->num_tokens(Split::Train),
                             .min_block = data_->min_block_size(),
                             .max_block = data_->max_block_size(),
                             .fine_tune = source.has_value()};
    auto_notes_ = resolve_gpt_auto(cfg, facts);  // what the user left out (a resumed run has none)
    data_->check_block_size(m.block_size);
    m.vocab_size = tok_->vocab_size();
    m.validate();
    check_memory(cfg);
    model_ = with_recompute(std::make_unique<GPT>(m, init_rng), cfg.train);
    if (source) copy_source_weights(*source->model, *model_, cfg.train.init_from);
    if (resume && m.lora()) load_lora_base(dir, *model_);  // checked whole before anything is written
    source.reset();
    Rng scratch(0);  // the replicas' own initial values are replaced by the model's
    dp_ = std::make_unique<DataParallel>(
        *model_, resolve_shards(cfg.train.shards, cfg.train.batch_size, dist.ranks()),
        [&] { return with_recompute(std::make_unique<GPT>(m, scratch), cfg.train); }, dist.collective, dist.overlap);
  }

  // The data and tokenizer: a text file (the tokenizer built from it, or the run's on resume).
  // Fine-tuning passes the source model's tokenizer.
  void open_text(RunConfig& cfg, const std::string& dir, bool resume, std::shared_ptr<const GptTokenizer> given) {
    file_ = read_text_file(cfg.data.path);
    check_fingerprint(cfg, fingerprint_bytes(file_.text), resume);
    cfg.data.mode = resolve_mode(file_, cfg.data.mode);
    if (given && cfg.data.mode == DataMode::Lines && !given->has_boundary())
      throw UsageError(fmt::format(
          "--data {} is lines data, but the tokenizer of --init-from {} has no boundary token to end a line: "
          "train with --mode stream",
          cfg.data.path, cfg.train.init_from));
    if (given)
      tok_ = std::move(given);
    else
      tok_ = resume ? load_tokenizer(dir)
                    : build_gpt_tokenizer(file_, cfg.data.mode, cfg.data.tokenizer, cfg.data.tokenizer_vocab_size);
    data_ = make_dataset(file_, *tok_, cfg.data.mode, {.split_seed = cfg.data.split_seed});
  }
  // Or a corpus of `atto data prepare` (token files, mapped): its own tokenizer, stream mode.
  void open_prepared(RunConfig& cfg, const std::string& dir, bool resume) {
    check_fingerprint(cfg, prepared_fingerprint(cfg.data.path), resume);
    ATTO_CHECK(cfg.data.mode != DataMode::Lines, "--data {} is a prepared corpus: stream data (not --mode lines)",
               cfg.data.path);
    cfg.data.mode = DataMode::Stream;
    tok_ = resume ? load_tokenizer(dir) : load_prepared_tokenizer(cfg.data.path);
    cfg.data.tokenizer = parse_tokenizer_kind(tok_->kind());
    data_ = std::make_unique<TokenFileDataset>(cfg.data.path, *tok_);
  }
  static void check_fingerprint(RunConfig& cfg, const std::string& fp, bool resume) {
    if (resume && !cfg.data.fingerprint.empty())
      ATTO_CHECK(fp == cfg.data.fingerprint,
                 "{} has changed since this run started (fingerprint {} vs {} in config.json): resuming on different "
                 "data would not continue the same run; start a new run instead",
                 cfg.data.path, fp, cfg.data.fingerprint);
    cfg.data.fingerprint = fp;
  }

  // Before anything is allocated: the run's rough memory need (weights, gradients, AdamW's two
  // moments, a gradient per extra shard, and a batch's activations, ~20 floats per token, layer
  // and width plus the logits and their gradient) against the machine's memory.
  static void check_memory(const RunConfig& cfg) {
    const GPTConfig& m = cfg.gpt;
    const double C = static_cast<double>(m.d_model), L = static_cast<double>(m.n_layers);
    const double ff = m.d_ff > 0 ? static_cast<double>(m.d_ff) : 4 * C;
    const double params = static_cast<double>(m.vocab_size + m.block_size) * C + L * (4 * C * C + 2 * C * ff + 10 * C);
    const double B = static_cast<double>(cfg.train.batch_size), T = static_cast<double>(m.block_size);
    const double weights_gb = params * 4 * (4 + std::max(1, cfg.train.shards) - 1) / 1e9;
    const double acts_gb = B * T * (20 * C * L + 2 * ff * L + 2 * static_cast<double>(m.vocab_size)) * 4 / 1e9;
    const double have_gb =
        static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGE_SIZE)) / 1e9;
    ATTO_CHECK(weights_gb + acts_gb <= have_gb,
               "this run needs about {:.1f} GB ({:.3g} parameters: weights, gradients and AdamW moments {:.1f} GB; "
               "activations of a batch of {} x {}: {:.1f} GB) but this machine has {:.1f} GB: lower --d-model, "
               "--n-layers, --batch-size or --block-size",
               weights_gb + acts_gb, params, weights_gb, cfg.train.batch_size, m.block_size, acts_gb, have_gb);
  }

  nn::Module& model() override { return *model_; }
  const std::vector<std::string>& auto_notes() const override { return auto_notes_; }

  double forward_backward(Rng& data_rng, float loss_scale) override {
    const Batch b = data_->sample_batch(data_rng, cfg_.train.batch_size, cfg_.gpt.block_size);
    last_tokens_ = b.B * b.T;
    return gpt_forward_backward(*dp_, b.x, b.y, b.B, b.T, loss_scale);
  }
  int64_t last_batch_tokens() const override { return last_tokens_; }

  Evaluation evaluate() override {
    Evaluation e;
    e.loss = evaluate_loss(*model_, *data_, Split::Val, cfg_.train.batch_size, cfg_.gpt.block_size,
                           cfg_.train.eval_batches, &byte_lengths_, &e.bits_per_byte);
    e.on_train_set = data_->val_is_train();
    return e;
  }

  std::string summary() const override {
    const char* unit = cfg_.data.mode == DataMode::Lines ? "lines" : "tokens";
    const std::string split =
        data_->val_is_train()
            ? fmt::format("all {} {} trained on (too few to hold any out: validation scores the training set)",
                          data_->size(Split::Train), unit)
            : fmt::format("{} train / {} val {}", data_->size(Split::Train), data_->size(Split::Val), unit);
    std::string from = cfg_.train.init_from.empty() ? "" : ", fine-tuned from " + cfg_.train.init_from;
    if (cfg_.gpt.lora())
      from += fmt::format(" with LoRA (rank {}, on {}: {} parameters train)", cfg_.gpt.lora_rank, cfg_.gpt.lora_targets,
                          model_->num_trainable_parameters());
    return fmt::format("GPT{}, {} parameters, {} data, {} vocabulary {}, block {}, {}, {} batch shard{}", from,
                       model_->num_parameters(), to_string(cfg_.data.mode), tok_->kind(), cfg_.gpt.vocab_size,
                       cfg_.gpt.block_size, split, dp_->shards(), dp_->shards() == 1 ? "" : "s");
  }

  void write_files(const std::string& dir) const override {
    tok_->write_files(dir);  // spm.model before the tokenizer.json that names it
    io::write_json_atomic(run_path(dir, "tokenizer.json"), tok_->to_json());
  }

 private:
  RunConfig& cfg_;
  TextFile file_;
  std::shared_ptr<const GptTokenizer> tok_;
  std::vector<int32_t> byte_lengths_;  // per token id: the bytes of text it stands for
  std::unique_ptr<TextDataset> data_;
  std::unique_ptr<GPT> model_;
  std::unique_ptr<DataParallel> dp_;
  int64_t last_tokens_ = 0;
  std::vector<std::string> auto_notes_;
};

}  // namespace

std::unique_ptr<TrainTask> make_gpt_task(RunConfig& cfg, const std::string& dir, bool resume, Rng& init_rng,
                                         const DistOptions& dist) {
  return std::make_unique<GptTask>(cfg, dir, resume, init_rng, dist);
}

std::unique_ptr<TrainTask> make_task(RunConfig& cfg, const std::string& dir, bool resume, Rng& init_rng,
                                     const DistOptions& dist) {
  ATTO_CHECK(cfg.data.tokenizer_vocab_size >= 0, "--vocab-size must be >= 0 (0 = the tokenizer's default), got {}",
             cfg.data.tokenizer_vocab_size);
  if (cfg.task == Task::Seq2Seq) {
    ATTO_CHECK(cfg.train.init_from.empty(), "init_from {}: fine-tuning is for a GPT run (--task gpt)",
               cfg.train.init_from);
    return make_seq2seq_task(cfg, dir, resume, init_rng, dist);
  }
  return make_gpt_task(cfg, dir, resume, init_rng, dist);
}

}  // namespace atto
