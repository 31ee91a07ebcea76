/*
 * cli_quantize.c — `flux quantize` (cli_quantize.h): its strict command
 * line, a progress line, Ctrl-C cancellation.
 */
#include "cli_quantize.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "src/app/app_args.h"
#include "flux.h"
#include "cli_internal.h"

static volatile sig_atomic_t g_interrupted;

/* Ctrl-C: the first cancels at the next progress report (the partial file
 * is removed as the library unwinds: within a chunk of rows); later ones
 * meanwhile are only acknowledged, since dying then would leave the
 * temporary file behind (Ctrl-\ still quits at once). Async-signal-safe
 * calls only. */
static void on_sigint(int sig) {
    (void)sig;
    if (g_interrupted == 1) {
        static const char msg[] = "\nflux: stopping: the partial file is being removed\n";
        ssize_t w = write(STDERR_FILENO, msg, sizeof msg - 1);
        (void)w;
    }
    if (g_interrupted < 2) g_interrupted++;
}

static const char *const types[] = {"q8_0", "q6_k",     "q5_k",    "q5_1",    "q5_0", "q4_k",
                                    "q4_1", "q4_0",     "q3_k",    "q2_k",    "fp8",  "fp8_e4m3",
                                    "fp8_e5m2"};
#define TYPE_LIST "q8_0, q6_k, q5_k, q5_1, q5_0, q4_k, q4_1, q4_0, q3_k, q2_k, fp8, fp8_e4m3, fp8_e5m2"

static void help(FILE *f) {
    fputs("usage: flux quantize -d DIR --type TYPE --component transformer|text-encoder -o OUT.gguf [options]\n"
          "       flux quantize -d DIR --type fp8 --component transformer|text-encoder -o OUT.safetensors [options]\n"
          "\n"
          "Write one component of a FLUX.2-klein model folder as a GGUF file that ComfyUI-GGUF,\n"
          "stable-diffusion.cpp and flux (--transformer / --text-encoder) read: the transformer with BFL\n"
          "names (general.architecture flux), the text encoder with llama.cpp Qwen3 names (all layers).\n"
          "Norms and other 1-D tensors are F32, the transformer's img_in, txt_in, time_in and final_layer\n"
          "BF16, every other weight TYPE, quantized with ggml's reference algorithms (the same blocks as\n"
          "llama-quantize without an importance matrix). The file is written atomically.\n"
          "\n"
          "--type fp8 (= fp8_e4m3) and fp8_e5m2 write a safetensors file in ComfyUI's mixed-quant fp8\n"
          "convention instead (flux loads it with --transformer / --text-encoder): the same tensor names\n"
          "(the text encoder with Hugging Face names), the same F32 and BF16 tensors (the text encoder's\n"
          "embedding table too), every other weight F8_E4M3 (F8_E5M2) with one F32 '<layer>.weight_scale'\n"
          "= max|W| / 448 (57344), stored as fp8(W / scale) rounded to nearest even and saturated, and\n"
          "ComfyUI's _quantization_metadata.\n"
          "\n"
          "  -d, --dir DIR          model folder\n"
          "      --type TYPE        q8_0, q6_k, q5_k, q5_1, q5_0, q4_k, q4_1, q4_0, q3_k, q2_k (GGUF);\n"
          "                         fp8 (= fp8_e4m3), fp8_e5m2 (safetensors)\n"
          "      --component C      transformer or text-encoder\n"
          "  -o, --output FILE      the .gguf (fp8: .safetensors) file to write\n"
          "      --transformer FILE quantize this single-file transformer instead of transformer/\n"
          "      --text-encoder FILE  quantize this single-file text encoder instead of text_encoder/\n"
          "  -t, --threads N        worker threads (default: all cores)\n"
          "      --no-mmap          read the source weights into memory instead of mapping them\n"
          "  -q, --quiet            no progress line\n"
          "  -v, --verbose          progress lines also when stderr is not a terminal\n"
          "  -h, --help             this text\n"
          "\n"
          "Exit status: 0 success, 1 failure (nothing written), 2 bad command line, 130 interrupted.\n",
          f);
}

