/* The tile archive reader and the format pieces the writer shares. See terra/archive.h. */
#include "terra/archive.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

struct terra_archive {
    int fd;             /* -1 when read through a reader */
    terra_archive_reader reader;
    const uint8_t *map; /* whole file, or NULL when reading with pread or a reader */
    size_t map_size;
    terra_archive_info info;
    char *metadata;
    char path[256];
};

/* ---- byte order ----------------------------------------------------------------------------- */

static uint32_t rd32(const uint8_t *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}
static uint64_t rd64(const uint8_t *p) { return (uint64_t)rd32(p) | ((uint64_t)rd32(p + 4) << 32); }
static void wr32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static void wr64(uint8_t *p, uint64_t v) {
    wr32(p, (uint32_t)v);
    wr32(p + 4, (uint32_t)(v >> 32));
}
static float rdf32(const uint8_t *p) {
    uint32_t b = rd32(p);
    float f;
    memcpy(&f, &b, 4);
    return f;
}
static void wrf32(uint8_t *p, float f) {
    uint32_t b;
    memcpy(&b, &f, 4);
    wr32(p, b);
}

/* ---- CRC-32C, slicing by 8 -------------------------------------------------------------------- */

static uint32_t crc_table[8][256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void crc_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        crc_table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++) crc_table[t][i] = (crc_table[t - 1][i] >> 8) ^ crc_table[0][crc_table[t - 1][i] & 0xff];
}

uint32_t terra_crc32c(uint32_t crc, const void *data, size_t n) {
    pthread_once(&crc_once, crc_init);
    const uint8_t *p = data;
    crc = ~crc;
    while (n >= 8) {
        uint32_t lo = crc ^ rd32(p), hi = rd32(p + 4);
        crc = crc_table[7][lo & 0xff] ^ crc_table[6][(lo >> 8) & 0xff] ^ crc_table[5][(lo >> 16) & 0xff] ^
              crc_table[4][lo >> 24] ^ crc_table[3][hi & 0xff] ^ crc_table[2][(hi >> 8) & 0xff] ^
              crc_table[1][(hi >> 16) & 0xff] ^ crc_table[0][hi >> 24];
        p += 8;
        n -= 8;
    }
    while (n--) crc = (crc >> 8) ^ crc_table[0][(crc ^ *p++) & 0xff];
    return ~crc;
}

/* ---- keys ----------------------------------------------------------------------------------------- */

static uint64_t spread28(uint32_t v) { /* bit i of v to bit 2i */
    uint64_t x = v & 0x0fffffffu;
    x = (x | (x << 16)) & 0x0000FFFF0000FFFFull;
    x = (x | (x << 8)) & 0x00FF00FF00FF00FFull;
    x = (x | (x << 4)) & 0x0F0F0F0F0F0F0F0Full;
    x = (x | (x << 2)) & 0x3333333333333333ull;
    x = (x | (x << 1)) & 0x5555555555555555ull;
    return x;
}
static uint32_t gather28(uint64_t x) {
    x &= 0x5555555555555555ull;
    x = (x | (x >> 1)) & 0x3333333333333333ull;
    x = (x | (x >> 2)) & 0x0F0F0F0F0F0F0F0Full;
    x = (x | (x >> 4)) & 0x00FF00FF00FF00FFull;
    x = (x | (x >> 8)) & 0x0000FFFF0000FFFFull;
    x = (x | (x >> 16)) & 0x00000000FFFFFFFFull;
    return (uint32_t)x & 0x0fffffffu;
}

uint64_t terra_archive_order(terra_tile_key key) {
    /* offset binary so that signed coordinates order as numbers */
    uint32_t ux = ((uint32_t)terra_tile_key_x(key) ^ 0x08000000u) & 0x0fffffffu;
    uint32_t uy = ((uint32_t)terra_tile_key_y(key) ^ 0x08000000u) & 0x0fffffffu;
    return ((uint64_t)terra_tile_key_face(key) << 61) | ((uint64_t)terra_tile_key_level(key) << 56) | spread28(ux) |
           (spread28(uy) << 1);
}

terra_tile_key terra_archive_key_from_order(uint64_t o) {
    int32_t x = (int32_t)gather28(o) - 0x08000000, y = (int32_t)gather28(o >> 1) - 0x08000000;
    return terra_tile_key_make((int)(o >> 61), (int)((o >> 56) & 31), x, y);
}

/* ---- entries and header ---------------------------------------------------------------------------- */

