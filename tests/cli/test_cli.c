/*
 * test_cli.c — the flux command line, run as a program (FLUX_BIN).
 *
 * Every misuse must give exactly one line "flux: ..." naming the problem
 * and the right exit code: 2 for a bad command line, 1 for a runtime
 * failure, 0 for --help/--version/--cpu-info. No failure may leave an
 * output file behind.
 */
#include "tests/test.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "flux.h"

static char g_model[1024]; /* tests/golden/model */
static char g_noise[1024]; /* tests/golden/t2i-48x64-2step/noise.npy: (128, 3, 4) */

static void setup(void) {
    snprintf(g_model, sizeof g_model, "%s", fx_test_path("golden/model"));
    snprintf(g_noise, sizeof g_noise, "%s", fx_test_path("golden/t2i-48x64-2step/noise.npy"));
}

static int run_flux(const char *args, char **out) {
    char cmd[16384];
    snprintf(cmd, sizeof cmd, "'%s' %s </dev/null", fx_test_flux_bin(), args);
    return fx_test_run(cmd, out);
}

static int count_lines(const char *s) {
    int n = 0;
    for (; *s; s++) n += *s == '\n';
    return n;
}

/* Run `flux args`: exit code `code`, output containing `fragment`; failures
 * print exactly one line starting with "flux: ". */
static void expect_run(int line, const char *args, int code, const char *fragment) {
    char *out = NULL;
    int rc = run_flux(args, &out);
    if (rc != code) fx_test_fail(__FILE__, line, "flux %s: exit %d, want %d; output: %s", args, rc, code, out);
    if (fragment && !strstr(out, fragment))
        fx_test_fail(__FILE__, line, "flux %s: '%s' not in output: %s", args, fragment, out);
    if (code != 0 && (count_lines(out) != 1 || strncmp(out, "flux: ", 6)))
        fx_test_fail(__FILE__, line, "flux %s: want one 'flux: ' line, got: %s", args, out);
    free(out);
}
#define EXPECT(args, code, fragment) expect_run(__LINE__, args, code, fragment)

/* ------------------------------------------------------------ info */

TEST(cli_help_version_cpu_info) {
    char *out = NULL;
    CHECK_EQ_INT(run_flux("--help", &out), 0);
    const char *opts[] = {"-d, --dir", "-p, --prompt", "-o, --output", "-W, --width", "-H, --height",
                          "-s, --steps", "-S, --seed", "-g, --guidance", "-i, --input", "-t, --threads",
                          "-q, --quiet", "-v, --verbose", "-h, --help", "--version", "--cpu-info", "--negative",
                          "--linear", "--power ", "--power-alpha", "--base", "--distilled", "--precision", "--isa",
                          "--no-mmap", "--noise", "--embeddings", "--dump", "--tokenize", "--raw", "-n, --batch",
                          "--cache-dir", "--no-cache", "--transformer", "--show", "Exit status"};
    for (size_t i = 0; i < sizeof opts / sizeof *opts; i++)
        CHECK_MSG(strstr(out, opts[i]) != NULL, "--help does not document '%s'", opts[i]);
    free(out);
    EXPECT("-h", 0, "usage: flux");
    EXPECT("--version", 0, "flux.c " FLUX_VERSION_STRING);
    EXPECT("--cpu-info", 0, "kernels:");
    EXPECT("--cpu-info", 0, "ISA");
    EXPECT("--cpu-info --isa scalar", 0, "kernels:  scalar");
    EXPECT("--cpu-info -t 1", 0, "threads:  1");
#if defined(__x86_64__)
    EXPECT("--cpu-info --isa neon", 2, "--isa neon: this CPU runs scalar");
#endif
    /* environment values that are not understood are refused, not ignored */
    char cmd[4096], *env_out = NULL;
    snprintf(cmd, sizeof cmd, "FLUX_ISA=avx9 '%s' --cpu-info", fx_test_flux_bin());
    CHECK_EQ_INT(fx_test_run(cmd, &env_out), 1);
    CHECK_MSG(env_out && !strncmp(env_out, "flux: FLUX_ISA='avx9' is unknown", 32), "%s", env_out);
    free(env_out);
    snprintf(cmd, sizeof cmd, "FLUX_PRECISION=f64 '%s' --cpu-info", fx_test_flux_bin());
    CHECK_EQ_INT(fx_test_run(cmd, &env_out), 1);
    CHECK_MSG(env_out && strstr(env_out, "flux: FLUX_PRECISION='f64' is not a precision"), "%s", env_out);
    /* an error that exits does not also claim the value was ignored */
    CHECK_MSG(env_out && !strstr(env_out, "ignored"), "%s", env_out);
    free(env_out);
    EXPECT("--cpu-info --isa sse9", 2, "'sse9' is not an ISA (scalar, avx2, avx512, avx512bf16, amx, neon)");
    EXPECT("--cpu-info", 0, "chosen for this CPU");
}

