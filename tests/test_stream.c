/* The streamer: cache rules as unit tests, the real loader on a pool, the pool itself.
 * (The scenarios are in test_stream_sim.c: single-threaded, so ThreadSanitizer skips them.) */
#include "check.h"
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>
#include "terra/stream.h"

/* ---- a hand-driven loader: requests wait until the test completes them ------------------------------ */

typedef struct manual {
    uint64_t tickets[256];
    terra_tile_key keys[256];
    int n;
    uint64_t done[256];
    int ndone;
    bool started[256];
} manual;

static bool man_start(void *u, uint64_t t, terra_tile_key k, void *b, size_t c) {
    (void)b, (void)c;
    manual *m = u;
    if (m->n == 256) return false;
    m->started[m->n] = false;
    m->keys[m->n] = k;
    m->tickets[m->n++] = t;
    return true;
}
static bool man_cancel(void *u, uint64_t t) {
    manual *m = u;
    for (int i = 0; i < m->n; i++)
        if (m->tickets[i] == t && !m->started[i]) {
            m->tickets[i] = m->tickets[--m->n];
            m->keys[i] = m->keys[m->n];
            m->started[i] = m->started[m->n];
            return true;
        }
    return false;
}
static bool man_poll(void *u, uint64_t *t, terra_status *s, size_t *b) {
    manual *m = u;
    if (m->ndone == 0) return false;
    *t = m->done[--m->ndone];
    *s = TERRA_OK;
    *b = 16;
    return true;
}
/* Completes every outstanding request. */
static void man_finish_all(manual *m) {
    for (int i = 0; i < m->n; i++) m->done[m->ndone++] = m->tickets[i];
    m->n = 0;
}

static terra_source *world(void) {
    terra_source *src;
    terra_world_create(&(terra_world_desc){.seed = 3}, &src);
    return src;
}

static terra_stream *make(terra_source *src, manual *m, int capacity, int in_flight, double radius) {
    terra_stream_desc d = {.source = src, .capacity_tiles = capacity, .max_in_flight = in_flight,
                           .load_radius = radius, .loader = {man_start, man_cancel, man_poll, 1024, m, NULL}};
    d.select.grid.cells = 16;
    d.select.levels = 6;
    terra_stream *s = NULL;
    CHECK(terra_stream_create(&d, &s) == TERRA_OK, "%s", terra_last_error());
    return s;
}

static void requests_coarsest_then_nearest_and_limited(void) {
    terra_source *src = world();
    manual m = {0};
    terra_stream *s = make(src, &m, 512, 5, 0);
    terra_focus f;
    CHECK(terra_stream_add_focus(s, &(terra_focus_desc){.kind = TERRA_FOCUS_CAMERA, .camera = {.eye = {10, 300, 10}}},
                                 &f) == TERRA_OK);
    CHECK(terra_stream_update(s) == TERRA_OK);
    CHECK(m.n == 5, "in-flight limit: %d requests", m.n);
    for (int i = 0; i < m.n; i++) CHECK(terra_tile_key_level(m.keys[i]) == 5, "first requests are the coarsest");
    /* nothing held yet: everything is uncovered, nothing drawn */
    const terra_stream_stats *st = terra_stream_get_stats(s);
    CHECK(st->drawn == 0 && st->uncovered > 0);
    /* then nearest first: within a round, tiles of the coarsest level, then by distance from the eye
     * in sides of the tile;
     * and no tile is asked for before its ancestors (each wanted ancestor is held or was asked for) */
    terra_tile_key asked[4096];
    int nasked = 0;
    for (int i = 0; i < m.n; i++) asked[nasked++] = m.keys[i];
    for (int round = 0; round < 60; round++) {
        man_finish_all(&m);
        CHECK(terra_stream_update(s) == TERRA_OK);
        CHECK(m.n <= 5);
        double prev = -1;
        bool past_top = false;
        for (int i = 0; i < m.n; i++) {
            const terra_tile_key k = m.keys[i];
            const int l = terra_tile_key_level(k);
            const double side = 64.0 * (double)(1 << l); /* tile0 64 m */
            const double x0 = terra_tile_key_x(k) * side, z0 = terra_tile_key_y(k) * side;
            const double dx = fmax(fmax(x0 - 10, 10 - (x0 + side)), 0), dz = fmax(fmax(z0 - 10, 10 - (z0 + side)), 0);
            const double d = sqrt(dx * dx + dz * dz) / side;
            if (l != 5) {
                if (past_top) CHECK(d >= prev - 1e-9, "round %d: %g sides asked after %g", round, d, prev);
                past_top = true, prev = d;
            } else {
                CHECK(!past_top, "round %d: a coarsest tile asked after finer ones", round);
            }
            for (terra_tile_key a = k; terra_tile_key_level(a) < 5;) {
                a = terra_tile_key_parent(a);
                if (!terra_stream_is_wanted(s, a)) continue;
                bool seen = terra_stream_is_standing(s, a);
                for (int j = 0; j < nasked && !seen; j++) seen = asked[j] == a;
                CHECK(seen, "round %d: a tile asked for before its wanted ancestor", round);
            }
            if (nasked < 4096) asked[nasked++] = k;
        }
    }
    terra_stream_destroy(s);
    terra_source_destroy(src);
}