/* Entry: 0 order(8) 8 offset(8) 16 size(4) 20 raw_size(4) 24 compression(1) 25 flags(1)
 *        26 reserved(2) 28 geometric_error(f4) 32 longest_edge(f4) 36 min_h(f4) 40 max_h(f4) 44 crc(4) */
void terra_archive_entry_pack(const terra_archive_entry *e, uint8_t *o) {
    wr64(o, terra_archive_order(e->key));
    wr64(o + 8, e->offset);
    wr32(o + 16, e->size);
    wr32(o + 20, e->raw_size);
    o[24] = e->compression;
    o[25] = e->flags;
    o[26] = o[27] = 0;
    wrf32(o + 28, e->geometric_error);
    wrf32(o + 32, e->longest_edge);
    wrf32(o + 36, e->min_height);
    wrf32(o + 40, e->max_height);
    wr32(o + 44, e->checksum);
}

void terra_archive_entry_unpack(const uint8_t *in, terra_archive_entry *e) {
    e->key = terra_archive_key_from_order(rd64(in));
    e->offset = rd64(in + 8);
    e->size = rd32(in + 16);
    e->raw_size = rd32(in + 20);
    e->compression = in[24];
    e->flags = in[25];
    e->geometric_error = rdf32(in + 28);
    e->longest_edge = rdf32(in + 32);
    e->min_height = rdf32(in + 36);
    e->max_height = rdf32(in + 40);
    e->checksum = rd32(in + 44);
}

uint32_t terra_archive_entry_checksum(const terra_archive_entry *e, const void *payload) {
    uint8_t b[TERRA_ARCHIVE_ENTRY_SIZE];
    terra_archive_entry_pack(e, b);
    uint32_t c = terra_crc32c(0, b, 44);
    /* reserved bytes 26..27 are zero in the packing; the reader checks the stored ones are too */
    return terra_crc32c(c, payload, e->size);
}

/* Header: 0 magic(8) 8 version(4) 12 flags(4) 16 tile_count(8) 24 index_offset(8) 32 data_offset(8)
 *         40 file_size(8) 48 metadata_size(4) 52 entry_size(4) 56 reserved(4) 60 crc(4) */
void terra_archive_header_pack(const terra_archive_info *info, const char *metadata, uint8_t *o) {
    memset(o, 0, TERRA_ARCHIVE_HEADER_SIZE);
    memcpy(o, TERRA_ARCHIVE_MAGIC, 8);
    wr32(o + 8, info->version);
    wr32(o + 12, info->flags);
    wr64(o + 16, info->tile_count);
    wr64(o + 24, info->index_offset);
    wr64(o + 32, info->data_offset);
    wr64(o + 40, info->file_size);
    wr32(o + 48, info->metadata_size);
    wr32(o + 52, TERRA_ARCHIVE_ENTRY_SIZE);
    uint32_t c = terra_crc32c(0, o, 60);
    c = terra_crc32c(c, metadata, info->metadata_size);
    wr32(o + 60, c);
}

const char *terra_compression_name(terra_compression c) {
    switch (c) {
    case TERRA_COMPRESS_NONE: return "none";
    case TERRA_COMPRESS_GZIP: return "gzip";
    case TERRA_COMPRESS_ZSTD: return "zstd";
    case TERRA_COMPRESS_PACKED: return "packed";
    }
    return "unknown";
}

const char *terra_frame_name(terra_frame f) {
    return f == TERRA_FRAME_GEOGRAPHIC ? "geographic" : f == TERRA_FRAME_LOCAL ? "local" : "unknown";
}

const char *terra_archive_tile_name(const terra_archive *a, terra_tile_key key, const int64_t *zxy, char *buf, size_t n) {
    const int l = terra_tile_key_level(key), x = terra_tile_key_x(key), y = terra_tile_key_y(key), f = terra_tile_key_face(key);
    char face[24] = "";
    if (f) snprintf(face, sizeof face, " on face %d", f);
    if (a->info.frame == TERRA_FRAME_GEOGRAPHIC) /* the key is Cesium's z/x/y */
        snprintf(buf, n, "tile %d/%d/%d%s", l, x, y, face);
    else if (zxy)
        snprintf(buf, n, "tile %lld/%lld/%lld (level %d, x %d, y %d%s)", (long long)zxy[0], (long long)zxy[1],
                 (long long)zxy[2], l, x, y, face);
    else
        snprintf(buf, n, "tile (level %d, x %d, y %d%s)", l, x, y, face);
    return buf;
}

