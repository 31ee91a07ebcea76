/*
 * bench_peak.c — this machine's measured arithmetic peak, the denominator
 * of every "% of peak" in flux-bench, and the `peak` command.
 *
 * Each loop keeps 12 independent accumulators in registers (more than
 * latency × throughput on current cores) and runs on every thread at
 * once; GFLOPS counts a multiply-add as 2 flops:
 *   fma_f32   zmm vfmadd231ps (16 lanes) if AVX-512F, else ymm (8) with
 *             AVX2+FMA, NEON vfmaq_f32 (4) on aarch64, scalar otherwise
 *   bf16_dot  zmm vdpbf16ps: 16 lanes × 2 products per instruction
 *   amx_bf16  tdpbf16ps into 4 accumulator tiles (16×16 f32 each) from 2 A
 *             and 2 B tiles loaded once: 16·16·32 products per
 *             instruction (only where the library uses AMX: CPUID, OS
 *             grant and self-test passed)
 * and the int8 dot products of the int8 GEMM (G-ops, a multiply-add = 2):
 *   int8_zmm  zmm vpdpbusd: 16 lanes × 4 products
 *   int8_ymm  ymm vpdpbusd (AVX-VNNI, VEX): 8 lanes × 4 products
 *   int8_avx2 ymm vpmaddubsw + vpmaddwd (ones) + vpaddd: 32 products per
 *             three instructions (AVX2 without VNNI)
 *   amx_int8  tdpbssd as amx_bf16: 16·16·64 products per instruction
 * and the memory side of the roofline (fx_bench_mem_gbps): bytes read per
 * second from a buffer far larger than the caches, every thread reading
 * its own contiguous part (what a GEMV streaming its weights sees).
 */
#include "bench.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "simd/common/cpu.h"
#include "simd/common/table.h"

#if defined(__x86_64__)
#include <immintrin.h>
#elif defined(__aarch64__)
#include <arm_neon.h>
#endif

/* ------------------------------------------------------------------------ */
/* Throughput loops: each returns the flops it performed                    */
/* ------------------------------------------------------------------------ */

#define ACC12(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)
/* 10 for VEX loops: 16 ymm registers hold them with the operands, no copies */
#define ACC10(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9)

#if defined(__x86_64__) && !defined(FX_X86_EMULATED)
__attribute__((target("avx512f"))) static double loop_fma_zmm(long iters, float seed) {
    __m512 a = _mm512_set1_ps(seed), b = _mm512_set1_ps(1e-7f);
#define DECL(i) __m512 c##i = _mm512_set1_ps((float)(i));
#define STEP(i) c##i = _mm512_fmadd_ps(a, b, c##i);
#define SUM(i) s = _mm512_add_ps(s, c##i);
    ACC12(DECL)
    for (long it = 0; it < iters; it++) { ACC12(STEP) }
    __m512 s = _mm512_setzero_ps();
    ACC12(SUM)
    volatile float sink = _mm512_reduce_add_ps(s);
    (void)sink;
    return (double)iters * 12 * 16 * 2;
#undef DECL
#undef STEP
#undef SUM
}

__attribute__((target("avx2,fma"))) static double loop_fma_ymm(long iters, float seed) {
    __m256 a = _mm256_set1_ps(seed), b = _mm256_set1_ps(1e-7f);
#define DECL(i) __m256 c##i = _mm256_set1_ps((float)(i));
#define STEP(i) c##i = _mm256_fmadd_ps(a, b, c##i);
#define SUM(i) s = _mm256_add_ps(s, c##i);
    ACC12(DECL)
    for (long it = 0; it < iters; it++) { ACC12(STEP) }
    __m256 s = _mm256_setzero_ps();
    ACC12(SUM)
    float out[8];
    _mm256_storeu_ps(out, s);
    volatile float sink = out[0];
    (void)sink;
    return (double)iters * 12 * 8 * 2;
#undef DECL
#undef STEP
#undef SUM
}

