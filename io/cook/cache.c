/* terra cook's cache (terra/cook_cache.h): the manifest of the inputs, the record kept beside the
 * archive, and the per-tile reuse decisions.
 *
 * The record, little-endian, a CRC-32C over everything before it at the end:
 *   "TERRACKR", u32 record version, u32 TERRA_ARCHIVE_VERSION, u32 TERRA_COOK_VERSION, u32 0,
 *   str options, str settings (str = u32 length + bytes),
 *   grid: u32 frame, f64 origin[2], unit[2], tile_units (bit patterns), i32 depth,
 *   archive: u64 size, 64 header bytes, u64 XXH64 of its index entries,
 *   u32 files, each: str key, str path, u8 flags (1 named, 2 absent), u64 size, i64 mtime ns, u64 hash,
 *   u32 sets, each: u32 n, n ascending file numbers (many tiles share one set: stored once),
 *   u64 tiles, each: u64 key, u32 set; in the archive's index order, as many as the archive has,
 *   finest meshes: u64 generation, u64 store size, u64 count, each: i32 tx, i32 ty, u64 offset, u64 size,
 *   sorted by ty then tx.
 * The store of finest meshes (DIR/NAME.meshes) is a run of blobs, one per finest tile, in host
 * byte order (a cache, not an interchange format): u32 magic, u32 flags (1 normals, 2 materials),
 * u64 generation (the record's: a store written by another cook is never read as this one's),
 * i32 tx, i32 ty, u32 vertices, u32 triangles, f64 error, then xy, z, normals, materials, triangles
 * as in terra_cook_mesh, and a CRC-32C over all of it.
 */
#include "terra/cook_cache.h"
#include "terra/io.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define RECORD_MAGIC "TERRACKR"
#define RECORD_VERSION 1u
#define RECORD_MAX_BYTES ((size_t)1 << 30)
#define NONE UINT32_MAX
#define MESH_MAGIC 0x314d4354u /* "TCM1" read in little-endian order */
#define MESH_HEADER 40

/* ---- XXH64 ------------------------------------------------------------------------------------- */

#define XP1 11400714785074694791ull
#define XP2 14029467366897019727ull
#define XP3 1609587929392839161ull
#define XP4 9650029242287828579ull
#define XP5 2870177450012600261ull

static uint64_t rotl64(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
/* Spelled out byte by byte, which compilers turn into one load (a loop they do not). */
static inline uint32_t le32(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }
static inline uint64_t le64(const uint8_t *p) {
    return (uint64_t)p[0] | (uint64_t)p[1] << 8 | (uint64_t)p[2] << 16 | (uint64_t)p[3] << 24 | (uint64_t)p[4] << 32 |
           (uint64_t)p[5] << 40 | (uint64_t)p[6] << 48 | (uint64_t)p[7] << 56;
}
static uint64_t xxh_round(uint64_t acc, uint64_t in) { return rotl64(acc + in * XP2, 31) * XP1; }
static uint64_t xxh_merge(uint64_t h, uint64_t v) { return (h ^ xxh_round(0, v)) * XP1 + XP4; }

/* Streaming state: four lanes over 32-byte stripes, the tail of an unfinished stripe kept. */
typedef struct xxh64_state {
    uint64_t v[4], total, seed;
    uint8_t mem[32];
    size_t mem_n;
} xxh64_state;

static void xxh64_init(xxh64_state *s, uint64_t seed) {
    *s = (xxh64_state){{seed + XP1 + XP2, seed + XP2, seed, seed - XP1}, 0, seed, {0}, 0};
}

/* The stripes of p[0 .. 32 * count), the lanes kept in registers meanwhile. */
static void xxh64_stripes(xxh64_state *s, const uint8_t *p, size_t count) {
    uint64_t v0 = s->v[0], v1 = s->v[1], v2 = s->v[2], v3 = s->v[3];
    for (; count; count--, p += 32) {
        v0 = xxh_round(v0, le64(p));
        v1 = xxh_round(v1, le64(p + 8));
        v2 = xxh_round(v2, le64(p + 16));
        v3 = xxh_round(v3, le64(p + 24));
    }
    s->v[0] = v0, s->v[1] = v1, s->v[2] = v2, s->v[3] = v3;
}

static void xxh64_update(xxh64_state *s, const void *data, size_t n) {
    const uint8_t *p = data;
    s->total += n;
    if (s->mem_n) {
        size_t take = 32 - s->mem_n < n ? 32 - s->mem_n : n;
        memcpy(s->mem + s->mem_n, p, take);
        s->mem_n += take, p += take, n -= take;
        if (s->mem_n < 32) return;
        xxh64_stripes(s, s->mem, 1);
        s->mem_n = 0;
    }
    xxh64_stripes(s, p, n / 32);
    p += n / 32 * 32, n %= 32;
    memcpy(s->mem, p, n);
    s->mem_n = n;
}

static uint64_t xxh64_digest(const xxh64_state *s) {
    uint64_t h;
    if (s->total >= 32) {
        h = rotl64(s->v[0], 1) + rotl64(s->v[1], 7) + rotl64(s->v[2], 12) + rotl64(s->v[3], 18);
        for (int i = 0; i < 4; i++) h = xxh_merge(h, s->v[i]);
    } else {
        h = s->seed + XP5;
    }
    h += s->total;
    const uint8_t *p = s->mem;
    size_t n = s->mem_n;
    for (; n >= 8; p += 8, n -= 8) h = rotl64(h ^ xxh_round(0, le64(p)), 27) * XP1 + XP4;
    if (n >= 4) {
        h = rotl64(h ^ (uint64_t)le32(p) * XP1, 23) * XP2 + XP3;
        p += 4, n -= 4;
    }
    for (; n; p++, n--) h = rotl64(h ^ *p * XP5, 11) * XP1;
    h ^= h >> 33;
    h *= XP2;
    h ^= h >> 29;
    h *= XP3;
    return h ^ (h >> 32);
}

uint64_t terra_cook_xxh64(const void *data, size_t n, uint64_t seed) {
    xxh64_state s;
    xxh64_init(&s, seed);
    xxh64_update(&s, data, n);
    return xxh64_digest(&s);
}

/* ---- the manifest ------------------------------------------------------------------------------ */

struct terra_cook_manifest {
    char *options;
    terra_cook_file *files;
    uint32_t count, cap;
    uint32_t *slots;          /* open addressing on the key: file numbers, NONE = free */
    uint32_t slot_cap;
};

static char *dup_str(const char *s, size_t n) {
    char *d = terra_alloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = 0;
    }
    return d;
}

/* The absolute path of `path` with "." and ".." components and repeated slashes taken out, by
 * the letters alone (no link is followed: an absent file has a key too). NULL when out of memory
 * or the working directory cannot be told. */
static char *path_key(const char *path) {
    size_t cwd_cap = 256;
    char *cwd = NULL;
    if (path[0] != '/') {
        for (;;) {
            cwd = terra_alloc(cwd_cap);
            if (!cwd) return NULL;
            if (getcwd(cwd, cwd_cap)) break;
            terra_free(cwd);
            if (errno != ERANGE) return NULL;
            cwd_cap *= 2;
        }
    }
    size_t cn = cwd ? strlen(cwd) : 0, n = cn + strlen(path) + 2;
    char *joined = terra_alloc(n), *out = terra_alloc(n);
    if (joined) snprintf(joined, n, "%s/%s", cwd ? cwd : "", path);
    terra_free(cwd);
    if (!joined || !out) {
        terra_free(joined);
        terra_free(out);
        return NULL;
    }
    size_t o = 0;
    for (const char *p = joined; *p;) {
        while (*p == '/') p++;
        const char *end = p;
        while (*end && *end != '/') end++;
        size_t len = (size_t)(end - p);
        if (len == 2 && p[0] == '.' && p[1] == '.') {
            while (o > 0 && out[o - 1] != '/') o--;
            if (o > 0) o--; /* the slash before the dropped component */
        } else if (len && !(len == 1 && p[0] == '.')) {
            out[o++] = '/';
            memcpy(out + o, p, len);
            o += len;
        }
        p = end;
    }
    if (o == 0) out[o++] = '/';
    out[o] = 0;
    terra_free(joined);
    return out;
}

static uint32_t key_slot(const char *key, uint32_t cap) { return (uint32_t)terra_cook_xxh64(key, strlen(key), 0) & (cap - 1); }

static uint32_t manifest_find(const terra_cook_manifest *m, const char *key) {
    if (!m->slot_cap) return NONE;
    for (uint32_t k = key_slot(key, m->slot_cap);; k = (k + 1) & (m->slot_cap - 1)) {
        uint32_t i = m->slots[k];
        if (i == NONE || !strcmp(m->files[i].key, key)) return i;
    }
}

