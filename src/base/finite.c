/* finite.c — NaN/Inf scan (finite.h). */
#include "finite.h"

#include <math.h>
#include <string.h>

int64_t fx_find_nonfinite(const float *x, int64_t n) {
    /* exponent bits all ones = NaN or Inf; blocks of 64 are OR-reduced
     * first so the common all-finite case is a tight loop */
    const int64_t block = 64;
    for (int64_t i = 0; i < n; i += block) {
        const int64_t end = i + block < n ? i + block : n;
        uint32_t any = 0;
        for (int64_t j = i; j < end; j++) {
            uint32_t b;
            memcpy(&b, &x[j], 4);
            any |= (uint32_t)((b & 0x7f800000u) == 0x7f800000u);
        }
        if (any)
            for (int64_t j = i; j < end; j++)
                if (!isfinite(x[j])) return j;
    }
    return -1;
}

const char *fx_nonfinite_name(float v) { return isnan(v) ? "nan" : v > 0 ? "inf" : "-inf"; }
