/*
 * app_args.c — option table, strict value parsing and validation of the
 * flux command line (see app_args.h for the rules and exit codes).
 */
#include "app_args.h"

#include "app_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

typedef enum opt_id {
    O_DIR, O_PROMPT, O_OUTPUT, O_WIDTH, O_HEIGHT, O_STEPS, O_SEED, O_GUIDANCE, O_INPUT, O_THREADS,
    O_QUIET, O_VERBOSE, O_HELP, O_VERSION, O_CPU_INFO, O_NEGATIVE, O_LINEAR, O_POWER, O_POWER_ALPHA,
    O_BASE, O_DISTILLED, O_PRECISION, O_ISA, O_NO_MMAP, O_NOISE, O_EMBEDDINGS, O_DUMP, O_TOKENIZE,
    O_RAW, O_BATCH, O_CACHE_DIR, O_NO_CACHE, O_TRANSFORMER, O_SHOW, O_TEXT_ENCODER, O_QUANT, O_LORA, O_BACKEND,
    O_VAE, O_TOKENIZER,
    O_DEVICE, O_LIST_DEVICES, O_DEVICE_MEMORY, O_INIT_IMG, O_STRENGTH, O_MASK, O_MASK_INVERT, O_MASK_BLUR
} opt_id;

typedef struct opt_def {
    char short_name;       /* 0 = long only */
    const char *long_name;
    int has_value;
    opt_id id;
} opt_def;

static const opt_def options[] = {
    {'d', "dir", 1, O_DIR},           {'p', "prompt", 1, O_PROMPT},     {'o', "output", 1, O_OUTPUT},
    {'W', "width", 1, O_WIDTH},       {'H', "height", 1, O_HEIGHT},     {'s', "steps", 1, O_STEPS},
    {'S', "seed", 1, O_SEED},         {'g', "guidance", 1, O_GUIDANCE}, {'i', "input", 1, O_INPUT},
    {'t', "threads", 1, O_THREADS},   {'q', "quiet", 0, O_QUIET},       {'v', "verbose", 0, O_VERBOSE},
    {'h', "help", 0, O_HELP},         {0, "version", 0, O_VERSION},     {0, "cpu-info", 0, O_CPU_INFO},
    {0, "negative", 1, O_NEGATIVE},   {0, "linear", 0, O_LINEAR},       {0, "power", 0, O_POWER},
    {0, "power-alpha", 1, O_POWER_ALPHA}, {0, "base", 0, O_BASE},       {0, "distilled", 0, O_DISTILLED},
    {0, "precision", 1, O_PRECISION}, {0, "isa", 1, O_ISA},             {0, "no-mmap", 0, O_NO_MMAP},
    {0, "noise", 1, O_NOISE},         {0, "embeddings", 1, O_EMBEDDINGS}, {0, "dump", 1, O_DUMP},
    {0, "tokenize", 0, O_TOKENIZE},   {0, "raw", 0, O_RAW},             {'n', "batch", 1, O_BATCH},
    {0, "cache-dir", 1, O_CACHE_DIR}, {0, "no-cache", 0, O_NO_CACHE},   {0, "transformer", 1, O_TRANSFORMER},
    {0, "show", 0, O_SHOW},           {0, "text-encoder", 1, O_TEXT_ENCODER}, {0, "quant", 1, O_QUANT},
    {0, "lora", 1, O_LORA},
    {0, "backend", 1, O_BACKEND},     {0, "device", 1, O_DEVICE},       {0, "list-devices", 0, O_LIST_DEVICES},
    {0, "device-memory", 1, O_DEVICE_MEMORY},
    {0, "init-img", 1, O_INIT_IMG},   {0, "strength", 1, O_STRENGTH},   {0, "mask", 1, O_MASK},
    {0, "mask-invert", 0, O_MASK_INVERT}, {0, "mask-blur", 1, O_MASK_BLUR},
    {0, "vae", 1, O_VAE},             {0, "tokenizer", 1, O_TOKENIZER},
};
#define N_OPTIONS (sizeof options / sizeof options[0])


