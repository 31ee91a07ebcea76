/*
 * cpu.c — fx_cpu_facts_get(): CPUID, XCR0 and the AMX checks, read once
 * per process (pthread_once), and their description for --cpu-info.
 */
#include "cpu.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "simd/common/append.h"
#include "simd/common/arch.h"


/* ---- reading the facts --------------------------------------------------- */

#if defined(FX_X86_EMULATED)

/* A Sapphire Rapids-like CPU whose every x86 feature the emulation build
 * implements (simd/common/x86_simde.h, amx_emu.c). */
static void read_facts(fx_cpu_facts *f) {
    f->arch = FX_CPU_X86;
    f->emulated = 1;
    f->vendor = FX_VENDOR_INTEL;
    snprintf(f->vendor_id, sizeof f->vendor_id, "GenuineIntel");
    snprintf(f->brand, sizeof f->brand, "emulated (X86EMU build: SIMDe + AMX model)");
    f->family = 6, f->model = 0x8f, f->stepping = 8;
    f->fma = f->f16c = f->avx2 = 1;
    f->avx512f = f->avx512bw = f->avx512vl = f->avx512dq = 1;
    f->avx512vnni = f->avx512bf16 = f->avxvnni = 1;
    f->amx_tile = f->amx_bf16 = f->amx_int8 = 1;
    f->xcr0 = 0x600e7;
    f->os_avx = f->os_avx512 = f->os_amx = 1;
    f->amx_palettes = 1;
    f->amx_tile_bytes = 1024, f->amx_row_bytes = 64, f->amx_rows = 16, f->amx_tiles = 8;
    f->amx_permitted = 1;
}

#elif defined(__x86_64__) || defined(_M_X64)
#include <cpuid.h>

static void read_facts(fx_cpu_facts *f) {
    f->arch = FX_CPU_X86;
    unsigned a, b, c, d;
    const unsigned max = __get_cpuid_max(0, NULL);
    if (max < 1) return;
    __cpuid(0, a, b, c, d);
    memcpy(f->vendor_id, &b, 4), memcpy(f->vendor_id + 4, &d, 4), memcpy(f->vendor_id + 8, &c, 4);
    f->vendor = !strcmp(f->vendor_id, "GenuineIntel")   ? FX_VENDOR_INTEL
                : !strcmp(f->vendor_id, "AuthenticAMD") ? FX_VENDOR_AMD
                                                        : FX_VENDOR_OTHER;
    __cpuid(1, a, b, c, d);
    const int base_family = (a >> 8) & 15, base_model = (a >> 4) & 15;
    f->family = base_family == 15 ? base_family + (int)((a >> 20) & 255) : base_family;
    f->model = base_family == 6 || base_family == 15 ? base_model + (int)(((a >> 16) & 15) << 4) : base_model;
    f->stepping = a & 15;
    f->fma = (c >> 12) & 1, f->f16c = (c >> 29) & 1;
    if ((c >> 27) & 1) { /* OSXSAVE: XCR0 says which register state the OS saves */
        unsigned lo, hi;
        __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
        f->xcr0 = (uint64_t)hi << 32 | lo;
        f->os_avx = (f->xcr0 & 0x6) == 0x6;
        f->os_avx512 = f->os_avx && (f->xcr0 & 0xe0) == 0xe0;
        f->os_amx = (f->xcr0 & 0x60000) == 0x60000;
    }
    if (max >= 7) {
        __cpuid_count(7, 0, a, b, c, d);
        const unsigned subleaves = a;
        f->avx2 = (b >> 5) & 1, f->avx512f = (b >> 16) & 1, f->avx512dq = (b >> 17) & 1;
        f->avx512bw = (b >> 30) & 1, f->avx512vl = (b >> 31) & 1, f->avx512vnni = (c >> 11) & 1;
        f->amx_bf16 = (d >> 22) & 1, f->avx512fp16 = (d >> 23) & 1, f->amx_tile = (d >> 24) & 1;
        f->amx_int8 = (d >> 25) & 1;
        if (subleaves >= 1) {
            __cpuid_count(7, 1, a, b, c, d);
            f->avxvnni = (a >> 4) & 1, f->avx512bf16 = (a >> 5) & 1;
        }
    }
    if (max >= 0x1d && f->amx_tile) {
        __cpuid_count(0x1d, 0, a, b, c, d);
        f->amx_palettes = (int)a;
        if (a >= 1) {
            __cpuid_count(0x1d, 1, a, b, c, d);
            f->amx_tile_bytes = (int)(a >> 16), f->amx_row_bytes = (int)(b & 0xffff);
            f->amx_tiles = (int)(b >> 16), f->amx_rows = (int)(c & 0xffff);
        }
    }
    if ((unsigned)__get_cpuid_max(0x80000000u, NULL) >= 0x80000004u) { /* int in clang's cpuid.h */
        unsigned r[12];
        for (unsigned i = 0; i < 3; i++) __cpuid(0x80000002u + i, r[4 * i], r[4 * i + 1], r[4 * i + 2], r[4 * i + 3]);
        memcpy(f->brand, r, 48);
        f->brand[48] = 0;
        char *s = f->brand;
        while (*s == ' ') s++;
        memmove(f->brand, s, strlen(s) + 1);
        for (size_t n = strlen(f->brand); n > 0 && f->brand[n - 1] == ' '; n--) f->brand[n - 1] = 0;
    }
}

#elif defined(__aarch64__)
static void read_facts(fx_cpu_facts *f) {
    f->arch = FX_CPU_ARM;
    f->neon = 1; /* Advanced SIMD is mandatory on aarch64 */
}
#else
static void read_facts(fx_cpu_facts *f) { f->arch = FX_CPU_OTHER; }
#endif

