/* bake: tiles of the default world in both frames: geometry where the header says it is, borders
 * shared exactly by neighbours, true geometric error, normals, surfaces; a whole bake into an
 * archive that reads back. */
#include "check.h"
#include "terra/bake.h"

#include <math.h>
#include <string.h>
#include <unistd.h>

#define DEG2RAD (3.14159265358979323846 / 180.0)

static terra_source *world(void) {
    terra_world_desc wd = {.seed = 5};
    terra_source *s = NULL;
    CHECK(terra_world_create(&wd, &s) == TERRA_OK, "world: %s", terra_last_error());
    return s;
}

static double height_m(const terra_qmesh *m, uint32_t i) {
    return m->header.min_height + (m->header.max_height - m->header.min_height) * m->h[i] / 32767.0;
}

/* Border heights (in metres) along one edge, keyed by the coordinate along it. */
static void border(const terra_qmesh *m, int edge, double *out, int n) {
    for (uint32_t k = 0; k < m->edge_count[edge]; k++) {
        uint32_t i = m->edges[edge][k];
        int along = (int)lround((edge == TERRA_QMESH_WEST || edge == TERRA_QMESH_EAST ? m->v[i] : m->u[i]) * (double)n / 32767.0);
        out[along] = height_m(m, i);
    }
}

static void test_local_tiles(void) {
    terra_source *src = world();
    if (!src) return;
    terra_bake_desc in = {0}, d;
    in.cells = 16;
    in.levels = 4;
    CHECK(terra_bake_desc_resolve(&in, &d) == TERRA_OK, "resolve");
    terra_bake_tile a, b;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    for (int level = 0; level <= 3; level++) {
        terra_tile_key ka = terra_tile_key_make(0, level, 0, 0), kb = terra_tile_key_make(0, level, 1, 0);
        CHECK(terra_bake_tile_build(src, &d, ka, true, &a) == TERRA_OK, "build: %s", terra_last_error());
        CHECK(terra_bake_tile_build(src, &d, kb, true, &b) == TERRA_OK, "build");
        CHECK(a.mesh.vertex_count == 17 * 17 && a.mesh.triangle_count == 2 * 16 * 16, "counts");
        for (int e = 0; e < 4; e++) CHECK(a.mesh.edge_count[e] == 17, "edge %d", e);
        CHECK(a.mesh.normals && a.mesh.materials, "normals and surfaces");
        /* east border of a == west border of b, to the float */
        double ea[17], wb[17];
        border(&a.mesh, TERRA_QMESH_EAST, ea, 16);
        border(&b.mesh, TERRA_QMESH_WEST, wb, 16);
        double worst = 0;
        for (int k = 0; k <= 16; k++) worst = fmax(worst, fabs(ea[k] - wb[k]));
        double step = fmax(a.mesh.header.max_height - a.mesh.header.min_height, b.mesh.header.max_height - b.mesh.header.min_height) / 32767.0;
        CHECK(worst <= step, "level %d: borders differ by %g m (quantum %g)", level, worst, step);
        /* error: none at the finest level, some above; sphere holds every vertex */
        if (level == 0) CHECK(a.info.geometric_error == 0, "finest level error %g", a.info.geometric_error);
        else CHECK(a.info.geometric_error > 0, "level %d error 0", level);
        double side = 64.0 * ldexp(1.0, level);
        CHECK(fabs(a.info.longest_edge - side / 16 * sqrt(2)) < side / 16 * 2, "longest edge %g", a.info.longest_edge);
        const terra_qmesh_header *H = &a.mesh.header;
        for (uint32_t i = 0; i < a.mesh.vertex_count; i++) {
            double p[3] = {a.mesh.u[i] / 32767.0 * side, height_m(&a.mesh, i), a.mesh.v[i] / 32767.0 * side};
            double dx = p[0] - H->sphere_center[0], dy = p[1] - H->sphere_center[1], dz = p[2] - H->sphere_center[2];
            CHECK(sqrt(dx * dx + dy * dy + dz * dz) <= H->sphere_radius * 1.0001 + 0.01, "vertex outside the sphere");
        }
        CHECK(a.info.min_height == H->min_height && a.info.max_height == H->max_height, "index heights");
    }
    /* brute-force check of the error of a level-1 tile against its four level-0 children's samples */
    terra_tile_key k1 = terra_tile_key_make(0, 1, 0, 0);
    CHECK(terra_bake_tile_build(src, &d, k1, true, &a) == TERRA_OK, "build");
    double worst = 0;
    float fine[33 * 33];
    terra_grid_request req = {.ix0 = 0, .iz0 = 0, .spacing = 4.0, .nx = 33, .nz = 33};
    CHECK(terra_source_sample(src, &req, fine, NULL) == TERRA_OK, "sample");
    /* coarse vertex heights on its 17 x 17 lattice */
    double coarse[17][17];
    for (uint32_t i = 0; i < a.mesh.vertex_count; i++) {
        int ci = (int)lround(a.mesh.u[i] * 16 / 32767.0), cj = (int)lround(a.mesh.v[i] * 16 / 32767.0);
        coarse[cj][ci] = height_m(&a.mesh, i);
    }
    for (int j = 0; j <= 32; j++)
        for (int i = 0; i <= 32; i++) {
            int ci = i / 2 < 16 ? i / 2 : 15, cj = j / 2 < 16 ? j / 2 : 15;
            double fa = (i - 2 * ci) / 2.0, fb = (j - 2 * cj) / 2.0;
            double h00 = coarse[cj][ci], h10 = coarse[cj][ci + 1], h01 = coarse[cj + 1][ci], h11 = coarse[cj + 1][ci + 1];
            double h = fa >= fb ? h00 + fa * (h10 - h00) + fb * (h11 - h10) : h00 + fb * (h01 - h00) + fa * (h11 - h01);
            worst = fmax(worst, fabs(fine[j * 33 + i] - h));
        }
    CHECK(fabs(worst - a.info.geometric_error) < 1e-3, "error %g, brute force %g", a.info.geometric_error, worst);
    terra_bake_tile_free(&a);
    terra_bake_tile_free(&b);
    terra_source_destroy(src);
}