static void never_evicts_wanted_or_drawn_and_caps_hold(void) {
    terra_source *src = world();
    manual m = {0};
    const int cap = 60;
    terra_stream *s = make(src, &m, cap, 8, 0);
    terra_focus f;
    terra_camera cam = {.eye = {0, 400, 0}, .pitch_rad = -0.3};
    terra_stream_add_focus(s, &(terra_focus_desc){.kind = TERRA_FOCUS_CAMERA, .camera = cam}, &f);
    int violations = 0;
    for (int frame = 0; frame < 400; frame++) {
        cam.eye.x += 40; /* keep moving so there is always something new to want */
        cam.yaw_rad += 0.05;
        terra_stream_update_focus(s, f, &cam);
        /* the tiles drawn last frame, to check none was evicted before being drawn again */
        man_finish_all(&m);
        CHECK(terra_stream_update(s) == TERRA_OK);
        const terra_stream_stats *st = terra_stream_get_stats(s);
        CHECK(st->standing + st->ready + st->in_flight <= cap, "tiles over the cap");
        CHECK(st->bytes_held <= st->bytes_cap && st->peak_bytes <= st->bytes_cap, "bytes over the cap");
        /* every drawn tile is standing; every wanted tile that was standing still is */
        const terra_stream_draw *d;
        int nd;
        terra_stream_draws(s, f, &d, &nd);
        for (int i = 0; i < nd; i++) violations += !terra_stream_is_standing(s, d[i].key);
    }
    CHECK(violations == 0, "%d drawn tiles not standing", violations);
    terra_stream_destroy(s);
    terra_source_destroy(src);
}

/* Completes each outstanding request with probability 1/2 (the order of arrival shuffled too). */
static void man_finish_some(manual *m, unsigned *rng) {
    for (int i = 0; i < m->n;) {
        *rng = *rng * 1103515245u + 12345u;
        if ((*rng >> 16) & 1) {
            m->done[m->ndone++] = m->tickets[i];
            m->tickets[i] = m->tickets[--m->n], m->keys[i] = m->keys[m->n], m->started[i] = m->started[m->n];
        } else {
            i++;
        }
    }
}

/* The streamer keeps its slots by state as they change (counts, the list by last wanted, arrays of
 * the loading and the ready): over random flights with jumps, a second focus coming and going,
 * requests finishing in any order and a cache too small for the view, what it reports agrees with
 * the cache itself every frame: the standing tiles listed and counted alike, in flight exactly the
 * requests the loader holds, the caps kept, every wanted tile known as wanted, a wanted tile that
 * stood still standing, each wanted tile under exactly one drawn tile (or counted uncovered). */
static void bookkeeping_agrees_with_the_cache(void) {
    terra_source *src = world();
    static terra_tile_key keys[1024], before[1024];
    for (unsigned seed = 1; seed <= 6; seed++) {
        manual m = {0};
        const int cap = 60 + 40 * (int)(seed % 3), flying = 4 + 4 * (int)(seed % 2);
        terra_stream *s = make(src, &m, cap, flying, seed % 2 ? 0 : 2000);
        terra_focus f, body = 0;
        terra_camera cam = {.eye = {0, 300, 0}, .pitch_rad = -0.3};
        terra_stream_add_focus(s, &(terra_focus_desc){.kind = TERRA_FOCUS_CAMERA, .camera = cam}, &f);
        unsigned rng = seed;
        int nbefore = 0, bad = 0;
        for (int frame = 0; frame < 300 && !bad; frame++) {
            rng = rng * 1103515245u + 12345u;
            const unsigned r = rng >> 16;
            if (r % 37 == 0) cam.eye.x += 3000, cam.eye.z -= 1500; /* a jump */
            cam.eye.x += 30.0 * (r % 5), cam.eye.y = 50 + (r % 400);
            cam.yaw_rad += 0.02 * ((int)(r % 11) - 5);
            terra_stream_update_focus(s, f, &cam);
            if (r % 23 == 0) {
                if (body) terra_stream_remove_focus(s, body), body = 0;
                else terra_stream_add_focus(s, &(terra_focus_desc){.kind = TERRA_FOCUS_ENTITY, .camera.eye = cam.eye,
                                                                    .load_radius = 300}, &body);
            }
            man_finish_some(&m, &rng);
            CHECK(terra_stream_update(s) == TERRA_OK, "%s", terra_last_error());
            const terra_stream_stats *st = terra_stream_get_stats(s);
            const int n = terra_stream_standing(s, keys, 1024);
            bad += !(n == st->standing && n <= 1024);
            for (int i = 0; i < n && i < 1024; i++) bad += !terra_stream_is_standing(s, keys[i]);
            bad += !(st->in_flight == m.n + m.ndone && st->in_flight <= flying);
            bad += !(st->standing + st->ready + st->in_flight <= cap && st->bytes_held <= st->bytes_cap);
            bad += st->bytes_held != (size_t)(st->standing + st->ready + st->in_flight) * terra_stream_tile_bytes(s);
            const terra_selected_tile *w;
            const terra_stream_draw *d;
            int nw, nd, uncovered = 0;
            terra_stream_wanted(s, f, &w, &nw);
            terra_stream_draws(s, f, &d, &nd);
            for (int i = 0; i < nw; i++) {
                bad += !terra_stream_is_wanted(s, w[i].key);
                for (int j = 0; j < nbefore; j++)
                    if (before[j] == w[i].key) bad += !terra_stream_is_standing(s, w[i].key);
                int over = 0;
                for (int j = 0; j < nd; j++) {
                    terra_tile_key a = w[i].key;
                    while (terra_tile_key_level(a) < d[j].level) a = terra_tile_key_parent(a);
                    over += a == d[j].key;
                }
                bad += over > 1;
                uncovered += over == 0;
            }
            bad += uncovered != st->uncovered;
            for (int j = 0; j < nd; j++) bad += !terra_stream_is_standing(s, d[j].key);
            CHECK(bad == 0, "seed %u frame %d: the streamer's reports disagree with its cache (standing %d listed %d, "
                  "in flight %d of %d requests, uncovered %d counted %d)", seed, frame, st->standing, n, st->in_flight,
                  m.n + m.ndone, uncovered, st->uncovered);
            nbefore = n < 1024 ? n : 1024;
            memcpy(before, keys, sizeof *keys * (size_t)nbefore);
        }
        terra_stream_destroy(s);
    }
    terra_source_destroy(src);
}

