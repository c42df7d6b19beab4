/* Cesium's view of a terra archive: z/x/y (TMS) keys and layer.json. See terra/archive_io.h. */
#include "terra/archive_io.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

terra_status terra_archive_tms_map(const terra_archive *a, terra_tms_map *m) {
    const terra_archive_info *I = terra_archive_get_info(a);
    memset(m, 0, sizeof *m);
    m->frame = I->frame;
    m->min_level = 32;
    m->max_level = -1;
    int32_t x0 = INT32_MAX, y0 = INT32_MAX;
    for (uint64_t i = 0; i < I->tile_count; i++) {
        terra_archive_entry e;
        terra_status st = terra_archive_entry_at(a, i, &e);
        if (st) return st;
        int l = terra_tile_key_level(e.key);
        if (l < m->min_level) m->min_level = l;
        if (l > m->max_level) {
            m->max_level = l;
            x0 = y0 = INT32_MAX;
        }
        if (l == m->max_level) {
            if (terra_tile_key_x(e.key) < x0) x0 = terra_tile_key_x(e.key);
            if (terra_tile_key_y(e.key) < y0) y0 = terra_tile_key_y(e.key);
        }
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

/* Rectangles covering exactly the tiles of one zoom: runs along each row, merged with the same
 * run on the row below when it continues one. */
static cJSON *ranges_for(xy *t, size_t n) {
    qsort(t, n, sizeof *t, cmp_yx);
    typedef struct rect {
        int64_t x0, x1, y0, y1;
        bool open;
    } rect;
    rect *r = malloc((n ? n : 1) * sizeof *r);
    size_t nr = 0;
    cJSON *arr = cJSON_CreateArray();
    if (!r) return arr;
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j + 1 < n && t[j + 1].y == t[i].y && t[j + 1].x == t[j].x + 1) j++;
        int64_t x0 = t[i].x, x1 = t[j].x, y = t[i].y;
        /* extend a rectangle that ended on the row above with the same columns */
        bool merged = false;
        for (size_t k = 0; k < nr; k++)
            if (r[k].open && r[k].x0 == x0 && r[k].x1 == x1 && r[k].y1 == y - 1) {
                r[k].y1 = y;
                merged = true;
                break;
            }
        if (!merged) r[nr++] = (rect){x0, x1, y, y, true};
        i = j + 1;
        if (i < n && t[i].y != y)
            for (size_t k = 0; k < nr; k++)
                if (r[k].y1 < t[i].y - 1) r[k].open = false;
    }
    for (size_t k = 0; k < nr; k++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "startX", (double)r[k].x0);
        cJSON_AddNumberToObject(o, "startY", (double)r[k].y0);
        cJSON_AddNumberToObject(o, "endX", (double)r[k].x1);
        cJSON_AddNumberToObject(o, "endY", (double)r[k].y1);
        cJSON_AddItemToArray(arr, o);
    }
    free(r);
    return arr;
}

static uint32_t metadata_extensions(const terra_archive *a) {
    uint32_t bits = 0;
    cJSON *j = cJSON_Parse(terra_archive_get_info(a)->metadata);
    const cJSON *x;
    cJSON_ArrayForEach(x, cJSON_GetObjectItem(j, "extensions")) {
        if (!cJSON_IsString(x)) continue;
        if (!strcmp(x->valuestring, "octvertexnormals")) bits |= TERRA_QMESH_HAS_NORMALS;
        if (!strcmp(x->valuestring, "watermask")) bits |= TERRA_QMESH_HAS_WATER_MASK;
        if (!strcmp(x->valuestring, "metadata")) bits |= TERRA_QMESH_HAS_METADATA;
        if (!strcmp(x->valuestring, "terra-material")) bits |= TERRA_QMESH_HAS_MATERIAL;
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
    cJSON *meta = cJSON_Parse(I->metadata);
    int zmax = m->frame == TERRA_FRAME_GEOGRAPHIC ? m->max_level : m->max_level - m->min_level;
    if (zmax < 0) zmax = 0;
    xy **per = calloc((size_t)zmax + 1, sizeof *per);
    size_t *cnt = calloc((size_t)zmax + 1, sizeof *cnt), *cap = calloc((size_t)zmax + 1, sizeof *cap);
    terra_status st = per && cnt && cap ? TERRA_OK : terra_fail(TERRA_E_NOMEM, "layer.json: out of memory");
    for (uint64_t i = 0; st == TERRA_OK && i < I->tile_count; i++) {
        terra_archive_entry e;
        st = terra_archive_entry_at(a, i, &e);
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
        cJSON *av = cJSON_AddArrayToObject(root, "available");
        for (int z = 0; z <= zmax; z++) cJSON_AddItemToArray(av, ranges_for(per[z], cnt[z]));
        char *text = cJSON_PrintUnformatted(root);
        cJSON_Delete(root);
        if (!text) st = terra_fail(TERRA_E_NOMEM, "layer.json: out of memory");
        else {
            size_t n = strlen(text) + 1;
            *out = terra_alloc(n);
            if (*out) memcpy(*out, text, n);
            else st = terra_fail(TERRA_E_NOMEM, "layer.json: out of memory");
            cJSON_free(text);
        }
    }
    for (int z = 0; per && z <= zmax; z++) free(per[z]);
    free(per);
    free(cnt);
    free(cap);
    cJSON_Delete(meta);
    return st;
}
