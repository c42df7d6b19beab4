/* libterra-gl: a planet scene: the six face quadtrees selected for a camera, the tiles a frame wants
 * meshed on a pool's workers, held in one renderer, the least recently drawn let go when full; in
 * real time, ancestors stand in for tiles still being meshed. */
#include "terra/gl.h"
#include "terra/pool.h"

#include "keymap.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define JOBS 64       /* tiles being meshed at once */
#define MAX_STANDIN 2 /* levels a stand-in may be coarser than the tile it stands for */

typedef struct build_job {
    terra_job job;
    const terra_planet *planet;
    terra_tile_key key;
    terra_grid_vertex *verts;
    void *scratch;
    bool busy; /* submitted and not yet uploaded */
    bool done; /* back from the pool, waiting for its upload */
} build_job;

typedef struct held { terra_tile_key key; uint32_t frame; bool pinned; } held;

struct terra_gl_planet {
    terra_gl_planet_desc d;
    terra_gl *gl;
    terra_planet_select *sel;
    double asked_sse; /* tau as asked (the selection's may be raised: select_fitting) */
    terra_pool *pool;
    terra_job_queue *queue;
    build_job jobs[JOBS];
    key_map index;    /* key -> held[] */
    key_set standins, drawn; /* this frame's stand-ins, and those drawn */
    int standin_top;         /* the coarsest stand-in's level: searches for one stop there */
    held *held;
    int nheld;
    terra_stream_draw *draws;
    int ndraws;
    terra_tile_key *missing, *asked; /* wanted tiles not held; those and their ancestors not held */
    uint32_t frame;
    size_t tile_bytes;
    int top;
};

static void build_run(terra_job *job) {
    build_job *b = (build_job *)job;
    job->status = terra_planet_build(b->planet, b->key, b->verts, b->scratch, NULL);
}