/* A turning camera has the stand-ins of the ground its turn brings into view asked for a frame ahead
 * (max_standin_levels): turning steadily with every request answered by the next frame, no frame
 * after the turn's first draws a stand-in more than 2 levels coarser than a tile it covers. The control turns alike but
 * tells the streamer of each frame's camera twice (the second time, no turn): without the margin
 * the ground coming into view at the sides needs deeper stand-ins. */
static int turning_standin_levels(bool tell_twice) {
    terra_source *src = world();
    manual m = {0};
    terra_stream_desc d = {.source = src, .capacity_tiles = 3000, .max_in_flight = 256, .max_standin_levels = 2,
                           .loader = {man_start, man_cancel, man_poll, 1024, &m, NULL}};
    d.select.grid.cells = 16;
    d.select.levels = 9;
    terra_stream *s = NULL;
    CHECK(terra_stream_create(&d, &s) == TERRA_OK, "%s", terra_last_error());
    terra_focus f;
    terra_camera cam = {.eye = {0, 60, 0}, .pitch_rad = -0.2, .fov_y_rad = 1.0, .aspect = 16.0 / 9};
    terra_stream_add_focus(s, &(terra_focus_desc){.kind = TERRA_FOCUS_CAMERA, .camera = cam}, &f);
    for (int i = 0; i < 100 && (i == 0 || terra_stream_get_stats(s)->waiting > 0); i++) { /* settled */
        man_finish_all(&m);
        CHECK(terra_stream_update(s) == TERRA_OK);
    }
    int most = 0;
    for (int frame = 0; frame < 40; frame++) {
        cam.yaw_rad += 6 * 3.14159265358979323846 / 180;
        cam.eye.x += 10;
        terra_stream_update_focus(s, f, &cam);
        if (tell_twice) terra_stream_update_focus(s, f, &cam);
        man_finish_all(&m);
        CHECK(terra_stream_update(s) == TERRA_OK);
        const int lv = terra_stream_get_stats(s)->standin_levels;
        if (frame > 0 && lv > most) most = lv; /* (the first frame of the turn comes unannounced) */
    }
    terra_stream_destroy(s);
    terra_source_destroy(src);
    return most;
}

static void turning_cameras_have_their_standins_ahead(void) {
    const int with = turning_standin_levels(false), without = turning_standin_levels(true);
    printf("  turning 6 degrees a frame: stand-ins up to %d levels coarser (%d without the margin)\n", with, without);
    CHECK(with <= 2, "a turning camera drew a stand-in %d levels coarser", with);
    CHECK(without > 2, "without the margin the turn needs no deeper stand-ins (%d): the test proves nothing", without);
}

/* Late arrivals go first: tiles asked for, then abandoned while already running, arrive late;
 * when room is needed they are evicted before any tile in view. */
static void late_arrivals_evicted_before_tiles_in_view(void) {
    terra_source *src = world();
    manual m = {0};
    terra_stream *s = make(src, &m, 700, 64, 0);
    terra_focus f;
    terra_camera here = {.eye = {0, 300, 0}}, there = {.eye = {900000, 300, 0}};
    terra_stream_add_focus(s, &(terra_focus_desc){.kind = TERRA_FOCUS_CAMERA, .camera = here}, &f);
    for (int i = 0; i < 30; i++) {
        man_finish_all(&m);
        terra_stream_update(s);
    }
    CHECK(terra_stream_get_stats(s)->evicted == 0);
    /* ask for tiles far away, start them all, move back before they arrive */
    terra_stream_update_focus(s, f, &there);
    terra_stream_update(s);
    for (int i = 0; i < m.n; i++) m.started[i] = true; /* running: cannot be cancelled */
    const int late = m.n;
    terra_tile_key late_keys[256];
    memcpy(late_keys, m.keys, sizeof(terra_tile_key) * (size_t)late);
    terra_stream_update_focus(s, f, &here);
    man_finish_all(&m);
    terra_stream_update(s); /* they arrive now, unwanted */
    CHECK(late > 0 && terra_stream_get_stats(s)->arrived >= late);
    /* fly on: the cache fills and evicts; no tile in view may go while a late arrival stands */
    terra_camera cam = here;
    int violations = 0, late_left = late;
    for (int step = 0; step < 300 && late_left > 0; step++) {
        cam.eye.z += 60;
        terra_stream_update_focus(s, f, &cam);
        const terra_stream_draw *d;
        int nd;
        terra_stream_draws(s, f, &d, &nd);
        terra_tile_key view[4096];
        int nview = nd < 4096 ? nd : 4096;
        for (int i = 0; i < nview; i++) view[i] = d[i].key;
        man_finish_all(&m);
        terra_stream_update(s);
        int late_before = late_left;
        late_left = 0;
        for (int i = 0; i < late; i++) late_left += terra_stream_is_standing(s, late_keys[i]);
        /* a tile drawn last frame and still wanted, gone while late arrivals stood at the start */
        for (int i = 0; i < nview; i++)
            if (!terra_stream_is_standing(s, view[i]) && terra_stream_is_wanted(s, view[i]) && late_before > 0)
                violations++;
    }
    CHECK(late_left == 0, "late arrivals never evicted (%d left)", late_left);
    CHECK(violations == 0, "%d tiles in view evicted before stale late arrivals", violations);
    terra_stream_destroy(s);
    terra_source_destroy(src);
}

static void cancels_requests_no_longer_wanted(void) {
    terra_source *src = world();
    manual m = {0};
    terra_stream *s = make(src, &m, 256, 16, 0);
    terra_focus f;
    terra_stream_add_focus(s, &(terra_focus_desc){.kind = TERRA_FOCUS_FIXED, .camera = {.eye = {0, 100, 0}}}, &f);
    terra_stream_update(s);
    int first = m.n;
    CHECK(first > 0);
    terra_stream_update_focus(s, f, &(terra_camera){.eye = {5e6, 100, 5e6}});
    terra_stream_update(s);
    CHECK(terra_stream_get_stats(s)->cancelled == first, "cancelled %d of %d", terra_stream_get_stats(s)->cancelled, first);
    terra_stream_destroy(s);
    terra_source_destroy(src);
}

