/* libterra-io: a local-frame archive's metadata and index, per level (see archive_index.h). */
#include "archive_index.h"
#include "archive_rules.h"

#include "terra/qmesh.h"

#include <math.h>
#include <string.h>

static int64_t floor_div(int64_t a, int64_t b) {
    int64_t q = a / b;
    return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

static size_t at(const arc_level *r, int64_t x, int64_t y) {
    return (size_t)(y - r->y0) * (size_t)r->nx + (size_t)(x - r->x0);
}

bool arc_index_present(const arc_index *X, int L, int64_t x, int64_t y) {
    if (L < 0 || L > X->max_level) return false;
    const arc_level *r = &X->lv[L];
    if (x < r->x0 || y < r->y0 || x >= (int64_t)r->x0 + r->nx || y >= (int64_t)r->y0 + r->ny) return false;
    return r->err[at(r, x, y)] >= 0;
}

float arc_index_error(const arc_index *X, terra_tile_key key) {
    const int L = terra_tile_key_level(key);
    const int64_t x = terra_tile_key_x(key), y = terra_tile_key_y(key);
    return arc_index_present(X, L, x, y) ? X->lv[L].err[at(&X->lv[L], x, y)] : -1.0f;
}

void arc_index_range(const arc_index *X, double x0, double z0, double x1, double z1, float *lo, float *hi) {
    x0 = fmin(fmax(x0, X->area[0]), X->area[2]), x1 = fmin(fmax(x1, X->area[0]), X->area[2]);
    z0 = fmin(fmax(z0, X->area[1]), X->area[3]), z1 = fmin(fmax(z1, X->area[1]), X->area[3]);
    const double size = fmax(x1 - x0, z1 - z0);
    int L = 0;
    while (L < X->max_level && ldexp(X->tile0, L) < size) L++;
    const double side = ldexp(X->tile0, L);
    float l = INFINITY, h = -INFINITY;
    const arc_level *r = &X->lv[L];
    /* only the level's tiles: a rectangle over a vast area costs no more than the index */
    const int64_t ya = (int64_t)floor(z0 / side), yb = (int64_t)floor(z1 / side);
    const int64_t xa = (int64_t)floor(x0 / side), xb = (int64_t)floor(x1 / side);
    for (int64_t y = ya > r->y0 ? ya : r->y0; y <= yb && y < (int64_t)r->y0 + r->ny; y++)
        for (int64_t x = xa > r->x0 ? xa : r->x0; x <= xb && x < (int64_t)r->x0 + r->nx; x++) {
            if (!arc_index_present(X, L, x, y)) continue;
            l = fminf(l, r->lo[at(r, x, y)]);
            h = fmaxf(h, r->hi[at(r, x, y)]);
        }
    if (l > h) l = X->glo, h = X->ghi;
    *lo = l - X->margin;
    *hi = h + X->margin;
}

void arc_index_free(arc_index *X) {
    for (int L = 0; L < 32; L++) terra_free(X->lv[L].lo), terra_free(X->lv[L].hi), terra_free(X->lv[L].err);
    memset(X, 0, sizeof *X);
}

terra_status arc_index_build(const terra_archive *a, terra_archive_layout *layout, arc_index *X) {
    memset(X, 0, sizeof *X);
    X->path = terra_archive_path(a);
    /* every rule of the archive as a whole (terra_archive_validate): the levels below hold tiles
     * from 0 to the coarsest, each tile's parent present, the levels laid out whole within the
     * places the validation allows */
    terra_status st = terra_archive_validate(a, NULL, NULL, layout);
    if (st) return st;
    if (layout->frame != TERRA_FRAME_LOCAL)
        return terra_fail(TERRA_E_UNSUPPORTED, "%s: a %s-frame archive (for Cesium clients); terra draws local-frame archives",
                          X->path, terra_frame_name(layout->frame));
    if (layout->max_level >= ARC_DRAWN_LEVELS)
        return terra_fail(TERRA_E_UNSUPPORTED, "%s: %d levels; terra draws %d at most (exported and served, they are "
                          "whole)", X->path, layout->max_level + 1, ARC_DRAWN_LEVELS);
    const terra_archive_info *I = terra_archive_get_info(a);
    X->tile0 = layout->tile_size_m;
    memcpy(X->area, layout->bounds, sizeof X->area);
    X->max_level = layout->max_level;
    for (int L = 0; L <= X->max_level; L++) {
        const terra_archive_level *v = &layout->levels[L];
        arc_level *r = &X->lv[L];
        r->x0 = v->x0, r->y0 = v->y0;
        r->nx = v->x1 - v->x0 + 1, r->ny = v->y1 - v->y0 + 1;
        size_t cnt = (size_t)r->nx * (size_t)r->ny;
        r->lo = terra_alloc(cnt * sizeof(float));
        r->hi = terra_alloc(cnt * sizeof(float));
        r->err = terra_alloc(cnt * sizeof(float));
        if (!r->lo || !r->hi || !r->err) return terra_fail(TERRA_E_NOMEM, "archive: out of memory");
        for (size_t k = 0; k < cnt; k++) r->lo[k] = INFINITY, r->hi[k] = -INFINITY, r->err[k] = -1.0f;
    }
    X->glo = INFINITY, X->ghi = -INFINITY;
    arc_block b = {0};
    for (uint64_t i = 0; i < I->tile_count; i++) {
        terra_archive_entry e;
        if ((st = arc_block_entry(a, &b, i, &e))) return st;
        arc_level *r = &X->lv[terra_tile_key_level(e.key)];
        size_t k = at(r, terra_tile_key_x(e.key), terra_tile_key_y(e.key));
        r->lo[k] = e.min_height, r->hi[k] = e.max_height;
        r->err[k] = e.geometric_error;
        X->glo = fminf(X->glo, e.min_height), X->ghi = fmaxf(X->ghi, e.max_height);
        if (e.raw_size > X->max_raw) X->max_raw = e.raw_size;
    }
    for (int L = 1; L <= X->max_level; L++) { /* each tile's range covers its descendants' */
        arc_level *r = &X->lv[L], *c = &X->lv[L - 1];
        for (int32_t y = 0; y < c->ny; y++)
            for (int32_t x = 0; x < c->nx; x++) {
                size_t ck = (size_t)y * (size_t)c->nx + (size_t)x;
                if (c->err[ck] < 0) continue;
                size_t pk = at(r, floor_div(c->x0 + x, 2), floor_div(c->y0 + y, 2));
                r->lo[pk] = fminf(r->lo[pk], c->lo[ck]);
                r->hi[pk] = fmaxf(r->hi[pk], c->hi[ck]);
            }
    }
    /* A quantized height departs from its sample by half a step of its tile's range; the step is
     * at most the whole range over 32767. */
    X->margin = (X->ghi - X->glo) / (float)TERRA_QMESH_MAX_COORD + 1e-3f;
    return TERRA_OK;
}
