/* sample RUN_DIR N SEED [PROMPT]: N samples of a trained GPT run, printed as `atto sample --model
 * RUN_DIR -n N --seed SEED [--prompt PROMPT]` prints them (one per line in lines mode; in stream
 * mode each is followed by a line of dashes). The per-token callback shows the text on stderr as
 * it is generated: samples are decoded in batches, so pieces of different samples interleave
 * there (each is tagged with its sample's index); stdout gets the finished samples. */
#include <stdio.h>
#include <stdlib.h>

#include <atto/atto.h>

static bool show_piece(int64_t index, const char* piece, size_t len, int32_t token, void* user) {
  (void)token, (void)user;
  fprintf(stderr, "[%lld] %.*s\n", (long long)index, (int)len, piece);
  return true; /* false would end this sample here */
}

int main(int argc, char** argv) {
  if (argc < 4 || argc > 5) {
    fprintf(stderr, "usage: %s RUN_DIR N SEED [PROMPT]\n", argv[0]);
    return 2;
  }
  atto_model* model = NULL;
  atto_context* ctx = NULL; /* runs the model: one per thread that generates */
  atto_model_info info;
  atto_strings* samples = NULL;
  atto_sample_params params = atto_sample_default_params();
  params.seed = strtoull(argv[3], NULL, 10);
  if (atto_model_open(argv[1], &model) != ATTO_OK || atto_model_info_get(model, &info) != ATTO_OK ||
      atto_context_new(model, NULL, &ctx) != ATTO_OK ||
      atto_generate(ctx, argc == 5 ? argv[4] : "", atoll(argv[2]), &params, show_piece, NULL, &samples) != ATTO_OK) {
    fprintf(stderr, "sample: %s\n", atto_last_error());
    atto_context_free(ctx);
    atto_model_free(model);
    return 1;
  }
  for (size_t i = 0; i < atto_strings_count(samples); ++i) {
    size_t len = 0;
    const char* s = atto_strings_get(samples, i, &len);
    if (info.lines_mode)
      printf("%s\n", s);
    else
      printf("%s%s----------\n", s, len == 0 || s[len - 1] != '\n' ? "\n" : "");
  }
  atto_strings_free(samples);
  atto_context_free(ctx);
  atto_model_free(model);
  return 0;
}
