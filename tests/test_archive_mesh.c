/* An archive's own tiles for drawing (terra/archive_mesh.h): every tile decodes to a mesh tile that
 * passes the renderer's check and holds the quantized-mesh tile's vertices and triangles exactly;
 * errors and height ranges come from the index (ranges conservative over every vertex); too small
 * a buffer and absent tiles are refused with a message; and a streamer driven by the loader, with
 * tiles arriving late, covers the wanted ground exactly once on every frame and settles with every
 * drawn tile within tau. A point's height is that of the first triangle (in index order) of its
 * finest tile that holds it, as a scan of every triangle finds it. */
#include "check.h"
#include "terra/archive_io.h"
#include "terra/archive_mesh.h"
#include "terra/bake.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define AREA 1024.0
#define LEVELS 4

static char dir[64] = "/tmp/terra_test_archive_mesh_XXXXXX", path[128];

static bool bake_once(void) {
    if (path[0]) return true;
    if (!mkdtemp(dir)) return false;
    snprintf(path, sizeof path, "%s/w.terra", dir);
    terra_source *world;
    CHECK(terra_world_create(&(terra_world_desc){.seed = 12}, &world) == TERRA_OK);
    terra_bake_desc d = {.frame = TERRA_FRAME_LOCAL, .levels = LEVELS, .cells = 32, .tile0_size = 64,
                         .area = {0, 0, AREA, AREA}, .compression = TERRA_COMPRESS_ZSTD};
    terra_status st = terra_bake(world, path, &d, NULL);
    CHECK(st == TERRA_OK, "bake: %s", terra_last_error());
    terra_source_destroy(world);
    return st == TERRA_OK;
}

static void every_tile_decodes_as_it_was_written(void) {
    if (!bake_once()) return;
    terra_archive_mesh *m;
    terra_archive_mesh_info info;
    CHECK(terra_archive_mesh_open(path, NULL, &m, &info) == TERRA_OK, "%s", terra_last_error());
    CHECK(info.levels == LEVELS && info.tile0_size == 64 && !info.tin && info.bounds[2] == AREA);
    terra_archive *a;
    CHECK(terra_archive_open(path, NULL, &a) == TERRA_OK);
    void *buf = terra_alloc(info.tile_bytes);
    uint64_t n = terra_archive_get_info(a)->tile_count, checked = 0;
    for (uint64_t i = 0; i < n; i++) {
        terra_archive_entry e;
        terra_qmesh q;
        CHECK(terra_archive_entry_at(a, i, &e) == TERRA_OK);
        CHECK(terra_archive_check_tile(a, &e, NULL, &q, NULL) == TERRA_OK);
        size_t bytes = 0;
        CHECK(terra_archive_mesh_decode(m, e.key, buf, info.tile_bytes, &bytes) == TERRA_OK, "%s", terra_last_error());
        CHECK(terra_tile_mesh_check(buf, bytes) == TERRA_OK, "%s", terra_last_error());
        const terra_tile_mesh *t = buf;
        const terra_tile_mesh_vertex *v = terra_tile_mesh_vertices(t);
        const uint32_t *idx = terra_tile_mesh_indices(t);
        CHECK(t->vertex_count == q.vertex_count && t->index_count == 3 * q.triangle_count);
        CHECK(t->size_x == (float)ldexp(64, terra_tile_key_level(e.key)) && t->min_height == q.header.min_height &&
              t->max_height == q.header.max_height && t->geometric_error == e.geometric_error && t->skirt_m >= 0.5f);
        int bad = 0;
        for (uint32_t k = 0; k < q.vertex_count; k++) bad += v[k].u != q.u[k] || v[k].v != q.v[k] || v[k].h != q.h[k];
        for (uint32_t k = 0; k < 3 * q.triangle_count; k++) bad += idx[k] != q.indices[k];
        CHECK(bad == 0, "tile %" PRIu64 ": %d values differ from the quantized-mesh tile", i, bad);
        CHECK(terra_archive_mesh_tile_error(m, e.key) == e.geometric_error);
        /* the index's range holds every vertex, widened as the source says */
        float lo, hi;
        const double side = ldexp(64, terra_tile_key_level(e.key));
        const double x0 = terra_tile_key_x(e.key) * side, z0 = terra_tile_key_y(e.key) * side;
        CHECK(terra_source_height_range(terra_archive_mesh_source(m), x0, z0, x0 + side, z0 + side, &lo, &hi) == TERRA_OK);
        for (uint32_t k = 0; k < q.vertex_count; k++) {
            const double h = t->min_height + (t->max_height - t->min_height) * v[k].h / 32767.0;
            bad += h < lo || h > hi;
        }
        CHECK(bad == 0, "tile %" PRIu64 ": %d vertices outside the source's range", i, bad);
        /* too small a buffer: refused, naming the tile */
        CHECK(terra_archive_mesh_decode(m, e.key, buf, bytes - 1, &bytes) == TERRA_E_CAPACITY);
        CHECK(strstr(terra_last_error(), "tile") != NULL, "%s", terra_last_error());
        terra_qmesh_free(&q);
        checked++;
    }
    CHECK(checked == n && n == info.tiles && n > 80, "%" PRIu64 " of %" PRIu64 " tiles", checked, n);
    size_t bytes;
    const terra_tile_key absent = terra_tile_key_make(0, 0, 900, 900);
    CHECK(terra_archive_mesh_decode(m, absent, buf, info.tile_bytes, &bytes) == TERRA_E_NOT_FOUND);
    CHECK(terra_archive_mesh_tile_error(m, absent) < 0);
    /* heights: at a grid archive's lattice points, the tile's own (quantized) values; between, within
     * the tile's range */
    terra_source *world;
    CHECK(terra_world_create(&(terra_world_desc){.seed = 12}, &world) == TERRA_OK);
    unsigned long long rng = 3;
    double worst = 0;
    for (int i = 0; i < 2000; i++) {
        const double x = 2.0 * (double)(test_rand_u64(&rng) % 513), z = 2.0 * (double)(test_rand_u64(&rng) % 513);
        float h, w;
        CHECK(terra_source_height(terra_archive_mesh_source(m), x, z, &h) == TERRA_OK, "%s", terra_last_error());
        terra_source_height(world, x, z, &w);
        worst = fmax(worst, fabs(h - w));
    }
    CHECK(worst < (info.max_height - info.min_height) / 32767.0 + 0.01, "heights %g m from the world's", worst);
    terra_source_destroy(world);
    terra_free(buf);
    terra_archive_close(a);
    terra_archive_mesh_close(m);
}

