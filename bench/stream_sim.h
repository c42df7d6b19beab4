/* A headless streaming simulator: drives a terra_stream with a fixed 60 Hz clock, a seeded world
 * and a modelled loader (latency in frames with seeded jitter, a number of workers), so a run is
 * deterministic. Shared by tests/test_stream.c (which asserts) and bench/bench_stream.c (which
 * records figures).
 *
 * Every frame it checks the camera's draws against its wanted tiles: each wanted tile covered by
 * exactly one draw (itself or an ancestor), no draw under another, nothing drawn that nobody
 * wanted. It counts uncovered frames, frames to full detail after each teleport, loads that
 * arrived and were never used, reloads, peak bytes, modelled main-thread work and allocations. */
#ifndef TERRA_STREAM_SIM_H
#define TERRA_STREAM_SIM_H

#include "terra/stream.h"

#include "../cli/fly_path.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SIM_HZ 60.0
/* bytes of one tile: a 32-cell grid tile (33 x 33 vertices of 32 bytes), as the real loader makes */
#define SIM_TILE_BYTES (33 * 33 * 32)
#define SIM_PI 3.14159265358979323846

/* ---- a growing key table for the harness's own bookkeeping ------------------------------------------ */

typedef struct sim_entry {
    terra_tile_key key;
    int used;      /* 1 when occupied */
    int arrivals;  /* times this tile arrived */
    int pending;   /* arrived and not yet used (drawn or wanted) since */
    long stamp;    /* in the draw-check table: the frame this key was last drawn */
} sim_entry;

typedef struct sim_table {
    sim_entry *e;
    size_t mask, count;
} sim_table;

static inline size_t sim_hash(terra_tile_key k) {
    k ^= k >> 31;
    k *= 0x7fb5d329728ea185ull;
    k ^= k >> 27;
    return (size_t)k;
}

static sim_entry *sim_get(sim_table *t, terra_tile_key k) {
    if ((t->count + 1) * 2 > t->mask + 1) { /* grow */
        sim_table n = {calloc((t->mask + 1) * 2, sizeof(sim_entry)), (t->mask + 1) * 2 - 1, 0};
        for (size_t i = 0; i <= t->mask; i++)
            if (t->e[i].used) {
                size_t j = sim_hash(t->e[i].key) & n.mask;
                while (n.e[j].used) j = (j + 1) & n.mask;
                n.e[j] = t->e[i];
                n.count++;
            }
        free(t->e);
        *t = n;
    }
    size_t j = sim_hash(k) & t->mask;
    while (t->e[j].used && t->e[j].key != k) j = (j + 1) & t->mask;
    if (!t->e[j].used) {
        t->e[j] = (sim_entry){.key = k, .used = 1};
        t->count++;
    }
    return &t->e[j];
}

/* ---- the modelled loader ------------------------------------------------------------------------ */

typedef struct sim_request {
    uint64_t ticket;
    terra_tile_key key;
    long start, done; /* frames; start < 0 while queued */
} sim_request;

typedef struct sim_loader {
    int latency, jitter;  /* frames from start to done: latency + [0, jitter] */
    int workers, per_frame; /* jobs each worker starts per frame */
    unsigned long long rng;
    sim_request *req;
    int nreq, cap;
    long frame;
    double *clock_s;      /* the modelled main-thread clock */
    double take_in_ms;    /* modelled cost of taking one result in */
    sim_table *seen;      /* arrivals */
    long arrivals, wasted, reloads;
} sim_loader;

