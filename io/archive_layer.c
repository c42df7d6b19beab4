/* Cesium's view of a terra archive: z/x/y (TMS) keys and layer.json. See terra/archive_io.h. */
#include "terra/archive_io.h"
#include "archive_rules.h"
#include "json.h"

#include <stdlib.h>
#include <string.h>

/* The first index entry in [lo, hi) whose order is >= `want` (the index is sorted by
 * terra_archive_order). */
static terra_status lower_bound_in(const terra_archive *a, uint64_t lo, uint64_t hi, uint64_t want, uint64_t *out) {
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        terra_archive_entry e;
        terra_status st = terra_archive_entry_at(a, mid, &e);
        if (st) return st;
        if (terra_archive_order(e.key) < want) lo = mid + 1;
        else hi = mid;
    }
    *out = lo;
    return TERRA_OK;
}

static terra_status lower_bound(const terra_archive *a, uint64_t want, uint64_t *out) {
    return lower_bound_in(a, 0, terra_archive_get_info(a)->tile_count, want, out);
}

/* Bits 0, 2, 4, ... of v packed into bits 0, 1, 2, ... (28 of them). */
static uint32_t gather28(uint64_t v) {
    uint32_t r = 0;
    for (int i = 0; i < 28; i++) r |= (uint32_t)((v >> (2 * i)) & 1) << i;
    return r;
}

/* The smallest x (axis 0) or y (axis 1), as offset binary, among the entries [lo, hi) of one face and
 * level: the Morton order makes each quadtree node a run of the index, so the search descends into
 * the children on the low side of the axis first and stops once a node's smallest possible value is
 * found; a few binary searches per level instead of reading every entry. The run is known non-empty
 * and holds the codes of the node `prefix` (its low 2h bits free). *budget bounds the nodes visited
 * (an index out of order, or an odd spread of tiles, falls back to a scan). */
typedef struct axis_search {
    const terra_archive *a;
    uint64_t base; /* face and level bits */
    int axis;
    int budget;
    terra_status st;
} axis_search;

static uint32_t node_min(axis_search *q, uint64_t lo, uint64_t hi, uint64_t prefix, int h) {
    if (q->st || --q->budget < 0) return UINT32_MAX;
    if (h == 0 || hi - lo == 1) {
        terra_archive_entry e;
        if ((q->st = terra_archive_entry_at(q->a, lo, &e))) return UINT32_MAX;
        return gather28((terra_archive_order(e.key) & ((UINT64_C(1) << 56) - 1)) >> q->axis);
    }
    uint32_t floor = gather28((prefix << 2 * h) >> q->axis);
    uint64_t b[5] = {lo, 0, 0, 0, hi};
    for (int k = 1; k < 4; k++)
        if ((q->st = lower_bound_in(q->a, b[k - 1], hi, q->base | (prefix * 4 + (uint64_t)k) << 2 * (h - 1), &b[k])))
            return UINT32_MAX;
    /* child k holds x bit (k & 1) and y bit (k >> 1): the axis's low children first */
    static const int order[2][4] = {{0, 2, 1, 3}, {0, 1, 2, 3}};
    uint32_t best = UINT32_MAX;
    for (int j = 0; j < 4 && best != floor; j++) {
        int k = order[q->axis][j];
        uint32_t child_floor = floor | (uint32_t)((k >> q->axis) & 1) << (h - 1);
        if (b[k] == b[k + 1] || child_floor >= best) continue;
        uint32_t v = node_min(q, b[k], b[k + 1], prefix * 4 + (uint64_t)k, h - 1);
        if (v < best) best = v;
    }
    return best;
}

