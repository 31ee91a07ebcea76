/*
 * test_repl.c — interactive mode (`flux -d DIR` without -p): the line
 * parser (src/cli/cli_repl_parse.c, compiled into this test: CLI files are not
 * part of libflux) and the session driven through a pipe (FLUX_BIN).
 */
#include "tests/test.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "src/cli/cli_repl_parse.c"

/* ------------------------------------------------------------------------ */
/* The parser                                                               */
/* ------------------------------------------------------------------------ */

static cli_repl_cmd parse_ok(int line, const char *text, char *buf) {
    cli_repl_cmd c;
    char err[512];
    strcpy(buf, text);
    if (cli_repl_parse(buf, &c, err, sizeof err)) fx_test_fail(__FILE__, line, "'%s': %s", text, err);
    return c;
}

static void parse_bad(int line, const char *text, const char *fragment) {
    cli_repl_cmd c;
    char err[512], buf[1024];
    strcpy(buf, text);
    if (!cli_repl_parse(buf, &c, err, sizeof err)) fx_test_fail(__FILE__, line, "'%s' was accepted", text);
    else if (!strstr(err, fragment)) fx_test_fail(__FILE__, line, "'%s': message '%s' lacks '%s'", text, err, fragment);
}

#define OK(text) parse_ok(__LINE__, text, buf)
#define BAD(text, frag) parse_bad(__LINE__, text, frag)

TEST(repl_parse_prompts) {
    char buf[1024];
    cli_repl_cmd c = OK("  a cat on a skateboard \r\n");
    CHECK(c.kind == REPL_GENERATE && !strcmp(c.prompt, "a cat on a skateboard") && c.n_refs == 0 && c.width == 0);
    c = OK("512x768 a red apple");
    CHECK(c.kind == REPL_GENERATE && c.width == 512 && c.height == 768 && !strcmp(c.prompt, "a red apple"));
    c = OK("$2 make it blue");
    CHECK(c.n_refs == 1 && c.refs[0] == 2 && !strcmp(c.prompt, "make it blue"));
    c = OK("$0 $3 combine   them");
    CHECK(c.n_refs == 2 && c.refs[0] == 0 && c.refs[1] == 3 && !strcmp(c.prompt, "combine   them"));
    c = OK("$ 256X256 $1 again");
    CHECK(c.n_refs == 2 && c.refs[0] == CLI_REPL_LAST && c.refs[1] == 1 && c.width == 256 && c.height == 256 &&
          !strcmp(c.prompt, "again"));
    /* only leading tokens count: the rest is the prompt as written */
    c = OK("a 512x512 poster of $3");
    CHECK(c.width == 0 && c.n_refs == 0 && !strcmp(c.prompt, "a 512x512 poster of $3"));
    c = OK("\\$5 bill on a table");
    CHECK(c.kind == REPL_GENERATE && !strcmp(c.prompt, "$5 bill on a table"));
    c = OK("\\!important");
    CHECK(c.kind == REPL_GENERATE && !strcmp(c.prompt, "!important"));
    c = OK("   ");
    CHECK(c.kind == REPL_EMPTY);
    c = OK("");
    CHECK(c.kind == REPL_EMPTY);

    BAD("512x512", "no prompt");
    BAD("$1 $2", "no prompt");
    BAD("512x500 a cat", "multiples of 16");
    BAD("32x32 a cat", "multiples of 16 in 64..2048");
    BAD("4096x512 a cat", "64..2048");
    BAD("512x512 256x256 a cat", "two sizes");
    BAD("$x a cat", "'$x' is not an image handle");
    BAD("$-1 a cat", "not an image handle");
    BAD("\\", "empty prompt");
    BAD("$0 $0 $0 $0 $0 $0 $0 $0 $0 $0 $0 $0 $0 $0 $0 $0 $0 too many", "at most 16");
}

