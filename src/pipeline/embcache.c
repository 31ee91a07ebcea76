/*
 * embcache.c — the content-addressed text-embedding cache (embcache.h):
 * in-memory LRU, on-disk entries with header + checksum, atomic writes,
 * size budget with LRU eviction, and the context glue for the text encoder.
 */
#include "embcache.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "src/base/atomic_file.h"
#include "src/base/file_read.h"
#include "src/model/model.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the embedding cache stores little-endian floats; flux.c supports little-endian hosts only"
#endif

#define DTYPE_F32LE 1

typedef struct mem_entry {
    uint8_t key[FX_SHA256_BYTES];
    int rows, cols;
    float *data;      /* NULL = free slot */
    uint64_t used;    /* LRU clock value of the last use */
} mem_entry;

struct fx_embcache {
    fx_embcache_config cfg;
    char *dir;                   /* owned; NULL = memory only */
    mem_entry *mem;              /* [cfg.mem_entries] */
    size_t mem_bytes_used;
    uint64_t clock;
    fx_embcache_stats stats;

    /* the context's model (fx_text_cache_*) */
    int id_state;                /* 0 not computed, 1 ready, -1 unavailable */
    uint8_t model_id[FX_SHA256_BYTES];
    char path[768];              /* kernel path (and device), part of the key */
};

/* ------------------------------------------------------------------------ */
/* Little-endian fields                                                     */
/* ------------------------------------------------------------------------ */

static void put_u32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> 8 * i);
}
static void put_u64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> 8 * i);
}
static uint32_t get_u32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t get_u64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

/* ------------------------------------------------------------------------ */
/* Creation                                                                 */
/* ------------------------------------------------------------------------ */

/* mkdir -p; 0 on success. */
static int make_dirs(const char *path) {
    char buf[4096];
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof buf) return -1;
    memcpy(buf, path, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (buf[i] != '/' && buf[i] != '\0') continue;
        char c = buf[i];
        buf[i] = '\0';
        if (mkdir(buf, 0777) != 0 && errno != EEXIST) return -1;
        buf[i] = c;
    }
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode) ? 0 : -1;
}

fx_embcache *fx_embcache_new(const fx_embcache_config *cfg) {
    fx_embcache *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->cfg = *cfg;
    if (c->cfg.mem_entries < 0) c->cfg.mem_entries = 0;
    if (c->cfg.mem_entries) {
        c->mem = calloc((size_t)c->cfg.mem_entries, sizeof *c->mem);
        if (!c->mem) {
            free(c);
            return NULL;
        }
    }
    if (cfg->dir && *cfg->dir) {
        if (make_dirs(cfg->dir) != 0) {
            fx_log(cfg->log, 1, "flux: embedding cache: cannot create %s (%s); caching in memory only", cfg->dir,
                   strerror(errno));
        } else if (!(c->dir = strdup(cfg->dir))) {
            fx_embcache_free(c);
            return NULL;
        }
    }
    c->cfg.dir = c->dir;
    return c;
}

void fx_embcache_free(fx_embcache *c) {
    if (!c) return;
    for (int i = 0; i < c->cfg.mem_entries; i++) free(c->mem[i].data);
    free(c->mem);
    free(c->dir);
    free(c);
}

const char *fx_embcache_dir(const fx_embcache *c) { return c->dir; }
fx_embcache_stats fx_embcache_get_stats(const fx_embcache *c) {
    fx_embcache_stats s = c->stats;
    s.mem_bytes = c->mem_bytes_used;
    return s;
}

/* ------------------------------------------------------------------------ */
/* Keys                                                                     */
/* ------------------------------------------------------------------------ */

