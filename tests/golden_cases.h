/*
 * golden_cases.h — test helpers for the golden cases in tests/golden/.
 *
 * Official cases use the committed tiny model (tests/golden/model, or
 * model-base when the case has a neg/ prompt). Our cases (ours-*, see
 * tests/golden/ours-README.md) describe their model by a gen_model command line
 * in case.txt; fx_golden_case_model() builds it once per model id into
 * <build>/golden-models/<id> (next to the tools directory) and reuses it.
 */
#ifndef FX_GOLDEN_CASES_H
#define FX_GOLDEN_CASES_H

/* Value of `key:` in tests/golden/<case_name>/case.txt, malloc'd (caller frees),
 * or NULL when the file or the key is absent. */
char *fx_golden_case_get(const char *case_name, const char *key);

/* The gen_model binary: $FLUX_TOOLS/gen_model, else tools/gen_model next to the
 * test binary. Static buffer; NULL (with a message on stdout) if it is missing. */
const char *fx_gen_model_bin(void);

/* Model folder for a golden case (static buffer). NULL with a message on
 * stdout when the model cannot be built. */
const char *fx_golden_case_model(const char *case_name);

#endif