/* ---- reading ------------------------------------------------------------------------------------ */

static terra_status read_at(const terra_archive *a, uint64_t off, void *buf, size_t n) {
    if (off > a->info.file_size || n > a->info.file_size - off)
        return terra_fail(TERRA_E_CORRUPT, "%s: read of %zu bytes at %llu is past the end", a->path, n,
                          (unsigned long long)off);
    if (n == 0) return TERRA_OK;
    if (a->map) {
        memcpy(buf, a->map + off, n);
        return TERRA_OK;
    }
    if (a->reader.read) return a->reader.read(a->reader.user, off, buf, n);
    uint8_t *p = buf;
    while (n) {
        ssize_t r = pread(a->fd, p, n, (off_t)off);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0)
            return terra_fail(TERRA_E_IO, "%s: read failed at %llu: %s", a->path, (unsigned long long)off,
                              r ? strerror(errno) : "unexpected end of file");
        p += r;
        n -= (size_t)r;
        off += (uint64_t)r;
    }
    return TERRA_OK;
}

static terra_archive_url_opener url_opener;

void terra_archive_set_url_opener(terra_archive_url_opener opener) { url_opener = opener; }

bool terra_archive_path_is_url(const char *path) {
    return path && (!strncmp(path, "http://", 7) || !strncmp(path, "https://", 8));
}

static terra_status read_header(terra_archive *a, const char *path);

terra_status terra_archive_open(const char *path, const terra_archive_open_desc *desc, terra_archive **out) {
    *out = NULL;
    if (!path) return terra_fail(TERRA_E_INVALID, "archive: no path");
    if (terra_archive_path_is_url(path)) {
        if (!url_opener)
            return terra_fail(TERRA_E_UNSUPPORTED, "%s: this program reads no archives over HTTP (terra built without "
                                                   "TERRA_BUILD_HTTP, or terra_http_register not called)", path);
        terra_archive_reader r = {0};
        terra_status st = url_opener(path, &r);
        return st ? st : terra_archive_open_reader(path, &r, out);
    }
    terra_archive *a = terra_calloc(1, sizeof *a);
    if (!a) return terra_fail(TERRA_E_NOMEM, "archive: out of memory");
    snprintf(a->path, sizeof a->path, "%s", path);
    a->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (a->fd < 0) {
        terra_status st = terra_fail(errno == ENOENT ? TERRA_E_NOT_FOUND : TERRA_E_IO, "%s: cannot open: %s", path,
                                     strerror(errno));
        terra_free(a);
        return st;
    }
    terra_status st = TERRA_OK;
    struct stat sb;
    if (fstat(a->fd, &sb) != 0) {
        st = terra_fail(TERRA_E_IO, "%s: cannot stat: %s", path, strerror(errno));
        goto fail;
    }
    a->info.file_size = (uint64_t)sb.st_size;
    if ((st = read_header(a, path))) goto fail;
    if (!(desc && desc->use_pread) && a->info.file_size > 0) {
        void *m = mmap(NULL, (size_t)a->info.file_size, PROT_READ, MAP_SHARED, a->fd, 0);
        if (m != MAP_FAILED) {
            a->map = m;
            a->map_size = (size_t)a->info.file_size;
            /* Lookups jump around the index: read-ahead on a page fault would pull in pages the
             * binary search never visits. */
            (void)posix_madvise(m, a->map_size, POSIX_MADV_RANDOM);
        }
    }
    *out = a;
    return TERRA_OK;
fail:
    terra_archive_close(a);
    return st;
}

terra_status terra_archive_open_reader(const char *name, const terra_archive_reader *reader, terra_archive **out) {
    *out = NULL;
    terra_archive *a = terra_calloc(1, sizeof *a);
    if (!a) {
        if (reader->close) reader->close(reader->user);
        return terra_fail(TERRA_E_NOMEM, "archive: out of memory");
    }
    snprintf(a->path, sizeof a->path, "%s", name);
    a->fd = -1;
    a->reader = *reader;
    a->info.file_size = reader->size;
    terra_status st = reader->read ? read_header(a, name) : terra_fail(TERRA_E_INVALID, "%s: a reader without read", name);
    if (st) {
        terra_archive_close(a);
        return st;
    }
    *out = a;
    return TERRA_OK;
}

terra_status terra_archive_read_bytes(const terra_archive *a, uint64_t offset, void *buf, size_t n) {
    return read_at(a, offset, buf, n);
}

