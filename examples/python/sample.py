#!/usr/bin/env python3
"""sample.py [--lib LIBATTO] RUN_DIR N SEED [PROMPT]: the C example (examples/c/sample.c) in
Python through ctypes, with nothing to build: N samples of a trained GPT run, printed as
`atto sample --model RUN_DIR -n N --seed SEED [--prompt PROMPT]` prints them. New text is shown
on stderr as it is generated (pieces of different samples interleave: they are decoded in
batches). The library is --lib, else $ATTO_LIB, else libatto.so.0 on the loader's path."""
import ctypes as C
import os
import sys


class SampleParams(C.Structure):  # atto_sample_params of atto/atto.h, field for field
    _fields_ = [("temperature", C.c_float), ("top_k", C.c_int32), ("top_p", C.c_float), ("min_p", C.c_float),
                ("repetition_penalty", C.c_float), ("repetition_last_n", C.c_int32), ("greedy", C.c_bool),
                ("seed", C.c_uint64), ("max_tokens", C.c_int64), ("stop", C.POINTER(C.c_char_p)),
                ("n_stop", C.c_size_t), ("frequency_penalty", C.c_float), ("presence_penalty", C.c_float),
                ("logit_bias_tokens", C.POINTER(C.c_int32)), ("logit_bias_values", C.POINTER(C.c_float)),
                ("n_logit_bias", C.c_size_t)]


class ModelInfo(C.Structure):  # atto_model_info
    _fields_ = [("task", C.c_int), ("vocab_size", C.c_int32), ("tgt_vocab_size", C.c_int32),
                ("context", C.c_int64), ("n_params", C.c_int64), ("d_model", C.c_int32), ("n_heads", C.c_int32),
                ("n_layers", C.c_int32), ("n_dec_layers", C.c_int32), ("lines_mode", C.c_bool),
                ("eos_token", C.c_int32)]


TOKEN_CALLBACK = C.CFUNCTYPE(C.c_bool, C.c_int64, C.POINTER(C.c_char), C.c_size_t, C.c_int32, C.c_void_p)


def load(path):
    lib = C.CDLL(path)
    lib.atto_last_error.restype = C.c_char_p
    lib.atto_sample_default_params.restype = SampleParams
    lib.atto_model_open.argtypes = [C.c_char_p, C.POINTER(C.c_void_p)]
    lib.atto_model_info_get.argtypes = [C.c_void_p, C.POINTER(ModelInfo)]
    lib.atto_model_free.argtypes = [C.c_void_p]
    lib.atto_context_new.argtypes = [C.c_void_p, C.c_void_p, C.POINTER(C.c_void_p)]
    lib.atto_context_free.argtypes = [C.c_void_p]
    lib.atto_generate.argtypes = [C.c_void_p, C.c_char_p, C.c_int64, C.POINTER(SampleParams), TOKEN_CALLBACK,
                                  C.c_void_p, C.POINTER(C.c_void_p)]
    lib.atto_strings_count.argtypes = [C.c_void_p]
    lib.atto_strings_count.restype = C.c_size_t
    lib.atto_strings_get.argtypes = [C.c_void_p, C.c_size_t, C.POINTER(C.c_size_t)]
    lib.atto_strings_get.restype = C.POINTER(C.c_char)
    lib.atto_strings_free.argtypes = [C.c_void_p]
    return lib


def main(argv):
    lib_path = os.environ.get("ATTO_LIB", "libatto.so.0")
    if len(argv) > 2 and argv[1] == "--lib":
        lib_path, argv = argv[2], argv[:1] + argv[3:]
    if len(argv) not in (4, 5):
        sys.stderr.write(f"usage: {argv[0]} [--lib LIBATTO] RUN_DIR N SEED [PROMPT]\n")
        return 2
    lib = load(lib_path)
    run_dir, n, seed = argv[1], int(argv[2]), int(argv[3])
    prompt = argv[4] if len(argv) == 5 else ""

    @TOKEN_CALLBACK
    def show_piece(index, piece, length, token, user):
        sys.stderr.buffer.write(b"[%d] %s\n" % (index, C.string_at(piece, length)))
        return True  # False would end this sample here

    model, ctx, samples, info = C.c_void_p(), C.c_void_p(), C.c_void_p(), ModelInfo()
    params = lib.atto_sample_default_params()
    params.seed = seed
    try:
        if (lib.atto_model_open(os.fsencode(run_dir), C.byref(model)) != 0
                or lib.atto_model_info_get(model, C.byref(info)) != 0
                or lib.atto_context_new(model, None, C.byref(ctx)) != 0  # runs the model
                or lib.atto_generate(ctx, os.fsencode(prompt), n, C.byref(params), show_piece, None,
                                     C.byref(samples)) != 0):
            sys.stderr.write("sample.py: %s\n" % lib.atto_last_error().decode("utf-8", "replace"))
            return 1
        out = sys.stdout.buffer
        for i in range(lib.atto_strings_count(samples)):
            length = C.c_size_t()
            text = C.string_at(lib.atto_strings_get(samples, i, C.byref(length)), length.value)
            if info.lines_mode:
                out.write(text + b"\n")
            else:  # stream mode: each sample, then a line of dashes
                out.write(text + (b"" if text.endswith(b"\n") else b"\n") + b"----------\n")
        out.flush()
        return 0
    finally:
        lib.atto_strings_free(samples)
        lib.atto_context_free(ctx)
        lib.atto_model_free(model)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
