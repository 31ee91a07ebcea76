/*
 * cpu.h — what the CPU and the OS offer the kernels: CPUID feature bits,
 * vendor / family / model, the register state the OS saves (XCR0), the AMX
 * palette (CPUID leaf 0x1D) and whether Linux granted this process the AMX
 * tile state. Read once per process (thread-safe) by fx_cpu_facts(); the
 * dispatch (simd/dispatch.c) decides from these facts alone which kernel
 * each operation runs.
 *
 * The emulation build (FX_X86_EMULATED) reports an emulated Sapphire
 * Rapids-like CPU instead (every x86 feature, AMX granted), so that every
 * x86 table is built and tested there.
 */
#ifndef FX_CPU_H
#define FX_CPU_H

#include <stddef.h>
#include <stdint.h>

typedef enum fx_cpu_arch { FX_CPU_OTHER = 0, FX_CPU_X86, FX_CPU_ARM } fx_cpu_arch;
typedef enum fx_cpu_vendor { FX_VENDOR_OTHER = 0, FX_VENDOR_INTEL, FX_VENDOR_AMD } fx_cpu_vendor;

typedef struct fx_cpu_facts {
    fx_cpu_arch arch;
    int emulated;            /* the X86EMU build's emulated CPU */
    fx_cpu_vendor vendor;
    char vendor_id[13];      /* "GenuineIntel", "AuthenticAMD", ... */
    char brand[49];          /* CPUID 0x80000002..4, trimmed */
    int family, model, stepping; /* display family / model (extended fields folded in) */

    /* CPUID feature bits (leaf 1, leaf 7 subleaves 0 and 1) */
    int fma, f16c, avx2;
    int avx512f, avx512bw, avx512vl, avx512dq;
    int avx512vnni, avx512bf16, avx512fp16, avxvnni;
    int amx_tile, amx_bf16, amx_int8;
    int neon;

    /* OS state: XCR0 (xgetbv 0) and what it enables */
    uint64_t xcr0;
    int os_avx;              /* XCR0 bits 1, 2: xmm, ymm */
    int os_avx512;           /* + bits 5, 6, 7: opmask, zmm */
    int os_amx;              /* bits 17, 18: XTILECFG, XTILEDATA */

    /* AMX palette (CPUID 0x1D): highest palette (0: none — some guests
     * advertise AMX with no palette) and palette 1's geometry */
    int amx_palettes;
    int amx_tile_bytes, amx_row_bytes, amx_rows, amx_tiles;

    /* Linux: arch_prctl(ARCH_REQ_XCOMP_PERM, XTILEDATA) granted (checked
     * with ARCH_GET_XCOMP_PERM); asked only when the checks above pass */
    int amx_permitted;
    char amx_refused[120];   /* why not, when asked and refused */
    /* Set by the dispatch when its start-up self-test of the tile kernels
     * failed (a real AMX host only); 0 otherwise. */
    int amx_selftest_failed;
} fx_cpu_facts;

/* This machine's facts (first call reads CPUID and asks Linux for the tile
 * state; thread-safe). */
const fx_cpu_facts *fx_cpu_facts_get(void);

/* Whether the facts allow AMX tile instructions, in the order of the
 * checks; when not, why names the first one that fails. */
int fx_cpu_amx_ready(const fx_cpu_facts *f, char *why, size_t size);

/* "Intel family 6 model 0x8f (...)" style lines of every fact, appended
 * at buf[*len..size) like snprintf (len counts what was needed). */
void fx_cpu_facts_describe(const fx_cpu_facts *f, char *buf, size_t size, size_t *len);

/* Linux AMX permission (amx_os.c): 1 if this process may use the tile
 * state, after requesting it; else 0 and why. */
int fx_amx_os_request(char *why, size_t size);

/* Run fn(arg) with SIGILL and SIGSEGV caught on this thread (amx_os.c):
 * returns fn's result, or -1 with *signo set when a signal arrived. Only
 * for the one-off AMX self-test; other threads' signals go to the
 * handlers installed before. Without FLUX_SIGNALS_CPU_PROBE (flux.h) fn
 * runs unguarded. */
int fx_amx_os_guarded(int (*fn)(void *), void *arg, int *signo);

#endif
