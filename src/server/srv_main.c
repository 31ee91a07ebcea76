/*
 * srv_main.c — flux-server: the model loaded once behind HTTP APIs
 * (srv_api.c). Options: the server's own (below), then the flux CLI's
 * model and performance options, parsed by the CLI's own parser
 * (src/app/app_args.c) so both programs accept and check them alike.
 *
 * Exit: 0 after SIGTERM/SIGINT drained the queue, 1 runtime failure
 * (model, port), 2 bad command line.
 */
#include <errno.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <signal.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "flux.h"
#include "src/base/clock.h"
#include "src/app/app_args.h"
#include "src/app/app_model.h"
#include "srv_api.h"

typedef struct srv_args {
    const char *host;
    int port;
    const char *api_key;
    const char *lora_dir;
    int max_queue;
    unsigned timeout_s;
    srv_limits lim;
    const char *cors_origins, *allow_hosts;
    double result_ttl_s;
    size_t max_results_bytes;
    int max_conns, max_conns_per_ip;
    double header_timeout_s;
    int access_log;
    int help;
} srv_args;

static void print_help(FILE *f) {
    fputs("usage: flux-server -d DIR [--host 127.0.0.1] [--port 8080] [--api-key KEY] [--lora-dir DIR]\n"
          "                   [--max-queue N] [model and performance options of flux]\n"
          "\n"
          "Serve a FLUX.2-klein model over HTTP, loaded once: OpenAI images API (/v1/images/generations,\n"
          "/v1/images/edits, /v1/models), AUTOMATIC1111 API (/sdapi/v1/txt2img, img2img, progress, interrupt,\n"
          "sd-models, loras, options, ...), native jobs (/v1/jobs, /v1/server), /health, /ready, /metrics, a web\n"
          "page at /. One job computes at a time; the others wait in a bounded queue. SIGTERM, SIGHUP or\n"
          "Ctrl-C: finish the queued jobs, then exit.\n"
          "\n"
          "Server:\n"
          "      --host ADDR        address to listen on (default 127.0.0.1, this machine only); any other\n"
          "                         address needs --api-key\n"
          "      --port N           TCP port (default 8080; 0 = a free port, printed at start)\n"
          "      --api-key KEY      require \"Authorization: Bearer KEY\" (or HTTP Basic, KEY the password) on\n"
          "                         every endpoint but /health, /ready and the page (env FLUX_API_KEY does the\n"
          "                         same and keeps the key out of ps)\n"
          "      --lora-dir DIR     LoRA adapters requests may name: DIR/NAME.safetensors is \"loras\":\n"
          "                         [{\"name\": \"NAME\", \"scale\": 0.8}] (no paths from clients)\n"
          "      --max-queue N      jobs that may wait, 1..255 (default 8); more get 429 with Retry-After\n"
          "      --max-body-mb N    request body limit in MiB where images are taken (edits, img2img, /v1/jobs),\n"
          "                         1..1024 (default 32); 1 MiB elsewhere\n"
          "      --max-steps N      steps a request may ask for, 1..1000 (default 100)\n"
          "      --max-batch N      images per request, 1..64 (default 8)\n"
          "      --max-images N     reference images per request, 0..16 (default 4)\n"
          "      --max-size N       largest side in pixels, 64..2048 (default 2048)\n"
          "      --timeout S        drop a client that sends nothing for S seconds, 1..3600 (default 30)\n"
          "      --header-timeout S a request head must arrive within S seconds (a body: S plus one second per\n"
          "                         16 KiB), 1..600 (default 10); idle kept-alive connections close after S\n"
          "      --max-connections N open connections in all, 16..4096 (default 256); new ones evict the oldest\n"
          "                         idle ones, never a request being served\n"
          "      --max-conn-per-ip N connections per client address, 1..4096 (default 64; behind a proxy on this\n"
          "                         machine every client has its address: raise it to --max-connections)\n"
          "      --result-ttl S     finished /v1/jobs results are kept S seconds, 1..604800 (default 3600)\n"
          "      --max-results-mb N ... and their images N MiB in all, oldest forgotten first, 1..65536 (default 256)\n"
          "      --allow-host NAMES a loopback server answers only Host localhost, 127.0.0.1 and [::1]; these\n"
          "                         names too (comma separated; the names a proxy passes on)\n"
          "      --cors-origin LIST pages of these origins (comma separated, e.g. https://app.example; * = any) may\n"
          "                         call the API from a browser; other sites' pages get 403\n"
          "      --access-log       one line per request on stderr: time, client, method, path, status, bytes,\n"
          "                         seconds\n"
          "  -h, --help             this text\n"
          "\n"
          "Model and performance (as for flux, see flux --help): -d DIR, --transformer FILE,\n"
          "--text-encoder FILE, --vae FILE, --tokenizer FILE (the three files without -d), --quant TYPE, --base, --distilled, --lora FILE[:SCALE] (always applied),\n"
          "-t N, --precision P, --isa NAME, --backend B, --device N, --device-memory MB, --no-mmap,\n"
          "--cache-dir DIR, --no-cache, -q (no log lines), -v (a line per request; -vv the library's too)\n",
          f);
}

