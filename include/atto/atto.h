/* atto/atto.h: the C API of atto, a small-transformer engine (train, sample, score, translate).
 *
 *   atto_model* m = NULL;
 *   if (atto_model_open("runs/names", &m) != ATTO_OK) {
 *     fprintf(stderr, "%s\n", atto_last_error());
 *     return 1;
 *   }
 *   atto_context* c = NULL;                              // per-user state: threads (and caches)
 *   atto_context_new(m, NULL, &c);
 *   atto_sample_params p = atto_sample_default_params();
 *   p.seed = 1337;
 *   atto_strings* out = NULL;
 *   atto_generate(c, "", 5, &p, NULL, NULL, &out);      // 5 samples, as `atto sample -n 5`
 *   for (size_t i = 0; i < atto_strings_count(out); ++i) printf("%s\n", atto_strings_get(out, i, NULL));
 *   atto_strings_free(out);
 *   atto_context_free(c);
 *   atto_model_free(m);
 *
 * Rules (docs/api.md has the details and a table of every function)
 * - Errors: every function that can fail returns an atto_status; ATTO_OK is 0. On failure,
 *   atto_last_error() returns the message (what is wrong, in which file, field or argument) until
 *   the next failing call on the same thread. No C++ exception ever crosses this API.
 * - Ownership: a handle returned through an `atto_X** out` argument belongs to the caller, who
 *   frees it with atto_X_free (free functions accept NULL). Strings and arrays read from a
 *   handle (atto_strings_get, atto_scores's arrays) live as long as that handle. Input pointers
 *   are only read during the call.
 * - Models and contexts (as llama.h): an atto_model holds the weights and tokenizers, loaded
 *   once and never changed after atto_model_open; an atto_context holds one user's state (the
 *   kernels' thread count) and runs the model (generate, score, logits, translate). Any number of
 *   contexts may share one model, each used from its own thread at the same time, giving the
 *   same results as one at a time; the model's own functions (info, tokenize, ...) may be called
 *   from any thread at any time. A context is used by one thread at a time, and its model must
 *   outlive it.
 * - Threads: the kernels' thread count is a property of the context (atto_context_params, the
 *   training parameters), set for the duration of each call on the calling thread only: the API
 *   never changes process-wide state (thread counts, signal handlers).
 * - Reproducibility: the same seed and parameters give the same tokens, whatever the thread
 *   count, and the same as the `atto` command line.
 */
#ifndef ATTO_ATTO_H
#define ATTO_ATTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ATTO_SHARED: the library is (being) built or used as a shared library (libatto.so, atto.dll),
 * which CMake's atto::atto target sets for its users; ATTO_BUILD: atto's own sources are being
 * compiled. The static library (atto::atto_static) needs neither. */
#if defined(ATTO_SHARED)
#if defined(_WIN32) && !defined(__MINGW32__)
#if defined(ATTO_BUILD)
#define ATTO_API __declspec(dllexport)
#else
#define ATTO_API __declspec(dllimport)
#endif
#else
#define ATTO_API __attribute__((visibility("default")))
#endif
#else
#define ATTO_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define ATTO_VERSION_MAJOR 0
#define ATTO_VERSION_MINOR 12
#define ATTO_VERSION_PATCH 0

typedef enum atto_status {
  ATTO_OK = 0,
  ATTO_ERR_INVALID_ARGUMENT = 1, /* a NULL handle, a value out of range, a wrong task */
  ATTO_ERR_BAD_INPUT = 2,        /* a file, run directory or text that is missing or invalid */
  ATTO_ERR_BUFFER_TOO_SMALL = 3, /* the caller's buffer is too small; the needed size is returned */
  ATTO_ERR_STOPPED = 4,          /* a callback asked to stop (training saved its state: resume it) */
  ATTO_ERR_INTERNAL = 5          /* anything else (out of memory, a bug): the message says what */
} atto_status;

typedef enum atto_task { ATTO_TASK_GPT = 0, ATTO_TASK_SEQ2SEQ = 1 } atto_task;

/* Which vocabulary of a model: a GPT has one; an encoder-decoder has a source and a target one. */
typedef enum atto_vocab { ATTO_VOCAB_SOURCE = 0, ATTO_VOCAB_TARGET = 1 } atto_vocab;
#define ATTO_VOCAB_GPT ATTO_VOCAB_SOURCE