/* ------------------------------------------------------------ syntax */

TEST(cli_unknown_and_malformed_options) {
    EXPECT("", 2, "missing -d DIR");
    EXPECT("--bogus", 2, "unknown option '--bogus'");
    EXPECT("--widht 256", 2, "did you mean --width?");
    EXPECT("-x", 2, "unknown option '-x'");
    EXPECT("-qx", 2, "unknown option '-qx'");
    EXPECT("a-prompt", 2, "unexpected argument 'a-prompt'");
    EXPECT("-- a-prompt", 2, "unexpected argument 'a-prompt'");
    EXPECT("-W", 2, "-W: missing value");
    EXPECT("--prompt", 2, "--prompt: missing value");
    EXPECT("-p -W 256", 2, "-p: missing value (found option '-W')");
    EXPECT("-o --width=256", 2, "-o: missing value (found option '--width=256')");
    EXPECT("--linear=1", 2, "--linear takes no value");
    EXPECT("-q -v", 2, "-q and -v exclude each other");
}

TEST(cli_bad_numbers) {
    EXPECT("-W 12x", 2, "-W: '12x' is not a number");
    EXPECT("-W ''", 2, "-W: '' is not a number");
    EXPECT("-W ' 256'", 2, "is not a number");
    EXPECT("-W +256", 2, "is not a number");
    EXPECT("-W 0x100", 2, "is not a number");
    EXPECT("-W 250", 2, "-W: 250 is not a multiple of 16 (nearest valid size: 256)");
    EXPECT("-H 999", 2, "-H: 999 is not a multiple of 16 (nearest valid size: 992)");
    EXPECT("-H 1000", 2, "-H: 1000 is not a multiple of 16 (nearest valid size: 1008)");
    EXPECT("--width=2047", 2, "--width: 2047 is not a multiple of 16 (nearest valid size: 2048)");
    EXPECT("-W 32", 2, "-W: 32 is out of range (64..2048)");
    EXPECT("-W 4096", 2, "-W: 4096 is out of range (64..2048)");
    EXPECT("-W -256", 2, "-W: -256 is out of range");
    EXPECT("-W 256.0", 2, "-W: '256.0' is not a whole number");
    EXPECT("-W 99999999999999999999999", 2, "out of range");
    EXPECT("-H 1e3", 2, "-H: '1e3' is not a whole number");
    EXPECT("-s 0", 2, "-s: 0 is out of range (1..1000)");
    EXPECT("-s 1001", 2, "-s: 1001 is out of range (1..1000)");
    EXPECT("--steps=four", 2, "--steps: 'four' is not a number");
    EXPECT("-S -1", 2, "-S: -1 is out of range (0..18446744073709551614)");
    EXPECT("-S 18446744073709551615", 2, "out of range");
    EXPECT("-S 99999999999999999999", 2, "out of range");
    EXPECT("-S 12abc", 2, "-S: '12abc' is not a number");
    EXPECT("-g -1", 2, "-g: -1 is out of range");
    EXPECT("-g nan", 2, "-g: 'nan' is not a number");
    EXPECT("-g inf", 2, "-g: 'inf' is not a number");
    EXPECT("-g 1e999", 2, "-g: 1e999 is out of range");
    EXPECT("-g 0x4", 2, "-g: '0x4' is not a number");
    EXPECT("-g 4,5", 2, "-g: '4,5' is not a number");
    EXPECT("-t -1", 2, "-t: -1 is out of range (0..1024)");
    EXPECT("-t 2x", 2, "-t: '2x' is not a number");
    EXPECT("-n 0", 2, "-n: 0 is out of range (1..64)");
    EXPECT("--batch 65", 2, "--batch: 65 is out of range (1..64)");
    EXPECT("--power --power-alpha 0", 2, "--power-alpha: 0 is out of range");
    EXPECT("--power --power-alpha=-2", 2, "--power-alpha: -2 is out of range");
    EXPECT("--precision f16", 2, "--precision: 'f16' is not a precision (default, f32, int8 or bf16)");
    EXPECT("--isa avx9", 2, "--isa: 'avx9' is not an ISA");
    /* attached short values parse: the error is about -H, not -W256 */
    EXPECT("-W256 -H250", 2, "-H: 250 is not a multiple of 16");
}