/* Appends a file (taking its strings) and indexes its key. */
static terra_status manifest_push(terra_cook_manifest *m, const terra_cook_file *f) {
    if (m->count == m->cap) {
        uint32_t cap = m->cap ? 2 * m->cap : 16;
        terra_cook_file *t = terra_realloc(m->files, cap * sizeof *t);
        if (!t) return terra_fail(TERRA_E_NOMEM, "cook manifest: out of memory");
        m->files = t, m->cap = cap;
    }
    if ((m->count + 1) * 2 > m->slot_cap) {
        uint32_t cap = m->slot_cap ? 2 * m->slot_cap : 32;
        uint32_t *s = terra_alloc(cap * sizeof *s);
        if (!s) return terra_fail(TERRA_E_NOMEM, "cook manifest: out of memory");
        memset(s, 0xff, cap * sizeof *s);
        for (uint32_t i = 0; i < m->count; i++) {
            uint32_t k = key_slot(m->files[i].key, cap);
            while (s[k] != NONE) k = (k + 1) & (cap - 1);
            s[k] = i;
        }
        terra_free(m->slots);
        m->slots = s, m->slot_cap = cap;
    }
    uint32_t k = key_slot(f->key, m->slot_cap);
    while (m->slots[k] != NONE) k = (k + 1) & (m->slot_cap - 1);
    m->slots[k] = m->count;
    m->files[m->count++] = *f;
    return TERRA_OK;
}

terra_status terra_cook_manifest_create(const char *options, terra_cook_manifest **out) {
    *out = NULL;
    if (!options) return terra_fail(TERRA_E_INVALID, "cook manifest: no options string");
    terra_cook_manifest *m = terra_calloc(1, sizeof *m);
    if (m) m->options = dup_str(options, strlen(options));
    if (!m || !m->options) {
        terra_free(m);
        return terra_fail(TERRA_E_NOMEM, "cook manifest: out of memory");
    }
    *out = m;
    return TERRA_OK;
}

void terra_cook_manifest_free(terra_cook_manifest *m) {
    if (!m) return;
    for (uint32_t i = 0; i < m->count; i++) {
        terra_free((char *)m->files[i].path);
        terra_free((char *)m->files[i].key);
    }
    terra_free(m->files);
    terra_free(m->slots);
    terra_free(m->options);
    terra_free(m);
}

uint32_t terra_cook_manifest_count(const terra_cook_manifest *m) { return m->count; }
const terra_cook_file *terra_cook_manifest_file(const terra_cook_manifest *m, uint32_t i) {
    return i < m->count ? &m->files[i] : NULL;
}

/* Size, time and XXH64 of the file at `path`, read whole through one descriptor. A named file
 * that is not there (or not a regular file) is absent. */
static terra_status hash_file(const char *path, terra_cook_file *f) {
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK); /* a FIFO must not block the cook */
    if (fd < 0) {
        /* What a scenery loader cannot open, it does without: for the cook that file is absent. */
        if (f->named && (errno == ENOENT || errno == ENOTDIR || errno == EACCES || errno == ELOOP || errno == ENAMETOOLONG)) {
            f->absent = true;
            return TERRA_OK;
        }
        return terra_fail(errno == ENOENT ? TERRA_E_NOT_FOUND : TERRA_E_IO, "%s: cannot read: %s", path,
                          strerror(errno));
    }
    struct stat before, after;
    if (fstat(fd, &before) != 0) {
        terra_status st = terra_fail(TERRA_E_IO, "%s: cannot read: %s", path, strerror(errno));
        close(fd);
        return st;
    }
    if (!S_ISREG(before.st_mode)) {
        close(fd);
        f->absent = f->named;
        return f->named ? TERRA_OK : terra_fail(TERRA_E_INVALID, "%s: not a regular file", path);
    }
    size_t cap = 1 << 20;
    uint8_t *buf = terra_alloc(cap);
    if (!buf) {
        close(fd);
        return terra_fail(TERRA_E_NOMEM, "%s: out of memory", path);
    }
    xxh64_state s;
    xxh64_init(&s, 0);
    terra_status st = TERRA_OK;
    for (;;) {
        ssize_t r = read(fd, buf, cap);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            st = terra_fail(TERRA_E_IO, "%s: read error: %s", path, strerror(errno));
            break;
        }
        if (r == 0) break;
        xxh64_update(&s, buf, (size_t)r);
    }
    terra_free(buf);
    /* A file written while it was hashed has no one content to record. */
    if (!st && (fstat(fd, &after) != 0 || after.st_size != before.st_size ||
                after.st_mtim.tv_sec != before.st_mtim.tv_sec || after.st_mtim.tv_nsec != before.st_mtim.tv_nsec ||
                s.total != (uint64_t)before.st_size))
        st = terra_fail(TERRA_E_IO, "%s: changed while it was being read; cook again once it is written", path);
    close(fd);
    if (st) return st;
    f->size = (uint64_t)before.st_size;
    f->mtime_ns = (int64_t)before.st_mtim.tv_sec * 1000000000 + before.st_mtim.tv_nsec;
    f->hash = xxh64_digest(&s);
    return TERRA_OK;
}

static terra_status manifest_add(terra_cook_manifest *m, const char *path, bool named, uint32_t *index) {
    if (!path || !*path) return terra_fail(TERRA_E_INVALID, "cook manifest: an empty file name");
    char *key = path_key(path);
    if (!key) return terra_fail(TERRA_E_NOMEM, "%s: cannot make its absolute path: %s", path, strerror(errno));
    uint32_t i = manifest_find(m, key);
    if (i != NONE) {
        terra_free(key);
        if (!named)
            return terra_fail(TERRA_E_INVALID, "%s: given twice (as %s and %s)", path, m->files[i].path, path);
        if (index) *index = i;
        return TERRA_OK;
    }
    terra_cook_file f = {dup_str(path, strlen(path)), key, named, false, 0, 0, 0};
    terra_status st = f.path ? hash_file(path, &f) : terra_fail(TERRA_E_NOMEM, "cook manifest: out of memory");
    if (!st) st = manifest_push(m, &f);
    if (st) {
        terra_free((char *)f.path);
        terra_free(key);
        return st;
    }
    if (index) *index = m->count - 1;
    return TERRA_OK;
}

terra_status terra_cook_manifest_add_input(terra_cook_manifest *m, const char *path, uint32_t *index) {
    return manifest_add(m, path, false, index);
}
terra_status terra_cook_manifest_add_named(terra_cook_manifest *m, const char *path, uint32_t *index) {
    return manifest_add(m, path, true, index);
}

/* ---- sets of inputs ---------------------------------------------------------------------------- */

/* Distinct sorted lists of file numbers, each stored once (a level's tiles mostly share a few). */
typedef struct set_table {
    uint32_t *members;        /* set i is members[off[i] .. off[i + 1]) */
    size_t members_n, members_cap;
    size_t *off;              /* count + 1 */
    uint32_t count, cap;
    uint32_t *slots;          /* open addressing on the contents: set numbers, NONE = free */
    uint32_t slot_cap;
} set_table;

static const uint32_t *set_get(const set_table *t, uint32_t i, size_t *n) {
    *n = t->off[i + 1] - t->off[i];
    return t->members + t->off[i];
}

static uint32_t set_slot(const uint32_t *v, size_t n, uint32_t cap) {
    return (uint32_t)terra_cook_xxh64(v, n * sizeof *v, 0) & (cap - 1);
}

static void set_table_free(set_table *t) {
    terra_free(t->members);
    terra_free(t->off);
    terra_free(t->slots);
    *t = (set_table){0};
}

/* The number of the set holding exactly v[0..n) (ascending, distinct), added when new; NONE when
 * out of memory. */
static uint32_t set_intern(set_table *t, const uint32_t *v, size_t n) {
    if (t->slot_cap) {
        for (uint32_t k = set_slot(v, n, t->slot_cap);; k = (k + 1) & (t->slot_cap - 1)) {
            uint32_t i = t->slots[k];
            if (i == NONE) break;
            size_t m;
            const uint32_t *s = set_get(t, i, &m);
            if (m == n && !memcmp(s, v, n * sizeof *v)) return i;
        }
    }
    if (t->count == NONE - 1) return NONE;
    if (t->count + 1 >= t->cap) {
        uint32_t cap = t->cap ? 2 * t->cap : 64;
        size_t *o = terra_realloc(t->off, ((size_t)cap + 1) * sizeof *o);
        if (!o) return NONE;
        if (!t->cap) o[0] = 0;
        t->off = o, t->cap = cap;
    }
    if (t->members_n + n > t->members_cap) {
        size_t cap = t->members_cap ? 2 * t->members_cap : 256;
        while (cap < t->members_n + n) cap *= 2;
        uint32_t *mm = terra_realloc(t->members, cap * sizeof *mm);
        if (!mm) return NONE;
        t->members = mm, t->members_cap = cap;
    }
    if ((t->count + 1) * 2 > t->slot_cap) {
        uint32_t cap = t->slot_cap ? 2 * t->slot_cap : 128;
        uint32_t *s = terra_alloc(cap * sizeof *s);
        if (!s) return NONE;
        memset(s, 0xff, cap * sizeof *s);
        for (uint32_t i = 0; i < t->count; i++) {
            size_t m;
            const uint32_t *sv = set_get(t, i, &m);
            uint32_t k = set_slot(sv, m, cap);
            while (s[k] != NONE) k = (k + 1) & (cap - 1);
            s[k] = i;
        }
        terra_free(t->slots);
        t->slots = s, t->slot_cap = cap;
    }
    if (n) memcpy(t->members + t->members_n, v, n * sizeof *v);
    t->members_n += n;
    uint32_t id = t->count++;
    t->off[t->count] = t->members_n;
    uint32_t k = set_slot(v, n, t->slot_cap);
    while (t->slots[k] != NONE) k = (k + 1) & (t->slot_cap - 1);
    t->slots[k] = id;
    return id;
}