/* The reference: every triangle of the decoded tile scanned in order (the first holding the point). */
static bool scan_height(const terra_tile_mesh *t, double x, double z, float *out) {
    const terra_tile_mesh_vertex *v = terra_tile_mesh_vertices(t);
    const uint32_t *idx = terra_tile_mesh_indices(t);
    const double su = t->size_x / 32767.0, sv = t->size_z / 32767.0, sh = (t->max_height - t->min_height) / 32767.0;
    const double pu = x / su, pv = z / sv;
    for (uint32_t i = 0; i + 2 < t->index_count; i += 3) {
        const terra_tile_mesh_vertex *a = &v[idx[i]], *b = &v[idx[i + 1]], *c = &v[idx[i + 2]];
        const double area = ((double)b->u - a->u) * ((double)c->v - a->v) - ((double)b->v - a->v) * ((double)c->u - a->u);
        if (area == 0) continue; /* either turn: the barycentric weights come out right */
        const double la = (((double)b->u - pu) * ((double)c->v - pv) - ((double)b->v - pv) * ((double)c->u - pu)) / area;
        const double lb = (((double)c->u - pu) * ((double)a->v - pv) - ((double)c->v - pv) * ((double)a->u - pu)) / area;
        const double lc = 1.0 - la - lb;
        if (la < -1e-9 || lb < -1e-9 || lc < -1e-9) continue;
        *out = (float)(t->min_height + sh * (la * a->h + lb * b->h + lc * c->h));
        return true;
    }
    return false;
}