TEST(cli_conflicting_options) {
    EXPECT("--linear --power", 2, "--linear and --power exclude each other");
    EXPECT("--power --linear", 2, "--linear and --power exclude each other");
    EXPECT("--base --distilled", 2, "--base and --distilled exclude each other");
    EXPECT("--cache-dir /tmp --no-cache", 2, "--cache-dir and --no-cache exclude each other");
    EXPECT("--power-alpha 3", 2, "--power-alpha: only used with --power");
    EXPECT("--raw", 2, "--raw: only used with --tokenize");
    char args[4096];
    snprintf(args, sizeof args, "-d '%s' --tokenize -o x.png", fx_test_path("golden/model"));
    EXPECT(args, 2, "-o is not used with it");
}

TEST(cli_too_many_references) {
    char args[4096] = "";
    for (int i = 0; i < FLUX_MAX_REFS + 1; i++) strcat(args, "-i ref.png ");
    EXPECT(args, 2, "-i: too many reference images (at most 16)");
}

/* ------------------------------------------------------------ files */

TEST(cli_missing_and_bad_paths) {
    setup();
    const char *tmp = fx_test_tmpdir();
    char args[8192], file[1100];
    snprintf(file, sizeof file, "%s/plain.txt", tmp);
    fx_test_write_file(file, "x", 1);

    snprintf(args, sizeof args, "-p cat -o '%s/out.png'", tmp);
    EXPECT(args, 2, "missing -d DIR");
    snprintf(args, sizeof args, "-d '%s/nope' -p cat -o '%s/out.png'", tmp, tmp);
    EXPECT(args, 2, "-d: '");
    EXPECT(args, 2, "No such file or directory");
    snprintf(args, sizeof args, "-d '%s' -p cat -o '%s/out.png'", file, tmp);
    EXPECT(args, 2, "is not a directory");
    snprintf(args, sizeof args, "-d '%s' -p cat", g_model);
    EXPECT(args, 2, "missing -o OUTPUT");
    snprintf(args, sizeof args, "-d '%s' -o '%s/out.png'", g_model, tmp);
    EXPECT(args, 2, "missing -p PROMPT");
    snprintf(args, sizeof args, "-d '%s' -p cat -o '%s/out.jpg'", g_model, tmp);
    EXPECT(args, 2, "unsupported image type (use .png or .ppm)");
    snprintf(args, sizeof args, "-d '%s' -p cat -o '%s/out'", g_model, tmp);
    EXPECT(args, 2, "unsupported image type");
    snprintf(args, sizeof args, "-d '%s' -p cat -o '%s/missing/out.png'", g_model, tmp);
    EXPECT(args, 2, "-o: directory '");
    EXPECT(args, 2, "missing' does not exist");
    snprintf(args, sizeof args, "-d '%s' -p cat -o '%s/'", g_model, tmp);
    EXPECT(args, 2, "names a directory");
    snprintf(file, sizeof file, "%s/dir.png", tmp);
    mkdir(file, 0755);
    snprintf(args, sizeof args, "-d '%s' -p cat -o '%s'", g_model, file);
    EXPECT(args, 2, "is a directory");
    snprintf(args, sizeof args, "-d '%s' -p cat -o '%s/out.png' -i '%s/nope.png'", g_model, tmp, tmp);
    EXPECT(args, 2, "-i: cannot read '");
    snprintf(args, sizeof args, "-d '%s' -p cat -o '%s/out.png' -i '%s'", g_model, tmp, tmp);
    EXPECT(args, 2, "is a directory, not a file");
    snprintf(args, sizeof args, "-d '%s' -p cat -o '%s/out.png' -i /dev/null", g_model, tmp);
    EXPECT(args, 2, "-i: '/dev/null' is not a regular file");
    snprintf(args, sizeof args, "-d '%s' -o '%s/out.png' --embeddings /dev/zero", g_model, tmp);
    EXPECT(args, 2, "--embeddings: '/dev/zero' is not a regular file");
    snprintf(args, sizeof args, "-d '%s' -p cat -o '%s/out.png' --noise '%s/nope.npy'", g_model, tmp, tmp);
    EXPECT(args, 2, "--noise: cannot read");
    snprintf(args, sizeof args, "-d '%s' -o '%s/out.png' --embeddings '%s/nope.npy'", g_model, tmp, tmp);
    EXPECT(args, 2, "--embeddings: cannot read");
    snprintf(args, sizeof args, "-d '%s' -p cat -o '%s/out.png' --transformer '%s/nope.st'", g_model, tmp, tmp);
    EXPECT(args, 2, "--transformer: cannot read");
    snprintf(args, sizeof args, "-d '%s' -p cat -o '%s/out.png' --dump '%s/plain.txt'", g_model, tmp, tmp);
    EXPECT(args, 2, "--dump: '");
    snprintf(args, sizeof args, "-d '%s' -p cat -o '%s/out.png' --dump '%s/a/b'", g_model, tmp, tmp);
    EXPECT(args, 2, "--dump: '");
    snprintf(args, sizeof args, "--tokenize -p cat");
    EXPECT(args, 2, "missing -d DIR");
    /* nothing was written by any of these */
    CHECK_EQ_INT(fx_test_dir_entries(tmp), 2); /* plain.txt and dir.png */
}