/* The smallest x and y of the tiles in index entries [lo, hi) (one face, one level; non-empty). */
static terra_status smallest_xy(const terra_archive *a, uint64_t lo, uint64_t hi, uint64_t base, int32_t *x,
                                int32_t *y) {
    uint32_t v[2];
    for (int axis = 0; axis < 2; axis++) {
        axis_search q = {a, base, axis, 4096, TERRA_OK};
        v[axis] = node_min(&q, lo, hi, 0, 28);
        if (q.st) return q.st;
        if (q.budget < 0) { /* a scan */
            v[0] = v[1] = UINT32_MAX;
            for (uint64_t i = lo; i < hi; i++) {
                terra_archive_entry e;
                terra_status st = terra_archive_entry_at(a, i, &e);
                if (st) return st;
                uint64_t code = terra_archive_order(e.key) & ((UINT64_C(1) << 56) - 1);
                if (gather28(code) < v[0]) v[0] = gather28(code);
                if (gather28(code >> 1) < v[1]) v[1] = gather28(code >> 1);
            }
            break;
        }
    }
    *x = (int32_t)v[0] - 0x08000000; /* offset binary back to signed */
    *y = (int32_t)v[1] - 0x08000000;
    return TERRA_OK;
}

/* The levels and the coarsest level's smallest tile without reading the whole index: entries sort by
 * face, then level, so each face's finest and coarsest levels are at the ends of its run, and the
 * coarsest level's smallest x and y come from a search of its Morton order (a full pass cost ~0.5 s
 * per million tiles through pread, which `terra serve` pays again on every reload). */
terra_status terra_archive_tms_map(const terra_archive *a, terra_tms_map *m) {
    const terra_archive_info *I = terra_archive_get_info(a);
    memset(m, 0, sizeof *m);
    m->frame = I->frame;
    m->min_level = 32;
    m->max_level = -1;
    uint64_t start[9];
    terra_status st = TERRA_OK;
    for (int f = 0; f < 8 && st == TERRA_OK; f++) st = lower_bound(a, (uint64_t)f << 61, &start[f]);
    start[8] = I->tile_count;
    for (int f = 0; f < 8 && st == TERRA_OK; f++) {
        if (start[f] >= start[f + 1]) continue;
        terra_archive_entry first, last;
        if ((st = terra_archive_entry_at(a, start[f], &first)) ||
            (st = terra_archive_entry_at(a, start[f + 1] - 1, &last)))
            break;
        if (terra_tile_key_level(first.key) < m->min_level) m->min_level = terra_tile_key_level(first.key);
        if (terra_tile_key_level(last.key) > m->max_level) m->max_level = terra_tile_key_level(last.key);
    }
    if (st) return st;
    int32_t x0 = INT32_MAX, y0 = INT32_MAX;
    for (int f = 0; f < 8 && m->max_level >= 0; f++) {
        uint64_t b = (uint64_t)f << 61, lo, hi = start[f + 1];
        if ((st = lower_bound(a, b | (uint64_t)m->max_level << 56, &lo))) return st;
        if (m->max_level < TERRA_TILE_MAX_LEVEL && (st = lower_bound(a, b | (uint64_t)(m->max_level + 1) << 56, &hi)))
            return st;
        if (lo >= hi) continue;
        int32_t x, y;
        if ((st = smallest_xy(a, lo, hi, b | (uint64_t)m->max_level << 56, &x, &y))) return st;
        if (x < x0) x0 = x;
        if (y < y0) y0 = y;
    }
    if (m->max_level < 0) m->min_level = m->max_level = 0, x0 = y0 = 0;
    m->x0 = x0;
    m->y0 = y0;
    return TERRA_OK;
}

bool terra_tms_from_key(const terra_tms_map *m, terra_tile_key key, int *z, int64_t *x, int64_t *y) {
    int l = terra_tile_key_level(key);
    if (terra_tile_key_face(key) != 0) return false;
    if (m->frame == TERRA_FRAME_GEOGRAPHIC) {
        *z = l;
        *x = terra_tile_key_x(key);
        *y = terra_tile_key_y(key);
        return *x >= 0 && *y >= 0;
    }
    if (l > m->max_level) return false;
    int d = m->max_level - l;
    *z = d;
    *x = (int64_t)terra_tile_key_x(key) - (int64_t)m->x0 * ((int64_t)1 << d);
    *y = (int64_t)terra_tile_key_y(key) - (int64_t)m->y0 * ((int64_t)1 << d);
    return *x >= 0 && *y >= 0;
}

