/*
 * test_surface.c — the public surface of the library (README "Architecture",
 * "Public surface"): libflux.so exports exactly the FLUX_API functions of
 * flux.h, a program built against flux.h alone links and runs with it, and
 * the CLI uses flux.h plus only the internal functions src/cli/cli_internal.h
 * lists.
 */
#include "tests/test.h"

#include <libgen.h>
#include <stdlib.h>
#include <string.h>

/* A list of names (malloc'd strings). */
typedef struct {
    char **v;
    int n;
} names;

static void names_add(names *s, const char *p, size_t len) {
    for (int i = 0; i < s->n; i++)
        if (strlen(s->v[i]) == len && !memcmp(s->v[i], p, len)) return;
    s->v = realloc(s->v, (size_t)(s->n + 1) * sizeof *s->v);
    s->v[s->n++] = strndup(p, len);
}

static int names_has(const names *s, const char *name) {
    for (int i = 0; i < s->n; i++)
        if (!strcmp(s->v[i], name)) return 1;
    return 0;
}

static void names_free(names *s) {
    for (int i = 0; i < s->n; i++) free(s->v[i]);
    free(s->v);
}

static int ident_char(char c) { return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'); }

/* Every identifier of `text` that starts with `prefix` (and is not the
 * tail of a longer identifier). */
static void collect_prefixed(names *s, const char *text, const char *prefix) {
    const size_t pl = strlen(prefix);
    for (const char *p = text; (p = strstr(p, prefix)); p += pl) {
        if (p > text && ident_char(p[-1])) continue;
        size_t len = 0;
        while (ident_char(p[len])) len++;
        names_add(s, p, len);
    }
}

/* The function names flux.h declares with FLUX_API; a declaration without
 * it (a line starting with a type and naming flux_...( ) is a failure: it
 * would be missing from libflux.so. */
static void flux_h_api(names *s, const char *h) {
    for (const char *line = h; line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
        const char *end = strchr(line, '\n') ? strchr(line, '\n') : line + strlen(line);
        const char *paren = memchr(line, '(', (size_t)(end - line));
        const int api = !strncmp(line, "FLUX_API ", 9);
        if (!paren || (!api && (!(*line >= 'a' && *line <= 'z') || !strncmp(line, "typedef", 7)))) continue;
        const char *name = paren;
        while (name > line && ident_char(name[-1])) name--;
        if (strncmp(name, "flux_", 5)) continue;
        if (!api)
            fx_test_fail(__FILE__, __LINE__, "flux.h declares %.*s without FLUX_API", (int)(paren - name), name);
        else
            names_add(s, name, (size_t)(paren - name));
    }
}

/* libflux.so next to the CLI under test (both are $(OUT) products). */
static const char *shared_lib(void) {
    static char path[4096];
    char bin[4096];
    snprintf(bin, sizeof bin, "%s", fx_test_flux_bin());
    snprintf(path, sizeof path, "%s/libflux.so", dirname(bin));
    return path;
}

/* The compiler the library was built with ("flux.c 0.1.0 (cc 12 ...)"). */
static void build_cc(char *cc, size_t size) {
    const char *info = strchr(flux_build_info(), '(');
    snprintf(cc, size, "cc");
    if (info) {
        size_t len = strcspn(info + 1, " )");
        if (len > 0 && len < size) snprintf(cc, size, "%.*s", (int)len, info + 1);
    }
}

TEST(libflux_so_exports_only_flux_h) {
    char *h = fx_test_read_file(fx_test_path("../flux.h"), NULL);
    REQUIRE(h);
    names api = {0};
    flux_h_api(&api, h);
    free(h);
    CHECK_MSG(api.n >= 30, "found %d FLUX_API functions in flux.h", api.n);
    REQUIRE_MSG(fx_test_file_exists(shared_lib()), "%s not built", shared_lib());

    char cmd[8192], *out = NULL;
    snprintf(cmd, sizeof cmd, "nm -D --defined-only '%s' | awk '{print $NF}'", shared_lib());
    REQUIRE_MSG(fx_test_run(cmd, &out) == 0 && out, "%s: %s", cmd, out ? out : "");
    names exported = {0};
    int stray = 0;
    for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n")) {
        names_add(&exported, line, strlen(line));
        if (!names_has(&api, line) && stray++ < 10) fx_test_fail(__FILE__, __LINE__, "exported but not in flux.h: %s", line);
    }
    CHECK_MSG(stray == 0, "%d symbols exported beyond flux.h's %d functions", stray, api.n);
    for (int i = 0; i < api.n; i++) CHECK_MSG(names_has(&exported, api.v[i]), "flux.h's %s is not exported", api.v[i]);
    free(out);
    names_free(&exported);
    names_free(&api);
}

/* A program that knows only flux.h links against libflux.so and runs (it
 * needs the soname, libflux.so.<major>, as after `make install`; the
 * sanitizer build links the sanitizer runtime first, as it must). */