TEST(cli_runtime_failures_exit_1_without_output) {
    setup();
    const char *tmp = fx_test_tmpdir();
    char args[8192], path[1100], empty[1100];
    snprintf(empty, sizeof empty, "%s/empty_model", tmp);
    mkdir(empty, 0755);

    /* a folder that is not a model */
    snprintf(args, sizeof args, "-d '%s' -p cat -o '%s/out.png' -S 1", empty, tmp);
    EXPECT(args, 1, NULL);
    /* a corrupt reference image, read before the model */
    snprintf(path, sizeof path, "%s/bad.png", tmp);
    fx_test_write_file(path, "\x89PNG\r\n\x1a\nxx", 10);
    snprintf(args, sizeof args, "-d '%s' -p cat -o '%s/out.png' -i '%s'", g_model, tmp, path);
    EXPECT(args, 1, "bad.png");
    snprintf(path, sizeof path, "%s/empty.png", tmp);
    fx_test_write_file(path, "", 0);
    snprintf(args, sizeof args, "-d '%s' -p cat -o '%s/out.png' -i '%s'", g_model, tmp, path);
    EXPECT(args, 1, "empty file");
    /* malformed and misshapen .npy inputs */
    snprintf(path, sizeof path, "%s/bad.npy", tmp);
    fx_test_write_file(path, "\x93NUMPY\x01\x00\x04\x00{}  ", 14);
    snprintf(args, sizeof args, "-d '%s' -p cat -o '%s/out.png' --noise '%s'", g_model, tmp, path);
    EXPECT(args, 1, "--noise: ");
    snprintf(args, sizeof args, "-d '%s' -p cat -o '%s/out.png' --noise '%s' -W 256", g_model, tmp, g_noise);
    EXPECT(args, 1, "expected float32 (128, any, 16), found float32 (128, 3, 4)");
    snprintf(args, sizeof args, "-d '%s' -o '%s/out.png' --embeddings '%s'", g_model, tmp, g_noise);
    EXPECT(args, 1, "--embeddings: ");
    EXPECT(args, 1, "expected float32 (512, any)");
    CHECK_EQ_INT(fx_test_dir_entries(tmp), 4); /* empty_model, bad.png, empty.png, bad.npy: no out.png */
}


TEST(cli_tokenize_shell) {
    /* The CLI side of --tokenize: -p, stdin JSON lines, and bad lines. */
    setup();
    char cmd[8192], *out = NULL;
    snprintf(cmd, sizeof cmd, "'%s' -d '%s' --tokenize --raw -p 'a cat'", fx_test_flux_bin(), g_model);
    int rc = fx_test_run(cmd, &out);
    CHECK_MSG(rc == 0 && !strcmp(out, "64 8251\n"), "rc %d: %s", rc, out);
    free(out);
    snprintf(cmd, sizeof cmd, "printf '\"a cat\"\\n\"a\"\\n' | '%s' -d '%s' --tokenize --raw", fx_test_flux_bin(),
             g_model);
    rc = fx_test_run(cmd, &out);
    CHECK_MSG(rc == 0 && !strcmp(out, "64 8251\n64\n"), "rc %d: %s", rc, out);
    free(out);
    snprintf(cmd, sizeof cmd, "printf '\"a\"\\nnot json\\n' | '%s' -d '%s' --tokenize --raw", fx_test_flux_bin(),
             g_model);
    rc = fx_test_run(cmd, &out);
    CHECK_MSG(rc == 1 && strstr(out, "64\n") && strstr(out, "flux: stdin line 2:"), "rc %d: %s", rc, out);
    free(out);
    snprintf(cmd, sizeof cmd, "echo 42 | '%s' -d '%s' --tokenize", fx_test_flux_bin(), g_model);
    rc = fx_test_run(cmd, &out);
    CHECK_MSG(rc == 1 && strstr(out, "expected a JSON string, found number"), "rc %d: %s", rc, out);
    free(out);
}

