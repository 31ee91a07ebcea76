/*
 * cli_main.c — the flux command line: parse (src/app/app_args.c), then one of
 * --help, --version, --cpu-info, --tokenize, or image generation.
 *
 * Messages go to stderr as "flux: ..." lines; stdout carries only results
 * (help text, version, CPU info, token ids). Exit codes: see src/app/app_args.h.
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "flux.h"
#include "src/app/app_args.h"
#include "src/app/app_model.h"
#include "cli_progress.h"
#include "cli_quantize.h"
#include "cli_repl.h"
#include "cli_show.h"
#include "cli_internal.h"

/* Set by the SIGINT handler; the progress callback turns it into a
 * cancellation so no output file is written. */
static volatile sig_atomic_t g_interrupted;

static void on_sigint(int sig) {
    g_interrupted = 1;
    signal(sig, SIG_DFL); /* a second Ctrl-C kills at once */
}

static int fail(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    cli_vmessage(fmt, ap);
    va_end(ap);
    return code;
}

/* ------------------------------------------------------------ tokenize */

/* Tokenize one text and print its ids on one line. */
static int print_tokens(flux_ctx *ctx, const char *text, int raw, int32_t **ids, int *cap) {
    int n = 0;
    for (;;) {
        if (flux_tokenize(ctx, text, raw, *ids, *cap, &n) != FLUX_OK) return fail(CLI_EXIT_FAIL, "%s", flux_error(ctx));
        if (n <= *cap) break;
        int32_t *bigger = realloc(*ids, (size_t)n * sizeof **ids);
        if (!bigger) return fail(CLI_EXIT_FAIL, "out of memory (%d token ids)", n);
        *ids = bigger;
        *cap = n;
    }
    for (int i = 0; i < n; i++) printf(i ? " %d" : "%d", (int)(*ids)[i]);
    putchar('\n');
    return cli_check_stdout(CLI_EXIT_OK);
}

/* --tokenize: ids of -p, or of each stdin line holding one JSON string. */
static int run_tokenize(flux_ctx *ctx, const cli_args *a) {
    if (cli_load_model(ctx, a) != FLUX_OK) return fail(CLI_EXIT_FAIL, "%s", flux_error(ctx));
    int cap = 1024, rc = CLI_EXIT_OK;
    int32_t *ids = malloc((size_t)cap * sizeof *ids);
    if (!ids) return fail(CLI_EXIT_FAIL, "out of memory");
    if (a->prompt) {
        rc = print_tokens(ctx, a->prompt, a->raw, &ids, &cap);
        free(ids);
        return rc;
    }
    char *line = NULL;
    size_t line_cap = 0;
    ssize_t len;
    long lineno = 0;
    while (rc == CLI_EXIT_OK && (len = getline(&line, &line_cap, stdin)) >= 0) {
        lineno++;
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r')) line[--len] = '\0';
        fx_err err = {0};
        fx_json_doc *doc = fx_json_parse(line, (size_t)len, &err);
        const fx_json *v = doc ? fx_json_root(doc) : NULL;
        if (!doc) rc = fail(CLI_EXIT_FAIL, "stdin line %ld: %s", lineno, err.msg);
        else if (!fx_json_is_string(v))
            rc = fail(CLI_EXIT_FAIL, "stdin line %ld: expected a JSON string, found %s", lineno,
                      fx_json_type_name(fx_json_typeof(v)));
        else if (fx_json_str_len(v) != strlen(fx_json_str(v)))
            rc = fail(CLI_EXIT_FAIL, "stdin line %ld: the string contains a NUL character (\\u0000)", lineno);
        else rc = print_tokens(ctx, fx_json_str(v), a->raw, &ids, &cap);
        fx_json_free(doc);
    }
    if (rc == CLI_EXIT_OK && ferror(stdin)) rc = fail(CLI_EXIT_FAIL, "reading stdin: %s", strerror(errno));
    free(line);
    free(ids);
    return rc;
}

/* ------------------------------------------------------------ generate */

typedef struct gen_inputs {
    flux_image *init, *mask; /* --init-img, --mask */
    flux_image *refs[FLUX_MAX_REFS];
    int n_refs;
    fx_npy noise, embeddings;
    flux_image **out;
    int n_out;
} gen_inputs;

static void free_inputs(gen_inputs *in) {
    for (int i = 0; i < in->n_refs; i++) flux_image_free(in->refs[i]);
    flux_image_free(in->init);
    flux_image_free(in->mask);
    fx_npy_free(&in->noise);
    fx_npy_free(&in->embeddings);
    if (in->out)
        for (int i = 0; i < in->n_out; i++) flux_image_free(in->out[i]);
    free(in->out);
}

/* Read -i, --noise and --embeddings before the model, so a bad file fails
 * in a second instead of after loading gigabytes. Fills in the size from
 * the noise when -W/-H are not given. */
