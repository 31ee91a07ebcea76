/*
 * cli_repl_parse.c — one line of interactive mode → a cli_repl_cmd
 * (cli_repl.h). Pure: no model, no I/O, so tests drive it directly.
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cli_repl.h"

static int perr(char *err, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int perr(char *err, size_t size, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, size, fmt, ap);
    va_end(ap);
    return -1;
}

static char *trim(char *s) {
    while (isspace((unsigned char)*s)) s++;
    size_t n = strlen(s);
    while (n && isspace((unsigned char)s[n - 1])) s[--n] = '\0';
    return s;
}

/* Whole decimal number in [lo, hi]; 0 on success. */
static int parse_long(const char *s, long lo, long hi, long *out) {
    if (!*s || strspn(s, "0123456789") != strlen(s) || strlen(s) > 18) return -1;
    long v = strtol(s, NULL, 10);
    if (v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

/* "WxH" (digits 'x' digits); 1 if the token has that form. */
static int size_token(const char *t, long *w, long *h) {
    size_t a = strspn(t, "0123456789");
    if (a == 0 || a > 6 || (t[a] != 'x' && t[a] != 'X')) return 0;
    size_t b = strspn(t + a + 1, "0123456789");
    if (b == 0 || b > 6 || t[a + 1 + b]) return 0;
    *w = strtol(t, NULL, 10);
    *h = strtol(t + a + 1, NULL, 10);
    return 1;
}

static int check_size(long w, long h, char *err, size_t size) {
    if (w < CLI_MIN_SIZE || w > CLI_MAX_SIZE || h < CLI_MIN_SIZE || h > CLI_MAX_SIZE || w % 16 || h % 16)
        return perr(err, size, "size %ldx%ld: width and height must be multiples of 16 in %d..%d", w, h, CLI_MIN_SIZE,
                    CLI_MAX_SIZE);
    return 0;
}

/* "$" or "$N"; 1 if the token has that form (*handle = N or CLI_REPL_LAST). */
static int handle_token(const char *t, long *handle, int *bad) {
    *bad = 0;
    if (t[0] != '$') return 0;
    if (!t[1]) {
        *handle = CLI_REPL_LAST;
        return 1;
    }
    if (parse_long(t + 1, 0, INT_MAX, handle)) *bad = 1;
    return 1;
}

/* Next whitespace-separated token of *p (NUL-terminated in place), or NULL. */
static char *next_token(char **p) {
    char *s = *p;
    while (isspace((unsigned char)*s)) s++;
    if (!*s) return *p = s, NULL;
    char *e = s;
    while (*e && !isspace((unsigned char)*e)) e++;
    if (*e) *e++ = '\0';
    *p = e;
    return s;
}

static int parse_command(char *line, cli_repl_cmd *c, char *err, size_t size) {
    char *p = line + 1;
    char *name = next_token(&p), *arg = next_token(&p), *arg2 = next_token(&p), *extra = next_token(&p);
    long v;
    if (!name) return perr(err, size, "'!' needs a command (!help lists them)");
    for (char *q = name; *q; q++) *q = (char)tolower((unsigned char)*q);
#define NO_MORE(n)                                                                                       \
    do {                                                                                                 \
        if ((n) < 1 && arg) return perr(err, size, "!%s takes no argument", name);                       \
        if ((n) < 2 && arg2) return perr(err, size, "!%s: unexpected '%s'", name, arg2);                 \
        if (extra) return perr(err, size, "!%s: unexpected '%s'", name, extra);                          \
    } while (0)
    if (!strcmp(name, "quit") || !strcmp(name, "q") || !strcmp(name, "exit")) {
        NO_MORE(0);
        c->kind = REPL_QUIT;
    } else if (!strcmp(name, "help") || !strcmp(name, "h") || !strcmp(name, "?")) {
        NO_MORE(0);
        c->kind = REPL_HELP;
    } else if (!strcmp(name, "images") || !strcmp(name, "list")) {
        NO_MORE(0);
        c->kind = REPL_IMAGES;
    } else if (!strcmp(name, "seed")) {
        NO_MORE(1);
        c->kind = REPL_SEED;
        if (!arg) return perr(err, size, "!seed needs a number or 'random'");
        if (!strcasecmp(arg, "random")) c->random = 1;
        else {
            errno = 0;
            char *end;
            unsigned long long s = strtoull(arg, &end, 10);
            if (!*arg || *end || arg[0] == '-' || errno || s == UINT64_MAX)
                return perr(err, size, "!seed: '%s' is not a seed (0..%llu or 'random')", arg,
                            (unsigned long long)(UINT64_MAX - 1));
            c->seed = s;
        }
    } else if (!strcmp(name, "size")) {
        NO_MORE(1);
        c->kind = REPL_SIZE;
        long w, h;
        if (arg && !strcasecmp(arg, "auto")) c->width = c->height = 0;
        else if (!arg || !size_token(arg, &w, &h)) return perr(err, size, "!size needs WxH (e.g. 512x512) or 'auto'");
        else if (check_size(w, h, err, size)) return -1;
        else c->width = (int)w, c->height = (int)h;
    } else if (!strcmp(name, "steps")) {
        NO_MORE(1);
        c->kind = REPL_STEPS;
        if (arg && !strcasecmp(arg, "auto")) c->random = 1;
        else if (!arg || parse_long(arg, 1, CLI_MAX_STEPS, &v))
            return perr(err, size, "!steps needs a number 1..%d or 'auto'", CLI_MAX_STEPS);
        else c->steps = (int)v;
    } else if (!strcmp(name, "guidance")) {
        NO_MORE(1);
        c->kind = REPL_GUIDANCE;
        char *end = NULL;
        double g = arg ? strtod(arg, &end) : 0;
        if (arg && !strcasecmp(arg, "auto")) c->random = 1;
        else if (!arg || !*arg || *end || !isfinite(g) || g < 0 || g > FLUX_GUIDANCE_MAX ||
                 strspn(arg, "0123456789.eE+-") != strlen(arg))
            return perr(err, size, "!guidance needs a number 0..%d or 'auto'", FLUX_GUIDANCE_MAX);
        else c->guidance = (float)g;
    } else if (!strcmp(name, "schedule")) {
        NO_MORE(2);
        c->kind = REPL_SCHEDULE;
        if (!arg) return perr(err, size, "!schedule needs shifted, linear or power [ALPHA]");
        if (!strcasecmp(arg, "shifted")) c->schedule = FLUX_SCHEDULE_SHIFTED;
        else if (!strcasecmp(arg, "linear")) c->schedule = FLUX_SCHEDULE_LINEAR;
        else if (!strcasecmp(arg, "power")) c->schedule = FLUX_SCHEDULE_POWER;
        else return perr(err, size, "!schedule: '%s' is not shifted, linear or power", arg);
        if (arg2) {
            char *end;
            double a = strtod(arg2, &end);
            if (c->schedule != FLUX_SCHEDULE_POWER) return perr(err, size, "!schedule: only power takes an ALPHA");
            if (!*arg2 || *end || !isfinite(a) || a <= 0 || a > 100)
                return perr(err, size, "!schedule power: ALPHA '%s' is not a number in (0, 100]", arg2);
            c->alpha = (float)a;
        }
    } else if (!strcmp(name, "batch")) {
        NO_MORE(1);
        c->kind = REPL_BATCH;
        if (!arg || parse_long(arg, 1, CLI_MAX_BATCH, &v))
            return perr(err, size, "!batch needs a number 1..%d", CLI_MAX_BATCH);
        c->batch = (int)v;
    } else if (!strcmp(name, "save")) {
        NO_MORE(2);
        c->kind = REPL_SAVE;
        long h;
        int bad;
        if (!arg || !arg2 || !handle_token(arg, &h, &bad) || bad)
            return perr(err, size, "!save needs an image handle and a file: !save $N FILE.png");
        c->handle = (int)h;
        const char *dot = strrchr(arg2, '.');
        if (!dot || strchr(dot, '/') || (strcasecmp(dot, ".png") && strcasecmp(dot, ".ppm")))
            return perr(err, size, "!save: '%s': unsupported image type (use .png or .ppm)", arg2);
        c->file = arg2;
    } else if (!strcmp(name, "lora")) {
        NO_MORE(2);
        if (!arg) return perr(err, size, "!lora needs a file and an optional scale (!lora FILE [SCALE]), or off");
        if (!strcasecmp(arg, "off")) {
            NO_MORE(1);
            c->kind = REPL_LORA_OFF;
        } else {
            c->kind = REPL_LORA;
            c->file = arg;
            c->scale = 1.0f;
            if (arg2) {
                char *end;
                double x = strtod(arg2, &end);
                if (!*arg2 || *end || !isfinite(x) || fabs(x) > CLI_MAX_LORA_SCALE ||
                    strspn(arg2, "0123456789.eE+-") != strlen(arg2))
                    return perr(err, size, "!lora: scale '%s' is not a number in %g..%g", arg2, -CLI_MAX_LORA_SCALE,
                                CLI_MAX_LORA_SCALE);
                c->scale = (float)x;
            }
        }
    } else if (!strcmp(name, "loras")) {
        NO_MORE(0);
        c->kind = REPL_LORAS;
    } else if (!strcmp(name, "show")) {
        NO_MORE(1);
        c->kind = REPL_SHOW;
        c->on = -1;
        if (arg && !strcasecmp(arg, "on")) c->on = 1;
        else if (arg && !strcasecmp(arg, "off")) c->on = 0;
        else if (arg) return perr(err, size, "!show takes on or off");
    } else {
        return perr(err, size, "unknown command '!%s' (!help lists them)", name);
    }
#undef NO_MORE
    return 0;
}

int cli_repl_parse(char *line, cli_repl_cmd *c, char *err, size_t size) {
    memset(c, 0, sizeof *c);
    if (size) err[0] = '\0';
    line = trim(line);
    if (!*line) return 0; /* REPL_EMPTY */
    if (line[0] == '!') return parse_command(line, c, err, size);
    c->kind = REPL_GENERATE;
    if (line[0] == '\\') { /* escaped: the rest is the prompt as written */
        c->prompt = line + 1;
        if (!*c->prompt) return perr(err, size, "empty prompt");
        return 0;
    }
    /* leading size and handle tokens, in any order */
    char *p = line;
    int have_size = 0;
    for (;;) {
        while (isspace((unsigned char)*p)) p++;
        char *start = p;
        while (*p && !isspace((unsigned char)*p)) p++;
        char saved = *p;
        *p = '\0';
        long w, h, handle;
        int bad;
        if (size_token(start, &w, &h)) {
            if (have_size) return perr(err, size, "two sizes in one line ('%s')", start);
            if (check_size(w, h, err, size)) return -1;
            c->width = (int)w, c->height = (int)h;
            have_size = 1;
        } else if (handle_token(start, &handle, &bad)) {
            if (bad) return perr(err, size, "'%s' is not an image handle ($N, or $ for the last image)", start);
            if (c->n_refs == FLUX_MAX_REFS) return perr(err, size, "at most %d reference images", FLUX_MAX_REFS);
            c->refs[c->n_refs++] = (int)handle;
        } else {
            *p = saved;
            p = start;
            break;
        }
        *p = saved;
        if (!saved) break;
        p++;
    }
    c->prompt = trim(p);
    if (!*c->prompt) return perr(err, size, "no prompt after the size and image handles");
    return 0;
}
