#include "tokenize/spm_tokenizer.h"

#include <fcntl.h>
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "base/error.h"
#include "base/json.h"
#include "tokenize/utf8.h"

namespace atto {

namespace {

namespace fs = std::filesystem;

// Feeds the non-empty training lines to the trainer without a temporary file.
class LinesIterator : public sentencepiece::SentenceIterator {
 public:
  explicit LinesIterator(const std::vector<std::string>& lines) : lines_(lines) { skip_empty(); }
  bool done() const override { return i_ >= lines_.size(); }
  void Next() override {
    ++i_;
    skip_empty();
  }
  const std::string& value() const override { return lines_[i_]; }
  sentencepiece::util::Status status() const override { return {}; }

 private:
  void skip_empty() {
    while (i_ < lines_.size() && lines_[i_].empty()) ++i_;
  }
  const std::vector<std::string>& lines_;
  size_t i_ = 0;
};

// Writes bytes to path through a temporary file in the same folder: write, fsync, rename.
void write_atomically(const fs::path& path, const std::string& bytes) {
  const fs::path tmp = path.string() + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ATTO_CHECK(fd >= 0, "cannot create '{}': {}", tmp.string(), std::strerror(errno));
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = errno;
      ::close(fd);
      fail("cannot write '{}': {}", tmp.string(), std::strerror(err));
    }
    done += static_cast<size_t>(n);
  }
  const bool synced = ::fsync(fd) == 0;
  const int err = errno;
  ::close(fd);
  ATTO_CHECK(synced, "cannot flush '{}' to disk: {}", tmp.string(), std::strerror(err));
  std::error_code ec;
  fs::rename(tmp, path, ec);
  ATTO_CHECK(!ec, "cannot rename '{}' to '{}': {}", tmp.string(), path.string(), ec.message());
}

// Encoding and decoding with a loaded processor, for both SentencePiece tokenizers. decode
// checks every id and leaves out `skip` (a GPT's boundary; -1: nothing).
std::vector<int32_t> sp_encode(const sentencepiece::SentencePieceProcessor& sp, std::string_view text) {
  utf8::validate(text, "text to encode");
  std::vector<int> ids;
  const auto st = sp.Encode(text, &ids);
  ATTO_CHECK(st.ok(), "SentencePiece cannot encode {}: {}", utf8::quote(text), st.ToString());
  return std::vector<int32_t>(ids.begin(), ids.end());
}

std::string sp_decode(const sentencepiece::SentencePieceProcessor& sp, const std::vector<int32_t>& ids, int32_t skip) {
  const int64_t n = sp.GetPieceSize();
  std::vector<int> keep;
  for (int32_t id : ids) {
    ATTO_CHECK(id >= 0 && id < n, "token id {} is outside the SentencePiece vocabulary (size {})", id, n);
    if (id != skip) keep.push_back(id);
  }
  std::string out;
  const auto st = sp.Decode(keep, &out);
  ATTO_CHECK(st.ok(), "SentencePiece cannot decode {} ids: {}", ids.size(), st.ToString());
  return out;
}

}  // namespace

SpmTokenizer::SpmTokenizer(std::string model_bytes, std::string_view where) : model_(std::move(model_bytes)) {
  auto sp = std::make_shared<sentencepiece::SentencePieceProcessor>();
  const auto st = sp->LoadFromSerializedProto(model_);
  ATTO_CHECK(st.ok(),
             "SentencePiece model {} cannot be loaded: {}; it should be a spm.model file "
             "written by SentencePiece",
             where, st.ToString());
  ATTO_CHECK(sp->pad_id() == kPadId && sp->bos_id() == kBosId && sp->eos_id() == kEosId && sp->unk_id() == kUnkId,
             "SentencePiece model {} has special ids pad={} bos={} eos={} unk={}; atto's seq2seq "
             "models need 0, 1, 2, 3: train the model with atto (or with --pad_id=0 --bos_id=1 "
             "--eos_id=2 --unk_id=3)",
             where, sp->pad_id(), sp->bos_id(), sp->eos_id(), sp->unk_id());
  sp_ = std::move(sp);
}