static fx_cpu_facts facts;
static pthread_once_t facts_once = PTHREAD_ONCE_INIT;

static void detect(void) {
    read_facts(&facts);
    if (facts.emulated) return;
    /* Ask Linux for the tile state only when nothing else rules AMX out
     * (CPUID, XCR0, palette); a refusal just leaves AMX off. */
    facts.amx_permitted = 1;
    const int ask = fx_cpu_amx_ready(&facts, NULL, 0);
    facts.amx_permitted = ask && fx_amx_os_request(facts.amx_refused, sizeof facts.amx_refused);
}

const fx_cpu_facts *fx_cpu_facts_get(void) {
    pthread_once(&facts_once, detect);
    return &facts;
}

int fx_cpu_amx_ready(const fx_cpu_facts *f, char *why, size_t size) {
    const char *no = NULL;
    char buf[160];
    if (f->arch != FX_CPU_X86) no = "not an x86 CPU";
    else if (!f->amx_tile || !f->amx_bf16) no = "the CPU has no AMX-TILE/AMX-BF16 (CPUID leaf 7)";
    else if (!f->os_amx) {
        snprintf(buf, sizeof buf, "the OS does not enable the tile state (XCR0 = 0x%llx, bits 17-18 clear)",
                 (unsigned long long)f->xcr0);
        no = buf;
    } else if (f->amx_palettes < 1) no = "CPUID leaf 0x1D reports no tile palette (a guest without AMX support)";
    else if (f->amx_rows < 16 || f->amx_row_bytes < 64 || f->amx_tiles < 8) {
        snprintf(buf, sizeof buf, "palette 1 is %d tiles x %d rows x %d bytes (kernels need 8 x 16 x 64)",
                 f->amx_tiles, f->amx_rows, f->amx_row_bytes);
        no = buf;
    } else if (!f->amx_permitted) {
        snprintf(buf, sizeof buf, "%s", f->amx_refused[0] ? f->amx_refused : "the OS did not grant the tile state");
        no = buf;
    }
    else if (f->amx_selftest_failed) no = "the start-up self-test of the tile kernels failed";
    if (no && why && size) snprintf(why, size, "%s", no);
    return no == NULL;
}

/* ---- description ---------------------------------------------------------- */

void fx_cpu_facts_describe(const fx_cpu_facts *f, char *buf, size_t size, size_t *len) {
    if (f->arch == FX_CPU_ARM) {
        fx_append(buf, size, len, "cpu:      aarch64 with neon (Advanced SIMD)\n");
        return;
    }
    if (f->arch != FX_CPU_X86) {
        fx_append(buf, size, len, "cpu:      no SIMD level this build knows\n");
        return;
    }
    fx_append(buf, size, len, "cpu:      %s family 0x%x model 0x%x stepping %d%s%s%s\n", f->vendor_id[0] ? f->vendor_id : "?",
        f->family, f->model, f->stepping, f->brand[0] ? " (" : "", f->brand, f->brand[0] ? ")" : "");
    const struct {
        const char *name;
        int on;
    } feat[] = {
        {"avx2", f->avx2},
        {"fma", f->fma},
        {"f16c", f->f16c},
        {"avx512f", f->avx512f},
        {"avx512bw", f->avx512bw},
        {"avx512vl", f->avx512vl},
        {"avx512dq", f->avx512dq},
        {"avx512_bf16", f->avx512bf16},
        {"avx512_vnni", f->avx512vnni},
        {"avx512_fp16", f->avx512fp16},
        {"avx_vnni", f->avxvnni},
        {"amx_tile", f->amx_tile},
        {"amx_bf16", f->amx_bf16},
        {"amx_int8", f->amx_int8},
    };
    fx_append(buf, size, len, "          x86-64 with");
    for (size_t i = 0; i < sizeof feat / sizeof feat[0]; i++)
        if (feat[i].on) fx_append(buf, size, len, " %s", feat[i].name);
    fx_append(buf, size, len, "\n          absent:");
    int none = 1;
    for (size_t i = 0; i < sizeof feat / sizeof feat[0]; i++)
        if (!feat[i].on) fx_append(buf, size, len, " %s", feat[i].name), none = 0;
    fx_append(buf, size, len, "%s\n", none ? " none" : "");
    fx_append(buf, size, len, "os:       XCR0 0x%llx: saves %s%s\n", (unsigned long long)f->xcr0,
        f->os_avx512 ? "ymm+zmm" : f->os_avx ? "ymm (no zmm)" : "no ymm", f->os_amx ? " + tiles" : "");
    if (f->amx_tile) {
        if (f->amx_palettes >= 1)
            fx_append(buf, size, len, "amx:      %d palette(s); palette 1: %d tiles x %d rows x %d bytes (%d per tile)\n",
                f->amx_palettes, f->amx_tiles, f->amx_rows, f->amx_row_bytes, f->amx_tile_bytes);
        else
            fx_append(buf, size, len, "amx:      no palette (CPUID leaf 0x1D)\n");
        fx_append(buf, size, len, "          tile state %s\n",
            f->emulated ? "emulated" : f->amx_permitted ? "granted by Linux (arch_prctl)" : "not granted");
    }
    char why[160];
    if (fx_cpu_amx_ready(f, why, sizeof why)) fx_append(buf, size, len, "          AMX usable\n");
    else if (f->amx_tile || f->amx_bf16) fx_append(buf, size, len, "          AMX off: %s\n", why);
}