__attribute__((target("avx512f,avx512bf16"))) static double loop_bf16_zmm(long iters, float seed) {
    __m512bh a = (__m512bh)_mm512_set1_epi32(0x3c003c00 + (int)seed), b = (__m512bh)_mm512_set1_epi32(0x33d633d6);
#define DECL(i) __m512 c##i = _mm512_set1_ps((float)(i));
#define STEP(i) c##i = _mm512_dpbf16_ps(c##i, a, b);
#define SUM(i) s = _mm512_add_ps(s, c##i);
    ACC12(DECL)
    for (long it = 0; it < iters; it++) { ACC12(STEP) }
    __m512 s = _mm512_setzero_ps();
    ACC12(SUM)
    volatile float sink = _mm512_reduce_add_ps(s);
    (void)sink;
    return (double)iters * 12 * 16 * 4;
#undef DECL
#undef STEP
#undef SUM
}
__attribute__((target("avx512f,avx512vnni"))) static double loop_int8_zmm(long iters, float seed) {
    __m512i a = _mm512_set1_epi32(0x01010101 + (int)seed), b = _mm512_set1_epi32(0x01020304);
#define DECL(i) __m512i c##i = _mm512_set1_epi32(i);
#define STEP(i) c##i = _mm512_dpbusd_epi32(c##i, a, b);
#define SUM(i) s = _mm512_add_epi32(s, c##i);
    ACC12(DECL)
    for (long it = 0; it < iters; it++) { ACC12(STEP) }
    __m512i s = _mm512_setzero_si512();
    ACC12(SUM)
    /* one lane: the int32 sums wrap (defined in vector lanes, UB in C's reduce) */
    volatile int sink = _mm_cvtsi128_si32(_mm512_castsi512_si128(s));
    (void)sink;
    return (double)iters * 12 * 16 * 4 * 2;
#undef DECL
#undef STEP
#undef SUM
}
__attribute__((target("avx2,avxvnni"))) static double loop_int8_ymm(long iters, float seed) {
    __m256i a = _mm256_set1_epi32(0x01010101 + (int)seed), b = _mm256_set1_epi32(0x01020304);
#define DECL(i) __m256i c##i = _mm256_set1_epi32(i);
#define STEP(i) c##i = _mm256_dpbusd_avx_epi32(c##i, a, b);
#define SUM(i) s = _mm256_add_epi32(s, c##i);
    ACC10(DECL)
    for (long it = 0; it < iters; it++) { ACC10(STEP) }
    __m256i s = _mm256_setzero_si256();
    ACC10(SUM)
    volatile int sink = _mm256_extract_epi32(s, 0);
    (void)sink;
    return (double)iters * 10 * 8 * 4 * 2;
#undef DECL
#undef STEP
#undef SUM
}
__attribute__((target("avx2"))) static double loop_int8_avx2(long iters, float seed) {
    __m256i a = _mm256_set1_epi32(0x01010101 + (int)seed), b = _mm256_set1_epi32(0x01020304),
            ones = _mm256_set1_epi16(1);
#define DECL(i) __m256i c##i = _mm256_set1_epi32(i);
#define STEP(i) c##i = _mm256_add_epi32(c##i, _mm256_madd_epi16(_mm256_maddubs_epi16(a, b), ones));
#define SUM(i) s = _mm256_add_epi32(s, c##i);
    ACC12(DECL)
    for (long it = 0; it < iters; it++) {
        ACC12(STEP)
        __asm__ __volatile__("" : "+x"(a)); /* keep the products in the loop */
    }
    __m256i s = _mm256_setzero_si256();
    ACC12(SUM)
    volatile int sink = _mm256_extract_epi32(s, 0);
    (void)sink;
    return (double)iters * 12 * 8 * 4 * 2;
#undef DECL
#undef STEP
#undef SUM
}
/* The tiles: the palette of the kernels (8 tiles of 16 rows × 64 bytes);
 * 4 accumulators from 2 A and 2 B tiles loaded once. ELEM: the operand
 * element type, A0/B0 its values, ACC the accumulator type, TDP the
 * instruction, PAIRS products per 4-byte pair of a row (2 bf16, 4 int8). */