SpmTokenizer SpmTokenizer::train(const std::vector<std::string>& lines, const SpmOptions& opts,
                                 const std::string& dir) {
  ATTO_CHECK(opts.model_type == "unigram" || opts.model_type == "bpe",
             "unknown SentencePiece "
             "model type '{}'; use unigram or bpe",
             opts.model_type);
  ATTO_CHECK(opts.vocab_size > kNumSpecialTokens,
             "SentencePiece vocabulary size must be above {} "
             "(the special tokens), got {}",
             kNumSpecialTokens, opts.vocab_size);
  size_t non_empty = 0;
  for (size_t i = 0; i < lines.size(); ++i) {
    utf8::validate(lines[i], fmt::format("tokenizer training line {}", i + 1));
    non_empty += lines[i].empty() ? 0 : 1;
  }
  ATTO_CHECK(non_empty > 0,
             "cannot train a SentencePiece model: the training text has no "
             "non-empty line");
  const std::unordered_map<std::string, std::string> args = {{"vocab_size", std::to_string(opts.vocab_size)},
                                                             {"model_type", opts.model_type},
                                                             {"character_coverage", "1.0"},
                                                             {"pad_id", "0"},
                                                             {"bos_id", "1"},
                                                             {"eos_id", "2"},
                                                             {"unk_id", "3"},
                                                             {"pad_piece", "<pad>"},
                                                             {"bos_piece", "<bos>"},
                                                             {"eos_piece", "<eos>"},
                                                             {"unk_piece", "<unk>"},
                                                             {"num_threads", "1"},
                                                             {"input_sentence_size", "0"},
                                                             {"shuffle_input_sentence", "false"},
                                                             {"minloglevel", "2"}};
  sentencepiece::SetRandomGeneratorSeed(opts.seed);
  LinesIterator it(lines);
  std::string model;
  const auto st = sentencepiece::SentencePieceTrainer::Train(args, &it, &model);
  ATTO_CHECK(st.ok(), "SentencePiece training ({}, vocabulary size {}, {} sentences) failed: {}", opts.model_type,
             opts.vocab_size, non_empty, st.ToString());
  std::error_code ec;
  fs::create_directories(dir, ec);
  ATTO_CHECK(!ec, "cannot create directory '{}' for the SentencePiece model: {}", dir, ec.message());
  const fs::path path = fs::path(dir) / kModelFile;
  SpmTokenizer tok(std::move(model), fmt::format("'{}'", path.string()));
  tok.write_files(dir);
  return tok;
}

SpmTokenizer SpmTokenizer::load(const std::string& model_path) {
  std::string bytes = tokenizer_detail::read_file_bytes(model_path, "SentencePiece model");
  return SpmTokenizer(std::move(bytes), fmt::format("'{}'", model_path));
}

SpmTokenizer SpmTokenizer::from_json(const nlohmann::json& j, std::string_view where, const std::string& dir) {
  ATTO_CHECK(j.is_object() && j.value("type", "") == "spm",
             "tokenizer {}: expected a JSON object "
             "with \"type\": \"spm\"",
             where);
  tokenizer_detail::check_seq2seq_header(j, where, "spm");
  auto model = j.find("model");
  ATTO_CHECK(model != j.end() && model->is_string() && !model->get<std::string>().empty(),
             "tokenizer {}: \"model\" must name the SentencePiece model file (e.g. \"{}\")", where, kModelFile);
  const std::string path = (fs::path(dir) / model->get<std::string>()).string();
  SpmTokenizer tok = load(path);
  auto size = j.find("vocab_size");
  ATTO_CHECK(size == j.end() || (size->is_number_integer() && *size == tok.vocab_size()),
             "tokenizer {}: \"vocab_size\" is {} but the model '{}' has {} pieces; the model file "
             "does not belong to this tokenizer.json",
             where, json_util::excerpt(*size), path, tok.vocab_size());
  return tok;
}

int64_t SpmTokenizer::vocab_size() const { return sp_->GetPieceSize(); }

std::vector<int32_t> SpmTokenizer::encode(std::string_view text) const { return sp_encode(*sp_, text); }

std::string SpmTokenizer::decode(const std::vector<int32_t>& ids) const { return sp_decode(*sp_, ids, -1); }

std::string SpmTokenizer::id_to_string(int32_t id) const {
  ATTO_CHECK(id >= 0 && id < vocab_size(),
             "token id {} is outside the SentencePiece vocabulary "
             "(size {})",
             id, vocab_size());
  return sp_->IdToPiece(id);
}

nlohmann::json SpmTokenizer::to_json() const {
  nlohmann::json special = nlohmann::json::array();
  for (const char* s : kSpecialTokens) special.push_back(s);
  return {{"type", "spm"},
          {"version", kFormatVersion},
          {"special_tokens", special},
          {"model", kModelFile},
          {"vocab_size", vocab_size()}};
}

void SpmTokenizer::write_files(const std::string& dir) const { write_atomically(fs::path(dir) / kModelFile, model_); }