TEST(repl_parse_commands) {
    char buf[1024];
    cli_repl_cmd c = OK("!seed 42");
    CHECK(c.kind == REPL_SEED && c.seed == 42 && !c.random);
    c = OK("!SEED random");
    CHECK(c.kind == REPL_SEED && c.random);
    c = OK("!seed 18446744073709551614");
    CHECK(c.seed == UINT64_MAX - 1);
    c = OK("!size 768x512");
    CHECK(c.kind == REPL_SIZE && c.width == 768 && c.height == 512);
    c = OK("!size auto");
    CHECK(c.kind == REPL_SIZE && c.width == 0);
    c = OK("!steps 8");
    CHECK(c.kind == REPL_STEPS && c.steps == 8 && !c.random);
    c = OK("!steps auto");
    CHECK(c.kind == REPL_STEPS && c.random);
    c = OK("!guidance 3.5");
    CHECK(c.kind == REPL_GUIDANCE && c.guidance == 3.5f);
    c = OK("!guidance auto");
    CHECK(c.kind == REPL_GUIDANCE && c.random);
    c = OK("!schedule linear");
    CHECK(c.kind == REPL_SCHEDULE && c.schedule == FLUX_SCHEDULE_LINEAR);
    c = OK("!schedule power 1.5");
    CHECK(c.schedule == FLUX_SCHEDULE_POWER && c.alpha == 1.5f);
    c = OK("!schedule shifted");
    CHECK(c.schedule == FLUX_SCHEDULE_SHIFTED);
    c = OK("!batch 4");
    CHECK(c.kind == REPL_BATCH && c.batch == 4);
    c = OK("!save $3 keep.png");
    CHECK(c.kind == REPL_SAVE && c.handle == 3 && !strcmp(c.file, "keep.png"));
    c = OK("!save $ last.ppm");
    CHECK(c.handle == CLI_REPL_LAST && !strcmp(c.file, "last.ppm"));
    c = OK("!show");
    CHECK(c.kind == REPL_SHOW && c.on == -1);
    c = OK("!show off");
    CHECK(c.on == 0);
    CHECK(OK("!help").kind == REPL_HELP);
    CHECK(OK("!images").kind == REPL_IMAGES);
    CHECK(OK("!quit").kind == REPL_QUIT);
    CHECK(OK("  !q  ").kind == REPL_QUIT);

    BAD("!", "needs a command");
    BAD("!frobnicate", "unknown command '!frobnicate'");
    BAD("!seed", "needs a number");
    BAD("!seed -1", "not a seed");
    BAD("!seed 18446744073709551615", "not a seed");
    BAD("!seed 12abc", "not a seed");
    BAD("!size 512", "WxH");
    BAD("!size 500x500", "multiples of 16");
    BAD("!steps 0", "1..1000");
    BAD("!steps 1001", "1..1000");
    BAD("!guidance -1", "0..100 ");
    BAD("!guidance nan", "0..100 ");
    BAD("!guidance 101", "0..100 "); /* FLUX_GUIDANCE_MAX: the library's range */
    c = OK("!guidance 100");
    CHECK(c.guidance == 100.0f);
    BAD("!schedule cosine", "'cosine'");
    BAD("!schedule linear 2", "only power takes");
    BAD("!schedule power 0", "ALPHA");
    BAD("!batch 0", "1..64");
    BAD("!save 3 x.png", "!save $N FILE");
    BAD("!save $1", "!save $N FILE");
    BAD("!save $1 x.jpg", "unsupported image type");
    BAD("!save $1 x.png extra", "unexpected 'extra'");
    BAD("!quit now", "takes no argument");
    BAD("!show maybe", "on or off");
}

/* ------------------------------------------------------------------------ */
/* Through a pipe                                                           */
/* ------------------------------------------------------------------------ */

/* Run flux with stdin from `input`; returns the exit status, stdout in
 * *out and stderr in *err (both malloc'd). */
static int run_session(const char *args, const char *input, char **out, char **err) {
    const char *tmp = fx_test_tmpdir();
    char in_path[1024], err_path[1024], cmd[8192];
    snprintf(in_path, sizeof in_path, "%s/stdin.txt", tmp);
    snprintf(err_path, sizeof err_path, "%s/stderr.txt", tmp);
    fx_test_write_file(in_path, input, strlen(input));
    char bin[4096];
    if (!realpath(fx_test_flux_bin(), bin)) snprintf(bin, sizeof bin, "%s", fx_test_flux_bin());
    snprintf(cmd, sizeof cmd, "cd '%s' && '%s' %s <'%s' 2>'%s'", tmp, bin, args, in_path, err_path);
    int rc = fx_test_run(cmd, out);
    *err = fx_test_read_file(err_path, NULL);
    if (!*err) *err = strdup("");
    return rc;
}