static void unload_radius_has_hysteresis(void) {
    terra_source *src = world();
    manual m = {0};
    terra_stream *s = make(src, &m, 512, 64, 400);
    terra_focus f;
    /* a focus resting on a tile edge, nudged back and forth across it every frame */
    terra_camera c = {.eye = {256, 50, 100}};
    terra_stream_add_focus(s, &(terra_focus_desc){.kind = TERRA_FOCUS_ENTITY, .camera = c}, &f);
    long unloaded = 0, requested = 0;
    for (int i = 0; i < 200; i++) {
        c.eye.x = 256 + (i % 2 ? 0.5 : -0.5);
        terra_stream_update_focus(s, f, &c);
        man_finish_all(&m);
        terra_stream_update(s);
        if (i >= 50) {
            unloaded += terra_stream_get_stats(s)->unloaded;
            requested += terra_stream_get_stats(s)->requested;
        }
    }
    CHECK(unloaded == 0 && requested == 0, "a resting focus churns: %ld unloaded, %ld requested", unloaded, requested);
    /* moving far away lets everything near the old place go */
    c.eye.x = 1e5;
    terra_stream_update_focus(s, f, &c);
    for (int i = 0; i < 3; i++) {
        man_finish_all(&m);
        terra_stream_update(s);
    }
    terra_tile_key keys[1024];
    int n = terra_stream_standing(s, keys, 1024);
    int near_old = 0;
    for (int i = 0; i < n && i < 1024; i++) {
        double side0 = 64.0 * (double)(1 << terra_tile_key_level(keys[i]));
        double x1 = (terra_tile_key_x(keys[i]) + 1) * side0;
        if (x1 < 1e5 - 5000 && terra_tile_key_level(keys[i]) < 5) near_old++;
    }
    CHECK(near_old == 0, "%d fine tiles left standing at the old place", near_old);
    terra_stream_destroy(s);
    terra_source_destroy(src);
}

static void foci_are_listed(void) {
    terra_source *src = world();
    manual m = {0};
    terra_stream *s = make(src, &m, 128, 4, 0);
    terra_focus a, b, c;
    CHECK(terra_stream_add_focus(s, &(terra_focus_desc){.kind = TERRA_FOCUS_CAMERA}, &a) == TERRA_OK);
    CHECK(terra_stream_add_focus(s, &(terra_focus_desc){.kind = TERRA_FOCUS_ENTITY, .collision = true,
                                                        .camera = {.eye = {5, 0, 5}}},
                                 &b) == TERRA_OK);
    CHECK(terra_stream_add_focus(s, &(terra_focus_desc){.kind = TERRA_FOCUS_FIXED}, &c) == TERRA_OK);
    terra_focus_info info[8];
    CHECK(terra_stream_foci(s, info, 8) == 3);
    CHECK(info[1].kind == TERRA_FOCUS_ENTITY && info[1].collision && info[1].position.x == 5);
    CHECK(terra_stream_remove_focus(s, b) == TERRA_OK);
    CHECK(terra_stream_foci(s, info, 8) == 2);
    CHECK(terra_stream_remove_focus(s, b) == TERRA_E_NOT_FOUND);
    CHECK(terra_stream_update_focus(s, a, &(terra_camera){.eye = {NAN, 0, 0}}) == TERRA_E_INVALID);
    const terra_stream_draw *d;
    int n;
    CHECK(terra_stream_draws(s, c, &d, &n) == TERRA_E_NOT_FOUND, "a fixed point has no draws");
    terra_stream_destroy(s);
    terra_source_destroy(src);
}

static void bad_options_refused(void) {
    terra_source *src = world();
    terra_stream *s;
    CHECK(terra_stream_create(&(terra_stream_desc){0}, &s) == TERRA_E_INVALID);
    CHECK(terra_stream_create(&(terra_stream_desc){.source = src, .load_radius = 100, .unload_radius = 50}, &s) ==
          TERRA_E_INVALID);
    CHECK(strstr(terra_last_error(), "radii"), "%s", terra_last_error());
    CHECK(terra_stream_create(&(terra_stream_desc){.source = src, .budget_ms = -1}, &s) == TERRA_E_INVALID);
    CHECK(terra_stream_create(&(terra_stream_desc){.source = src, .capacity_bytes = 10}, &s) == TERRA_E_INVALID);
    CHECK(strstr(terra_last_error(), "not one tile"), "%s", terra_last_error());
    terra_source_destroy(src);
}

/* ---- the budget ---------------------------------------------------------------------------------- */

static double model_ms;
static double model_clock(void *u) {
    (void)u;
    return model_ms * 1e-3;
}
static terra_status slow_upload(void *u, terra_tile_key k, const void *d, size_t n) {
    (void)u, (void)k, (void)d, (void)n;
    model_ms += 6.0; /* one upload costs more than the whole 4 ms budget */
    return TERRA_OK;
}

/* Work larger than the budget still lands: a frame after one that ran nothing for want of budget
 * runs its first piece anyway; and no frame runs a second piece past the budget. */