static int read_inputs(flux_ctx *ctx, cli_args *a, gen_inputs *in) {
    fx_ref_geom init_geom = {0};
    if (a->init_img) { /* the init image's limits and processed size before the model loads */
        fx_err gerr = {0};
        if (flux_image_load(ctx, a->init_img, &in->init) != FLUX_OK)
            return fail(CLI_EXIT_FAIL, "--init-img: %s", flux_error(ctx));
        if (fx_init_geometry(in->init->width, in->init->height, 16, a->init_img, &init_geom, &gerr) != FLUX_OK)
            return fail(CLI_EXIT_FAIL, "--init-img: %s", gerr.msg);
        char why[160];
        const char *missing;
        if (!a->noise_file &&
            cli_check_default_size(0, 0, init_geom.width, init_geom.height, why, sizeof why, &missing))
            return fail(CLI_EXIT_USAGE, "--init-img: %s: %s (processed size %dx%d from %dx%d)", a->init_img, why,
                        init_geom.width, init_geom.height, init_geom.src_w, init_geom.src_h);
        if (a->mask_file && flux_image_load(ctx, a->mask_file, &in->mask) != FLUX_OK)
            return fail(CLI_EXIT_FAIL, "--mask: %s", flux_error(ctx));
    }
    for (int i = 0; i < a->n_refs; i++) {
        if (flux_image_load(ctx, a->refs[i], &in->refs[i]) != FLUX_OK)
            return fail(CLI_EXIT_FAIL, "-i: %s", flux_error(ctx));
        in->n_refs++;
        /* the reference limits (size, aspect ratio) before the model loads;
         * 16 = the klein VAE's pixels per token side */
        fx_ref_geom geom;
        fx_err gerr = {0};
        if (fx_ref_geometry(in->refs[i]->width, in->refs[i]->height, 16, a->refs[i], &geom, &gerr) != FLUX_OK)
            return fail(CLI_EXIT_FAIL, "-i: %s", gerr.msg);
        char why[160];
        const char *missing;
        if (i == 0 && !a->noise_file && !a->init_img &&
            cli_check_default_size(a->width, a->height, geom.width, geom.height, why, sizeof why, &missing))
            return fail(CLI_EXIT_USAGE, "-i: %s: %s: give %s", a->refs[0], why,
                        !strcmp(missing, "both") ? "-W and -H" : !strcmp(missing, "width") ? "-W" : "-H");
    }
    fx_err err = {0};
    if (a->noise_file) {
        int64_t want[3] = {128, a->height ? a->height / 16 : -1, a->width ? a->width / 16 : -1};
        if (a->init_img) want[1] = init_geom.height / 16, want[2] = init_geom.width / 16;
        if (fx_npy_read(a->noise_file, &in->noise, &err) != FLUX_OK ||
            fx_npy_expect(&in->noise, a->noise_file, FX_NPY_F32, 3, want, &err) != FLUX_OK)
            return fail(CLI_EXIT_FAIL, "--noise: %s", err.msg);
        int64_t h = in->noise.shape[1] * 16, w = in->noise.shape[2] * 16;
        if (h < CLI_NOISE_MIN_SIZE || h > CLI_MAX_SIZE || w < CLI_NOISE_MIN_SIZE || w > CLI_MAX_SIZE)
            return fail(CLI_EXIT_FAIL, "--noise: %s: shape (128, %lld, %lld) means %lldx%lld pixels, outside %d..%d",
                        a->noise_file, (long long)in->noise.shape[1], (long long)in->noise.shape[2],
                        (long long)w, (long long)h, CLI_NOISE_MIN_SIZE, CLI_MAX_SIZE);
        a->height = (int)h;
        a->width = (int)w;
    }
    if (a->embeddings_file) {
        int64_t want[2] = {FLUX_TEXT_TOKENS, -1};
        if (fx_npy_read(a->embeddings_file, &in->embeddings, &err) != FLUX_OK ||
            fx_npy_expect(&in->embeddings, a->embeddings_file, FX_NPY_F32, 2, want, &err) != FLUX_OK)
            return fail(CLI_EXIT_FAIL, "--embeddings: %s", err.msg);
    }
    return CLI_EXIT_OK;
}

static const char *schedule_name(const cli_args *a, char *buf, size_t size) {
    if (a->schedule == FLUX_SCHEDULE_LINEAR) return "linear";
    if (a->schedule == FLUX_SCHEDULE_POWER) {
        snprintf(buf, size, "power (alpha %g)", (double)a->power_alpha);
        return buf;
    }
    return "shifted";
}