TEST(repl_session_settings_and_errors) {
    char args[2048], *out = NULL, *err = NULL;
    snprintf(args, sizeof args, "-d '%s' -S 7 -s 3", fx_test_path("golden/model"));
    const char *input = "!help\n"
                        "!seed 42\n!size 512x256\n!steps auto\n!guidance 2.5\n!schedule power 3\n!batch 2\n"
                        "!help\n"
                        "!bogus\n"
                        "$0 a cat\n"
                        "!save $0 kept.png\n"
                        "!images\n"
                        "!quit\n"
                        "!help\n"; /* after !quit: never read */
    int rc = run_session(args, input, &out, &err);
    CHECK_EQ_INT(rc, 1); /* lines failed and stdin is not a terminal */
    CHECK_MSG(strstr(out, "Settings: size auto, steps 3, guidance auto, schedule shifted, seed 7, batch 1, preview off"),
              "first settings: %s", out);
    CHECK_MSG(strstr(out, "Settings: size 512x256, steps auto, guidance 2.5, schedule power (alpha 3), seed 42, "
                          "batch 2, preview off"),
              "changed settings: %s", out);
    const char *second = strstr(out, "Settings: size 512x256");
    CHECK(second && !strstr(second + 1, "Settings:")); /* the !help after !quit did not run */
    CHECK(!strstr(out, "flux> ")); /* no prompt when stdin is not a terminal */
    CHECK_MSG(strstr(err, "flux: interactive mode with model (distilled)"), "stderr: %s", err);
    CHECK_MSG(strstr(err, "flux: unknown command '!bogus'"), "stderr: %s", err);
    CHECK_MSG(strstr(err, "flux: no image $0 (no image yet)"), "stderr: %s", err);
    CHECK_MSG(strstr(err, "flux: no images yet"), "stderr: %s", err);
    free(out), free(err);

    /* a clean session exits 0; EOF ends it like !quit */
    rc = run_session(args, "!seed random\n!size auto\n", &out, &err);
    CHECK_MSG(rc == 0 && !*out, "rc %d, stdout '%s', stderr '%s'", rc, out, err);
    free(out), free(err);
}

TEST(repl_command_line_checks) {
    /* interactive mode refuses the options it cannot use */
    char args[2048], *out = NULL, *err = NULL, model[1024];
    snprintf(model, sizeof model, "%s", fx_test_path("golden/model"));
    snprintf(args, sizeof args, "-d '%s' -o out.png", model);
    CHECK_EQ_INT(run_session(args, "", &out, &err), 2);
    CHECK_MSG(strstr(err, "missing -p PROMPT"), "stderr: %s", err);
    free(out), free(err);
    snprintf(args, sizeof args, "-d '%s' --noise '%s'", model, fx_test_path("golden/t2i-48x64-2step/noise.npy"));
    CHECK_EQ_INT(run_session(args, "", &out, &err), 2);
    CHECK_MSG(strstr(err, "--noise: not used in interactive mode"), "stderr: %s", err);
    free(out), free(err);
    /* -i images are the first handles */
    snprintf(args, sizeof args, "-d '%s' -i '%s'", model, fx_test_path("golden/multiref-48x48-2step/ref0.png"));
    CHECK_EQ_INT(run_session(args, "!images\n!save $0 copy.png\n", &out, &err), 0);
    CHECK_MSG(strstr(out, "$0 ") && strstr(out, "ref0.png"), "stdout: %s", out);
    char copy[1024];
    snprintf(copy, sizeof copy, "%s/copy.png", fx_test_tmpdir());
    struct stat st;
    CHECK_MSG(stat(copy, &st) == 0 && st.st_size > 0, "!save wrote nothing; stderr: %s", err);
    free(out), free(err);
}

/* ------------------------------------------------------------------------ */
/* Generating                                                               */
/* ------------------------------------------------------------------------ */

static flux_image *load(flux_ctx *ctx, const char *path) {
    flux_image *img = NULL;
    if (flux_image_load(ctx, path, &img) != FLUX_OK) fx_test_fail(__FILE__, __LINE__, "%s", flux_error(ctx));
    return img;
}

/* The file of handle $n from the session's stdout ("$n FILE (...)"). */
static int handle_path(const char *out, int n, char *buf, size_t size) {
    char key[32];
    snprintf(key, sizeof key, "$%d ", n);
    for (const char *p = out; (p = strstr(p, key)); p++) {
        if (p != out && p[-1] != '\n') continue;
        p += strlen(key);
        size_t len = strcspn(p, " \n");
        snprintf(buf, size, "%.*s", (int)len, p);
        return 1;
    }
    return 0;
}

