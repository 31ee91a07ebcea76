/*
 * cli_repl.c — interactive mode of the flux CLI (cli_repl.h): the session
 * that keeps one loaded model and numbers the images $0, $1, ... (lines are
 * parsed by cli_repl_parse.c)
 */
#include "cli_repl.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "src/app/app_lora.h"
#include "cli_progress.h"
#include "cli_internal.h"
#include "cli_show.h"

/* ------------------------------------------------------------------------ */
/* The session                                                              */
/* ------------------------------------------------------------------------ */

typedef struct repl_state {
    flux_ctx *ctx;
    const cli_args *a;
    FILE *out;
    int width, height, steps, batch;
    float guidance;              /* < 0 = model default */
    flux_schedule schedule;
    float alpha;
    int seed_fixed;
    uint64_t seed;
    int show_on;
    cli_show_proto proto;
    char **files;                /* [n_files] image N's file */
    int n_files, cap_files;
    char session_dir[4096];      /* "" until the first image without -o */
    int failures;
    int stdout_failed;           /* reported: end the session with exit 1 */
} repl_state;

static volatile sig_atomic_t g_repl_interrupted;

static void on_sigint(int sig) {
    (void)sig;
    g_repl_interrupted = 1;
}

static void msg(const repl_state *st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void msg(const repl_state *st, const char *fmt, ...) {
    if (st->a->quiet) return;
    va_list ap;
    va_start(ap, fmt);
    cli_vmessage(fmt, ap);
    va_end(ap);
}

static void fail_line(repl_state *st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail_line(repl_state *st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    cli_vmessage(fmt, ap);
    va_end(ap);
    st->failures++;
}

/* The file of image N, in the session folder (made on first use). */
static int image_path(repl_state *st, int n, char *buf, size_t size) {
    if (!st->session_dir[0]) {
        const char *tmp = getenv("TMPDIR");
        snprintf(st->session_dir, sizeof st->session_dir, "%s/flux-XXXXXX", tmp && *tmp ? tmp : "/tmp");
        if (!mkdtemp(st->session_dir)) {
            fail_line(st, "cannot create a session folder %s: %s", st->session_dir, strerror(errno));
            st->session_dir[0] = '\0';
            return -1;
        }
        msg(st, "images of this session go to %s/", st->session_dir);
    }
    snprintf(buf, size, "%s/image-%d.png", st->session_dir, n);
    return 0;
}

static int add_file(repl_state *st, const char *path) {
    if (st->n_files == st->cap_files) {
        int cap = st->cap_files ? 2 * st->cap_files : 16;
        char **grown = realloc(st->files, (size_t)cap * sizeof *grown);
        if (!grown) return -1;
        st->files = grown, st->cap_files = cap;
    }
    if (!(st->files[st->n_files] = strdup(path))) return -1;
    st->n_files++;
    return 0;
}

/* Image N's file, or NULL with a message. */
static const char *handle_file(repl_state *st, int handle) {
    if (handle == CLI_REPL_LAST) {
        if (!st->n_files) {
            fail_line(st, "'$' names the last image, but there is none yet");
            return NULL;
        }
        return st->files[st->n_files - 1];
    }
    if (handle < 0 || handle >= st->n_files) {
        if (st->n_files) fail_line(st, "no image $%d (images: $0..$%d)", handle, st->n_files - 1);
        else fail_line(st, "no image $%d (no image yet)", handle);
        return NULL;
    }
    return st->files[handle];
}

static const char *schedule_name(flux_schedule s) {
    return s == FLUX_SCHEDULE_LINEAR ? "linear" : s == FLUX_SCHEDULE_POWER ? "power" : "shifted";
}

static void generate(repl_state *st, const cli_repl_cmd *c) {
    flux_image *refs[FLUX_MAX_REFS] = {0};
    flux_image **images = NULL;
    int n_refs = 0, batch = st->batch;
    for (int i = 0; i < c->n_refs; i++) {
        const char *path = handle_file(st, c->refs[i]);
        if (!path) goto out;
        if (flux_image_load(st->ctx, path, &refs[i]) != FLUX_OK) {
            fail_line(st, "%s", flux_error(st->ctx));
            goto out;
        }
        n_refs++;
    }
    const int width = c->width ? c->width : st->width, height = c->height ? c->height : st->height;
    if (n_refs) { /* "size auto": the first reference's size, which must be a size we accept */
        fx_ref_geom geom;
        fx_err gerr = {0};
        char why[160];
        const char *missing;
        if (fx_ref_geometry(refs[0]->width, refs[0]->height, 16, "the first reference", &geom, &gerr) != FLUX_OK) {
            fail_line(st, "%s", gerr.msg);
            goto out;
        }
        if (cli_check_default_size(width, height, geom.width, geom.height, why, sizeof why, &missing)) {
            fail_line(st, "the first reference sets the size: %s; put a size first (e.g. 512x512 $0 ...) or "
                          "use !size", why);
            goto out;
        }
    }
    uint64_t seed = st->seed_fixed ? st->seed : cli_random_seed(), used = seed;
    flux_params p;
    flux_params_init(&p);
    p.prompt = c->prompt;
    p.negative_prompt = st->a->negative;
    p.width = width;
    p.height = height;
    p.steps = st->steps;
    p.seed = seed;
    p.seed_used = &used;
    p.guidance = st->guidance;
    p.schedule = st->schedule;
    p.power_alpha = st->alpha;
    p.refs = (const flux_image *const *)refs;
    p.n_refs = n_refs;
    p.batch = batch;
    cli_progress prog;
    cli_progress_init(&prog, st->a->quiet, st->a->verbose, &g_repl_interrupted);
    p.progress = cli_progress_cb;
    p.progress_user = &prog;
    images = calloc((size_t)batch, sizeof *images);
    if (!images) {
        fail_line(st, "out of memory");
        goto out;
    }
    g_repl_interrupted = 0;
    void (*old)(int) = signal(SIGINT, on_sigint);
    double t0 = fx_now_s();
    flux_status s = batch > 1 ? flux_generate_batch(st->ctx, &p, images) : flux_generate(st->ctx, &p, &images[0]);
    double dt = fx_now_s() - t0;
    signal(SIGINT, old);
    cli_progress_clear(&prog);
    if (s == FLUX_ERR_CANCELLED) {
        fail_line(st, "interrupted; nothing was written");
        goto out;
    }
    if (s != FLUX_OK) {
        fail_line(st, "%s", flux_error(st->ctx));
        goto out;
    }
    for (int i = 0; i < batch; i++) {
        char path[4200], why[512];
        int n = st->n_files;
        if (!images[i] || image_path(st, n, path, sizeof path)) break;
        if (flux_image_save(st->ctx, images[i], path) != FLUX_OK) {
            fail_line(st, "%s", flux_error(st->ctx));
            break;
        }
        if (add_file(st, path)) {
            fail_line(st, "out of memory");
            break;
        }
        fprintf(st->out, "$%d %s (%dx%d, seed %" PRIu64 ", %.1f s)\n", n, path, images[i]->width, images[i]->height,
                used + (uint64_t)i, dt / batch);
        fflush(st->out);
        if (st->show_on && st->proto != CLI_SHOW_NONE &&
            cli_show_image(st->out, images[i], st->proto, getenv("TMUX") != NULL, why, sizeof why))
            fail_line(st, "%s", why);
    }
out:
    for (int i = 0; i < n_refs; i++) flux_image_free(refs[i]);
    if (images)
        for (int i = 0; i < batch; i++) flux_image_free(images[i]);
    free(images);
}

static void save(repl_state *st, const cli_repl_cmd *c) {
    const char *path = handle_file(st, c->handle);
    flux_image *img = NULL;
    if (!path) return;
    if (flux_image_load(st->ctx, path, &img) != FLUX_OK || flux_image_save(st->ctx, img, c->file) != FLUX_OK)
        fail_line(st, "!save: %s", flux_error(st->ctx));
    else
        msg(st, "saved $%d to %s", c->handle == CLI_REPL_LAST ? st->n_files - 1 : c->handle, c->file);
    flux_image_free(img);
}

void cli_repl_help(FILE *f) {
    fputs("Interactive mode: type a prompt and press Enter; each image gets a handle $N.\n"
          "  a prompt                 generate an image\n"
          "  512x768 a prompt         with this size (width x height, multiples of 16)\n"
          "  $N a prompt              img2img from image N ($ alone: the last image)\n"
          "  $0 $3 a prompt           several reference images (up to 16)\n"
          "  \\$5 bill                 a backslash starts a prompt that looks like a command\n"
          "  !seed N | !seed random   fixed seed / a new seed for every image\n"
          "  !size WxH | !size auto   default size\n"
          "  !steps N | !steps auto   sampling steps\n"
          "  !guidance G | !guidance auto\n"
          "  !schedule shifted|linear|power [ALPHA]\n"
          "  !batch N                 N images per prompt (seeds S, S+1, ...)\n"
          "  !lora FILE [SCALE]       add a LoRA adapter (scale 1), or rescale a loaded one\n"
          "  !lora off | !loras       remove every adapter / list them\n"
          "  !save $N FILE            copy image N to FILE (.png or .ppm)\n"
          "  !show [on|off]           terminal preview (Kitty / iTerm2)\n"
          "  !images                  list the images of this session\n"
          "  !help                    this text and the current settings\n"
          "  !quit                    leave (or Ctrl-D)\n",
          f);
}

static void print_settings(const repl_state *st, FILE *f) {
    char size[32], steps[16], guidance[32], seed[32];
    if (st->width) snprintf(size, sizeof size, "%dx%d", st->width, st->height);
    else snprintf(size, sizeof size, "auto");
    if (st->steps) snprintf(steps, sizeof steps, "%d", st->steps);
    else snprintf(steps, sizeof steps, "auto");
    if (st->guidance >= 0) snprintf(guidance, sizeof guidance, "%g", (double)st->guidance);
    else snprintf(guidance, sizeof guidance, "auto");
    if (st->seed_fixed) snprintf(seed, sizeof seed, "%" PRIu64, st->seed);
    else snprintf(seed, sizeof seed, "random");
    fprintf(f, "Settings: size %s, steps %s, guidance %s, schedule %s", size, steps, guidance,
            schedule_name(st->schedule));
    if (st->schedule == FLUX_SCHEDULE_POWER) fprintf(f, " (alpha %g)", (double)st->alpha);
    fprintf(f, ", seed %s, batch %d, preview %s, LoRA adapters %d\n", seed, st->batch,
            st->show_on ? cli_show_proto_name(st->proto) : "off", flux_lora_count(st->ctx));
}

/* Apply one parsed line; 1 to leave. */
static int apply(repl_state *st, const cli_repl_cmd *c) {
    switch (c->kind) {
    case REPL_EMPTY: break;
    case REPL_GENERATE: generate(st, c); break;
    case REPL_QUIT: return 1;
    case REPL_HELP:
        cli_repl_help(st->out);
        print_settings(st, st->out);
        break;
    case REPL_IMAGES:
        for (int i = 0; i < st->n_files; i++) fprintf(st->out, "$%d %s\n", i, st->files[i]);
        if (!st->n_files) msg(st, "no images yet");
        break;
    case REPL_SEED:
        st->seed_fixed = !c->random;
        st->seed = c->seed;
        break;
    case REPL_SIZE: st->width = c->width, st->height = c->height; break;
    case REPL_STEPS: st->steps = c->random ? 0 : c->steps; break;
    case REPL_GUIDANCE: st->guidance = c->random ? -1.0f : c->guidance; break;
    case REPL_SCHEDULE:
        st->schedule = c->schedule;
        if (c->alpha > 0) st->alpha = c->alpha;
        break;
    case REPL_BATCH: st->batch = c->batch; break;
    case REPL_SAVE: save(st, c); break;
    case REPL_LORA:
        if (cli_lora_apply(st->ctx, c->file, c->scale, st->a->quiet)) st->failures++;
        break;
    case REPL_LORA_OFF:
        flux_lora_clear(st->ctx);
        msg(st, "LoRA adapters off");
        break;
    case REPL_LORAS:
        if (flux_lora_count(st->ctx)) cli_lora_list(st->ctx, st->out);
        else msg(st, "no LoRA adapters");
        break;
    case REPL_SHOW: {
        int on = c->on < 0 ? !st->show_on : c->on;
        if (on && st->proto == CLI_SHOW_NONE) {
            char why[512];
            st->proto = cli_show_detect(isatty(fileno(st->out)), why, sizeof why);
            if (st->proto == CLI_SHOW_NONE) {
                fail_line(st, "%s", why);
                on = 0;
            }
        }
        st->show_on = on;
        msg(st, "preview %s", on ? cli_show_proto_name(st->proto) : "off");
        break;
    }
    }
    fflush(st->out);
    return 0;
}

int cli_repl_run(flux_ctx *ctx, const cli_args *a, FILE *in, FILE *out) {
    repl_state st;
    memset(&st, 0, sizeof st);
    st.ctx = ctx;
    st.a = a;
    st.out = out;
    st.width = a->width, st.height = a->height;
    if (!st.width != !st.height) { /* one of -W/-H: the other from the default */
        if (!st.width) st.width = 256;
        if (!st.height) st.height = 256;
    }
    st.steps = a->steps;
    st.batch = a->batch > 0 ? a->batch : 1;
    st.guidance = a->guidance;
    st.schedule = a->schedule;
    st.alpha = a->power_alpha;
    st.seed_fixed = a->seed_given;
    st.seed = a->seed;
    if (a->show) {
        char why[512];
        st.proto = cli_show_detect(isatty(fileno(out)), why, sizeof why);
        st.show_on = st.proto != CLI_SHOW_NONE;
        if (!st.show_on) msg(&st, "%s", why);
    }
    for (int i = 0; i < a->n_refs; i++) /* -i images are the first handles */
        if (add_file(&st, a->refs[i])) return CLI_EXIT_FAIL;
    int interactive = isatty(fileno(in));
    flux_model_info info;
    if (flux_get_model_info(ctx, &info) == FLUX_OK)
        msg(&st, "interactive mode with %s (%s); !help lists the commands, !quit or Ctrl-D leaves", info.name,
            info.distilled ? "distilled" : "base");

    char *line = NULL;
    size_t cap = 0;
    for (;;) {
        if (interactive) {
            fputs("flux> ", out);
            fflush(out);
        }
        errno = 0;
        ssize_t n = getline(&line, &cap, in);
        if (n < 0) {
            if (interactive) fputc('\n', out);
            break;
        }
        cli_repl_cmd c;
        char err[512];
        if (cli_repl_parse(line, &c, err, sizeof err)) {
            fail_line(&st, "%s", err);
            continue;
        }
        int quit = apply(&st, &c);
        if (out == stdout && cli_check_stdout(CLI_EXIT_OK) != CLI_EXIT_OK) {
            st.stdout_failed = 1; /* the handles cannot reach the user: stop */
            break;
        }
        if (quit) break;
    }
    free(line);
    for (int i = 0; i < st.n_files; i++) free(st.files[i]);
    free(st.files);
    if (st.stdout_failed) return CLI_EXIT_FAIL;
    return st.failures && !interactive ? CLI_EXIT_FAIL : CLI_EXIT_OK;
}
