/* libterra-gl: a planet scene: the six face quadtrees selected for a camera, the tiles a frame wants
 * meshed on a pool's workers, held in one renderer, the least recently drawn let go when full. */
#include "terra/gl.h"
#include "terra/pool.h"

#include "keymap.h"

#include <math.h>
#include <string.h>

#define BATCH 64 /* tiles meshed at once */

typedef struct build_job {
    terra_job job;
    const terra_planet *planet;
    terra_tile_key key;
    terra_grid_vertex *verts;
    void *scratch;
} build_job;

typedef struct held { terra_tile_key key; uint32_t frame; } held;

struct terra_gl_planet {
    terra_gl_planet_desc d;
    terra_gl *gl;
    terra_planet_select *sel;
    terra_pool *pool;
    build_job jobs[BATCH];
    key_map index; /* key -> held[] */
    held *held;
    int nheld;
    terra_stream_draw *draws;
    int ndraws;
    uint32_t frame;
    size_t tile_bytes;
};

static void build_run(terra_job *job) {
    build_job *b = (build_job *)job;
    job->status = terra_planet_build(b->planet, b->key, b->verts, b->scratch, NULL);
}

terra_status terra_gl_planet_create(const terra_gl_planet_desc *desc, terra_gl_planet **out) {
    *out = NULL;
    if (!desc || !desc->planet) return terra_fail(TERRA_E_INVALID, "gl planet: no planet given");
    terra_gl_planet_desc d = *desc;
    if (d.capacity_tiles == 0) d.capacity_tiles = 2048;
    if (d.capacity_tiles < 16 || d.capacity_tiles > 65536)
        return terra_fail(TERRA_E_INVALID, "gl planet: capacity_tiles must be from 16 to 65536 (got %d)", d.capacity_tiles);
    if (d.select.view_height_px == 0) d.select.view_height_px = d.height > 0 ? d.height : 1080;
    if (d.select.max_tiles == 0) d.select.max_tiles = d.capacity_tiles;
    if (d.select.max_tiles > d.capacity_tiles)
        return terra_fail(TERRA_E_INVALID, "gl planet: select.max_tiles (%d) is more than capacity_tiles (%d)",
                          d.select.max_tiles, d.capacity_tiles);
    terra_gl_planet *s = terra_calloc(1, sizeof *s);
    if (!s) return terra_fail(TERRA_E_NOMEM, "gl planet: out of memory");
    s->d = d;
    const int cells = terra_planet_get_desc(d.planet)->cells;
    s->tile_bytes = sizeof(terra_grid_vertex) * (size_t)terra_grid_vertex_count(cells);
    terra_status st = terra_gl_create(&(terra_gl_desc){.grid = {.cells = cells}, .capacity_tiles = d.capacity_tiles,
                                                       .max_draws = d.capacity_tiles, .width = d.width, .height = d.height,
                                                       .planet = d.planet},
                                      &s->gl);
    if (st == TERRA_OK) st = terra_planet_select_create(&d.select, d.planet, &s->sel);
    if (st == TERRA_OK) st = terra_pool_create(&(terra_pool_desc){.threads = d.threads}, &s->pool);
    if (st == TERRA_OK && !map_init(&s->index, d.capacity_tiles)) st = terra_fail(TERRA_E_NOMEM, "gl planet: out of memory");
    s->held = terra_alloc(sizeof *s->held * (size_t)d.capacity_tiles);
    s->draws = terra_alloc(sizeof *s->draws * (size_t)d.capacity_tiles);
    if (st == TERRA_OK && (!s->held || !s->draws)) st = terra_fail(TERRA_E_NOMEM, "gl planet: out of memory");
    for (int i = 0; i < BATCH && st == TERRA_OK; i++) {
        build_job *b = &s->jobs[i];
        b->job.run = build_run;
        b->planet = d.planet;
        b->verts = terra_alloc(s->tile_bytes);
        b->scratch = terra_alloc(terra_planet_scratch_bytes(cells));
        if (!b->verts || !b->scratch) st = terra_fail(TERRA_E_NOMEM, "gl planet: out of memory");
    }
    if (st != TERRA_OK) {
        terra_gl_planet_destroy(s);
        return st;
    }
    *out = s;
    return TERRA_OK;
}

void terra_gl_planet_destroy(terra_gl_planet *s) {
    if (!s) return;
    terra_pool_destroy(s->pool);
    for (int i = 0; i < BATCH; i++) {
        terra_free(s->jobs[i].verts);
        terra_free(s->jobs[i].scratch);
    }
    map_free(&s->index);
    terra_free(s->held);
    terra_free(s->draws);
    terra_planet_select_destroy(s->sel);
    terra_gl_destroy(s->gl);
    terra_free(s);
}