TEST(repl_session_generates) {
    char args[2048], *out = NULL, *err = NULL, path[3][2048];
    snprintf(args, sizeof args, "-v -t 1 -d '%s' -s 2", fx_test_path("golden/model"));
    const char *input = "!seed 5\n"
                        "!size 64x64\n"
                        "a cat on a skateboard\n"       /* $0 */
                        "a cat on a skateboard\n"       /* $1: same seed and prompt, embeddings from memory */
                        "96x64 a cat on a skateboard\n" /* $2: other size */
                        "!save $2 kept.png\n"
                        "!seed random\n"
                        "!batch 2\n"
                        "a dog\n"                       /* $3 $4: seeds S, S+1 */
                        "!images\n";
    setenv("TMPDIR", fx_test_tmpdir(), 1); /* the session folder goes to the test's folder */
    int rc = run_session(args, input, &out, &err);
    REQUIRE_MSG(rc == 0, "rc %d\nstdout: %s\nstderr: %s", rc, out, err);
    for (int i = 0; i < 3; i++) CHECK_MSG(handle_path(out, i, path[i], sizeof path[i]), "no $%d in: %s", i, out);
    CHECK_MSG(strstr(out, "\n$3 ") && strstr(out, "\n$4 "), "stdout: %s", out);
    CHECK_MSG(strstr(out, "(64x64, seed 5,") && strstr(out, "(96x64, seed 5,"), "stdout: %s", out);
    CHECK_MSG(strstr(path[0], fx_test_tmpdir()) == path[0] && strstr(path[0], "/image-0.png"), "$0 at %s", path[0]);
    /* the repeated prompt came from the memory cache */
    CHECK_MSG(strstr(err, "text embeddings from the memory cache"), "stderr: %s", err);

    flux_ctx *ctx = flux_new(NULL);
    flux_image *a = load(ctx, path[0]), *b = load(ctx, path[1]), *c = load(ctx, path[2]);
    REQUIRE(a && b && c);
    CHECK(!memcmp(a->data, b->data, (size_t)64 * 64 * 3)); /* same seed, same prompt, same bits */
    CHECK(c->width == 96 && c->height == 64);
    char kept[2100];
    snprintf(kept, sizeof kept, "%s/kept.png", fx_test_tmpdir());
    flux_image *k = load(ctx, kept);
    CHECK(k && k->width == 96 && !memcmp(k->data, c->data, (size_t)96 * 64 * 3));
    /* $0 is what flux -p gives for the same settings */
    char cmd[8192], *cli_out = NULL, single[2100];
    snprintf(single, sizeof single, "%s/single.png", fx_test_tmpdir());
    snprintf(cmd, sizeof cmd, "'%s' -q -t 1 -d '%s' -s 2 -S 5 -W 64 -H 64 -p 'a cat on a skateboard' -o '%s'",
             fx_test_flux_bin(), fx_test_path("golden/model"), single);
    CHECK_MSG(fx_test_run(cmd, &cli_out) == 0, "%s", cli_out);
    flux_image *e = load(ctx, single);
    CHECK_MSG(e && !memcmp(e->data, a->data, (size_t)64 * 64 * 3), "REPL image differs from flux -p");
    flux_image_free(a), flux_image_free(b), flux_image_free(c), flux_image_free(k), flux_image_free(e);
    flux_free(ctx);
    free(cli_out), free(out), free(err);
}

