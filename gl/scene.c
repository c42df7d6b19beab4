/* libterra-gl: a source, a streamer and a renderer for one camera, as the commands and tests use
 * them. Tiles reach the vertex buffer only through the streamer's upload callback. */
#include "terra/gl.h"

#include <math.h>
#include <time.h>

struct terra_gl_scene {
    terra_gl_scene_desc d;
    terra_pool *pool;
    terra_stream *stream;
    terra_gl *gl;
    terra_select *sel; /* the stream's options: ranges for callers */
    terra_focus camera;
    int max_standin; /* desc's max_standin_levels resolved: 0 no bound */
};

terra_gl *terra_gl_scene_renderer(terra_gl_scene *s) { return s->gl; }
terra_stream *terra_gl_scene_stream(terra_gl_scene *s) { return s->stream; }
terra_focus terra_gl_scene_focus(const terra_gl_scene *s) { return s->camera; }
const terra_select *terra_gl_scene_select(const terra_gl_scene *s) { return s->sel; }

terra_status terra_gl_scene_set_source(terra_gl_scene *s, const terra_source *src) {
    if (s->d.archive) return terra_fail(TERRA_E_INVALID, "gl scene: an archive's scene keeps its source");
    terra_status st = terra_stream_set_source(s->stream, src);
    if (st == TERRA_OK) terra_select_set_source(s->sel, src);
    return st;
}

bool terra_gl_scene_busy(const terra_gl_scene *s) {
    const terra_stream_stats *st = terra_stream_get_stats(s->stream);
    return st->replacing || st->in_flight_stale > 0;
}

void terra_gl_scene_destroy(terra_gl_scene *s) {
    if (!s) return;
    terra_stream_destroy(s->stream);
    terra_pool_destroy(s->pool);
    terra_gl_destroy(s->gl);
    terra_select_destroy(s->sel);
    terra_free(s);
}

/* The streamer's clock: the frame's thread's CPU time (terra_gl_frame_stats). */
static double thread_cpu(void *user) {
    (void)user;
    return terra_thread_cpu_s();
}

terra_status terra_gl_scene_create(const terra_gl_scene_desc *desc, terra_gl_scene **out) {
    *out = NULL;
    if (!desc || (!desc->source && !desc->archive)) return terra_fail(TERRA_E_INVALID, "gl scene: a source or an archive is required");
    terra_gl_scene *s = terra_calloc(1, sizeof *s);
    if (!s) return terra_fail(TERRA_E_NOMEM, "gl scene: out of memory");
    s->d = *desc;
    s->max_standin = desc->max_standin_levels < 0 ? 0 : desc->max_standin_levels ? desc->max_standin_levels : 2;
    terra_stream_desc sd = {.select = desc->select, .source = desc->source, .budget_ms = desc->budget_ms,
                            .max_cameras = 1, .max_foci = 4, .capacity_bytes = desc->capacity_bytes,
                            .max_in_flight = desc->max_in_flight ? desc->max_in_flight : 64,
                            .max_standin_levels = s->max_standin};
    if (!sd.select.view_height_px && desc->height > 0) sd.select.view_height_px = desc->height;
    /* a view wants tiles by the square of its height (each level's ring is as many tile sides wide
     * as the pixels ask): 1080 rows want about 3,100 tiles of the default world, 2048 up to 720 */
    const int hpx = sd.select.view_height_px ? sd.select.view_height_px : 1080; /* select.h's default */
    const double rows = hpx > 720 ? hpx / 720.0 : 1;
    int capacity = desc->capacity_tiles ? desc->capacity_tiles : (int)(2048 * rows * rows);
    if (desc->archive) { /* its own tiles, decoded by the pool; as many slots as it has tiles at most */
        terra_archive_mesh_stream_desc(desc->archive, &sd);
        terra_archive_mesh_info ai;
        terra_archive_mesh_get_info(desc->archive, &ai);
        if ((uint64_t)capacity > ai.tiles) capacity = (int)ai.tiles;
        const size_t cap = (size_t)512 << 20;
        if (!sd.capacity_bytes) sd.capacity_bytes = (size_t)capacity * ai.tile_bytes < cap ? (size_t)capacity * ai.tile_bytes : cap;
    }
    sd.capacity_tiles = capacity;
    terra_status st = terra_select_create(&sd.select, sd.source, &s->sel);
    if (st == TERRA_OK) {
        const terra_select_desc *rd = terra_select_get_desc(s->sel);
        if (!desc->archive && !desc->capacity_tiles) {
            /* 2048 tiles of 32 cells are 79 MiB of vertices; of 256 cells, 4.3 GiB, more than a
             * software GL gives one buffer: the default holds at most 1 GiB of grid tiles */
            const size_t slot = sizeof(terra_grid_vertex) * (size_t)(terra_grid_vertex_count(rd->grid.cells) + 4 * rd->grid.cells);
            const size_t fit = ((size_t)1024 << 20) / slot;
            if ((size_t)capacity > fit) capacity = fit > 64 ? (int)fit : 64;
            sd.capacity_tiles = capacity;
        }
        terra_gl_desc gd = {.grid = rd->grid, .capacity_tiles = capacity, .max_draws = rd->max_tiles,
                            .width = desc->width, .height = desc->height};
        /* an archive's tiles as drawn: their vertices expanded (3-coloured, duplicated where the
         * colouring needs it, skirts added) at 32 bytes each take up to about 1.5 x the decoded
         * tile's bytes (10 a vertex, 12 a triangle); twice, so a cap full of tiles fits */
        if (desc->archive) gd.vertex_bytes = 2 * sd.capacity_bytes, gd.index_bytes = sd.capacity_bytes, gd.max_tiles = capacity;
        st = terra_gl_create(&gd, &s->gl);
    }
    if (st == TERRA_OK) st = terra_pool_create(&(terra_pool_desc){.threads = desc->threads}, &s->pool);
    if (st == TERRA_OK) {
        sd.pool = s->pool;
        sd.clock = thread_cpu;
        st = terra_gl_attach(s->gl, &sd);
        if (st == TERRA_OK) st = terra_stream_create(&sd, &s->stream);
    }
    if (st != TERRA_OK) {
        terra_gl_scene_destroy(s);
        return st;
    }
    *out = s;
    return TERRA_OK;
}

