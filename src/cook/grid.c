/* The cook's plane: tile keys, tile rectangles, and the tile mesh's storage (terra/cook.h). */
#include "terra/cook.h"

#include <string.h>

terra_tile_key terra_cook_key(const terra_cook_grid *g, int d, int32_t tx, int32_t ty) {
    int level = g->frame == TERRA_FRAME_GEOGRAPHIC ? g->depth - d : d;
    return terra_tile_key_make(0, level, tx, ty);
}

bool terra_cook_key_tile(const terra_cook_grid *g, terra_tile_key key, int *d, int32_t *tx, int32_t *ty) {
    int level = terra_tile_key_level(key);
    if (terra_tile_key_face(key) != 0 || level > g->depth) return false;
    *d = g->frame == TERRA_FRAME_GEOGRAPHIC ? g->depth - level : level;
    *tx = terra_tile_key_x(key);
    *ty = terra_tile_key_y(key);
    return true;
}

void terra_cook_tile_rect(const terra_cook_grid *g, int d, int32_t tx, int32_t ty, double rect[4]) {
    /* S * 2^d is exact (ldexp), and so is its product with a tile index while it fits 53 bits. */
    double side = ldexp(g->tile_units, d);
    rect[0] = (double)tx * side;
    rect[1] = (double)ty * side;
    rect[2] = (double)(tx + 1) * side;
    rect[3] = (double)(ty + 1) * side;
}

/* The capacity to grow to: at least `need`, and half as much again as now, so that a caller adding
 * a few elements at a time reallocates O(log n) times. */
static uint32_t grown(uint32_t now, uint32_t need) {
    uint64_t cap = (uint64_t)now + now / 2;
    if (cap < need) cap = need;
    if (cap < 16) cap = 16;
    return cap > UINT32_MAX ? UINT32_MAX : (uint32_t)cap;
}

/* Grows one array to `count` elements of `size` bytes when `keep` (or it exists already). */
static bool grow(void **p, size_t count, size_t size, bool keep) {
    if (!keep && !*p) return true;
    void *q = terra_realloc(*p, count * size);
    if (!q) return false;
    *p = q;
    return true;
}

terra_status terra_cook_mesh_reserve(terra_cook_mesh *m, uint32_t vertices, uint32_t triangles, bool with_normals,
                                     bool with_materials) {
    if (vertices > m->vertex_capacity || (with_normals && !m->normal) || (with_materials && !m->material)) {
        uint32_t cap = vertices > m->vertex_capacity ? grown(m->vertex_capacity, vertices) : m->vertex_capacity;
        if (cap < 16) cap = 16;
        if (!grow((void **)&m->xy, cap, 2 * sizeof(double), true) || !grow((void **)&m->z, cap, sizeof(float), true) ||
            !grow((void **)&m->normal, cap, 3 * sizeof(float), with_normals) ||
            !grow((void **)&m->material, cap, sizeof(uint16_t), with_materials))
            return terra_fail(TERRA_E_NOMEM, "cook mesh: out of memory for %u vertices", cap);
        m->vertex_capacity = cap;
    }
    if (triangles > m->triangle_capacity || !m->tri) {
        uint32_t cap = grown(m->triangle_capacity, triangles);
        if (!grow((void **)&m->tri, cap, 3 * sizeof(uint32_t), true))
            return terra_fail(TERRA_E_NOMEM, "cook mesh: out of memory for %u triangles", cap);
        m->triangle_capacity = cap;
    }
    return TERRA_OK;
}

void terra_cook_mesh_free(terra_cook_mesh *m) {
    if (!m) return;
    terra_free(m->xy);
    terra_free(m->z);
    terra_free(m->normal);
    terra_free(m->material);
    terra_free(m->tri);
    memset(m, 0, sizeof *m);
}