static int run_generate(flux_ctx *ctx, cli_args *a) {
    gen_inputs in;
    memset(&in, 0, sizeof in);
    int rc = read_inputs(ctx, a, &in);
    if (rc) {
        free_inputs(&in);
        return rc;
    }
    double t0 = fx_now_s();
    if ((rc = cli_load_model_and_loras(ctx, a))) {
        free_inputs(&in);
        return rc;
    }
    if (a->init_img) { /* a strength that leaves no step: a command-line error, now that the step count is known */
        flux_model_info info;
        const int steps = a->steps ? a->steps : flux_get_model_info(ctx, &info) == FLUX_OK ? info.default_steps : 0;
        if (steps > 0 && fx_schedule_first_step(steps, a->strength) >= steps) {
            free_inputs(&in);
            return fail(CLI_EXIT_USAGE, "--strength: %g with %d steps leaves no denoising step (int(%d - %d*%g) = %d); "
                                        "use a larger strength or more steps",
                        a->strength, steps, steps, steps, a->strength, fx_schedule_first_step(steps, a->strength));
        }
    }
    if (a->embeddings_file) {
        flux_model_info info;
        if (flux_get_model_info(ctx, &info) != FLUX_OK) {
            free_inputs(&in);
            return fail(CLI_EXIT_FAIL, "%s", flux_error(ctx));
        }
        if (in.embeddings.shape[1] != info.text_dim) {
            fail(CLI_EXIT_FAIL, "--embeddings: %s: expected float32 (512, %d) for this model, found (512, %lld)",
                 a->embeddings_file, info.text_dim, (long long)in.embeddings.shape[1]);
            free_inputs(&in);
            return CLI_EXIT_FAIL;
        }
    }
    if (a->dump_dir && mkdir(a->dump_dir, 0777) != 0 && errno != EEXIST) {
        fail(CLI_EXIT_FAIL, "--dump: cannot create '%s': %s", a->dump_dir, strerror(errno));
        free_inputs(&in);
        return CLI_EXIT_FAIL;
    }

    cli_show_proto show = CLI_SHOW_NONE;
    char why[512];
    if (a->show) { /* decided before the work, so the reason comes first */
        show = cli_show_detect(isatty(STDOUT_FILENO), why, sizeof why);
        if (show == CLI_SHOW_NONE && !a->quiet) cli_message("%s", why);
    }

    uint64_t seed = a->seed_given ? a->seed : cli_random_seed();
    if (!a->quiet) {
        if (a->batch > 1) cli_message("seeds %" PRIu64 "..%" PRIu64, seed, seed + (uint64_t)a->batch - 1);
        else cli_message("seed %" PRIu64, seed);
    }

    cli_progress prog;
    cli_progress_init(&prog, a->quiet, a->verbose, &g_interrupted);
    flux_params p;
    flux_params_init(&p);
    p.prompt = a->prompt;
    p.negative_prompt = a->negative;
    p.width = a->width;
    p.height = a->height;
    p.steps = a->steps;
    p.seed = seed;
    uint64_t seed_used = seed;
    p.seed_used = &seed_used;
    p.guidance = a->guidance;
    p.schedule = a->schedule;
    p.power_alpha = a->power_alpha;
    p.refs = (const flux_image *const *)in.refs;
    p.n_refs = in.n_refs;
    p.batch = a->batch;
    p.init_image = in.init;
    p.strength = a->strength;
    p.mask = in.mask;
    p.mask_invert = a->mask_invert;
    p.mask_blur_x = p.mask_blur_y = a->mask_blur;
    p.embeddings = a->embeddings_file ? in.embeddings.data : NULL;
    p.noise = a->noise_file ? in.noise.data : NULL;
    p.dump_dir = a->dump_dir;
    p.progress = cli_progress_cb;
    p.progress_user = &prog;

    in.n_out = a->batch;
    in.out = calloc((size_t)in.n_out, sizeof *in.out);
    if (!in.out) {
        free_inputs(&in);
        return fail(CLI_EXIT_FAIL, "out of memory");
    }
    signal(SIGINT, on_sigint);
    flux_status s = a->batch > 1 ? flux_generate_batch(ctx, &p, in.out) : flux_generate(ctx, &p, &in.out[0]);
    signal(SIGINT, SIG_DFL);
    cli_progress_clear(&prog);
    if (s != FLUX_OK) {
        rc = s == FLUX_ERR_CANCELLED ? fail(CLI_EXIT_INTERRUPTED, "interrupted; nothing was written")
                                     : fail(CLI_EXIT_FAIL, "%s", flux_error(ctx));
        free_inputs(&in);
        return rc;
    }
    char name[4096], sched_buf[64];
    const char *sched = schedule_name(a, sched_buf, sizeof sched_buf);
    for (int i = 0; i < in.n_out; i++) {
        if (!in.out[i]) continue;
        if ((a->init_img && flux_image_set_text(in.out[i], "init_image", a->init_img) != FLUX_OK) ||
            (a->mask_file && flux_image_set_text(in.out[i], "mask", a->mask_file) != FLUX_OK)) {
            rc = fail(CLI_EXIT_FAIL, "out of memory (image metadata)");
            break;
        }
        if (!cli_batch_name(a->output, i, name, sizeof name)) {
            rc = fail(CLI_EXIT_FAIL, "-o: output name too long");
            break;
        }
        if (flux_image_save(ctx, in.out[i], name) != FLUX_OK) {
            rc = fail(CLI_EXIT_FAIL, "%s", flux_error(ctx));
            break;
        }
        if (!a->quiet)
            cli_message("wrote %s (%dx%d, seed %" PRIu64 ", %s schedule) in %.1f s", name,
                        in.out[i]->width, in.out[i]->height, seed_used + (uint64_t)i, sched, fx_now_s() - t0);
        if (show != CLI_SHOW_NONE && cli_show_image(stdout, in.out[i], show, getenv("TMUX") != NULL, why, sizeof why))
            cli_message("%s", why); /* the image is written; the preview is extra */
    }
    free_inputs(&in);
    return rc;
}