TEST(libflux_so_links_a_flux_h_program) {
    REQUIRE_MSG(fx_test_file_exists(shared_lib()), "%s not built", shared_lib());
    const char *src = fx_test_tmp_path("embed.c");
    static const char program[] =
        "#include <stdio.h>\n#include <string.h>\n#include \"flux.h\"\n"
        "int main(void) {\n"
        "    flux_ctx *ctx = flux_new(NULL);\n"
        "    flux_image *img = flux_image_new(16, 16, 3);\n"
        "    int ok = ctx && img && flux_threads(ctx) > 0 && !strcmp(flux_version(), FLUX_VERSION_STRING) &&\n"
        "             flux_load(ctx, NULL, NULL) == FLUX_ERR_INVALID_ARG;\n"
        "    printf(\"%s %s\\n\", flux_status_name(FLUX_ERR_IO), ok ? \"ok\" : \"failed\");\n"
        "    flux_image_free(img);\n"
        "    flux_free(ctx);\n"
        "    return !ok;\n"
        "}\n";
    REQUIRE(fx_test_write_file(src, program, sizeof program - 1) == 0);
    char cc[64];
    build_cc(cc, sizeof cc);
    const char *san = strstr(flux_build_info(), "sanitize=1") ? "-fsanitize=address,undefined" : "";
    char libdir[4096];
    snprintf(libdir, sizeof libdir, "%s", shared_lib());
    dirname(libdir);
    char cmd[16384], *out = NULL;
    snprintf(cmd, sizeof cmd,
             "cd '%s' && %s -std=c11 %s -I'%s/..' embed.c -o embed -L'%s' -lflux && "
             "ln -s '%s/libflux.so' libflux.so.%d && LD_LIBRARY_PATH=. ./embed",
             fx_test_tmpdir(), cc, san, fx_test_path(""), libdir, libdir, FLUX_VERSION_MAJOR);
    const int rc = fx_test_run(cmd, &out);
    CHECK_MSG(rc == 0 && out && strstr(out, "FLUX_ERR_IO ok"), "exit %d: %s\n%s", rc, cmd, out ? out : "");
    free(out);
}

/* The objects of the program in `dir` (src/cli, src/server) use flux_*
 * functions and, of the internals, only those `list` names (compiled here,
 * with `cflags`, so any build variant checks the same sources). */
static void check_listed_internals(const char *dir, const char *list, const char *cflags, int min_listed,
                                   int min_flux_refs) {
    char path[256];
    snprintf(path, sizeof path, "../%s", list);
    char *listed_text = fx_test_read_file(fx_test_path(path), NULL);
    REQUIRE(listed_text);
    names listed = {0};
    collect_prefixed(&listed, listed_text, "fx_");
    free(listed_text);
    CHECK_MSG(listed.n >= min_listed, "%s names %d fx_ functions", list, listed.n);
    char cc[64];
    build_cc(cc, sizeof cc);
    char cmd[8192], *out = NULL;
    snprintf(cmd, sizeof cmd,
             "cd '%s/..' && for f in %s/*.c; do o='%s'/$(basename $f .c).o; "
             "%s -std=c11 -D_GNU_SOURCE -I. %s -c $f -o $o || exit 1; nm -u $o | awk -v f=$f '{print f, $NF}'; done",
             fx_test_path(""), dir, fx_test_tmpdir(), cc, cflags);
    REQUIRE_MSG(fx_test_run(cmd, &out) == 0 && out, "%s: %s", cmd, out ? out : "");
    int files = 0, unlisted = 0;
    for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n")) {
        char *sym = strchr(line, ' ');
        if (!sym) continue;
        *sym++ = '\0';
        if (strstr(sym, "flux_") == sym) files++;
        if (strstr(sym, "fx_") == sym && !names_has(&listed, sym) && unlisted++ < 10)
            fx_test_fail(__FILE__, __LINE__, "%s uses %s, which %s does not list", line, sym, list);
    }
    CHECK_MSG(files > min_flux_refs, "only %d flux_ references found in %s's objects", files, dir);
    CHECK_EQ_INT(unlisted, 0);
    free(out);
    names_free(&listed);
}

/* The CLI: src/cli/cli_internal.h. */
TEST(cli_uses_flux_h_and_the_listed_internals) {
    check_listed_internals("src/cli", "src/cli/cli_internal.h", "", 10, 20);
}

/* The layer flux and flux-server share (src/app): src/app/app_internal.h;
 * it includes neither program (siblings over it, not one inside the other). */
TEST(app_uses_flux_h_and_the_listed_internals) {
    check_listed_internals("src/app", "src/app/app_internal.h", "", 2, 5);
    char cmd[1024], *out = NULL;
    snprintf(cmd, sizeof cmd,
             "cd '%s/..' && { grep -l '#include \"src/cli/' src/app/*.[ch] src/server/*.[ch]; "
             "grep -l '#include \"src/server/' src/app/*.[ch] src/cli/*.[ch]; true; }",
             fx_test_path(""));
    REQUIRE(fx_test_run(cmd, &out) == 0);
    CHECK_MSG(out && !out[0], "files including another program's folder: %s", out ? out : "(none)");
    free(out);
}

/* flux-server: src/server/srv_internal.h (its sources need the HTTP and
 * image libraries' headers: tools/install_deps.sh --server). */
TEST(server_uses_flux_h_and_the_listed_internals) {
    if (!fx_test_file_exists("/usr/include/microhttpd.h") || !fx_test_file_exists("/usr/include/jpeglib.h") ||
        !fx_test_file_exists("/usr/include/webp/encode.h"))
        SKIP("libmicrohttpd-dev, libjpeg-dev or libwebp-dev not installed (tools/install_deps.sh --server)");
    check_listed_internals("src/server", "src/server/srv_internal.h", "", 10, 10);
    /* the HTTP library stays in srv_http.c: the endpoints and the jobs never see its types */
    char cmd[1024], *out = NULL;
    snprintf(cmd, sizeof cmd, "cd '%s/..' && grep -l '<microhttpd.h>\\|MHD_' src/server/*.[ch] || true", fx_test_path(""));
    REQUIRE(fx_test_run(cmd, &out) == 0);
    CHECK_MSG(out && !strcmp(out, "src/server/srv_http.c\n"), "files naming libmicrohttpd: %s", out ? out : "(none)");
    free(out);
}