static int cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* Sorts v[0..n) and drops repeats; the new length. */
static size_t sort_unique(uint32_t *v, size_t n) {
    if (n < 2) return n;
    qsort(v, n, sizeof *v, cmp_u32);
    size_t o = 1;
    for (size_t i = 1; i < n; i++)
        if (v[i] != v[o - 1]) v[o++] = v[i];
    return o;
}

/* ---- tiles ------------------------------------------------------------------------------------- */

typedef struct tile_set {
    uint64_t order;           /* terra_archive_order(key): records and plans are kept in index order */
    uint32_t set;
    uint32_t reusable;        /* plans only */
} tile_set;

static int cmp_order(const void *a, const void *b) {
    uint64_t x = ((const tile_set *)a)->order, y = ((const tile_set *)b)->order;
    return (x > y) - (x < y);
}

static const tile_set *tile_find(const tile_set *t, size_t n, terra_tile_key key) {
    tile_set probe = {terra_archive_order(key), 0, 0};
    return n ? bsearch(&probe, t, n, sizeof *t, cmp_order) : NULL;
}

/* A finest tile (tx, ty) or, while planning, a tile of the level being built. */
typedef struct plane_tile {
    int32_t tx, ty;
    uint32_t set;
} plane_tile;

static int cmp_plane(const void *a, const void *b) {
    const plane_tile *p = a, *q = b;
    if (p->ty != q->ty) return (p->ty > q->ty) - (p->ty < q->ty);
    return (p->tx > q->tx) - (p->tx < q->tx);
}

static int32_t floor_half(int32_t v) { return v >= 0 ? v / 2 : -((1 - v) / 2); }

/* ---- the record -------------------------------------------------------------------------------- */

typedef struct archive_id {
    uint64_t size;
    uint8_t header[TERRA_ARCHIVE_HEADER_SIZE];
    uint64_t index_hash;
} archive_id;

/* Where finest tile (tx, ty)'s mesh sits in a store. */
typedef struct mesh_ref {
    int32_t tx, ty;
    uint64_t offset, size;
} mesh_ref;

static int cmp_mesh_ref(const void *a, const void *b) {
    const mesh_ref *p = a, *q = b;
    if (p->ty != q->ty) return (p->ty > q->ty) - (p->ty < q->ty);
    return (p->tx > q->tx) - (p->tx < q->tx);
}

typedef struct record {
    uint32_t archive_version, cook_version;
    char *options, *settings;
    terra_cook_grid grid;
    archive_id archive;
    terra_cook_manifest *files;  /* the previous cook's inputs (options unused) */
    set_table sets;
    tile_set *tiles;
    size_t tile_count;
    uint64_t mesh_generation, mesh_store_size;
    mesh_ref *meshes;            /* sorted by ty, tx */
    size_t mesh_count;
} record;

static void record_free(record *r) {
    terra_free(r->options);
    terra_free(r->settings);
    terra_cook_manifest_free(r->files);
    set_table_free(&r->sets);
    terra_free(r->tiles);
    terra_free(r->meshes);
    *r = (record){0};
}

/* Reading with bounds: the first read past the end marks the reader bad, and every read after
 * gives zeros. */
typedef struct reader {
    const uint8_t *p, *end;
    bool bad;
} reader;

static const uint8_t *rd_bytes(reader *r, size_t n) {
    if (r->bad || (size_t)(r->end - r->p) < n) {
        r->bad = true;
        return NULL;
    }
    const uint8_t *p = r->p;
    r->p += n;
    return p;
}
static uint32_t rd_u32(reader *r) {
    const uint8_t *p = rd_bytes(r, 4);
    return p ? le32(p) : 0;
}
static uint64_t rd_u64(reader *r) {
    const uint8_t *p = rd_bytes(r, 8);
    return p ? le64(p) : 0;
}
static double rd_f64(reader *r) {
    uint64_t b = rd_u64(r);
    double d;
    memcpy(&d, &b, 8);
    return d;
}
/* A string of the record, copied (NULL when the reader went bad, or out of memory). */
static char *rd_str(reader *r) {
    uint32_t n = rd_u32(r);
    const uint8_t *p = rd_bytes(r, n);
    return p && !memchr(p, 0, n) ? dup_str((const char *)p, n) : NULL;
}

/* Parses a record; false with *why set when it is damaged (or out of memory). */
static bool record_parse(const uint8_t *data, size_t size, record *rec, const char **why) {
    *rec = (record){0};
    *why = "its contents are impossible (or out of memory)";
    if (size < 28 || memcmp(data, RECORD_MAGIC, 8) != 0) {
        *why = "not a cook record";
        return false;
    }
    if (le32(data + size - 4) != terra_crc32c(0, data, size - 4)) {
        *why = "its checksum does not match (truncated or damaged)";
        return false;
    }
    reader r = {data + 8, data + size - 4, false};
    if (rd_u32(&r) != RECORD_VERSION) {
        *why = "written by another version of terra";
        return false;
    }
    rec->archive_version = rd_u32(&r);
    rec->cook_version = rd_u32(&r);
    (void)rd_u32(&r);
    rec->options = rd_str(&r);
    rec->settings = rd_str(&r);
    if (!rec->options || !rec->settings || terra_cook_manifest_create("", &rec->files)) goto bad;
    rec->grid.frame = (terra_frame)rd_u32(&r);
    rec->grid.origin[0] = rd_f64(&r), rec->grid.origin[1] = rd_f64(&r);
    rec->grid.unit[0] = rd_f64(&r), rec->grid.unit[1] = rd_f64(&r);
    rec->grid.tile_units = rd_f64(&r);
    rec->grid.depth = (int32_t)rd_u32(&r);
    rec->archive.size = rd_u64(&r);
    const uint8_t *h = rd_bytes(&r, TERRA_ARCHIVE_HEADER_SIZE);
    if (h) memcpy(rec->archive.header, h, TERRA_ARCHIVE_HEADER_SIZE);
    rec->archive.index_hash = rd_u64(&r);
    uint32_t files = rd_u32(&r);
    for (uint32_t i = 0; i < files && !r.bad; i++) {
        terra_cook_file f = {0};
        char *key = rd_str(&r), *path = rd_str(&r);
        uint8_t flags = 0;
        const uint8_t *fp = rd_bytes(&r, 1);
        if (fp) flags = *fp;
        f.key = key, f.path = path, f.named = flags & 1, f.absent = (flags & 2) != 0;
        f.size = rd_u64(&r), f.mtime_ns = (int64_t)rd_u64(&r), f.hash = rd_u64(&r);
        bool dup = key && manifest_find(rec->files, key) != NONE;
        if (!key || !path || flags > 3 || dup || manifest_push(rec->files, &f)) {
            terra_free(key);
            terra_free(path);
            goto bad;
        }
    }
    uint32_t sets = rd_u32(&r);
    for (uint32_t i = 0; i < sets && !r.bad; i++) {
        uint32_t n = rd_u32(&r);
        const uint8_t *p = rd_bytes(&r, (size_t)n * 4);
        if (!p) break;
        uint32_t *v = terra_alloc(n ? (size_t)n * 4 : 1);
        if (!v) goto bad;
        bool ok = true;
        for (uint32_t k = 0; k < n; k++) {
            v[k] = le32(p + 4 * k);
            ok = ok && v[k] < files && (k == 0 || v[k] > v[k - 1]);
        }
        uint32_t id = ok ? set_intern(&rec->sets, v, n) : NONE;
        terra_free(v);
        if (id != i) goto bad; /* a repeated set is as impossible as a bad member */
    }
    uint64_t tiles = rd_u64(&r);
    if (!r.bad && tiles > (uint64_t)(r.end - r.p) / 12) r.bad = true;
    if (!r.bad) {
        rec->tiles = terra_alloc(tiles ? tiles * sizeof *rec->tiles : 1);
        if (!rec->tiles) goto bad;
    }
    for (uint64_t i = 0; i < tiles && !r.bad; i++) {
        tile_set *t = &rec->tiles[rec->tile_count++];
        t->order = terra_archive_order(rd_u64(&r));
        t->set = rd_u32(&r);
        t->reusable = 0;
        if (t->set >= sets || (i && t->order <= t[-1].order)) goto bad;
    }
    rec->mesh_generation = rd_u64(&r);
    rec->mesh_store_size = rd_u64(&r);
    uint64_t meshes = rd_u64(&r);
    if (!r.bad && meshes > (uint64_t)(r.end - r.p) / 24) r.bad = true;
    if (!r.bad) {
        rec->meshes = terra_alloc(meshes ? meshes * sizeof *rec->meshes : 1);
        if (!rec->meshes) goto bad;
    }
    for (uint64_t i = 0; i < meshes && !r.bad; i++) {
        mesh_ref *mr = &rec->meshes[rec->mesh_count++];
        mr->tx = (int32_t)rd_u32(&r), mr->ty = (int32_t)rd_u32(&r);
        mr->offset = rd_u64(&r), mr->size = rd_u64(&r);
        if (mr->offset > rec->mesh_store_size || mr->size > rec->mesh_store_size - mr->offset ||
            mr->size < MESH_HEADER + 4 || (i && cmp_mesh_ref(mr - 1, mr) >= 0))
            goto bad;
    }
    if (r.bad || r.p != r.end) {
        r.bad = true;
        goto bad;
    }
    return true;
bad:
    if (r.bad) *why = "its lengths do not add up";
    record_free(rec);
    return false;
}