static void heights_come_from_the_triangle_under_the_point(void) {
    if (!bake_once()) return;
    terra_archive_mesh *m;
    terra_archive_mesh_info info;
    CHECK(terra_archive_mesh_open(path, NULL, &m, &info) == TERRA_OK, "%s", terra_last_error());
    terra_tile_mesh *t = terra_alloc(info.tile_bytes);
    unsigned long long rng = 17;
    int checked = 0, differ = 0, on_lattice = 0;
    /* points anywhere, and on the lattice and its cell edges (on shared edges and corners: the first
     * triangle in index order decides), in random order over the tiles, so the cache turns over */
    for (int i = 0; i < 6000; i++) {
        double x = AREA * (double)(test_rand_u64(&rng) % 1000003) / 1000003.0;
        double z = AREA * (double)(test_rand_u64(&rng) % 1000003) / 1000003.0;
        if (i % 3 == 1) x = 2.0 * floor(x / 2.0), on_lattice++;
        if (i % 3 == 2) x = 2.0 * floor(x / 2.0), z = 2.0 * floor(z / 2.0), on_lattice++;
        const int32_t tx = (int32_t)floor(x / 64), tz = (int32_t)floor(z / 64);
        size_t bytes;
        const terra_status st = terra_archive_mesh_decode(m, terra_tile_key_make(0, 0, tx, tz), t, info.tile_bytes, &bytes);
        CHECK(st == TERRA_OK, "tile 0/%d/%d: %s", tx, tz, terra_last_error());
        float want = 0, got = 0;
        if (st != TERRA_OK || !scan_height(t, x - 64.0 * tx, z - 64.0 * tz, &want)) continue;
        CHECK(terra_source_height(terra_archive_mesh_source(m), x, z, &got) == TERRA_OK, "%s", terra_last_error());
        differ += memcmp(&want, &got, sizeof want) != 0;
        checked++;
    }
    CHECK(checked > 5000 && differ == 0, "%d of %d heights differ from a scan of every triangle", differ, checked);
    /* and the ground is continuous: interpolated in its triangle, not stepped at the nearest vertex
     * (which it was, every triangle skipped for turning clockwise): 1 mm apart, heights differ by
     * at most the steepest slope's millimetre (a cell's corners at most 2 x 2 m apart) */
    double jump = 0, slope = 0;
    for (int i = 0; i < 2000; i++) {
        const double x = (AREA - 1) * (double)(test_rand_u64(&rng) % 1000003) / 1000003.0;
        const double z = (AREA - 1) * (double)(test_rand_u64(&rng) % 1000003) / 1000003.0;
        float h0 = 0, h1 = 0, c00 = 0, c10 = 0;
        const terra_source *src = terra_archive_mesh_source(m);
        CHECK(terra_source_height(src, x, z, &h0) == TERRA_OK && terra_source_height(src, x + 0.001, z, &h1) == TERRA_OK);
        CHECK(terra_source_height(src, 2 * floor(x / 2), z, &c00) == TERRA_OK &&
              terra_source_height(src, 2 * floor(x / 2) + 2, z, &c10) == TERRA_OK);
        jump = fmax(jump, fabs(h1 - h0));
        slope = fmax(slope, fabs(c10 - c00) / 2);
    }
    CHECK(jump <= 0.001 * (2 * slope + 1) + 1e-3, "heights 1 mm apart differ by %g m (steepest slope %g)", jump, slope);
    printf("  heights 1 mm apart differ by at most %.2g m (steepest slope %.2f)\n", jump, slope);
    printf("  %d heights (%d on the lattice or its edges) equal a scan of every triangle\n", checked, on_lattice);
    terra_free(t);
    terra_archive_mesh_close(m);
}

