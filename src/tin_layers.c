/* Two-layer ground: one set of points chosen against both layers, each layer triangulated on it,
 * vertical walls where the upper layer ends abruptly. */
#include "terra/tin.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void terra_tin_layers_free(terra_tin_layers *L) {
    if (!L) return;
    terra_tin_mesh_free(&L->mesh);
    terra_free(L->z_under);
    terra_free(L->walls);
    terra_free(L->soup_xyz);
    terra_free(L->soup_triangles);
    memset(L, 0, sizeof *L);
}

typedef struct edge_rec {
    uint64_t key;               /* min(a,b) << 32 | max(a,b) */
    uint32_t a, b;              /* directed as in its upper triangle */
} edge_rec;

static int cmp_edge(const void *x, const void *y) {
    uint64_t a = ((const edge_rec *)x)->key, b = ((const edge_rec *)y)->key;
    return (a > b) - (a < b);
}

terra_status terra_tin_layers_build(const terra_tin_layers_desc *d, terra_tin_layers *L) {
    if (!d || !L || !d->lower || !d->upper) return terra_fail(TERRA_E_INVALID, "tin layers: NULL argument");
    memset(L, 0, sizeof *L);
    if (!(d->thickness_m >= 0) || !isfinite(d->thickness_m))
        return terra_fail(TERRA_E_INVALID, "tin layers: thickness %g is not >= 0", d->thickness_m);
    const size_t W = (size_t)(d->width > 0 ? d->width : 0), H = (size_t)(d->height > 0 ? d->height : 0);
    for (size_t i = 0; i < W * H; i++) {
        float lo = d->lower[i], up = d->upper[i];
        if (lo == lo && up == up && up < lo)
            return terra_fail(TERRA_E_SOURCE, "tin layers: upper layer below the lower one at sample (%zu, %zu)", i % W,
                              i / W);
    }
    terra_tin_desc td = {0};
    td.width = d->width, td.height = d->height, td.heights = d->lower, td.upper = d->upper, td.max_error = d->max_error;
    terra_status st = terra_tin_build(&td, &L->mesh);
    if (st != TERRA_OK) return st;
    const terra_tin_mesh *m = &L->mesh;
    const terra_tin_level *lv = &m->levels[m->level_count - 1];
    const size_t nv = m->vertex_count;
    edge_rec *e = NULL;
    L->z_under = terra_alloc(nv * sizeof(float) + 1);
    e = terra_alloc(3 * lv->upper_triangle_count * sizeof(edge_rec) + 1);
    if (!L->z_under || !e) goto nomem;
    for (size_t v = 0; v < nv; v++) {
        float up = m->z_upper[v], lo = m->z[v];
        if (up != up) {
            L->z_under[v] = NAN;
            continue;
        }
        float c = d->thickness_m > 0 ? (float)(up - d->thickness_m) : lo;
        L->z_under[v] = c < lo ? lo : c;
    }
    /* Border edges of the upper layer: directed edges whose reverse no upper triangle has. */
    size_t ne = 0;
    for (size_t t = 0; t < lv->upper_triangle_count; t++)
        for (int i = 0; i < 3; i++) {
            uint32_t a = lv->upper_triangles[3 * t + i], b = lv->upper_triangles[3 * t + (i + 1) % 3];
            uint64_t lo = a < b ? a : b, hi = a < b ? b : a;
            e[ne].key = lo << 32 | hi, e[ne].a = a, e[ne].b = b;
            ne++;
        }
    qsort(e, ne, sizeof *e, cmp_edge);
    L->walls = terra_alloc(2 * ne * sizeof(uint32_t) + 1);
    if (!L->walls) goto nomem;
    const int32_t *xy = m->xy;
    const int32_t xm = d->width - 1, ym = d->height - 1;
    for (size_t i = 0; i < ne;) {
        size_t j = i + 1;
        while (j < ne && e[j].key == e[i].key) j++;
        if (j - i == 1) {
            uint32_t a = e[i].a, b = e[i].b;
            int32_t ax = xy[2 * a], ay = xy[2 * a + 1], bx = xy[2 * b], by = xy[2 * b + 1];
            bool on_border = (ax == bx && (ax == 0 || ax == xm)) || (ay == by && (ay == 0 || ay == ym));
            bool flat = m->z_upper[a] == L->z_under[a] && m->z_upper[b] == L->z_under[b];
            if (!on_border && !flat) {
                L->walls[2 * L->wall_count] = a;
                L->walls[2 * L->wall_count + 1] = b;
                L->wall_count++;
            }
        }
        i = j;
    }
    terra_free(e);
    e = NULL;
    /* The soup: lower vertices [0, nv), upper tops [nv, 2nv), undersides [2nv, 3nv). */
    bool underside = d->thickness_m > 0;
    L->soup_vertex_count = 3 * nv;
    L->soup_triangle_count = lv->triangle_count + lv->upper_triangle_count * (underside ? 2 : 1) + 2 * L->wall_count;
    L->soup_xyz = terra_alloc(3 * L->soup_vertex_count * sizeof(double) + 1);
    L->soup_triangles = terra_alloc(3 * L->soup_triangle_count * sizeof(uint32_t) + 1);
    if (!L->soup_xyz || !L->soup_triangles) goto nomem;
    for (size_t v = 0; v < nv; v++) {
        const float zs[3] = {m->z[v], m->z_upper[v], L->z_under[v]};
        for (int k = 0; k < 3; k++) {
            double *p = L->soup_xyz + 3 * (k * nv + v);
            p[0] = xy[2 * v], p[1] = xy[2 * v + 1], p[2] = zs[k] == zs[k] ? zs[k] : 0.0;
        }
    }
    uint32_t *o = L->soup_triangles;
    const uint32_t N = (uint32_t)nv;
    memcpy(o, lv->triangles, 3 * lv->triangle_count * sizeof(uint32_t));
    o += 3 * lv->triangle_count;
    for (size_t t = 0; t < lv->upper_triangle_count; t++, o += 3)
        for (int i = 0; i < 3; i++) o[i] = lv->upper_triangles[3 * t + i] + N;
    if (underside)
        for (size_t t = 0; t < lv->upper_triangle_count; t++, o += 3) {
            o[0] = lv->upper_triangles[3 * t] + 2 * N;
            o[1] = lv->upper_triangles[3 * t + 2] + 2 * N;
            o[2] = lv->upper_triangles[3 * t + 1] + 2 * N;
        }
    /* Each wall faces away from its upper triangle (same winding convention as the surfaces). */
    for (size_t w = 0; w < L->wall_count; w++, o += 6) {
        uint32_t a = L->walls[2 * w], b = L->walls[2 * w + 1];
        uint32_t at = a + N, bt = b + N, ab = a + (underside ? 2 * N : 0), bb = b + (underside ? 2 * N : 0);
        o[0] = bt, o[1] = ab, o[2] = bb;
        o[3] = bt, o[4] = at, o[5] = ab;
    }
    return TERRA_OK;
nomem:
    terra_free(e);
    terra_tin_layers_free(L);
    return terra_fail(TERRA_E_NOMEM, "tin layers: out of memory");
}
