/* One cooked tile as quantized-mesh-1.0 bytes (terra/cook.h, terra_cook_encode).
 *
 * The plane's tile rect maps onto u, v 0..32767: a vertex exactly on the rect's side gets 0 or 32767
 * exactly, so the border vertices two neighbours share decode onto the same line. Each frame's
 * conventions are docs/FORMAT.md's and io/bake.c's: local tiles have scenery metres in the header
 * (plane x = scenery x, plane y = scenery z, height = y) and their triangles turn the way bake's do
 * (counter-clockwise in x, z seen from +y is clockwise in the plane's x, y: each one is reversed);
 * geographic tiles have ECEF metres and normals, u east, v north, the plane's turn kept. */
#include "terra/cook.h"
#include "scan.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define DEG2RAD (3.14159265358979323846 / 180.0)

/* Edge entries sort by (position along the side << 32 | vertex). */
static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* East, north and up unit vectors (ECEF) at a longitude and latitude (radians). */
static void enu(double lon, double lat, double e[3], double n[3], double u[3]) {
    e[0] = -sin(lon), e[1] = cos(lon), e[2] = 0;
    n[0] = -sin(lat) * cos(lon), n[1] = -sin(lat) * sin(lon), n[2] = cos(lat);
    terra_qmesh_geodetic_up(lon, lat, u);
}