/* The header and metadata of a->path, its size known: checked and unpacked into a->info. */
static terra_status read_header(terra_archive *a, const char *path) {
    terra_status st = TERRA_OK;
    uint8_t h[TERRA_ARCHIVE_HEADER_SIZE];
    const uint64_t actual = a->info.file_size;
    if (actual >= 12 && (st = read_at(a, 0, h, 12))) return st; /* a failed read says why itself */
    if (actual < 12 || memcmp(h, TERRA_ARCHIVE_MAGIC, 8) != 0)
        return terra_fail(TERRA_E_FORMAT, "%s: not a terra archive (no TERRAARC magic)", path);
    uint32_t version = rd32(h + 8);
    if (version < TERRA_ARCHIVE_VERSION_MIN || version > TERRA_ARCHIVE_VERSION) {
        return terra_fail(TERRA_E_VERSION,
                          "%s: archive format version %u, this terra reads version %u up to version %u; cook (bake) "
                          "the archive again",
                          path, version, TERRA_ARCHIVE_VERSION_MIN, TERRA_ARCHIVE_VERSION);
    }
    if (actual < TERRA_ARCHIVE_HEADER_SIZE)
        return terra_fail(TERRA_E_CORRUPT, "%s: truncated header (%llu bytes)", path, (unsigned long long)actual);
    if ((st = read_at(a, 0, h, sizeof h))) return st;
    terra_archive_info *I = &a->info;
    I->version = version;
    I->flags = rd32(h + 12);
    I->frame = (terra_frame)(I->flags & 3);
    I->tile_count = rd64(h + 16);
    I->index_offset = rd64(h + 24);
    I->data_offset = rd64(h + 32);
    uint64_t file_size = rd64(h + 40);
    I->metadata_size = rd32(h + 48);
    uint32_t entry_size = rd32(h + 52);
    if (file_size != actual) {
        return terra_fail(TERRA_E_CORRUPT, "%s: the header says %llu bytes, the file has %llu (truncated or damaged)",
                          path, (unsigned long long)file_size, (unsigned long long)actual);
    }
    if (I->metadata_size > TERRA_ARCHIVE_MAX_METADATA || I->metadata_size > actual - TERRA_ARCHIVE_HEADER_SIZE)
        return terra_fail(TERRA_E_CORRUPT, "%s: metadata of %u bytes does not fit", path, I->metadata_size);
    a->metadata = terra_alloc((size_t)I->metadata_size + 1);
    if (!a->metadata)
        return terra_fail(TERRA_E_NOMEM, "archive: out of memory");
    if ((st = read_at(a, TERRA_ARCHIVE_HEADER_SIZE, a->metadata, I->metadata_size))) return st;
    a->metadata[I->metadata_size] = 0;
    uint32_t crc = terra_crc32c(terra_crc32c(0, h, 60), a->metadata, I->metadata_size);
    if (crc != rd32(h + 60))
        return terra_fail(TERRA_E_CORRUPT, "%s: header checksum mismatch (damaged header or metadata)", path);
    if ((I->flags & ~3u) || I->frame > 1)
        return terra_fail(TERRA_E_CORRUPT, "%s: header flags 0x%x: bits 0..1 are the frame (0 local, 1 geographic), the others 0",
                          path, I->flags);
    if (entry_size != TERRA_ARCHIVE_ENTRY_SIZE || rd32(h + 56) != 0 ||
        I->index_offset != TERRA_ARCHIVE_HEADER_SIZE + (uint64_t)I->metadata_size ||
        I->tile_count > (actual - I->index_offset) / TERRA_ARCHIVE_ENTRY_SIZE ||
        I->data_offset != I->index_offset + I->tile_count * TERRA_ARCHIVE_ENTRY_SIZE)
        return terra_fail(TERRA_E_CORRUPT, "%s: inconsistent header (entry size, offsets or tile count)", path);
    I->metadata = a->metadata;
    return TERRA_OK;
}

void terra_archive_close(terra_archive *a) {
    if (!a) return;
    if (a->map) munmap((void *)a->map, a->map_size);
    if (a->fd >= 0) close(a->fd);
    if (a->reader.close) a->reader.close(a->reader.user);
    terra_free(a->metadata);
    terra_free(a);
}

const terra_archive_info *terra_archive_get_info(const terra_archive *a) { return &a->info; }

const char *terra_archive_path(const terra_archive *a) { return a->path; }