void fx_embcache_key(const uint8_t model_id[FX_SHA256_BYTES], const char *path, const int32_t *ids,
                     const uint8_t *mask, int rows, int cols, uint8_t key[FX_SHA256_BYTES]) {
    static const char domain[] = "flux.c text embeddings v1"; /* hashed with its NUL */
    fx_sha256 h;
    fx_sha256_init(&h);
    fx_sha256_update(&h, domain, sizeof domain);
    fx_sha256_update(&h, model_id, FX_SHA256_BYTES);
    fx_sha256_update(&h, path, strlen(path) + 1);
    uint8_t dims[8];
    put_u32(dims, (uint32_t)rows);
    put_u32(dims + 4, (uint32_t)cols);
    fx_sha256_update(&h, dims, sizeof dims);
    for (int i = 0; i < rows; i++) {
        uint8_t le[4];
        put_u32(le, (uint32_t)ids[i]);
        fx_sha256_update(&h, le, 4);
    }
    fx_sha256_update(&h, mask, (size_t)rows);
    fx_sha256_final(&h, key);
}

void fx_embcache_entry_path(const char *dir, const uint8_t key[FX_SHA256_BYTES], char *buf, size_t size) {
    char hex[2 * FX_SHA256_BYTES + 1];
    fx_sha256_hex(key, hex);
    snprintf(buf, size, "%s/%s.emb", dir, hex);
}

/* ------------------------------------------------------------------------ */
/* Memory LRU                                                               */
/* ------------------------------------------------------------------------ */

static mem_entry *mem_find(fx_embcache *c, const uint8_t *key, int rows, int cols) {
    for (int i = 0; i < c->cfg.mem_entries; i++) {
        mem_entry *e = &c->mem[i];
        if (e->data && e->rows == rows && e->cols == cols && !memcmp(e->key, key, FX_SHA256_BYTES)) return e;
    }
    return NULL;
}

static void mem_drop(fx_embcache *c, mem_entry *e) {
    c->mem_bytes_used -= (size_t)e->rows * (size_t)e->cols * sizeof(float);
    free(e->data);
    e->data = NULL;
}

static void mem_put(fx_embcache *c, const uint8_t *key, int rows, int cols, const float *data) {
    size_t bytes = (size_t)rows * (size_t)cols * sizeof(float);
    if (!c->cfg.mem_entries || bytes > c->cfg.mem_bytes || mem_find(c, key, rows, cols)) return;
    /* evict least recently used entries until one slot and the bytes are free */
    for (;;) {
        mem_entry *free_slot = NULL, *oldest = NULL;
        for (int i = 0; i < c->cfg.mem_entries; i++) {
            mem_entry *e = &c->mem[i];
            if (!e->data) free_slot = free_slot ? free_slot : e;
            else if (!oldest || e->used < oldest->used) oldest = e;
        }
        if (free_slot && c->mem_bytes_used + bytes <= c->cfg.mem_bytes) {
            float *copy = malloc(bytes);
            if (!copy) return; /* a cache may forget */
            memcpy(copy, data, bytes);
            memcpy(free_slot->key, key, FX_SHA256_BYTES);
            free_slot->rows = rows, free_slot->cols = cols;
            free_slot->data = copy;
            free_slot->used = ++c->clock;
            c->mem_bytes_used += bytes;
            return;
        }
        if (!oldest) return;
        mem_drop(c, oldest);
        c->stats.mem_evictions++;
    }
}

/* ------------------------------------------------------------------------ */
/* Disk entries                                                             */
/* ------------------------------------------------------------------------ */

static void make_header(uint8_t h[FX_EMBCACHE_HEADER], const uint8_t *key, int rows, int cols,
                        const uint8_t payload_sha[FX_SHA256_BYTES]) {
    memset(h, 0, FX_EMBCACHE_HEADER);
    memcpy(h, FX_EMBCACHE_MAGIC, 8); /* 7 characters + NUL */
    put_u32(h + 8, FX_EMBCACHE_VERSION);
    put_u32(h + 12, FX_EMBCACHE_HEADER);
    put_u32(h + 16, (uint32_t)rows);
    put_u32(h + 20, (uint32_t)cols);
    put_u32(h + 24, DTYPE_F32LE);
    memcpy(h + 32, key, FX_SHA256_BYTES);
    memcpy(h + 64, payload_sha, FX_SHA256_BYTES);
    put_u64(h + 96, (uint64_t)rows * (uint64_t)cols * 4);
}

