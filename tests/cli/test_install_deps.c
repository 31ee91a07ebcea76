/*
 * test_install_deps.c — tools/install_deps.sh, which `make demo` and
 * `make test` run: on a system where the packages cannot be installed (no
 * apt-get here: a PATH holding only the shell's basic tools), it names what
 * is missing and fails, or with --optional (make test) names it and
 * succeeds, so the suites that need the tools report themselves as not run.
 */
#include "tests/test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

TEST(install_deps_without_apt) {
    const char *tmp = fx_test_tmpdir();
    char cmd[8192], *out = NULL;
    /* a bin folder with just what the script itself uses */
    snprintf(cmd, sizeof cmd,
             "mkdir -p '%s/bin' && for t in bash env id grep printf cut dirname; do "
             "ln -s \"$(command -v $t)\" '%s/bin/'$t || exit 1; done",
             tmp, tmp);
    REQUIRE(fx_test_run(cmd, NULL) == 0);
    snprintf(cmd, sizeof cmd, "PATH='%s/bin' bash '%s' --test", tmp, fx_test_path("../tools/install_deps.sh"));
    int rc = fx_test_run(cmd, &out);
    CHECK_MSG(rc == 1 && out && strstr(out, "please install:") && strstr(out, "qemu-user-static") &&
                  strstr(out, "no apt-get"),
              "exit %d: %s", rc, out ? out : "");
    free(out);
    snprintf(cmd, sizeof cmd, "PATH='%s/bin' bash '%s' --test --optional", tmp,
             fx_test_path("../tools/install_deps.sh"));
    rc = fx_test_run(cmd, &out);
    CHECK_MSG(rc == 0 && out && strstr(out, "please install:") && strstr(out, "going on without them"),
              "exit %d: %s", rc, out ? out : "");
    free(out);
}
