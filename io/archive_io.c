/* Compression, archive writing and tile reading with decompression. See terra/archive_io.h. */
#include "terra/archive_io.h"
#include "archive_rules.h"
#include "json.h"
#include "terra/io.h"
#include "terra/tile_codec.h"
#include "terra/tile_mesh.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

/* ---- compression ------------------------------------------------------------------------------ */

bool terra_is_gzip(const void *data, size_t n) {
    const uint8_t *p = data;
    return n >= 2 && p[0] == 0x1f && p[1] == 0x8b;
}

bool terra_compression_parse(const char *s, terra_compression *out) {
    if (!strcmp(s, "gzip")) *out = TERRA_COMPRESS_GZIP;
    else if (!strcmp(s, "zstd")) *out = TERRA_COMPRESS_ZSTD;
    else if (!strcmp(s, "none")) *out = TERRA_COMPRESS_NONE;
    else if (!strcmp(s, "packed")) *out = TERRA_COMPRESS_PACKED;
    else return false;
    return true;
}

static terra_status gzip_compress(int level, const void *src, size_t n, uint8_t **out, size_t *out_n) {
    z_stream z;
    memset(&z, 0, sizeof z);
    if (deflateInit2(&z, level ? level : 9, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        return terra_fail(TERRA_E_NOMEM, "gzip: cannot start the compressor");
    uLong cap = deflateBound(&z, (uLong)n);
    uint8_t *buf = terra_alloc(cap ? cap : 1);
    if (!buf) {
        deflateEnd(&z);
        return terra_fail(TERRA_E_NOMEM, "gzip: out of memory");
    }
    z.next_in = (Bytef *)(uintptr_t)src;
    z.avail_in = (uInt)n;
    z.next_out = buf;
    z.avail_out = (uInt)cap;
    int r = deflate(&z, Z_FINISH);
    size_t total = z.total_out;
    deflateEnd(&z);
    if (r != Z_STREAM_END) {
        terra_free(buf);
        return terra_fail(TERRA_E_IO, "gzip: compression failed (%d)", r);
    }
    *out = buf;
    *out_n = total;
    return TERRA_OK;
}

static terra_status gzip_decompress(const void *src, size_t n, size_t max_out, uint8_t **out, size_t *out_n) {
    z_stream z;
    memset(&z, 0, sizeof z);
    if (inflateInit2(&z, 15 + 32) != Z_OK) return terra_fail(TERRA_E_NOMEM, "gunzip: cannot start the decompressor");
    size_t cap = n * 4 + 1024;
    if (cap > max_out) cap = max_out ? max_out : 1;
    uint8_t *buf = terra_alloc(cap);
    if (!buf) {
        inflateEnd(&z);
        return terra_fail(TERRA_E_NOMEM, "gunzip: out of memory");
    }
    z.next_in = (Bytef *)(uintptr_t)src;
    z.avail_in = (uInt)n;
    size_t used = 0;
    terra_status st = TERRA_OK;
    for (;;) {
        z.next_out = buf + used;
        z.avail_out = (uInt)(cap - used);
        int r = inflate(&z, Z_NO_FLUSH);
        used = cap - z.avail_out;
        if (r == Z_STREAM_END) break;
        if (r == Z_OK && z.avail_out == 0) {
            if (cap >= max_out) {
                st = terra_fail(TERRA_E_CAPACITY, "gunzip: output larger than the limit of %zu bytes", max_out);
                break;
            }
            size_t ncap = cap * 2 > max_out ? max_out : cap * 2;
            uint8_t *nb = terra_realloc(buf, ncap);
            if (!nb) {
                st = terra_fail(TERRA_E_NOMEM, "gunzip: out of memory");
                break;
            }
            buf = nb;
            cap = ncap;
            continue;
        }
        if (r == Z_OK) continue;
        st = terra_fail(TERRA_E_CORRUPT, "gunzip: damaged or truncated gzip data (%s)",
                        r == Z_BUF_ERROR ? "unexpected end" : z.msg ? z.msg : "error");
        break;
    }
    if (st == TERRA_OK && z.avail_in != 0)
        st = terra_fail(TERRA_E_CORRUPT, "gunzip: %u bytes after the end of the gzip stream", z.avail_in);
    inflateEnd(&z);
    if (st) {
        terra_free(buf);
        return st;
    }
    *out = buf;
    *out_n = used;
    return TERRA_OK;
}

terra_status terra_compress(terra_compression c, int level, const void *src, size_t n, uint8_t **out, size_t *out_n) {
    *out = NULL;
    *out_n = 0;
    if (c == TERRA_COMPRESS_GZIP) return gzip_compress(level, src, n, out, out_n);
    if (c == TERRA_COMPRESS_ZSTD) {
        size_t cap = ZSTD_compressBound(n);
        uint8_t *buf = terra_alloc(cap);
        if (!buf) return terra_fail(TERRA_E_NOMEM, "zstd: out of memory");
        size_t r = ZSTD_compress(buf, cap, src, n, level ? level : 9);
        if (ZSTD_isError(r)) {
            terra_free(buf);
            return terra_fail(TERRA_E_IO, "zstd: %s", ZSTD_getErrorName(r));
        }
        *out = buf;
        *out_n = r;
        return TERRA_OK;
    }
    if (c == TERRA_COMPRESS_PACKED) return terra_tile_codec_pack(src, n, level, out, out_n);
    if (c == TERRA_COMPRESS_NONE) {
        uint8_t *buf = terra_alloc(n ? n : 1);
        if (!buf) return terra_fail(TERRA_E_NOMEM, "out of memory");
        if (n) memcpy(buf, src, n);
        *out = buf;
        *out_n = n;
        return TERRA_OK;
    }
    return terra_fail(TERRA_E_INVALID, "unknown compression %d", (int)c);
}

terra_status terra_decompress(terra_compression c, const void *src, size_t n, size_t max_out, uint8_t **out,
                              size_t *out_n) {
    *out = NULL;
    *out_n = 0;
    if (c == TERRA_COMPRESS_GZIP) return gzip_decompress(src, n, max_out, out, out_n);
    if (c == TERRA_COMPRESS_ZSTD) {
        unsigned long long sz = ZSTD_getFrameContentSize(src, n);
        if (sz == ZSTD_CONTENTSIZE_ERROR) return terra_fail(TERRA_E_CORRUPT, "zstd: not a zstd frame");
        if (sz == ZSTD_CONTENTSIZE_UNKNOWN) return terra_fail(TERRA_E_CORRUPT, "zstd: frame without a content size");
        if (sz > max_out) return terra_fail(TERRA_E_CAPACITY, "zstd: %llu bytes, over the limit of %zu", sz, max_out);
        uint8_t *buf = terra_alloc(sz ? (size_t)sz : 1);
        if (!buf) return terra_fail(TERRA_E_NOMEM, "zstd: out of memory");
        size_t r = ZSTD_decompress(buf, (size_t)sz, src, n);
        if (ZSTD_isError(r) || r != sz) {
            terra_free(buf);
            return terra_fail(TERRA_E_CORRUPT, "zstd: damaged data (%s)", ZSTD_isError(r) ? ZSTD_getErrorName(r) : "size");
        }
        *out = buf;
        *out_n = r;
        return TERRA_OK;
    }
    if (c == TERRA_COMPRESS_PACKED) return terra_tile_codec_unpack(src, n, max_out, out, out_n);
    if (c == TERRA_COMPRESS_NONE) {
        if (n > max_out) return terra_fail(TERRA_E_CAPACITY, "tile of %zu bytes over the limit", n);
        return terra_compress(TERRA_COMPRESS_NONE, 0, src, n, out, out_n);
    }
    return terra_fail(TERRA_E_CORRUPT, "unknown compression %d", (int)c);
}

terra_status terra_qmesh_decode_any(const uint8_t *data, size_t size, const terra_qmesh_decode_desc *desc,
                                    terra_qmesh *out) {
    if (!terra_is_gzip(data, size)) return terra_qmesh_decode(data, size, desc, out);
    uint8_t *raw;
    size_t n;
    memset(out, 0, sizeof *out);
    /* the archive's cap on a tile serves loose tiles too: nothing honest comes near it */
    terra_status st = terra_decompress(TERRA_COMPRESS_GZIP, data, size, TERRA_ARCHIVE_MAX_RAW_SIZE, &raw, &n);
    if (st == TERRA_E_CORRUPT || st == TERRA_E_FORMAT) {
        /* gzip's two magic bytes may also open a plain tile (its CenterX) */
        terra_status gz = st;
        char why[256];
        snprintf(why, sizeof why, "%s", terra_last_error());
        if (terra_qmesh_decode(data, size, desc, out) == TERRA_OK) return TERRA_OK;
        return terra_fail(gz, "%s", why);
    }
    if (st) return st;
    st = terra_qmesh_decode(raw, n, desc, out);
    terra_free(raw);
    return st;
}

terra_status terra_io_read_file(const char *path, size_t max_bytes, uint8_t **data, size_t *size) {
    *data = NULL;
    *size = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return terra_fail(errno == ENOENT ? TERRA_E_NOT_FOUND : TERRA_E_IO, "%s: %s", path, strerror(errno));
    size_t cap = 65536, n = 0;
    uint8_t *buf = terra_alloc(cap);
    terra_status st = buf ? TERRA_OK : terra_fail(TERRA_E_NOMEM, "out of memory");
    while (st == TERRA_OK) {
        if (n == cap) {
            if (cap >= max_bytes) {
                st = terra_fail(TERRA_E_CAPACITY, "%s: larger than %zu bytes", path, max_bytes);
                break;
            }
            uint8_t *nb = terra_realloc(buf, cap * 2);
            if (!nb) {
                st = terra_fail(TERRA_E_NOMEM, "out of memory");
                break;
            }
            buf = nb;
            cap *= 2;
        }
        size_t r = fread(buf + n, 1, cap - n, f);
        n += r;
        if (r == 0) {
            if (ferror(f)) st = terra_fail(TERRA_E_IO, "%s: read error", path);
            break;
        }
    }
    fclose(f);
    if (st) {
        terra_free(buf);
        return st;
    }
    *data = buf;
    *size = n;
    return TERRA_OK;
}

/* ---- reading tiles ------------------------------------------------------------------------------ */

const char *arc_tile_name(const terra_archive *a, const terra_tms_map *names, terra_tile_key k, char out[TERRA_ARCHIVE_NAME_SIZE]) {
    int z = 0;
    int64_t zxy[3];
    const bool placed = names && terra_tms_from_key(names, k, &z, &zxy[1], &zxy[2]);
    zxy[0] = z;
    return terra_archive_tile_name(a, k, placed ? zxy : NULL, out, TERRA_ARCHIVE_NAME_SIZE);
}

terra_status arc_block_entry(const terra_archive *a, arc_block *b, uint64_t i, terra_archive_entry *e) {
    const terra_archive_info *I = terra_archive_get_info(a);
    if (i >= I->tile_count) return terra_fail(TERRA_E_INVALID, "archive: entry %llu of %llu", (unsigned long long)i,
                                              (unsigned long long)I->tile_count);
    if (!b->count || i < b->first || i - b->first >= b->count) {
        b->first = i - i % ARC_BLOCK;
        b->count = I->tile_count - b->first < ARC_BLOCK ? I->tile_count - b->first : ARC_BLOCK;
        const terra_status st = terra_archive_read_bytes(a, I->index_offset + b->first * TERRA_ARCHIVE_ENTRY_SIZE, b->raw,
                                                         (size_t)b->count * TERRA_ARCHIVE_ENTRY_SIZE);
        if (st) {
            b->count = 0;
            return st == TERRA_E_NOMEM ? st : terra_fail(TERRA_E_IO, "%s", terra_last_error());
        }
    }
    return terra_archive_entry_from(a, i, b->raw + (i - b->first) * TERRA_ARCHIVE_ENTRY_SIZE, e);
}

/* "PATH: NAME" of a tile, as its messages begin. */
typedef struct tile_label {
    char s[300];
} tile_label;
static tile_label label_of(const terra_archive *a, const terra_tms_map *names, const terra_archive_entry *e) {
    tile_label t;
    char name[TERRA_ARCHIVE_NAME_SIZE];
    snprintf(t.s, sizeof t.s, "%s: %s", terra_archive_path(a), arc_tile_name(a, names, e->key, name));
    return t;
}

/* The current message after the tile's label (copied first: terra_fail writes over it). */
static terra_status fail_in_tile(terra_status st, const tile_label *t) {
    char msg[512];
    snprintf(msg, sizeof msg, "%s", terra_last_error());
    return terra_fail(st, "%s: %s", t->s, msg);
}

/* Entry e's payload as stored (checksum checked) and decompressed to exactly its stated raw size;
 * *stored (may be NULL: freed here) and *raw (terra_free) receive them, the same buffer for an
 * uncompressed tile. */
static terra_status read_tile(const terra_archive *a, const terra_archive_entry *e, const tile_label *t, uint8_t **stored_out,
                              uint8_t **raw, size_t *raw_size) {
    *raw = NULL;
    *raw_size = 0;
    if (stored_out) *stored_out = NULL;
    /* terra_archive_entry_at refuses these already; an entry the caller made up gets the same rules */
    if (e->raw_size > TERRA_ARCHIVE_MAX_RAW_SIZE || (e->compression == TERRA_COMPRESS_NONE && e->raw_size != e->size))
        return terra_fail(TERRA_E_CORRUPT, "%s: states %u raw bytes for %u stored (cap %u)", t->s, e->raw_size, e->size,
                          TERRA_ARCHIVE_MAX_RAW_SIZE);
    uint8_t *stored = terra_alloc(e->size ? e->size : 1);
    if (!stored) return terra_fail(TERRA_E_NOMEM, "archive: out of memory for a tile of %u bytes", e->size);
    terra_status st = terra_archive_read_bytes(a, e->offset, stored, e->size);
    if (!st && terra_archive_entry_checksum(e, stored) != e->checksum)
        st = terra_fail(TERRA_E_CORRUPT, "%s is damaged (checksum mismatch)", t->s);
    if (!st && e->compression == TERRA_COMPRESS_NONE) {
        *raw = stored, *raw_size = e->size;
    } else if (!st) {
        /* Decompression stops at the stated raw size: a bomb costs at most that much. */
        st = terra_decompress((terra_compression)e->compression, stored, e->size, e->raw_size, raw, raw_size);
        if (st == TERRA_E_CAPACITY)
            st = terra_fail(TERRA_E_CORRUPT, "%s: decompresses to more than its stated %u bytes", t->s, e->raw_size);
        else if (st)
            st = fail_in_tile(st, t);
        else if (*raw_size != e->raw_size)
            st = terra_fail(TERRA_E_CORRUPT, "%s: decompressed to %zu bytes, %u stated", t->s, *raw_size, e->raw_size);
    }
    if (st) {
        if (*raw != stored) terra_free(*raw);
        *raw = NULL, *raw_size = 0;
    }
    if (!st && stored_out) *stored_out = stored;
    else if (stored != *raw) terra_free(stored);
    return st;
}

terra_status terra_archive_read_entry(const terra_archive *a, const terra_archive_entry *e, uint8_t **raw,
                                      size_t *raw_size) {
    const tile_label t = label_of(a, NULL, e);
    return read_tile(a, e, &t, NULL, raw, raw_size);
}

terra_status terra_archive_read_tile(const terra_archive *a, terra_tile_key key, uint8_t **raw, size_t *raw_size,
                                     terra_archive_entry *entry) {
    terra_archive_entry e;
    *raw = NULL;
    *raw_size = 0;
    terra_status st = terra_archive_find(a, key, &e);
    if (st) return st;
    if (entry) *entry = e;
    return terra_archive_read_entry(a, &e, raw, raw_size);
}

/* ---- the rules every reader applies to a tile ------------------------------------------------- */

static bool is_pow2_cells(uint32_t n) { return n >= 2 && n <= 256 && (n & (n - 1)) == 0; }

static terra_status check_header(const tile_label *t, const terra_archive_entry *e, const terra_qmesh_header *H) {
    static const char *names[] = {"centre x",        "centre y",        "centre z",        "sphere centre x",
                                  "sphere centre y", "sphere centre z", "sphere radius",   "horizon point x",
                                  "horizon point y", "horizon point z", "minimum height",  "maximum height"};
    const double v[12] = {H->center[0],        H->center[1],        H->center[2],    H->sphere_center[0],
                          H->sphere_center[1], H->sphere_center[2], H->sphere_radius, H->horizon[0],
                          H->horizon[1],       H->horizon[2],       H->min_height,   H->max_height};
    for (int k = 0; k < 12; k++)
        if (!isfinite(v[k])) return terra_fail(TERRA_E_CORRUPT, "%s: header %s is %g", t->s, names[k], v[k]);
    if (H->sphere_radius < 0 || H->min_height > H->max_height)
        return terra_fail(TERRA_E_CORRUPT, "%s: header heights %g..%g, sphere radius %g", t->s, (double)H->min_height,
                          (double)H->max_height, H->sphere_radius);
    /* readers cull and bound the ground by the index's ranges before a tile is read */
    if (H->min_height < e->min_height || H->max_height > e->max_height)
        return terra_fail(TERRA_E_CORRUPT, "%s: heights %g..%g outside the index's %g..%g", t->s, (double)H->min_height,
                          (double)H->max_height, (double)e->min_height, (double)e->max_height);
    return TERRA_OK;
}

/* What every tile is drawn from: a triangle at least, no more vertices than a drawn tile holds, and
 * the extensions the metadata lists. */
static terra_status check_content(const tile_label *t, const terra_qmesh *m, uint32_t extensions) {
    if (m->vertex_count < 3 || m->triangle_count == 0 || m->vertex_count > TERRA_TILE_MESH_MAX_VERTICES)
        return terra_fail(TERRA_E_CORRUPT, "%s: %u vertices and %u triangles (a tile is drawn from 3 to %u vertices "
                          "and a triangle at least)", t->s, m->vertex_count, m->triangle_count,
                          TERRA_TILE_MESH_MAX_VERTICES);
    const uint32_t missing = extensions & ~m->extensions;
    if (missing)
        return terra_fail(TERRA_E_CORRUPT, "%s: lacks the %s extension the archive's metadata lists", t->s,
                          arc_extension_name(missing));
    return TERRA_OK;
}

/* The lattice rule: every vertex on a point of the n-cell grid, every point once. gv[(n+1)^2]. */
static terra_status check_grid(const tile_label *t, const terra_qmesh *m, uint32_t n, uint32_t *gv) {
    const uint32_t side = n + 1, points = side * side;
    if (m->vertex_count != points)
        return terra_fail(TERRA_E_CORRUPT, "%s: %u vertices, not a grid of %u x %u cells as the archive's tiles are", t->s,
                          m->vertex_count, n, n);
    for (uint32_t k = 0; k < points; k++) gv[k] = UINT32_MAX;
    for (uint32_t k = 0; k < m->vertex_count; k++) {
        /* u, v are 0..32767 (the decoder's rule), so i, j are 0..n; the round trip finds off-grid ones */
        const uint32_t u = m->u[k], v = m->v[k];
        const uint32_t i = (uint32_t)lround(u * (double)n / TERRA_QMESH_MAX_COORD);
        const uint32_t j = (uint32_t)lround(v * (double)n / TERRA_QMESH_MAX_COORD);
        if (u > TERRA_QMESH_MAX_COORD || v > TERRA_QMESH_MAX_COORD || i > n || j > n ||
            lround((double)i * TERRA_QMESH_MAX_COORD / n) != (long)u || lround((double)j * TERRA_QMESH_MAX_COORD / n) != (long)v)
            return terra_fail(TERRA_E_CORRUPT, "%s: vertex %u (u %u, v %u) is off the %u-cell grid", t->s, k, u, v, n);
        uint32_t *at = &gv[j * side + i];
        if (*at != UINT32_MAX)
            return terra_fail(TERRA_E_CORRUPT, "%s: vertices %u and %u both sit at grid point (%u, %u)", t->s, *at, k, i, j);
        *at = k;
    }
    /* points vertices on distinct points of `points`: every point is covered */
    return TERRA_OK;
}

static terra_status grid_rule(const tile_label *t, const terra_qmesh *m, uint32_t n, uint32_t *grid_vertex) {
    uint32_t *gv = grid_vertex ? grid_vertex : terra_alloc(((size_t)n + 1) * (n + 1) * sizeof *gv);
    const terra_status st = gv ? check_grid(t, m, n, gv) : terra_fail(TERRA_E_NOMEM, "archive check: out of memory");
    if (gv != grid_vertex) terra_free(gv);
    return st;
}

terra_status arc_check_tile(const terra_archive *a, const terra_archive_entry *e, const terra_tile_rules *rules,
                            const terra_tms_map *names, terra_qmesh *mesh, uint32_t *grid_vertex, bool as_stored,
                            uint8_t **bytes, size_t *bytes_n) {
    terra_qmesh m;
    memset(&m, 0, sizeof m);
    if (mesh) memset(mesh, 0, sizeof *mesh);
    if (bytes) *bytes = NULL, *bytes_n = 0;
    const uint32_t n = rules ? (uint32_t)rules->grid_cells : 0;
    if (rules && rules->grid_cells && !is_pow2_cells(n))
        return terra_fail(TERRA_E_INVALID, "archive check: grid_cells %d is not a power of two in 2..256", rules->grid_cells);
    const tile_label t = label_of(a, names, e);
    uint8_t *raw = NULL, *stored = NULL; /* the same buffer for an uncompressed tile */
    size_t raw_n = 0;
    terra_status st = read_tile(a, e, &t, bytes && as_stored ? &stored : NULL, &raw, &raw_n);
    if (st) return st;
    st = terra_qmesh_decode(raw, raw_n, NULL, &m);
    if (st) st = fail_in_tile(st, &t);
    if (!st) st = check_header(&t, e, &m.header);
    if (!st) st = check_content(&t, &m, rules ? rules->extensions : 0);
    if (!st && n) st = grid_rule(&t, &m, n, grid_vertex);
    if (st || !mesh) terra_qmesh_free(&m);
    else *mesh = m;
    if (!st && bytes) { /* the bytes checked go to the caller */
        *bytes = as_stored ? stored : raw, *bytes_n = as_stored ? e->size : raw_n;
        if (raw == *bytes) raw = NULL;
        if (stored == *bytes) stored = NULL;
    }
    if (stored != raw) terra_free(stored);
    terra_free(raw);
    return st;
}

terra_status arc_check_grid(const terra_archive *a, const terra_archive_entry *e, const terra_tms_map *names,
                            const terra_qmesh *m, uint32_t n) {
    const tile_label t = label_of(a, names, e);
    return grid_rule(&t, m, n, NULL);
}

terra_status terra_archive_check_tile(const terra_archive *a, const terra_archive_entry *e, const terra_tile_rules *rules,
                                      terra_qmesh *mesh, uint32_t *grid_vertex) {
    return arc_check_tile(a, e, rules, NULL, mesh, grid_vertex, false, NULL, NULL);
}

terra_status terra_archive_check_tile_bytes(const terra_archive *a, const terra_archive_entry *e,
                                            const terra_tile_rules *rules, const terra_tms_map *names, terra_qmesh *mesh,
                                            bool as_stored, uint8_t **bytes, size_t *bytes_n) {
    return arc_check_tile(a, e, rules, names, mesh, NULL, as_stored, bytes, bytes_n);
}

/* ---- writing ---------------------------------------------------------------------------------- */

struct terra_archive_writer {
    char *path;
    terra_archive_write_desc desc;
    char *source_json;
    char *name;
    FILE *spill; /* payloads, in the order they were added */
    uint64_t spill_size;
    terra_archive_entry *entries;
    size_t count, cap;
    pthread_mutex_t lock;
    terra_status failed; /* first failure while adding */
    char failed_why[256]; /* and its message, for every later call on any thread */
};

static char *dup_str(const char *s) {
    if (!s) return NULL;
    size_t n = strlen(s) + 1;
    char *d = terra_alloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

static void writer_free(terra_archive_writer *w) {
    if (!w) return;
    if (w->spill) fclose(w->spill);
    terra_free(w->entries);
    terra_free(w->path);
    terra_free(w->source_json);
    terra_free(w->name);
    pthread_mutex_destroy(&w->lock);
    terra_free(w);
}

terra_status terra_archive_writer_create(const char *path, const terra_archive_write_desc *desc,
                                         terra_archive_writer **out) {
    *out = NULL;
    const terra_archive_write_desc defaults = {0};
    if (!desc) desc = &defaults;
    if (desc->frame != TERRA_FRAME_LOCAL && desc->frame != TERRA_FRAME_GEOGRAPHIC)
        return terra_fail(TERRA_E_INVALID, "archive: unknown frame %d", (int)desc->frame);
    if (desc->compression > TERRA_COMPRESS_PACKED)
        return terra_fail(TERRA_E_INVALID, "archive: unknown compression %d", (int)desc->compression);
    if (desc->source_json) {
        cJSON *j = terra_json_parse(desc->source_json);
        if (!j) return terra_fail(TERRA_E_INVALID, "archive: the source manifest is not JSON");
        cJSON_Delete(j);
    }
    terra_archive_writer *w = terra_calloc(1, sizeof *w);
    if (!w) return terra_fail(TERRA_E_NOMEM, "archive: out of memory");
    pthread_mutex_init(&w->lock, NULL);
    w->desc = *desc;
    w->path = dup_str(path);
    w->source_json = dup_str(desc->source_json);
    w->name = dup_str(desc->name ? desc->name : "terra");
    w->spill = tmpfile();
    if (!w->path || !w->name || (desc->source_json && !w->source_json) || !w->spill) {
        terra_status st = w->spill ? terra_fail(TERRA_E_NOMEM, "archive: out of memory")
                                   : terra_fail(TERRA_E_IO, "archive: cannot create a temporary file: %s", strerror(errno));
        writer_free(w);
        return st;
    }
    *out = w;
    return TERRA_OK;
}

terra_status terra_archive_writer_add_stored(terra_archive_writer *w, terra_tile_key key, const void *stored,
                                             size_t size, uint32_t raw_size, terra_compression c,
                                             const terra_archive_tile_info *info) {
    if (size > UINT32_MAX) return terra_fail(TERRA_E_CAPACITY, "archive: a tile of %zu bytes is too large", size);
    /* nothing a reader would refuse (terra_archive_entry_at's rules) */
    if (raw_size > TERRA_ARCHIVE_MAX_RAW_SIZE)
        return terra_fail(TERRA_E_CAPACITY, "archive: a tile of %u raw bytes is over the cap of %u", raw_size,
                          TERRA_ARCHIVE_MAX_RAW_SIZE);
    if (c == TERRA_COMPRESS_NONE && raw_size != size)
        return terra_fail(TERRA_E_INVALID, "archive: an uncompressed tile of %zu bytes stated as %u raw bytes", size, raw_size);
    if (info && (!isfinite(info->geometric_error) || !isfinite(info->longest_edge) || !isfinite(info->min_height) ||
                 !isfinite(info->max_height) || info->min_height > info->max_height || info->geometric_error < 0 ||
                 info->longest_edge < 0 || fabsf(info->min_height) > TERRA_ARCHIVE_MAX_HEIGHT ||
                 fabsf(info->max_height) > TERRA_ARCHIVE_MAX_HEIGHT))
        return terra_fail(TERRA_E_INVALID,
                          "archive: tile %d/%d/%d: error %g m, longest edge %g m, heights %g..%g m: not finite, negative "
                          "lengths, not a range, or heights beyond %g m",
                          terra_tile_key_level(key), terra_tile_key_x(key), terra_tile_key_y(key),
                          (double)info->geometric_error, (double)info->longest_edge, (double)info->min_height,
                          (double)info->max_height, (double)TERRA_ARCHIVE_MAX_HEIGHT);
    terra_archive_entry e;
    memset(&e, 0, sizeof e);
    e.key = key;
    e.size = (uint32_t)size;
    e.raw_size = raw_size;
    e.compression = (uint8_t)c;
    if (info) {
        e.geometric_error = info->geometric_error;
        e.longest_edge = info->longest_edge;
        e.min_height = info->min_height;
        e.max_height = info->max_height;
    }
    terra_status st = TERRA_OK;
    pthread_mutex_lock(&w->lock);
    if (w->failed) {
        st = terra_fail(w->failed, "%s", w->failed_why);
    } else if (w->count == w->cap) {
        size_t ncap = w->cap ? w->cap * 2 : 1024;
        terra_archive_entry *ne = terra_realloc(w->entries, ncap * sizeof *ne);
        if (!ne) st = terra_fail(TERRA_E_NOMEM, "archive: out of memory for the index");
        else {
            w->entries = ne;
            w->cap = ncap;
        }
    }
    if (st == TERRA_OK) {
        e.offset = w->spill_size; /* relative for now; made absolute in finish */
        if (size && fwrite(stored, 1, size, w->spill) != size) {
            st = w->failed = terra_fail(TERRA_E_IO, "archive: cannot write a temporary file: %s", strerror(errno));
            snprintf(w->failed_why, sizeof w->failed_why, "%s", terra_last_error());
        } else {
            /* the checksum covers the final entry, so finish computes it once offsets are known */
            w->spill_size += size;
            w->entries[w->count++] = e;
        }
    }
    pthread_mutex_unlock(&w->lock);
    return st;
}

terra_status terra_archive_store_tile(terra_compression c, int level, const void *raw, size_t raw_size,
                                      uint8_t **out, size_t *out_n, terra_compression *used) {
    if (raw_size > UINT32_MAX) return terra_fail(TERRA_E_CAPACITY, "archive: a tile of %zu bytes is too large", raw_size);
    terra_status st = terra_compress(c, level, raw, raw_size, out, out_n);
    /* a tile the codec cannot reproduce byte for byte is stored in zstd, which always can */
    if (st == TERRA_E_UNSUPPORTED && c == TERRA_COMPRESS_PACKED)
        st = terra_compress(c = TERRA_COMPRESS_ZSTD, 19, raw, raw_size, out, out_n);
    *used = c;
    return st;
}

terra_status terra_archive_writer_add(terra_archive_writer *w, terra_tile_key key, const void *raw, size_t raw_size,
                                      const terra_archive_tile_info *info) {
    uint8_t *buf;
    size_t n;
    terra_compression c;
    terra_status st = terra_archive_store_tile(w->desc.compression, w->desc.compression_level, raw, raw_size, &buf, &n, &c);
    if (st) return st;
    st = terra_archive_writer_add_stored(w, key, buf, n, (uint32_t)raw_size, c, info);
    terra_free(buf);
    return st;
}

void terra_archive_writer_abort(terra_archive_writer *w) { writer_free(w); }

static int cmp_entry(const void *a, const void *b) {
    uint64_t x = terra_archive_order(((const terra_archive_entry *)a)->key);
    uint64_t y = terra_archive_order(((const terra_archive_entry *)b)->key);
    return (x > y) - (x < y);
}

/* TERRA_QMESH_HAS_NORMALS, _WATER_MASK, _METADATA, _MATERIAL: bits 0..3 */
static const char *ext_names[] = {"octvertexnormals", "watermask", "metadata", "terra-material"};

uint32_t arc_extension_bit(const char *name) {
    for (int i = 0; i < 4; i++)
        if (!strcmp(name, ext_names[i])) return 1u << i;
    return 0;
}

const char *arc_extension_name(uint32_t bits) {
    for (int i = 0; i < 4; i++)
        if (bits & (1u << i)) return ext_names[i];
    return "unknown";
}

static char *build_metadata(terra_archive_writer *w, uint64_t total_bytes) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "format", "terra-archive");
    cJSON_AddNumberToObject(root, "version", TERRA_ARCHIVE_VERSION);
    cJSON_AddStringToObject(root, "name", w->name);
    cJSON_AddStringToObject(root, "tile_format", "quantized-mesh-1.0");
    cJSON_AddStringToObject(root, "mesh", w->desc.tin ? "tin" : "grid");
    cJSON_AddStringToObject(root, "frame", terra_frame_name(w->desc.frame));
    cJSON_AddStringToObject(root, "compression", terra_compression_name(w->desc.compression));
    cJSON *b = cJSON_AddArrayToObject(root, "bounds");
    for (int i = 0; i < 4; i++) cJSON_AddItemToArray(b, cJSON_CreateNumber(w->desc.bounds[i]));
    if (w->desc.frame == TERRA_FRAME_LOCAL) cJSON_AddNumberToObject(root, "tile_size_m", w->desc.tile_size_m);
    cJSON *ex = cJSON_AddArrayToObject(root, "extensions");
    for (int i = 0; i < 4; i++)
        if (w->desc.qmesh_extensions & (1u << i)) cJSON_AddItemToArray(ex, cJSON_CreateString(ext_names[i]));
    cJSON_AddNumberToObject(root, "tile_count", (double)w->count);
    cJSON_AddNumberToObject(root, "payload_bytes", (double)total_bytes);
    /* levels: tiles, bytes, largest and smallest geometric error */
    int lo = 32, hi = -1;
    uint64_t tiles[32] = {0}, bytes[32] = {0};
    double emax[32], emin[32];
    for (int l = 0; l < 32; l++) emax[l] = 0, emin[l] = INFINITY;
    for (size_t i = 0; i < w->count; i++) {
        int l = terra_tile_key_level(w->entries[i].key);
        if (l < lo) lo = l;
        if (l > hi) hi = l;
        tiles[l]++;
        bytes[l] += w->entries[i].size;
        if (w->entries[i].geometric_error > emax[l]) emax[l] = w->entries[i].geometric_error;
        if (w->entries[i].geometric_error < emin[l]) emin[l] = w->entries[i].geometric_error;
    }
    cJSON_AddNumberToObject(root, "min_level", hi < 0 ? 0 : lo);
    cJSON_AddNumberToObject(root, "max_level", hi < 0 ? 0 : hi);
    cJSON *levels = cJSON_AddArrayToObject(root, "levels");
    for (int l = 0; l <= hi; l++) {
        if (!tiles[l]) continue;
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "level", l);
        cJSON_AddNumberToObject(o, "tiles", (double)tiles[l]);
        cJSON_AddNumberToObject(o, "bytes", (double)bytes[l]);
        cJSON_AddNumberToObject(o, "geometric_error_max", emax[l]);
        cJSON_AddNumberToObject(o, "geometric_error_min", emin[l]);
        cJSON_AddItemToArray(levels, o);
    }
    if (w->source_json) cJSON_AddItemToObject(root, "source", terra_json_parse(w->source_json));
    char *text = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return text;
}

