/* terra surface: the surface table and the per-tile palette. */
#include "terra/surface.h"

#include <math.h>
#include <stdatomic.h>
#include <string.h>

typedef struct entry {
    terra_surface_look look;
    bool defined;
} entry;

struct terra_surface_table {
    entry e[256];
    uint32_t version;
};

static _Atomic uint32_t next_version;

static char *copy_string(const char *s) {
    if (!s) return NULL;
    size_t n = strlen(s) + 1;
    char *c = terra_alloc(n);
    if (c) memcpy(c, s, n);
    return c;
}

static void free_look(terra_surface_look *l) {
    terra_free((char *)l->albedo);
    terra_free((char *)l->normal);
    terra_free((char *)l->mask);
    memset(l, 0, sizeof *l);
}

terra_status terra_surface_table_create(terra_surface_table **out) {
    *out = terra_calloc(1, sizeof **out);
    return *out ? TERRA_OK : terra_fail(TERRA_E_NOMEM, "surface table: out of memory");
}

void terra_surface_table_destroy(terra_surface_table *t) {
    if (!t) return;
    for (int i = 0; i < 256; i++) free_look(&t->e[i].look);
    terra_free(t);
}

terra_status terra_surface_table_set(terra_surface_table *t, terra_surface id, const terra_surface_look *look) {
    if (id == TERRA_SURFACE_NONE)
        return terra_fail(TERRA_E_INVALID, "surface table: id 0 means \"no surface\" and cannot be described");
    for (int k = 0; k < 3; k++)
        if (!(look->tint[k] >= 0 && look->tint[k] <= 1))
            return terra_fail(TERRA_E_INVALID, "surface table: surface %d: tint components must lie in [0, 1]", id);
    if (look->tiling_m < 0 || !isfinite(look->tiling_m))
        return terra_fail(TERRA_E_INVALID, "surface table: surface %d: tiling_m must be positive", id);
    terra_surface_look l = *look;
    if (l.tiling_m == 0) l.tiling_m = 4;
    l.albedo = copy_string(look->albedo);
    l.normal = copy_string(look->normal);
    l.mask = copy_string(look->mask);
    if ((look->albedo && !l.albedo) || (look->normal && !l.normal) || (look->mask && !l.mask)) {
        free_look(&l);
        return terra_fail(TERRA_E_NOMEM, "surface table: out of memory");
    }
    free_look(&t->e[id].look);
    t->e[id] = (entry){l, true};
    /* versions are unique across tables, so a table freed and another made at the same address
     * never look alike to a renderer that kept the first one's textures */
    t->version = atomic_fetch_add(&next_version, 1) + 1;
    return TERRA_OK;
}

/* The built-in surfaces' tints, and a stable colour of its own for any other id. */
static void default_tint(terra_surface id, float rgb[3]) {
    static const float builtin[6][3] = {{0, 0, 0},          {0.30f, 0.45f, 0.20f}, {0.45f, 0.42f, 0.40f},
                                        {0.92f, 0.93f, 0.96f}, {0.80f, 0.74f, 0.55f}, {0.10f, 0.24f, 0.45f}};
    if (id <= TERRA_SURFACE_WATER) {
        memcpy(rgb, builtin[id], sizeof builtin[id]);
        return;
    }
    uint32_t h = (uint32_t)id * 2654435761u;
    h ^= h >> 15;
    /* a hue from the id, kept away from black and white */
    float hue = (float)(h % 360u) / 60.0f, x = 1.0f - fabsf(fmodf(hue, 2.0f) - 1.0f);
    float r = 0, g = 0, b = 0;
    switch ((int)hue) {
    case 0: r = 1, g = x; break;
    case 1: r = x, g = 1; break;
    case 2: g = 1, b = x; break;
    case 3: g = x, b = 1; break;
    case 4: r = x, b = 1; break;
    default: r = 1, b = x; break;
    }
    rgb[0] = 0.2f + 0.6f * r, rgb[1] = 0.2f + 0.6f * g, rgb[2] = 0.2f + 0.6f * b;
}

uint32_t terra_surface_table_version(const terra_surface_table *t) { return t ? t->version : 0; }

bool terra_surface_table_get(const terra_surface_table *t, terra_surface id, terra_surface_look *out) {
    if (t && t->e[id].defined) {
        *out = t->e[id].look;
        return true;
    }
    memset(out, 0, sizeof *out);
    out->tiling_m = 4;
    if (id != TERRA_SURFACE_NONE) default_tint(id, out->tint);
    return false;
}

int terra_surface_palette(const terra_surface *ids, size_t n, size_t stride, terra_tile_key tile,
                          terra_surface out[TERRA_TILE_SURFACES], int *kept) {
    uint32_t count[256] = {0};
    if (stride == 0) stride = 1;
    for (size_t k = 0; k < n; k++) count[ids[k * stride]]++;
    int distinct = 0, m = 0;
    for (int id = 0; id < 256; id++) {
        if (!count[id]) continue;
        distinct++;
        /* insert by count (descending), ties by id (ascending), keeping the top few */
        int pos = m < TERRA_TILE_SURFACES ? m : TERRA_TILE_SURFACES;
        while (pos > 0 && count[out[pos - 1]] < count[id]) pos--;
        if (pos >= TERRA_TILE_SURFACES) continue;
        int last = m < TERRA_TILE_SURFACES ? m : TERRA_TILE_SURFACES - 1;
        for (int q = last; q > pos; q--) out[q] = out[q - 1];
        out[pos] = (terra_surface)id;
        if (m < TERRA_TILE_SURFACES) m++;
    }
    if (distinct > TERRA_TILE_SURFACES)
        terra_log(TERRA_LOG_WARN, "tile (level %d, %d, %d) names %d surfaces; it draws the %d covering most of it",
                  terra_tile_key_level(tile), terra_tile_key_x(tile), terra_tile_key_y(tile), distinct,
                  TERRA_TILE_SURFACES);
    *kept = m;
    return distinct;
}
