/*
 * app_args.h — the flux command line: options, parsing and validation.
 *
 * Parsing is strict: numbers must be whole decimal strings in range, each
 * problem is reported as one line naming the option as the user spelled it
 * (`flux: -W: '12x' is not a number`), and the CLI exits with status 2.
 *
 * Exit codes of the flux binary:
 *   0  success (also --help, --version, --cpu-info)
 *   1  runtime failure (model, image or .npy file unreadable, generation
 *      failed, feature not yet available, results that cannot be written
 *      to stdout); the library's message is printed
 *   2  bad command line (unknown option, bad value, missing option, missing
 *      or unusable file or directory given on the command line)
 *   130 interrupted by Ctrl-C (nothing is written)
 */
#ifndef FX_CLI_ARGS_H
#define FX_CLI_ARGS_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "flux.h"

#define CLI_EXIT_OK 0
#define CLI_EXIT_FAIL 1
#define CLI_EXIT_USAGE 2
#define CLI_EXIT_INTERRUPTED 130

/* Limits of the command line (the library accepts the same sizes). */
#define CLI_MIN_SIZE 64
#define CLI_NOISE_MIN_SIZE 16 /* with --noise, which pins the size (tiny tests) */
#define CLI_MAX_SIZE 2048
#define CLI_MAX_STEPS 1000
#define CLI_MAX_THREADS FLUX_MAX_THREADS
#define CLI_MAX_BATCH 64
#define CLI_MAX_DEVICE 255
#define CLI_MAX_DEVICE_MB (1LL << 24) /* 16 TiB */
#define CLI_MAX_LORAS 16
#define CLI_MAX_LORA_SCALE 100.0 /* |scale| of --lora and !lora */

typedef struct cli_args {
    /* actions besides generating */
    int help, version, cpu_info, list_devices;
    int tokenize, raw;

    /* model */
    const char *model_dir;        /* -d */
    const char *transformer_file; /* --transformer */
    const char *text_encoder_file; /* --text-encoder */
    const char *vae_file;         /* --vae */
    const char *tokenizer_file;   /* --tokenizer */
    const char *quant;            /* --quant */
    char lora_file[CLI_MAX_LORAS][4096]; /* --lora FILE[:SCALE], in order */
    float lora_scale[CLI_MAX_LORAS];
    int n_loras;
    int distilled;                /* -1 auto, 0 --base, 1 --distilled */

    /* what to generate */
    const char *prompt;           /* -p (NULL: interactive mode) */
    const char *negative;         /* --negative */
    const char *output;           /* -o */
    int width, height;            /* 0 = auto (256, or the first reference) */
    char width_opt[16], height_opt[16]; /* how -W/-H were spelled (messages) */
    int steps;                    /* 0 = model default */
    uint64_t seed;                /* valid when seed_given */
    int seed_given;
    float guidance;               /* < 0 = model default */
    flux_schedule schedule;
    float power_alpha;            /* valid when power_alpha_given */
    int power_alpha_given;
    const char *refs[FLUX_MAX_REFS]; /* -i, in order */
    int n_refs;
    int batch;                    /* -n, ≥ 1 */
    const char *init_img;         /* --init-img (NULL: text-to-image) */
    double strength;              /* --strength, valid with init_img (default 0.8) */
    int strength_given;
    const char *mask_file;        /* --mask */
    int mask_invert;              /* --mask-invert */
    float mask_blur;              /* --mask-blur (0 = none) */

    /* verification hooks */
    const char *noise_file;       /* --noise */
    const char *embeddings_file;  /* --embeddings */
    const char *dump_dir;         /* --dump */

    /* runtime */
    int threads;                  /* 0 = auto */
    int no_mmap;
    int precision;                /* -1 unset, else a flux_precision */
    const char *isa;
    flux_backend backend;         /* --backend (default auto) */
    int device;                   /* --device, -1 = choose */
    long long device_memory_mb;   /* --device-memory, 0 = default */
    const char *cache_dir;
    int no_cache;
    int quiet;
    int verbose;                  /* count of -v */
    int show;
} cli_args;

/* Parse and validate argv. Returns CLI_EXIT_OK, or CLI_EXIT_USAGE with one
 * line (no "flux: " prefix, no newline) in msg. Checks that files and
 * directories named on the command line exist (and that the output
 * directory is writable) unless --help/--version/--cpu-info is given. */
int cli_parse(int argc, char **argv, cli_args *a, char *msg, size_t msg_size);
/* cli_parse in its two halves, for programs that take a subset of the
 * options (flux-server refuses the image options in between): the values
 * of argv into *a, then the checks across options and of the files. */
int cli_parse_options(int argc, char **argv, cli_args *a, char *msg, size_t msg_size);
int cli_validate(cli_args *a, char *msg, size_t msg_size);

/* -W/-H left at 0 take the first reference's processed size (ref_w x
 * ref_h), which must be inside CLI_MIN_SIZE..CLI_MAX_SIZE like a given size.
 * Returns 0, or -1 with "the output size would be 48x48, outside 64..2048"
 * (or "... height would be ...") in msg and in *missing which sides to
 * give: "both", "width" or "height". */
int cli_check_default_size(int width, int height, int ref_w, int ref_h, char *msg, size_t size,
                           const char **missing);

/* The --help text. */
void cli_print_help(FILE *f);

/* Output file name of image `index` of a batch: index 0 → `out`, then
 * "out.png" → "out-1.png", "out-2.png", ... (the number goes before the
 * extension). Returns 0 when buf is too small. */
int cli_batch_name(const char *out, int index, char *buf, size_t size);

/* A fresh random seed below 2^32 (short enough to retype): /dev/urandom,
 * else the clock and the pid. */
uint64_t cli_random_seed(void);

/* Whether an output file `path` in directory `dir`, its name grown by
 * `extra` characters, is more than the file system takes (NAME_MAX of dir)
 * or longer than PATH_MAX: 1 with the reason in why, else 0. Outputs are
 * checked with it before any work, not when the finished file is renamed. */
int cli_name_too_long(const char *dir, const char *path, size_t extra, char *why, size_t size);

/* stdout carries the results (help, ids, CPU facts, interactive handles):
 * flush it; when it cannot be written (a full disk, /dev/full) report that
 * once and return CLI_EXIT_FAIL if rc was CLI_EXIT_OK, else rc. */
int cli_check_stdout(int rc);

/* One message line on stderr: "flux: ", the formatted text, a newline (the
 * form of every diagnostic and status line of the CLI). */
void cli_vmessage(const char *fmt, va_list ap) __attribute__((format(printf, 1, 0)));
void cli_message(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