/* Why a header does not describe the entry asked for, or NULL if it does. */
static const char *header_problem(const uint8_t h[FX_EMBCACHE_HEADER], const uint8_t *key, int rows, int cols,
                                  char *why, size_t size) {
    if (memcmp(h, FX_EMBCACHE_MAGIC, 8)) return "not an embedding-cache entry (bad magic)";
    if (get_u32(h + 8) != FX_EMBCACHE_VERSION) {
        snprintf(why, size, "format version %" PRIu32 ", expected %d", get_u32(h + 8), FX_EMBCACHE_VERSION);
        return why;
    }
    if (get_u32(h + 12) != FX_EMBCACHE_HEADER) return "bad header size";
    if (get_u32(h + 16) != (uint32_t)rows || get_u32(h + 20) != (uint32_t)cols) {
        snprintf(why, size, "shape [%" PRIu32 ", %" PRIu32 "], expected [%d, %d]", get_u32(h + 16),
                 get_u32(h + 20), rows, cols);
        return why;
    }
    if (get_u32(h + 24) != DTYPE_F32LE) return "unknown payload type";
    if (memcmp(h + 32, key, FX_SHA256_BYTES)) return "key does not match the file name";
    if (get_u64(h + 96) != (uint64_t)rows * (uint64_t)cols * 4) return "payload size does not match the shape";
    return NULL;
}

/* Delete a bad entry, but only if `path` still is the file we read (another
 * process may have replaced it with a good one meanwhile). */
static void drop_bad_entry(fx_embcache *c, const char *path, int fd, const char *why) {
    struct stat ours, now;
    int same = fstat(fd, &ours) == 0 && stat(path, &now) == 0 && ours.st_dev == now.st_dev && ours.st_ino == now.st_ino;
    int removed = same && unlink(path) == 0, e = errno;
    c->stats.corrupt++;
    fx_log(c->cfg.log, 1, "flux: embedding cache: %s: %s; %s%s, recomputing", path, why,
           !same ? "already replaced" : removed ? "deleted" : "cannot delete it: ", same && !removed ? strerror(e) : "");
}

