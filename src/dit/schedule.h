/*
 * schedule.h — the noise levels σ_0 = 1 > σ_1 > ... > σ_S = 0 of the Euler
 * sampler (BFL flux2 sampling.py; diffusers pipeline_flux2_klein.py).
 *
 *   shifted (official, default): μ = empirical_mu(n, S) from the number of
 *     target image tokens n (references excluded) and the step count S;
 *     τ_i = 1 − i/S;  σ_i = e^μ / (e^μ + (1/τ_i − 1));  σ_S = 0.
 *   linear:  σ_i = 1 − i/S.
 *   power:   σ_i = 1 − (i/S)^α  (α > 0, default 2).
 *
 * Computed in double (the diffusers values; the official float32 code gives
 * σ_0 = 0.99999994 for some sizes, a 6e-8 difference) and returned as
 * float32, the precision the sampler and the dump use. The transformer is
 * fed t = 1000·σ_i.
 */
#ifndef FX_SCHEDULE_H
#define FX_SCHEDULE_H

#include <stdint.h>

#include "src/base/error.h"

/* Empirical μ (BFL flux2 sampling.py; diffusers pipeline_flux2_klein.py): a1 = 8.73809524e-05, b1 = 1.89833333,
 * a2 = 0.00016927, b2 = 0.45666666; n > 4300 → a2·n + b2, else the line
 * through (10, a1·n + b1) and (200, a2·n + b2) evaluated at S. */
double fx_empirical_mu(int64_t n_tokens, int steps);

/* σ_0..σ_steps into sigmas[steps + 1]. n_tokens is used by the shifted
 * schedule, alpha by the power schedule. Errors: steps < 1, n_tokens < 1,
 * alpha not positive/finite, unknown kind → FLUX_ERR_INVALID_ARG. */
flux_status fx_schedule_sigmas(flux_schedule kind, int steps, int64_t n_tokens, double alpha,
                               float *sigmas, fx_err *err);

/* img2img: the first of the `steps` steps that runs for a strength in
 * [0, 1] (diffusers get_timesteps, copied into pipeline_flux2_klein_inpaint.py
 * from the SD3 img2img pipeline), in Python float (double) arithmetic:
 *   init = min(steps·strength, steps);  t_start = int(max(steps − init, 0))
 * Steps t_start .. steps−1 run (σ_{t_start} is the start noise level);
 * steps − t_start may be 0 (strength 0), which the caller refuses. The
 * full schedule is computed for `steps` first (μ from `steps`). */
int fx_schedule_first_step(int steps, double strength);
/* "shifted", "linear", "power" — and the metadata form ("shifted", "linear",
 * "power 2.5") written into buf and returned. */
const char *fx_schedule_name(flux_schedule kind);
const char *fx_schedule_describe(flux_schedule kind, double alpha, char *buf, int size);

#endif