TEST(cli_batch_output_names) {
    /* -n 3 -o out.png: out.png, out-1.png, out-2.png with seeds S, S+1, S+2,
     * each the image a single run with its seed gives */
    setup();
    const char *tmp = fx_test_tmpdir();
    char args[4096];
    snprintf(args, sizeof args, "-q -d '%s' -p 'a red apple' -W 64 -H 64 -s 2 -S 40 -n 3 -o '%s/out.png'", g_model, tmp);
    EXPECT(args, 0, NULL);
    snprintf(args, sizeof args, "-q -d '%s' -p 'a red apple' -W 64 -H 64 -s 2 -S 41 -o '%s/single.png'", g_model, tmp);
    EXPECT(args, 0, NULL);
    CHECK_EQ_INT(fx_test_dir_entries(tmp), 5); /* 3 + single.png + the per-test cache folder */
    flux_ctx *ctx = flux_new(NULL);
    const char *names[3] = {"out.png", "out-1.png", "out-2.png"}, *seeds[3] = {"40", "41", "42"};
    flux_image *img[3] = {NULL, NULL, NULL}, *single = NULL;
    char path[2048];
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/%s", tmp, names[i]);
        CHECK_MSG(flux_image_load(ctx, path, &img[i]) == FLUX_OK, "%s: %s", names[i], flux_error(ctx));
        const char *seed = img[i] ? flux_image_get_text(img[i], "seed") : NULL;
        CHECK_MSG(seed && !strcmp(seed, seeds[i]), "%s: seed %s, want %s", names[i], seed ? seed : "none", seeds[i]);
    }
    snprintf(path, sizeof path, "%s/single.png", tmp);
    CHECK(flux_image_load(ctx, path, &single) == FLUX_OK);
    CHECK(img[1] && single && !memcmp(img[1]->data, single->data, (size_t)64 * 64 * 3));
    for (int i = 0; i < 3; i++) flux_image_free(img[i]);
    flux_image_free(single);
    flux_free(ctx);
}

/* Every long option the README names exists: it is in `flux --help`, or is
 * in `flux-bench --help`, or one of the few options of other programs the README shows
 * (pkg-config's --libs, gen_model's --preset, install_deps.sh's --test and --server). Options in the
 * flux-server section are checked against `flux-server --help` when it is built (make test builds it when
 * libmicrohttpd is present), else skipped. Catches documentation drift both ways a
 * rename can go wrong. */
TEST(cli_readme_options_are_real) {
    char *readme = fx_test_read_file(fx_test_path("../README.md"), NULL), *help = NULL;
    REQUIRE_MSG(readme, "cannot read README.md");
    REQUIRE(run_flux("--help", &help) == 0);
    /* flux-bench's options are documented by its own --help */
    char *bench_help = NULL, cmd[4096];
    if (getenv("FLUX_BENCH")) {
        snprintf(cmd, sizeof cmd, "'%s' --help", getenv("FLUX_BENCH"));
        REQUIRE(fx_test_run(cmd, &bench_help) == 0);
    }
    char *server_help = NULL;
    const char *server_bin = getenv("FLUX_SERVER");
    if (server_bin && access(server_bin, X_OK) == 0) {
        snprintf(cmd, sizeof cmd, "'%s' --help", server_bin);
        REQUIRE(fx_test_run(cmd, &server_help) == 0);
    }
    const char *server_from = strstr(readme, "\n## flux-server");
    const char *server_to = server_from ? strstr(server_from + 1, "\n## ") : NULL;
    if (server_from && !server_to) server_to = server_from + strlen(server_from);
    static const char *other_programs[] = {"--libs", "--preset", "--test", "--server", "--minimal"}; /* --minimal: download_model.sh */
    int checked = 0;
    for (const char *p = readme; (p = strstr(p, "--")) != NULL; p += 2) {
        const int in_server = server_from && p > server_from && p < server_to;
        if (in_server && !server_help) continue;
        if (p > readme && p[-1] == '-') continue; /* inside "---" table rules */
        if (p[2] < 'a' || p[2] > 'z') continue;
        size_t n = 2;
        while ((p[n] >= 'a' && p[n] <= 'z') || (p[n] >= '0' && p[n] <= '9') || p[n] == '-') n++;
        char opt[64];
        if (n >= sizeof opt) continue;
        memcpy(opt, p, n), opt[n] = 0;
        int other = 0;
        for (size_t i = 0; i < sizeof other_programs / sizeof *other_programs; i++)
            other |= !strcmp(opt, other_programs[i]);
        if (other) continue;
        /* the option as a whole word of a help text */
        int found = 0;
        for (int t = 0; t < 3 && !found; t++)
            for (const char *h = t == 2 ? (in_server ? server_help : NULL) : t ? bench_help : help;
                 h && (h = strstr(h, opt)) != NULL; h += n) {
                char next = h[n];
                if (!((next >= 'a' && next <= 'z') || next == '-')) { found = 1; break; }
            }
        CHECK_MSG(found, "README names %s, which neither flux --help nor flux-bench --help%s documents", opt,
                  in_server ? " nor flux-server --help" : "");
        checked++;
    }
    CHECK_MSG(checked >= 20, "only %d options found in README.md", checked);
    free(readme);
    free(help);
    free(bench_help);
    free(server_help);
}