/* "0.12.0" */
ATTO_API const char* atto_version(void);
/* The message of the last failed call on this thread ("" when none). */
ATTO_API const char* atto_last_error(void);
/* A short name of a status ("ATTO_ERR_BAD_INPUT"). */
ATTO_API const char* atto_status_name(atto_status s);

/* ----------------------------------------------------------------------------------------------
 * Lists of strings (samples, translations), with a score per string where one exists.
 * -------------------------------------------------------------------------------------------- */
typedef struct atto_strings atto_strings;
ATTO_API size_t atto_strings_count(const atto_strings* s);
/* The i-th string (NUL-terminated; *len gets its length in bytes when len is not NULL); NULL when
 * i is out of range. */
ATTO_API const char* atto_strings_get(const atto_strings* s, size_t i, size_t* len);
/* Its score: translations: the hypothesis score (log-probability / length penalty); samples: the
 * number of generated tokens. */
ATTO_API double atto_strings_score(const atto_strings* s, size_t i);
ATTO_API void atto_strings_free(atto_strings* s);

/* ----------------------------------------------------------------------------------------------
 * Models: a trained run directory (atto train --out DIR), opened read-only.
 * -------------------------------------------------------------------------------------------- */
typedef struct atto_model atto_model;

typedef struct atto_model_info {
  atto_task task;
  int32_t vocab_size;                 /* GPT: its vocabulary; seq2seq: the source vocabulary */
  int32_t tgt_vocab_size;             /* seq2seq: the target vocabulary; GPT: = vocab_size */
  int64_t context;                    /* GPT: block size; seq2seq: the longest sentence in tokens (max_len) */
  int64_t n_params;                   /* trainable parameters */
  int32_t d_model, n_heads, n_layers; /* seq2seq: n_layers = encoder layers */
  int32_t n_dec_layers;               /* seq2seq: decoder layers; GPT: 0 */
  bool lines_mode;                    /* GPT: samples are lines ending at <eos>; else a stream of text */
  int32_t eos_token;                  /* the token that ends a sample or translation; -1 when none */
  int32_t n_kv_heads;                 /* GPT: key/value heads (< n_heads: grouped-query); else n_heads */
  float rope_base;                    /* GPT with rotary positions: their base; else 0 */
} atto_model_info;

/* Opens a run directory: validates config.json, the tokenizer(s) and model.safetensors against
 * each other. On failure *out is NULL and the message names the file and what is wrong. */
ATTO_API atto_status atto_model_open(const char* run_dir, atto_model** out);
ATTO_API void atto_model_free(atto_model* m);
ATTO_API atto_status atto_model_info_get(const atto_model* m, atto_model_info* out);

/* Text to token ids, as the model's training did (no <eos> added). Writes at most `capacity`
 * ids; *n_tokens gets the number of ids of the text. When capacity is too small the call
 * returns ATTO_ERR_BUFFER_TOO_SMALL and *n_tokens is the size needed (call again). A character
 * the vocabulary lacks is ATTO_ERR_BAD_INPUT naming it and its position. */
ATTO_API atto_status atto_tokenize(const atto_model* m, atto_vocab vocab, const char* text, size_t text_len,
                                   int32_t* tokens, size_t capacity, size_t* n_tokens);
/* Token ids to text (special tokens are skipped). Writes at most `capacity` bytes including the
 * terminating NUL; *len gets the text's length; ATTO_ERR_BUFFER_TOO_SMALL as atto_tokenize. */
ATTO_API atto_status atto_detokenize(const atto_model* m, atto_vocab vocab, const int32_t* tokens, size_t n_tokens,
                                     char* text, size_t capacity, size_t* len);

/* One token's text, special tokens by name ("<eos>", "<unk>"): for showing tokens one by one.
 * Buffer rules as atto_detokenize. */
ATTO_API atto_status atto_token_to_piece(const atto_model* m, atto_vocab vocab, int32_t token, char* text,
                                         size_t capacity, size_t* len);
/* Whether the token is a special one (GPT lines mode: <eos>; seq2seq: <pad>, <bos>, <eos>, <unk>). */
ATTO_API bool atto_token_is_special(const atto_model* m, atto_vocab vocab, int32_t token);