terra_status terra_cook_encode(const terra_cook_grid *g, const terra_cook_tile *tile, uint8_t **out, size_t *size) {
    *out = NULL;
    *size = 0;
    const terra_cook_mesh *M = tile->mesh;
    const uint32_t vc = M->vertex_count, tc = M->triangle_count;
    const bool geo = g->frame == TERRA_FRAME_GEOGRAPHIC;
    double rect[4];
    terra_cook_tile_rect(g, tile->depth, tile->tx, tile->ty, rect);

    /* one block: u, v, h, materials (uint16), normals (2 bytes), positions (3 doubles), normal sums
     * (3 doubles), indices, edge keys (a vertex can sit on two sides: a corner) */
    const size_t n16 = 4 * (size_t)vc, nb = 2 * (size_t)vc, npos = 3 * (size_t)vc, nidx = 3 * (size_t)tc;
    const size_t bytes = npos * 2 * sizeof(double) + 2 * (size_t)vc * sizeof(uint64_t) + nidx * sizeof(uint32_t) +
                         2 * (size_t)vc * sizeof(uint32_t) + n16 * sizeof(uint16_t) + nb + 16;
    uint8_t *block = terra_alloc(bytes);
    if (!block) return terra_fail(TERRA_E_NOMEM, "cook encode: out of memory for tile %d/%d/%d", tile->depth, tile->tx, tile->ty);
    double *pos = (double *)block, *nsum = pos + npos;
    uint64_t *ekey = (uint64_t *)(nsum + npos);
    uint32_t *idx = (uint32_t *)(ekey + 2 * (size_t)vc), *edge = idx + nidx;
    uint16_t *u = (uint16_t *)(edge + 2 * (size_t)vc), *v = u + vc, *h = v + vc, *mat = h + vc;
    uint8_t *nrm = (uint8_t *)(mat + vc);

    double lo = tile->min_height, hi = tile->max_height;
    for (uint32_t i = 0; i < vc; i++) lo = fmin(lo, M->z[i]), hi = fmax(hi, M->z[i]);
    /* the header carries them as floats: quantize against those */
    lo = (double)(float)lo;
    hi = (double)(float)hi;
    if (!(hi >= lo)) hi = lo;
    const double w = rect[2] - rect[0], hgt = rect[3] - rect[1];
    for (uint32_t i = 0; i < vc; i++) {
        const double x = M->xy[2 * i], y = M->xy[2 * i + 1];
        u[i] = cook_quant_side(x - rect[0], w);
        v[i] = cook_quant_side(y - rect[1], hgt);
        h[i] = cook_quant(M->z[i], lo, hi);
        const double z = lo + (hi - lo) * h[i] / 32767.0; /* what a reader decodes */
        double *p = pos + 3 * i;
        if (geo) {
            double lon = (g->origin[0] + x * g->unit[0]) * DEG2RAD, lat = (g->origin[1] + y * g->unit[1]) * DEG2RAD;
            terra_qmesh_geodetic_to_ecef(lon, lat, z, p);
        } else {
            p[0] = g->origin[0] + x * g->unit[0];
            p[1] = z;
            p[2] = g->origin[1] + y * g->unit[1];
        }
        mat[i] = M->material ? M->material[i] : 0;
    }
    for (uint32_t t = 0; t < tc; t++) {
        const uint32_t a = M->tri[3 * t], b = M->tri[3 * t + 1], c = M->tri[3 * t + 2];
        idx[3 * t] = a;
        idx[3 * t + 1] = geo ? b : c;
        idx[3 * t + 2] = geo ? c : b;
    }

    /* normals: the mesh's (plane x, plane y, up) turned into the frame's axes, or the area-weighted
     * face normals of the triangles as written (they face up in both frames) */
    memset(nsum, 0, npos * sizeof *nsum);
    if (!M->normal) {
        for (uint32_t t = 0; t < tc; t++) {
            const double *A = pos + 3 * idx[3 * t], *B = pos + 3 * idx[3 * t + 1], *C = pos + 3 * idx[3 * t + 2];
            double e1[3] = {B[0] - A[0], B[1] - A[1], B[2] - A[2]}, e2[3] = {C[0] - A[0], C[1] - A[1], C[2] - A[2]};
            double f[3] = {e1[1] * e2[2] - e1[2] * e2[1], e1[2] * e2[0] - e1[0] * e2[2], e1[0] * e2[1] - e1[1] * e2[0]};
            for (int k = 0; k < 3; k++)
                for (int q = 0; q < 3; q++) nsum[3 * idx[3 * t + k] + q] += f[q];
        }
    }
    for (uint32_t i = 0; i < vc; i++) {
        double n[3], up[3];
        const double x = M->xy[2 * i], y = M->xy[2 * i + 1];
        if (geo) {
            double e[3], nn[3];
            enu((g->origin[0] + x * g->unit[0]) * DEG2RAD, (g->origin[1] + y * g->unit[1]) * DEG2RAD, e, nn, up);
            if (M->normal) {
                const float *m = M->normal + 3 * i;
                for (int k = 0; k < 3; k++) n[k] = m[0] * e[k] + m[1] * nn[k] + m[2] * up[k];
            }
        } else {
            up[0] = 0, up[1] = 1, up[2] = 0;
            if (M->normal) n[0] = M->normal[3 * i], n[1] = M->normal[3 * i + 2], n[2] = M->normal[3 * i + 1];
        }
        if (!M->normal) memcpy(n, nsum + 3 * i, sizeof n);
        double len = sqrt(n[0] * n[0] + n[1] * n[1] + n[2] * n[2]);
        if (!(len > 0) || !isfinite(len)) memcpy(n, up, sizeof n), len = 1; /* a vertex of no area: up */
        for (int k = 0; k < 3; k++) n[k] /= len;
        terra_qmesh_oct_encode(n, nrm + 2 * i);
    }

    /* edges: west and east by increasing v, south and north by increasing u */
    terra_qmesh q;
    memset(&q, 0, sizeof q);
    uint32_t *e_at = edge;
    for (int s = 0; s < 4; s++) {
        uint32_t n = 0;
        for (uint32_t i = 0; i < vc; i++) {
            const double x = M->xy[2 * i], y = M->xy[2 * i + 1];
            bool on = s == TERRA_QMESH_WEST ? x == rect[0] : s == TERRA_QMESH_EAST ? x == rect[2]
                    : s == TERRA_QMESH_SOUTH ? y == rect[1] : y == rect[3];
            if (on) ekey[n++] = (uint64_t)(s == TERRA_QMESH_WEST || s == TERRA_QMESH_EAST ? v[i] : u[i]) << 32 | i;
        }
        qsort(ekey, n, sizeof *ekey, cmp_u64);
        q.edges[s] = e_at;
        q.edge_count[s] = n;
        for (uint32_t k = 0; k < n; k++) *e_at++ = (uint32_t)ekey[k];
    }
    q.vertex_count = vc;
    q.triangle_count = tc;
    q.u = u, q.v = v, q.h = h, q.indices = idx;
    q.normals = nrm;
    q.extensions = TERRA_QMESH_HAS_NORMALS;
    if (M->material) q.materials = mat, q.extensions |= TERRA_QMESH_HAS_MATERIAL;
    if (geo) {
        double c[3];
        terra_qmesh_geodetic_to_ecef((g->origin[0] + 0.5 * (rect[0] + rect[2]) * g->unit[0]) * DEG2RAD,
                                     (g->origin[1] + 0.5 * (rect[1] + rect[3]) * g->unit[1]) * DEG2RAD, 0.5 * (lo + hi), c);
        terra_qmesh_header_geographic(&q.header, pos, vc, c, lo, hi);
    } else {
        terra_qmesh_header_local(&q.header, pos, vc, lo, hi);
    }
    terra_status st = terra_qmesh_reorder(&q, NULL);
    size_t cap = st == TERRA_OK ? terra_qmesh_encoded_size(&q) : 0;
    uint8_t *buf = cap ? terra_alloc(cap) : NULL;
    if (st == TERRA_OK && !buf)
        st = terra_fail(TERRA_E_NOMEM, "cook encode: out of memory for tile %d/%d/%d", tile->depth, tile->tx, tile->ty);
    if (st == TERRA_OK) st = terra_qmesh_encode(&q, buf, cap, size);
    terra_free(block);
    if (st != TERRA_OK) {
        terra_free(buf);
        *size = 0;
        return st;
    }
    *out = buf;
    return TERRA_OK;
}