/* One payload back from the spill file (pread: no stdio buffer refilled per tile). */
static bool read_spill(terra_archive_writer *w, uint8_t *buf, size_t n, uint64_t off) {
    int fd = fileno(w->spill);
    while (n) {
        ssize_t r = pread(fd, buf, n, (off_t)off);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return false;
        buf += r;
        n -= (size_t)r;
        off += (uint64_t)r;
    }
    return true;
}

terra_status terra_archive_writer_finish(terra_archive_writer *w) {
    terra_status st = w->failed;
    if (st) {
        st = terra_fail(st, "%s", w->failed_why);
        writer_free(w);
        return st;
    }
    qsort(w->entries, w->count, sizeof *w->entries, cmp_entry);
    for (size_t i = 1; i < w->count; i++)
        if (terra_archive_order(w->entries[i].key) == terra_archive_order(w->entries[i - 1].key)) {
            terra_tile_key k = w->entries[i].key;
            st = terra_fail(TERRA_E_INVALID, "archive: tile %d/%d/%d was added twice", terra_tile_key_level(k),
                            terra_tile_key_x(k), terra_tile_key_y(k));
            writer_free(w);
            return st;
        }
    char *meta = build_metadata(w, w->spill_size);
    if (!meta) {
        writer_free(w);
        return terra_fail(TERRA_E_NOMEM, "archive: out of memory for the metadata");
    }
    terra_archive_info info;
    memset(&info, 0, sizeof info);
    info.version = TERRA_ARCHIVE_VERSION;
    info.flags = (uint32_t)w->desc.frame;
    info.tile_count = w->count;
    info.metadata_size = (uint32_t)strlen(meta);
    info.index_offset = TERRA_ARCHIVE_HEADER_SIZE + (uint64_t)info.metadata_size;
    info.data_offset = info.index_offset + (uint64_t)w->count * TERRA_ARCHIVE_ENTRY_SIZE;
    info.file_size = info.data_offset + w->spill_size;
    uint8_t header[TERRA_ARCHIVE_HEADER_SIZE];
    terra_archive_header_pack(&info, meta, header);

    char *tmp = NULL;
    void *fv = NULL;
    FILE *f = NULL;
    uint8_t *chunk = NULL;
    uint64_t *spill_off = NULL;
    st = terra_io_open_temp(w->path, &tmp, &fv);
    if (st) goto done;
    f = fv;
    if (fwrite(header, 1, sizeof header, f) != sizeof header || fwrite(meta, 1, info.metadata_size, f) != info.metadata_size)
        goto io_error;
    /* Payloads go in index order, so neighbours sit together on disk too. Pass 1 gives each
     * entry its final offset and checksum (entry bytes, then payload) and writes the index;
     * pass 2 copies the payloads. e->offset holds the spill offset until then (kept in spill[]). */
    size_t chunk_cap = 1 << 16;
    chunk = terra_alloc(chunk_cap);
    spill_off = terra_alloc((w->count ? w->count : 1) * sizeof *spill_off);
    if (!chunk || !spill_off) {
        st = terra_fail(TERRA_E_NOMEM, "archive: out of memory");
        goto fail;
    }
    if (fflush(w->spill) != 0) goto io_error;
    uint64_t at = info.data_offset;
    for (size_t pass = 0; pass < 2; pass++) {
        for (size_t i = 0; i < w->count; i++) {
            terra_archive_entry *e = &w->entries[i];
            if (pass == 0) {
                spill_off[i] = e->offset;
                e->offset = at;
                at += e->size;
            }
            if (e->size > chunk_cap) {
                uint8_t *nc = terra_realloc(chunk, e->size);
                if (!nc) {
                    st = terra_fail(TERRA_E_NOMEM, "archive: out of memory");
                    goto fail;
                }
                chunk = nc;
                chunk_cap = e->size;
            }
            if (!read_spill(w, chunk, e->size, spill_off[i])) goto io_error;
            if (pass == 0) {
                e->checksum = terra_archive_entry_checksum(e, chunk);
                uint8_t b[TERRA_ARCHIVE_ENTRY_SIZE];
                terra_archive_entry_pack(e, b);
                if (fwrite(b, 1, sizeof b, f) != sizeof b) goto io_error;
            } else if (fwrite(chunk, 1, e->size, f) != e->size) {
                goto io_error;
            }
        }
    }
    if (fflush(f) != 0 || fsync(fileno(f)) != 0) goto io_error;
    if (fclose(f) != 0) {
        f = NULL;
        goto io_error;
    }
    f = NULL;
    st = terra_io_commit(tmp, w->path);
    tmp = NULL;
    goto done;
io_error:
    st = terra_fail(TERRA_E_IO, "%s: write failed: %s", w->path, strerror(errno));
fail:
    if (f) fclose(f);
    terra_io_abort(tmp);
    tmp = NULL;
done:
    terra_free(chunk);
    terra_free(spill_off);
    cJSON_free(meta);
    writer_free(w);
    return st;
}