// ---- SentencePiece for a GPT ---------------------------------------------------------------

SpmGptTokenizer::SpmGptTokenizer(std::string model_bytes, bool boundary, std::string_view where)
    : model_(std::move(model_bytes)), boundary_(boundary) {
  auto sp = std::make_shared<sentencepiece::SentencePieceProcessor>();
  const auto st = sp->LoadFromSerializedProto(model_);
  ATTO_CHECK(st.ok(), "SentencePiece model {} cannot be loaded: {}", where, st.ToString());
  ATTO_CHECK(sp->unk_id() == 0 && sp->bos_id() == 1 && sp->eos_id() == 2 && sp->pad_id() == -1,
             "SentencePiece model {} has special ids unk={} bos={} eos={} pad={}; a GPT's needs 0, 1, 2 and no "
             "padding (train it with atto train --tokenizer spm)",
             where, sp->unk_id(), sp->bos_id(), sp->eos_id(), sp->pad_id());
  sp_ = std::move(sp);
}

namespace {

void check_pieces(const std::vector<SpmPiece>& pieces, std::string_view where) {
  ATTO_CHECK(pieces.size() > 259 && pieces.size() <= (size_t{1} << 24),
             "{}: {} pieces; a SentencePiece vocabulary with byte fallback has more than 259 (at most 2^24)", where,
             pieces.size());
  const std::pair<const char*, int32_t> special[] = {{"<unk>", 2}, {"<s>", 3}, {"</s>", 3}};
  for (size_t i = 0; i < 3; ++i)
    ATTO_CHECK(pieces[i].type == special[i].second,
               "{}: token {} ({}) has type {}; atto's SentencePiece vocabularies have <unk> 0 (type 2), <s> 1 and "
               "</s> 2 (type 3)",
               where, i, utf8::quote(pieces[i].piece), pieces[i].type);
  std::unordered_map<std::string_view, size_t> seen;
  int bytes = 0;
  for (size_t i = 0; i < pieces.size(); ++i) {
    const SpmPiece& p = pieces[i];
    ATTO_CHECK(!p.piece.empty() && std::isfinite(p.score) && p.type >= 1 && p.type <= 6,
               "{}: token {} ({}, score {}, type {}) is not a SentencePiece piece: it must be non-empty with a finite "
               "score and a type from 1 to 6",
               where, i, utf8::quote(p.piece), p.score, p.type);
    const auto [it, fresh] = seen.emplace(p.piece, i);
    ATTO_CHECK(fresh, "{}: tokens {} and {} are both {}", where, it->second, i, utf8::quote(p.piece));
    if (p.type == 6) {
      unsigned v = 0;
      ATTO_CHECK(p.piece.size() == 6 && std::sscanf(p.piece.c_str(), "<0x%2X>", &v) == 1 &&
                     p.piece == fmt::format("<0x{:02X}>", v),
                 "{}: token {} ({}) has the byte type but is not of the form <0xNN>", where, i, utf8::quote(p.piece));
      ++bytes;
    }
  }
  ATTO_CHECK(bytes == 256, "{}: {} byte pieces (<0xNN>, type 6); byte fallback needs all 256", where, bytes);
}

}  // namespace

SpmGptTokenizer SpmGptTokenizer::from_pieces(const std::vector<SpmPiece>& pieces, bool boundary, bool add_dummy_prefix,
                                             std::string_view where) {
  check_pieces(pieces, where);
  return SpmGptTokenizer(spm_proto::bpe_model(pieces, add_dummy_prefix), boundary, where);
}

std::vector<SpmPiece> SpmGptTokenizer::pieces() const {
  std::vector<SpmPiece> out(static_cast<size_t>(vocab_size()));
  for (int i = 0; i < static_cast<int>(out.size()); ++i) {
    const int32_t type = sp_->IsUnknown(i) ? 2 : sp_->IsControl(i) ? 3 : sp_->IsUnused(i) ? 5 : sp_->IsByte(i) ? 6 : 1;
    out[static_cast<size_t>(i)] = {sp_->IdToPiece(i), sp_->GetScore(i), type};
  }
  return out;
}