#define FX_AMX_PEAK_LOOP(name, TGT, ELEM, A0, B0, ACC, TDP, PAIRS)                                        \
    __attribute__((target(TGT))) static double name(long iters, float seed) {                                \
        static const _Alignas(64) unsigned char cfg[64] = {                                                   \
            1, 0, [16] = 64, 0, 64, 0, 64, 0, 64, 0, 64, 0, 64, 0, 64, 0, 64, 0,                              \
            [48] = 16, 16, 16, 16, 16, 16, 16, 16};                                                           \
        _Alignas(64) ELEM a[16 * 64 / sizeof(ELEM)], b[16 * 64 / sizeof(ELEM)];                               \
        _Alignas(64) ACC c[16 * 16];                                                                          \
        for (size_t i = 0; i < 16 * 64 / sizeof(ELEM); i++) a[i] = (ELEM)((A0) + (int)seed), b[i] = (ELEM)(B0); \
        __asm__ __volatile__("" ::: "memory");                                                                \
        _tile_loadconfig(cfg);                                                                                \
        _tile_loadd(4, a, 64);                                                                                \
        _tile_loadd(5, a, 64);                                                                                \
        _tile_loadd(6, b, 64);                                                                                \
        _tile_loadd(7, b, 64);                                                                                \
        _tile_zero(0);                                                                                        \
        _tile_zero(1);                                                                                        \
        _tile_zero(2);                                                                                        \
        _tile_zero(3);                                                                                        \
        for (long it = 0; it < iters; it++) {                                                                 \
            TDP(0, 4, 6);                                                                                     \
            TDP(1, 4, 7);                                                                                     \
            TDP(2, 5, 6);                                                                                     \
            TDP(3, 5, 7);                                                                                     \
        }                                                                                                     \
        _tile_stored(0, c, 64);                                                                               \
        _tile_release();                                                                                      \
        volatile ACC sink = c[0];                                                                             \
        (void)sink;                                                                                           \
        return (double)iters * 4 * 16 * 16 * 16 * (PAIRS) * 2;                                                \
    }
FX_AMX_PEAK_LOOP(loop_amx_bf16, "amx-tile,amx-bf16", uint16_t, 0x3c00, 0x33d6, float, _tile_dpbf16ps, 2)
FX_AMX_PEAK_LOOP(loop_amx_int8, "amx-tile,amx-int8", int8_t, 1, 3, int32_t, _tile_dpbssd, 4)
#undef FX_AMX_PEAK_LOOP
#elif defined(__aarch64__)
static double loop_fma_neon(long iters, float seed) {
    float32x4_t a = vdupq_n_f32(seed), b = vdupq_n_f32(1e-7f);
#define DECL(i) float32x4_t c##i = vdupq_n_f32((float)(i));
#define STEP(i) c##i = vfmaq_f32(c##i, a, b);
#define SUM(i) s = vaddq_f32(s, c##i);
    ACC12(DECL)
    for (long it = 0; it < iters; it++) { ACC12(STEP) }
    float32x4_t s = vdupq_n_f32(0);
    ACC12(SUM)
    volatile float sink = vaddvq_f32(s);
    (void)sink;
    return (double)iters * 12 * 4 * 2;
#undef DECL
#undef STEP
#undef SUM
}
#endif

static double loop_scalar(long iters, float seed) {
    float c[12];
    for (int i = 0; i < 12; i++) c[i] = (float)i;
    for (long it = 0; it < iters; it++)
        for (int i = 0; i < 12; i++) c[i] += seed * 1e-7f;
    volatile float sink = c[0] + c[11];
    (void)sink;
    return (double)iters * 12 * 2;
}

typedef double (*loop_fn)(long iters, float seed);

