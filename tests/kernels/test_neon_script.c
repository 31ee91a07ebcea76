/*
 * test_neon_script.c — tests/run_neon.sh without its cross tools reports
 * every NEON kernel test it could not run (skipped, or failed under
 * CI=true), not one, so the closing line counts what is missing.
 */
#include "tests/test.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

TEST(neon_script_counts_every_test_it_cannot_run) {
    char exe[PATH_MAX], cmd[3 * PATH_MAX], *out = NULL;
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    REQUIRE(n > 0);
    exe[n] = 0;
    /* the kernel tests of this binary: the ones the NEON binary runs */
    snprintf(cmd, sizeof cmd, "'%s' --list kernel_ | grep -c '^kernel_'", exe);
    REQUIRE(fx_test_run(cmd, &out) == 0);
    int kernels = atoi(out);
    free(out);
    CHECK(kernels >= 30);
    char root[PATH_MAX];
    snprintf(root, sizeof root, "%s", fx_test_path(".."));
    char want[64];
    snprintf(cmd, sizeof cmd, "cd '%s' && CI= CROSS_CC=/nonexistent/cc tests/run_neon.sh", root);
    CHECK_EQ_INT(fx_test_run(cmd, &out), 0);
    snprintf(want, sizeof want, "\n0 passed, 0 failed, %d skipped\n", kernels);
    CHECK_MSG(out && strstr(out, want), "want '%s' in: %s", want + 1, out);
    free(out);
    snprintf(cmd, sizeof cmd, "cd '%s' && CI=true CROSS_CC=/nonexistent/cc tests/run_neon.sh", root);
    CHECK_EQ_INT(fx_test_run(cmd, &out), 1);
    snprintf(want, sizeof want, "\n0 passed, %d failed, 0 skipped\n", kernels);
    CHECK_MSG(out && strstr(out, want), "want '%s' in: %s", want + 1, out);
    free(out);
}