SpmGptTokenizer SpmGptTokenizer::train(std::string_view text, int64_t vocab_size, bool boundary, uint32_t seed) {
  ATTO_CHECK(vocab_size > 259,
             "a GPT's SentencePiece vocabulary needs more than 259 pieces (3 special tokens and "
             "256 byte pieces), got {}",
             vocab_size);
  utf8::validate(text, "tokenizer training text");
  std::vector<std::string> lines;
  for (size_t pos = 0; pos < text.size();) {
    const size_t nl = std::min(text.find('\n', pos), text.size());
    lines.emplace_back(text.substr(pos, nl - pos));
    pos = nl + 1;
  }
  const std::unordered_map<std::string, std::string> args = {{"vocab_size", std::to_string(vocab_size)},
                                                             {"model_type", "bpe"},
                                                             {"character_coverage", "0.9995"},
                                                             {"byte_fallback", "true"},
                                                             {"normalization_rule_name", "identity"},
                                                             {"remove_extra_whitespaces", "false"},
                                                             {"add_dummy_prefix", "false"},
                                                             {"split_digits", "true"},
                                                             {"allow_whitespace_only_pieces", "true"},
                                                             {"unk_id", "0"},
                                                             {"bos_id", "1"},
                                                             {"eos_id", "2"},
                                                             {"pad_id", "-1"},
                                                             {"num_threads", "1"},
                                                             {"input_sentence_size", "0"},
                                                             {"shuffle_input_sentence", "false"},
                                                             {"max_sentence_length", "1000000"},
                                                             {"hard_vocab_limit", "false"},
                                                             {"minloglevel", "2"}};
  sentencepiece::SetRandomGeneratorSeed(seed);
  LinesIterator it(lines);
  std::string model;
  const auto st = sentencepiece::SentencePieceTrainer::Train(args, &it, &model);
  ATTO_CHECK(st.ok(), "SentencePiece training (GPT, vocabulary size {}) failed: {}", vocab_size, st.ToString());
  return SpmGptTokenizer(std::move(model), boundary, "(just trained)");
}

SpmGptTokenizer SpmGptTokenizer::from_json(const nlohmann::json& j, std::string_view where, const std::string& dir) {
  ATTO_CHECK(j.is_object() && j.value("type", "") == "spm" && j.contains("version") && j["version"] == 1,
             "tokenizer {}: expected {{\"type\": \"spm\", \"version\": 1, ...}}", where);
  ATTO_CHECK(j.contains("boundary") && j["boundary"].is_boolean(),
             "tokenizer {}: a GPT's SentencePiece tokenizer.json needs \"boundary\": true or false", where);
  const auto model = j.find("model");
  ATTO_CHECK(model != j.end() && model->is_string() && !model->get<std::string>().empty(),
             "tokenizer {}: \"model\" must name the SentencePiece model file (e.g. \"{}\")", where,
             SpmTokenizer::kModelFile);
  const std::string path = (fs::path(dir) / model->get<std::string>()).string();
  SpmGptTokenizer t(tokenizer_detail::read_file_bytes(path, "SentencePiece model"), j["boundary"].get<bool>(),
                    fmt::format("'{}'", path));
  const auto size = j.find("vocab_size");
  ATTO_CHECK(size != j.end() && size->is_number_integer() && *size == t.vocab_size(),
             "tokenizer {}: \"vocab_size\" is {} but the model '{}' has {} pieces", where,
             size == j.end() ? "missing" : json_util::excerpt(*size), path, t.vocab_size());
  return t;
}

int64_t SpmGptTokenizer::vocab_size() const { return sp_->GetPieceSize(); }

std::vector<int32_t> SpmGptTokenizer::encode(std::string_view text) const { return sp_encode(*sp_, text); }

std::string SpmGptTokenizer::decode(const std::vector<int32_t>& ids) const {
  return sp_decode(*sp_, ids, boundary_id());
}

std::string SpmGptTokenizer::id_to_string(int32_t id) const {
  ATTO_CHECK(id >= 0 && id < vocab_size(), "token id {} is outside the SentencePiece vocabulary (size {})", id,
             vocab_size());
  return sp_->IdToPiece(id);
}

int32_t SpmGptTokenizer::single_token(std::string_view piece) const {
  if (utf8::find_invalid(piece)) return -1;
  const std::vector<int32_t> ids = encode(piece);
  return ids.size() == 1 ? ids[0] : -1;
}

nlohmann::json SpmGptTokenizer::to_json() const {
  return {{"type", "spm"},
          {"version", 1},
          {"model", SpmTokenizer::kModelFile},
          {"vocab_size", vocab_size()},
          {"special_tokens", {{"<unk>", 0}, {"<s>", 1}, {"</s>", 2}}},
          {"boundary", boundary_}};
}

void SpmGptTokenizer::write_files(const std::string& dir) const {
  write_atomically(fs::path(dir) / SpmTokenizer::kModelFile, model_);
}

}  // namespace atto