typedef struct qargs {
    const char *dir, *type, *component, *output, *transformer, *text_encoder;
    int threads, no_mmap, quiet, verbose, help;
} qargs;

static int usage(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("flux quantize: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return CLI_EXIT_USAGE;
}

static int file_ok(const char *opt, const char *path) {
    struct stat st;
    if (stat(path, &st) != 0) return usage("%s: cannot read '%s'", opt, path);
    if (!S_ISREG(st.st_mode) || access(path, R_OK) != 0) return usage("%s: '%s' is not a readable file", opt, path);
    return 0;
}

static int parse(int argc, char **argv, qargs *a) {
    memset(a, 0, sizeof *a);
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i], *val = NULL;
        static const struct {
            const char *s, *l;
            int value;
        } opts[] = {{"-d", "--dir", 1},   {NULL, "--type", 1},         {NULL, "--component", 1},
                    {"-o", "--output", 1}, {NULL, "--transformer", 1}, {NULL, "--text-encoder", 1},
                    {"-t", "--threads", 1}, {NULL, "--no-mmap", 0},    {"-q", "--quiet", 0},
                    {"-v", "--verbose", 0}, {"-h", "--help", 0}};
        int k = -1;
        size_t n = strcspn(arg, "=");
        for (size_t j = 0; j < sizeof opts / sizeof *opts && k < 0; j++)
            if ((opts[j].s && !strcmp(arg, opts[j].s)) || (!strncmp(arg, opts[j].l, n) && opts[j].l[n] == '\0'))
                k = (int)j;
        if (k < 0) return usage("unknown argument '%s' (see flux quantize --help)", arg);
        if (opts[k].value) {
            if (arg[n] == '=') val = arg + n + 1;
            else if (i + 1 < argc) val = argv[++i];
            else return usage("%s: missing value", arg);
        } else if (arg[n] == '=') {
            return usage("%s takes no value", opts[k].l);
        }
        switch (k) {
        case 0: a->dir = val; break;
        case 1: a->type = val; break;
        case 2: a->component = val; break;
        case 3: a->output = val; break;
        case 4: a->transformer = val; break;
        case 5: a->text_encoder = val; break;
        case 6: {
            char *end;
            errno = 0;
            long t = strtol(val, &end, 10);
            if (!*val || *end || errno || t < 0 || t > CLI_MAX_THREADS) return usage("--threads: '%s' is not 0..1024", val);
            a->threads = (int)t;
            break;
        }
        case 7: a->no_mmap = 1; break;
        case 8: a->quiet = 1; break;
        case 9: a->verbose = 1; break;
        default: a->help = 1; break;
        }
    }
    if (a->help) return 0;
    if (!a->dir) return usage("missing -d DIR");
    struct stat st;
    if (stat(a->dir, &st) != 0 || !S_ISDIR(st.st_mode)) return usage("-d: '%s' is not a directory", a->dir);
    if (!a->type) return usage("missing --type (" TYPE_LIST ")");
    int known = 0;
    for (size_t i = 0; i < sizeof types / sizeof *types; i++) known |= !strcasecmp(a->type, types[i]);
    if (!known) return usage("--type: '%s' is not a quantization type (" TYPE_LIST ")", a->type);
    const char *ext = strncasecmp(a->type, "fp8", 3) ? ".gguf" : ".safetensors";
    if (!a->component) return usage("missing --component (transformer or text-encoder)");
    if (strcmp(a->component, "transformer") && strcmp(a->component, "text-encoder"))
        return usage("--component: '%s' is not transformer or text-encoder", a->component);
    if (!a->output) return usage("missing -o OUT%s", ext);
    size_t len = strlen(a->output);
    if (len < strlen(ext) || strcasecmp(a->output + len - strlen(ext), ext))
        return usage("-o: '%s' does not end in %s (--type %s)", a->output, ext, a->type);
    if (stat(a->output, &st) == 0 && S_ISDIR(st.st_mode)) return usage("-o: '%s' is a directory", a->output);
    char dir[4096];
    const char *slash = strrchr(a->output, '/');
    snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - a->output) + (slash == a->output) : 1,
             slash ? a->output : ".");
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) return usage("-o: directory '%s' does not exist", dir);
    if (access(dir, W_OK | X_OK) != 0) return usage("-o: directory '%s' is not writable", dir);
    char why[256]; /* a name the file system cannot hold fails now, not after quantizing */
    if (cli_name_too_long(dir, a->output, 0, why, sizeof why)) return usage("-o: %s", why);
    if (a->transformer && file_ok("--transformer", a->transformer)) return CLI_EXIT_USAGE;
    if (a->text_encoder && file_ok("--text-encoder", a->text_encoder)) return CLI_EXIT_USAGE;
    if (a->quiet && a->verbose) return usage("-q and -v exclude each other");
    return 0;
}