/* ------------------------------------------------------------ interactive */

/* No prompt: the prompt loop of cli_repl.c on the loaded model. */
static int run_interactive(flux_ctx *ctx, const cli_args *a) {
    int rc = cli_load_model_and_loras(ctx, a);
    return rc ? rc : cli_repl_run(ctx, a, stdin, stdout);
}

/* ------------------------------------------------------------ devices */

/* flux --list-devices: one line per Vulkan device. */
static int list_devices(flux_ctx *ctx) {
    enum { MAXDEV = 16 };
    flux_device_info d[MAXDEV];
    int n = 0;
    if (flux_list_devices(ctx, d, MAXDEV, &n) != FLUX_OK) {
        if (strstr(flux_error(ctx), "built without Vulkan")) { /* an answer, not a failure */
            printf("no Vulkan devices: %s\n", flux_error(ctx));
            return CLI_EXIT_OK;
        }
        return fail(CLI_EXIT_FAIL, "--list-devices: %s", flux_error(ctx));
    }
    if (n == 0) printf("no Vulkan devices\n");
    for (int i = 0; i < n && i < MAXDEV; i++)
        printf("%d: %s (%s), driver %s, %.1f GiB%s%s%s\n", d[i].index, d[i].name, d[i].type, d[i].driver,
               (double)d[i].memory / (1u << 30), strcmp(d[i].type, "CPU") ? "" : "; --backend auto skips it",
               d[i].usable ? "" : "; unusable: ", d[i].usable ? "" : d[i].why_not);
    return CLI_EXIT_OK;
}

/* ------------------------------------------------------------ main */

int main(int argc, char **argv) {
    /* A program owns its signals: Ctrl-C, SIGTERM and SIGHUP during a
     * write also remove the temporary file (flux.h, "Process-wide state") */
    flux_set_signals(FLUX_SIGNALS_ALL);
    if (argc > 1 && !strcmp(argv[1], "quantize")) return cli_quantize_main(argc - 1, argv + 1);
    /* static: its 64 KiB of --lora paths stay off the stack, so a small
     * stack limit (ulimit -s 64) still runs the program */
    static cli_args a;
    char msg[1024];
    int rc = cli_parse(argc, argv, &a, msg, sizeof msg);
    if (rc) return fail(rc, "%s", msg);
    if (a.help) {
        cli_print_help(stdout);
        return cli_check_stdout(CLI_EXIT_OK);
    }
    if (a.version) {
        printf("%s\n", flux_build_info());
        return cli_check_stdout(CLI_EXIT_OK);
    }
    flux_ctx *ctx = cli_make_context(&a);
    if (!ctx) return fail(CLI_EXIT_FAIL, "out of memory creating the context");
    if (flux_error(ctx)[0]) { /* --isa this CPU cannot run, FLUX_ISA / FLUX_PRECISION not understood,
                                 --backend vulkan without a device */
        rc = fail(CLI_EXIT_FAIL, "%s%s", a.isa && !strncmp(flux_error(ctx), "ISA ", 4) ? "--isa: " : "",
                  flux_error(ctx));
    } else if (a.list_devices) {
        rc = list_devices(ctx);
    } else if (a.cpu_info) {
        char info[8192];
        flux_cpu_info(ctx, info, sizeof info);
        printf("%s\n%s", flux_build_info(), info);
        rc = CLI_EXIT_OK;
    } else if (a.tokenize) {
        rc = run_tokenize(ctx, &a);
    } else if (!a.prompt && !a.embeddings_file) {
        rc = run_interactive(ctx, &a);
    } else {
        rc = run_generate(ctx, &a);
    }
    flux_free(ctx);
    return cli_check_stdout(rc);
}