/* !lora FILE [SCALE], !lora off, !loras (run in test_cli_lora.c) */
TEST(repl_lora_commands_parse) {
    static const struct {
        const char *line;
        cli_repl_kind kind;
        const char *file;
        float scale;
        const char *error;
    } cases[] = {
        {"!lora style.safetensors 0.5", REPL_LORA, "style.safetensors", 0.5f, NULL},
        {"!lora style.safetensors", REPL_LORA, "style.safetensors", 1.0f, NULL},
        {"  !LORA My.safetensors -2  ", REPL_LORA, "My.safetensors", -2.0f, NULL},
        {"!lora off", REPL_LORA_OFF, NULL, 0, NULL},
        {"!lora OFF", REPL_LORA_OFF, NULL, 0, NULL},
        {"!loras", REPL_LORAS, NULL, 0, NULL},
        {"!lora", REPL_EMPTY, NULL, 0, "!lora needs a file"},
        {"!lora a.safetensors x", REPL_EMPTY, NULL, 0, "!lora: scale 'x' is not a number"},
        {"!lora a.safetensors 101", REPL_EMPTY, NULL, 0, "!lora: scale '101' is not a number in -100..100"},
        {"!lora a.safetensors inf", REPL_EMPTY, NULL, 0, "!lora: scale 'inf'"},
        {"!lora a.safetensors 1 2", REPL_EMPTY, NULL, 0, "!lora: unexpected '2'"},
        {"!lora off now", REPL_EMPTY, NULL, 0, "!lora: unexpected 'now'"},
        {"!loras all", REPL_EMPTY, NULL, 0, "!loras takes no argument"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char line[256], err[256];
        snprintf(line, sizeof line, "%s", cases[i].line);
        cli_repl_cmd c;
        int rc = cli_repl_parse(line, &c, err, sizeof err);
        if (cases[i].error) {
            CHECK_MSG(rc == -1 && strstr(err, cases[i].error), "'%s': rc %d, '%s'", cases[i].line, rc, err);
            continue;
        }
        CHECK_MSG(rc == 0 && c.kind == cases[i].kind, "'%s': rc %d kind %d (%s)", cases[i].line, rc, (int)c.kind, err);
        if (cases[i].file) CHECK_MSG(c.file && !strcmp(c.file, cases[i].file) && c.scale == cases[i].scale, "'%s'",
                                     cases[i].line);
    }
}

/* A reference sets the size when none is given ("size auto"); a reference
 * whose processed size is outside 64..2048 is refused with a hint, like -i
 * without -W/-H, and the session goes on. */
TEST(repl_reference_size_outside_range) {
    char args[4096], model[1024], *out = NULL, *err = NULL;
    snprintf(model, sizeof model, "%s", fx_test_path("golden/model"));
    snprintf(args, sizeof args, "-q -t 1 -d '%s' -s 1 -S 3 -i '%s'", model,
             fx_test_path("golden/multiref-48x48-2step/ref0.png")); /* 32x32: $0 */
    setenv("TMPDIR", fx_test_tmpdir(), 1);
    int rc = run_session(args, "$0 a cat\n64x64 $0 a cat\n", &out, &err);
    CHECK_EQ_INT(rc, 1); /* one line failed */
    CHECK_MSG(strstr(err, "flux: the first reference sets the size: the output size would be 32x32, outside 64..2048"),
              "stderr: %s", err);
    CHECK_MSG(strstr(out, "$1 ") && strstr(out, "(64x64, seed 3,"), "the second line runs: %s", out);
    free(out), free(err);
}

/* The model folder is overwritten during a session (`cp` truncates each
 * file, then writes it): the line that meets the short file fails with a
 * message, the session goes on, and the next line, with the file whole
 * again, loads the model again and works (it used to die of SIGBUS). */
TEST(repl_session_survives_a_model_cut_short) {
    const char *tmp = fx_test_tmpdir();
    char model[1200], cmd[16384], bin[4096], *out = NULL;
    snprintf(model, sizeof model, "%s/model", tmp);
    snprintf(cmd, sizeof cmd, "cp -rL '%s' '%s'", fx_test_path("golden/model"), model);
    REQUIRE(fx_test_run(cmd, NULL) == 0);
    if (!realpath(fx_test_flux_bin(), bin)) snprintf(bin, sizeof bin, "%s", fx_test_flux_bin());
    const char *w = "transformer/diffusion_pytorch_model.safetensors";
    /* each step waits for the previous line's result (on stdout or stderr) */
    snprintf(cmd, sizeof cmd,
             "cd '%s' && cp '%s/%s' whole && size=$(stat -c %%s whole) && mkfifo in || exit 9; "
             "(TMPDIR='%s' timeout 300 '%s' -q -t 1 -d '%s' -W 64 -H 64 -s 1 -S 3 <in >out.txt 2>err.txt; "
             "echo $? >rc.txt) & "
             "exec 3>in; "
             "wait_for() { for i in $(seq 600); do grep -q \"$1\" \"$2\" 2>/dev/null && return 0; sleep 0.1; done; return 1; }; "
             "echo 'a cat' >&3 && wait_for '^\\$0 ' out.txt && "
             "truncate -s $((size / 3)) '%s/%s' && echo 'a dog' >&3 && wait_for 'flux: ' err.txt && "
             "cp whole '%s/%s' && echo 'a cat' >&3 && wait_for '^\\$1 ' out.txt; "
             "exec 3>&-; wait; cat rc.txt out.txt err.txt",
             tmp, model, w, tmp, bin, model, model, w, model, w);
    int rc = fx_test_run(cmd, &out);
    CHECK_MSG(rc == 0, "the script failed (%d): %s", rc, out);
    /* exit 1 (a line failed, stdin is not a terminal), $0 and $1 written,
     * one error line naming the file */
    CHECK_MSG(out && !strncmp(out, "1\n", 2), "session: %s", out);
    CHECK_MSG(out && strstr(out, "\n$0 ") && strstr(out, "\n$1 "), "session: %s", out);
    CHECK_MSG(out && strstr(out, "flux: the model's files changed since it was loaded, and loading it again failed: ") &&
                  strstr(out, w),
              "session: %s", out);
    free(out);
}