static loop_fn pick_loop(fx_bench_peak_kind kind, const char **what) {
#if defined(FX_X86_EMULATED)
    /* the emulation build's CPU is not this machine: no real peak, and
     * its wide instructions may not exist here */
    if (kind != FX_PEAK_FMA_F32) return *what = "none (emulated CPU)", NULL;
#elif defined(__x86_64__)
    fx_isa best = fx_isa_detect();
    if (kind == FX_PEAK_AMX_BF16) {
        *what = "tdpbf16ps 2x2";
        return fx_kernels_get(FX_ISA_AMX, 0) ? loop_amx_bf16 : NULL;
    }
    if (kind == FX_PEAK_BF16_DOT) {
        *what = "zmm vdpbf16ps";
        return best >= FX_ISA_AVX512BF16 ? loop_bf16_zmm : NULL;
    }
    const fx_cpu_facts *f = fx_cpu_facts_get();
    if (kind == FX_PEAK_INT8_ZMM) return *what = "zmm vpdpbusd", best >= FX_ISA_AVX512 && f->avx512vnni ? loop_int8_zmm : NULL;
    if (kind == FX_PEAK_INT8_YMM) return *what = "ymm vpdpbusd", best >= FX_ISA_AVX2 && f->avxvnni ? loop_int8_ymm : NULL;
    if (kind == FX_PEAK_INT8_AVX2) return *what = "ymm maddubs", best >= FX_ISA_AVX2 ? loop_int8_avx2 : NULL;
    if (kind == FX_PEAK_AMX_INT8) {
        *what = "tdpbssd 2x2";
        return fx_kernels_get(FX_ISA_AMX, 0) && f->amx_int8 ? loop_amx_int8 : NULL;
    }
    if (best >= FX_ISA_AVX512) return *what = "zmm vfmadd231ps", loop_fma_zmm;
    if (best >= FX_ISA_AVX2) return *what = "ymm vfmadd231ps", loop_fma_ymm;
#elif defined(__aarch64__)
    if (kind != FX_PEAK_FMA_F32) return *what = "none", NULL;
    return *what = "neon fmla", loop_fma_neon;
#endif
    if (kind != FX_PEAK_FMA_F32) return *what = "none", NULL;
    return *what = "scalar", loop_scalar;
}

/* ------------------------------------------------------------------------ */
/* Measurement, cached per (kind, threads)                                  */
/* ------------------------------------------------------------------------ */

enum { MAX_CACHED_THREADS = 256 };
static double g_peak[FX_PEAK_KINDS][MAX_CACHED_THREADS + 1];

static double measure(loop_fn fn, int threads) {
    long iters = 1 << 16;
    /* grow until one run takes >= 50 ms on one thread, then best of 5 */
    for (;;) {
        double t0 = fx_bench_now();
        fn(iters, 1.0f);
        if (fx_bench_now() - t0 > 0.05 || iters > (1L << 40)) break;
        iters *= 2;
    }
    double best = 0;
    for (int rep = 0; rep < 5; rep++) {
        double flops = 0;
        double t0 = fx_bench_now();
#pragma omp parallel num_threads(threads) reduction(+ : flops)
        flops += fn(iters, 1.0f + (float)fx_thread_id());
        double g = flops / (fx_bench_now() - t0) * 1e-9;
        if (g > best) best = g;
    }
    return best;
}

double fx_bench_peak(fx_bench_peak_kind kind, int threads) {
    if ((unsigned)kind >= FX_PEAK_KINDS || threads < 1) return 0;
    if (threads <= MAX_CACHED_THREADS && g_peak[kind][threads] != 0)
        return g_peak[kind][threads] < 0 ? 0 : g_peak[kind][threads];
    const char *what;
    loop_fn fn = pick_loop(kind, &what);
    double g = 0;
    /* A busy machine gives a peak that is too low (and percentages that
     * are too high): while other processes use CPU, wait a little and
     * measure again (up to 10 times), keeping the best. */
    for (int attempt = 0; fn && attempt < 10; attempt++) {
        double busy0 = fx_bench_machine_busy(), self0 = fx_bench_self_cpu();
        double t = measure(fn, threads);
        double foreign = (fx_bench_machine_busy() - busy0) - (fx_bench_self_cpu() - self0);
        if (t > g) g = t;
        if (busy0 < 0 || foreign < 0.05) break;
        if (attempt < 9) {
            struct timespec pause = {0, 500000000};
            nanosleep(&pause, NULL);
        } else
            fprintf(stderr, "flux-bench: warning: the %s peak (%d threads) was measured on a busy machine "
                            "(%.2f CPU-s used by other processes): %% of peak is overstated\n",
                    fx_bench_peak_name(kind), threads, foreign);
    }
    if (threads <= MAX_CACHED_THREADS) g_peak[kind][threads] = g > 0 ? g : -1;
    return g;
}

const char *fx_bench_peak_name(fx_bench_peak_kind kind) {
    static const char *names[FX_PEAK_KINDS] = {"fma_f32",  "bf16_dot",  "amx_bf16", "int8_zmm",
                                               "int8_ymm", "int8_avx2", "amx_int8"};
    return (unsigned)kind < FX_PEAK_KINDS ? names[kind] : "none";
}

/* ------------------------------------------------------------------------ */
/* Memory read bandwidth                                                    */
/* ------------------------------------------------------------------------ */