static void budget_lets_oversized_work_land(void) {
    terra_source *src = world();
    manual m = {0};
    terra_stream_desc d = {.source = src, .capacity_tiles = 256, .max_in_flight = 8, .budget_ms = 4,
                           .loader = {man_start, man_cancel, man_poll, 1024, &m, NULL},
                           .upload = slow_upload, .clock = model_clock};
    d.select.grid.cells = 16;
    d.select.levels = 5;
    terra_stream *s;
    CHECK(terra_stream_create(&d, &s) == TERRA_OK);
    terra_focus f;
    terra_stream_add_focus(s, &(terra_focus_desc){.kind = TERRA_FOCUS_CAMERA, .camera = {.eye = {0, 100, 0}}}, &f);
    int uploads_total = 0, idle_runs = 0, last = -1;
    for (int frame = 0; frame < 60; frame++) {
        man_finish_all(&m);
        terra_stream_update(s);
        const terra_stream_stats *st = terra_stream_get_stats(s);
        int up = st->pieces[TERRA_WORK_UPLOAD];
        CHECK(up <= 1, "frame %d ran %d uploads of 6 ms in a 4 ms budget", frame, up);
        if (up == 0 && last == 0 && st->ready > 0) idle_runs++;
        uploads_total += up;
        last = up;
    }
    CHECK(idle_runs == 0, "%d times two frames in a row uploaded nothing while tiles waited", idle_runs);
    CHECK(uploads_total >= 25, "only %d uploads landed in 60 frames", uploads_total);
    CHECK(terra_stream_get_stats(s)->cost_ms[TERRA_WORK_UPLOAD] == 6.0);
    terra_stream_destroy(s);
    terra_source_destroy(src);
}

/* ---- what the client is told ------------------------------------------------------------------------ */

/* A client that keeps what it was uploaded, as a renderer does, and refuses the tiles of one level. */
typedef struct client {
    terra_tile_key held[1024];
    int n, uploads, releases, bad_releases, refused;
    int refuse_level; /* -1: none */
} client;
static int client_find(const client *c, terra_tile_key k) {
    for (int i = 0; i < c->n; i++)
        if (c->held[i] == k) return i;
    return -1;
}
static terra_status client_upload(void *u, terra_tile_key k, const void *d, size_t n) {
    (void)d, (void)n;
    client *c = u;
    if (terra_tile_key_level(k) == c->refuse_level) {
        c->refused++;
        return terra_fail(TERRA_E_CAPACITY, "test client: no room for level %d", c->refuse_level);
    }
    c->uploads++;
    if (client_find(c, k) < 0 && c->n < 1024) c->held[c->n++] = k; /* a second upload: the new version */
    return TERRA_OK;
}
static void client_release(void *u, terra_tile_key k) {
    client *c = u;
    int i = client_find(c, k);
    c->releases++;
    if (i < 0) {
        c->bad_releases++;
        return;
    }
    c->held[i] = c->held[--c->n];
}

static void log_to_stderr(terra_log_level level, const char *message, void *user) {
    (void)user;
    if (level >= TERRA_LOG_WARN) fprintf(stderr, "terra: %s\n", message);
}
static int upload_warnings;
static void count_upload_warnings(terra_log_level level, const char *message, void *user) {
    (void)user;
    upload_warnings += level == TERRA_LOG_WARN && strstr(message, "its upload failed: test client: no room") != NULL;
}

/* Every frame of a flight that evicts, unloads and replaces its source: what the client holds
 * (uploaded and not released) is exactly what the streamer has standing; a refused upload fails
 * the tile for good, its parent stands in, and the view still covers the ground. */
static void the_client_holds_what_stands(void) {
    terra_source *src = world();
    manual m = {0};
    client c = {.refuse_level = -1};
    terra_stream_desc d = {.source = src, .capacity_tiles = 96, .max_in_flight = 16, .load_radius = 900,
                           .loader = {man_start, man_cancel, man_poll, 1024, &m, NULL},
                           .upload = client_upload, .release = client_release, .upload_user = &c};
    d.select.grid.cells = 16;
    d.select.levels = 6;
    terra_stream *s = NULL;
    CHECK(terra_stream_create(&d, &s) == TERRA_OK, "%s", terra_last_error());
    if (!s) return;
    terra_focus f;
    terra_stream_add_focus(s, &(terra_focus_desc){.kind = TERRA_FOCUS_CAMERA, .camera = {.eye = {0, 80, 0}}}, &f);
    terra_tile_key standing[1024];
    int mismatched = 0;
    terra_set_log(count_upload_warnings, NULL); /* each refused tile is logged once, with the client's reason */
    for (int frame = 0; frame < 240; frame++) {
        if (frame == 120) terra_stream_set_source(s, src);  /* every tile made again */
        if (frame == 160) c.refuse_level = 0;              /* the finest tiles cannot be uploaded now */
        float ground = 0;
        terra_source_height(src, frame * 25.0, frame * 7.0, &ground);
        terra_camera cam = {.eye = {frame * 25.0, ground + 20.0, frame * 7.0}, .yaw_rad = 0.3};
        terra_stream_update_focus(s, f, &cam);
        if (frame % 3 != 2) man_finish_all(&m);
        CHECK(terra_stream_update(s) == TERRA_OK, "%s", terra_last_error());
        int ns = terra_stream_standing(s, standing, 1024);
        bool same = ns == c.n;
        for (int i = 0; i < ns && same; i++) same = client_find(&c, standing[i]) >= 0;
        mismatched += !same;
        const terra_stream_stats *st = terra_stream_get_stats(s);
        if (frame > 170) CHECK(st->uncovered == 0, "frame %d: %d tiles uncovered", frame, st->uncovered);
    }
    terra_set_log(log_to_stderr, NULL);
    const terra_stream_stats *st = terra_stream_get_stats(s);
    CHECK(mismatched == 0, "%d frames where the client held other tiles than stood", mismatched);
    CHECK(upload_warnings == (int)st->total_failed, "%d warnings for %llu failed tiles", upload_warnings,
          (unsigned long long)st->total_failed);
    CHECK(c.bad_releases == 0, "%d releases of tiles the client was never given", c.bad_releases);
    CHECK(c.releases > 50 && st->total_failed > 0 && c.refused > 0, "releases %d, failed %llu, refused %d", c.releases,
          (unsigned long long)st->total_failed, c.refused);
    terra_tile_key failed[64];
    int nf = terra_stream_failed(s, failed, 64);
    for (int i = 0; i < nf && i < 64; i++) CHECK(terra_tile_key_level(failed[i]) == 0, "a level-%d tile failed", terra_tile_key_level(failed[i]));
    terra_stream_destroy(s);
    terra_source_destroy(src);
}

