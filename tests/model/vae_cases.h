/* vae_cases.h — VAE golden checks of test_vae.c shared with tests/vulkan:
 * the whole-tensor plan (vae_whole.c) on the golden decode (every stage
 * against its golden) and the golden encodes, f32 tolerance 1e-4, on the
 * backend of fx_gcase_set_backend. */
#ifndef FX_TEST_VAE_CASES_H
#define FX_TEST_VAE_CASES_H

void fx_vae_whole_decode_check(void);
void fx_vae_whole_encode_check(void);

#endif
