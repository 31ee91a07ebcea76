/* test_schedule.c — σ schedules (src/dit/schedule.h) against a table of
 * σ values of the official get_schedule (BFL flux2 sampling.py; to 1e-6) and tests/golden/schedules.txt (the diffusers
 * float32 values, to 1e-7 — 1 ulp near 1 is 6e-8). */
#include "tests/test.h"

#include <stdlib.h>
#include <string.h>

#include "src/dit/schedule.h"

TEST(schedule_spec_table) {
    static const struct {
        int n, steps;
        double mu;
        double s[6];
    } t[] = {
        {16, 2, 1.960378, {1, 0.876574, 0}},
        {16, 4, 1.945216, {1, 0.954515, 0.874924, 0.699854, 0}},
        {256, 4, 1.965567, {1, 0.955391, 0.877134, 0.704112, 0}},
        {1024, 4, 2.030690, {1, 0.958085, 0.883982, 0.717497, 0}},
        {4096, 4, 2.291180, {1, 0.967384, 0.908144, 0.767200, 0}},
    };
    float s[64];
    for (size_t i = 0; i < sizeof t / sizeof *t; i++) {
        CHECK_NEAR(fx_empirical_mu(t[i].n, t[i].steps), t[i].mu, 1e-6);
        REQUIRE(fx_schedule_sigmas(FLUX_SCHEDULE_SHIFTED, t[i].steps, t[i].n, 0, s, NULL) == FLUX_OK);
        for (int k = 0; k <= t[i].steps; k++) CHECK_NEAR(s[k], t[i].s[k], 1e-6);
    }
    /* 1024² with 50 steps: first and last entries of the official schedule */
    REQUIRE(fx_schedule_sigmas(FLUX_SCHEDULE_SHIFTED, 50, 4096, 0, s, NULL) == FLUX_OK);
    CHECK_NEAR(fx_empirical_mu(4096, 50), 2.023351, 1e-6);
    CHECK_NEAR(s[1], 0.997309, 1e-6);
    CHECK_NEAR(s[2], 0.994521, 1e-6);
    CHECK_NEAR(s[3], 0.991632, 1e-6);
    CHECK_NEAR(s[48], 0.239631, 1e-6);
    CHECK_NEAR(s[49], 0.133719, 1e-6);
    CHECK(s[0] == 1.0f && s[50] == 0.0f);
}

/* Every "diffusers:" line of schedules.txt, for its steps and seq_len. */
TEST(schedule_golden_file) {
    size_t len;
    char *text = fx_test_read_file(fx_test_path("golden/schedules.txt"), &len);
    REQUIRE(text);
    int cases = 0, steps = 0;
    long n = 0;
    double mu = 0;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        if (sscanf(line, "steps=%d seq_len=%ld", &steps, &n) == 2) continue;
        if (sscanf(line, "mu = %lf", &mu) == 1) {
            CHECK_NEAR(fx_empirical_mu(n, steps), mu, 1e-7);
            continue;
        }
        if (strncmp(line, "diffusers:", 10)) continue;
        float s[1001];
        REQUIRE(steps >= 1 && steps <= 1000);
        REQUIRE(fx_schedule_sigmas(FLUX_SCHEDULE_SHIFTED, steps, n, 0, s, NULL) == FLUX_OK);
        char *p = line + 10;
        for (int k = 0; k <= steps; k++) {
            char *end;
            double want = strtod(p, &end);
            REQUIRE_MSG(end != p, "schedules.txt: steps=%d: %d values, expected %d", steps, k, steps + 1);
            CHECK_MSG(fabs(s[k] - want) <= 1.2e-7, "steps=%d n=%ld sigma[%d] = %.9g, expected %.9g", steps, n, k,
                      (double)s[k], want);
            p = end;
        }
        cases++;
    }
    CHECK(cases >= 8);
    free(text);
}

TEST(schedule_linear_power_and_errors) {
    float s[8];
    REQUIRE(fx_schedule_sigmas(FLUX_SCHEDULE_LINEAR, 4, 0, 0, s, NULL) == FLUX_OK);
    CHECK(s[0] == 1.0f && s[1] == 0.75f && s[2] == 0.5f && s[3] == 0.25f && s[4] == 0.0f);
    REQUIRE(fx_schedule_sigmas(FLUX_SCHEDULE_POWER, 4, 0, 2.0, s, NULL) == FLUX_OK);
    CHECK(s[0] == 1.0f && s[1] == 0.9375f && s[2] == 0.75f && s[3] == 0.4375f && s[4] == 0.0f);
    REQUIRE(fx_schedule_sigmas(FLUX_SCHEDULE_POWER, 2, 0, 0.5, s, NULL) == FLUX_OK);
    CHECK_NEAR(s[1], 1.0 - sqrt(0.5), 1e-7);
    REQUIRE(fx_schedule_sigmas(FLUX_SCHEDULE_SHIFTED, 1, 16, 0, s, NULL) == FLUX_OK);
    CHECK(s[0] == 1.0f && s[1] == 0.0f);
    fx_err err = {0};
    CHECK_EQ_INT(fx_schedule_sigmas(FLUX_SCHEDULE_SHIFTED, 0, 16, 0, s, &err), FLUX_ERR_INVALID_ARG);
    CHECK(strstr(err.msg, "steps"));
    CHECK_EQ_INT(fx_schedule_sigmas(FLUX_SCHEDULE_SHIFTED, 4, 0, 0, s, &err), FLUX_ERR_INVALID_ARG);
    CHECK_EQ_INT(fx_schedule_sigmas(FLUX_SCHEDULE_POWER, 4, 16, -1.0, s, &err), FLUX_ERR_INVALID_ARG);
    CHECK_EQ_INT(fx_schedule_sigmas((flux_schedule)9, 4, 16, 2.0, s, &err), FLUX_ERR_INVALID_ARG);
    /* large n uses the linear μ */
    CHECK_NEAR(fx_empirical_mu(6000, 4), 0.00016927 * 6000 + 0.45666666, 1e-12);
}