/* ------------------------------------------------------------ combinations */

/* Bad combinations are refused at parse time (exit 2, before the model
 * loads), not after loading by the library (exit 1). */
TEST(cli_bad_combinations_at_parse_time) {
    setup();
    char emb[1024];
    snprintf(emb, sizeof emb, "%s", fx_test_path("golden/t2i-48x64-2step/out/emb.npy"));
    static const struct {
        const char *opts, *fragment; /* after -d MODEL -p cat -o TMP/o.png; %s in opts: a file */
        int file;                    /* 1: the noise .npy, 2: the embeddings .npy */
    } cases[] = {
        /* one guidance range (FLUX_GUIDANCE_MAX) for the CLI, interactive mode and library */
        {"-g 500", "-g: 500 is out of range (0..100)", 0},
        {"-g 101", "out of range (0..100)", 0},
        {"-g 2 --distilled", "-g: 2 asks for classifier-free guidance, which --distilled turns off", 0},
        {"--negative dog --distilled", "--negative: needs classifier-free guidance, which --distilled turns off", 0},
        {"--negative dog -g 1", "--negative: only used with classifier-free guidance (-g above 1); -g is 1", 0},
        {"--noise '%s' -n 2", "--noise: gives the noise of one image; -n 2 draws each image's noise from its seed", 1},
        /* the prompt would be ignored, yet recorded in the PNG */
        {"--embeddings '%s'", "-p and --embeddings exclude each other", 2},
        /* seeds S .. S+n-1 must not wrap past the largest seed */
        {"-S 18446744073709551613 -n 3",
         "-S 18446744073709551613 with -n 3: the last seed would pass 18446744073709551614", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char opts[2048], args[8192];
        snprintf(opts, sizeof opts, cases[i].opts, cases[i].file == 1 ? g_noise : emb);
        snprintf(args, sizeof args, "-d '%s' -p cat -o '%s' %s", g_model, fx_test_tmp_path("o.png"), opts);
        EXPECT(args, 2, cases[i].fragment);
    }
    char args[8192];
    snprintf(args, sizeof args, "-d '%s' -p cat -o '%s' -S 18446744073709551612 -n 3 -W 64 -H 64 -s 1 -q", g_model,
             fx_test_tmp_path("o.png"));
    EXPECT(args, 0, NULL); /* the last seed is exactly the largest */
    CHECK(fx_test_file_exists(fx_test_tmp_path("o-2.png")));
    /* sizes far out of range name the real range, not the parser's bounds */
    EXPECT("-W 99999999999999999999", 2, "-W: 99999999999999999999 is out of range (64..2048)");
    EXPECT("-H -99999999999999999999", 2, "-H: -99999999999999999999 is out of range (64..2048)");
    EXPECT("-H 4611686018427387904", 2, "-H: 4611686018427387904 is out of range (64..2048)");
    EXPECT("-s 99999999999999999999", 2, "-s: 99999999999999999999 is out of range (1..1000)");
}

/* -i without -W/-H takes the first reference's processed size, which must
 * be inside 64..2048 like -W/-H: refused before the model loads, with a hint. */
TEST(cli_reference_size_outside_range) {
    setup();
    const char *tmp = fx_test_tmpdir();
    char args[8192];
    const char *ref32 = fx_test_path("golden/multiref-48x48-2step/ref0.png"); /* 32x32 */
    snprintf(args, sizeof args, "-d '%s' -p cat -o '%s/o.png' -i '%s'", g_model, tmp, ref32);
    EXPECT(args, 2, "-i: ");
    EXPECT(args, 2, "the output size would be 32x32, outside 64..2048: give -W and -H");
    snprintf(args, sizeof args, "-d '%s' -p cat -o '%s/o.png' -i '%s' -W 64", g_model, tmp, ref32);
    EXPECT(args, 2, "the output height would be 32, outside 64..2048: give -H");
    snprintf(args, sizeof args, "-q -d '%s' -p cat -o '%s/o.png' -i '%s' -W 64 -H 64 -s 1", g_model, tmp, ref32);
    EXPECT(args, 0, NULL);
    CHECK(fx_test_file_exists(fx_test_tmp_path("o.png")));
}

/* ------------------------------------------------------------ stdout */

/* Results that cannot be written to stdout (a full disk, /dev/full) are a
 * failure: one line on stderr and exit 1, not exit 0 with the output lost. */
TEST(cli_stdout_write_errors_fail) {
    setup();
    if (!fx_test_file_exists("/dev/full")) SKIP("no /dev/full on this system");
    static const char *const actions[] = {"--help", "--version", "--cpu-info"};
    char cmd[8192], *out = NULL;
    for (size_t i = 0; i < sizeof actions / sizeof *actions; i++) {
        snprintf(cmd, sizeof cmd, "'%s' %s >/dev/full", fx_test_flux_bin(), actions[i]);
        int rc = fx_test_run(cmd, &out);
        /* with the reason: the help text fills the buffer inside fputs, so
         * the failure is seen before the final flush */
        CHECK_MSG(rc == 1 && out && !strncmp(out, "flux: cannot write to standard output: ", 39) &&
                      strstr(out, strerror(ENOSPC)) && count_lines(out) == 1,
                  "flux %s >/dev/full: exit %d: %s", actions[i], rc, out);
        free(out);
    }
    snprintf(cmd, sizeof cmd, "'%s' -d '%s' --tokenize -p 'a cat' >/dev/full", fx_test_flux_bin(), g_model);
    CHECK_EQ_INT(fx_test_run(cmd, &out), 1);
    CHECK_MSG(out && strstr(out, "flux: cannot write to standard output"), "%s", out);
    free(out);
    snprintf(cmd, sizeof cmd, "printf '\"a\"\\n\"b\"\\n' | '%s' -d '%s' --tokenize >/dev/full", fx_test_flux_bin(),
             g_model);
    CHECK_EQ_INT(fx_test_run(cmd, &out), 1);
    CHECK_MSG(out && strstr(out, "flux: cannot write to standard output"), "%s", out);
    free(out);
    /* interactive mode: the handle lines are its results */
    char bin[4096];
    if (!realpath(fx_test_flux_bin(), bin)) snprintf(bin, sizeof bin, "%s", fx_test_flux_bin());
    snprintf(cmd, sizeof cmd, "cd '%s' && echo '!seed 1' > in.txt && echo 'a cat' >> in.txt && TMPDIR='%s' '%s' -q -t 1 "
             "-d '%s' -W 64 -H 64 -s 1 <in.txt >/dev/full",
             fx_test_tmpdir(), fx_test_tmpdir(), bin, g_model);
    CHECK_EQ_INT(fx_test_run(cmd, &out), 1);
    CHECK_MSG(out && strstr(out, "flux: cannot write to standard output"), "%s", out);
    free(out);
    snprintf(cmd, sizeof cmd, "'%s' --version >/dev/null", fx_test_flux_bin()); /* a working stdout: exit 0 */
    CHECK_EQ_INT(fx_test_run(cmd, NULL), 0);
}

/* The help texts are printed as they are written (fputs, not printf): a
 * printf escape in them would show ("85%%"). */
TEST(cli_help_texts_print_no_format_escapes) {
    setup();
    static const char *const helps[] = {"--help", "quantize --help"};
    char cmd[8192], *out = NULL;
    for (size_t i = 0; i < sizeof helps / sizeof *helps; i++) {
        snprintf(cmd, sizeof cmd, "'%s' %s", fx_test_flux_bin(), helps[i]);
        CHECK_EQ_INT(fx_test_run(cmd, &out), 0);
        CHECK_MSG(out && strlen(out) > 500 && !strstr(out, "%%") && !strstr(out, "\\n"), "flux %s: %s", helps[i],
                  out ? out : "");
        if (i == 0) CHECK_MSG(out && strstr(out, "(default 85% of the device's)"), "%s", out ? out : "");
        free(out);
    }
}

/* ------------------------------------------------------------ backend */

/* --backend vulkan without Vulkan (this build lacks it, or no driver is
 * found): exit 1 with one line, before anything runs; --list-devices
 * answers in any build; bad values are command-line errors. */
TEST(cli_backend_choice) {
    setup();
    const int built = strstr(flux_build_info(), "vulkan=1") != NULL;
    char args[4096], *out = NULL;
    snprintf(args, sizeof args, "--backend vulkan -d '%s' --tokenize -p hi", g_model);
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "VK_DRIVER_FILES=/nonexistent/icd.json VK_ICD_FILENAMES=/nonexistent/icd.json '%s' %s </dev/null",
             fx_test_flux_bin(), args);
    int rc = fx_test_run(cmd, &out);
    CHECK_EQ_INT(rc, 1);
    CHECK_MSG(out && !strncmp(out, "flux: --backend vulkan: ", 24) && count_lines(out) == 1, "output: %s", out);
    if (!built) CHECK_MSG(out && strstr(out, "built without Vulkan"), "output: %s", out);
    free(out);
    if (!built) { /* with Vulkan built, tests/vulkan checks the listing */
        CHECK_EQ_INT(run_flux("--list-devices", &out), 0);
        CHECK_MSG(out && strstr(out, "built without Vulkan"), "--list-devices: %s", out);
        free(out);
    }
    snprintf(args, sizeof args, "--backend cpu -d '%s' --tokenize -p hi", g_model);
    CHECK_EQ_INT(run_flux(args, &out), 0);
    free(out);
    EXPECT("--backend gpu --cpu-info", 2, "'gpu' is not a backend");
    EXPECT("--device -1 --cpu-info", 2, "--device");
    EXPECT("--backend cpu --device 0 --cpu-info", 2, "only used with --backend auto or vulkan");
}

