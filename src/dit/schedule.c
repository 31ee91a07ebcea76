/*
 * schedule.c — σ schedules of the Euler sampler (schedule.h, BFL flux2 sampling.py; diffusers pipeline_flux2_klein.py).
 */
#include "schedule.h"

#include <math.h>
#include <stdio.h>

double fx_empirical_mu(int64_t n_tokens, int steps) {
    const double a1 = 8.73809524e-05, b1 = 1.89833333;
    const double a2 = 0.00016927, b2 = 0.45666666;
    double n = (double)n_tokens;
    if (n > 4300.0) return a2 * n + b2;
    double m200 = a2 * n + b2, m10 = a1 * n + b1;
    double a = (m200 - m10) / 190.0;
    double b = m200 - 200.0 * a;
    return a * (double)steps + b;
}

flux_status fx_schedule_sigmas(flux_schedule kind, int steps, int64_t n_tokens, double alpha,
                               float *sigmas, fx_err *err) {
    if (steps < 1) return fx_fail(err, FLUX_ERR_INVALID_ARG, "schedule: steps must be >= 1, got %d", steps);
    if (kind == FLUX_SCHEDULE_SHIFTED) {
        if (n_tokens < 1)
            return fx_fail(err, FLUX_ERR_INVALID_ARG, "schedule: image tokens must be >= 1, got %lld",
                           (long long)n_tokens);
        double e = exp(fx_empirical_mu(n_tokens, steps));
        for (int i = 0; i < steps; i++) {
            double tau = 1.0 - (double)i / steps;
            sigmas[i] = (float)(e / (e + (1.0 / tau - 1.0)));
        }
    } else if (kind == FLUX_SCHEDULE_LINEAR) {
        for (int i = 0; i < steps; i++) sigmas[i] = (float)(1.0 - (double)i / steps);
    } else if (kind == FLUX_SCHEDULE_POWER) {
        if (!(alpha > 0.0) || !isfinite(alpha))
            return fx_fail(err, FLUX_ERR_INVALID_ARG, "schedule: power alpha must be positive, got %g", alpha);
        for (int i = 0; i < steps; i++) sigmas[i] = (float)(1.0 - pow((double)i / steps, alpha));
    } else {
        return fx_fail(err, FLUX_ERR_INVALID_ARG, "schedule: unknown schedule %d", (int)kind);
    }
    sigmas[steps] = 0.0f;
    return FLUX_OK;
}

const char *fx_schedule_name(flux_schedule kind) {
    switch (kind) {
    case FLUX_SCHEDULE_SHIFTED: return "shifted";
    case FLUX_SCHEDULE_LINEAR: return "linear";
    case FLUX_SCHEDULE_POWER: return "power";
    }
    return "unknown";
}

const char *fx_schedule_describe(flux_schedule kind, double alpha, char *buf, int size) {
    if (kind == FLUX_SCHEDULE_POWER) snprintf(buf, (size_t)size, "power %g", alpha);
    else snprintf(buf, (size_t)size, "%s", fx_schedule_name(kind)); /* always in buf: callers keep buf */
    return buf;
}

int fx_schedule_first_step(int steps, double strength) {
    double init = (double)steps * strength;
    if (init > (double)steps) init = (double)steps;
    const double rest = (double)steps - init;
    return rest > 0 ? (int)rest : 0; /* int() truncates toward zero */
}