/* ----------------------------------------------------------------------------------------------
 * Contexts: one user's state for running a model (see the rules at the top).
 * -------------------------------------------------------------------------------------------- */
typedef struct atto_context atto_context;

typedef struct atto_context_params {
  int32_t n_threads; /* threads the kernels use during this context's calls; 0 = all cores */
} atto_context_params;

ATTO_API atto_context_params atto_context_default_params(void);
/* A new context on model m (params may be NULL: the defaults). m must outlive the context. */
ATTO_API atto_status atto_context_new(const atto_model* m, const atto_context_params* params, atto_context** out);
ATTO_API void atto_context_free(atto_context* c);
/* The model the context runs (NULL for a NULL context). */
ATTO_API const atto_model* atto_context_model(const atto_context* c);
ATTO_API atto_status atto_context_set_threads(atto_context* c, int32_t n_threads);

/* ----------------------------------------------------------------------------------------------
 * Generation (GPT): the sampler of `atto sample`.
 * -------------------------------------------------------------------------------------------- */
typedef struct atto_sample_params {
  float temperature;         /* > 0; 1 = the model's distribution */
  int32_t top_k;             /* keep the k most likely tokens; 0 = off */
  float top_p;               /* nucleus; 1 = off */
  float min_p;               /* keep tokens with p >= min_p * p_max; 0 = off */
  float repetition_penalty;  /* CTRL-style penalty on recent tokens; 1 = off */
  int32_t repetition_last_n; /* how many recent tokens it looks at; 0 = all */
  bool greedy;               /* argmax instead of a draw */
  uint64_t seed;             /* the sampler's seed (atto sample --seed) */
  int64_t max_tokens;        /* generated tokens per sample at most; 0 = the atto sample default
                                (block size in lines mode, 500 in stream mode) */
  const char* const* stop;   /* stop strings: a sample ends before the first one; may be NULL */
  size_t n_stop;
  float frequency_penalty;   /* OpenAI's: logit -= count * this over the recent tokens; in [-2, 2], 0 = off */
  float presence_penalty;    /* OpenAI's: logit -= this for each recent token; in [-2, 2], 0 = off */
  const int32_t* logit_bias_tokens; /* n_logit_bias token ids whose logits get a bias; may be NULL */
  const float* logit_bias_values;   /* their biases, in [-100, 100] (-100 all but bans a token) */
  size_t n_logit_bias;
} atto_sample_params;

ATTO_API atto_sample_params atto_sample_default_params(void);

/* Called with each new piece of text of sample `index` (0 .. n_samples - 1) as it is generated
 * (text held back while it could be the start of a stop string comes later). Return false to end
 * that sample now. `token` is the id just sampled (-1 for text released at the end). */
typedef bool (*atto_token_callback)(int64_t index, const char* piece, size_t len, int32_t token, void* user);

/* n_samples samples continuing `prompt` (UTF-8, may be empty), decoded together in batches,
 * exactly those of `atto sample --prompt PROMPT -n N` with the same parameters and seed. Each
 * string of *out is the prompt followed by the sample's text (up to its first stop string);
 * `on_token` (may be NULL) streams the new text. n_samples: 1 to 2^20 (ATTO_ERR_INVALID_ARGUMENT
 * otherwise). */
ATTO_API atto_status atto_generate(atto_context* c, const char* prompt, int64_t n_samples,
                                   const atto_sample_params* params, atto_token_callback on_token, void* user,
                                   atto_strings** out);

/* ----------------------------------------------------------------------------------------------
 * Scoring (GPT): per-token log-probabilities, as `atto score`.
 * -------------------------------------------------------------------------------------------- */
typedef struct atto_scores {
  size_t n;         /* scored tokens */
  int32_t* tokens;  /* [n] the scored tokens (lines mode: the text's tokens, then <eos>) */
  double* logprobs; /* [n] ln p(token | its context) */
  double total_nll; /* -sum(logprobs), nats */
  double mean_nll;  /* total_nll / n: the cross-entropy of the text */
} atto_scores;

/* Fills *out (free its arrays with atto_scores_free). */
ATTO_API atto_status atto_score(atto_context* c, const char* text, size_t text_len, atto_scores* out);
ATTO_API void atto_scores_free(atto_scores* s);

