/*
 * embcache.h — content-addressed cache of text embeddings, so a prompt seen
 * before never loads or runs the text encoder again.
 *
 * Key. SHA-256 over a domain string, the model identity, the kernel path
 * and the exact encoder input:
 *   key = SHA-256("flux.c text embeddings v1\0" ‖ model_id ‖ path ‖
 *                 u32 rows ‖ u32 cols ‖ ids[rows] (i32 LE) ‖ mask[rows] (u8))
 *   model_id = SHA-256("flux.c text encoder identity v1\0" ‖
 *                 u64 len ‖ SHA-256(text_encoder/config.json bytes) ‖
 *                 u64 len ‖ SHA-256(tokenizer/tokenizer.json bytes) ‖
 *                 per weight shard: u64 size ‖ u64 mtime s ‖ u64 mtime ns ‖
 *                 the text encoder's tensor table (name, dtype, shape of
 *                 every tensor, from the already parsed headers))
 *   path = "isa=<name> bf16dot=<0|1>": embeddings are bit-identical only
 *          on one kernel path (precision mode and ISA), so each path has
 *          its own entries.
 * The identity is computed once per loaded model (hashing config.json and
 * tokenizer.json, ~11 MB: about 50 ms). The weights (8 GB for klein-4B) are
 * too big to hash per run, so they enter by the size and modification time
 * of each shard (stat only, no data read): two text encoders with the same
 * config but other weights (a fine-tune, an "abliterated" Qwen3, models
 * generated with other seeds) never share entries, and replacing or editing
 * the weights retires the old entries. A copy of the same weights with
 * another mtime just misses once (cp -p keeps the mtime).
 *
 * Payload. The embeddings as raw little-endian f32 [rows, cols]: lossless,
 * so a run served from the cache is bit-identical to one that encoded.
 *
 * Memory. An LRU of the last entries inside the context (bounded by count
 * and bytes), consulted first.
 *
 * Disk. One file per entry, <dir>/<64 hex digits of the key>.emb:
 *   offset size
 *     0     8  magic "FLUXEMB\0"
 *     8     4  format version (FX_EMBCACHE_VERSION)
 *    12     4  header size (128)
 *    16     4  rows          20  4  cols
 *    24     4  dtype (1 = f32 little-endian)        28  4  0
 *    32    32  key
 *    64    32  SHA-256 of the payload
 *    96     8  payload bytes (rows · cols · 4)
 *   104    24  zero
 *   128     …  payload
 * (all integers little-endian). Entries are written to a temporary file in
 * the same directory and renamed into place (atomic_file.h), so processes
 * sharing the directory see a complete entry or none. Reading checks the
 * file size, every header field against what is asked for, and the
 * payload's SHA-256; a corrupt, truncated or mismatched entry is reported
 * in verbose mode, deleted (only if it is still the same file) and treated
 * as a miss, so the caller recomputes and stores a good one.
 *
 * Budget. After each store the directory is scanned; while the entries
 * exceed the budget the least recently used are deleted. "Recently used" is
 * the file's modification time: set when written and refreshed (futimens)
 * on every hit — atime is not used because most file systems are mounted
 * relatime/noatime. Temporary files a killed writer left
 * (fx_atomic_is_stale) are removed by the same scan. Default budget 1 GiB (about 65
 * klein-4B prompts of 15.7 MB); env FLUX_CACHE_MAX_MB overrides it.
 *
 * Directory: flux_options.cache_dir, else $XDG_CACHE_HOME/flux/embeddings
 * (an absolute XDG_CACHE_HOME only, as the XDG spec says), else
 * $HOME/.cache/flux/embeddings; created if missing. flux_options.
 * no_disk_cache (CLI --no-cache) leaves only the in-memory LRU.
 *
 * The cache never fails a generation: every disk problem is logged (verbose)
 * and turns into a miss or a skipped store.
 */
#ifndef FX_EMBCACHE_H
#define FX_EMBCACHE_H