static void a_late_stream_covers_the_ground_every_frame(void) {
    if (!bake_once()) return;
    terra_archive_mesh *m;
    CHECK(terra_archive_mesh_open(path, &(terra_archive_mesh_desc){.latency_ms = 3}, &m, NULL) == TERRA_OK,
          "%s", terra_last_error());
    terra_stream_desc sd = {.capacity_tiles = 200, .max_in_flight = 8, .max_cameras = 1};
    sd.select.max_sse_px = 2;
    sd.select.view_height_px = 540;
    terra_archive_mesh_stream_desc(m, &sd);
    terra_stream *s;
    CHECK(terra_stream_create(&sd, &s) == TERRA_OK, "%s", terra_last_error());
    terra_focus cam;
    terra_camera c = {.eye = {100, 400, 100}, .yaw_rad = 0.8, .pitch_rad = -0.5, .aspect = 16.0 / 9};
    CHECK(terra_stream_add_focus(s, &(terra_focus_desc){.kind = TERRA_FOCUS_CAMERA, .camera = c}, &cam) == TERRA_OK);
    int frames = 0, uncovered_frames = 0, settled_frames = 0, bad_tiles = 0;
    for (int f = 0; f < 400; f++) {
        c.eye.x += 1.5, c.eye.z += 1.2, c.eye.y -= 0.8; /* a dive across the area */
        CHECK(terra_stream_update_focus(s, cam, &c) == TERRA_OK);
        CHECK(terra_stream_update(s) == TERRA_OK, "%s", terra_last_error());
        const terra_stream_stats *st = terra_stream_get_stats(s);
        uncovered_frames += st->uncovered > 0 && f > 20;
        const terra_stream_draw *d;
        int n;
        CHECK(terra_stream_draws(s, cam, &d, &n) == TERRA_OK);
        for (int i = 0; i < n; i++) bad_tiles += terra_tile_mesh_check(d[i].data, d[i].bytes) != TERRA_OK;
        settled_frames += st->waiting == 0;
        frames++;
        nanosleep(&(struct timespec){0, 500000}, NULL);
    }
    CHECK(uncovered_frames == 0, "%d frames had wanted ground with no standing ancestor", uncovered_frames);
    CHECK(bad_tiles == 0, "%d drawn tiles fail the mesh check", bad_tiles);
    CHECK(settled_frames > 0 && settled_frames < frames, "%d of %d frames settled: tiles did not arrive late", settled_frames,
          frames);
    terra_stream_destroy(s);
    terra_archive_mesh_close(m);
    /* the children of decoded tiles are read ahead */
    CHECK(terra_archive_mesh_open(path, NULL, &m, NULL) == TERRA_OK);
    sd = (terra_stream_desc){.capacity_tiles = 200, .max_in_flight = 2, .max_cameras = 1};
    terra_archive_mesh_stream_desc(m, &sd);
    CHECK(terra_stream_create(&sd, &s) == TERRA_OK, "%s", terra_last_error());
    c = (terra_camera){.eye = {500, 900, 500}, .pitch_rad = -0.6, .aspect = 16.0 / 9};
    CHECK(terra_stream_add_focus(s, &(terra_focus_desc){.kind = TERRA_FOCUS_CAMERA, .camera = c}, &cam) == TERRA_OK);
    for (int f = 0; f < 200 && (f < 5 || terra_stream_get_stats(s)->waiting); f++) {
        CHECK(terra_stream_update(s) == TERRA_OK);
        nanosleep(&(struct timespec){0, 2000000}, NULL);
    }
    CHECK(terra_archive_mesh_prefetched(m) > 0, "no child of a decoded tile was read ahead");
    terra_stream_destroy(s);
    terra_archive_mesh_close(m);
}

static void refuses_what_it_cannot_draw(void) {
    terra_archive_mesh *m;
    CHECK(terra_archive_mesh_open("/nonexistent/x.terra", NULL, &m, NULL) != TERRA_OK);
    CHECK(strstr(terra_last_error(), "/nonexistent/x.terra") != NULL, "%s", terra_last_error());
    char geo[160];
    snprintf(geo, sizeof geo, "%s/g.terra", dir);
    terra_source *world;
    CHECK(terra_world_create(&(terra_world_desc){.seed = 1}, &world) == TERRA_OK);
    terra_bake_desc d = {.frame = TERRA_FRAME_GEOGRAPHIC, .levels = 2, .cells = 16, .bounds = {7, 45, 7.01, 45.01}};
    CHECK(terra_bake(world, geo, &d, NULL) == TERRA_OK, "%s", terra_last_error());
    CHECK(terra_archive_mesh_open(geo, NULL, &m, NULL) == TERRA_E_UNSUPPORTED);
    CHECK(strstr(terra_last_error(), "geographic") != NULL, "%s", terra_last_error());
    terra_source_destroy(world);
    unlink(geo);
}

int main(void) {
    RUN(every_tile_decodes_as_it_was_written);
    RUN(heights_come_from_the_triangle_under_the_point);
    RUN(a_late_stream_covers_the_ground_every_frame);
    RUN(refuses_what_it_cannot_draw);
    if (path[0]) unlink(path);
    rmdir(dir);
    return finish();
}