terra_gl *terra_gl_planet_renderer(terra_gl_planet *s) { return s->gl; }
terra_planet_select *terra_gl_planet_select(terra_gl_planet *s) { return s->sel; }
void terra_gl_planet_draws(const terra_gl_planet *s, const terra_stream_draw **draws, int *count) {
    *draws = s->draws;
    *count = s->ndraws;
}

/* Lets go of the least recently drawn tile not drawn this frame; false when every held tile is. */
static bool evict_one(terra_gl_planet *s) {
    int victim = -1;
    for (int i = 0; i < s->nheld; i++)
        if (s->held[i].frame != s->frame && (victim < 0 || s->held[i].frame < s->held[victim].frame)) victim = i;
    if (victim < 0) return false;
    terra_gl_release(s->gl, s->held[victim].key);
    map_del(&s->index, s->held[victim].key);
    s->held[victim] = s->held[--s->nheld];
    if (victim < s->nheld) map_put(&s->index, s->held[victim].key, victim);
    return true;
}

/* Meshes jobs[0..n) on the pool and uploads them. */
static terra_status build_batch(terra_gl_planet *s, int n, double *upload_ms) {
    for (int i = 0; i < n; i++) terra_pool_submit(s->pool, &s->jobs[i].job);
    terra_pool_wait_idle(s->pool);
    terra_job *done[BATCH];
    while (terra_pool_poll(s->pool, done, BATCH) > 0) {
    }
    for (int i = 0; i < n; i++) {
        build_job *b = &s->jobs[i];
        if (b->job.status != TERRA_OK) return b->job.status;
        if (s->nheld >= s->d.capacity_tiles && !evict_one(s))
            return terra_fail(TERRA_E_CAPACITY, "gl planet: the frame wants more tiles than capacity_tiles (%d)",
                              s->d.capacity_tiles);
        const double t0 = terra_now_s();
        terra_status st = terra_gl_upload(s->gl, b->key, b->verts, s->tile_bytes);
        *upload_ms += (terra_now_s() - t0) * 1e3;
        if (st != TERRA_OK) return st;
        s->held[s->nheld] = (held){b->key, s->frame};
        map_put(&s->index, b->key, s->nheld++);
    }
    return TERRA_OK;
}

terra_status terra_gl_planet_frame(terra_gl_planet *s, const terra_camera *cam, const terra_gl_style *style,
                                   terra_gl_frame_stats *fs) {
    terra_gl_frame_stats f = {0};
    s->frame++;
    terra_camera c = *cam;
    int w, h;
    terra_gl_size(s->gl, &w, &h);
    if (c.aspect == 0 && h > 0) c.aspect = (double)w / h;
    terra_frustum fr;
    terra_camera_frustum(&c, &fr);
    const terra_planet_tile *tiles;
    int n;
    double t0 = terra_now_s();
    terra_status st = terra_planet_select_run(s->sel, c.eye, &fr, &tiles, &n);
    f.select_ms = (terra_now_s() - t0) * 1e3;
    if (st != TERRA_OK) return st;
    t0 = terra_now_s();
    /* first every held tile the frame draws is stamped, so that making room never lets go of one */
    for (int i = 0; i < n; i++) {
        const int32_t at = map_get(&s->index, tiles[i].key);
        if (at >= 0) s->held[at].frame = s->frame;
    }
    int queued = 0;
    for (int i = 0; i < n && st == TERRA_OK; i++) {
        if (map_get(&s->index, tiles[i].key) >= 0) continue;
        s->jobs[queued++].key = tiles[i].key;
        if (queued == BATCH) st = build_batch(s, queued, &f.upload_ms), queued = 0;
    }
    if (st == TERRA_OK && queued) st = build_batch(s, queued, &f.upload_ms);
    f.stream_ms = (terra_now_s() - t0) * 1e3 - f.upload_ms;
    if (st != TERRA_OK) return st;
    for (int i = 0; i < n; i++)
        s->draws[i] = (terra_stream_draw){.key = tiles[i].key, .level = tiles[i].level, .morph_start = tiles[i].morph_start,
                                          .morph_end = tiles[i].morph_end};
    s->ndraws = n;
    st = terra_gl_draw(s->gl, &c, s->draws, n, style);
    if (st != TERRA_OK) return st;
    const terra_gl_stats *gs = terra_gl_get_stats(s->gl);
    f.submit_ms = gs->submit_ms, f.driver_ms = gs->call_ms;
    f.updates = 1, f.tiles = gs->tiles, f.triangles = gs->triangles, f.draw_calls = gs->draw_calls;
    memcpy(f.per_level, gs->per_level, sizeof f.per_level);
    f.bytes_held = gs->gpu_bytes;
    f.settled = true;
    if (fs) *fs = f;
    return TERRA_OK;
}