void cli_print_help(FILE *f) {
    fputs("usage: flux -d DIR -p PROMPT -o OUT.png [options]\n"
          "       flux --transformer T --text-encoder TE --vae V -p PROMPT -o OUT.png [options]   (no folder)\n"
          "       flux -d DIR [options]             interactive mode (prompts from stdin)\n"
          "       flux -d DIR --tokenize [--raw] [-p TEXT]\n"
          "       flux quantize -d DIR --type TYPE --component transformer|text-encoder -o OUT.gguf\n"
          "                                         (flux quantize --help)\n"
          "       flux --cpu-info | --list-devices | --version | --help\n"
          "\n"
          "Generate images with a FLUX.2-klein model folder (official Hugging Face layout).\n"
          "\n"
          "Model:\n"
          "  -d, --dir DIR          model folder (model_index.json, transformer/, text_encoder/, vae/, tokenizer/)\n"
          "      --transformer FILE single-file transformer checkpoint replacing the weights in transformer/:\n"
          "                         the official BFL file (flux-2-klein-4b.safetensors), a ComfyUI file\n"
          "                         (model.diffusion_model. prefix) or diffusers names; mapped, not copied;\n"
          "                         or a GGUF file (ComfyUI-GGUF / stable-diffusion.cpp: Q8_0, Q6_K, Q5_K,\n"
          "                         Q5_1, Q5_0, Q4_K, Q4_1, Q4_0, Q3_K, Q2_K, F16, BF16 tensors, used in place)\n"
          "                         Quantized safetensors (transformer and text encoder), used in place:\n"
          "                         fp8 with one scale, per-row, 128x128 / BxB block (weight_scale_inv) or\n"
          "                         MXFP8 scales; NVFP4; int8 with a per-tensor or per-channel scale.\n"
          "                         NF4, GPTQ/AWQ, SVDQuant files are refused at load, naming the format\n"
          "      --text-encoder FILE  single-file Qwen3 text encoder replacing text_encoder/: a llama.cpp GGUF\n"
          "                         (token_embd, blk.N.attn_q, ...; also IQ4_NL/IQ4_XS) or Hugging Face names.\n"
          "                         A folder of configs, tokenizer/ and vae/ plus the two GGUF files runs\n"
          "      --vae FILE         single-file VAE replacing vae/: diffusers names, or BFL/LDM names as in\n"
          "                         ComfyUI's vae/flux2-vae.safetensors and BFL's full_encoder_small_decoder\n"
          "                         (a narrower decoder); its widths come from its tensor shapes\n"
          "      --tokenizer FILE   tokenizer.json replacing tokenizer/\n"
          "                         Without -d, --transformer, --text-encoder and --vae are enough: configs\n"
          "                         from the tensor shapes, the tokenizer from --tokenizer, else the GGUF text\n"
          "                         encoder's own vocabulary, else the installed copy (make install)\n"
          "      --quant TYPE       quantize the F32/F16/BF16 weights on load, in memory (as flux quantize\n"
          "                         would write them): q8_0, q6_k, q5_k, q5_1, q5_0, q4_k, q4_1, q4_0,\n"
          "                         q3_k, q2_k; components already in GGUF block types stay as they are\n"
          "      --base             treat the model as the undistilled base model (CFG, 50 steps)\n"
          "      --distilled        treat the model as distilled (4 steps, no CFG); default: model_index.json,\n"
          "                         a transformer file's metadata, else its name (with a warning; -v says why)\n"
          "      --lora FILE[:SCALE] LoRA / LyCORIS adapter for the transformer, a .safetensors file as\n"
          "                         downloaded (diffusers/PEFT, BFL, kohya, ComfyUI, LoKr, LoHa, diff, DoRA),\n"
          "                         applied at run time with strength SCALE (default 1, -100..100); repeat\n"
          "                         to stack (up to 16)\n"
          "\n"
          "Image:\n"
          "  -p, --prompt TEXT      the prompt (UTF-8); without -p (and without --embeddings) flux starts\n"
          "                         an interactive prompt loop\n"
          "  -o, --output FILE      output image, .png (with the settings as metadata) or .ppm; written\n"
          "                         atomically, never half-written\n"
          "  -W, --width N          width in pixels, 64..2048, a multiple of 16 (default 256, or the\n"
          "                         size of the first -i image)\n"
          "  -H, --height N         height in pixels, same rules (with --noise, sizes down to 16 are\n"
          "                         accepted for tiny test models)\n"
          "  -s, --steps N          sampling steps, 1..1000 (default: 4 distilled, 50 base)\n"
          "  -S, --seed N           random seed, 0..18446744073709551614 (default: random; always printed\n"
          "                         and stored in the PNG)\n"
          "  -g, --guidance X       CFG scale, 0..100 (default: 1 distilled = no CFG, 4 base); CFG runs on the\n"
          "                         base model with X > 1; X > 1 on a distilled model is an error\n"
          "      --negative TEXT    negative prompt for CFG on the base model (default: empty); an error\n"
          "                         without CFG\n"
          "  -i, --input FILE       reference image (PNG or PPM) for img2img; repeat for multi-reference,\n"
          "                         up to 16. Each is pre-processed like the official pipeline: RGB, sides\n"
          "                         >= 16 px, aspect ratio <= 8:1, above 1024x1024 px of area resized (Lanczos)\n"
          "                         to that area, centre-cropped to multiples of 16; the output size defaults\n"
          "                         to the first reference's processed size\n"
          "      --init-img FILE    img2img / inpainting source image (PNG or PPM), as diffusers'\n"
          "                         Flux2KleinInpaintPipeline: it sets the output size (area above 1024x1024\n"
          "                         px resized to that area, then stretched to multiples of 16; -W/-H\n"
          "                         are refused), is VAE-encoded as the start x0 and is also the first\n"
          "                         reference image (-i images follow it)\n"
          "      --strength S       how much of the schedule runs over the init image, > 0..1 (default\n"
          "                         0.8): steps from int(steps - steps*S) on, starting from the init image\n"
          "                         noised to that step's sigma; 1 = from pure noise (with the init\n"
          "                         image still a reference)\n"
          "      --mask FILE        inpainting mask (PNG or PPM, any size: resized with Lanczos to the\n"
          "                         output size): white (gray >= 128) is repainted, black is kept; after\n"
          "                         every step the kept area is reset to the init image at that noise level\n"
          "      --mask-invert      repaint the black part of --mask instead (A1111 inpainting_mask_invert)\n"
          "      --mask-blur R      blur --mask first as AUTOMATIC1111's mask_blur does (Gaussian, sigma R\n"
          "                         pixels along x then y, 0..64; default 0 = none)\n"
          "  -n, --batch N          N images from one prompt with seeds S, S+1, ... and one text encoding,\n"
          "                         written as OUT.png, OUT-1.png, OUT-2.png, ... (1..64)\n"
          "\n"
          "Schedule (default: the official shifted schedule):\n"
          "      --linear           sigma_i = 1 - i/S\n"
          "      --power            sigma_i = 1 - (i/S)^alpha\n"
          "      --power-alpha A    alpha of --power, > 0 (default 2)\n"
          "\n"
          "Performance:\n"
          "  -t, --threads N        worker threads (0 = default: OMP_NUM_THREADS, else the CPUs other\n"
          "                         processes leave idle, re-measured between layers). N is kept even\n"
          "                         when other processes keep CPUs busy, and a thread sharing a busy\n"
          "                         core runs several times slower (-t 2 with one core busy: 2-3x slower\n"
          "                         than -t 1): leave -t unset on a shared machine\n"
          "      --precision P      default (bf16 dot products where the CPU has them; there GGUF / --quant\n"
          "                         weights run as int8), f32 (exact math) or int8 (W8A8 for every transformer\n"
          "                         and text-encoder weight, bf16 / fp8 / GGUF alike: int8 activations per\n"
          "                         token, int8 weights per output channel made at load, int32 dot products;\n"
          "                         less exact: README \"--precision int8\") or bf16 (the\n"
          "                         default with GGUF / --quant weights expanded, never int8: more exact,\n"
          "                         slower); env FLUX_PRECISION does the same\n"
          "      --isa NAME         force a kernel level: scalar, avx2, avx512, avx512bf16, amx, neon\n"
          "                         (default: the kernels that are fastest on this CPU; env\n"
          "                         FLUX_ISA does the same; a level this CPU lacks is an error)\n"
          "      --backend B        where the stages run: auto (default: a GPU through Vulkan when this\n"
          "                         build has Vulkan and a GPU is present, never a CPU driver such as\n"
          "                         lavapipe; else the CPU), cpu, or vulkan (any Vulkan device; an error\n"
          "                         without one or in a build without Vulkan)\n"
          "      --device N         the Vulkan device of that index in --list-devices\n"
          "      --device-memory MB device memory the weights may take (default 85% of the device's);\n"
          "                         weights beyond it stay on the host and are uploaded at each use\n"
          "      --no-mmap          read the weights into memory instead of mapping them\n"
          "      --cache-dir DIR    text-embedding cache: a prompt seen before skips the text encoder, with\n"
          "                         bit-identical results (default $XDG_CACHE_HOME/flux/embeddings or\n"
          "                         ~/.cache/flux/embeddings; size budget FLUX_CACHE_MAX_MB, default 1024)\n"
          "      --no-cache         do not read or write the on-disk embedding cache (memory only)\n"
          "\n"
          "Verification and debugging:\n"
          "      --noise FILE.npy   initial noise, float32 [128, H/16, W/16] (sets the size when -W/-H\n"
          "                         are not given)\n"
          "      --embeddings FILE.npy  prompt embeddings, float32 [512, text_dim], instead of the text encoder\n"
          "      --dump DIR         write every stage as NumPy .npy files into DIR\n"
          "      --tokenize         print the token ids of -p (or of each JSON string line on stdin)\n"
          "      --raw              with --tokenize: no chat template\n"
          "\n"
          "Output and information:\n"
          "      --show             also show the image in the terminal: Kitty graphics (kitty, Ghostty,\n"
          "                         Konsole) or iTerm2 inline images (iTerm2, WezTerm), detected from the\n"
          "                         environment; FLUX_SHOW=kitty|iterm2|none overrides\n"
          "  -q, --quiet            no progress or messages, only errors\n"
          "  -v, --verbose          progress also when stderr is not a terminal; -vv for debug output\n"
          "      --cpu-info         detected CPU features and the kernels that would be used\n"
          "      --list-devices     Vulkan devices: index, name, type, driver, memory\n"
          "      --version          version and build information\n"
          "  -h, --help             this text\n"
          "\n"
          "Interactive mode (no -p): each line is a prompt, optionally after a size and image handles\n"
          "(\"512x512 a cat\", \"$0 make it blue\", \"$0 $3 combine them\"); every image gets a handle $N and is\n"
          "written to a session folder in $TMPDIR; !help lists the commands (!seed, !size, !steps,\n"
          "!guidance, !schedule, !batch, !lora, !loras, !save, !show, !images, !quit). -i images become $0,\n"
          "$1, ...\n"
          "\n"
          "Long options also take their value as --name=VALUE; short ones as -W256.\n"
          "Exit status: 0 success, 1 runtime failure, 2 bad command line, 130 interrupted.\n",
          f);
}