/* Growing byte buffer for writing a record; `bad` once an allocation failed. */
typedef struct writer {
    uint8_t *p;
    size_t n, cap;
    bool bad;
} writer;

static void wr_bytes(writer *w, const void *d, size_t n) {
    if (w->bad) return;
    if (w->n + n > w->cap) {
        size_t cap = w->cap ? 2 * w->cap : 4096;
        while (cap < w->n + n) cap *= 2;
        uint8_t *p = terra_realloc(w->p, cap);
        if (!p) {
            w->bad = true;
            return;
        }
        w->p = p, w->cap = cap;
    }
    memcpy(w->p + w->n, d, n);
    w->n += n;
}
static void wr_u32(writer *w, uint32_t v) {
    uint8_t b[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    wr_bytes(w, b, 4);
}
static void wr_u64(writer *w, uint64_t v) {
    wr_u32(w, (uint32_t)v);
    wr_u32(w, (uint32_t)(v >> 32));
}
static void wr_f64(writer *w, double d) {
    uint64_t b;
    memcpy(&b, &d, 8);
    wr_u64(w, b);
}
static void wr_str(writer *w, const char *s) {
    size_t n = strlen(s);
    wr_u32(w, (uint32_t)n);
    wr_bytes(w, s, n);
}

/* ---- the archive a record describes ------------------------------------------------------------ */

/* The identity of the archive `a` opened from `path`, and its tiles' index orders (*orders,
 * terra_free, in index order). */
static terra_status archive_identify(const terra_archive *a, archive_id *id, uint64_t **orders) {
    const terra_archive_info *info = terra_archive_get_info(a);
    *orders = NULL;
    id->size = info->file_size;
    FILE *f = fopen(terra_archive_path(a), "rb");
    size_t got = f ? fread(id->header, 1, sizeof id->header, f) : 0;
    if (f) fclose(f);
    if (got != sizeof id->header)
        return terra_fail(TERRA_E_IO, "%s: cannot read its header again", terra_archive_path(a));
    uint64_t *o = terra_alloc(info->tile_count ? info->tile_count * sizeof *o : 1);
    if (!o) return terra_fail(TERRA_E_NOMEM, "cook cache: out of memory");
    xxh64_state s;
    xxh64_init(&s, 0);
    for (uint64_t i = 0; i < info->tile_count; i++) {
        terra_archive_entry e;
        terra_status st = terra_archive_entry_at(a, i, &e);
        if (st) {
            terra_free(o);
            return st;
        }
        uint8_t b[TERRA_ARCHIVE_ENTRY_SIZE];
        terra_archive_entry_pack(&e, b);
        xxh64_update(&s, b, sizeof b);
        o[i] = terra_archive_order(e.key);
    }
    id->index_hash = xxh64_digest(&s);
    *orders = o;
    return TERRA_OK;
}

/* ---- the cache --------------------------------------------------------------------------------- */

struct terra_cook_cache {
    const terra_cook_manifest *m;
    char *output, *record_path;
    terra_cook_cache_outcome outcome;
    char reason[1024];
    record rec;                  /* the previous cook's record: kept when outcome is CHANGED */
    terra_archive *old;          /* the previous archive (CHANGED, UNCHANGED) */
    uint8_t *change;             /* terra_cook_input_change per new input */
    uint32_t *old_to_new;        /* per file of the record: its number in m, or NONE */
    bool begun, grid_agrees, planned;
    terra_cook_grid grid;
    char *settings;
    plane_tile *finest;
    size_t finest_n, finest_cap;
    set_table sets;              /* the new cook's sets */
    tile_set *plan;              /* every planned tile, in index order */
    size_t plan_n;
    /* Finest meshes: the previous cook's store (read with pread, so any thread may load) and
     * this cook's, written under `lock` by terra_cook_cache_keep_finest. */
    char *meshes_path;
    int old_meshes;              /* -1: none to read */
    uint64_t generation;         /* this cook's, written into its blobs and its record */
    pthread_mutex_t lock;
    char *new_tmp;               /* the new store's temporary, NULL until the first blob */
    FILE *new_file;
    uint64_t new_size;
    mesh_ref *new_refs;
    size_t new_refs_n, new_refs_cap;
    bool new_failed;             /* a blob failed to be written: the store is not kept */
};

const char *terra_cook_input_change_name(terra_cook_input_change c) {
    static const char *const names[] = {"same", "touched", "changed", "new", "appeared", "vanished"};
    return (unsigned)c < sizeof names / sizeof *names ? names[c] : "?";
}

/* DIR/NAME.ext for the archive at `output` (DIR: `dir`, or OUTPUT.cache). */
static terra_status cache_file(const char *dir, const char *output, const char *ext, char **out) {
    *out = NULL;
    if (!output || !*output) return terra_fail(TERRA_E_INVALID, "cook cache: no output path");
    if (dir && !*dir) return terra_fail(TERRA_E_INVALID, "cook cache: an empty cache directory name");
    const char *slash = strrchr(output, '/'), *name = slash ? slash + 1 : output;
    if (!*name) return terra_fail(TERRA_E_INVALID, "cook cache: the output %s names no file", output);
    size_t n = (dir ? strlen(dir) : strlen(output) + 6) + strlen(name) + strlen(ext) + 2;
    char *p = terra_alloc(n);
    if (!p) return terra_fail(TERRA_E_NOMEM, "cook cache: out of memory");
    if (dir)
        snprintf(p, n, "%s/%s%s", dir, name, ext);
    else
        snprintf(p, n, "%s.cache/%s%s", output, name, ext);
    *out = p;
    return TERRA_OK;
}

terra_status terra_cook_cache_record_path(const char *dir, const char *output, char **out) {
    return cache_file(dir, output, ".record", out);
}

/* Makes the directory `path` is in (one level: its parent must exist). */
static terra_status make_dir_of(const char *path) {
    const char *slash = strrchr(path, '/');
    if (!slash || slash == path) return TERRA_OK;
    char *d = dup_str(path, (size_t)(slash - path));
    if (!d) return terra_fail(TERRA_E_NOMEM, "cook cache: out of memory");
    terra_status st = TERRA_OK;
    if (mkdir(d, 0777) != 0 && errno != EEXIST)
        st = terra_fail(TERRA_E_IO, "%s: cannot make the cook cache directory: %s", d, strerror(errno));
    terra_free(d);
    return st;
}

/* Gives up on the record: FRESH, for the reason given (logged as a warning when `warn`). */
static void go_fresh(terra_cook_cache *c, bool warn, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
static void go_fresh(terra_cook_cache *c, bool warn, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->reason, sizeof c->reason, fmt, ap);
    va_end(ap);
    if (warn) terra_log(TERRA_LOG_WARN, "%s", c->reason);
    c->outcome = TERRA_COOK_CACHE_FRESH;
    record_free(&c->rec);
    if (c->old) terra_archive_close(c->old);
    c->old = NULL;
    for (uint32_t i = 0; i < c->m->count; i++) c->change[i] = TERRA_COOK_INPUT_NEW;
}

/* Each new input against the record; the number of record files no longer given. */
static uint32_t compare_inputs(terra_cook_cache *c) {
    const terra_cook_manifest *old = c->rec.files;
    for (uint32_t i = 0; i < old->count; i++) c->old_to_new[i] = NONE;
    for (uint32_t i = 0; i < c->m->count; i++) {
        const terra_cook_file *f = &c->m->files[i];
        uint32_t j = manifest_find(old, f->key);
        terra_cook_input_change ch = TERRA_COOK_INPUT_NEW;
        if (j != NONE) {
            const terra_cook_file *g = &old->files[j];
            c->old_to_new[j] = i;
            if (f->named != g->named)
                ch = TERRA_COOK_INPUT_CHANGED;
            else if (f->absent || g->absent)
                ch = f->absent == g->absent ? TERRA_COOK_INPUT_SAME
                     : f->absent         ? TERRA_COOK_INPUT_VANISHED
                                         : TERRA_COOK_INPUT_APPEARED;
            else if (f->size != g->size || f->hash != g->hash)
                ch = TERRA_COOK_INPUT_CHANGED;
            else
                ch = f->mtime_ns == g->mtime_ns ? TERRA_COOK_INPUT_SAME : TERRA_COOK_INPUT_TOUCHED;
        }
        c->change[i] = (uint8_t)ch;
    }
    uint32_t gone = 0;
    for (uint32_t i = 0; i < old->count; i++) gone += c->old_to_new[i] == NONE;
    return gone;
}

/* True when the command line's inputs found in both cooks come in the same order. */
static bool inputs_in_order(const terra_cook_cache *c) {
    uint32_t last = 0;
    bool first = true;
    for (uint32_t j = 0; j < c->rec.files->count; j++) {
        uint32_t i = c->old_to_new[j];
        if (i == NONE || c->rec.files->files[j].named || c->m->files[i].named) continue;
        if (!first && i < last) return false;
        last = i, first = false;
    }
    return true;
}

/* Checks that the archive at the output is the one recorded, whole; FRESH otherwise. */
static void check_archive(terra_cook_cache *c) {
    if (access(c->output, F_OK) != 0) {
        go_fresh(c, false, "no previous archive at %s: cooking afresh", c->output);
        return;
    }
    terra_archive *a = NULL;
    terra_status st = terra_archive_open(c->output, NULL, &a);
    if (st) {
        go_fresh(c, true, "the previous archive does not open (%s): cooking afresh", terra_last_error());
        return;
    }
    archive_id id;
    uint64_t *orders = NULL;
    st = archive_identify(a, &id, &orders);
    bool same = !st && id.size == c->rec.archive.size && !memcmp(id.header, c->rec.archive.header, sizeof id.header) &&
                id.index_hash == c->rec.archive.index_hash && terra_archive_get_info(a)->tile_count == c->rec.tile_count;
    for (size_t i = 0; same && i < c->rec.tile_count; i++) same = orders[i] == c->rec.tiles[i].order;
    terra_free(orders);
    uint64_t bad = 0;
    if (st) {
        go_fresh(c, true, "the previous archive is damaged (%s): cooking afresh", terra_last_error());
    } else if (!same) {
        go_fresh(c, true, "%s is not the archive the cache recorded (written since by something else?): cooking afresh",
                 c->output);
    } else if (terra_archive_verify(a, &bad) != TERRA_OK) {
        go_fresh(c, true, "the previous archive %s is damaged (%llu bad tiles): cooking afresh", c->output,
                 (unsigned long long)bad);
    } else {
        c->old = a;
        return;
    }
    terra_archive_close(a);
}

/* The sentence for CHANGED and UNCHANGED. */
static void describe_changes(terra_cook_cache *c, uint32_t gone) {
    uint32_t changed = 0, touched = 0, listed = 0;
    for (uint32_t i = 0; i < c->m->count; i++) {
        changed += c->change[i] > TERRA_COOK_INPUT_TOUCHED;
        touched += c->change[i] == TERRA_COOK_INPUT_TOUCHED;
    }
    size_t n = 0, cap = sizeof c->reason;
#define SAY(...) (n += (size_t)snprintf(c->reason + (n < cap ? n : cap - 1), n < cap ? cap - n : 1, __VA_ARGS__))
    if (!changed && !gone) {
        SAY("up to date");
    } else {
        SAY("%u of %u inputs changed", changed, c->m->count);
        for (uint32_t i = 0; i < c->m->count && listed < 5; i++) {
            if (c->change[i] <= TERRA_COOK_INPUT_TOUCHED) continue;
            SAY("%s %s (%s)", listed ? "," : ":", c->m->files[i].path, terra_cook_input_change_name(c->change[i]));
            listed++;
        }
        if (changed > listed) SAY(" and %u more", changed - listed);
        if (gone) SAY("; %u no longer given", gone);
    }
    if (touched) SAY(" (%u touched, content unchanged)", touched);
#undef SAY
}

/* Opens the previous cook's store of finest meshes when it is the size the record says. */
static void open_old_meshes(terra_cook_cache *c) {
    int fd = open(c->meshes_path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (uint64_t)st.st_size == c->rec.mesh_store_size) {
        c->old_meshes = fd;
        return;
    }
    terra_log(TERRA_LOG_WARN, "%s: not the finest meshes the cook cache recorded: not used (the tiles still are)",
              c->meshes_path);
    if (fd >= 0) close(fd);
}

terra_status terra_cook_cache_open(const char *dir, const char *output, const terra_cook_manifest *m,
                                   terra_cook_cache **out) {
    *out = NULL;
    if (!m) return terra_fail(TERRA_E_INVALID, "cook cache: no manifest");
    terra_cook_cache *c = terra_calloc(1, sizeof *c);
    if (!c) return terra_fail(TERRA_E_NOMEM, "cook cache: out of memory");
    c->m = m;
    c->old_meshes = -1;
    pthread_mutex_init(&c->lock, NULL);
    terra_status st = terra_cook_cache_record_path(dir, output, &c->record_path);
    if (!st) st = cache_file(dir, output, ".meshes", &c->meshes_path);
    if (!st) {
        c->output = dup_str(output, strlen(output));
        c->change = terra_alloc(m->count ? m->count : 1);
        if (!c->output || !c->change) st = terra_fail(TERRA_E_NOMEM, "cook cache: out of memory");
    }
    if (st) {
        terra_cook_cache_close(c);
        return st;
    }
    uint8_t *data = NULL;
    size_t size = 0;
    const char *why = NULL;
    st = terra_io_read_file(c->record_path, RECORD_MAX_BYTES, &data, &size);
    if (st == TERRA_E_NOT_FOUND) {
        go_fresh(c, false, "no previous cook (no record at %s)", c->record_path);
    } else if (st == TERRA_E_NOMEM) {
        terra_cook_cache_close(c);
        return st;
    } else if (st) {
        go_fresh(c, true, "the cook cache record cannot be read (%s): ignored, cooking afresh", terra_last_error());
    } else if (!record_parse(data, size, &c->rec, &why)) {
        go_fresh(c, true, "the cook cache record %s is not usable (%s): ignored, cooking afresh", c->record_path, why);
    } else if (c->rec.archive_version != TERRA_ARCHIVE_VERSION || c->rec.cook_version != TERRA_COOK_VERSION) {
        go_fresh(c, false, "the previous cook was made by another version (archive %u, cook %u; now %u, %u)",
                 c->rec.archive_version, c->rec.cook_version, TERRA_ARCHIVE_VERSION, TERRA_COOK_VERSION);
    } else if (strcmp(c->rec.options, m->options) != 0) {
        go_fresh(c, false, "the options changed (were \"%s\", now \"%s\")", c->rec.options, m->options);
    } else if (!(c->old_to_new = terra_alloc(c->rec.files->count ? c->rec.files->count * sizeof(uint32_t) : 1))) {
        terra_free(data);
        terra_cook_cache_close(c);
        return terra_fail(TERRA_E_NOMEM, "cook cache: out of memory");
    } else {
        uint32_t gone = compare_inputs(c);
        if (!inputs_in_order(c)) {
            go_fresh(c, false, "the inputs are given in another order");
        } else {
            check_archive(c);
            if (c->old) {
                describe_changes(c, gone);
                bool any = gone > 0;
                for (uint32_t i = 0; i < m->count; i++) any = any || c->change[i] > TERRA_COOK_INPUT_TOUCHED;
                c->outcome = any ? TERRA_COOK_CACHE_CHANGED : TERRA_COOK_CACHE_UNCHANGED;
                if (any && c->rec.mesh_count) open_old_meshes(c);
            }
        }
    }
    terra_free(data);
    /* The new store's blobs carry a number no other cook has, so a store and a record that do not
     * belong together (a cook killed between writing the one and the other) never pair up. */
    struct {
        struct timespec real, mono;
        long pid;
        const void *self;
    } seed = {{0, 0}, {0, 0}, (long)getpid(), c};
    clock_gettime(CLOCK_REALTIME, &seed.real);
    clock_gettime(CLOCK_MONOTONIC, &seed.mono);
    c->generation = terra_cook_xxh64(&seed, sizeof seed, c->rec.mesh_generation);
    *out = c;
    return TERRA_OK;
}

terra_cook_cache_outcome terra_cook_cache_get_outcome(const terra_cook_cache *c) { return c->outcome; }
const char *terra_cook_cache_reason(const terra_cook_cache *c) { return c->reason; }
terra_cook_input_change terra_cook_cache_input_change(const terra_cook_cache *c, uint32_t i) {
    return i < c->m->count ? (terra_cook_input_change)c->change[i] : TERRA_COOK_INPUT_NEW;
}

terra_status terra_cook_cache_begin(terra_cook_cache *c, const terra_cook_grid *grid, const char *settings) {
    if (c->begun) return terra_fail(TERRA_E_INVALID, "cook cache: begun twice");
    if (!grid || !settings) return terra_fail(TERRA_E_INVALID, "cook cache: begin without a grid or settings");
    if (grid->depth < 0 || grid->depth > TERRA_TILE_MAX_LEVEL)
        return terra_fail(TERRA_E_INVALID, "cook cache: grid depth %d outside 0..%d", grid->depth, TERRA_TILE_MAX_LEVEL);
    c->settings = dup_str(settings, strlen(settings));
    if (!c->settings) return terra_fail(TERRA_E_NOMEM, "cook cache: out of memory");
    c->grid = *grid;
    c->begun = true;
    const terra_cook_grid *g = &c->rec.grid;
    c->grid_agrees = c->outcome != TERRA_COOK_CACHE_FRESH && g->frame == grid->frame && g->depth == grid->depth &&
                     !memcmp(g->origin, grid->origin, sizeof g->origin) && !memcmp(g->unit, grid->unit, sizeof g->unit) &&
                     !memcmp(&g->tile_units, &grid->tile_units, sizeof g->tile_units) &&
                     !strcmp(c->rec.settings, settings);
    return TERRA_OK;
}

terra_status terra_cook_cache_set_finest(terra_cook_cache *c, int32_t tx, int32_t ty, const uint32_t *inputs,
                                         size_t n) {
    if (!c->begun || c->planned) return terra_fail(TERRA_E_INVALID, "cook cache: finest tiles go between begin and plan");
    if (n && !inputs) return terra_fail(TERRA_E_INVALID, "cook cache: finest tile %d,%d: no inputs array", tx, ty);
    for (size_t i = 0; i < n; i++)
        if (inputs[i] >= c->m->count)
            return terra_fail(TERRA_E_INVALID, "cook cache: finest tile %d,%d: input %u of %u", tx, ty, inputs[i],
                              c->m->count);
    uint32_t *v = terra_alloc(n ? n * sizeof *v : 1);
    if (!v) return terra_fail(TERRA_E_NOMEM, "cook cache: out of memory");
    if (n) memcpy(v, inputs, n * sizeof *v);
    uint32_t id = set_intern(&c->sets, v, sort_unique(v, n));
    terra_free(v);
    if (id == NONE) return terra_fail(TERRA_E_NOMEM, "cook cache: out of memory");
    if (c->finest_n == c->finest_cap) {
        size_t cap = c->finest_cap ? 2 * c->finest_cap : 256;
        plane_tile *t = terra_realloc(c->finest, cap * sizeof *t);
        if (!t) return terra_fail(TERRA_E_NOMEM, "cook cache: out of memory");
        c->finest = t, c->finest_cap = cap;
    }
    c->finest[c->finest_n++] = (plane_tile){tx, ty, id};
    return TERRA_OK;
}

static terra_status plan_push(terra_cook_cache *c, size_t *cap, terra_tile_key key, uint32_t set) {
    if (c->plan_n == *cap) {
        size_t nc = *cap ? 2 * *cap : 256;
        tile_set *t = terra_realloc(c->plan, nc * sizeof *t);
        if (!t) return terra_fail(TERRA_E_NOMEM, "cook cache: out of memory");
        c->plan = t, *cap = nc;
    }
    c->plan[c->plan_n++] = (tile_set){terra_archive_order(key), set, 0};
    return TERRA_OK;
}

/* The record's set `s` in the new manifest's numbers, interned in the new table; NONE when one of
 * its inputs is no longer given (or out of memory: then nothing is reused, which is safe). */
static uint32_t map_old_set(terra_cook_cache *c, uint32_t s, uint32_t *scratch) {
    size_t n;
    const uint32_t *v = set_get(&c->rec.sets, s, &n);
    for (size_t i = 0; i < n; i++)
        if ((scratch[i] = c->old_to_new[v[i]]) == NONE) return NONE;
    return set_intern(&c->sets, scratch, sort_unique(scratch, n));
}

terra_status terra_cook_cache_plan(terra_cook_cache *c, uint64_t *reusable, uint64_t *total) {
    if (!c->begun || c->planned) return terra_fail(TERRA_E_INVALID, "cook cache: plan once, after begin");
    qsort(c->finest, c->finest_n, sizeof *c->finest, cmp_plane);
    for (size_t i = 1; i < c->finest_n; i++)
        if (!cmp_plane(&c->finest[i - 1], &c->finest[i]))
            return terra_fail(TERRA_E_INVALID, "cook cache: finest tile %d,%d given twice", c->finest[i].tx,
                              c->finest[i].ty);
    size_t cap = 0, level_n = c->finest_n, scratch_cap = 0;
    uint32_t *scratch = NULL;
    plane_tile *level = terra_alloc((level_n ? level_n : 1) * sizeof *level);
    terra_status st = level ? TERRA_OK : terra_fail(TERRA_E_NOMEM, "cook cache: out of memory");
    if (level && level_n) memcpy(level, c->finest, level_n * sizeof *level);
    /* Level by level: this level's tiles go into the plan, then each group of siblings (sorted
     * together by their parent) becomes one parent with the union of their sets. */
    for (int d = 0; !st && d <= c->grid.depth; d++) {
        for (size_t i = 0; !st && i < level_n; i++)
            st = plan_push(c, &cap, terra_cook_key(&c->grid, d, level[i].tx, level[i].ty), level[i].set);
        if (st || d == c->grid.depth) break;
        for (size_t i = 0; i < level_n; i++) level[i].tx = floor_half(level[i].tx), level[i].ty = floor_half(level[i].ty);
        qsort(level, level_n, sizeof *level, cmp_plane);
        size_t out = 0;
        for (size_t i = 0; !st && i < level_n;) {
            size_t j = i, n = 0;
            for (; j < level_n && !cmp_plane(&level[i], &level[j]); j++) {
                size_t m;
                set_get(&c->sets, level[j].set, &m);
                n += m;
            }
            if (n > scratch_cap) {
                uint32_t *s = terra_realloc(scratch, n * sizeof *s);
                if (!s) {
                    st = terra_fail(TERRA_E_NOMEM, "cook cache: out of memory");
                    break;
                }
                scratch = s, scratch_cap = n;
            }
            n = 0;
            for (size_t k = i; k < j; k++) {
                size_t m;
                const uint32_t *v = set_get(&c->sets, level[k].set, &m);
                if (m) memcpy(scratch + n, v, m * sizeof *v);
                n += m;
            }
            uint32_t id = set_intern(&c->sets, scratch, sort_unique(scratch, n));
            if (id == NONE) st = terra_fail(TERRA_E_NOMEM, "cook cache: out of memory");
            level[out++] = (plane_tile){level[i].tx, level[i].ty, id};
            i = j;
        }
        level_n = out;
    }
    terra_free(level);
    if (!st) qsort(c->plan, c->plan_n, sizeof *c->plan, cmp_order);
    /* Reuse: the record's set for the tile, in the new numbers, is the new set, and none of its
     * inputs changed. */
    uint64_t reused = 0;
    if (!st && c->outcome == TERRA_COOK_CACHE_CHANGED && c->grid_agrees) {
        uint32_t old_sets = c->rec.sets.count, *mapped = terra_alloc((old_sets ? old_sets : 1) * sizeof *mapped);
        size_t longest = 1;
        for (uint32_t s = 0; s < old_sets; s++) {
            size_t n;
            set_get(&c->rec.sets, s, &n);
            if (n > longest) longest = n;
        }
        uint32_t *tmp = terra_alloc(longest * sizeof *tmp);
        if (!mapped || !tmp) st = terra_fail(TERRA_E_NOMEM, "cook cache: out of memory");
        for (uint32_t s = 0; !st && s < old_sets; s++) mapped[s] = map_old_set(c, s, tmp);
        uint8_t *clean = st ? NULL : terra_alloc(c->sets.count ? c->sets.count : 1);
        if (!st && !clean) st = terra_fail(TERRA_E_NOMEM, "cook cache: out of memory");
        for (uint32_t s = 0; !st && s < c->sets.count; s++) {
            size_t n;
            const uint32_t *v = set_get(&c->sets, s, &n);
            clean[s] = 1;
            for (size_t i = 0; i < n; i++) clean[s] &= c->change[v[i]] <= TERRA_COOK_INPUT_TOUCHED;
        }
        for (size_t i = 0; !st && i < c->plan_n; i++) {
            tile_set *t = &c->plan[i];
            const tile_set *o = tile_find(c->rec.tiles, c->rec.tile_count, terra_archive_key_from_order(t->order));
            t->reusable = o && mapped[o->set] == t->set && clean[t->set];
            reused += t->reusable;
        }
        terra_free(clean);
        terra_free(tmp);
        terra_free(mapped);
    }
    terra_free(scratch);
    if (st) return st;
    c->planned = true;
    if (reusable) *reusable = reused;
    if (total) *total = c->plan_n;
    return TERRA_OK;
}

bool terra_cook_cache_reusable(const terra_cook_cache *c, terra_tile_key key) {
    if (!c->planned) return false;
    const tile_set *t = tile_find(c->plan, c->plan_n, key);
    return t && t->reusable;
}

/* The earlier archive's entry of a tile the plan reuses. */
static terra_status reused_entry(const terra_cook_cache *c, terra_tile_key key, terra_archive_entry *e) {
    if (!terra_cook_cache_reusable(c, key) || !c->old)
        return terra_fail(TERRA_E_INVALID, "cook cache: tile %d/%d/%d is not reusable", terra_tile_key_level(key),
                          terra_tile_key_x(key), terra_tile_key_y(key));
    return terra_archive_find(c->old, key, e);
}

terra_status terra_cook_cache_copy_tile(const terra_cook_cache *c, terra_tile_key key, terra_archive_writer *w) {
    terra_archive_entry e;
    terra_status st = reused_entry(c, key, &e);
    if (st) return st;
    uint8_t *buf = terra_alloc(e.size ? e.size : 1);
    if (!buf) return terra_fail(TERRA_E_NOMEM, "cook cache: out of memory");
    st = terra_archive_read_stored(c->old, &e, buf, e.size);
    terra_archive_tile_info info = {e.geometric_error, e.longest_edge, e.min_height, e.max_height};
    if (!st) st = terra_archive_writer_add_stored(w, key, buf, e.size, e.raw_size, (terra_compression)e.compression, &info);
    terra_free(buf);
    return st;
}

terra_status terra_cook_cache_stated_error(const terra_cook_cache *c, terra_tile_key key, double *out) {
    terra_archive_entry e;
    const terra_status st = reused_entry(c, key, &e);
    if (!st) *out = e.geometric_error;
    return st;
}

/* ---- finest meshes ----------------------------------------------------------------------------- */

/* A blob's header, as it is in the store (no padding: every field on its own alignment). */
typedef struct mesh_head {
    uint32_t magic, flags;
    uint64_t generation;
    int32_t tx, ty;
    uint32_t vertices, triangles;
    double error;
} mesh_head;
_Static_assert(sizeof(mesh_head) == MESH_HEADER, "a blob's header is 40 bytes");

/* Bytes of one blob: header, arrays, checksum. */
static uint64_t blob_size(uint64_t vertices, uint64_t triangles, bool normals, bool materials) {
    return MESH_HEADER + vertices * (16 + 4 + (normals ? 12 : 0) + (materials ? 2 : 0)) + triangles * 12 + 4;
}

terra_status terra_cook_cache_keep_finest(terra_cook_cache *c, int32_t tx, int32_t ty, const terra_cook_mesh *m,
                                          double error) {
    if (!c->planned || !tile_find(c->plan, c->plan_n, terra_cook_key(&c->grid, 0, tx, ty)))
        return terra_fail(TERRA_E_INVALID, "cook cache: finest tile %d,%d kept but not planned", tx, ty);
    bool normals = m->normal != NULL, materials = m->material != NULL;
    uint64_t size = blob_size(m->vertex_count, m->triangle_count, normals, materials);
    uint8_t *b = size <= SIZE_MAX ? terra_alloc((size_t)size) : NULL;
    if (!b) return terra_fail(TERRA_E_NOMEM, "cook cache: out of memory for finest tile %d,%d's mesh", tx, ty);
    mesh_head h = {MESH_MAGIC, (normals ? 1u : 0u) | (materials ? 2u : 0u), c->generation, tx, ty, m->vertex_count,
                   m->triangle_count, error};
    memcpy(b, &h, sizeof h);
    size_t at = MESH_HEADER, vn = m->vertex_count, tn = m->triangle_count;
#define PUT(src, bytes) (memcpy(b + at, (src), (bytes)), at += (bytes))
    if (vn) PUT(m->xy, vn * 16), PUT(m->z, vn * 4);
    if (vn && normals) PUT(m->normal, vn * 12);
    if (vn && materials) PUT(m->material, vn * 2);
    if (tn) PUT(m->tri, tn * 12);
#undef PUT
    uint32_t crc = terra_crc32c(0, b, at);
    memcpy(b + at, &crc, 4);
    terra_status st = TERRA_OK;
    pthread_mutex_lock(&c->lock);
    if (!c->new_failed && !c->new_file) {
        void *fv = NULL;
        st = make_dir_of(c->meshes_path);
        if (!st) st = terra_io_open_temp(c->meshes_path, &c->new_tmp, &fv);
        c->new_file = fv;
        c->new_failed = st != TERRA_OK;
    }
    if (!c->new_failed && c->new_refs_n == c->new_refs_cap) {
        size_t cap = c->new_refs_cap ? 2 * c->new_refs_cap : 256;
        mesh_ref *r = terra_realloc(c->new_refs, cap * sizeof *r);
        if (r) c->new_refs = r, c->new_refs_cap = cap;
        else st = terra_fail(TERRA_E_NOMEM, "cook cache: out of memory"), c->new_failed = true;
    }
    if (!c->new_failed && fwrite(b, 1, (size_t)size, c->new_file) != size) {
        st = terra_fail(TERRA_E_IO, "%s: write failed: %s", c->meshes_path, strerror(errno));
        c->new_failed = true;
    }
    if (!c->new_failed) {
        c->new_refs[c->new_refs_n++] = (mesh_ref){tx, ty, c->new_size, size};
        c->new_size += size;
    }
    pthread_mutex_unlock(&c->lock);
    terra_free(b);
    return st;
}

terra_status terra_cook_cache_load_finest(const terra_cook_cache *c, int32_t tx, int32_t ty, terra_cook_mesh *out,
                                          double *error) {
    if (!c->planned) return terra_fail(TERRA_E_INVALID, "cook cache: load before plan");
    mesh_ref probe = {tx, ty, 0, 0};
    const mesh_ref *r = c->old_meshes >= 0 && terra_cook_cache_reusable(c, terra_cook_key(&c->grid, 0, tx, ty))
                            ? bsearch(&probe, c->rec.meshes, c->rec.mesh_count, sizeof probe, cmp_mesh_ref)
                            : NULL;
    if (!r) return terra_fail(TERRA_E_NOT_FOUND, "cook cache: no mesh kept for finest tile %d,%d", tx, ty);
    uint8_t *b = r->size <= SIZE_MAX ? terra_alloc((size_t)r->size) : NULL;
    if (!b) return terra_fail(TERRA_E_NOMEM, "cook cache: out of memory for finest tile %d,%d's mesh", tx, ty);
    size_t got = 0;
    while (got < r->size) {
        ssize_t n = pread(c->old_meshes, b + got, (size_t)r->size - got, (off_t)(r->offset + got));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        got += (size_t)n;
    }
    mesh_head h = {0};
    uint32_t crc = 0;
    if (got == r->size) {
        memcpy(&h, b, sizeof h);
        memcpy(&crc, b + r->size - 4, 4);
    }
    bool normals = h.flags & 1, materials = h.flags & 2;
    if (got != r->size || crc != terra_crc32c(0, b, (size_t)r->size - 4) || h.magic != MESH_MAGIC || h.flags > 3 ||
        h.generation != c->rec.mesh_generation || h.tx != tx || h.ty != ty ||
        r->size != blob_size(h.vertices, h.triangles, normals, materials)) {
        terra_free(b);
        terra_log(TERRA_LOG_WARN, "%s: the mesh of finest tile %d,%d is damaged: cooking it afresh", c->meshes_path, tx, ty);
        return terra_fail(TERRA_E_CORRUPT, "%s: the mesh of finest tile %d,%d is damaged", c->meshes_path, tx, ty);
    }
    terra_status st = terra_cook_mesh_reserve(out, h.vertices, h.triangles, normals, materials);
    if (!st) {
        size_t at = MESH_HEADER, vn = h.vertices, tn = h.triangles;
#define GET(dst, bytes) (memcpy((dst), b + at, (bytes)), at += (bytes))
        if (vn) GET(out->xy, vn * 16), GET(out->z, vn * 4);
        if (vn && normals) GET(out->normal, vn * 12);
        if (vn && materials) GET(out->material, vn * 2);
        if (tn) GET(out->tri, tn * 12);
#undef GET
        out->vertex_count = h.vertices;
        out->triangle_count = h.triangles;
        *error = h.error;
    }
    terra_free(b);
    return st;
}

/* Puts this cook's store in place (before the record that names it); without one, or when it
 * failed, the record names no meshes and an earlier store goes. */
static terra_status finish_meshes(terra_cook_cache *c) {
    terra_status st = TERRA_OK;
    if (c->new_file) {
        FILE *f = c->new_file;
        c->new_file = NULL;
        bool ok = !c->new_failed && fflush(f) == 0 && fsync(fileno(f)) == 0;
        ok = fclose(f) == 0 && ok;
        qsort(c->new_refs, c->new_refs_n, sizeof *c->new_refs, cmp_mesh_ref);
        for (size_t i = 1; i < c->new_refs_n; i++)
            if (!cmp_mesh_ref(&c->new_refs[i - 1], &c->new_refs[i])) {
                st = terra_fail(TERRA_E_INVALID, "cook cache: finest tile %d,%d kept twice", c->new_refs[i].tx,
                                c->new_refs[i].ty);
                ok = false;
                break;
            }
        if (ok) {
            terra_status cs = terra_io_commit(c->new_tmp, c->meshes_path);
            c->new_tmp = NULL;
            if (!cs) return TERRA_OK;
            terra_log(TERRA_LOG_WARN, "%s (the finest meshes are not kept)", terra_last_error());
        } else {
            terra_io_abort(c->new_tmp);
            c->new_tmp = NULL;
            if (!st) terra_log(TERRA_LOG_WARN, "%s: the finest meshes could not be written: not kept", c->meshes_path);
        }
    }
    c->new_refs_n = 0;
    c->new_size = 0;
    unlink(c->meshes_path);
    return st;
}

/* The record of the new archive `a`: tiles from the plan, only the sets they use. */
static terra_status record_build(const terra_cook_cache *c, const terra_archive *a, writer *w) {
    archive_id id;
    uint64_t *orders = NULL;
    terra_status st = archive_identify(a, &id, &orders);
    if (st) return st;
    uint64_t count = terra_archive_get_info(a)->tile_count;
    uint32_t *tile_set_of = terra_alloc((count ? count : 1) * sizeof *tile_set_of);
    uint32_t *renumber = terra_alloc((c->sets.count ? c->sets.count : 1) * sizeof *renumber);
    if (!tile_set_of || !renumber) st = terra_fail(TERRA_E_NOMEM, "cook cache: out of memory");
    if (renumber) memset(renumber, 0xff, (c->sets.count ? c->sets.count : 1) * sizeof *renumber);
    uint32_t used = 0;
    for (uint64_t i = 0; !st && i < count; i++) {
        terra_tile_key key = terra_archive_key_from_order(orders[i]);
        const tile_set *t = tile_find(c->plan, c->plan_n, key);
        if (!t) {
            st = terra_fail(TERRA_E_INVALID, "%s: tile %d/%d/%d was not planned (terra_cook_cache_set_finest)",
                            c->output, terra_tile_key_level(key), terra_tile_key_x(key), terra_tile_key_y(key));
            break;
        }
        if (renumber[t->set] == NONE) renumber[t->set] = used++;
        tile_set_of[i] = renumber[t->set];
    }
    if (!st) {
        wr_bytes(w, RECORD_MAGIC, 8);
        wr_u32(w, RECORD_VERSION);
        wr_u32(w, TERRA_ARCHIVE_VERSION);
        wr_u32(w, TERRA_COOK_VERSION);
        wr_u32(w, 0);
        wr_str(w, c->m->options);
        wr_str(w, c->settings);
        wr_u32(w, (uint32_t)c->grid.frame);
        wr_f64(w, c->grid.origin[0]), wr_f64(w, c->grid.origin[1]);
        wr_f64(w, c->grid.unit[0]), wr_f64(w, c->grid.unit[1]);
        wr_f64(w, c->grid.tile_units);
        wr_u32(w, (uint32_t)c->grid.depth);
        wr_u64(w, id.size);
        wr_bytes(w, id.header, sizeof id.header);
        wr_u64(w, id.index_hash);
        wr_u32(w, c->m->count);
        for (uint32_t i = 0; i < c->m->count; i++) {
            const terra_cook_file *f = &c->m->files[i];
            wr_str(w, f->key);
            wr_str(w, f->path);
            uint8_t flags = (uint8_t)((f->named ? 1 : 0) | (f->absent ? 2 : 0));
            wr_bytes(w, &flags, 1);
            wr_u64(w, f->size), wr_u64(w, (uint64_t)f->mtime_ns), wr_u64(w, f->hash);
        }
        /* Sets in their new numbers: renumber[] is a bijection from the used ones onto 0..used-1. */
        uint32_t *by_new = terra_alloc((used ? used : 1) * sizeof *by_new);
        if (!by_new) st = terra_fail(TERRA_E_NOMEM, "cook cache: out of memory");
        for (uint32_t s = 0; by_new && s < c->sets.count; s++)
            if (renumber[s] != NONE) by_new[renumber[s]] = s;
        wr_u32(w, used);
        for (uint32_t k = 0; by_new && k < used; k++) {
            size_t n;
            const uint32_t *v = set_get(&c->sets, by_new[k], &n);
            wr_u32(w, (uint32_t)n);
            for (size_t i = 0; i < n; i++) wr_u32(w, v[i]);
        }
        terra_free(by_new);
        wr_u64(w, count);
        for (uint64_t i = 0; i < count; i++) {
            wr_u64(w, terra_archive_key_from_order(orders[i]));
            wr_u32(w, tile_set_of[i]);
        }
        wr_u64(w, c->generation);
        wr_u64(w, c->new_size);
        wr_u64(w, c->new_refs_n);
        for (size_t i = 0; i < c->new_refs_n; i++) {
            const mesh_ref *r = &c->new_refs[i];
            wr_u32(w, (uint32_t)r->tx), wr_u32(w, (uint32_t)r->ty);
            wr_u64(w, r->offset), wr_u64(w, r->size);
        }
        wr_u32(w, w->bad ? 0 : terra_crc32c(0, w->p, w->n));
        if (!st && w->bad) st = terra_fail(TERRA_E_NOMEM, "cook cache: out of memory");
    }
    terra_free(tile_set_of);
    terra_free(renumber);
    terra_free(orders);
    return st;
}

terra_status terra_cook_cache_commit(terra_cook_cache *c) {
    if (!c->planned) return terra_fail(TERRA_E_INVALID, "cook cache: commit before plan");
    if (c->old) terra_archive_close(c->old);
    c->old = NULL;
    if (c->old_meshes >= 0) close(c->old_meshes);
    c->old_meshes = -1;
    terra_status st = finish_meshes(c);
    terra_archive *a = NULL;
    if (!st) st = terra_archive_open(c->output, NULL, &a);
    writer w = {0};
    if (!st) st = record_build(c, a, &w);
    terra_archive_close(a);
    if (!st) st = make_dir_of(c->record_path);
    char *tmp = NULL;
    void *fv = NULL;
    if (!st) st = terra_io_open_temp(c->record_path, &tmp, &fv);
    if (!st) {
        FILE *f = fv;
        bool ok = fwrite(w.p, 1, w.n, f) == w.n && fflush(f) == 0 && fsync(fileno(f)) == 0;
        int e = errno;
        ok = (fclose(f) == 0) && ok;
        if (!ok) {
            terra_io_abort(tmp);
            st = terra_fail(TERRA_E_IO, "%s: write failed: %s", c->record_path, strerror(e));
        } else {
            st = terra_io_commit(tmp, c->record_path);
        }
    }
    terra_free(w.p);
    /* The previous record describes an archive that is no longer there: no record is better. */
    if (st) unlink(c->record_path);
    return st;
}

void terra_cook_cache_close(terra_cook_cache *c) {
    if (!c) return;
    if (c->old) terra_archive_close(c->old);
    if (c->old_meshes >= 0) close(c->old_meshes);
    if (c->new_file) fclose(c->new_file);
    terra_io_abort(c->new_tmp);
    pthread_mutex_destroy(&c->lock);
    terra_free(c->meshes_path);
    terra_free(c->new_refs);
    record_free(&c->rec);
    set_table_free(&c->sets);
    terra_free(c->output);
    terra_free(c->record_path);
    terra_free(c->change);
    terra_free(c->old_to_new);
    terra_free(c->settings);
    terra_free(c->finest);
    terra_free(c->plan);
    terra_free(c);
}