/* A focus's velocity is kept and reported; one that is not finite is refused. */
static void focus_velocity_is_reported(void) {
    terra_source *src = world();
    manual m = {0};
    terra_stream *s = make(src, &m, 64, 4, 500);
    if (!s) return;
    terra_focus a, b;
    CHECK(terra_stream_add_focus(s, &(terra_focus_desc){.kind = TERRA_FOCUS_ENTITY, .collision = true,
                                                        .velocity = {3, -1, 40}},
                                 &a) == TERRA_OK);
    CHECK(terra_stream_add_focus(s, &(terra_focus_desc){.kind = TERRA_FOCUS_FIXED}, &b) == TERRA_OK);
    CHECK(terra_stream_set_focus_velocity(s, b, (terra_vec3){-7, 0, 0.5}) == TERRA_OK);
    terra_focus_info info[4];
    CHECK(terra_stream_foci(s, info, 4) == 2);
    for (int i = 0; i < 2; i++) {
        const terra_vec3 v = info[i].velocity, want = info[i].handle == a ? (terra_vec3){3, -1, 40} : (terra_vec3){-7, 0, 0.5};
        CHECK(v.x == want.x && v.y == want.y && v.z == want.z, "focus %u: velocity %g %g %g", info[i].handle, v.x, v.y, v.z);
    }
    CHECK(terra_stream_set_focus_velocity(s, a, (terra_vec3){NAN, 0, 0}) == TERRA_E_INVALID);
    CHECK(terra_stream_set_focus_velocity(s, 999, (terra_vec3){0, 0, 0}) == TERRA_E_NOT_FOUND);
    CHECK(terra_stream_add_focus(s, &(terra_focus_desc){.kind = TERRA_FOCUS_ENTITY, .velocity = {INFINITY, 0, 0}}, &b) ==
          TERRA_E_INVALID);
    terra_stream_destroy(s);
    terra_source_destroy(src);
}

/* A loader of the caller's that makes each tile on a thread of its own, 30 ms late, and cannot
 * cancel what it started: destroy waits for every one (under ASan, a write into a freed buffer
 * would be reported). */
typedef struct late_job {
    pthread_t thread;
    uint64_t ticket;
    void *buffer;
    _Atomic bool done, taken;
} late_job;
typedef struct late_loader {
    late_job jobs[64];
    int n;
} late_loader;
static void *late_run(void *p) {
    late_job *j = p;
    nanosleep(&(struct timespec){0, 30000000}, NULL);
    memset(j->buffer, 0x5a, 1024);
    j->done = true;
    return NULL;
}
static bool late_start(void *u, uint64_t t, terra_tile_key k, void *b, size_t c) {
    (void)k, (void)c;
    late_loader *l = u;
    if (l->n == 64) return false;
    late_job *j = &l->jobs[l->n];
    j->ticket = t;
    j->buffer = b;
    j->done = false;
    j->taken = false;
    if (pthread_create(&j->thread, NULL, late_run, j) != 0) return false;
    l->n++;
    return true;
}
static bool late_cancel(void *u, uint64_t t) { return (void)u, (void)t, false; }
static bool late_poll(void *u, uint64_t *t, terra_status *s, size_t *b) {
    late_loader *l = u;
    for (int i = 0; i < l->n; i++)
        if (l->jobs[i].done && !l->jobs[i].taken) {
            l->jobs[i].taken = true;
            *t = l->jobs[i].ticket, *s = TERRA_OK, *b = 16;
            return true;
        }
    return false;
}
static void destroy_waits_for_a_callers_loader(void) {
    terra_source *src = world();
    late_loader l = {0};
    terra_stream_desc d = {.source = src, .capacity_tiles = 64, .max_in_flight = 8,
                           .loader = {late_start, late_cancel, late_poll, 1024, &l, NULL}};
    d.select.grid.cells = 16;
    d.select.levels = 4;
    terra_stream *s = NULL;
    CHECK(terra_stream_create(&d, &s) == TERRA_OK, "%s", terra_last_error());
    if (!s) return;
    terra_focus f;
    terra_stream_add_focus(s, &(terra_focus_desc){.kind = TERRA_FOCUS_CAMERA, .camera = {.eye = {0, 3000, 0}}}, &f);
    terra_stream_update(s);
    CHECK(l.n == 8, "%d requests started", l.n);
    terra_stream_destroy(s);
    int unanswered = 0;
    for (int i = 0; i < l.n; i++) {
        unanswered += !l.jobs[i].taken;
        pthread_join(l.jobs[i].thread, NULL);
    }
    CHECK(unanswered == 0, "destroy returned with %d started requests unanswered", unanswered);
    terra_source_destroy(src);
}

/* ---- memory, measured ------------------------------------------------------------------------------ */

static size_t live_bytes, peak_live;
static void *sized_alloc(size_t n, void *u) {
    (void)u;
    size_t *p = malloc(n + 16);
    if (!p) return NULL;
    p[0] = n;
    live_bytes += n;
    if (live_bytes > peak_live) peak_live = live_bytes;
    return (char *)p + 16;
}
static void sized_free(void *q, void *u) {
    (void)u;
    if (!q) return;
    size_t *p = (size_t *)((char *)q - 16);
    live_bytes -= p[0];
    free(p);
}
static void *sized_realloc(void *q, size_t n, void *u) {
    void *r = sized_alloc(n, u);
    if (r && q) {
        size_t old = ((size_t *)((char *)q - 16))[0];
        memcpy(r, q, old < n ? old : n);
        sized_free(q, u);
    }
    return r;
}

/* The bytes the streamer holds, counted at the allocator: tile memory never passes the cap, and
 * what it holds beside the tiles (bookkeeping) is fixed at creation. */