typedef struct qprogress {
    int mode; /* 0 silent, 1 TTY line, 2 one line per 10% */
    double t0, last;
    int last_decile;
} qprogress;

static int progress(void *user, int done, int total, uint64_t bytes_done, uint64_t bytes_total) {
    qprogress *p = user;
    double t = fx_now_s();
    if (p->mode == 1 && (t - p->last > 0.1 || done == total)) {
        fprintf(stderr, "\rflux: quantizing: %d/%d tensors, %.2f/%.2f GB, %.0f s ", done, total, bytes_done / 1e9,
                bytes_total / 1e9, t - p->t0);
        fflush(stderr);
        p->last = t;
    } else if (p->mode == 2) {
        int decile = bytes_total ? (int)(10 * bytes_done / bytes_total) : 10;
        if (decile != p->last_decile)
            fprintf(stderr, "flux: quantizing: %d/%d tensors, %.2f/%.2f GB, %.0f s\n", done, total, bytes_done / 1e9,
                    bytes_total / 1e9, t - p->t0);
        p->last_decile = decile;
    }
    return g_interrupted != 0;
}

int cli_quantize_main(int argc, char **argv) {
    qargs a;
    int rc = parse(argc, argv, &a);
    if (rc) return rc;
    if (a.help) {
        help(stdout);
        return cli_check_stdout(CLI_EXIT_OK); /* --help > /dev/full is a failure */
    }
    flux_options opt;
    flux_options_init(&opt);
    opt.threads = a.threads;
    opt.use_mmap = !a.no_mmap;
    opt.verbose = a.verbose;
    flux_ctx *ctx = flux_new(&opt);
    if (!ctx) {
        cli_message("out of memory creating the context");
        return CLI_EXIT_FAIL;
    }
    flux_quantize_options o;
    flux_quantize_options_init(&o);
    o.type = a.type;
    o.component = a.component;
    o.transformer_file = a.transformer;
    o.text_encoder_file = a.text_encoder;
    qprogress p = {a.quiet ? 0 : isatty(STDERR_FILENO) ? 1 : a.verbose ? 2 : 0, fx_now_s(), 0, -1};
    o.progress = progress;
    o.progress_user = &p;
    signal(SIGINT, on_sigint);
    flux_status st = flux_quantize(ctx, a.dir, &o, a.output);
    /* once interrupted, the way out (freeing, exit 130) stays uninterruptible */
    if (!g_interrupted) signal(SIGINT, SIG_DFL);
    if (p.mode == 1) fputc('\n', stderr);
    if (st == FLUX_ERR_CANCELLED) {
        cli_message("interrupted; nothing was written");
        rc = CLI_EXIT_INTERRUPTED;
    } else if (st) {
        cli_message("%s", flux_error(ctx));
        rc = CLI_EXIT_FAIL;
    } else {
        struct stat sb;
        if (!a.quiet && stat(a.output, &sb) == 0)
            cli_message("wrote %s (%s %s, %.2f GB) in %.1f s", a.output, a.component, a.type, sb.st_size / 1e9,
                        fx_now_s() - p.t0);
        rc = CLI_EXIT_OK;
    }
    flux_free(ctx);
    return rc;
}