static int usage(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("flux-server: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return CLI_EXIT_USAGE;
}

static int parse_number(const char *opt, const char *val, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    const long v = strtol(val, &end, 10);
    if (!*val || *end || errno) return usage("%s: '%s' is not a number", opt, val);
    if (v < lo || v > hi) return usage("%s: %ld is out of range (%ld..%ld)", opt, v, lo, hi);
    *out = v;
    return 0;
}

/* The server's options out of argv; the rest into rest[] for cli_parse. */
static int parse_server_args(int argc, char **argv, srv_args *sa, char **rest, int *n_rest) {
    static const char *const names[] = {"host",          "port",           "api-key",      "lora-dir",
                                        "max-queue",     "max-body-mb",    "max-steps",    "max-batch",
                                        "max-images",    "max-size",       "timeout",      "header-timeout",
                                        "max-connections", "max-conn-per-ip", "result-ttl", "max-results-mb",
                                        "allow-host",    "cors-origin"};
    *n_rest = 0;
    rest[(*n_rest)++] = argv[0];
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (!strcmp(arg, "-h") || !strcmp(arg, "--help")) {
            sa->help = 1;
            continue;
        }
        if (!strcmp(arg, "--access-log")) {
            sa->access_log = 1;
            continue;
        }
        int which = -1;
        const char *val = NULL;
        for (int k = 0; k < (int)(sizeof names / sizeof *names) && which < 0; k++) {
            const size_t n = strlen(names[k]);
            if (strncmp(arg, "--", 2) || strncmp(arg + 2, names[k], n)) continue;
            if (arg[2 + n] == '=') val = arg + 3 + n;
            else if (arg[2 + n]) continue;
            which = k;
        }
        if (which < 0) {
            rest[(*n_rest)++] = argv[i];
            continue;
        }
        char spelled[32];
        snprintf(spelled, sizeof spelled, "--%s", names[which]);
        if (!val) {
            if (i + 1 >= argc) return usage("%s: missing value", spelled);
            val = argv[++i];
        }
        long v = 0;
        int rc = 0;
        switch (which) {
        case 0: sa->host = val; break;
        case 1: rc = parse_number(spelled, val, 0, 65535, &v), sa->port = (int)v; break;
        case 2: sa->api_key = val; break;
        case 3: sa->lora_dir = val; break;
        case 4: rc = parse_number(spelled, val, 1, SRV_TABLE_SIZE - 1, &v), sa->max_queue = (int)v; break;
        case 5: rc = parse_number(spelled, val, 1, 1024, &v), sa->lim.max_body = (size_t)v << 20; break;
        case 6: rc = parse_number(spelled, val, 1, CLI_MAX_STEPS, &v), sa->lim.max_steps = (int)v; break;
        case 7: rc = parse_number(spelled, val, 1, CLI_MAX_BATCH, &v), sa->lim.max_batch = (int)v; break;
        case 8: rc = parse_number(spelled, val, 0, FLUX_MAX_REFS, &v), sa->lim.max_images = (int)v; break;
        case 9: rc = parse_number(spelled, val, CLI_MIN_SIZE, CLI_MAX_SIZE, &v), sa->lim.max_size = (int)v; break;
        case 10: rc = parse_number(spelled, val, 1, 3600, &v), sa->timeout_s = (unsigned)v; break;
        case 11: rc = parse_number(spelled, val, 1, 600, &v), sa->header_timeout_s = (double)v; break;
        case 12: rc = parse_number(spelled, val, 16, 4096, &v), sa->max_conns = (int)v; break;
        case 13: rc = parse_number(spelled, val, 1, 4096, &v), sa->max_conns_per_ip = (int)v; break;
        case 14: rc = parse_number(spelled, val, 1, 604800, &v), sa->result_ttl_s = (double)v; break;
        case 15: rc = parse_number(spelled, val, 1, 65536, &v), sa->max_results_bytes = (size_t)v << 20; break;
        case 16: sa->allow_hosts = val; break;
        case 17: sa->cors_origins = val; break;
        }
        if (rc) return rc;
    }
    return 0;
}

/* The CLI options that describe one image have no meaning here (requests
 * carry them): name the first one given. */