/* A real-time frame waits at most this long for stand-ins within max_standin_levels (a source too
 * slow for that gets coarser stand-ins rather than a frozen view) */
#define STANDIN_WAIT_S 1.0

static void nap_ms(double ms) {
    struct timespec ts = {0, (long)(ms * 1e6)};
    nanosleep(&ts, NULL);
}

terra_status terra_gl_scene_frame(terra_gl_scene *s, const terra_camera *cam_in, const terra_gl_style *style,
                                  bool settle, double max_wait_s, terra_gl_frame_stats *fs) {
    terra_gl_frame_stats local;
    if (!fs) fs = &local;
    *fs = (terra_gl_frame_stats){0};
    terra_camera cam = *cam_in;
    int w, h;
    terra_gl_size(s->gl, &w, &h);
    cam.aspect = (double)w / h;
    terra_status st;
    if (!s->camera) {
        st = terra_stream_add_focus(s->stream, &(terra_focus_desc){.kind = TERRA_FOCUS_CAMERA, .camera = cam}, &s->camera);
    } else {
        st = terra_stream_update_focus(s->stream, s->camera, &cam);
    }
    if (st != TERRA_OK) return st;

    const double deadline = terra_now_s() + (max_wait_s > 0 ? max_wait_s : 60.0);
    const double standin_deadline = terra_now_s() + STANDIN_WAIT_S;
    const terra_stream_stats *ss = terra_stream_get_stats(s->stream);
    double first_end = 0, budgeted_ms = 0; /* the end of the first update; the later ones' selections and work */
    for (;;) {
        const double c0 = terra_thread_cpu_s();
        st = terra_stream_update(s->stream);
        const double c1 = terra_thread_cpu_s(), t1 = terra_now_s();
        if (st != TERRA_OK) return st;
        fs->select_ms = ss->select_ms; /* the selection of the last update (each update selects) */
        if (fs->updates++ == 0) {
            fs->stream_ms = (c1 - c0) * 1e3 - ss->select_ms - ss->work_ms;
            first_end = t1;
        } else {
            budgeted_ms += ss->select_ms + ss->work_ms;
            fs->wait_ms = (t1 - first_end) * 1e3 - budgeted_ms;
        }
        /* settled: every wanted tile stands or has failed (a failed tile is never asked for again,
         * its ancestor stands in for good: waiting for it would only run out the clock) */
        fs->settled = ss->waiting == 0;
        const bool too_deep = s->max_standin > 0 && ss->standin_levels > s->max_standin && t1 < standin_deadline;
        if ((!settle && !too_deep) || fs->settled || t1 > deadline) break;
        if (ss->in_flight == 0 && ss->ready == 0 && ss->arrived == 0 && ss->requested == 0) break; /* stuck: cache full */
        if (ss->pieces[TERRA_WORK_UPLOAD] == 0 && ss->arrived == 0) nap_ms(0.5); /* workers still meshing */
    }
    const terra_stream_draw *draws;
    int ndraws;
    st = terra_stream_draws(s->stream, s->camera, &draws, &ndraws);
    if (st == TERRA_OK) st = terra_gl_draw(s->gl, &cam, draws, ndraws, style);
    if (st != TERRA_OK) return st;
    const terra_gl_stats *gs = terra_gl_get_stats(s->gl);
    fs->upload_ms = gs->upload_ms;
    fs->submit_ms = gs->submit_ms;
    fs->cpu_ms = fs->select_ms + fs->stream_ms + fs->wait_ms + fs->submit_ms;
    fs->driver_ms = gs->call_ms;
    fs->tiles = gs->tiles;
    fs->triangles = gs->triangles;
    fs->occluded_triangles = gs->occluded_triangles;
    fs->hidden_tiles = gs->hidden_tiles;
    fs->draw_calls = gs->draw_calls;
    fs->fallbacks = ss->fallbacks;
    fs->failed = ss->failed_wanted;
    fs->standin_levels = ss->standin_levels;
    for (int l = 0; l <= TERRA_TILE_MAX_LEVEL; l++) fs->per_level[l] = gs->per_level[l];
    fs->bytes_held = ss->bytes_held + gs->gpu_bytes;
    return TERRA_OK;
}
