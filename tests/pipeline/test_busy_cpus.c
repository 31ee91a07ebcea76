/*
 * test_busy_cpus.c — the default thread count on a shared machine: with a
 * CPU kept busy by another process, a context created with the defaults
 * runs its kernels on the idle CPUs only (two threads sharing a core with a
 * busy process ran 15x slower than one). The test restricts itself to two
 * CPUs and pins a spinning child to one of them, so it means the same on
 * any machine; the speed itself is shown by `flux-bench busy`, not here.
 */
#include "tests/test.h"

#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "src/base/cpu_load.h"
#include "src/model/ctx.h"

typedef struct seen {
    flux_ctx *ctx;
    int tmin, tmax, calls;
} seen;

static int on_progress(void *user, flux_stage stage, int step, int total, int sub, int subtotal) {
    seen *s = user;
    (void)stage, (void)step, (void)total, (void)sub, (void)subtotal;
    int t = s->ctx->kc.threads;
    if (t < s->tmin) s->tmin = t;
    if (t > s->tmax) s->tmax = t;
    s->calls++;
    return 0;
}

/* A generation with the default options; the kernel thread counts seen at
 * its checkpoints. */
static seen generate_default(const char *prompt) {
    flux_options o;
    flux_options_init(&o);
    o.no_disk_cache = 1;
    seen s = {flux_new(&o), 1 << 30, 0, 0};
    if (!s.ctx || flux_load(s.ctx, fx_test_path("golden/model"), NULL) != FLUX_OK) {
        fx_test_fail(__FILE__, __LINE__, "load: %s", s.ctx ? flux_error(s.ctx) : "no context");
        return s;
    }
    flux_params p;
    flux_params_init(&p);
    p.prompt = prompt;
    p.width = p.height = 64, p.steps = 4, p.seed = 3;
    p.progress = on_progress, p.progress_user = &s;
    flux_image *img = NULL;
    if (flux_generate(s.ctx, &p, &img) != FLUX_OK) fx_test_fail(__FILE__, __LINE__, "%s", flux_error(s.ctx));
    flux_image_free(img);
    flux_free(s.ctx);
    s.ctx = NULL;
    return s;
}

TEST(busy_cpus_default_threads_leave_a_busy_cpu_alone) {
    unsetenv("OMP_NUM_THREADS"); /* the adaptive default, not a fixed count */
    cpu_set_t mine, two, one;
    REQUIRE(sched_getaffinity(0, sizeof mine, &mine) == 0);
    int first = -1, second = -1;
    for (int c = 0; c < CPU_SETSIZE && second < 0; c++)
        if (CPU_ISSET(c, &mine)) {
            if (first < 0) first = c;
            else second = c;
        }
    if (second < 0) { /* one CPU: one thread whatever the load */
        seen s = generate_default("a cat");
        CHECK_EQ_INT(s.tmax, 1);
        return;
    }
    CPU_ZERO(&two);
    CPU_SET(first, &two);
    CPU_SET(second, &two);
    CPU_ZERO(&one);
    CPU_SET(second, &one);
    REQUIRE(sched_setaffinity(0, sizeof two, &two) == 0);
    CHECK_EQ_INT(fx_cpu_available(), 2);
    pid_t hog = fork();
    REQUIRE(hog >= 0);
    if (hog == 0) {
        sched_setaffinity(0, sizeof one, &one);
        volatile unsigned long x = 0;
        for (;;) x++;
    }
    usleep(300000); /* let it run */
    seen busy = generate_default("a cat on a busy machine");
    kill(hog, SIGKILL);
    waitpid(hog, NULL, 0);
    CHECK(busy.calls > 10);
    CHECK_MSG(busy.tmax == 1, "with one of two CPUs busy the default ran %d..%d threads", busy.tmin, busy.tmax);
    /* the count is not fixed: a context with threads given keeps them */
    flux_options o;
    flux_options_init(&o);
    o.threads = 2;
    flux_ctx *ctx = flux_new(&o);
    REQUIRE(ctx);
    CHECK(ctx->threads_fixed && ctx->kc.threads == 2);
    flux_free(ctx);
}