bool terra_tms_to_key(const terra_tms_map *m, int z, int64_t x, int64_t y, terra_tile_key *key) {
    if (z < 0 || z > TERRA_TILE_MAX_LEVEL || x < 0 || y < 0) return false;
    int level;
    if (m->frame == TERRA_FRAME_GEOGRAPHIC) {
        level = z;
    } else {
        if (z > m->max_level) return false;
        level = m->max_level - z;
        x += (int64_t)m->x0 * ((int64_t)1 << z);
        y += (int64_t)m->y0 * ((int64_t)1 << z);
    }
    if (x > TERRA_TILE_COORD_MAX || y > TERRA_TILE_COORD_MAX || x < TERRA_TILE_COORD_MIN || y < TERRA_TILE_COORD_MIN)
        return false;
    *key = terra_tile_key_make(0, level, (int32_t)x, (int32_t)y);
    return true;
}

typedef struct xy {
    int64_t x, y;
} xy;

static int cmp_yx(const void *a, const void *b) {
    const xy *p = a, *q = b;
    if (p->y != q->y) return (p->y > q->y) - (p->y < q->y);
    return (p->x > q->x) - (p->x < q->x);
}

/* A growing text buffer; `failed` once an allocation fails (the text is then dropped). */
typedef struct text {
    char *s;
    size_t n, cap;
    bool failed;
} text;

static void text_add(text *t, const char *s, size_t n) {
    if (t->failed) return;
    if (t->cap - t->n < n + 1) {
        size_t nc = t->cap ? t->cap : 4096;
        while (nc - t->n < n + 1) nc *= 2;
        char *ns = terra_realloc(t->s, nc);
        if (!ns) {
            t->failed = true;
            return;
        }
        t->s = ns;
        t->cap = nc;
    }
    memcpy(t->s + t->n, s, n);
    t->n += n;
    t->s[t->n] = 0;
}

static void text_str(text *t, const char *s) { text_add(t, s, strlen(s)); }

static void text_int(text *t, int64_t v) {
    char b[24], *p = b + sizeof b;
    uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
    do *--p = (char)('0' + u % 10);
    while (u /= 10);
    if (v < 0) *--p = '-';
    text_add(t, p, (size_t)(b + sizeof b - p));
}

typedef struct rect {
    int64_t x0, x1, y0, y1;
} rect;

/* Appends the JSON array of rectangles covering exactly the tiles of one zoom: runs along each row,
 * merged with the same run on the row below when it continues one. Runs of a row and the rectangles
 * that reached the row above are both in x order, so one merge walk pairs them: linear after the
 * sort (the earlier search of every open rectangle for every run was quadratic: 160 k scattered
 * tiles took 16 s). */