#include <stddef.h>
#include <stdint.h>

#include "src/model/ctx.h"
#include "src/base/sha256.h"

#define FX_EMBCACHE_VERSION 1
#define FX_EMBCACHE_HEADER 128
#define FX_EMBCACHE_MAGIC "FLUXEMB" /* + NUL = 8 bytes */

#define FX_EMBCACHE_MEM_ENTRIES 16
#define FX_EMBCACHE_MEM_BYTES ((size_t)256 << 20)
#define FX_EMBCACHE_DISK_BYTES ((uint64_t)1 << 30)

typedef struct fx_embcache fx_embcache;

typedef struct fx_embcache_config {
    const char *dir;        /* on-disk store (created if missing); NULL = memory only */
    int mem_entries;        /* in-memory LRU bounds; 0 = no memory cache */
    size_t mem_bytes;
    uint64_t disk_bytes;    /* size budget of dir */
    const fx_logger *log;   /* messages via fx_log(log, ...); NULL = silent */
} fx_embcache_config;

/* What happened so far (for tests and -vv). */
typedef struct fx_embcache_stats {
    long mem_hits, disk_hits, misses;
    long stores, disk_writes;
    long corrupt;           /* disk entries found bad and deleted */
    long disk_evictions, mem_evictions;
    size_t mem_bytes;       /* held by the in-memory LRU now */
} fx_embcache_stats;

/* NULL only when out of memory. A directory that cannot be created is
 * logged and the cache works in memory. */
fx_embcache *fx_embcache_new(const fx_embcache_config *cfg);
void fx_embcache_free(fx_embcache *c);
const char *fx_embcache_dir(const fx_embcache *c); /* NULL = memory only */
fx_embcache_stats fx_embcache_get_stats(const fx_embcache *c);

/* The key of one encoder input (see the top of this file). */
void fx_embcache_key(const uint8_t model_id[FX_SHA256_BYTES], const char *path, const int32_t *ids,
                     const uint8_t *mask, int rows, int cols, uint8_t key[FX_SHA256_BYTES]);

/* Look up key: 1 = hit, out [rows, cols] filled; 0 = miss (out may have
 * been written to: the caller recomputes it). A disk hit enters memory. */
int fx_embcache_get(fx_embcache *c, const uint8_t key[FX_SHA256_BYTES], int rows, int cols, float *out);

/* Store data [rows, cols] under key in memory and on disk. */
void fx_embcache_put(fx_embcache *c, const uint8_t key[FX_SHA256_BYTES], int rows, int cols, const float *data);

/* Entry file name of a key in a directory, into buf. */
void fx_embcache_entry_path(const char *dir, const uint8_t key[FX_SHA256_BYTES], char *buf, size_t size);

/* ------------------------------------------------------------------------ */
/* The context's cache (what the text encoder uses)                         */
/* ------------------------------------------------------------------------ */

/* Look (ids, mask) [seq] up for the loaded model: 1 = hit (out [seq, cols]
 * filled, the text encoder untouched), 0 = miss. key receives the key for
 * fx_text_cache_store (all zero when the cache is off). Creates ctx->embcache and the model identity on
 * first use; without a model, or when the identity cannot be read, the
 * cache is off (0, logged). */
int fx_text_cache_lookup(flux_ctx *ctx, const int32_t *ids, const uint8_t *mask, int seq, int cols, float *out,
                         uint8_t key[FX_SHA256_BYTES]);
/* Store what the encoder produced for a key from fx_text_cache_lookup. */
void fx_text_cache_store(flux_ctx *ctx, const uint8_t key[FX_SHA256_BYTES], int seq, int cols, const float *emb);

/* The default directory (see above) into buf; 0 when there is none (no
 * absolute XDG_CACHE_HOME and no HOME). */
int fx_embcache_default_dir(char *buf, size_t size);

/* Free ctx->embcache (model.c calls it when the model goes away). */
void fx_embcache_release(flux_ctx *ctx);

#endif