static void memory_cap_is_measured(void) {
    terra_source *src = world();
    manual m = {0};
    terra_set_allocator(&(terra_allocator){sized_alloc, sized_realloc, sized_free, NULL});
    live_bytes = peak_live = 0;
    const size_t tile = 34848, cap = 150 * tile + tile / 2;
    terra_stream_desc d = {.source = src, .capacity_tiles = 4000, .capacity_bytes = cap, .max_in_flight = 16,
                           .loader = {man_start, man_cancel, man_poll, tile, &m, NULL}};
    d.select.grid.cells = 32;
    terra_stream *s;
    CHECK(terra_stream_create(&d, &s) == TERRA_OK, "%s", terra_last_error());
    const size_t after_create = live_bytes;
    CHECK(terra_stream_slots(s) == 150, "%d slots", terra_stream_slots(s));
    terra_focus f;
    terra_camera cam = {.eye = {0, 200, 0}};
    terra_stream_add_focus(s, &(terra_focus_desc){.kind = TERRA_FOCUS_CAMERA, .camera = cam}, &f);
    for (int frame = 0; frame < 300; frame++) {
        cam.eye.x += 50;
        cam.yaw_rad += 0.02;
        terra_stream_update_focus(s, f, &cam);
        man_finish_all(&m);
        terra_stream_update(s);
        CHECK(terra_stream_get_stats(s)->bytes_held <= cap);
    }
    CHECK(live_bytes == after_create && peak_live == after_create, "the streamer grew after creation: %zu -> %zu",
          after_create, peak_live);
    const size_t tiles_bytes = (size_t)terra_stream_slots(s) * tile;
    CHECK(tiles_bytes <= cap && after_create - tiles_bytes < 12u << 20, "tiles %zu, bookkeeping %zu", tiles_bytes,
          after_create - tiles_bytes);
    printf("  measured: %zu bytes of tiles under a cap of %zu, %zu bytes of bookkeeping\n", tiles_bytes, cap,
           after_create - tiles_bytes);
    terra_stream_destroy(s);
    CHECK(live_bytes == 0, "%zu bytes left after destroy", live_bytes);
    terra_set_allocator(NULL);
    terra_source_destroy(src);
}

/* ---- the real loader: meshing on a pool ------------------------------------------------------------- */

static void real_pool_streams_and_shuts_down_cleanly(void) {
    terra_source *src = world();
    terra_pool *pool;
    CHECK(terra_pool_create(&(terra_pool_desc){.threads = 2}, &pool) == TERRA_OK);
    terra_stream_desc d = {.source = src, .pool = pool, .capacity_tiles = 300, .max_in_flight = 8};
    d.select.grid.cells = 16;
    d.select.levels = 8;
    terra_stream *s;
    CHECK(terra_stream_create(&d, &s) == TERRA_OK, "%s", terra_last_error());
    terra_focus f;
    terra_camera cam = {.eye = {0, 200, 0}, .pitch_rad = -0.2};
    terra_stream_add_focus(s, &(terra_focus_desc){.kind = TERRA_FOCUS_CAMERA, .camera = cam}, &f);
    int standing = 0;
    for (int i = 0; i < 300 && standing < 20; i++) {
        terra_stream_update(s);
        standing = terra_stream_get_stats(s)->standing;
    }
    CHECK(standing >= 20, "only %d tiles arrived", standing);
    /* the data is a real tile: vertex heights match the source */
    const terra_stream_draw *dr;
    int nd;
    terra_stream_draws(s, f, &dr, &nd);
    CHECK(nd > 0);
    if (nd > 0) {
        const terra_grid_vertex *v = dr[0].data;
        terra_grid_vertex ref[17 * 17];
        float scratch[2048];
        CHECK(terra_grid_build(src, &(terra_grid_desc){.tile0_size = 64, .cells = 16}, dr[0].key, ref, scratch, NULL) ==
              TERRA_OK);
        CHECK(memcmp(v, ref, sizeof ref) == 0, "streamed tile differs from a tile built directly");
    }
    /* shut down with jobs in flight: move far away so requests are queued, then destroy */
    cam.eye.x = 3e6;
    terra_stream_update_focus(s, f, &cam);
    terra_stream_update(s);
    terra_stream_destroy(s);
    terra_pool_destroy(pool);
    terra_source_destroy(src);
}

static atomic_int flat10_calls;
static float flat10(void *u, double x, double z) { (void)u, (void)x, (void)z; atomic_fetch_add(&flat10_calls, 1); return 10; }
static float flat25(void *u, double x, double z) { (void)u, (void)x, (void)z; return 25; }

/* A new source: every held tile is made again; the old tiles alone are drawn until the new ones
 * cover the view as finely, then the new ones alone (never both in a frame: the seam between could
 * be deeper than any skirt), the ground never has a hole while it changes, and once the stats say
 * so the old source is called no more. */