static const char *generation_option(const cli_args *a) {
    if (a->prompt) return "-p";
    if (a->output) return "-o";
    if (a->width || a->height) return a->width ? "-W" : "-H";
    if (a->steps) return "-s";
    if (a->seed_given) return "-S";
    if (a->guidance >= 0) return "-g";
    if (a->negative) return "--negative";
    if (a->n_refs) return "-i";
    if (a->batch > 1) return "-n";
    if (a->schedule != FLUX_SCHEDULE_SHIFTED) return a->schedule == FLUX_SCHEDULE_LINEAR ? "--linear" : "--power";
    if (a->noise_file) return "--noise";
    if (a->embeddings_file) return "--embeddings";
    if (a->dump_dir) return "--dump";
    if (a->tokenize || a->raw) return "--tokenize";
    if (a->show) return "--show";
    if (a->cpu_info) return "--cpu-info";
    if (a->list_devices) return "--list-devices";
    if (a->version) return "--version";
    return NULL;
}

/* OpenMP threads that wait for work must sleep, not spin: the server idles
 * between jobs and shares its machine (issue 32 D19: with spinning waits, a
 * busy host ran a job 6× slower with 1.3 s stalls). libgomp reads
 * OMP_WAIT_POLICY once, when it is loaded (before main), so the server runs
 * itself again with it set; a policy the user set is kept. */
static void passive_openmp(char **argv) {
#ifdef _OPENMP
    if (getenv("OMP_WAIT_POLICY")) return;
    if (setenv("OMP_WAIT_POLICY", "passive", 1) != 0) return;
    execv("/proc/self/exe", argv);
    /* not re-executed (no /proc): go on with the policy libgomp chose */
#else
    (void)argv;
#endif
}

static int loopback(const char *host) {
    return !strcmp(host, "127.0.0.1") || !strcmp(host, "::1") || !strcmp(host, "localhost") ||
           !strncmp(host, "127.", 4);
}

/* Wait for SIGTERM / SIGINT / SIGHUP (blocked in every thread, taken here). Returns
 * the signal, or 0 after timeout_ms. */
static int wait_signal(const sigset_t *set, long timeout_ms) {
    struct timespec ts = {timeout_ms / 1000, (timeout_ms % 1000) * 1000000L};
    const int sig = sigtimedwait(set, NULL, timeout_ms < 0 ? NULL : &ts);
    return sig > 0 ? sig : 0;
}

/* First signal: refuse new jobs (503, /ready 503), let the queued ones
 * finish and their answers go out. A second signal cancels what is left. */
static void drain(srv_server *s, const sigset_t *set) {
    srv_queue *q = &s->q;
    const int left = srv_queue_begin_drain(q);
    if (s->verbose) fprintf(stderr, "flux-server: draining: %d job(s) to finish (signal again to cancel them)\n", left);
    double idle_since = 0;
    for (;;) {
        srv_queue_view qv;
        srv_queue_view_of(q, &qv);
        srv_http_stats hs;
        srv_http_stats_of(s, &hs);
        const int busy = qv.length || qv.running, in_flight = hs.in_flight;
        /* results of /v1/jobs finished during the drain: their clients poll for them (30 s at most) */
        if (!busy && !in_flight && !srv_queue_unread_results(q, 30)) break;
        if (!busy) { /* answers still going out (or event streams ending): at most 30 s more */
            struct timespec now;
            clock_gettime(CLOCK_MONOTONIC, &now);
            const double t = (double)now.tv_sec + now.tv_nsec * 1e-9;
            if (idle_since == 0) idle_since = t;
            else if (t - idle_since > 30) break;
        }
        if (wait_signal(set, 100)) {
            if (s->verbose) fprintf(stderr, "flux-server: second signal: cancelling the remaining jobs\n");
            srv_queue_cancel_all(q);
            break;
        }
    }
}