/* ---------------------------------------------------------- messages */

typedef struct parse_ctx {
    char *msg;
    size_t msg_size;
} parse_ctx;

static int usage_error(parse_ctx *pc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int usage_error(parse_ctx *pc, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(pc->msg, pc->msg_size, fmt, ap);
    va_end(ap);
    return CLI_EXIT_USAGE;
}

/* Levenshtein distance of two short strings (for "did you mean"). */
static int edit_distance(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    if (la > 40 || lb > 40) return 99;
    int row[41];
    for (size_t j = 0; j <= lb; j++) row[j] = (int)j;
    for (size_t i = 1; i <= la; i++) {
        int diag = row[0];
        row[0] = (int)i;
        for (size_t j = 1; j <= lb; j++) {
            int up = row[j];
            int best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best) best = up + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

static int unknown_option(parse_ctx *pc, const char *arg) {
    const char *best = NULL;
    if (arg[0] == '-' && arg[1] == '-') {
        int best_d = 3;
        char name[64];
        snprintf(name, sizeof name, "%.*s", (int)strcspn(arg + 2, "="), arg + 2);
        for (size_t i = 0; i < N_OPTIONS; i++) {
            int d = edit_distance(name, options[i].long_name);
            if (d < best_d) best_d = d, best = options[i].long_name;
        }
    }
    if (best) return usage_error(pc, "unknown option '%s' (did you mean --%s?)", arg, best);
    return usage_error(pc, "unknown option '%s' (see flux --help)", arg);
}

/* ---------------------------------------------------------- values */

/* Whole decimal integer in [lo, hi]; out-of-range messages name `range`
 * (NULL: "lo..hi"), so a caller checking more later can show the real one. */
static int parse_int_in(parse_ctx *pc, const char *opt, const char *s, long long lo, long long hi, const char *range,
                        long long *out) {
    char shown[64];
    if (!range) {
        snprintf(shown, sizeof shown, "%lld..%lld", lo, hi);
        range = shown;
    }
    const char *p = s;
    int neg = 0;
    if (*p == '-') neg = 1, p++;
    if (!*p || strspn(p, "0123456789") != strlen(p)) {
        char *end;
        errno = 0;
        double d = strtod(s, &end);
        if (*s && !*end && strpbrk(s, ".eE") && strspn(s, "+-0123456789.eE") == strlen(s) && isfinite(d))
            return usage_error(pc, "%s: '%s' is not a whole number", opt, s);
        return usage_error(pc, "%s: '%s' is not a number", opt, s);
    }
    unsigned long long v = 0;
    for (; *p; p++) {
        if (v > (1ull << 62)) return usage_error(pc, "%s: %s is out of range (%s)", opt, s, range);
        v = v * 10 + (unsigned)(*p - '0');
    }
    if (v > (1ull << 62)) return usage_error(pc, "%s: %s is out of range (%s)", opt, s, range);
    long long x = neg ? -(long long)v : (long long)v;
    if (x < lo || x > hi) return usage_error(pc, "%s: %s is out of range (%s)", opt, s, range);
    *out = x;
    return CLI_EXIT_OK;
}

static int parse_int(parse_ctx *pc, const char *opt, const char *s, long long lo, long long hi, long long *out) {
    return parse_int_in(pc, opt, s, lo, hi, NULL, out);
}

/* The seed: 0 .. UINT64_MAX-1 (UINT64_MAX is the library's "random"). */
static int parse_seed(parse_ctx *pc, const char *opt, const char *s, uint64_t *out) {
    if (*s == '-' && s[1] && strspn(s + 1, "0123456789") == strlen(s + 1))
        return usage_error(pc, "%s: %s is out of range (0..%llu)", opt, s, (unsigned long long)(UINT64_MAX - 1));
    if (!*s || strspn(s, "0123456789") != strlen(s)) return usage_error(pc, "%s: '%s' is not a number", opt, s);
    uint64_t v = 0;
    for (const char *p = s; *p; p++) {
        unsigned d = (unsigned)(*p - '0');
        if (v > (UINT64_MAX - d) / 10 || v * 10 + d == UINT64_MAX)
            return usage_error(pc, "%s: %s is out of range (0..%llu)", opt, s,
                               (unsigned long long)(UINT64_MAX - 1));
        v = v * 10 + d;
    }
    *out = v;
    return CLI_EXIT_OK;
}

/* A finite decimal number (no hex, nan, inf) in [lo, hi] (or (lo, hi] when
 * lo_open). */
static int parse_float(parse_ctx *pc, const char *opt, const char *s, double lo, int lo_open, double hi,
                       float *out) {
    char *end;
    errno = 0;
    double d = strtod(s, &end);
    if (!*s || *end || strspn(s, "+-0123456789.eE") != strlen(s) || s[0] == '+')
        return usage_error(pc, "%s: '%s' is not a number", opt, s);
    if (!isfinite(d) || errno == ERANGE || d > hi || d < lo || (lo_open && d == lo))
        return usage_error(pc, "%s: %s is out of range (%s%g..%g)", opt, s, lo_open ? "> " : "", lo, hi);
    *out = (float)d;
    return CLI_EXIT_OK;
}

/* --strength: a finite decimal number in (0, 1], kept as a double (the
 * steps it leaves are computed in double, as Python's float in diffusers). */
static int parse_strength(parse_ctx *pc, const char *opt, const char *s, double *out) {
    char *end;
    errno = 0;
    double d = strtod(s, &end);
    if (!*s || *end || strspn(s, "+-0123456789.eE") != strlen(s) || s[0] == '+')
        return usage_error(pc, "%s: '%s' is not a number", opt, s);
    if (!isfinite(d) || d > 1.0 || d < 0.0 || (errno == ERANGE && d != 0.0))
        return usage_error(pc, "%s: %s is out of range (> 0..1)", opt, s);
    if (d == 0.0)
        return usage_error(pc, "%s: %s leaves no denoising step (the image would come back unchanged); give a value "
                               "in > 0..1",
                           opt, s);
    *out = d;
    return CLI_EXIT_OK;
}

/* A size: a multiple of 16 in CLI_NOISE_MIN_SIZE..CLI_MAX_SIZE here;
 * validate() then requires CLI_MIN_SIZE unless --noise pins the size. We
 * refuse other values instead of flooring them (as diffusers does with a
 * warning): the image would silently not be the size asked for. */
static int parse_size(parse_ctx *pc, const char *opt, const char *s, int *out, char *spelled_out) {
    long long v;
    char range[32];
    snprintf(range, sizeof range, "%d..%d", CLI_MIN_SIZE, CLI_MAX_SIZE);
    int rc = parse_int_in(pc, opt, s, CLI_NOISE_MIN_SIZE, CLI_MAX_SIZE, range, &v);
    if (rc) return rc;
    snprintf(spelled_out, 16, "%s", opt);
    if (v % 16) {
        long long lo = v / 16 * 16, hi = lo + 16;
        long long nearest = v - lo < hi - v ? lo : hi;
        if (nearest < CLI_MIN_SIZE) nearest = CLI_MIN_SIZE;
        if (nearest > CLI_MAX_SIZE) nearest = CLI_MAX_SIZE;
        return usage_error(pc, "%s: %lld is not a multiple of 16 (nearest valid size: %lld)", opt, v, nearest);
    }
    *out = (int)v;
    return CLI_EXIT_OK;
}

/* FILE or FILE:SCALE (the last ':' starts a scale when what follows is a
 * number; a path containing ':' still works without one). */
static int parse_lora(parse_ctx *pc, cli_args *a, const char *opt, const char *val) {
    if (a->n_loras == CLI_MAX_LORAS) return usage_error(pc, "%s: too many adapters (at most %d)", opt, CLI_MAX_LORAS);
    const char *colon = strrchr(val, ':');
    float scale = 1.0f;
    size_t len = strlen(val);
    if (colon) {
        const char *num = colon + 1;
        char *end;
        double d = strtod(num, &end);
        struct stat st;
        if (*num && !*end && strspn(num, "+-0123456789.eE") == strlen(num)) {
            if (!isfinite(d) || fabs(d) > CLI_MAX_LORA_SCALE)
                return usage_error(pc, "%s: scale %s is out of range (%g..%g)", opt, num, -CLI_MAX_LORA_SCALE,
                                   CLI_MAX_LORA_SCALE);
            scale = (float)d;
            len = (size_t)(colon - val);
        } else if (stat(val, &st) != 0) {
            return usage_error(pc, "%s: '%s' is not a scale (FILE:SCALE takes a number, e.g. style.safetensors:0.8)",
                               opt, num);
        }
    }
    if (!len) return usage_error(pc, "%s: no file before the scale", opt);
    if (len >= sizeof a->lora_file[0]) return usage_error(pc, "%s: file name too long", opt);
    memcpy(a->lora_file[a->n_loras], val, len);
    a->lora_file[a->n_loras][len] = '\0';
    a->lora_scale[a->n_loras++] = scale;
    return CLI_EXIT_OK;
}

/* ---------------------------------------------------------- one option */

static int apply(parse_ctx *pc, cli_args *a, const opt_def *o, const char *spelled, const char *val) {
    long long n;
    int rc = CLI_EXIT_OK;
    switch (o->id) {
    case O_DIR: a->model_dir = val; break;
    case O_PROMPT: a->prompt = val; break;
    case O_OUTPUT: a->output = val; break;
    case O_WIDTH: rc = parse_size(pc, spelled, val, &a->width, a->width_opt); break;
    case O_HEIGHT: rc = parse_size(pc, spelled, val, &a->height, a->height_opt); break;
    case O_STEPS:
        if (!(rc = parse_int(pc, spelled, val, 1, CLI_MAX_STEPS, &n))) a->steps = (int)n;
        break;
    case O_SEED:
        if (!(rc = parse_seed(pc, spelled, val, &a->seed))) a->seed_given = 1;
        break;
    case O_GUIDANCE: rc = parse_float(pc, spelled, val, 0.0, 0, FLUX_GUIDANCE_MAX, &a->guidance); break;
    case O_INPUT:
        if (a->n_refs == FLUX_MAX_REFS)
            return usage_error(pc, "%s: too many reference images (at most %d)", spelled, FLUX_MAX_REFS);
        a->refs[a->n_refs++] = val;
        break;
    case O_THREADS:
        if (!(rc = parse_int(pc, spelled, val, 0, CLI_MAX_THREADS, &n))) a->threads = (int)n;
        break;
    case O_QUIET: a->quiet = 1; break;
    case O_VERBOSE: a->verbose++; break;
    case O_HELP: a->help = 1; break;
    case O_VERSION: a->version = 1; break;
    case O_CPU_INFO: a->cpu_info = 1; break;
    case O_LIST_DEVICES: a->list_devices = 1; break;
    case O_BACKEND:
        if (!strcmp(val, "auto")) a->backend = FLUX_BACKEND_AUTO;
        else if (!strcmp(val, "cpu")) a->backend = FLUX_BACKEND_CPU;
        else if (!strcmp(val, "vulkan")) a->backend = FLUX_BACKEND_VULKAN;
        else return usage_error(pc, "%s: '%s' is not a backend (auto, cpu or vulkan)", spelled, val);
        break;
    case O_DEVICE:
        if (!(rc = parse_int(pc, spelled, val, 0, CLI_MAX_DEVICE, &n))) a->device = (int)n;
        break;
    case O_DEVICE_MEMORY:
        if (!(rc = parse_int(pc, spelled, val, 1, CLI_MAX_DEVICE_MB, &n))) a->device_memory_mb = n;
        break;
    case O_NEGATIVE: a->negative = val; break;
    case O_LINEAR:
        if (a->schedule == FLUX_SCHEDULE_POWER) return usage_error(pc, "--linear and --power exclude each other");
        a->schedule = FLUX_SCHEDULE_LINEAR;
        break;
    case O_POWER:
        if (a->schedule == FLUX_SCHEDULE_LINEAR) return usage_error(pc, "--linear and --power exclude each other");
        a->schedule = FLUX_SCHEDULE_POWER;
        break;
    case O_POWER_ALPHA:
        if (!(rc = parse_float(pc, spelled, val, 0.0, 1, 100.0, &a->power_alpha))) a->power_alpha_given = 1;
        break;
    case O_BASE:
        if (a->distilled == 1) return usage_error(pc, "--base and --distilled exclude each other");
        a->distilled = 0;
        break;
    case O_DISTILLED:
        if (a->distilled == 0) return usage_error(pc, "--base and --distilled exclude each other");
        a->distilled = 1;
        break;
    case O_PRECISION:
        if (!strcmp(val, "f32")) a->precision = FLUX_PRECISION_F32;
        else if (!strcmp(val, "default")) a->precision = FLUX_PRECISION_DEFAULT;
        else if (!strcmp(val, "int8")) a->precision = FLUX_PRECISION_INT8;
        else if (!strcmp(val, "bf16")) a->precision = FLUX_PRECISION_BF16;
        else return usage_error(pc, "%s: '%s' is not a precision (default, f32, int8 or bf16)", spelled, val);
        break;
    case O_ISA: {
        char why[512];
        int isa = fx_isa_parse(val);
        if (isa < 0)
            return usage_error(pc, "%s: '%s' is not an ISA (scalar, avx2, avx512, avx512bf16, amx, neon)", spelled,
                               val);
        if (!fx_isa_check((fx_isa)isa, why, sizeof why)) return usage_error(pc, "%s %s: %s", spelled, val, why);
        a->isa = val;
        break;
    }
    case O_NO_MMAP: a->no_mmap = 1; break;
    case O_NOISE: a->noise_file = val; break;
    case O_EMBEDDINGS: a->embeddings_file = val; break;
    case O_DUMP: a->dump_dir = val; break;
    case O_TOKENIZE: a->tokenize = 1; break;
    case O_RAW: a->raw = 1; break;
    case O_BATCH:
        if (!(rc = parse_int(pc, spelled, val, 1, CLI_MAX_BATCH, &n))) a->batch = (int)n;
        break;
    case O_CACHE_DIR: a->cache_dir = val; break;
    case O_NO_CACHE: a->no_cache = 1; break;
    case O_TRANSFORMER: a->transformer_file = val; break;
    case O_SHOW: a->show = 1; break;
    case O_TEXT_ENCODER: a->text_encoder_file = val; break;
    case O_VAE: a->vae_file = val; break;
    case O_TOKENIZER: a->tokenizer_file = val; break;
    case O_QUANT: {
        static const char *const types[] = {"q8_0", "q6_k", "q5_k", "q5_1", "q5_0", "q4_k", "q4_1", "q4_0", "q3_k", "q2_k"};
        int known = 0;
        for (size_t i = 0; i < sizeof types / sizeof *types; i++) known |= !strcasecmp(val, types[i]);
        if (!known)
            return usage_error(pc, "%s: '%s' is not a quantization type (q8_0, q6_k, q5_k, q5_1, q5_0, q4_k, q4_1, "
                                   "q4_0, q3_k, q2_k)",
                               spelled, val);
        a->quant = val;
        break;
    }
    case O_LORA: rc = parse_lora(pc, a, spelled, val); break;
    case O_INIT_IMG: a->init_img = val; break;
    case O_STRENGTH: rc = parse_strength(pc, spelled, val, &a->strength); a->strength_given = 1; break;
    case O_MASK: a->mask_file = val; break;
    case O_MASK_INVERT: a->mask_invert = 1; break;
    case O_MASK_BLUR: rc = parse_float(pc, spelled, val, 0.0, 0, 64.0, &a->mask_blur); break;
    }
    return rc;
}

static const opt_def *find_short(char c) {
    for (size_t i = 0; i < N_OPTIONS; i++)
        if (options[i].short_name == c) return &options[i];
    return NULL;
}

static const opt_def *find_long(const char *name, size_t len) {
    for (size_t i = 0; i < N_OPTIONS; i++)
        if (strlen(options[i].long_name) == len && !strncmp(options[i].long_name, name, len)) return &options[i];
    return NULL;
}

/* 1 when `arg` spells one of our options (used to catch "-W -H 256"). */
static int looks_like_option(const char *arg) {
    if (arg[0] != '-' || !arg[1]) return 0;
    if (arg[1] == '-') return find_long(arg + 2, strcspn(arg + 2, "=")) != NULL;
    return find_short(arg[1]) != NULL && (arg[1] < '0' || arg[1] > '9');
}

/* ---------------------------------------------------------- validation */

static int check_dir(parse_ctx *pc, const char *opt, const char *path) {
    struct stat st;
    if (stat(path, &st) != 0) return usage_error(pc, "%s: '%s': %s", opt, path, strerror(errno));
    if (!S_ISDIR(st.st_mode)) return usage_error(pc, "%s: '%s' is not a directory", opt, path);
    if (access(path, R_OK | X_OK) != 0) return usage_error(pc, "%s: cannot read '%s': %s", opt, path, strerror(errno));
    return CLI_EXIT_OK;
}

static int check_readable_file(parse_ctx *pc, const char *opt, const char *path) {
    struct stat st;
    if (stat(path, &st) != 0) return usage_error(pc, "%s: cannot read '%s': %s", opt, path, strerror(errno));
    if (S_ISDIR(st.st_mode)) return usage_error(pc, "%s: '%s' is a directory, not a file", opt, path);
    /* the readers behind every file option want a size up front (images,
     * .npy, safetensors): pipes and devices are refused here, once */
    if (!S_ISREG(st.st_mode)) return usage_error(pc, "%s: '%s' is not a regular file", opt, path);
    if (access(path, R_OK) != 0) return usage_error(pc, "%s: cannot read '%s': %s", opt, path, strerror(errno));
    return CLI_EXIT_OK;
}

/* The directory part of path ("." when none) into buf. */
static void parent_dir(const char *path, char *buf, size_t size) {
    const char *slash = strrchr(path, '/');
    if (!slash) snprintf(buf, size, ".");
    else if (slash == path) snprintf(buf, size, "/");
    else snprintf(buf, size, "%.*s", (int)(slash - path), path);
}

/* Characters a batch adds to an output name ("-63" before the extension). */
#define BATCH_SUFFIX_MAX 3

static int check_output(parse_ctx *pc, const char *opt, const char *path, int batch) {
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    const char *dot = strrchr(base, '.');
    if (!*base) return usage_error(pc, "%s: '%s' names a directory, not an image file", opt, path);
    if (!dot || (strcasecmp(dot, ".png") && strcasecmp(dot, ".ppm")))
        return usage_error(pc, "%s: '%s': unsupported image type (use .png or .ppm)", opt, path);
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        return usage_error(pc, "%s: '%s' is a directory", opt, path);
    char dir[4096];
    parent_dir(path, dir, sizeof dir);
    if (stat(dir, &st) != 0) return usage_error(pc, "%s: directory '%s' does not exist", opt, dir);
    if (!S_ISDIR(st.st_mode)) return usage_error(pc, "%s: '%s' is not a directory", opt, dir);
    if (access(dir, W_OK | X_OK) != 0) return usage_error(pc, "%s: directory '%s' is not writable", opt, dir);
    /* a name the file system cannot hold fails here, not after the image is made */
    char why[256];
    if (cli_name_too_long(dir, path, batch > 1 ? BATCH_SUFFIX_MAX : 0, why, sizeof why))
        return usage_error(pc, "%s: %s%s", opt, why, batch > 1 && strstr(why, "file name") ? " (with the batch suffix)" : "");
    return CLI_EXIT_OK;
}

int cli_name_too_long(const char *dir, const char *path, size_t extra, char *why, size_t size) {
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    const long name_max = pathconf(dir, _PC_NAME_MAX);
    if (name_max > 0 && strlen(base) + extra > (size_t)name_max) {
        snprintf(why, size, "file name of %zu characters is longer than this file system allows (%ld)",
                 strlen(base) + extra, name_max);
        return 1;
    }
    if (strlen(path) + extra >= PATH_MAX) {
        snprintf(why, size, "path too long");
        return 1;
    }
    return 0;
}

/* Combinations the library would refuse only after the model has loaded,
 * caught here from the options alone (exit 2 in a second, not exit 1 after
 * loading gigabytes). What needs the model (the variant of model_index.json
 * without --base/--distilled) stays the library's check. */
static int check_combinations(parse_ctx *pc, const cli_args *a) {
    const int guidance_given = a->guidance >= 0, cfg_off = a->distilled == 1;
    if (cfg_off && guidance_given && a->guidance > 1.0f)
        return usage_error(pc, "-g: %g asks for classifier-free guidance, which --distilled turns off (use -g 1)",
                           (double)a->guidance);
    if (a->negative && cfg_off)
        return usage_error(pc, "--negative: needs classifier-free guidance, which --distilled turns off");
    if (a->negative && guidance_given && a->guidance <= 1.0f)
        return usage_error(pc, "--negative: only used with classifier-free guidance (-g above 1); -g is %g",
                           (double)a->guidance);
    if (a->noise_file && a->batch > 1)
        return usage_error(pc, "--noise: gives the noise of one image; -n %d draws each image's noise from its seed",
                           a->batch);
    if (a->prompt && a->embeddings_file)
        return usage_error(pc, "-p and --embeddings exclude each other (the embeddings replace the prompt's "
                               "text encoding)");
    if (a->seed_given && a->batch > 1 && a->seed > UINT64_MAX - 1 - (uint64_t)(a->batch - 1))
        return usage_error(pc, "-S %llu with -n %d: the last seed would pass %llu (the largest seed)",
                           (unsigned long long)a->seed, a->batch, (unsigned long long)(UINT64_MAX - 1));
    return CLI_EXIT_OK;
}

static int validate(parse_ctx *pc, cli_args *a) {
    int rc;
    if (a->quiet && a->verbose) return usage_error(pc, "-q and -v exclude each other");
    if (a->no_cache && a->cache_dir) return usage_error(pc, "--cache-dir and --no-cache exclude each other");
    if (a->power_alpha_given && a->schedule != FLUX_SCHEDULE_POWER)
        return usage_error(pc, "--power-alpha: only used with --power");
    if (a->raw && !a->tokenize) return usage_error(pc, "--raw: only used with --tokenize");
    if ((rc = check_combinations(pc, a))) return rc;
    if (!a->noise_file) { /* sizes below 64 only when --noise pins them (tiny test cases) */
        if (a->width && a->width < CLI_MIN_SIZE)
            return usage_error(pc, "%s: %d is out of range (%d..%d)", a->width_opt, a->width, CLI_MIN_SIZE,
                               CLI_MAX_SIZE);
        if (a->height && a->height < CLI_MIN_SIZE)
            return usage_error(pc, "%s: %d is out of range (%d..%d)", a->height_opt, a->height, CLI_MIN_SIZE,
                               CLI_MAX_SIZE);
    }
    if (!a->init_img) {
        if (a->strength_given) return usage_error(pc, "--strength: only used with --init-img");
        if (a->mask_file) return usage_error(pc, "--mask: only used with --init-img");
    } else {
        if (a->width) return usage_error(pc, "%s: not used with --init-img (the init image sets the size)", a->width_opt);
        if (a->height)
            return usage_error(pc, "%s: not used with --init-img (the init image sets the size)", a->height_opt);
    }
    if (a->mask_invert && !a->mask_file) return usage_error(pc, "--mask-invert: only used with --mask");
    if (a->mask_blur > 0 && !a->mask_file) return usage_error(pc, "--mask-blur: only used with --mask");
    if (a->device >= 0 && a->backend == FLUX_BACKEND_CPU)
        return usage_error(pc, "--device: only used with --backend auto or vulkan");
    if (a->device_memory_mb && a->backend == FLUX_BACKEND_CPU)
        return usage_error(pc, "--device-memory: only used with --backend auto or vulkan");
    if (a->help || a->version || a->cpu_info || a->list_devices) return CLI_EXIT_OK; /* need nothing else */

    if (!a->model_dir && !(a->transformer_file && a->text_encoder_file && a->vae_file))
        return usage_error(pc, "missing -d DIR (the model folder), or --transformer, --text-encoder and --vae "
                               "together; see flux --help");
    if (a->model_dir && (rc = check_dir(pc, "-d", a->model_dir))) return rc;
    if (a->vae_file && (rc = check_readable_file(pc, "--vae", a->vae_file))) return rc;
    if (a->tokenizer_file && (rc = check_readable_file(pc, "--tokenizer", a->tokenizer_file))) return rc;
    if (a->tokenize) {
        if (a->output) return usage_error(pc, "--tokenize prints token ids: -o is not used with it");
        return CLI_EXIT_OK;
    }
    if (a->transformer_file && (rc = check_readable_file(pc, "--transformer", a->transformer_file))) return rc;
    if (a->text_encoder_file && (rc = check_readable_file(pc, "--text-encoder", a->text_encoder_file))) return rc;
    for (int i = 0; i < a->n_loras; i++)
        if ((rc = check_readable_file(pc, "--lora", a->lora_file[i]))) return rc;
    for (int i = 0; i < a->n_refs; i++)
        if ((rc = check_readable_file(pc, "-i", a->refs[i]))) return rc;
    if (a->noise_file && (rc = check_readable_file(pc, "--noise", a->noise_file))) return rc;
    if (a->init_img && (rc = check_readable_file(pc, "--init-img", a->init_img))) return rc;
    if (a->mask_file && (rc = check_readable_file(pc, "--mask", a->mask_file))) return rc;
    if (a->embeddings_file && (rc = check_readable_file(pc, "--embeddings", a->embeddings_file))) return rc;
    if (a->dump_dir) {
        struct stat st;
        if (stat(a->dump_dir, &st) == 0) {
            if (!S_ISDIR(st.st_mode)) return usage_error(pc, "--dump: '%s' is not a directory", a->dump_dir);
        } else {
            char dir[4096];
            parent_dir(a->dump_dir, dir, sizeof dir);
            if ((rc = check_dir(pc, "--dump", dir))) return rc;
        }
    }
    if (!a->prompt && !a->embeddings_file) {
        if (a->output) return usage_error(pc, "missing -p PROMPT (or --embeddings FILE.npy) for -o");
        if (a->noise_file) return usage_error(pc, "--noise: not used in interactive mode (give a prompt with -p)");
        if (a->dump_dir) return usage_error(pc, "--dump: not used in interactive mode (give a prompt with -p)");
        if (a->init_img) return usage_error(pc, "--init-img: not used in interactive mode (give a prompt with -p)");
        return CLI_EXIT_OK; /* interactive mode (cli_repl.h) */
    }
    if (!a->output) return usage_error(pc, "missing -o OUTPUT (.png or .ppm)");
    return check_output(pc, "-o", a->output, a->batch);
}

/* ---------------------------------------------------------- argv */

int cli_parse_options(int argc, char **argv, cli_args *a, char *msg, size_t msg_size) {
    parse_ctx pc = {msg, msg_size};
    memset(a, 0, sizeof *a);
    a->distilled = -1;
    a->guidance = -1.0f;
    a->schedule = FLUX_SCHEDULE_SHIFTED;
    a->power_alpha = 2.0f;
    a->batch = 1;
    a->precision = -1;
    a->device = -1;
    a->strength = 0.8; /* diffusers' default (flux_params_init) */
    if (msg_size) msg[0] = '\0';

    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (!strcmp(arg, "--")) {
            if (i + 1 < argc) return usage_error(&pc, "unexpected argument '%s' (give the prompt with -p)", argv[i + 1]);
            break;
        }
        if (arg[0] != '-' || !arg[1])
            return usage_error(&pc, "unexpected argument '%s' (give the prompt with -p)", arg);

        const opt_def *o;
        char spelled[64];
        const char *val = NULL;
        if (arg[1] == '-') { /* --name or --name=value */
            size_t len = strcspn(arg + 2, "=");
            o = find_long(arg + 2, len);
            if (!o) return unknown_option(&pc, arg);
            snprintf(spelled, sizeof spelled, "--%s", o->long_name);
            if (arg[2 + len] == '=') {
                if (!o->has_value) return usage_error(&pc, "%s takes no value", spelled);
                val = arg + 3 + len;
            }
        } else { /* -x, -xVALUE, or bundled flags -qv */
            o = find_short(arg[1]);
            if (!o) return unknown_option(&pc, arg);
            snprintf(spelled, sizeof spelled, "-%c", arg[1]);
            if (arg[2]) {
                if (o->has_value) {
                    val = arg + 2;
                } else {
                    for (const char *c = arg + 1; *c; c++) {
                        const opt_def *f = find_short(*c);
                        if (!f || f->has_value) return unknown_option(&pc, arg);
                    }
                    for (const char *c = arg + 1; *c; c++) {
                        char sp[4] = {'-', *c, 0, 0};
                        apply(&pc, a, find_short(*c), sp, NULL);
                    }
                    continue;
                }
            }
        }
        if (o->has_value && !val) {
            if (i + 1 >= argc) return usage_error(&pc, "%s: missing value", spelled);
            if (looks_like_option(argv[i + 1]))
                return usage_error(&pc, "%s: missing value (found option '%s')", spelled, argv[i + 1]);
            val = argv[++i];
        }
        int rc = apply(&pc, a, o, spelled, val);
        if (rc) return rc;
    }
    return CLI_EXIT_OK;
}

int cli_validate(cli_args *a, char *msg, size_t msg_size) {
    parse_ctx pc = {msg, msg_size};
    if (msg_size) msg[0] = '\0';
    return validate(&pc, a);
}

int cli_parse(int argc, char **argv, cli_args *a, char *msg, size_t msg_size) {
    const int rc = cli_parse_options(argc, argv, a, msg, msg_size);
    return rc ? rc : cli_validate(a, msg, msg_size);
}

int cli_check_default_size(int width, int height, int ref_w, int ref_h, char *msg, size_t size,
                           const char **missing) {
    const int w = width ? width : ref_w, h = height ? height : ref_h;
    const int bad_w = !width && (w < CLI_MIN_SIZE || w > CLI_MAX_SIZE);
    const int bad_h = !height && (h < CLI_MIN_SIZE || h > CLI_MAX_SIZE);
    if (!bad_w && !bad_h) return 0;
    if (bad_w && bad_h) {
        snprintf(msg, size, "the output size would be %dx%d, outside %d..%d", w, h, CLI_MIN_SIZE, CLI_MAX_SIZE);
        *missing = "both"; /* both sides were left to the reference */
    } else {
        snprintf(msg, size, "the output %s would be %d, outside %d..%d", bad_w ? "width" : "height", bad_w ? w : h,
                 CLI_MIN_SIZE, CLI_MAX_SIZE);
        *missing = bad_w ? "width" : "height";
    }
    return -1;
}

int cli_batch_name(const char *out, int index, char *buf, size_t size) {
    if (index == 0) return (size_t)snprintf(buf, size, "%s", out) < size;
    const char *base = strrchr(out, '/');
    base = base ? base + 1 : out;
    const char *dot = strrchr(base, '.');
    size_t stem = dot ? (size_t)(dot - out) : strlen(out);
    int n = snprintf(buf, size, "%.*s-%d%s", (int)stem, out, index, dot ? dot : "");
    return n > 0 && (size_t)n < size;
}

uint64_t cli_random_seed(void) {
    uint32_t v = 0;
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        ssize_t r = read(fd, &v, sizeof v);
        close(fd);
        if (r == (ssize_t)sizeof v) return v;
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint32_t)((uint64_t)ts.tv_nsec ^ (uint64_t)ts.tv_sec * 2654435761u ^ (uint64_t)getpid() << 16);
}

void cli_vmessage(const char *fmt, va_list ap) {
    fputs("flux: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
}

void cli_message(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    cli_vmessage(fmt, ap);
    va_end(ap);
}

/* e if write(2) can fail with it, else 0 (a stale errno of something else). */
static int write_errno(int e) {
    switch (e) {
    case ENOSPC: case EIO: case EPIPE: case EFBIG: case EDQUOT: case EBADF: case EINVAL: case EAGAIN: case EPERM:
        return e;
    default:
        return 0;
    }
}

int cli_check_stdout(int rc) {
    /* A write that failed before (the buffer filled inside fputs / printf)
     * left its reason in errno and only the error flag on the stream: keep
     * it, unless this flush fails with a reason of its own. */
    int earlier = write_errno(errno);
    errno = 0;
    if (fflush(stdout) == 0 && !ferror(stdout)) return rc;
    if (rc != CLI_EXIT_OK) return rc; /* the failure is reported already */
    int why = errno ? errno : earlier;
    cli_message("cannot write to standard output: %s", why ? strerror(why) : "write error");
    return CLI_EXIT_FAIL;
}