void terra_gl_planet_destroy(terra_gl_planet *s) {
    if (!s) return;
    terra_pool_destroy(s->pool); /* running jobs finish first */
    terra_job_queue_destroy(s->queue);
    for (int i = 0; i < JOBS; i++) {
        terra_free(s->jobs[i].verts);
        terra_free(s->jobs[i].scratch);
    }
    map_free(&s->index);
    set_free(&s->standins);
    set_free(&s->drawn);
    terra_free(s->held);
    terra_free(s->draws);
    terra_free(s->missing);
    terra_free(s->asked);
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

/* Lets go of the least recently drawn tile not drawn this frame and not pinned; false when none is. */
static bool evict_one(terra_gl_planet *s) {
    int victim = -1;
    for (int i = 0; i < s->nheld; i++)
        if (!s->held[i].pinned && s->held[i].frame != s->frame && (victim < 0 || s->held[i].frame < s->held[victim].frame))
            victim = i;
    if (victim < 0) return false;
    terra_gl_release(s->gl, s->held[victim].key);
    map_del(&s->index, s->held[victim].key);
    s->held[victim] = s->held[--s->nheld];
    if (victim < s->nheld) map_put(&s->index, s->held[victim].key, victim);
    return true;
}

/* Uploads a meshed tile (making room first) and frees its job. In real time a tile there is no room
 * for waits in its job for a later frame. */
static terra_status upload(terra_gl_planet *s, build_job *b, bool pinned, double *upload_ms) {
    if (b->job.status != TERRA_OK) {
        b->busy = b->done = false;
        return b->job.status;
    }
    if (s->nheld >= s->d.capacity_tiles && !evict_one(s)) {
        if (s->d.budget_ms > 0) return TERRA_OK;
        b->busy = b->done = false;
        return terra_fail(TERRA_E_CAPACITY, "gl planet: the frame wants more tiles than capacity_tiles (%d)", s->d.capacity_tiles);
    }
    b->busy = b->done = false;
    const double t0 = terra_thread_cpu_s();
    terra_status st = terra_gl_upload(s->gl, b->key, b->verts, s->tile_bytes);
    *upload_ms += (terra_thread_cpu_s() - t0) * 1e3;
    if (st != TERRA_OK) return st;
    s->held[s->nheld] = (held){b->key, s->frame, pinned};
    map_put(&s->index, b->key, s->nheld++);
    return TERRA_OK;
}

/* Takes the jobs the pool has finished. */
static void collect(terra_gl_planet *s) {
    terra_job *done[JOBS];
    int n;
    while ((n = terra_job_queue_poll(s->queue, done, JOBS)) > 0)
        for (int i = 0; i < n; i++) ((build_job *)done[i])->done = true;
}

static bool in_flight(const terra_gl_planet *s, terra_tile_key key) {
    for (int i = 0; i < JOBS; i++)
        if (s->jobs[i].busy && s->jobs[i].key == key) return true;
    return false;
}

/* Cancels the jobs not yet started but for tiles keys[0..n), so that waiting for those waits for
 * them and the jobs running, not for every tile asked for before (they are asked for again). */
static void give_way(terra_gl_planet *s, const terra_tile_key *keys, int n) {
    for (int i = 0; i < JOBS; i++) {
        build_job *b = &s->jobs[i];
        if (!b->busy || b->done) continue;
        bool needed = false;
        for (int k = 0; k < n && !needed; k++) needed = keys[k] == b->key;
        if (!needed && terra_pool_cancel(s->pool, &b->job)) b->busy = false;
    }
}

/* Submits tiles keys[0..n) not held and not in flight, as far as jobs are free; returns how many. */
static int request(terra_gl_planet *s, const terra_tile_key *keys, int n) {
    int submitted = 0, j = 0;
    for (int i = 0; i < n; i++) {
        if (map_get(&s->index, keys[i]) >= 0 || in_flight(s, keys[i])) continue;
        while (j < JOBS && s->jobs[j].busy) j++;
        if (j == JOBS) break;
        build_job *b = &s->jobs[j];
        b->key = keys[i], b->busy = true, b->done = false;
        terra_pool_submit(s->pool, &b->job);
        submitted++;
    }
    return submitted;
}

terra_status terra_gl_planet_create(const terra_gl_planet_desc *desc, terra_gl_planet **out) {
    *out = NULL;
    if (!desc || !desc->planet) return terra_fail(TERRA_E_INVALID, "gl planet: no planet given");
    terra_gl_planet_desc d = *desc;
    if (d.capacity_tiles == 0) d.capacity_tiles = 131072 / terra_planet_get_desc(d.planet)->cells; /* 8192 16-cell tiles */
    if (d.capacity_tiles < 16 || d.capacity_tiles > 65536)
        return terra_fail(TERRA_E_INVALID, "gl planet: capacity_tiles must be from 16 to 65536 (got %d)", d.capacity_tiles);
    if (!(d.budget_ms >= 0) || !(d.budget_ms <= 1000))
        return terra_fail(TERRA_E_INVALID, "gl planet: budget_ms must be from 0 to 1000 (got %g)", d.budget_ms);
    if (d.select.view_height_px == 0) d.select.view_height_px = d.height > 0 ? d.height : 1080;
    if (d.select.max_tiles == 0) d.select.max_tiles = d.capacity_tiles - 6;
    if (d.select.max_tiles > d.capacity_tiles - 6)
        return terra_fail(TERRA_E_INVALID, "gl planet: select.max_tiles (%d) is more than capacity_tiles (%d) less the six faces",
                          d.select.max_tiles, d.capacity_tiles);
    terra_gl_planet *s = terra_calloc(1, sizeof *s);
    if (!s) return terra_fail(TERRA_E_NOMEM, "gl planet: out of memory");
    s->d = d;
    const int cells = terra_planet_get_desc(d.planet)->cells;
    s->top = terra_planet_get_desc(d.planet)->levels - 1;
    s->tile_bytes = sizeof(terra_grid_vertex) * (size_t)terra_grid_vertex_count(cells);
    terra_status st = terra_gl_create(&(terra_gl_desc){.grid = {.cells = cells}, .capacity_tiles = d.capacity_tiles,
                                                       .max_draws = d.capacity_tiles, .width = d.width, .height = d.height,
                                                       .planet = d.planet},
                                      &s->gl);
    if (st == TERRA_OK) st = terra_planet_select_create(&d.select, d.planet, &s->sel);
    if (st == TERRA_OK) s->asked_sse = terra_planet_select_sse(s->sel);
    if (st == TERRA_OK) st = terra_pool_create(&(terra_pool_desc){.threads = d.threads}, &s->pool);
    if (st == TERRA_OK) st = terra_job_queue_create(&s->queue);
    if (st == TERRA_OK && (!map_init(&s->index, d.capacity_tiles) || !set_init(&s->standins, d.capacity_tiles) ||
                           !set_init(&s->drawn, d.capacity_tiles)))
        st = terra_fail(TERRA_E_NOMEM, "gl planet: out of memory");
    s->held = terra_alloc(sizeof *s->held * (size_t)d.capacity_tiles);
    s->draws = terra_alloc(sizeof *s->draws * (size_t)d.capacity_tiles);
    s->missing = terra_alloc(sizeof *s->missing * (size_t)d.capacity_tiles);
    s->asked = terra_alloc(sizeof *s->asked * (size_t)d.capacity_tiles);
    if (st == TERRA_OK && (!s->held || !s->draws || !s->missing || !s->asked))
        st = terra_fail(TERRA_E_NOMEM, "gl planet: out of memory");
    for (int i = 0; i < JOBS && st == TERRA_OK; i++) {
        build_job *b = &s->jobs[i];
        b->job.run = build_run, b->job.queue = s->queue;
        b->planet = d.planet;
        b->verts = terra_alloc(s->tile_bytes);
        b->scratch = terra_alloc(terra_planet_scratch_bytes(cells));
        if (!b->verts || !b->scratch) st = terra_fail(TERRA_E_NOMEM, "gl planet: out of memory");
    }
    /* the six faces, held for good: every tile has an ancestor to stand in for it */
    terra_tile_key faces[6];
    for (int f = 0; f < 6; f++) faces[f] = terra_tile_key_make(f, s->top, 0, 0);
    if (st == TERRA_OK) {
        request(s, faces, 6);
        terra_pool_wait_idle(s->pool);
        collect(s);
        double ms = 0;
        for (int i = 0; i < JOBS && st == TERRA_OK; i++)
            if (s->jobs[i].done) st = upload(s, &s->jobs[i], true, &ms);
    }
    if (st != TERRA_OK) {
        terra_gl_planet_destroy(s);
        return st;
    }
    *out = s;
    return TERRA_OK;
}

/* The nearest held ancestor of a tile (the faces always are). */
static terra_tile_key held_ancestor(const terra_gl_planet *s, terra_tile_key k) {
    while (terra_tile_key_level(k) < s->top && map_get(&s->index, k) < 0) k = terra_tile_key_parent(k);
    return k;
}

/* Whether a tile lies under one of this frame's stand-ins (or is one). */
static bool under_standin(const terra_gl_planet *s, terra_tile_key k) {
    for (;;) {
        if (set_has(&s->standins, k)) return true;
        if (terra_tile_key_level(k) >= s->standin_top) return false;
        k = terra_tile_key_parent(k);
    }
}

static int by_level_down(const void *a, const void *b) { /* coarsest first */
    const int la = terra_tile_key_level(*(const terra_tile_key *)a), lb = terra_tile_key_level(*(const terra_tile_key *)b);
    return (la < lb) - (la > lb);
}

/* A view that asks for more tiles than the selection holds (a tiny tau, a tall picture, a wide field of
 * view) is drawn at a coarser tau, doubled until it fits, with a warning; while it is raised, each frame
 * first tries half of it again, back down to the tau asked for. */
static terra_status select_fitting(terra_gl_planet *s, terra_vec3 eye, const terra_frustum *fr, const terra_planet_tile **tiles,
                                   int *n) {
    const double was = terra_planet_select_sse(s->sel);
    double tau = was;
    terra_status st = TERRA_E_CAPACITY;
    if (tau > s->asked_sse) {
        terra_planet_select_set_sse(s->sel, fmax(tau / 2, s->asked_sse));
        if ((st = terra_planet_select_run(s->sel, eye, fr, tiles, n)) != TERRA_E_CAPACITY) tau = terra_planet_select_sse(s->sel);
        else terra_planet_select_set_sse(s->sel, tau);
    }
    if (st == TERRA_E_CAPACITY) st = terra_planet_select_run(s->sel, eye, fr, tiles, n);
    while (st == TERRA_E_CAPACITY && tau < 1000) {
        terra_planet_select_set_sse(s->sel, tau *= 2);
        st = terra_planet_select_run(s->sel, eye, fr, tiles, n);
    }
    if (st == TERRA_E_CAPACITY) { /* no tau fits: the error, and the tau asked for again */
        terra_planet_select_set_sse(s->sel, s->asked_sse);
        return st;
    }
    if (st == TERRA_OK && tau > was)
        terra_log(TERRA_LOG_WARN, "gl planet: the view asks for more than %d tiles at a screen-space error of %g px: drawn at %g px",
                  s->d.select.max_tiles, s->asked_sse, tau);
    return st;
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
    double t0 = terra_thread_cpu_s();
    terra_status st = select_fitting(s, c.eye, &fr, &tiles, &n);
    f.select_ms = (terra_thread_cpu_s() - t0) * 1e3;
    if (st != TERRA_OK) return st;
    t0 = terra_thread_cpu_s();
    /* every held tile the frame wants, and every ancestor that may stand in, is stamped first, so that
     * making room never lets go of one */
    const bool realtime = s->d.budget_ms > 0;
    int nmissing = 0, nasked = 0;
    set_clear(&s->standins); /* for now: the tiles asked for, each once */
    set_clear(&s->drawn);    /* for now: the tiles whose held ancestors are stamped (each walked up once) */
    for (int i = 0; i < n; i++) {
        for (terra_tile_key a = tiles[i].key; !set_has(&s->drawn, a); a = terra_tile_key_parent(a)) {
            set_add(&s->drawn, a); /* it and its held ancestors are kept (a full set only walks again) */
            const int32_t at = map_get(&s->index, a);
            if (at >= 0) s->held[at].frame = s->frame;
            if (terra_tile_key_level(a) >= s->top) break;
        }
        if (map_get(&s->index, tiles[i].key) >= 0) continue;
        s->missing[nmissing++] = tiles[i].key;
        /* the tile, and its ancestors up to the nearest held one, coarsest first, so that a stand-in
         * is soon one or two levels coarser (as Cesium keeps ancestors); that one is kept */
        terra_tile_key a = tiles[i].key;
        for (; terra_tile_key_level(a) < s->top && map_get(&s->index, a) < 0; a = terra_tile_key_parent(a)) {
            if (nasked < s->d.capacity_tiles && set_add(&s->standins, a)) s->asked[nasked++] = a;
            if (!realtime) break; /* a whole frame needs no stand-ins */
        }
    }
    qsort(s->asked, (size_t)nasked, sizeof *s->asked, by_level_down);
    for (;;) { /* uploads of what is meshed (in real time within the budget), requests for what is missing */
        collect(s);
        for (int i = 0; i < JOBS && st == TERRA_OK; i++) {
            if (!s->jobs[i].done) continue;
            if (realtime && (terra_thread_cpu_s() - t0) * 1e3 > s->d.budget_ms) break;
            st = upload(s, &s->jobs[i], false, &f.upload_ms);
        }
        if (st != TERRA_OK) return st;
        int still = 0;
        for (int i = 0; i < nmissing; i++)
            if (map_get(&s->index, s->missing[i]) < 0) s->missing[still++] = s->missing[i];
        nmissing = still;
        still = 0;
        for (int i = 0; i < nasked; i++)
            if (map_get(&s->index, s->asked[i]) < 0) s->asked[still++] = s->asked[i];
        nasked = still;
        const int submitted = request(s, s->asked, nasked);
        if (realtime || nmissing == 0) break;
        if (submitted == 0 && (nasked == 0 || !in_flight(s, s->asked[0]))) { /* nothing can come: every job is waiting to upload */
            bool any = false;
            for (int i = 0; i < JOBS; i++) any = any || s->jobs[i].busy;
            if (!any) return terra_fail(TERRA_E_CAPACITY, "gl planet: tiles cannot be had (capacity_tiles %d)", s->d.capacity_tiles);
        }
        terra_pool_wait_idle(s->pool);
    }
    /* stand-ins: each missing tile's nearest held ancestor, the coarsest where they nest; the tiles
     * under a drawn stand-in are left to it, so the ground is covered exactly once. In real time a
     * stand-in is never more than MAX_STANDIN levels coarser than a wanted tile it covers (held or not):
     * where it would be, the children on the way to the missing tiles under it (or a missing tile's
     * ancestor MAX_STANDIN levels up) are meshed before the frame, and the stand-ins chosen again */
    int nd = 0;
    double wait_t0 = 0, wait_c0 = 0, wait_up0 = 0; /* when the frame began to wait for stand-ins (wall, CPU), the uploads by then */
    for (int round = 0;; round++) {
        set_clear(&s->standins);
        s->standin_top = 0;
        for (int i = 0; i < nmissing; i++)
            if (map_get(&s->index, s->missing[i]) < 0) {
                const terra_tile_key a = held_ancestor(s, s->missing[i]);
                set_add(&s->standins, a);
                if (terra_tile_key_level(a) > s->standin_top) s->standin_top = terra_tile_key_level(a);
            }
        int nreq = 0, gap_max = 0;
        set_clear(&s->drawn); /* for now: the stand-ins too coarse for a wanted tile under them */
        for (int i = 0; i < n && s->standins.count; i++) { /* how much coarser each wanted tile is drawn */
            terra_tile_key cover = tiles[i].key;
            bool covered = false;
            for (terra_tile_key a = tiles[i].key;; a = terra_tile_key_parent(a)) {
                if (set_has(&s->standins, a)) cover = a, covered = true;
                if (terra_tile_key_level(a) >= s->standin_top) break;
            }
            if (!covered) continue;
            const int gap = terra_tile_key_level(cover) - tiles[i].level;
            if (gap > gap_max) gap_max = gap;
            if (realtime && gap > MAX_STANDIN) set_add(&s->drawn, cover);
        }
        /* under each too coarse stand-in, its children on the way to the missing tiles are meshed */
        for (int i = 0; i < nmissing && s->drawn.count; i++) {
            const terra_tile_key t = s->missing[i];
            if (map_get(&s->index, t) >= 0) continue;
            terra_tile_key r = t;
            bool covered = false;
            for (terra_tile_key a = t, below = t;; below = a, a = terra_tile_key_parent(a)) {
                if (set_has(&s->drawn, a)) r = below, covered = true;
                if (terra_tile_key_level(a) >= s->standin_top) break;
            }
            if (!covered || map_get(&s->index, r) >= 0) continue;
            bool dup = false;
            for (int k = 0; k < nreq && !dup; k++) dup = s->asked[k] == r;
            if (!dup && nreq < s->d.capacity_tiles) s->asked[nreq++] = r; /* asked[] is spent: reused */
        }
        f.standin_levels = gap_max;
        if (nreq == 0) break;
        if (round == 0) wait_t0 = terra_now_s(), wait_c0 = terra_thread_cpu_s(), wait_up0 = f.upload_ms;
        if (round > s->top * 4)
            return terra_fail(TERRA_E_CAPACITY, "gl planet: stand-ins cannot be had (capacity_tiles %d)", s->d.capacity_tiles);
        for (int before = -1;;) { /* meshed and uploaded, every one */
            give_way(s, s->asked, nreq);
            request(s, s->asked, nreq);
            terra_pool_wait_idle(s->pool);
            collect(s);
            for (int i = 0; i < JOBS && st == TERRA_OK; i++)
                if (s->jobs[i].done) st = upload(s, &s->jobs[i], false, &f.upload_ms);
            if (st != TERRA_OK) return st;
            int held = 0;
            for (int i = 0; i < nreq; i++) held += map_get(&s->index, s->asked[i]) >= 0;
            if (held == nreq) break;
            bool busy = false;
            for (int i = 0; i < JOBS; i++) busy = busy || (s->jobs[i].busy && !s->jobs[i].done);
            if (held == before && !busy) /* no room for them: every held tile is this frame's */
                return terra_fail(TERRA_E_CAPACITY, "gl planet: the frame wants more tiles than capacity_tiles (%d)",
                                  s->d.capacity_tiles);
            before = held;
        }
    }
    const double c1 = terra_thread_cpu_s();
    if (wait_t0 > 0) f.wait_ms = (terra_now_s() - wait_t0) * 1e3 - (f.upload_ms - wait_up0);
    f.stream_ms = ((wait_t0 > 0 ? wait_c0 : c1) - t0) * 1e3 - (wait_t0 > 0 ? wait_up0 : f.upload_ms);
    set_clear(&s->drawn);
    for (int i = 0; i < nmissing; i++) { /* drawn once each; a stand-in under a coarser one is left to it */
        if (map_get(&s->index, s->missing[i]) >= 0) continue;
        const terra_tile_key a = held_ancestor(s, s->missing[i]);
        if (terra_tile_key_level(a) < s->top && under_standin(s, terra_tile_key_parent(a))) continue;
        if (!set_add(&s->drawn, a)) continue;
        s->draws[nd++] = (terra_stream_draw){.key = a, .level = terra_tile_key_level(a), .fallback = true};
    }
    f.fallbacks = nd;
    for (int i = 0; i < n; i++) {
        if (map_get(&s->index, tiles[i].key) < 0 || (s->standins.count && under_standin(s, tiles[i].key))) continue;
        s->draws[nd++] = (terra_stream_draw){.key = tiles[i].key, .level = tiles[i].level, .morph_start = tiles[i].morph_start,
                                             .morph_end = tiles[i].morph_end};
    }
    s->ndraws = nd;
    st = terra_gl_draw(s->gl, &c, s->draws, nd, style);
    if (st != TERRA_OK) return st;
    const terra_gl_stats *gs = terra_gl_get_stats(s->gl);
    f.submit_ms = gs->submit_ms, f.driver_ms = gs->call_ms;
    f.cpu_ms = f.select_ms + f.stream_ms + f.wait_ms + f.submit_ms;
    f.updates = 1, f.tiles = gs->tiles, f.triangles = gs->triangles, f.draw_calls = gs->draw_calls;
    memcpy(f.per_level, gs->per_level, sizeof f.per_level);
    f.bytes_held = gs->gpu_bytes;
    f.settled = f.fallbacks == 0;
    if (fs) *fs = f;
    return TERRA_OK;
}