static int read_full(int fd, void *buf, size_t n) {
    uint8_t *p = buf;
    while (n) {
        ssize_t r = read(fd, p, n > ((size_t)1 << 30) ? (size_t)1 << 30 : n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return -1;
        p += r, n -= (size_t)r;
    }
    return 0;
}

/* An entry name that is not a regular file: a directory is not ours to
 * remove (left in place, said so); anything else (a FIFO, a socket) is
 * deleted like any bad entry. Never opened, so a FIFO cannot block us. */
static void drop_odd_entry(fx_embcache *c, const char *path) {
    struct stat st;
    if (lstat(path, &st) != 0) return; /* gone meanwhile: a plain miss */
    c->stats.corrupt++;
    if (S_ISDIR(st.st_mode)) {
        fx_log(c->cfg.log, 1, "flux: embedding cache: %s is a directory, not a cache entry; left in place, recomputing",
               path);
        return;
    }
    int removed = unlink(path) == 0;
    fx_log(c->cfg.log, 1, "flux: embedding cache: %s is %s, not a cache entry; %s%s, recomputing", path,
           fx_file_kind(st.st_mode), removed ? "deleted" : "cannot delete it: ", removed ? "" : strerror(errno));
}

static int disk_get(fx_embcache *c, const uint8_t *key, int rows, int cols, float *out) {
    char path[4096];
    fx_embcache_entry_path(c->dir, key, path, sizeof path);
    struct stat st;
    fx_err open_err = {0};
    int fd = fx_open_regular(path, &st, &open_err);
    if (fd < 0) {
        struct stat lst;
        if (lstat(path, &lst) != 0) { /* no entry: a miss */
            if (errno != ENOENT) fx_log(c->cfg.log, 1, "flux: embedding cache: %s", open_err.msg);
        } else if (!S_ISREG(lst.st_mode)) {
            drop_odd_entry(c, path);
        } else {
            fx_log(c->cfg.log, 1, "flux: embedding cache: %s", open_err.msg);
        }
        return 0;
    }
    uint64_t payload = (uint64_t)rows * (uint64_t)cols * 4;
    uint8_t h[FX_EMBCACHE_HEADER], sha[FX_SHA256_BYTES];
    char why[160];
    const char *problem = NULL;
    if ((uint64_t)st.st_size < FX_EMBCACHE_HEADER + payload) {
        snprintf(why, sizeof why, "truncated (%lld bytes, expected %llu)", (long long)st.st_size,
                 (unsigned long long)(FX_EMBCACHE_HEADER + payload));
        problem = why;
    } else if ((uint64_t)st.st_size > FX_EMBCACHE_HEADER + payload) {
        snprintf(why, sizeof why, "%lld bytes, expected %llu", (long long)st.st_size,
                 (unsigned long long)(FX_EMBCACHE_HEADER + payload));
        problem = why;
    } else if (read_full(fd, h, sizeof h) != 0) problem = "read error in the header";
    else if (!(problem = header_problem(h, key, rows, cols, why, sizeof why))) {
        if (read_full(fd, out, (size_t)payload) != 0) problem = "read error in the payload";
        else {
            fx_sha256_buf(out, (size_t)payload, sha);
            if (memcmp(sha, h + 64, FX_SHA256_BYTES)) problem = "payload checksum mismatch";
        }
    }
    if (problem) {
        drop_bad_entry(c, path, fd, problem);
        close(fd);
        return 0;
    }
    (void)futimens(fd, NULL); /* mark as recently used for the LRU budget */
    close(fd);
    return 1;
}

typedef struct disk_file {
    char *name;
    off_t size;
    struct timespec mtime;
} disk_file;

static int older_first(const void *a, const void *b) {
    const disk_file *x = a, *y = b;
    if (x->mtime.tv_sec != y->mtime.tv_sec) return x->mtime.tv_sec < y->mtime.tv_sec ? -1 : 1;
    if (x->mtime.tv_nsec != y->mtime.tv_nsec) return x->mtime.tv_nsec < y->mtime.tv_nsec ? -1 : 1;
    return strcmp(x->name, y->name);
}

/* "<64 hex>.emb" */
static int is_entry_name(const char *n) {
    if (strlen(n) != 2 * FX_SHA256_BYTES + 4 || strcmp(n + 2 * FX_SHA256_BYTES, ".emb")) return 0;
    for (int i = 0; i < 2 * FX_SHA256_BYTES; i++)
        if (!((n[i] >= '0' && n[i] <= '9') || (n[i] >= 'a' && n[i] <= 'f'))) return 0;
    return 1;
}

/* A temporary file of ours: ".<entry name>.<suffix>.tmp" (atomic_file.c). */
static int is_temp_name(const char *n) {
    size_t len = strlen(n);
    return n[0] == '.' && len > 5 && !strcmp(n + len - 4, ".tmp") && strstr(n, ".emb.") != NULL;
}

/* Delete least recently used entries until the directory fits the budget;
 * `keep` (the entry just written) goes last. Removes stale temporary files. */
static void enforce_budget(fx_embcache *c, const char *keep) {
    DIR *d = opendir(c->dir);
    if (!d) return;
    disk_file *files = NULL;
    size_t n = 0, cap = 0;
    uint64_t total = 0;
    struct dirent *e;
    char path[4096];
    while ((e = readdir(d))) {
        int entry = is_entry_name(e->d_name), temp = !entry && is_temp_name(e->d_name);
        if (!entry && !temp) continue;
        snprintf(path, sizeof path, "%s/%s", c->dir, e->d_name);
        struct stat st;
        if (lstat(path, &st) != 0 || !S_ISREG(st.st_mode)) continue;
        if (temp) { /* a killed writer's leftover (atomic_file.h) */
            if (fx_atomic_is_stale(c->dir, e->d_name, NULL)) unlink(path);
            continue;
        }
        if (n == cap) {
            size_t ncap = cap ? 2 * cap : 64;
            disk_file *grown = realloc(files, ncap * sizeof *grown);
            if (!grown) break;
            files = grown, cap = ncap;
        }
        if (!(files[n].name = strdup(e->d_name))) break;
        files[n].size = st.st_size;
        files[n].mtime = st.st_mtim;
        if (keep && !strcmp(e->d_name, keep)) files[n].mtime.tv_sec = (time_t)INT64_MAX; /* newest */
        total += (uint64_t)st.st_size;
        n++;
    }
    closedir(d);
    qsort(files, n, sizeof *files, older_first);
    for (size_t i = 0; i < n && total > c->cfg.disk_bytes; i++) {
        snprintf(path, sizeof path, "%s/%s", c->dir, files[i].name);
        if (unlink(path) == 0 || errno == ENOENT) {
            total -= (uint64_t)files[i].size;
            c->stats.disk_evictions++;
            fx_log(c->cfg.log, 2, "flux: embedding cache: evicted %s (budget %llu bytes)", files[i].name,
                   (unsigned long long)c->cfg.disk_bytes);
        }
    }
    for (size_t i = 0; i < n; i++) free(files[i].name);
    free(files);
}

static void disk_put(fx_embcache *c, const uint8_t *key, int rows, int cols, const float *data) {
    uint64_t payload = (uint64_t)rows * (uint64_t)cols * 4;
    if (FX_EMBCACHE_HEADER + payload > c->cfg.disk_bytes) {
        fx_log(c->cfg.log, 2, "flux: embedding cache: an entry (%llu bytes) exceeds the budget; not stored on disk",
               (unsigned long long)(FX_EMBCACHE_HEADER + payload));
        return;
    }
    char path[4096];
    fx_embcache_entry_path(c->dir, key, path, sizeof path);
    uint8_t h[FX_EMBCACHE_HEADER], sha[FX_SHA256_BYTES];
    fx_sha256_buf(data, (size_t)payload, sha);
    make_header(h, key, rows, cols, sha);
    fx_err err = {0};
    fx_atomic_file af;
    flux_status st = fx_atomic_open(&af, path, &err);
    if (st == FLUX_OK) {
        if (fwrite(h, 1, sizeof h, af.f) != sizeof h || fwrite(data, 1, (size_t)payload, af.f) != (size_t)payload) {
            st = fx_fail(&err, FLUX_ERR_IO, "cannot write %s: %s", path, strerror(errno ? errno : EIO));
            fx_atomic_abort(&af);
        } else {
            st = fx_atomic_commit(&af, &err);
        }
    }
    if (st != FLUX_OK) {
        fx_log(c->cfg.log, 1, "flux: embedding cache: %s (not stored)", err.msg);
        return;
    }
    c->stats.disk_writes++;
    enforce_budget(c, strrchr(path, '/') + 1);
}

/* ------------------------------------------------------------------------ */
/* Lookups and stores                                                       */
/* ------------------------------------------------------------------------ */

int fx_embcache_get(fx_embcache *c, const uint8_t key[FX_SHA256_BYTES], int rows, int cols, float *out) {
    mem_entry *e = mem_find(c, key, rows, cols);
    if (e) {
        memcpy(out, e->data, (size_t)rows * (size_t)cols * sizeof(float));
        e->used = ++c->clock;
        c->stats.mem_hits++;
        return 1;
    }
    if (c->dir && disk_get(c, key, rows, cols, out)) {
        c->stats.disk_hits++;
        mem_put(c, key, rows, cols, out);
        return 1;
    }
    c->stats.misses++;
    return 0;
}

void fx_embcache_put(fx_embcache *c, const uint8_t key[FX_SHA256_BYTES], int rows, int cols, const float *data) {
    c->stats.stores++;
    mem_put(c, key, rows, cols, data);
    if (c->dir) disk_put(c, key, rows, cols, data);
}

/* ------------------------------------------------------------------------ */
/* The context's cache                                                      */
/* ------------------------------------------------------------------------ */

int fx_embcache_default_dir(char *buf, size_t size) {
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    int n;
    if (xdg && xdg[0] == '/') n = snprintf(buf, size, "%s/flux/embeddings", xdg);
    else if (home && *home) n = snprintf(buf, size, "%s/.cache/flux/embeddings", home);
    else return 0;
    return n > 0 && (size_t)n < size;
}

/* Budget from FLUX_CACHE_MAX_MB (whole MiB), else the default. */
static uint64_t disk_budget(const flux_ctx *ctx) {
    const char *s = getenv("FLUX_CACHE_MAX_MB");
    if (!s || !*s) return FX_EMBCACHE_DISK_BYTES;
    char *end;
    errno = 0;
    unsigned long long mb = strtoull(s, &end, 10);
    if (*end || errno || s[0] == '-' || mb > (1ull << 40)) {
        fx_log(&ctx->log, 1, "flux: FLUX_CACHE_MAX_MB='%s' is not a number of MiB; using %llu", s,
               (unsigned long long)(FX_EMBCACHE_DISK_BYTES >> 20));
        return FX_EMBCACHE_DISK_BYTES;
    }
    return (uint64_t)mb << 20;
}

/* Hash one file's bytes with its length into h; 0 on success. The file
 * must be regular (a FIFO would block); the buffer is on the heap, as a
 * library may run on threads with small stacks. */
static int hash_file(fx_sha256 *h, const char *path) {
    enum { CHUNK = 1 << 16 };
    struct stat st;
    int fd = fx_open_regular(path, &st, NULL);
    if (fd < 0) return -1;
    uint8_t *buf = malloc(CHUNK);
    fx_sha256 part;
    fx_sha256_init(&part);
    uint64_t len = 0;
    ssize_t r = -1;
    while (buf && ((r = read(fd, buf, CHUNK)) > 0 || (r < 0 && errno == EINTR)))
        if (r > 0) {
            fx_sha256_update(&part, buf, (size_t)r);
            len += (uint64_t)r;
        }
    free(buf);
    close(fd);
    if (r != 0) return -1; /* no buffer, or a read error */
    uint8_t digest[FX_SHA256_BYTES], le[8];
    fx_sha256_final(&part, digest);
    put_u64(le, len);
    fx_sha256_update(h, le, sizeof le);
    fx_sha256_update(h, digest, sizeof digest);
    return 0;
}

/* The model identity (see embcache.h); 0 on success. */
static int model_identity(const struct fx_model *m, uint8_t id[FX_SHA256_BYTES], char *which, size_t size) {
    static const char domain[] = "flux.c text encoder identity v1";
    fx_sha256 h;
    fx_sha256_init(&h);
    fx_sha256_update(&h, domain, sizeof domain);
    char path[4096];
    if (m->dir) {
        snprintf(path, sizeof path, "%s/text_encoder/config.json", m->dir);
        if (hash_file(&h, path) != 0) return snprintf(which, size, "%s", path), -1;
    } else { /* no folder: the config derived from the shapes */
        const fx_qwen3_config *c = &m->qwen3;
        const int64_t v[] = {c->hidden, c->intermediate, c->layers, c->layers_used, c->heads, c->kv_heads,
                             c->head_dim, c->vocab, (int64_t)(c->rope_theta * 1e3), (int64_t)(c->rms_eps * 1e12)};
        for (size_t i = 0; i < sizeof v / sizeof *v; i++) {
            uint8_t le[8];
            put_u64(le, (uint64_t)v[i]);
            fx_sha256_update(&h, le, sizeof le);
        }
    }
    /* a tokenizer built from the GGUF text encoder is identified with its weights below */
    if (m->tokenizer_path && hash_file(&h, m->tokenizer_path) != 0)
        return snprintf(which, size, "%s", m->tokenizer_path), -1;
    const fx_wset *w = m->text_encoder_w;
    if (m->quant >= 0) { /* quantized on load: the type decides the weights too */
        const char *q = fx_dtype_name((fx_dtype)m->quant);
        fx_sha256_update(&h, "quant", 6);
        fx_sha256_update(&h, q, strlen(q) + 1);
    }
    /* the weights: size and modification time of every shard (stat only) */
    for (size_t i = 0; w && i < fx_wset_file_count(w); i++) {
        const char *p = fx_tensor_file_path(fx_wset_file_at(w, i));
        struct stat st;
        if (!p || stat(p, &st) != 0) return snprintf(which, size, "%s", p ? p : "(in-memory weights)"), -1;
        uint8_t le[24];
        put_u64(le, (uint64_t)st.st_size);
        put_u64(le + 8, (uint64_t)st.st_mtim.tv_sec);
        put_u64(le + 16, (uint64_t)st.st_mtim.tv_nsec);
        fx_sha256_update(&h, le, sizeof le);
    }
    size_t n = w ? fx_wset_count(w) : 0;
    for (size_t i = 0; i < n; i++) {
        const fx_tensor *t = fx_wset_tensor_at(w, i);
        uint8_t le[8];
        fx_sha256_update(&h, t->name, strlen(t->name) + 1);
        put_u32(le, (uint32_t)t->dtype);
        put_u32(le + 4, (uint32_t)t->shape.ndim);
        fx_sha256_update(&h, le, 8);
        for (int d = 0; d < t->shape.ndim; d++) {
            put_u64(le, (uint64_t)t->shape.d[d]);
            fx_sha256_update(&h, le, 8);
        }
    }
    fx_sha256_final(&h, id);
    return 0;
}

/* The context's cache with the model identity ready, or NULL (cache off). */
static fx_embcache *ctx_cache(flux_ctx *ctx) {
    if (!ctx->model) return NULL;
    if (!ctx->embcache) {
        char dir[4096];
        fx_embcache_config cfg = {0};
        cfg.mem_entries = FX_EMBCACHE_MEM_ENTRIES;
        cfg.mem_bytes = FX_EMBCACHE_MEM_BYTES;
        cfg.disk_bytes = disk_budget(ctx);
        cfg.log = &ctx->log;
        if (!ctx->opt.no_disk_cache) {
            if (ctx->opt.cache_dir) cfg.dir = ctx->opt.cache_dir;
            else if (fx_embcache_default_dir(dir, sizeof dir)) cfg.dir = dir;
            else fx_log(&ctx->log, 1, "flux: embedding cache: neither XDG_CACHE_HOME nor HOME is set; caching in memory only");
        }
        if (!(ctx->embcache = fx_embcache_new(&cfg))) return NULL;
    }
    fx_embcache *c = ctx->embcache;
    if (c->id_state == 0) {
        char which[4096];
        if (model_identity(ctx->model, c->model_id, which, sizeof which) != 0) {
            fx_log(&ctx->log, 1, "flux: embedding cache off: cannot read %s", which);
            c->id_state = -1;
        } else {
            c->id_state = 1;
        }
        snprintf(c->path, sizeof c->path, "isa=%s bf16dot=%d%s", fx_isa_name(fx_kernels_isa(ctx->kernels)),
                 fx_kernels_uses_bf16_dot(ctx->kernels),
                 ctx->kc.int8 == FX_INT8_ALL ? " int8=all" /* the encoder's own weights as int8 */
                 : ctx->kc.int8             ? " int8=1"
                                            : "");
        if (!fx_ops_on_host(ctx->ops)) /* the encoder ran on a device: its results are that device's */
            snprintf(c->path + strlen(c->path), sizeof c->path - strlen(c->path), " backend=%s",
                     fx_ops_name(ctx->ops));
    }
    return c->id_state == 1 ? c : NULL;
}

int fx_text_cache_lookup(flux_ctx *ctx, const int32_t *ids, const uint8_t *mask, int seq, int cols, float *out,
                         uint8_t key[FX_SHA256_BYTES]) {
    memset(key, 0, FX_SHA256_BYTES); /* all zero = nothing to store */
    fx_embcache *c = ctx_cache(ctx);
    if (!c) return 0;
    fx_embcache_key(c->model_id, c->path, ids, mask, seq, cols, key);
    long disk_before = c->stats.disk_hits;
    if (!fx_embcache_get(c, key, seq, cols, out)) return 0;
    fx_log(&ctx->log, 1, "flux: text embeddings from the %s cache", c->stats.disk_hits > disk_before ? "disk" : "memory");
    return 1;
}

void fx_text_cache_store(flux_ctx *ctx, const uint8_t key[FX_SHA256_BYTES], int seq, int cols, const float *emb) {
    static const uint8_t none[FX_SHA256_BYTES];
    if (!memcmp(key, none, FX_SHA256_BYTES)) return; /* the lookup had the cache off */
    fx_embcache *c = ctx_cache(ctx);
    if (c) fx_embcache_put(c, key, seq, cols, emb);
}

void fx_embcache_release(flux_ctx *ctx) {
    if (!ctx) return;
    fx_embcache_free(ctx->embcache);
    ctx->embcache = NULL;
}