static void ranges_for(text *out, xy *t, size_t n) {
    text_add(out, "[", 1);
    if (n == 0) { /* qsort(NULL, 0) is undefined */
        text_add(out, "]", 1);
        return;
    }
    qsort(t, n, sizeof *t, cmp_yx);
    rect *r = terra_alloc(n * sizeof *r);
    size_t *block = terra_alloc(2 * n * sizeof *block), *above = block, *row = block + (block ? n : 0);
    if (!r || !block) {
        out->failed = true;
        terra_free(r);
        terra_free(block);
        return;
    }
    size_t nr = 0, n_above = 0, n_row = 0;
    int64_t y_above = 0;
    for (size_t i = 0; i < n;) {
        int64_t y = t[i].y;
        size_t k = 0; /* walks the rectangles that reached row y - 1 */
        bool continues = n_above && y_above == y - 1;
        n_row = 0;
        while (i < n && t[i].y == y) {
            size_t j = i;
            while (j + 1 < n && t[j + 1].y == y && t[j + 1].x <= t[j].x + 1) j++; /* <=: duplicates */
            int64_t x0 = t[i].x, x1 = t[j].x;
            while (continues && k < n_above && r[above[k]].x0 < x0) k++;
            if (continues && k < n_above && r[above[k]].x0 == x0 && r[above[k]].x1 == x1) {
                r[above[k]].y1 = y;
                row[n_row++] = above[k++];
            } else {
                r[nr] = (rect){x0, x1, y, y};
                row[n_row++] = nr++;
            }
            i = j + 1;
        }
        size_t *swap = above;
        above = row;
        row = swap;
        n_above = n_row;
        y_above = y;
    }
    for (size_t k = 0; k < nr; k++) {
        text_str(out, k ? ",{\"startX\":" : "{\"startX\":");
        text_int(out, r[k].x0);
        text_str(out, ",\"startY\":");
        text_int(out, r[k].y0);
        text_str(out, ",\"endX\":");
        text_int(out, r[k].x1);
        text_str(out, ",\"endY\":");
        text_int(out, r[k].y1);
        text_add(out, "}", 1);
    }
    text_add(out, "]", 1);
    terra_free(r);
    terra_free(block);
}

static uint32_t metadata_extensions(const terra_archive *a) {
    uint32_t bits = 0;
    cJSON *j = terra_json_parse(terra_archive_get_info(a)->metadata);
    const cJSON *x;
    cJSON_ArrayForEach(x, cJSON_GetObjectItem(j, "extensions")) {
        if (cJSON_IsString(x)) bits |= arc_extension_bit(x->valuestring);
    }
    cJSON_Delete(j);
    return bits;
}

const char *terra_archive_content_type(const terra_archive *a) {
    uint32_t b = metadata_extensions(a);
    bool n = b & TERRA_QMESH_HAS_NORMALS, w = b & TERRA_QMESH_HAS_WATER_MASK;
    if (n && w) return "application/vnd.quantized-mesh;extensions=octvertexnormals-watermask";
    if (n) return "application/vnd.quantized-mesh;extensions=octvertexnormals";
    if (w) return "application/vnd.quantized-mesh;extensions=watermask";
    return "application/vnd.quantized-mesh";
}