static void replacing_the_source_rebuilds_without_holes(void) {
    terra_source *a, *b;
    terra_source_create(&(terra_source_desc){.height_at = flat10, .min_height = 10, .max_height = 10}, &a);
    terra_source_create(&(terra_source_desc){.height_at = flat25, .min_height = 25, .max_height = 25}, &b);
    terra_pool *pool;
    terra_pool_create(&(terra_pool_desc){.threads = 2}, &pool);
    terra_stream_desc d = {.source = a, .pool = pool, .capacity_tiles = 2000, .max_in_flight = 16};
    d.select.grid.cells = 16;
    d.select.levels = 6;
    terra_stream *s;
    CHECK(terra_stream_create(&d, &s) == TERRA_OK, "%s", terra_last_error());
    terra_focus f;
    terra_stream_add_focus(s, &(terra_focus_desc){.kind = TERRA_FOCUS_CAMERA, .camera = {.eye = {0, 60, 0}}}, &f);
    const terra_stream_stats *st = terra_stream_get_stats(s);
    for (int i = 0; i < 2000 && !(st->frame > 5 && st->in_flight == 0 && st->fallbacks == 0); i++) {
        terra_stream_update(s);
        terra_pool_wait_idle(pool);
    }
    CHECK(st->fallbacks == 0 && st->uncovered == 0, "never settled");
    CHECK(terra_stream_set_source(s, b) == TERRA_OK);
    int holes = 0, frames = 0, old_left = 1, mixed = 0;
    while ((old_left || st->replacing || st->in_flight_stale) && frames < 3000) {
        terra_stream_update(s);
        terra_pool_wait_idle(pool);
        frames++;
        holes += st->uncovered;
        const terra_stream_draw *dr;
        int nd;
        terra_stream_draws(s, f, &dr, &nd);
        old_left = 0;
        for (int k = 0; k < nd; k++) {
            const terra_grid_vertex *v = dr[k].data;
            CHECK(v[0].y == 10 || v[0].y == 25);
            old_left += v[0].y == 10;
        }
        mixed += old_left > 0 && old_left < nd;
        if (frames < 3) CHECK(old_left > 0, "the old ground vanished before the new one stood");
    }
    CHECK(holes == 0, "%d holes while the source changed", holes);
    CHECK(mixed == 0, "%d frames drew old and new tiles together", mixed);
    CHECK(old_left == 0 && frames < 3000, "old tiles still drawn after %d frames", frames);
    /* a new source while an edit's region is being replaced: one replacement, whole, no hole */
    terra_stream_invalidate(s, (const double[4]){-50, -50, 50, 50});
    terra_stream_update(s);
    CHECK(st->replacing, "the edit replaces");
    CHECK(terra_stream_set_source(s, a) == TERRA_OK);
    int frames2 = 0, holes2 = 0, mixed2 = 0;
    while ((st->replacing || st->in_flight_stale) && frames2 < 3000) {
        terra_stream_update(s);
        terra_pool_wait_idle(pool);
        frames2++;
        holes2 += st->uncovered;
        const terra_stream_draw *dr;
        int nd, tens = 0;
        terra_stream_draws(s, f, &dr, &nd);
        for (int k = 0; k < nd; k++) tens += ((const terra_grid_vertex *)dr[k].data)[0].y == 10;
        mixed2 += tens > 0 && tens < nd;
    }
    CHECK(frames2 < 3000 && holes2 == 0 && mixed2 == 0, "back to the first source: %d frames, %d holes, %d mixed",
          frames2, holes2, mixed2);
    CHECK(terra_stream_set_source(s, b) == TERRA_OK); /* and back, settled */
    for (int i = 0; i < 3000 && (st->replacing || st->in_flight_stale); i++) terra_stream_update(s), terra_pool_wait_idle(pool);
    const int calls = atomic_load(&flat10_calls); /* let go of: never called again */
    terra_camera moved = {.eye = {900, 60, 300}};
    terra_stream_update_focus(s, f, &moved);
    for (int i = 0; i < 30; i++) terra_stream_update(s), terra_pool_wait_idle(pool);
    CHECK(atomic_load(&flat10_calls) == calls, "the old source was called after the stats let it go");
    terra_stream_destroy(s);
    terra_pool_destroy(pool);
    terra_source_destroy(a);
    terra_source_destroy(b);
}

/* ---- the pool alone ----------------------------------------------------------------------------------- */

typedef struct count_job {
    terra_job job;
    int *counter;
} count_job;
static void count_run(terra_job *j) { __atomic_fetch_add(((count_job *)j)->counter, 1, __ATOMIC_RELAXED); }

static void pool_runs_cancels_and_queues(void) {
    terra_pool *p;
    CHECK(terra_pool_create(&(terra_pool_desc){.threads = 3}, &p) == TERRA_OK);
    terra_job_queue *q;
    CHECK(terra_job_queue_create(&q) == TERRA_OK);
    static count_job jobs[2000];
    int counter = 0;
    for (int i = 0; i < 2000; i++) {
        jobs[i] = (count_job){.job = {.run = count_run, .queue = i % 2 ? q : NULL}, .counter = &counter};
        terra_pool_submit(p, &jobs[i].job);
    }
    int cancelled = 0;
    for (int i = 1999; i >= 1000; i--) cancelled += terra_pool_cancel(p, &jobs[i].job);
    terra_pool_wait_idle(p);
    terra_job *done[2000];
    int a = terra_pool_poll(p, done, 2000), b = terra_job_queue_poll(q, done, 2000);
    CHECK(a + b + cancelled == 2000, "%d + %d + %d", a, b, cancelled);
    CHECK(__atomic_load_n(&counter, __ATOMIC_RELAXED) == 2000 - cancelled);
    for (int i = 0; i < b; i++) CHECK(done[i]->queue == q);
    /* destroy with jobs queued */
    for (int i = 0; i < 500; i++) terra_pool_submit(p, &jobs[i].job);
    terra_pool_destroy(p);
    terra_job_queue_destroy(q);
    CHECK(terra_pool_create(&(terra_pool_desc){.threads = -1}, &p) == TERRA_E_INVALID);
}

int main(void) {
    RUN(pool_runs_cancels_and_queues);
    RUN(bad_options_refused);
    RUN(foci_are_listed);
    RUN(focus_velocity_is_reported);
    RUN(the_client_holds_what_stands);
    RUN(destroy_waits_for_a_callers_loader);
    RUN(requests_coarsest_then_nearest_and_limited);
    RUN(never_evicts_wanted_or_drawn_and_caps_hold);
    RUN(late_arrivals_evicted_before_tiles_in_view);
    RUN(bookkeeping_agrees_with_the_cache);
    RUN(turning_cameras_have_their_standins_ahead);
    RUN(cancels_requests_no_longer_wanted);
    RUN(unload_radius_has_hysteresis);
    RUN(budget_lets_oversized_work_land);
    RUN(memory_cap_is_measured);
    RUN(real_pool_streams_and_shuts_down_cleanly);
    RUN(replacing_the_source_rebuilds_without_holes);
    return finish();
}