enum { MEM_BYTES = 1 << 28 }; /* 256 MiB: >> any L3 of the 2-core boxes */

/* Sum of n 64-bit words with 8 independent chains (the compiler vectorizes
 * it at -O2; the loads, not the adds, bound it). */
static uint64_t read_words(const uint64_t *p, size_t n) {
    uint64_t s[8] = {0};
    for (size_t i = 0; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) s[j] += p[i + j];
    return s[0] + s[1] + s[2] + s[3] + s[4] + s[5] + s[6] + s[7];
}

static double g_mem_gbps[MAX_CACHED_THREADS + 1];

double fx_bench_mem_gbps(int threads) {
    if (threads < 1) return 0;
    if (threads <= MAX_CACHED_THREADS && g_mem_gbps[threads] != 0) return g_mem_gbps[threads];
    const size_t n = MEM_BYTES / sizeof(uint64_t);
    uint64_t *buf = malloc(MEM_BYTES);
    if (!buf) return 0;
#pragma omp parallel for num_threads(threads) schedule(static)
    for (size_t i = 0; i < n; i++) buf[i] = i; /* first touch by the thread that reads it */
    double best = 0;
    volatile uint64_t sink = 0;
    for (int rep = 0; rep < 5; rep++) {
        uint64_t sum = 0;
        const double t0 = fx_bench_now();
#pragma omp parallel num_threads(threads) reduction(+ : sum)
        {
            const size_t tid = (size_t)fx_thread_id(), nt = (size_t)fx_thread_count();
            const size_t i0 = n * tid / nt / 8 * 8, i1 = n * (tid + 1) / nt / 8 * 8;
            sum += read_words(buf + i0, i1 - i0);
        }
        const double g = (double)MEM_BYTES / (fx_bench_now() - t0) * 1e-9;
        sink += sum;
        if (g > best) best = g;
    }
    (void)sink;
    free(buf);
    if (threads <= MAX_CACHED_THREADS) g_mem_gbps[threads] = best;
    return best;
}

/* ------------------------------------------------------------------------ */
/* The `peak` command                                                       */
/* ------------------------------------------------------------------------ */

static int peak_main(int argc, char **argv, const fx_bench_env *env) {
    (void)argc, (void)argv;
    int counts[2] = {1, env->threads};
    int nc = env->threads > 1 ? 2 : 1;
    for (int kind = 0; kind < FX_PEAK_KINDS; kind++) {
        const char *what;
        loop_fn fn = pick_loop((fx_bench_peak_kind)kind, &what);
        for (int c = 0; c < nc; c++) {
            double g = fn ? fx_bench_peak((fx_bench_peak_kind)kind, counts[c]) : 0;
            if (env->json)
                printf("{\"op\":\"peak\",\"kind\":\"%s\",\"instruction\":\"%s\",\"threads\":%d,"
                       "\"gflops\":%.6g}\n",
                       fx_bench_peak_name((fx_bench_peak_kind)kind), what, counts[c], g);
            else if (fn)
                printf("peak   %-9s %-16s threads %-3d %8.1f %s (%.1f per thread)\n",
                       fx_bench_peak_name((fx_bench_peak_kind)kind), what, counts[c], g,
                       kind >= FX_PEAK_INT8_ZMM ? "G-ops " : "GFLOPS", g / counts[c]);
            else
                printf("peak   %-9s not supported on this CPU\n", fx_bench_peak_name((fx_bench_peak_kind)kind));
        }
    }
    for (int c = 0; c < nc; c++) {
        const double g = fx_bench_mem_gbps(counts[c]);
        if (env->json)
            printf("{\"op\":\"peak\",\"kind\":\"mem_read\",\"threads\":%d,\"gbps\":%.6g}\n", counts[c], g);
        else
            printf("peak   %-9s %-16s threads %-3d %8.1f GB/s   (%.1f per thread)\n", "mem_read", "256 MiB read",
                   counts[c], g, g / counts[c]);
    }
    fflush(stdout);
    return 0;
}

static int peak_defaults(const fx_bench_env *env) { return peak_main(0, NULL, env); }

FX_BENCH_COMMAND(peak, "peak                  FMA / vdpbf16ps / AMX tdpbf16ps / int8 dot (vpdpbusd, maddubs, tdpbssd) throughput, 1 and N threads", peak_main,
                 peak_defaults)