/* Next-token logits after a token sequence (GPT: `tokens` is the context, at most `context`
 * tokens; seq2seq: use atto_translate_logits). `logits` receives vocab_size floats. */
ATTO_API atto_status atto_logits(atto_context* c, const int32_t* tokens, size_t n_tokens, float* logits, size_t capacity);

/* ----------------------------------------------------------------------------------------------
 * Translation (seq2seq): greedy or beam search, as `atto translate`.
 * -------------------------------------------------------------------------------------------- */
typedef struct atto_translate_params {
  int32_t beam;         /* 1 = greedy */
  int32_t n_best;       /* hypotheses per source (<= beam) */
  float length_penalty; /* GNMT alpha */
  float max_len_a;      /* target length limit = a * source length + b */
  int32_t max_len_b;
} atto_translate_params;

ATTO_API atto_translate_params atto_translate_default_params(void);

/* Translates n sources; *out holds n * n_best strings: source i's hypotheses at i * n_best + j,
 * best first, each with its score. An empty source gives empty hypotheses. */
ATTO_API atto_status atto_translate(atto_context* c, const char* const* sources, size_t n_sources,
                                    const atto_translate_params* params, atto_strings** out);

/* The decoder's next-token logits (tgt_vocab_size floats) for a source text and a target prefix
 * of token ids (without <bos>). */
ATTO_API atto_status atto_translate_logits(atto_context* c, const char* source, const int32_t* prefix, size_t n_prefix,
                                           float* logits, size_t capacity);

/* ----------------------------------------------------------------------------------------------
 * Training: `atto train` as a call.
 * -------------------------------------------------------------------------------------------- */
/* What a run's best checkpoint is chosen by (config.json's best_by): the validation loss, lower
 * is better; or BLEU on the validation pairs (seq2seq with eval_bleu on), higher is better. */
typedef enum atto_metric { ATTO_METRIC_VAL_LOSS = 0, ATTO_METRIC_BLEU = 1 } atto_metric;

typedef struct atto_train_progress {
  int64_t step;         /* optimizer steps done */
  int64_t total_steps;  /* of the run */
  double train_loss;    /* mean loss of the last logged steps */
  double val_loss;      /* the evaluation of this step; NaN when this step did not evaluate */
  double best_score;    /* the best checkpoint's evaluation so far, in `metric`'s units */
  atto_metric metric;   /* what best_score is */
  double elapsed_s;     /* wall time of this call */
  double tokens_per_s;
} atto_train_progress;

/* Called at every logged step and evaluation. Return false to stop: training ends after the
 * current step, saves its state (resume it later) and returns ATTO_ERR_STOPPED. */
typedef bool (*atto_progress_callback)(const atto_train_progress* p, void* user);

typedef struct atto_train_params {
  const char* config_json;            /* the keys of config.json (flat or in sections), e.g.
                                         "{\"data\": \"names.txt\", \"steps\": 500}"; NULL or "" = defaults
                                         (then "data" must still be given for a new run) */
  const char* out_dir;                /* the run directory to create, or (resume) to continue */
  bool resume;                        /* continue the run in out_dir; config_json may then only hold the keys
                                         that `atto train --resume` accepts (steps, threads, eval_every, ...) */
  bool force;                         /* allow out_dir to hold a run already (it is overwritten) */
  int32_t n_threads;                  /* 0 = the config's "threads" (all cores by default) */
  atto_progress_callback on_progress; /* may be NULL */
  void* user;
} atto_train_params;

typedef struct atto_train_result {
  int64_t steps;        /* step count at the end */
  double best_score;    /* the best checkpoint's evaluation, in `metric`'s units */
  atto_metric metric;   /* what best_score is: the validation loss or BLEU */
  int64_t best_step;
  double last_train_loss;
  double seconds;
  int64_t n_params;
  bool interrupted; /* the callback stopped it */
} atto_train_result;

ATTO_API atto_train_params atto_train_default_params(void);
/* Trains (or resumes) a run; *result (may be NULL) is filled also when it returns
 * ATTO_ERR_STOPPED. Progress text goes nowhere: use on_progress. */
ATTO_API atto_status atto_train(const atto_train_params* params, atto_train_result* result);

/* ----------------------------------------------------------------------------------------------
 * Weights (src/api/c_api_weights.cpp): a model's tensors by name, read without a copy (the Python
 * package's Model.weights()).
 * -------------------------------------------------------------------------------------------- */