/* -v reports where the memory went: the process's peak RSS, the mapped
 * weights' resident pages and each kind's peak, with the activation buffers
 * and the VAE's arena non-zero for any image (their sizes are known: at
 * least the transformer's residual stream of 512 + 12 tokens × 64 floats). */
TEST(cli_verbose_reports_memory_by_kind) {
    setup();
    char args[4096], *out = NULL;
    snprintf(args, sizeof args, "-v -d '%s' -p 'a red apple' -W 64 -H 64 -s 1 -S 3 --no-cache -o '%s/m.png'", g_model,
             fx_test_tmpdir());
    int rc = run_flux(args, &out);
    REQUIRE_MSG(rc == 0 && out, "exit %d: %s", rc, out ? out : "");
    const char *line = strstr(out, "flux: memory: peak RSS ");
    CHECK_MSG(line, "no memory line in: %s", out);
    if (line) {
        const char *act = strstr(line, "activations "), *arena = strstr(line, "VAE arena ");
        CHECK_MSG(strstr(line, "mapped weights resident ") && act && arena && strstr(line, "converted weights ") &&
                      strstr(line, "caches "),
                  "%s", line);
        CHECK_MSG(act && strncmp(act + 12, "0 KB", 4) && arena && strncmp(arena + 10, "0 KB", 4), "%s", line);
        CHECK_MSG(!strstr(line, "unknown"), "a /proc figure is missing: %s", line);
    }
    free(out);
}