static unsigned long long sim_rand(unsigned long long *s) {
    unsigned long long z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static bool sim_start(void *user, uint64_t ticket, terra_tile_key key, void *buffer, size_t capacity) {
    sim_loader *l = user;
    (void)buffer, (void)capacity;
    if (l->nreq == l->cap) return false;
    l->req[l->nreq++] = (sim_request){ticket, key, -1, 0};
    return true;
}

static bool sim_cancel(void *user, uint64_t ticket) {
    sim_loader *l = user;
    for (int i = 0; i < l->nreq; i++)
        if (l->req[i].ticket == ticket) {
            if (l->req[i].start >= 0) return false; /* running: it will complete */
            l->req[i] = l->req[--l->nreq];
            return true;
        }
    return false;
}

/* Its requests finish on the modelled clock and write no buffer: nothing to wait for. */
static void sim_drain(void *user) { (void)user; }

static bool sim_poll(void *user, uint64_t *ticket, terra_status *status, size_t *bytes) {
    sim_loader *l = user;
    int best = -1;
    for (int i = 0; i < l->nreq; i++)
        if (l->req[i].start >= 0 && l->req[i].done <= l->frame &&
            (best < 0 || l->req[i].done < l->req[best].done ||
             (l->req[i].done == l->req[best].done && l->req[i].ticket < l->req[best].ticket)))
            best = i;
    if (best < 0) return false;
    *ticket = l->req[best].ticket;
    *status = TERRA_OK;
    *bytes = 64;
    sim_entry *e = sim_get(l->seen, l->req[best].key);
    if (e->arrivals > 0) l->reloads++;
    if (e->pending) l->wasted++; /* the previous arrival was never used */
    e->arrivals++;
    e->pending = 1;
    l->arrivals++;
    /* keep arrival order deterministic: remove preserving the order of the rest */
    memmove(&l->req[best], &l->req[best + 1], sizeof *l->req * (size_t)(l->nreq - best - 1));
    l->nreq--;
    *l->clock_s += l->take_in_ms * 1e-3;
    return true;
}

/* Starts queued jobs: each worker takes up to per_frame a frame, oldest first. */
static void sim_tick(sim_loader *l) {
    int budget = l->workers * l->per_frame;
    for (int i = 0; i < l->nreq && budget > 0; i++)
        if (l->req[i].start < 0) {
            l->req[i].start = l->frame;
            l->req[i].done = l->frame + l->latency + (l->jitter ? (long)(sim_rand(&l->rng) % (unsigned)(l->jitter + 1)) : 0);
            budget--;
        }
}

/* ---- scenarios ------------------------------------------------------------------------------------ */

typedef enum sim_kind { SIM_FLYOVER, SIM_DESCENT, SIM_TURN, SIM_TELEPORT, SIM_BODIES, SIM_PATH } sim_kind;

typedef struct sim_scenario {
    const char *name;
    sim_kind kind;
    double speed;   /* m/s (flyover, bodies) */
    double seconds;
    double world_half; /* > 0: a bounded world of this half side, centred on the origin */
} sim_scenario;

typedef struct sim_config {
    int latency, jitter, workers, per_frame;
    double take_in_ms, upload_ms, budget_ms;
    int capacity_tiles, max_in_flight;
    double load_radius, body_radius; /* the camera's (0: its whole selection) and the bodies' */
    unsigned long long seed;
    int max_standin_levels; /* the streamer's (0: none) */
    bool fly_ranges; /* ranges as terra fly derives them at 1080 rows (tau 2 px, 60 degrees, the world's
                        measured level errors); otherwise the selection's defaults */
    bool settle;     /* the first frame waits, the camera still, until nothing is waiting (as terra fly's) */
} sim_config;

/* The loader model: two workers, each meshing 16 tiles a frame (a 32-cell tile of the default
 * world takes about 0.9 ms to sample and mesh here), 3 to 6 frames from start to result; taking a
 * result in costs 0.02 ms and uploading it 0.15 ms of the 4 ms frame budget. */
static const sim_config sim_default_config = {
    .latency = 3, .jitter = 3, .workers = 2, .per_frame = 16,
    .take_in_ms = 0.02, .upload_ms = 0.15, .budget_ms = 4.0,
    .capacity_tiles = 2048, .max_in_flight = 64, .load_radius = 0, .body_radius = 1500.0, .seed = 1,
};

typedef struct sim_result {
    int frames;
    int uncovered_frames;        /* after the first frame with nothing uncovered */
    int first_covered_frame;
    int coverage_errors;         /* frames whose draws overlap or cover unwanted ground */
    int frames_to_full_detail;   /* worst over the start and every teleport */
    long wasted_loads, reloads, arrivals;
    size_t peak_bytes, cap_bytes;
    double main_ms_p50, main_ms_p99, main_ms_max, budget_ms;
    double allocs_per_frame;     /* after warm-up */
    int max_fallbacks, max_wanted;
} sim_result;

static float sim_ground(const terra_source *src, double x, double z) {
    float g = 0;
    terra_source_height(src, x, z, &g);
    return g;
}

/* The camera and the bodies at frame f. */
static void sim_place(const sim_scenario *sc, const terra_source *src, long f, terra_camera *cam, terra_vec3 bodies[4],
                      int *teleported) {
    const double t = f / SIM_HZ;
    *cam = (terra_camera){.fov_y_rad = 60 * SIM_PI / 180, .aspect = 16.0 / 9.0};
    *teleported = 0;
    double x = 0, z = 0, above = 100, yaw = SIM_PI / 2, pitch = -0.1;
    switch (sc->kind) {
    case SIM_FLYOVER:
        if (sc->world_half > 0) { /* a 2 km circle about the origin, inside any world compared */
            double r = 2000.0, a = sc->speed * t / r;
            x = r * cos(a), z = r * sin(a);
            yaw = atan2(-sin(a), -cos(a)); /* along the tangent (-sin a, cos a) */
        } else {
            x = sc->speed * t;
        }
        break;
    case SIM_DESCENT: {
        double u = t / sc->seconds; /* 20 km to 10 m, exponential */
        above = 20000.0 * pow(10.0 / 20000.0, u > 1 ? 1 : u);
        pitch = -0.6;
        x = 200 * t;
        break;
    }
    case SIM_TURN:
        yaw = t < 1 ? 0 : (t < 3 ? (t - 1) * SIM_PI : 0); /* 360 degrees in 2 s */
        break;
    case SIM_TELEPORT: {
        long hop = (long)(t / 5.0);
        x = hop * 50000.0;
        z = hop * 1000.0;
        *teleported = f > 0 && f % (long)(5 * SIM_HZ) == 0;
        above = 50;
        break;
    }
    case SIM_PATH: /* terra fly's built-in path, flown over the scenario's seconds */
        *cam = terra_fly_path_camera(src, t / sc->seconds < 1 ? t / sc->seconds : 1);
        return;
    case SIM_BODIES:
        x = 20 * t;
        above = 150;
        pitch = -0.25;
        for (int b = 0; b < 4; b++) {
            double a = b * SIM_PI / 2 + 0.3, v = sc->speed * (1 + 0.25 * b);
            double bx = cos(a) * v * t, bz = sin(a) * v * t;
            bodies[b] = (terra_vec3){bx, sim_ground(src, bx, bz) + 1.0, bz};
        }
        break;
    }
    cam->eye = (terra_vec3){x, sim_ground(src, x, z) + above, z};
    cam->yaw_rad = yaw;
    cam->pitch_rad = pitch;
}

/* Allocation counting around terra_stream_update. */
static long sim_allocs;
static int sim_counting;
static void *sim_alloc(size_t n, void *u) { (void)u; sim_allocs += sim_counting; return malloc(n); }
static void *sim_realloc(void *p, size_t n, void *u) { (void)u; sim_allocs += sim_counting; return realloc(p, n); }
static void sim_free(void *p, void *u) { (void)u; free(p); }
typedef struct sim_upload_ctx { double *clock_s; double ms; } sim_upload_ctx;
static terra_status sim_upload_cost(void *user, terra_tile_key key, const void *data, size_t bytes) {
    (void)key, (void)data, (void)bytes;
    sim_upload_ctx *u = user;
    *u->clock_s += u->ms * 1e-3;
    return TERRA_OK;
}
static double sim_clock(void *user) { return *(double *)user; }

static int sim_cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Checks the camera's draws; returns false on overlap, double cover or unwanted ground. */
static bool sim_check_draws(const terra_stream *s, terra_focus cam, int top, sim_table *scratch_set, long stamp,
                            int *uncovered) {
    const terra_stream_draw *d;
    const terra_selected_tile *w;
    int nd, nw;
    terra_stream_draws(s, cam, &d, &nd);
    terra_stream_wanted(s, cam, &w, &nw);
    /* mark this frame's draws in the scratch table */
    for (int i = 0; i < nd; i++) {
        sim_entry *e = sim_get(scratch_set, d[i].key);
        if (e->stamp == stamp) return false; /* drawn twice */
        e->stamp = stamp;
    }
    bool ok = true;
    /* no draw under another draw */
    for (int i = 0; i < nd && ok; i++) {
        terra_tile_key k = d[i].key;
        for (int l = terra_tile_key_level(k); l < top; l++) {
            k = terra_tile_key_parent(k);
            sim_entry *e = sim_get(scratch_set, k);
            if (e->stamp == stamp) ok = false;
        }
    }
    /* each wanted tile covered once: itself or one ancestor drawn (no draw under it, checked above) */
    *uncovered = 0;
    for (int i = 0; i < nw && ok; i++) {
        terra_tile_key k = w[i].key;
        int covers = sim_get(scratch_set, k)->stamp == stamp;
        for (int l = terra_tile_key_level(k); l < top; l++) {
            k = terra_tile_key_parent(k);
            covers += sim_get(scratch_set, k)->stamp == stamp;
        }
        if (covers == 0) (*uncovered)++;
        if (covers > 1) ok = false;
    }
    /* every draw is a wanted tile or an ancestor of one */
    for (int i = 0; i < nd && ok; i++)
        if (!terra_stream_is_wanted(s, d[i].key) && !d[i].fallback) ok = false;
    return ok;
}

/* The selection terra fly derives at 1080 rows: 32-cell tiles of 64 m, 12 levels, tau 2 px, 60 degrees,
 * ranges from the source's measured level errors. */
static inline terra_status sim_fly_select(const terra_source *src, terra_select_desc *out) {
    terra_select_desc d = {.grid = {.cells = 32, .tile0_size = 64}, .levels = 12, .max_sse_px = 2,
                           .view_height_px = 1080, .view_fov_y_rad = SIM_PI / 3};
    terra_status st = terra_grid_level_errors(src, &d.grid, d.levels, 0, 0, d.level_error);
    return st == TERRA_OK ? terra_select_desc_resolve(&d, out) : st;
}

static int sim_run(const terra_source *src, const sim_scenario *sc, const sim_config *cfg, sim_result *r) {
    memset(r, 0, sizeof *r);
    terra_select_desc sel = {.grid.cells = 32};
    if (cfg->fly_ranges && sim_fly_select(src, &sel) != TERRA_OK) {
        fprintf(stderr, "%s: %s\n", sc->name, terra_last_error());
        return 1;
    }
    double clock_s = 0;
    sim_table seen = {calloc(1024, sizeof(sim_entry)), 1023, 0};
    sim_table drawn = {calloc(1024, sizeof(sim_entry)), 1023, 0};
    sim_loader l = {.latency = cfg->latency, .jitter = cfg->jitter, .workers = cfg->workers,
                    .per_frame = cfg->per_frame, .rng = cfg->seed, .cap = 4096, .clock_s = &clock_s,
                    .take_in_ms = cfg->take_in_ms, .seen = &seen};
    l.req = calloc((size_t)l.cap, sizeof *l.req);
    sim_upload_ctx up = {&clock_s, cfg->upload_ms};
    terra_set_allocator(&(terra_allocator){sim_alloc, sim_realloc, sim_free, NULL});
    terra_stream_desc d = {.source = src, .capacity_tiles = cfg->capacity_tiles, .max_in_flight = cfg->max_in_flight,
                           .load_radius = cfg->load_radius, .budget_ms = cfg->budget_ms,
                           .loader = {sim_start, sim_cancel, sim_poll, SIM_TILE_BYTES, &l, sim_drain},
                           .upload = sim_upload_cost, .upload_user = &up, .clock = sim_clock, .clock_user = &clock_s,
                           .max_standin_levels = cfg->max_standin_levels};
    d.select = sel;
    if (sc->world_half > 0) {
        d.select.bounds[0] = d.select.bounds[1] = -sc->world_half;
        d.select.bounds[2] = d.select.bounds[3] = sc->world_half;
    }
    terra_stream *s;
    if (terra_stream_create(&d, &s) != TERRA_OK) {
        fprintf(stderr, "%s: %s\n", sc->name, terra_last_error());
        terra_set_allocator(NULL);
        return 1;
    }
    const int levels = 12; /* the selection default, which the streamer is given */
    terra_camera cam;
    terra_vec3 bodies[4];
    int tele;
    sim_place(sc, src, 0, &cam, bodies, &tele);
    terra_focus fcam, fb[4] = {0};
    terra_stream_add_focus(s, &(terra_focus_desc){.kind = TERRA_FOCUS_CAMERA, .camera = cam}, &fcam);
    if (sc->kind == SIM_BODIES)
        for (int b = 0; b < 4; b++)
            terra_stream_add_focus(s, &(terra_focus_desc){.kind = TERRA_FOCUS_ENTITY, .camera = {.eye = bodies[b]},
                                                          .collision = true, .load_radius = cfg->body_radius},
                                   &fb[b]);
    const long frames = (long)(sc->seconds * SIM_HZ);
    double *work = malloc(sizeof(double) * (size_t)frames);
    long settled = 0; /* the loader's frames spent settling the first view */
    while (cfg->settle && settled < 100000) {
        l.frame = settled++;
        sim_tick(&l);
        if (terra_stream_update(s) != TERRA_OK || terra_stream_get_stats(s)->waiting == 0) break;
    }
    long allocs_after_warmup = 0, counted_frames = 0, since_event = 0;
    int full_detail_pending = 1;
    r->first_covered_frame = -1;
    for (long f = 0; f < frames; f++) {
        sim_place(sc, src, f, &cam, bodies, &tele);
        if (tele) {
            if (full_detail_pending && since_event > r->frames_to_full_detail) r->frames_to_full_detail = (int)since_event;
            full_detail_pending = 1;
            since_event = 0;
        }
        terra_stream_update_focus(s, fcam, &cam);
        for (int b = 0; b < 4; b++)
            if (fb[b]) terra_stream_update_focus(s, fb[b], &(terra_camera){.eye = bodies[b]});
        l.frame = settled + f;
        sim_tick(&l);
        sim_counting = f >= 10;
        long before = sim_allocs;
        if (terra_stream_update(s) != TERRA_OK) {
            fprintf(stderr, "%s frame %ld: %s\n", sc->name, f, terra_last_error());
            break;
        }
        if (f >= 10) allocs_after_warmup += sim_allocs - before, counted_frames++;
        sim_counting = 0;
        const terra_stream_stats *st = terra_stream_get_stats(s);
        work[f] = st->work_ms;
        int uncovered = 0;
        if (!sim_check_draws(s, fcam, levels - 1, &drawn, f + 1, &uncovered)) r->coverage_errors++;
        if (uncovered != st->uncovered) r->coverage_errors++;
        if (r->first_covered_frame < 0 && uncovered == 0) r->first_covered_frame = (int)f;
        if (r->first_covered_frame >= 0 && uncovered > 0) r->uncovered_frames++;
        if (st->fallbacks > r->max_fallbacks) r->max_fallbacks = st->fallbacks;
        if (st->wanted > r->max_wanted) r->max_wanted = st->wanted;
        /* tiles used this frame: drawn by the camera, or wanted by any focus */
        const terra_stream_draw *dr;
        int nd;
        terra_stream_draws(s, fcam, &dr, &nd);
        for (int i = 0; i < nd; i++) sim_get(&seen, dr[i].key)->pending = 0;
        for (size_t i = 0; i <= seen.mask; i++)
            if (seen.e[i].used && seen.e[i].pending && terra_stream_is_wanted(s, seen.e[i].key) &&
                terra_stream_is_standing(s, seen.e[i].key))
                seen.e[i].pending = 0;
        since_event++;
        if (full_detail_pending && st->fallbacks == 0 && st->uncovered == 0) {
            if (since_event - 1 > r->frames_to_full_detail) r->frames_to_full_detail = (int)since_event - 1;
            full_detail_pending = 0;
        }
        r->peak_bytes = st->peak_bytes;
        r->cap_bytes = st->bytes_cap;
    }
    if (full_detail_pending && since_event > r->frames_to_full_detail) r->frames_to_full_detail = (int)since_event;
    for (size_t i = 0; i <= seen.mask; i++)
        if (seen.e[i].used && seen.e[i].pending) l.wasted++;
    r->frames = (int)frames;
    r->wasted_loads = l.wasted;
    r->reloads = l.reloads;
    r->arrivals = l.arrivals;
    r->budget_ms = cfg->budget_ms;
    r->allocs_per_frame = counted_frames ? (double)allocs_after_warmup / (double)counted_frames : 0;
    qsort(work, (size_t)frames, sizeof *work, sim_cmp_double);
    r->main_ms_p50 = work[frames / 2];
    r->main_ms_p99 = work[(long)(0.99 * (double)(frames - 1))];
    r->main_ms_max = work[frames - 1];
    free(work);
    terra_stream_destroy(s);
    terra_set_allocator(NULL);
    free(l.req);
    free(seen.e);
    free(drawn.e);
    return 0;
}

static const sim_scenario sim_scenarios[] = {
    {"flyover_300", SIM_FLYOVER, 300, 20, 0},
    {"flyover_1000", SIM_FLYOVER, 1000, 20, 0},
    {"descent", SIM_DESCENT, 0, 60, 0},
    {"turn", SIM_TURN, 0, 4, 0},
    {"teleport", SIM_TELEPORT, 0, 30, 0},
    {"bodies", SIM_BODIES, 30, 30, 0},
};
#define SIM_SCENARIOS ((int)(sizeof sim_scenarios / sizeof sim_scenarios[0]))

/* terra fly's built-in path at 1080 rows as the scene streams it: its ranges, its cache (4,608 tiles at
 * 1080 rows), stand-ins within 2 levels, the first view settled; 12 km in 240 frames (4 s at 60 Hz,
 * 50 m a frame). */
static const sim_scenario sim_fly_scenario = {"fly_1080", SIM_PATH, 0, 4, 0};
static inline sim_config sim_fly_config(void) {
    sim_config c = sim_default_config;
    c.capacity_tiles = 4608, c.max_standin_levels = 2, c.fly_ranges = true, c.settle = true;
    return c;
}

#endif