static terra_status check_entry(const terra_archive *a, const uint8_t *raw, const terra_archive_entry *e, uint64_t i) {
    char what[160] = "";
    /* packed tiles came with version 2 */
    const unsigned newest = a->info.version >= 2 ? TERRA_COMPRESS_PACKED : TERRA_COMPRESS_ZSTD;
    if (e->compression > newest)
        snprintf(what, sizeof what, "compression %u, which this terra does not know", e->compression);
    else if (e->flags || raw[26] || raw[27])
        snprintf(what, sizeof what, "flags 0x%02x and reserved bytes 0x%02x%02x, where the format has 0", e->flags, raw[26],
                 raw[27]);
    else if (e->offset < a->info.data_offset || e->offset > a->info.file_size || e->size > a->info.file_size - e->offset)
        snprintf(what, sizeof what, "offset %llu size %u outside the payloads", (unsigned long long)e->offset, e->size);
    else if (e->raw_size > TERRA_ARCHIVE_MAX_RAW_SIZE)
        snprintf(what, sizeof what, "it states %u raw bytes, over the cap of %u", e->raw_size, TERRA_ARCHIVE_MAX_RAW_SIZE);
    else if (e->compression == TERRA_COMPRESS_NONE && e->raw_size != e->size)
        snprintf(what, sizeof what, "stored uncompressed in %u bytes, it states %u raw bytes", e->size, e->raw_size);
    else if (!isfinite(e->geometric_error) || !isfinite(e->longest_edge) || !isfinite(e->min_height) ||
             !isfinite(e->max_height) || e->min_height > e->max_height)
        snprintf(what, sizeof what, "error %g, longest edge %g, heights %g..%g are not finite or not a range",
                 (double)e->geometric_error, (double)e->longest_edge, (double)e->min_height, (double)e->max_height);
    else if (e->geometric_error < 0 || e->longest_edge < 0)
        snprintf(what, sizeof what, "error %g m, longest edge %g m: negative, where both are lengths",
                 (double)e->geometric_error, (double)e->longest_edge);
    else if (fabsf(e->min_height) > TERRA_ARCHIVE_MAX_HEIGHT || fabsf(e->max_height) > TERRA_ARCHIVE_MAX_HEIGHT)
        snprintf(what, sizeof what, "heights %g..%g m beyond the %g m an archive may state", (double)e->min_height,
                 (double)e->max_height, (double)TERRA_ARCHIVE_MAX_HEIGHT);
    char name[TERRA_ARCHIVE_NAME_SIZE];
    if (what[0])
        return terra_fail(TERRA_E_CORRUPT, "%s: index entry %llu, %s, is damaged: %s", a->path, (unsigned long long)i,
                          terra_archive_tile_name(a, e->key, NULL, name, sizeof name), what);
    return TERRA_OK;
}

static terra_status raw_entry(const terra_archive *a, uint64_t i, uint8_t *b) {
    return read_at(a, a->info.index_offset + i * TERRA_ARCHIVE_ENTRY_SIZE, b, TERRA_ARCHIVE_ENTRY_SIZE);
}

terra_status terra_archive_entry_at(const terra_archive *a, uint64_t i, terra_archive_entry *out) {
    if (i >= a->info.tile_count)
        return terra_fail(TERRA_E_INVALID, "archive: entry %llu of %llu", (unsigned long long)i,
                          (unsigned long long)a->info.tile_count);
    uint8_t b[TERRA_ARCHIVE_ENTRY_SIZE];
    terra_status st = raw_entry(a, i, b);
    return st ? st : terra_archive_entry_from(a, i, b, out);
}

terra_status terra_archive_entry_from(const terra_archive *a, uint64_t i, const uint8_t *raw, terra_archive_entry *out) {
    terra_archive_entry_unpack(raw, out);
    return check_entry(a, raw, out, i);
}

terra_status terra_archive_find(const terra_archive *a, terra_tile_key key, terra_archive_entry *out) {
    uint64_t want = terra_archive_order(key);
    uint64_t lo = 0, hi = a->info.tile_count;
    uint8_t b[TERRA_ARCHIVE_ENTRY_SIZE];
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        uint64_t order;
        if (a->map) {
            order = rd64(a->map + a->info.index_offset + mid * TERRA_ARCHIVE_ENTRY_SIZE);
        } else {
            terra_status st = read_at(a, a->info.index_offset + mid * TERRA_ARCHIVE_ENTRY_SIZE, b, 8);
            if (st) return st;
            order = rd64(b);
        }
        if (order < want) lo = mid + 1;
        else if (order > want) hi = mid;
        else return terra_archive_entry_at(a, mid, out);
    }
    char name[TERRA_ARCHIVE_NAME_SIZE];
    return terra_fail(TERRA_E_NOT_FOUND, "%s: no %s", a->path, terra_archive_tile_name(a, key, NULL, name, sizeof name));
}