terra_status terra_archive_layer_json(const terra_archive *a, const terra_tms_map *m, char **out) {
    *out = NULL;
    const terra_archive_info *I = terra_archive_get_info(a);
    cJSON *meta = terra_json_parse(I->metadata);
    int zmax = m->frame == TERRA_FRAME_GEOGRAPHIC ? m->max_level : m->max_level - m->min_level;
    if (zmax < 0) zmax = 0;
    xy **per = calloc((size_t)zmax + 1, sizeof *per);
    size_t *cnt = calloc((size_t)zmax + 1, sizeof *cnt), *cap = calloc((size_t)zmax + 1, sizeof *cap);
    terra_status st = per && cnt && cap ? TERRA_OK : terra_fail(TERRA_E_NOMEM, "layer.json: out of memory");
    arc_block blk = {0};
    for (uint64_t i = 0; st == TERRA_OK && i < I->tile_count; i++) {
        terra_archive_entry e;
        st = arc_block_entry(a, &blk, i, &e);
        if (st) break;
        int z;
        int64_t x, y;
        if (!terra_tms_from_key(m, e.key, &z, &x, &y) || z > zmax) continue;
        if (cnt[z] == cap[z]) {
            size_t nc = cap[z] ? cap[z] * 2 : 64;
            xy *np = realloc(per[z], nc * sizeof *np);
            if (!np) {
                st = terra_fail(TERRA_E_NOMEM, "layer.json: out of memory");
                break;
            }
            per[z] = np;
            cap[z] = nc;
        }
        per[z][cnt[z]++] = (xy){x, y};
    }
    if (st == TERRA_OK) {
        cJSON *root = cJSON_CreateObject();
        const cJSON *name = cJSON_GetObjectItem(meta, "name");
        cJSON_AddStringToObject(root, "tilejson", "2.1.0");
        cJSON_AddStringToObject(root, "name", cJSON_IsString(name) ? name->valuestring : "terra");
        cJSON_AddStringToObject(root, "description", "baked by terra");
        cJSON_AddStringToObject(root, "version", "1.0.0");
        cJSON_AddStringToObject(root, "format", "quantized-mesh-1.0");
        cJSON_AddStringToObject(root, "attribution", "");
        cJSON_AddStringToObject(root, "scheme", "tms");
        cJSON *tiles = cJSON_AddArrayToObject(root, "tiles");
        cJSON_AddItemToArray(tiles, cJSON_CreateString("{z}/{x}/{y}.terrain?v={version}"));
        if (m->frame == TERRA_FRAME_GEOGRAPHIC) {
            cJSON_AddStringToObject(root, "projection", "EPSG:4326");
        } else {
            /* local archives: scenery metres; not placed on the globe (docs/FORMAT.md) */
            cJSON_AddStringToObject(root, "projection", "EPSG:4326");
            cJSON_AddStringToObject(root, "terra_frame", "local");
        }
        cJSON *b = cJSON_CreateArray();
        const cJSON *mb = cJSON_GetObjectItem(meta, "bounds");
        if (m->frame == TERRA_FRAME_GEOGRAPHIC && cJSON_GetArraySize(mb) == 4) {
            for (int i = 0; i < 4; i++) cJSON_AddItemToArray(b, cJSON_CreateNumber(cJSON_GetArrayItem(mb, i)->valuedouble));
        } else {
            double w[4] = {-180, -90, 180, 90};
            for (int i = 0; i < 4; i++) cJSON_AddItemToArray(b, cJSON_CreateNumber(w[i]));
        }
        cJSON_AddItemToObject(root, "bounds", b);
        cJSON_AddNumberToObject(root, "minzoom", 0);
        cJSON_AddNumberToObject(root, "maxzoom", zmax);
        uint32_t ext = metadata_extensions(a);
        cJSON *ex = cJSON_AddArrayToObject(root, "extensions");
        if (ext & TERRA_QMESH_HAS_NORMALS) cJSON_AddItemToArray(ex, cJSON_CreateString("octvertexnormals"));
        if (ext & TERRA_QMESH_HAS_WATER_MASK) cJSON_AddItemToArray(ex, cJSON_CreateString("watermask"));
        /* "metadata" deliberately left out: see the header comment */
        /* "available" as raw text: a million scattered tiles would otherwise be two million cJSON
         * nodes and number conversions */
        text av = {0};
        text_add(&av, "[", 1);
        for (int z = 0; z <= zmax; z++) {
            if (z) text_add(&av, ",", 1);
            ranges_for(&av, per[z], cnt[z]);
        }
        text_add(&av, "]", 1);
        if (av.failed || !cJSON_AddItemToObject(root, "available", cJSON_CreateRaw(av.s))) {
            cJSON_Delete(root);
            root = NULL;
        }
        terra_free(av.s);
        char *json = root ? cJSON_PrintUnformatted(root) : NULL;
        cJSON_Delete(root);
        if (!json) st = terra_fail(TERRA_E_NOMEM, "layer.json: out of memory");
        else {
            size_t n = strlen(json) + 1;
            *out = terra_alloc(n);
            if (*out) memcpy(*out, json, n);
            else st = terra_fail(TERRA_E_NOMEM, "layer.json: out of memory");
            cJSON_free(json);
        }
    }
    for (int z = 0; per && z <= zmax; z++) free(per[z]);
    free(per);
    free(cnt);
    free(cap);
    cJSON_Delete(meta);
    return st;
}