/* Leftovers of the 2026-11-28 audit, each refused at once with exit 2 (or
 * run) instead of failing late:
 *  - a small stack (ulimit -s 64): main kept 64 KiB of --lora paths on it
 *    and died with SIGSEGV even for --version;
 *  - an output name longer than the file system allows: refused only
 *    after the whole generation (exit 1);
 *  - a -d folder this user cannot read: exit 1 from the loader instead of
 *    the argument check's exit 2 (as root every folder is readable, so
 *    that part runs as the unprivileged user 'nobody' when it can). */
TEST(cli_audit_leftovers_fail_early) {
    setup();
    char cmd[8192], *out = NULL;
    snprintf(cmd, sizeof cmd, "ulimit -s 64 && '%s' --version", fx_test_flux_bin());
    int rc = fx_test_run(cmd, &out);
    CHECK_MSG(rc == 0 && out && strstr(out, "flux.c"), "ulimit -s 64: exit %d: %s", rc, out ? out : "");
    free(out);

    char name[300];
    memset(name, 'a', sizeof name - 5);
    memcpy(name + sizeof name - 5, ".png", 5);
    char args[8192];
    snprintf(args, sizeof args, "-d '%s' -p 'a red apple' -W 64 -H 64 -o '%s/%s'", g_model, fx_test_tmpdir(), name);
    EXPECT(args, 2, "-o: file name of 299 characters is longer than this file system allows");
    CHECK_EQ_INT(fx_test_dir_entries(fx_test_tmpdir()), 0);

    /* a folder without read permission: as root (who reads everything) the
     * program runs as the unprivileged user nobody */
    char dir[2048];
    snprintf(dir, sizeof dir, "%s/locked", fx_test_tmpdir());
    REQUIRE(mkdir(dir, 0700) == 0);
    const int root = geteuid() == 0;
    REQUIRE(chmod(fx_test_tmpdir(), 0755) == 0); /* nobody may look inside it, not into locked */
    if (!root) REQUIRE(chmod(dir, 0) == 0);
    snprintf(cmd, sizeof cmd, "%s'%s' -d '%s' -p x -W 64 -H 64 -o /tmp/flux-test-locked.png",
             root ? "setpriv --reuid=nobody --regid=nogroup --clear-groups " : "", fx_test_flux_bin(), dir);
    rc = fx_test_run(cmd, &out);
    CHECK_MSG(rc == 2 && out && strstr(out, "flux: -d: cannot read") && count_lines(out) == 1, "exit %d: %s", rc,
              out ? out : "");
    free(out);
    if (!root) chmod(dir, 0700);
}