static terra_status bad_checksum(const terra_archive *a, const terra_archive_entry *e) {
    char name[TERRA_ARCHIVE_NAME_SIZE];
    return terra_fail(TERRA_E_CORRUPT, "%s: %s is damaged (checksum mismatch)", a->path,
                      terra_archive_tile_name(a, e->key, NULL, name, sizeof name));
}

terra_status terra_archive_read_stored(const terra_archive *a, const terra_archive_entry *e, void *buf, size_t capacity) {
    if (capacity < e->size)
        return terra_fail(TERRA_E_CAPACITY, "archive: tile needs %u bytes, %zu given", e->size, capacity);
    terra_status st = read_at(a, e->offset, buf, e->size);
    if (st) return st;
    if (terra_archive_entry_checksum(e, buf) != e->checksum) return bad_checksum(a, e);
    return TERRA_OK;
}

terra_status terra_archive_view_stored(const terra_archive *a, const terra_archive_entry *e, const uint8_t **data) {
    *data = NULL;
    if (!a->map) return terra_fail(TERRA_E_UNSUPPORTED, "archive: not mapped");
    if (e->offset > a->info.file_size || e->size > a->info.file_size - e->offset)
        return terra_fail(TERRA_E_CORRUPT, "%s: tile payload outside the file", a->path);
    if (terra_archive_entry_checksum(e, a->map + e->offset) != e->checksum) return bad_checksum(a, e);
    *data = a->map + e->offset;
    return TERRA_OK;
}

bool terra_archive_prefetch(const terra_archive *a, const terra_archive_entry *e) {
    if (e->offset > a->info.file_size || e->size > a->info.file_size - e->offset) return false;
    if (a->reader.read) return a->reader.prefetch && a->reader.prefetch(a->reader.user, e->offset, e->size);
    if (a->map) {
        const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), at = (uintptr_t)(a->map + e->offset);
        const uintptr_t start = at & ~(page - 1);
        posix_madvise((void *)start, (size_t)(at + e->size - start), POSIX_MADV_WILLNEED);
    } else {
        posix_fadvise(a->fd, (off_t)e->offset, (off_t)e->size, POSIX_FADV_WILLNEED);
    }
    return true;
}

terra_status terra_archive_verify(const terra_archive *a, uint64_t *bad_out) {
    uint64_t bad = 0, prev = 0;
    size_t cap = 0;
    uint8_t *buf = NULL;
    terra_status first = TERRA_OK;
    char first_msg[512] = "";
    for (uint64_t i = 0; i < a->info.tile_count; i++) {
        terra_archive_entry e;
        uint8_t b[TERRA_ARCHIVE_ENTRY_SIZE];
        terra_status st = raw_entry(a, i, b);
        if (st == TERRA_OK) {
            uint64_t order = rd64(b);
            terra_archive_entry_unpack(b, &e);
            st = check_entry(a, b, &e, i);
            if (st == TERRA_OK && i > 0 && order <= prev)
                st = terra_fail(TERRA_E_CORRUPT, "%s: index entry %llu is out of order", a->path, (unsigned long long)i);
            prev = order;
        }
        if (st == TERRA_OK) {
            if (e.size > cap) {
                uint8_t *nb = terra_realloc(buf, e.size);
                if (!nb) {
                    terra_free(buf);
                    return terra_fail(TERRA_E_NOMEM, "archive verify: out of memory");
                }
                buf = nb;
                cap = e.size;
            }
            st = terra_archive_read_stored(a, &e, buf, cap);
        }
        if (st != TERRA_OK) {
            if (!bad) {
                first = st;
                snprintf(first_msg, sizeof first_msg, "%s", terra_last_error());
            }
            bad++;
        }
    }
    terra_free(buf);
    if (bad_out) *bad_out = bad;
    if (bad)
        return terra_fail(first == TERRA_E_IO ? TERRA_E_IO : TERRA_E_CORRUPT, "%llu damaged tile(s); first: %s",
                          (unsigned long long)bad, first_msg);
    return TERRA_OK;
}