int main(int argc, char **argv) {
    static srv_args sa;
    static cli_args a;
    sa.host = "127.0.0.1";
    sa.port = 8080;
    sa.max_queue = 8;
    sa.timeout_s = 30;
    sa.header_timeout_s = 10;
    sa.max_conns = 256;
    sa.max_conns_per_ip = 64;
    sa.result_ttl_s = 3600;
    sa.max_results_bytes = (size_t)256 << 20;
    srv_limits_init(&sa.lim);
    passive_openmp(argv);
#ifdef __GLIBC__
    /* request bodies and their documents (up to --max-body-mb) come and go on many threads: from 256 KiB on
     * they are mapped and unmapped, so their memory goes back at once (glibc's moving threshold kept it in the
     * threads' arenas) */
    mallopt(M_MMAP_THRESHOLD, 256 << 10);
#endif
    char **rest = calloc((size_t)argc + 1, sizeof *rest);
    if (!rest) return CLI_EXIT_FAIL;
    int n_rest = 0, rc = parse_server_args(argc, argv, &sa, rest, &n_rest);
    if (rc) {
        free(rest);
        return rc;
    }
    if (sa.help) {
        free(rest);
        print_help(stdout);
        return cli_check_stdout(CLI_EXIT_OK);
    }
    char msg[1024];
    rc = cli_parse_options(n_rest, rest, &a, msg, sizeof msg);
    free(rest);
    if (rc) return usage("%s", msg);
    const char *gen = generation_option(&a);
    if (gen) return usage("%s: not a flux-server option (each request gives its own prompt, size, steps, ...)", gen);
    if ((rc = cli_validate(&a, msg, sizeof msg))) return usage("%s", msg);
    if (!sa.api_key && getenv("FLUX_API_KEY") && *getenv("FLUX_API_KEY")) sa.api_key = getenv("FLUX_API_KEY");
    if (sa.api_key && !*sa.api_key) return usage("--api-key: empty");
    if (!loopback(sa.host) && !sa.api_key)
        return usage("--host %s: listening beyond this machine needs --api-key KEY (or FLUX_API_KEY)", sa.host);
    if (sa.lora_dir) {
        struct stat st;
        if (stat(sa.lora_dir, &st) != 0 || !S_ISDIR(st.st_mode))
            return usage("--lora-dir: '%s' is not a directory", sa.lora_dir);
    }
    if (sa.lim.max_size < sa.lim.min_size) sa.lim.min_size = sa.lim.max_size;

    /* signals are taken by the main thread only: block them before any thread starts */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP); /* a closed terminal drains too */
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN); /* a client gone mid-answer is an error return, not a signal */

    flux_ctx *ctx = cli_make_context(&a);
    if (!ctx) return usage("out of memory creating the context");
    if (flux_error(ctx)[0]) {
        fprintf(stderr, "flux-server: %s\n", flux_error(ctx));
        flux_free(ctx);
        return CLI_EXIT_FAIL;
    }
    if (cli_load_model_and_loras(ctx, &a) != CLI_EXIT_OK) {
        flux_free(ctx);
        return CLI_EXIT_FAIL;
    }
    static srv_server s;
    s.lim = sa.lim;
    s.api_key = sa.api_key;
    s.lora_dir = sa.lora_dir;
    s.timeout_s = sa.timeout_s;
    s.header_timeout_s = sa.header_timeout_s;
    s.max_conns = sa.max_conns;
    s.max_conns_per_ip = sa.max_conns_per_ip;
    s.access_log = sa.access_log;
    s.check_host = loopback(sa.host);
    s.allow_hosts = sa.allow_hosts;
    s.cors_origins = sa.cors_origins;
    s.verbose = a.quiet ? 0 : 1 + a.verbose;
    s.route = srv_api_route;
    if (srv_queue_start(&s.q, ctx, sa.max_queue, sa.lora_dir, s.verbose) != 0) {
        fprintf(stderr, "flux-server: cannot start the worker: %s\n", flux_error(ctx)[0] ? flux_error(ctx) : strerror(errno));
        flux_free(ctx);
        return CLI_EXIT_FAIL;
    }
    s.model_name = s.q.info.name;
    s.q.keep.ttl_s = sa.result_ttl_s;
    s.q.keep.max_bytes = sa.max_results_bytes;
    char why[512];
    int port = 0;
    if (srv_http_start(&s, sa.host, sa.port, &port, why, sizeof why) != 0) {
        fprintf(stderr, "flux-server: %s\n", why);
        srv_queue_drain_and_stop(&s.q);
        srv_queue_destroy(&s.q);
        flux_free(ctx);
        return CLI_EXIT_FAIL;
    }
    const int v6 = strchr(sa.host, ':') != NULL;
    /* always printed (also with -q): scripts and tests read the port from it */
    fprintf(stderr, "flux-server: %s (%s) listening on http://%s%s%s:%d%s\n", s.model_name,
            s.q.info.distilled ? "distilled" : "base", v6 ? "[" : "", sa.host, v6 ? "]" : "", port,
            sa.api_key ? " (API key required)" : "");
    while (!wait_signal(&set, -1)) {
    }
    drain(&s, &set);
    srv_http_stop(&s);
    srv_queue_drain_and_stop(&s.q);
    srv_queue_destroy(&s.q);
    flux_free(ctx);
    if (s.verbose) fprintf(stderr, "flux-server: stopped\n");
    return CLI_EXIT_OK;
}