static void test_geographic_tiles(void) {
    terra_source *src = world();
    if (!src) return;
    terra_bake_desc in = {0}, d;
    in.frame = TERRA_FRAME_GEOGRAPHIC;
    in.cells = 16;
    in.levels = 7;
    CHECK(terra_bake_desc_resolve(&in, &d) == TERRA_OK, "resolve");
    terra_bake_tile t;
    memset(&t, 0, sizeof t);
    const int32_t xy[4][3] = {{0, 0, 0}, {0, 1, 0}, {3, 8, 5}, {6, 67, 48}};
    for (int c = 0; c < 4; c++) {
        terra_tile_key k = terra_tile_key_make(0, xy[c][0], xy[c][1], xy[c][2]);
        CHECK(terra_bake_tile_build(src, &d, k, true, &t) == TERRA_OK, "build: %s", terra_last_error());
        double w, s, e, n;
        terra_qmesh_geographic_tile_bounds(xy[c][0], xy[c][1], xy[c][2], &w, &s, &e, &n);
        const terra_qmesh_header *H = &t.mesh.header;
        double r = H->sphere_radius;
        for (uint32_t i = 0; i < t.mesh.vertex_count; i++) {
            double lon = w + (e - w) * t.mesh.u[i] / 32767.0, lat = s + (n - s) * t.mesh.v[i] / 32767.0, p[3];
            terra_qmesh_geodetic_to_ecef(lon * DEG2RAD, lat * DEG2RAD, height_m(&t.mesh, i), p);
            double dx = p[0] - H->sphere_center[0], dy = p[1] - H->sphere_center[1], dz = p[2] - H->sphere_center[2];
            CHECK(sqrt(dx * dx + dy * dy + dz * dz) <= r * 1.0001 + 1, "tile %d: vertex outside the sphere", c);
            /* normals point away from the ellipsoid, roughly up (near the poles the plate carree
             * squeezes the ground east-west, and slopes there are steep by construction) */
            if (fabs(lat) > 75) continue;
            double nn[3], up[3];
            terra_qmesh_oct_decode(t.mesh.normals + 2 * i, nn);
            terra_qmesh_geodetic_up(lon * DEG2RAD, lat * DEG2RAD, up);
            CHECK(nn[0] * up[0] + nn[1] * up[1] + nn[2] * up[2] > 0.2, "tile %d: normal not up", c);
        }
        /* the centre is inside the tile's footprint, near the surface */
        double cl = sqrt(H->center[0] * H->center[0] + H->center[1] * H->center[1] + H->center[2] * H->center[2]);
        CHECK(cl > 6.3e6 && cl < 6.4e6, "centre radius %g", cl);
        /* horizon occlusion point: beyond the surface, along the centre's direction */
        double hl = sqrt(H->horizon[0] * H->horizon[0] + H->horizon[1] * H->horizon[1] + H->horizon[2] * H->horizon[2]);
        CHECK(hl >= 0.99, "horizon point magnitude %g", hl);
        /* encode + decode keeps it */
        size_t cap = terra_qmesh_encoded_size(&t.mesh), nb;
        uint8_t *buf = malloc(cap);
        CHECK(terra_qmesh_encode(&t.mesh, buf, cap, &nb) == TERRA_OK, "encode");
        terra_qmesh back;
        CHECK(terra_qmesh_decode(buf, nb, NULL, &back) == TERRA_OK, "decode");
        CHECK(back.vertex_count == t.mesh.vertex_count && (back.extensions & TERRA_QMESH_HAS_MATERIAL), "decoded");
        terra_qmesh_free(&back);
        free(buf);
    }
    terra_tile_key *keys;
    size_t count;
    CHECK(terra_bake_keys(&d, &keys, &count) == TERRA_OK, "keys");
    int roots = 0;
    for (size_t i = 0; i < count; i++)
        if (terra_tile_key_level(keys[i]) == 0) roots++;
    CHECK(roots == 2, "%d root tiles", roots);
    terra_free(keys);
    terra_bake_tile_free(&t);
    terra_source_destroy(src);
}