#define ATTO_WEIGHT_MAX_DIMS 8

/* A list of a model's tensors: every entry of its state dict, the names and shapes of its
 * model.safetensors (a GPT: nanoGPT's names; a tied weight under each of its names). */
typedef struct atto_weights atto_weights;

typedef struct atto_weight {
  const char* name;                      /* "transformer.wte.weight" */
  const float* data;                     /* n_elements float32 values, row-major; read-only */
  size_t n_elements;                     /* the product of shape[0 .. ndim - 1] */
  int32_t ndim;                          /* at most ATTO_WEIGHT_MAX_DIMS */
  int64_t shape[ATTO_WEIGHT_MAX_DIMS];   /* shape[0 .. ndim - 1]; the rest 0 */
} atto_weight;

/* The model's weights, without a copy: the list shares the model's tensors, and its names and
 * data pointers stay valid until atto_weights_free (also after atto_model_free). A model's
 * weights never change after atto_model_open: never write through `data`. The matrices that a
 * quantized GGUF file keeps quantized (q8_0, q5_1, q5_0, q4_1, q4_0, iq4_nl, iq4_xs, Q3_K to Q6_K) are given
 * dequantized (a float copy each, the values the model computes with). */
ATTO_API atto_status atto_model_weights(const atto_model* m, atto_weights** out);
ATTO_API size_t atto_weights_count(const atto_weights* w);
/* Fills *out with the i-th tensor; false when i is out of range (or w or out is NULL). */
ATTO_API bool atto_weights_get(const atto_weights* w, size_t i, atto_weight* out);
ATTO_API void atto_weights_free(atto_weights* w);

/* ----------------------------------------------------------------------------------------------
 * Inspection (GPT; src/api/c_api_inspect.cpp): inside one forward pass on a text, the numbers that
 * `atto inspect --text` draws (the Python package's Model.attention() and residual_stream()).
 * -------------------------------------------------------------------------------------------- */
typedef struct atto_inspection atto_inspection;

/* Runs the model once on `text` (UTF-8, text_len bytes) and keeps its attention weights and
 * residual stream. The input is what atto inspect feeds: in lines mode the <eos> that starts a
 * line, then the text's tokens (an empty text is then the <eos> alone); in stream mode the
 * text's tokens. Errors: a seq2seq model (ATTO_ERR_INVALID_ARGUMENT); an input longer than the
 * block size (ATTO_ERR_INVALID_ARGUMENT naming both: atto inspect would keep its last block_size
 * tokens; here nothing is cut); a stream-mode text with no tokens (ATTO_ERR_INVALID_ARGUMENT); a
 * character the vocabulary lacks (ATTO_ERR_BAD_INPUT naming it). */
ATTO_API atto_status atto_inspect(atto_context* c, const char* text, size_t text_len, atto_inspection** out);
/* T, the number of input positions (0 for NULL), and the input's token ids ([T]). */
ATTO_API size_t atto_inspection_n_tokens(const atto_inspection* x);
ATTO_API const int32_t* atto_inspection_tokens(const atto_inspection* x);
/* Attention weights, float32 row-major [n_layers, n_heads, T, T] (shape receives the four sizes
 * when not NULL): [l, h, i, j] is how much query position i of head h in layer l attends to key
 * position j; each row i sums to 1 over j <= i, and the masked entries j > i are 0. */
ATTO_API const float* atto_inspection_attention(const atto_inspection* x, int64_t shape[4]);
/* The residual stream, float32 row-major [n_layers + 1, T, d_model] (shape as above): row 0 is
 * the embeddings (the token's plus the learned or sinusoidal position's; the token's alone with
 * rotary positions; before dropout, which inference does not apply), row l (1 <= l <= n_layers) is the output of block l - 1: the input of block l, and
 * for l = n_layers the input of the final norm ln_f (a post-norm GPT, which has no ln_f: the
 * input of lm_head). */
ATTO_API const float* atto_inspection_residual(const atto_inspection* x, int64_t shape[3]);
/* The pointers above stay valid until this call. */
ATTO_API void atto_inspection_free(atto_inspection* x);

#ifdef __cplusplus
}
#endif

#endif /* ATTO_ATTO_H */