static void test_bake_archive(void) {
    terra_source *src = world();
    if (!src) return;
    char path[128];
    snprintf(path, sizeof path, "bake_test_%ld.terra", (long)getpid());
    terra_bake_desc d = {0};
    d.cells = 8;
    d.levels = 3;
    d.area[0] = -100, d.area[1] = -100, d.area[2] = 100, d.area[3] = 100;
    d.compression = TERRA_COMPRESS_ZSTD;
    d.threads = 3;
    d.source_json = "{\"kind\":\"default-world\",\"seed\":5}";
    terra_bake_stats st;
    CHECK(terra_bake(src, path, &d, &st) == TERRA_OK, "bake: %s", terra_last_error());
    /* 4x4 at 64 m over [-128, 128) (16), 2x2 at 128 m (4), 1x... at 256 m: [-256, 256) -> 2x2 (4) */
    CHECK(st.tiles == 16 + 4 + 4, "tiles %llu", (unsigned long long)st.tiles);
    terra_archive *a;
    CHECK(terra_archive_open(path, NULL, &a) == TERRA_OK, "open");
    if (a) {
        uint64_t bad;
        CHECK(terra_archive_verify(a, &bad) == TERRA_OK, "verify");
        uint8_t *raw;
        size_t n;
        terra_archive_entry e;
        CHECK(terra_archive_read_tile(a, terra_tile_key_make(0, 0, -2, -2), &raw, &n, &e) == TERRA_OK, "read");
        terra_qmesh m;
        CHECK(terra_qmesh_decode(raw, n, NULL, &m) == TERRA_OK && m.vertex_count == 81, "decode");
        CHECK(e.max_height == m.header.max_height, "entry heights");
        terra_qmesh_free(&m);
        terra_free(raw);
        CHECK(strstr(terra_archive_get_info(a)->metadata, "\"seed\":5") != NULL, "manifest");
        terra_archive_close(a);
    }
    unlink(path);
    /* invalid descriptions are refused */
    terra_bake_desc bad = {0}, r;
    bad.cells = 24;
    CHECK(terra_bake_desc_resolve(&bad, &r) == TERRA_E_INVALID, "cells 24 accepted");
    terra_source_destroy(src);
}

int main(void) {
    RUN(test_local_tiles);
    RUN(test_geographic_tiles);
    RUN(test_bake_archive);
    return finish();
}
