/* terra stream: the tile cache, requests, ancestor fallback, focus points and the frame budget. */
#include "terra/stream.h"

#include "keymap.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { SLOT_FREE = 0, SLOT_LOADING, SLOT_READY, SLOT_STANDING };

typedef struct slot {
    terra_tile_key key;
    uint8_t state;
    uint8_t level;
    bool stale;          /* made from a source since replaced: drawn until its replacement arrives */
    bool outdated;       /* loading from ground changed since it started: dropped when it arrives */
    bool newgen;         /* while replacing: made of the changed ground, not drawn before the switch */
    int32_t replacement; /* the slot loading its replacement, or -1 */
    int32_t replaces;    /* for a replacement: the stale slot it replaces, or -1 */
    uint32_t generation; /* bumped each time the slot is reused: tickets name (slot, generation) */
    int32_t at;          /* loading and ready slots: the index in their state's array */
    uint64_t last_wanted, last_drawn;
    size_t bytes;        /* bytes of data the loader wrote */
    void *data;          /* tile_bytes, allocated at creation */
} slot;                  /* (64 bytes) */

/* ---- the default loader: tiles made on a pool (grid tiles meshed from the source, or `make`) ---- */

typedef struct mesh_job {
    terra_job job;
    const terra_source *src; /* the source when the job started (it may be replaced meanwhile) */
    uint64_t ticket;
    terra_tile_key key;
    void *buffer;
    size_t capacity, bytes;
    float *scratch; /* grid meshing's; NULL with `make` */
    bool busy;
    struct mesh_loader *loader;
    char why[256]; /* the worker's terra_last_error() when the build failed */
} mesh_job;

typedef struct mesh_loader {
    terra_pool *pool;
    bool own_pool;
    terra_job_queue *queue;
    const terra_source *src;
    terra_grid_desc grid;
    terra_status (*make)(void *user, terra_tile_key key, void *buffer, size_t capacity, size_t *bytes);
    void *make_user;
    mesh_job *jobs;
    int njobs;
    int outstanding; /* submitted and not yet polled */
    char why[256];   /* why the request polled last failed (the message is the worker thread's) */
} mesh_loader;

static void mesh_run(terra_job *j) {
    mesh_job *m = (mesh_job *)j;
    const mesh_loader *l = m->loader;
    if (l->make) {
        j->status = l->make(l->make_user, m->key, m->buffer, m->capacity, &m->bytes);
    } else {
        j->status = terra_grid_build(m->src, &l->grid, m->key, m->buffer, m->scratch, NULL);
        m->bytes = sizeof(terra_grid_vertex) * (size_t)terra_grid_vertex_count(l->grid.cells);
    }
    /* the reason lives in this worker's thread-local error: keep it for the main thread */
    if (j->status != TERRA_OK) snprintf(m->why, sizeof m->why, "%s", terra_last_error());
}

static bool mesh_start(void *user, uint64_t ticket, terra_tile_key key, void *buffer, size_t capacity) {
    mesh_loader *l = user;
    for (int i = 0; i < l->njobs; i++) {
        mesh_job *m = &l->jobs[i];
        if (m->busy) continue;
        m->busy = true;
        m->src = l->src;
        m->ticket = ticket;
        m->key = key;
        m->buffer = buffer;
        m->capacity = capacity;
        m->job.run = mesh_run;
        m->job.queue = l->queue;
        m->job.status = TERRA_OK;
        l->outstanding++;
        terra_pool_submit(l->pool, &m->job);
        return true;
    }
    return false;
}

static bool mesh_cancel(void *user, uint64_t ticket) {
    mesh_loader *l = user;
    for (int i = 0; i < l->njobs; i++) {
        mesh_job *m = &l->jobs[i];
        if (!m->busy || m->ticket != ticket) continue;
        if (!terra_pool_cancel(l->pool, &m->job)) return false;
        m->busy = false;
        l->outstanding--;
        return true;
    }
    return false;
}

static bool mesh_poll(void *user, uint64_t *ticket, terra_status *status, size_t *bytes) {
    mesh_loader *l = user;
    terra_job *j;
    if (terra_job_queue_poll(l->queue, &j, 1) == 0) return false;
    mesh_job *m = (mesh_job *)j;
    *ticket = m->ticket;
    *status = j->status;
    *bytes = m->bytes;
    if (j->status != TERRA_OK) memcpy(l->why, m->why, sizeof l->why);
    m->busy = false;
    l->outstanding--;
    return true;
}

static void mesh_loader_destroy(mesh_loader *l) {
    if (!l) return;
    if (l->jobs) {
        /* nothing of ours may still run when the buffers go: cancel what waits, drain the rest */
        for (int i = 0; i < l->njobs; i++)
            if (l->jobs[i].busy && terra_pool_cancel(l->pool, &l->jobs[i].job)) {
                l->jobs[i].busy = false;
                l->outstanding--;
            }
        while (l->outstanding > 0) {
            terra_pool_wait_idle(l->pool);
            uint64_t t;
            terra_status st;
            size_t b;
            while (mesh_poll(l, &t, &st, &b)) {
            }
        }
        for (int i = 0; i < l->njobs; i++) terra_free(l->jobs[i].scratch);
    }
    if (l->own_pool) terra_pool_destroy(l->pool);
    terra_job_queue_destroy(l->queue);
    terra_free(l->jobs);
    terra_free(l);
}

static terra_status mesh_loader_create(const terra_stream_desc *d, const terra_grid_desc *grid, int njobs,
                                       mesh_loader **out) {
    mesh_loader *l = terra_calloc(1, sizeof *l);
    if (!l) return terra_fail(TERRA_E_NOMEM, "stream: out of memory");
    l->src = d->source;
    l->grid = *grid;
    l->make = d->make, l->make_user = d->make_user;
    l->pool = d->pool;
    terra_status st = TERRA_OK;
    if (!l->pool) {
        st = terra_pool_create(NULL, &l->pool);
        l->own_pool = st == TERRA_OK;
    }
    if (st == TERRA_OK) st = terra_job_queue_create(&l->queue);
    if (st == TERRA_OK) {
        l->jobs = terra_calloc((size_t)njobs, sizeof *l->jobs);
        l->njobs = njobs;
        if (!l->jobs) st = terra_fail(TERRA_E_NOMEM, "stream: out of memory");
    }
    for (int i = 0; st == TERRA_OK && i < njobs; i++) {
        l->jobs[i].loader = l;
        if (l->make) continue;
        l->jobs[i].scratch = terra_alloc(sizeof(float) * (size_t)terra_grid_scratch_floats(grid->cells));
        if (!l->jobs[i].scratch) st = terra_fail(TERRA_E_NOMEM, "stream: out of memory");
    }
    if (st != TERRA_OK) {
        mesh_loader_destroy(l);
        return st;
    }
    *out = l;
    return TERRA_OK;
}

/* ---- the streamer ------------------------------------------------------------------------------ */

/* A slot's place in the list of slots in use (not free) by last_wanted, oldest first; -1 ends it.
 * Apart from the slots, so that moving one to the end touches little memory. */
typedef struct slot_link {
    int32_t older, newer;
} slot_link;

typedef struct focus {
    terra_focus handle; /* 0: unused */
    terra_focus_kind kind;
    terra_camera camera;
    bool collision;
    terra_vec3 velocity;
    double load_radius, unload_radius; /* 0: unlimited */
    int camera_index; /* cameras: which draw list; -1 otherwise */
    double turn_deg;  /* cameras: how far the last move turned it (yaw or pitch, the larger) */
} focus;

typedef struct wanted_tile {
    terra_tile_key key;
    float dist;    /* to the nearest focus, in sides of the tile (metres over its side): set for missing tiles */
    int32_t slot;  /* the slot that held it when it was wanted, or was given it this frame (see find_slot) */
    int32_t at;    /* its place in the wanted list (for a missing tile, to note the slot it is given) */
    uint8_t level;
    bool top;      /* of the coarsest level */
    bool urgent;   /* a stand-in within max_standin_levels of a tile still coming (request order) */
} wanted_tile;

/* The tiles of a set at each level: which levels have any, and the box of their coordinates, so most
 * keys are known to have no ancestor in the set without looking one up. */
typedef struct level_boxes {
    uint32_t levels; /* bit l: some tile of level l */
    int32_t box[TERRA_TILE_MAX_LEVEL + 1][4]; /* x0, y0, x1, y1 */
} level_boxes;

typedef struct camera_lists {
    terra_selected_tile *wanted;
    int32_t *slot; /* of each wanted tile: the slot that held it when it was wanted (see slot_index) */
    int nwanted;
    terra_stream_draw *draws;
    int ndraws;
    terra_focus handle;
} camera_lists;

struct terra_stream {
    terra_stream_desc d;
    terra_select *sel;
    const terra_select_desc *sd;
    terra_stream_loader loader;
    mesh_loader *mesh; /* the default loader, if used */
    size_t tile_bytes;

    slot *slots;
    int nslots;
    int *free_slots;
    int nfree;
    key_map index; /* key -> slot */

    focus *foci;
    terra_vec3 *eyes; /* this frame's foci's places */
    int neyes;
    uint32_t next_handle;
    camera_lists *cams;

    /* Slots by state, kept as they change, so a frame never walks the whole cache: the ones in use
     * (not free) in a list by last_wanted, oldest first (eviction and unloading take from its head);
     * the loading and the ready ones in arrays; a count of the standing ones. */
    slot_link *links;
    int32_t oldest, newest;
    int *loading, nloading;
    int *ready, nready;
    int nstanding;

    /* This frame's wanted keys that no slot held, or holds since (a held tile is wanted when its
     * slot's last_wanted is this frame): a small set while they are few (a steady view), a large one
     * for the rest (after a jump, as many as can be wanted). */
    key_set unheld_few, unheld_many;
#define UNHELD_FEW 2048
    /* This frame's wanted tiles, and last frame's: the two lists run alike (the same selections in
     * the same order), so most tiles find the slot that holds them in last frame's list, at or just
     * after the place the tile before found its own (prev_at), without a look-up. */
    wanted_tile *wanted, *prev, *missing; /* missing: the best of those not held (as many as may start) */
    int nwanted, nprev, prev_at, max_wanted;
    key_set fallback_set; /* ancestors drawn this frame (per camera) */
    terra_tile_key *fallbacks; /* the same, in the order found */
    level_boxes fallback_boxes;
    key_set urgent_set;   /* stand-ins asked for first this frame (max_standin_levels) */
    terra_tile_key *chain; /* scratch: two generations of the reserve (this one and the next) */
    int *order;           /* scratch: slot indices */

    /* Tiles whose load failed, not asked for again until the source is replaced: a ring of at most
     * max_failed keys, oldest at failed_head (forgotten first when it is full), and a map of them. */
    terra_tile_key *failed_ring;
    int failed_head, nfailed, max_failed;
    key_map failed_index;

    /* budget */
    double spent_ms;
    double cost_sum[TERRA_WORK_KINDS];
    long cost_n[TERRA_WORK_KINDS];
    int ran[TERRA_WORK_KINDS];
    bool deferred[TERRA_WORK_KINDS], starved[TERRA_WORK_KINDS];

    /* A replaced source (terra_stream_set_source): until the new source's tiles cover each camera's
     * view at least as finely as the old ones do, the cameras draw old tiles only; then new ones
     * only. Never both in one frame: skirts close a seam only as deep as a tile's own border range,
     * and new ground may lie anywhere else. Meanwhile new versions of held tiles wait, arrived but
     * not uploaded (the client holds one version a key), and the selection takes the union of both
     * sources' height ranges, so the old ground in view is wanted as well as the new. */
    bool replacing;
    double region[4];           /* where the ground changed (x0, z0, x1, z1; all of it for a new source) */
    uint64_t replace_frame;     /* when it began */
    const terra_source *old_src; /* the source replaced */
    terra_source *either;        /* selection's source meanwhile: both ranges */

    uint64_t frame;
    terra_stream_stats stats;
};

static double clock_ms(const terra_stream *s) {
    return (s->d.clock ? s->d.clock(s->d.clock_user) : terra_now_s()) * 1e3;
}

size_t terra_stream_tile_bytes(const terra_stream *s) { return s->tile_bytes; }
int terra_stream_slots(const terra_stream *s) { return s->nslots; }
const terra_stream_stats *terra_stream_get_stats(const terra_stream *s) { return &s->stats; }

static uint64_t ticket_of(const terra_stream *s, int i);

void terra_stream_destroy(terra_stream *s) {
    if (!s) return;
    /* stop every load before any buffer goes */
    if (s->mesh) {
        mesh_loader_destroy(s->mesh);
    } else if (s->slots) { /* a loader of the caller's: what it has started is polled for until it ends */
        int started = 0;
        for (int i = 0; i < s->nslots; i++)
            if (s->slots[i].state == SLOT_LOADING) {
                if (s->loader.cancel(s->loader.user, ticket_of(s, i))) s->slots[i].state = SLOT_FREE;
                else started++;
            }
        if (started && s->loader.drain) {
            s->loader.drain(s->loader.user);
            started = 0;
        }
        while (started > 0) {
            uint64_t ticket;
            terra_status st;
            size_t bytes;
            if (!s->loader.poll(s->loader.user, &ticket, &st, &bytes)) {
                nanosleep(&(struct timespec){0, 1000000}, NULL);
                continue;
            }
            const int i = (int)(uint32_t)ticket;
            if (i >= 0 && i < s->nslots && s->slots[i].generation == (uint32_t)(ticket >> 32) &&
                s->slots[i].state == SLOT_LOADING) {
                s->slots[i].state = SLOT_FREE;
                started--;
            }
        }
    }
    if (s->slots)
        for (int i = 0; i < s->nslots; i++) terra_free(s->slots[i].data);
    terra_free(s->slots);
    terra_free(s->free_slots);
    map_free(&s->index);
    if (s->cams)
        for (int c = 0; c < s->d.max_cameras; c++) {
            terra_free(s->cams[c].wanted);
            terra_free(s->cams[c].slot);
            terra_free(s->cams[c].draws);
        }
    terra_free(s->cams);
    terra_free(s->foci);
    terra_free(s->eyes);
    set_free(&s->unheld_few);
    set_free(&s->unheld_many);
    set_free(&s->fallback_set);
    set_free(&s->urgent_set);
    terra_free(s->fallbacks);
    terra_free(s->chain);
    terra_free(s->loading);
    terra_free(s->links);
    terra_free(s->ready);
    map_free(&s->failed_index);
    terra_free(s->failed_ring);
    terra_free(s->wanted);
    terra_free(s->prev);
    terra_free(s->missing);
    terra_free(s->order);
    terra_select_destroy(s->sel);
    terra_source_destroy(s->either);
    terra_free(s);
}

terra_status terra_stream_create(const terra_stream_desc *desc, terra_stream **out) {
    *out = NULL;
    if (!desc || !desc->source) return terra_fail(TERRA_E_INVALID, "stream: a source is required");
    terra_stream_desc d = *desc;
    if (d.capacity_tiles == 0) d.capacity_tiles = 1024;
    if (d.max_in_flight == 0) d.max_in_flight = 16;
    if (d.budget_ms == 0) d.budget_ms = 4.0;
    if (d.max_foci == 0) d.max_foci = 16;
    if (d.max_cameras == 0) d.max_cameras = 4;
    if (d.unload_radius == 0) d.unload_radius = 1.25 * d.load_radius;
    if (d.capacity_tiles < 1) return terra_fail(TERRA_E_INVALID, "stream: capacity_tiles must be positive");
    if (d.max_in_flight < 1) return terra_fail(TERRA_E_INVALID, "stream: max_in_flight must be positive");
    if (d.max_standin_levels < 0)
        return terra_fail(TERRA_E_INVALID, "stream: max_standin_levels must not be negative (got %d)", d.max_standin_levels);
    if (!(d.budget_ms > 0)) return terra_fail(TERRA_E_INVALID, "stream: budget_ms must be positive (got %g)", d.budget_ms);
    if (d.load_radius < 0 || !(d.unload_radius >= d.load_radius))
        return terra_fail(TERRA_E_INVALID, "stream: radii must satisfy 0 <= load_radius <= unload_radius (got %g, %g)",
                          d.load_radius, d.unload_radius);
    if (d.max_foci < 1 || d.max_cameras < 1 || d.max_cameras > d.max_foci)
        return terra_fail(TERRA_E_INVALID, "stream: need 1 <= max_cameras <= max_foci");
    if (d.loader.start && (!d.loader.cancel || !d.loader.poll || d.loader.tile_bytes == 0))
        return terra_fail(TERRA_E_INVALID, "stream: a loader needs start, cancel, poll and tile_bytes");
    if (d.make && (d.loader.start || d.make_bytes == 0))
        return terra_fail(TERRA_E_INVALID, "stream: make needs make_bytes, and no loader of the caller's");

    terra_stream *s = terra_calloc(1, sizeof *s);
    if (!s) return terra_fail(TERRA_E_NOMEM, "stream: out of memory");
    s->d = d;
    terra_status st = terra_select_create(&d.select, d.source, &s->sel);
    if (st != TERRA_OK) {
        terra_free(s);
        return st;
    }
    s->sd = terra_select_get_desc(s->sel);
    if (d.loader.start) {
        s->loader = d.loader;
    } else {
        st = mesh_loader_create(&d, &s->sd->grid, d.max_in_flight, &s->mesh);
        if (st != TERRA_OK) {
            terra_stream_destroy(s);
            return st;
        }
        s->loader = (terra_stream_loader){mesh_start, mesh_cancel, mesh_poll,
                                          d.make ? d.make_bytes
                                                 : sizeof(terra_grid_vertex) * (size_t)terra_grid_vertex_count(s->sd->grid.cells),
                                          s->mesh, NULL}; /* destroy waits through the pool */
    }
    s->tile_bytes = s->loader.tile_bytes;
    if (s->d.capacity_bytes == 0) s->d.capacity_bytes = (size_t)d.capacity_tiles * s->tile_bytes;
    size_t by_bytes = s->d.capacity_bytes / s->tile_bytes;
    s->nslots = by_bytes < (size_t)d.capacity_tiles ? (int)by_bytes : d.capacity_tiles;
    if (s->nslots < 1) {
        st = terra_fail(TERRA_E_INVALID, "stream: capacity_bytes %zu holds not one tile of %zu bytes",
                        d.capacity_bytes, s->tile_bytes);
        terra_stream_destroy(s);
        return st;
    }
    const int max_tiles = s->sd->max_tiles;
    /* per focus: its selection and the coarsest tiles it pins (a disc of at most (2r/side + 3)^2) */
    const double pin_r = terra_select_range(s->sel, s->sd->levels - 1) / terra_select_tile_side(s->sel, s->sd->levels - 1);
    const int pinned = (int)((2 * pin_r + 3) * (2 * pin_r + 3)) + 9; /* pin_r <= 64 (select.h) */
    if ((int64_t)d.max_foci * (max_tiles + pinned) > (1 << 26)) {
        st = terra_fail(TERRA_E_INVALID,
                        "stream: max_foci (%d) x the tiles one focus can want (%d) must be at most 2^26: fewer foci "
                        "or a smaller max_tiles",
                        d.max_foci, max_tiles + pinned);
        terra_stream_destroy(s);
        return st;
    }
    s->max_wanted = d.max_foci * (max_tiles + pinned);
    bool ok = (s->slots = terra_calloc((size_t)s->nslots, sizeof *s->slots)) != NULL;
    ok = ok && (s->free_slots = terra_alloc(sizeof(int) * (size_t)s->nslots)) != NULL;
    ok = ok && map_init(&s->index, s->nslots);
    ok = ok && (s->foci = terra_calloc((size_t)d.max_foci, sizeof *s->foci)) != NULL;
    ok = ok && (s->eyes = terra_alloc(sizeof *s->eyes * (size_t)d.max_foci)) != NULL;
    ok = ok && (s->cams = terra_calloc((size_t)d.max_cameras, sizeof *s->cams)) != NULL;
    for (int c = 0; ok && c < d.max_cameras; c++) {
        ok = (s->cams[c].wanted = terra_alloc(sizeof(terra_selected_tile) * (size_t)max_tiles)) != NULL;
        ok = ok && (s->cams[c].slot = terra_alloc(sizeof(int32_t) * (size_t)max_tiles)) != NULL;
        ok = ok && (s->cams[c].draws = terra_alloc(sizeof(terra_stream_draw) * (size_t)max_tiles)) != NULL;
    }
    ok = ok && set_init(&s->unheld_few, s->max_wanted < UNHELD_FEW ? s->max_wanted : UNHELD_FEW);
    ok = ok && set_init(&s->unheld_many, s->max_wanted);
    ok = ok && set_init(&s->fallback_set, max_tiles);
    ok = ok && (s->fallbacks = terra_alloc(sizeof *s->fallbacks * (size_t)max_tiles)) != NULL;
    if (d.max_standin_levels > 0) ok = ok && set_init(&s->urgent_set, d.max_cameras * max_tiles); /* one a wanted tile */
    ok = ok && (s->chain = terra_alloc(sizeof *s->chain * 2 * (size_t)d.max_cameras * (size_t)max_tiles)) != NULL;
    ok = ok && (s->wanted = terra_alloc(sizeof *s->wanted * (size_t)s->max_wanted)) != NULL;
    ok = ok && (s->prev = terra_alloc(sizeof *s->prev * (size_t)s->max_wanted)) != NULL;
    ok = ok && (s->missing = terra_alloc(sizeof *s->missing * (size_t)d.max_in_flight)) != NULL;
    ok = ok && (s->order = terra_alloc(sizeof(int) * (size_t)s->nslots)) != NULL;
    ok = ok && (s->loading = terra_alloc(sizeof(int) * (size_t)s->nslots)) != NULL;
    ok = ok && (s->links = terra_alloc(sizeof *s->links * (size_t)s->nslots)) != NULL;
    ok = ok && (s->ready = terra_alloc(sizeof(int) * (size_t)s->nslots)) != NULL;
    /* the failure record holds what the cache holds, and at least every tile one focus can want in
     * a frame: a view over ground that fails everywhere asks for each tile once */
    s->max_failed = s->nslots > max_tiles + pinned ? s->nslots : max_tiles + pinned;
    ok = ok && (s->failed_ring = terra_alloc(sizeof *s->failed_ring * (size_t)s->max_failed)) != NULL;
    ok = ok && map_init(&s->failed_index, s->max_failed);
    for (int i = 0; ok && i < s->nslots; i++) ok = (s->slots[i].data = terra_alloc(s->tile_bytes)) != NULL;
    if (!ok) {
        terra_status st = terra_fail(TERRA_E_NOMEM, "stream: out of memory for %d tiles of %zu bytes", s->nslots, s->tile_bytes);
        terra_stream_destroy(s);
        return st;
    }
    for (int i = 0; i < s->nslots; i++) {
        s->free_slots[s->nfree++] = s->nslots - 1 - i;
        s->slots[i].replacement = s->slots[i].replaces = -1;
        s->links[i].older = s->links[i].newer = -1;
    }
    s->oldest = s->newest = -1;
    s->next_handle = 1;
    s->stats.bytes_cap = s->d.capacity_bytes;
    *out = s;
    return TERRA_OK;
}

/* ---- focus points ------------------------------------------------------------------------------- */

static focus *find_focus(terra_stream *s, terra_focus h) {
    if (h == 0) return NULL;
    for (int i = 0; i < s->d.max_foci; i++)
        if (s->foci[i].handle == h) return &s->foci[i];
    return NULL;
}

static bool vec_finite(terra_vec3 v) { return isfinite(v.x) && isfinite(v.y) && isfinite(v.z); }

static bool camera_ok(const terra_camera *c) {
    return isfinite(c->eye.x) && isfinite(c->eye.y) && isfinite(c->eye.z) && isfinite(c->yaw_rad) &&
           isfinite(c->pitch_rad);
}

terra_status terra_stream_add_focus(terra_stream *s, const terra_focus_desc *desc, terra_focus *out) {
    if (desc->kind != TERRA_FOCUS_CAMERA && desc->kind != TERRA_FOCUS_ENTITY && desc->kind != TERRA_FOCUS_FIXED)
        return terra_fail(TERRA_E_INVALID, "stream: unknown focus kind %d", (int)desc->kind);
    if (!camera_ok(&desc->camera)) return terra_fail(TERRA_E_INVALID, "stream: focus position is not finite");
    if (!vec_finite(desc->velocity)) return terra_fail(TERRA_E_INVALID, "stream: focus velocity is not finite");
    focus *f = NULL;
    for (int i = 0; i < s->d.max_foci && !f; i++)
        if (s->foci[i].handle == 0) f = &s->foci[i];
    if (!f) return terra_fail(TERRA_E_CAPACITY, "stream: more than max_foci (%d) focus points", s->d.max_foci);
    int cam = -1;
    if (desc->kind == TERRA_FOCUS_CAMERA) {
        for (int c = 0; c < s->d.max_cameras && cam < 0; c++)
            if (s->cams[c].handle == 0) cam = c;
        if (cam < 0) return terra_fail(TERRA_E_CAPACITY, "stream: more than max_cameras (%d) cameras", s->d.max_cameras);
    }
    if (desc->load_radius < 0 || !isfinite(desc->load_radius))
        return terra_fail(TERRA_E_INVALID, "stream: focus load_radius must be >= 0 (got %g)", desc->load_radius);
    *f = (focus){.handle = s->next_handle++, .kind = desc->kind, .camera = desc->camera,
                 .collision = desc->collision, .velocity = desc->velocity, .camera_index = cam};
    if (desc->load_radius > 0) {
        f->load_radius = desc->load_radius;
        f->unload_radius = 1.25 * desc->load_radius;
    } else {
        f->load_radius = s->d.load_radius;
        f->unload_radius = s->d.unload_radius;
    }
    if (s->next_handle == 0) s->next_handle = 1;
    if (cam >= 0) s->cams[cam].nwanted = s->cams[cam].ndraws = 0, s->cams[cam].handle = f->handle;
    *out = f->handle;
    return TERRA_OK;
}

terra_status terra_stream_update_focus(terra_stream *s, terra_focus h, const terra_camera *camera) {
    focus *f = find_focus(s, h);
    if (!f) return terra_fail(TERRA_E_NOT_FOUND, "stream: no focus %u", h);
    if (!camera_ok(camera)) return terra_fail(TERRA_E_INVALID, "stream: focus %u moved to a non-finite place", h);
    const double pi = 3.14159265358979323846;
    const double yaw = fabs(remainder(camera->yaw_rad - f->camera.yaw_rad, 2 * pi));
    const double pitch = fabs(camera->pitch_rad - f->camera.pitch_rad);
    f->turn_deg = (yaw > pitch ? yaw : pitch) * 180 / pi;
    f->camera = *camera;
    return TERRA_OK;
}

terra_status terra_stream_set_focus_velocity(terra_stream *s, terra_focus h, terra_vec3 velocity) {
    focus *f = find_focus(s, h);
    if (!f) return terra_fail(TERRA_E_NOT_FOUND, "stream: no focus %u", h);
    if (!vec_finite(velocity)) return terra_fail(TERRA_E_INVALID, "stream: focus %u: velocity is not finite", h);
    f->velocity = velocity;
    return TERRA_OK;
}

terra_status terra_stream_remove_focus(terra_stream *s, terra_focus h) {
    focus *f = find_focus(s, h);
    if (!f) return terra_fail(TERRA_E_NOT_FOUND, "stream: no focus %u", h);
    if (f->camera_index >= 0) s->cams[f->camera_index].handle = 0;
    f->handle = 0;
    return TERRA_OK;
}

int terra_stream_foci(const terra_stream *s, terra_focus_info *out, int max) {
    int n = 0;
    for (int i = 0; i < s->d.max_foci; i++) {
        const focus *f = &s->foci[i];
        if (!f->handle) continue;
        if (n < max) out[n] = (terra_focus_info){f->handle, f->kind, f->camera.eye, f->collision, f->velocity};
        n++;
    }
    return n;
}

/* ---- helpers ------------------------------------------------------------------------------------ */

/* The square of the horizontal distance from a point to a rectangle of side `side` at x0, z0. */
static double rect_distance2(double x0, double z0, double side, terra_vec3 p) {
    const double dx = p.x < x0 ? x0 - p.x : (p.x > x0 + side ? p.x - x0 - side : 0);
    const double dz = p.z < z0 ? z0 - p.z : (p.z > z0 + side ? p.z - z0 - side : 0);
    return dx * dx + dz * dz;
}

/* Horizontal distance from a point to a tile's rectangle. */
static double rect_distance(const terra_stream *s, terra_tile_key k, terra_vec3 p) {
    const double side = terra_select_tile_side(s->sel, terra_tile_key_level(k));
    return sqrt(rect_distance2(terra_tile_key_x(k) * side, terra_tile_key_y(k) * side, side, p));
}

/* The nearest focus's distance to a tile, in sides of the tile (the foci this frame: s->eyes). */
static double nearest_focus_sides(const terra_stream *s, terra_tile_key k) {
    const double side = terra_select_tile_side(s->sel, terra_tile_key_level(k));
    const double x0 = terra_tile_key_x(k) * side, z0 = terra_tile_key_y(k) * side;
    double best = INFINITY;
    for (int i = 0; i < s->neyes; i++) {
        const double d2 = rect_distance2(x0, z0, side, s->eyes[i]);
        if (d2 < best) best = d2;
    }
    return sqrt(best) / side;
}

static slot *slot_of(const terra_stream *s, terra_tile_key k) {
    int32_t i = map_get(&s->index, k);
    return i < 0 ? NULL : &s->slots[i];
}

/* The ancestor `up` levels above k (k itself for 0). */
static inline terra_tile_key ancestor(terra_tile_key k, int up) {
    return terra_tile_key_make(terra_tile_key_face(k), terra_tile_key_level(k) + up, terra_tile_key_x(k) >> up,
                               terra_tile_key_y(k) >> up); /* >>: floor division of the signed coordinates */
}

/* ---- slots by state ----------------------------------------------------------------------------- */

static void unlink_slot(terra_stream *s, int i) {
    slot_link *l = s->links;
    if (l[i].older >= 0) l[l[i].older].newer = l[i].newer;
    else s->oldest = l[i].newer;
    if (l[i].newer >= 0) l[l[i].newer].older = l[i].older;
    else s->newest = l[i].older;
    l[i].older = l[i].newer = -1;
}

/* Puts slot i last in the list of slots in use (wanted this frame: the list stays by last_wanted). */
static void link_newest(terra_stream *s, int i) {
    s->links[i].older = s->newest, s->links[i].newer = -1;
    if (s->newest >= 0) s->links[s->newest].newer = i;
    else s->oldest = i;
    s->newest = i;
}

/* Slot i is wanted this frame. */
static void touch(terra_stream *s, int i) {
    slot *sl = &s->slots[i];
    if (sl->last_wanted == s->frame) return;
    sl->last_wanted = s->frame;
    if (s->newest != i) {
        unlink_slot(s, i);
        link_newest(s, i);
    }
}

static void array_remove(terra_stream *s, int *a, int *n, int i) {
    const int at = s->slots[i].at, last = a[--*n];
    a[at] = last;
    s->slots[last].at = at;
}

/* Every change of a slot's state goes through here: the arrays, the count and the list follow it. */
static void set_state(terra_stream *s, int i, uint8_t to) {
    slot *sl = &s->slots[i];
    switch (sl->state) {
    case SLOT_LOADING: array_remove(s, s->loading, &s->nloading, i); break;
    case SLOT_READY: array_remove(s, s->ready, &s->nready, i); break;
    case SLOT_STANDING: s->nstanding--; break;
    default: link_newest(s, i); break; /* a free slot comes into use, wanted this frame */
    }
    switch (to) {
    case SLOT_LOADING: sl->at = s->nloading, s->loading[s->nloading++] = i; break;
    case SLOT_READY: sl->at = s->nready, s->ready[s->nready++] = i; break;
    case SLOT_STANDING: s->nstanding++; break;
    default: unlink_slot(s, i); break;
    }
    sl->state = to;
}

static bool has_unheld(const terra_stream *s, terra_tile_key k) {
    return set_has(&s->unheld_few, k) || (s->unheld_many.count && set_has(&s->unheld_many, k));
}

/* Adds k to the wanted keys not held; false if it is there already. */
static bool add_unheld(terra_stream *s, terra_tile_key k) {
    if (s->unheld_few.count < s->unheld_few.capacity) return set_add(&s->unheld_few, k);
    return !set_has(&s->unheld_few, k) && set_add(&s->unheld_many, k);
}

/* Frees slot i; `tell`: a standing tile's client hears that it is let go of (not one whose key a
 * newer version takes over). */
static void release_slot(terra_stream *s, int i, bool tell) {
    slot *sl = &s->slots[i];
    if (tell && sl->state == SLOT_STANDING && s->d.upload && s->d.release) s->d.release(s->d.upload_user, sl->key);
    if (map_get(&s->index, sl->key) == i) map_del(&s->index, sl->key); /* a replacement is not mapped yet */
    if (sl->last_wanted == s->frame) add_unheld(s, sl->key); /* still wanted this frame */
    if (sl->replacement >= 0) s->slots[sl->replacement].replaces = -1;
    if (sl->replaces >= 0) s->slots[sl->replaces].replacement = -1;
    sl->replacement = sl->replaces = -1;
    set_state(s, i, SLOT_FREE);
    sl->generation++;
    s->free_slots[s->nfree++] = i;
}

/* A tile stands: if it replaces a stale one, that one goes and this one takes its key. */
static void now_standing(terra_stream *s, int i) {
    slot *sl = &s->slots[i];
    set_state(s, i, SLOT_STANDING);
    if (sl->replaces >= 0) release_slot(s, sl->replaces, false);
    map_put(&s->index, sl->key, i);
}

/* ---- failed tiles ------------------------------------------------------------------------------- */

static inline bool is_failed(const terra_stream *s, terra_tile_key k) { return s->nfailed && map_get(&s->failed_index, k) >= 0; }

/* Remembers a failed tile; when the record is full the oldest is forgotten. */
static void record_failed(terra_stream *s, terra_tile_key k) {
    if (is_failed(s, k)) return;
    int at;
    if (s->nfailed == s->max_failed) {
        at = s->failed_head;
        map_del(&s->failed_index, s->failed_ring[at]);
        s->failed_head = (s->failed_head + 1) % s->max_failed;
    } else {
        at = (s->failed_head + s->nfailed++) % s->max_failed;
    }
    s->failed_ring[at] = k;
    map_put(&s->failed_index, k, at);
}

static void forget_failures(terra_stream *s) {
    for (int i = 0; i < s->nfailed; i++) map_del(&s->failed_index, s->failed_ring[(s->failed_head + i) % s->max_failed]);
    s->nfailed = s->failed_head = 0;
}

static uint64_t ticket_of(const terra_stream *s, int i) {
    return ((uint64_t)s->slots[i].generation << 32) | (uint32_t)i;
}

/* The slot holding key k, from `hint`: the one that held it when it was wanted this frame (-1: none;
 * NO_HINT: not known). Between the wanting and the requests nothing maps a key anew (take_in and a
 * replacement's end only let slots go or move a key from a slot let go of to its new version), so a
 * hint still holding k is its slot, one let go of since is looked up again, and none stays none. */
#define NO_HINT (-2)
static bool holds(const terra_stream *s, int32_t i, terra_tile_key k) {
    /* (a slot in use and not a replacement is the one the index maps its key to) */
    return s->slots[i].state != SLOT_FREE && s->slots[i].key == k && s->slots[i].replaces < 0;
}

static int32_t slot_index(const terra_stream *s, terra_tile_key k, int32_t hint) {
    if (hint == -1) return -1;
    if (hint >= 0 && holds(s, hint, k)) return hint;
    return map_get(&s->index, k);
}

/* Slot i's lines asked for ahead (i < 0: none): wanting tiles touches their slots in no order
 * memory likes, so the slot of the tile AHEAD places on is asked for while this one is handled
 * (a third less time for the bookkeeping of a 1080p flight). */
#define AHEAD 8
static inline void prefetch_slot(const terra_stream *s, int32_t i) {
#if defined(__GNUC__)
    if (i >= 0) __builtin_prefetch(&s->slots[i], 1), __builtin_prefetch(&s->links[i], 1);
#else
    (void)s, (void)i;
#endif
}

/* The slot holding k, found by way of last frame's wanted list when it has k at prev_at or a few
 * places after (tiles that came or went in between are passed over). Its entry names the slot that
 * held the tile when it was wanted, or was given it later that frame (request_missing), or -1 for
 * none: only requests give a key a slot of its own, so -1 is still true, and a slot let go of since
 * no longer holds the key (looked up again). Most tiles not held are known so without a look-up. */
static int32_t find_slot(terra_stream *s, terra_tile_key k) {
    const int end = s->prev_at + 8 < s->nprev ? s->prev_at + 8 : s->nprev;
    for (int j = s->prev_at; j < end; j++)
        if (s->prev[j].key == k) {
            s->prev_at = j + 1;
            if (j + AHEAD < s->nprev) prefetch_slot(s, s->prev[j + AHEAD].slot);
            const int32_t i = s->prev[j].slot;
            if (i < 0 || holds(s, i, k)) return i;
            break;
        }
    return map_get(&s->index, k);
}

/* Wants tile k this frame; returns its slot (-1: none), NO_HINT if it was wanted already. (A held
 * tile is marked in its slot, so only tiles not held go to a set: the few, in a steady view.) */
static int32_t add_wanted(terra_stream *s, terra_tile_key k, int level) {
    if (s->nwanted >= s->max_wanted) return NO_HINT;
    const int32_t i = find_slot(s, k);
    if (i >= 0 ? s->slots[i].last_wanted == s->frame : !add_unheld(s, k)) return NO_HINT;
    s->wanted[s->nwanted] = (wanted_tile){k, 0, i, s->nwanted, (uint8_t)level, level == s->sd->levels - 1, false};
    s->nwanted++;
    if (i >= 0) {
        touch(s, i);
        if (s->slots[i].replacement >= 0) touch(s, s->slots[i].replacement);
    }
    return i;
}

/* A wanted tile that failed has its parent wanted in its place (and so on up while they fail): the
 * ground nearest in detail stands in for it, not whatever coarser tile happens to be held. */
static void want_stand_in(terra_stream *s, terra_tile_key k, int level) {
    const int top = s->sd->levels - 1;
    while (level < top && is_failed(s, k)) {
        k = terra_tile_key_parent(k), level++;
        add_wanted(s, k, level);
    }
}

/* ---- the budget --------------------------------------------------------------------------------- */

/* A piece of `kind` starts when its mean cost so far fits in what is left of the frame, or when
 * the last frame ran none of it for want of budget and this frame has run none yet. */
static bool may_start(terra_stream *s, int kind) {
    double mean = s->cost_n[kind] ? s->cost_sum[kind] / (double)s->cost_n[kind] : 0.0;
    if (s->spent_ms + mean <= s->d.budget_ms) return true;
    if (s->starved[kind] && s->ran[kind] == 0) return true;
    s->deferred[kind] = true;
    return false;
}

static void spent(terra_stream *s, int kind, double ms) {
    s->spent_ms += ms;
    s->cost_sum[kind] += ms;
    s->cost_n[kind]++;
    s->ran[kind]++;
}

/* A tile failed for good: logged, remembered so it is never asked for again (its ancestor stands
 * in), and a stale tile it was to replace stays drawn meanwhile. */
static void failed(terra_stream *s, int i, const char *why) {
    slot *sl = &s->slots[i];
    terra_log(TERRA_LOG_WARN, "stream: tile %d/%d/%d failed and will not be asked for again: %s",
              terra_tile_key_level(sl->key), terra_tile_key_x(sl->key), terra_tile_key_y(sl->key), why);
    record_failed(s, sl->key);
    release_slot(s, i, false);
    s->stats.failed++;
    s->stats.total_failed++;
}

static void upload(terra_stream *s, int i) {
    slot *sl = &s->slots[i];
    double t0 = clock_ms(s);
    terra_status st = s->d.upload(s->d.upload_user, sl->key, sl->data, sl->bytes);
    if (st == TERRA_OK) {
        now_standing(s, i);
    } else {
        char why[160];
        snprintf(why, sizeof why, "its upload failed: %s", terra_last_error()[0] ? terra_last_error() : terra_error_string(st));
        failed(s, i, why);
    }
    spent(s, TERRA_WORK_UPLOAD, clock_ms(s) - t0);
}

/* Sorts slot indices coarsest first, by insertion: n is a handful per frame. */
static void sort_slots_by_level(terra_stream *s, int *idx, int n) {
    for (int a = 1; a < n; a++) {
        int v = idx[a], b = a;
        while (b > 0 && s->slots[idx[b - 1]].level < s->slots[v].level) {
            idx[b] = idx[b - 1];
            b--;
        }
        idx[b] = v;
    }
}

/* Takes results in and uploads them while the budget allows. */
/* A new version of a held tile, arrived while replacing: it waits, not uploaded, for the switch. */
static bool held_back(const terra_stream *s, const slot *sl) { return s->replacing && sl->replaces >= 0; }

static void take_in(terra_stream *s) {
    /* tiles that came in earlier and wait for their upload, coarsest first */
    if (s->d.upload) {
        int n = 0;
        for (int k = 0; k < s->nready; k++)
            if (!held_back(s, &s->slots[s->ready[k]])) s->order[n++] = s->ready[k];
        sort_slots_by_level(s, s->order, n);
        for (int k = 0; k < n && may_start(s, TERRA_WORK_UPLOAD); k++) upload(s, s->order[k]);
    }
    while (may_start(s, TERRA_WORK_TAKE_IN)) {
        double t0 = clock_ms(s);
        uint64_t ticket;
        terra_status st;
        size_t bytes;
        if (!s->loader.poll(s->loader.user, &ticket, &st, &bytes)) break;
        int i = (int)(uint32_t)ticket;
        if (i < 0 || i >= s->nslots || s->slots[i].generation != (uint32_t)(ticket >> 32) ||
            s->slots[i].state != SLOT_LOADING) {
            spent(s, TERRA_WORK_TAKE_IN, clock_ms(s) - t0);
            continue; /* a loader answering for a request it no longer had: ignore */
        }
        slot *sl = &s->slots[i];
        if (sl->outdated) { /* the ground changed under it while it loaded: asked for again */
            release_slot(s, i, false);
            spent(s, TERRA_WORK_TAKE_IN, clock_ms(s) - t0);
            continue;
        }
        if (st != TERRA_OK || bytes > s->tile_bytes) {
            failed(s, i, st != TERRA_OK ? (s->mesh && s->mesh->why[0] ? s->mesh->why : terra_error_string(st))
                                        : "larger than its buffer");
        } else {
            sl->bytes = bytes;
            if (s->d.upload || held_back(s, sl)) set_state(s, i, SLOT_READY);
            else now_standing(s, i);
            s->stats.arrived++;
            s->stats.total_arrived++;
        }
        spent(s, TERRA_WORK_TAKE_IN, clock_ms(s) - t0);
        if (sl->state == SLOT_READY && !held_back(s, sl) && may_start(s, TERRA_WORK_UPLOAD)) upload(s, i);
    }
}

/* ---- selection of what is wanted ---------------------------------------------------------------- */

/* A camera's frustum with its sides, top and bottom turned out by `deg` degrees. */
static void camera_frustum_widened(const terra_camera *cam, double deg, terra_frustum *out) {
    const double pi = 3.14159265358979323846, d = deg * pi / 180, most = 85 * pi / 180;
    terra_camera w = *cam;
    const double half_y = 0.5 * (cam->fov_y_rad > 0 ? cam->fov_y_rad : pi / 3);
    const double half_x = atan(tan(half_y) * (cam->aspect > 0 ? cam->aspect : 16.0 / 9.0));
    const double y = fmin(half_y + d, most), x = fmin(half_x + d, most);
    w.fov_y_rad = 2 * y;
    w.aspect = tan(x) / tan(y);
    terra_camera_frustum(&w, out);
}

/* Whether a box lies wholly outside one of a frustum's side planes (planes 0 to 3: what a widened
 * frustum widens; its near and far planes are the camera's own). */
static inline bool beside(const terra_frustum *fr, const terra_box3 *b) {
    for (int i = 0; i < 4; i++) {
        const terra_plane *p = &fr->planes[i];
        const double x = p->a >= 0 ? b->max.x : b->min.x, y = p->b >= 0 ? b->max.y : b->min.y,
                     z = p->c >= 0 ? b->max.z : b->min.z; /* the corner furthest inward */
        if (p->a * x + p->b * y + p->c * z + p->d < 0) return true;
    }
    return false;
}

/* A turning camera's margin: twice its last turn, at most this many degrees. */
#define MAX_MARGIN_DEG 30.0

/* A tile just outside a turning camera's view: its stand-in (the ancestor max_standin_levels - 1
 * up) is wanted and asked for first, so if the turn goes on it is there when the tile comes into view. */
static void want_ahead(terra_stream *s, terra_tile_key k, int level) {
    const int top = s->sd->levels - 1;
    const int up = s->d.max_standin_levels - 1 < top - level ? s->d.max_standin_levels - 1 : top - level;
    const terra_tile_key a = ancestor(k, up);
    const int32_t i = add_wanted(s, a, level + up);
    if (i == NO_HINT || is_failed(s, a)) return; /* wanted already, or never coming */
    if (i < 0 || s->slots[i].state != SLOT_STANDING) set_add(&s->urgent_set, a);
}

static terra_status gather_wanted(terra_stream *s) {
    set_clear(&s->unheld_few);
    set_clear(&s->unheld_many);
    wanted_tile *t = s->prev;
    s->prev = s->wanted, s->nprev = s->nwanted, s->prev_at = 0;
    s->wanted = t, s->nwanted = 0;
    s->neyes = 0;
    for (int i = 0; i < s->d.max_foci; i++)
        if (s->foci[i].handle) s->eyes[s->neyes++] = s->foci[i].camera.eye;
    const int top = s->sd->levels - 1;
    const double top_side = terra_select_tile_side(s->sel, top);
    terra_tile_key *gen = s->chain; /* the reserve's first generation: what the cameras select */
    int ngen = 0;
    if (s->urgent_set.keys) set_clear(&s->urgent_set);
    for (int i = 0; i < s->d.max_foci; i++) {
        focus *f = &s->foci[i];
        if (!f->handle) continue;
        const bool camera = f->kind == TERRA_FOCUS_CAMERA;
        /* a camera turning (with max_standin_levels) selects over a margin around its view too: the
         * ground a turn like its last brings into view next frame */
        const double margin = camera && s->d.max_standin_levels > 0 ? fmin(2 * f->turn_deg, MAX_MARGIN_DEG) : 0;
        terra_frustum fr, wide;
        if (camera) terra_camera_frustum(&f->camera, &fr);
        if (margin >= 0.5) camera_frustum_widened(&f->camera, margin, &wide);
        const terra_selected_tile *tiles;
        int n;
        const double t0 = clock_ms(s);
        terra_status st = terra_select_run(s->sel, f->camera.eye, margin >= 0.5 ? &wide : camera ? &fr : NULL, &tiles, &n);
        const bool ahead = margin >= 0.5 && st == TERRA_OK;
        if (margin >= 0.5 && st == TERRA_E_CAPACITY) /* no room for the margin in the selection's output */
            st = terra_select_run(s->sel, f->camera.eye, &fr, &tiles, &n);
        s->stats.select_ms += clock_ms(s) - t0;
        if (st != TERRA_OK) return st;
        camera_lists *cl = f->camera_index >= 0 ? &s->cams[f->camera_index] : NULL;
        if (cl) cl->nwanted = 0;
        for (int k = 0; k < n; k++) {
            if (f->load_radius > 0 && rect_distance(s, tiles[k].key, f->camera.eye) > f->load_radius) continue;
            if (ahead && beside(&fr, &tiles[k].box)) {
                want_ahead(s, tiles[k].key, tiles[k].level);
                continue;
            }
            const int32_t i = add_wanted(s, tiles[k].key, tiles[k].level);
            if (camera) gen[ngen++] = tiles[k].key;
            if (cl) cl->slot[cl->nwanted] = i, cl->wanted[cl->nwanted++] = tiles[k];
            if (s->nfailed) want_stand_in(s, tiles[k].key, tiles[k].level);
        }
        /* The coarsest tiles within the focus's reach plus one tile more, always: every wanted tile
         * then has a standing ancestor to fall back on, even just after a jump of less than a
         * coarsest tile or a turn toward ground never seen. */
        /* (no farther than the coarsest range: nothing past it is ever selected, and the disc stays
         * the size the wanted list was made for, however long a radius) */
        const double range_top = terra_select_range(s->sel, top);
        const double reach = (f->load_radius > 0 && f->load_radius < range_top ? f->load_radius : range_top) + top_side;
        const double ex = f->camera.eye.x, ez = f->camera.eye.z;
        const int32_t x0 = (int32_t)floor((ex - reach) / top_side), x1 = (int32_t)floor((ex + reach) / top_side);
        const int32_t z0 = (int32_t)floor((ez - reach) / top_side), z1 = (int32_t)floor((ez + reach) / top_side);
        const double *b = s->sd->bounds;
        const bool bounded = b[0] != 0 || b[1] != 0 || b[2] != 0 || b[3] != 0;
        for (int32_t tz = z0; tz <= z1; tz++)
            for (int32_t tx = x0; tx <= x1; tx++) {
                if (bounded && ((tx + 1) * top_side <= b[0] || tx * top_side >= b[2] ||
                                (tz + 1) * top_side <= b[1] || tz * top_side >= b[3]))
                    continue;
                const terra_tile_key k = terra_tile_key_make(0, top, tx, tz);
                if (rect_distance(s, k, f->camera.eye) <= reach) add_wanted(s, k, top);
            }
    }
    /* The reserve: the ancestors of every tile a camera wants, the parents first, then the
     * grandparents and so on up, while the cap has room for them beside the rest of what is wanted
     * (and what may be in flight). Requested coarsest first, a tile still coming then falls back one
     * or two levels, and ground just come into view soon has the whole chain above it, not only the
     * coarsest tile (the chains are shared: about a third as many tiles as are wanted). */
    /* (One generation at a time: the parents of the one before, in the order they first appear, the
     * cameras' wanted tiles the first. The selection lists tiles depth first, so siblings come
     * together and a parent is kept once unless it comes again apart: a generation is about a
     * quarter of the one before.) */
    int room = s->nslots - s->nwanted - s->d.max_in_flight;
    terra_tile_key *next = s->chain + (size_t)s->d.max_cameras * (size_t)s->sd->max_tiles;
    while (room > 0 && ngen > 0) {
        int nnext = 0;
        for (int k = 0; k < ngen && room > 0; k++) {
            const int level = terra_tile_key_level(gen[k]) + 1;
            if (level >= top) continue;
            const terra_tile_key a = ancestor(gen[k], 1);
            if (nnext > 0 && next[nnext - 1] == a) continue;
            next[nnext++] = a;
            const int before = s->nwanted;
            add_wanted(s, a, level);
            room -= s->nwanted - before;
        }
        terra_tile_key *t = gen;
        gen = next, next = t, ngen = nnext;
    }
    return TERRA_OK;
}

/* ---- draws ------------------------------------------------------------------------------------------ */

/* The nearest ancestor of a failed tile that has not failed (the one wanted in its place), or the
 * coarsest failed one when all have. */
static terra_tile_key stand_in_of(const terra_stream *s, terra_tile_key k, int level) {
    const int top = s->sd->levels - 1;
    while (level < top && is_failed(s, k)) k = terra_tile_key_parent(k), level++;
    return k;
}

static void boxes_clear(level_boxes *b) { b->levels = 0; }

static void boxes_add(level_boxes *b, terra_tile_key k) {
    const int l = terra_tile_key_level(k);
    const int32_t x = terra_tile_key_x(k), y = terra_tile_key_y(k);
    int32_t *r = b->box[l];
    if (!(b->levels >> l & 1)) {
        b->levels |= 1u << l;
        r[0] = r[2] = x, r[1] = r[3] = y;
        return;
    }
    if (x < r[0]) r[0] = x;
    if (y < r[1]) r[1] = y;
    if (x > r[2]) r[2] = x;
    if (y > r[3]) r[3] = y;
}

/* The level of the coarsest strict ancestor of k in `set` (whose levels and boxes are `b`), -1 when
 * none is: only the levels the set has, and only where k's ancestor falls in their box, are looked up. */
static int outermost_in(const key_set *set, const level_boxes *b, terra_tile_key k, int top) {
    const int level = terra_tile_key_level(k);
    const int32_t x = terra_tile_key_x(k), y = terra_tile_key_y(k);
    for (int l = top; l > level; l--) {
        if (!(b->levels >> l & 1)) continue;
        const int32_t ax = x >> (l - level), ay = y >> (l - level); /* floor division */
        const int32_t *r = b->box[l];
        if (ax < r[0] || ax > r[2] || ay < r[1] || ay > r[3]) continue;
        if (set_has(set, ancestor(k, l - level))) return l;
    }
    return -1;
}

static void push_draw(terra_stream *s, camera_lists *cl, slot *sl, bool fallback) {
    float ms, me;
    terra_select_morph(s->sel, sl->level, &ms, &me);
    cl->draws[cl->ndraws++] = (terra_stream_draw){sl->key, sl->level, ms, me, sl->data, sl->bytes, fallback};
    sl->last_drawn = s->frame;
}

/* Replaces each wanted tile not standing by its nearest standing ancestor, dropping whatever an
 * ancestor covers: the camera's wanted ground is covered exactly once. */
static bool meets(const terra_stream *s, terra_tile_key k, const double r[4]) {
    const double side = terra_select_tile_side(s->sel, terra_tile_key_level(k));
    const double x0 = terra_tile_key_x(k) * side, z0 = terra_tile_key_y(k) * side;
    return x0 <= r[2] && x0 + side >= r[0] && z0 <= r[3] && z0 + side >= r[1];
}

/* Whether a slot may be drawn this frame: standing, and of the generation drawn. While replacing
 * that is the old ground: stale tiles, and tiles of ground that did not change; after, new ones. */
static bool drawable(const terra_stream *s, const slot *sl) {
    if (!sl || sl->state != SLOT_STANDING) return false;
    return s->replacing ? !sl->newgen : !sl->stale;
}

/* Whether key k has a version from the new source: standing, or arrived and waiting for the switch. */
static bool renewed(const terra_stream *s, terra_tile_key k) {
    const slot *sl = slot_of(s, k);
    if (!sl || sl->state == SLOT_FREE) return false;
    if (!sl->stale) return !sl->outdated && (sl->state == SLOT_STANDING || sl->state == SLOT_READY);
    return sl->replacement >= 0 && s->slots[sl->replacement].state == SLOT_READY;
}

/* Levels up from a wanted tile to the nearest key that `has`; INT_MAX when none. */
static int levels_to(const terra_stream *s, const terra_selected_tile *w, bool (*has)(const terra_stream *, terra_tile_key)) {
    const int top = s->sd->levels - 1;
    terra_tile_key a = w->key;
    for (int l = w->level, up = 0; l <= top; l++, up++) {
        if (has(s, a)) return up;
        a = terra_tile_key_parent(a);
    }
    return INT_MAX;
}

static bool old_drawable(const terra_stream *s, terra_tile_key k) { return drawable(s, slot_of(s, k)); }

static void end_replacing(terra_stream *s) {
    s->replacing = false;
    for (int i = 0; i < s->nslots; i++) s->slots[i].newgen = false;
    terra_select_set_source(s->sel, s->d.source);
    terra_source_destroy(s->either);
    s->either = NULL;
    s->old_src = NULL;
    /* the new versions that waited stand now, whatever the budget: the view must not mix */
    while (s->nready > 0) {
        const int i = s->ready[s->nready - 1];
        if (s->d.upload) upload(s, i);
        else now_standing(s, i);
    }
    /* old tiles left are drawn no more: let go of (a load of one is dropped when it arrives) */
    for (int i = 0; i < s->nslots; i++) {
        slot *sl = &s->slots[i];
        if (!sl->stale || sl->state == SLOT_FREE) continue;
        if (sl->state == SLOT_LOADING) {
            sl->outdated = true;
            continue;
        }
        const int32_t next = sl->replacement;
        const terra_tile_key key = sl->key;
        release_slot(s, i, true);
        if (next >= 0) map_put(&s->index, key, next); /* its new version, still loading, holds the key */
    }
}

/* Ends a replacement once, for every tile each camera wants, the new source's nearest version is
 * no coarser than the old one drawn, or after REPLACE_MAX_FRAMES (a cache with no room for both). */
#define REPLACE_MAX_FRAMES 600
static void check_replaced(terra_stream *s) {
    if (!s->replacing) return;
    if (s->frame - s->replace_frame <= REPLACE_MAX_FRAMES)
        for (int c = 0; c < s->d.max_cameras; c++) {
            const camera_lists *cl = &s->cams[c];
            if (!cl->handle) continue;
            for (int k = 0; k < cl->nwanted; k++) {
                const int now = levels_to(s, &cl->wanted[k], renewed);
                if (now == INT_MAX || now > levels_to(s, &cl->wanted[k], old_drawable)) return;
            }
        }
    end_replacing(s);
}

static void resolve_draws(terra_stream *s, camera_lists *cl) {
    const int top = s->sd->levels - 1;
    key_set *anc = &s->fallback_set;
    level_boxes *boxes = &s->fallback_boxes;
    int nanc = 0;
    set_clear(anc);
    boxes_clear(boxes);
    cl->ndraws = 0;
    /* (The selection lists tiles depth first, so siblings come together: what is found above one
     * is remembered for the next with the same parent.) */
    terra_tile_key urgent_last = ~(terra_tile_key)0, above_last = ~(terra_tile_key)0; /* no key */
    bool above_found = false;
    for (int k = 0; k < cl->nwanted; k++) {
        const int32_t i = cl->slot[k] = slot_index(s, cl->wanted[k].key, cl->slot[k]);
        if (i >= 0 && drawable(s, &s->slots[i])) continue;
        const bool failed_k = is_failed(s, cl->wanted[k].key);
        if (s->d.max_standin_levels > 0 && !failed_k) { /* its stand-in within reach, asked for first */
            const int up = s->d.max_standin_levels - 1 < top - cl->wanted[k].level ? s->d.max_standin_levels - 1
                                                                                   : top - cl->wanted[k].level;
            const terra_tile_key a = ancestor(cl->wanted[k].key, up);
            const int l = cl->wanted[k].level + up;
            if ((up == 0 || a != urgent_last) && !drawable(s, slot_of(s, a)) && !is_failed(s, a)) {
                set_add(&s->urgent_set, a);
                add_wanted(s, a, l);
            }
            urgent_last = a;
        }
        if (failed_k) {
            /* for good: the view settles once the tile asked for in its place stands */
            s->stats.failed_wanted++;
            const terra_tile_key a = stand_in_of(s, cl->wanted[k].key, cl->wanted[k].level);
            if (!is_failed(s, a) && !drawable(s, slot_of(s, a))) s->stats.waiting++;
        } else {
            s->stats.waiting++;
        }
        /* the nearest drawable ancestor */
        const terra_tile_key parent = ancestor(cl->wanted[k].key, 1);
        if (parent != above_last) {
            terra_tile_key a = cl->wanted[k].key;
            bool found = false;
            for (int l = cl->wanted[k].level; l < top && !found; l++) {
                a = ancestor(a, 1);
                found = drawable(s, slot_of(s, a));
            }
            above_last = parent, above_found = found;
            if (found && set_add(anc, a)) s->fallbacks[nanc++] = a, boxes_add(boxes, a);
        }
        if (!above_found) s->stats.uncovered++;
    }
    /* standing wanted tiles not under a fallback ancestor; how deep the stand-ins are */
    int over = -1;
    above_last = ~(terra_tile_key)0;
    for (int k = 0; k < cl->nwanted; k++) {
        const terra_tile_key parent = ancestor(cl->wanted[k].key, 1);
        if (nanc && parent != above_last) over = outermost_in(anc, boxes, cl->wanted[k].key, top), above_last = parent;
        if (over >= 0 && over - cl->wanted[k].level > s->stats.standin_levels) s->stats.standin_levels = over - cl->wanted[k].level;
        const int32_t i = cl->slot[k];
        if (over >= 0 || i < 0 || !drawable(s, &s->slots[i])) continue;
        push_draw(s, cl, &s->slots[i], false);
    }
    /* fallback ancestors not under another */
    for (int k = 0; k < nanc; k++) {
        if (outermost_in(anc, boxes, s->fallbacks[k], top) >= 0) continue;
        push_draw(s, cl, slot_of(s, s->fallbacks[k]), true);
        s->stats.fallbacks++;
    }
}

/* ---- requests, cancels, eviction ----------------------------------------------------------------- */

/* The held tile wanted longest ago that is neither wanted nor drawn this frame; -1 if none. */
static int eviction_victim(const terra_stream *s) {
    for (int i = s->oldest; i >= 0 && s->slots[i].last_wanted != s->frame; i = s->links[i].newer) {
        const slot *sl = &s->slots[i];
        if ((sl->state == SLOT_STANDING || sl->state == SLOT_READY) && sl->last_drawn != s->frame) return i;
    }
    return -1;
}

/* The coarsest level first (every wanted tile then soon has a stand-in), then nearest the eye in
 * sides of the tile first: a tile's rectangle holds its descendants' and its side is twice theirs,
 * so no tile is asked for before its ancestors (ties go coarsest first), and the chain above ground
 * just come into view (the reserve) comes before finer tiles as far away in metres: a tile still
 * coming soon has a near ancestor standing in, as the tiles a screen shows largest come first. */
static int cmp_request(const void *a, const void *b) {
    const wanted_tile *x = a, *y = b;
    if (x->top != y->top) return x->top ? -1 : 1;
    if (x->urgent != y->urgent) return x->urgent ? -1 : 1;
    if (x->dist != y->dist) return x->dist < y->dist ? -1 : 1;
    if (x->level != y->level) return y->level - x->level;
    return x->key < y->key ? -1 : (x->key > y->key); /* deterministic */
}

/* The missing tiles a frame may ask for (as many as may start) are the best by cmp_request: kept in a
 * heap of the best so far, its worst on top, so a frame with thousands missing sorts only those. */
static void sift_down(wanted_tile *h, int n, int i) {
    for (;;) {
        int c = 2 * i + 1;
        if (c >= n) return;
        if (c + 1 < n && cmp_request(&h[c + 1], &h[c]) > 0) c++;
        if (cmp_request(&h[c], &h[i]) <= 0) return;
        const wanted_tile t = h[i];
        h[i] = h[c], h[c] = t;
        i = c;
    }
}

static void keep_best(wanted_tile *h, int *n, int best, const wanted_tile *w) {
    if (*n < best) {
        int i = (*n)++;
        h[i] = *w;
        while (i > 0 && cmp_request(&h[(i - 1) / 2], &h[i]) < 0) { /* sift up */
            const wanted_tile t = h[i];
            h[i] = h[(i - 1) / 2], h[(i - 1) / 2] = t;
            i = (i - 1) / 2;
        }
    } else if (cmp_request(w, &h[0]) < 0) {
        h[0] = *w;
        sift_down(h, *n, 0);
    }
}

static void request_missing(terra_stream *s) {
    /* cancel requests nobody wants any more, if they have not started (from the end: a release
     * moves the last one into the place it leaves) */
    for (int k = s->nloading - 1; k >= 0; k--) {
        const int i = s->loading[k];
        if (s->slots[i].last_wanted < s->frame && s->loader.cancel(s->loader.user, ticket_of(s, i))) {
            release_slot(s, i, true);
            s->stats.cancelled++;
        }
    }
    int flying = s->nloading;
    if (flying >= s->d.max_in_flight) return;
    int n = 0;
    for (int k = 0; k < s->nwanted; k++) {
        wanted_tile w = s->wanted[k];
        const int32_t i = slot_index(s, w.key, w.slot);
        const slot *have = i >= 0 ? &s->slots[i] : NULL;
        if ((have && !(have->stale && have->replacement < 0 && have->state != SLOT_LOADING)) || is_failed(s, w.key))
            continue;
        w.dist = (float)nearest_focus_sides(s, w.key);
        w.urgent = s->urgent_set.count && set_has(&s->urgent_set, w.key);
        keep_best(s->missing, &n, s->d.max_in_flight - flying, &w);
    }
    qsort(s->missing, (size_t)n, sizeof *s->missing, cmp_request);
    for (int k = 0; k < n && flying < s->d.max_in_flight; k++) {
        const wanted_tile *w = &s->missing[k];
        if (s->nfree == 0) {
            int v = eviction_victim(s);
            if (v < 0) break; /* everything held is needed now */
            release_slot(s, v, true);
            s->stats.evicted++;
        }
        int i = s->free_slots[--s->nfree];
        slot *sl = &s->slots[i];
        slot *old = slot_of(s, w->key); /* a stale tile this one replaces (evictions never take it) */
        sl->replaces = old ? (int32_t)(old - s->slots) : -1;
        sl->replacement = -1;
        sl->stale = sl->outdated = false;
        sl->newgen = s->replacing && (old || meets(s, w->key, s->region));
        sl->key = w->key;
        sl->level = (uint8_t)w->level;
        sl->last_wanted = s->frame;
        sl->last_drawn = 0;
        sl->bytes = 0;
        if (!s->loader.start(s->loader.user, ticket_of(s, i), w->key, sl->data, s->tile_bytes)) {
            sl->replaces = -1;
            sl->generation++;
            s->free_slots[s->nfree++] = i;
            break; /* the loader is busy: try again next frame */
        }
        set_state(s, i, SLOT_LOADING);
        if (old) old->replacement = i;
        else map_put(&s->index, w->key, i), s->wanted[w->at].slot = i; /* for next frame's find_slot */
        flying++;
        s->stats.requested++;
        s->stats.total_requested++;
    }
}

/* Whether a tile lies past the unload radius of every focus (a focus without one keeps all). */
static bool beyond_every_focus(const terra_stream *s, terra_tile_key k) {
    for (int i = 0; i < s->d.max_foci; i++) {
        const focus *f = &s->foci[i];
        if (!f->handle) continue;
        if (!(f->unload_radius > 0) || rect_distance(s, k, f->camera.eye) <= f->unload_radius) return false;
    }
    return true;
}

/* Lets go of held tiles past the unload radius of every focus (none while a focus keeps all). */
static void unload_far(terra_stream *s) {
    for (int i = 0; i < s->d.max_foci; i++)
        if (s->foci[i].handle && !(s->foci[i].unload_radius > 0)) return;
    for (int i = s->oldest, next; i >= 0 && s->slots[i].last_wanted != s->frame; i = next) {
        slot *sl = &s->slots[i];
        next = s->links[i].newer;
        if (sl->state != SLOT_STANDING && sl->state != SLOT_READY) continue;
        if (beyond_every_focus(s, sl->key)) {
            release_slot(s, i, true);
            s->stats.unloaded++;
        }
    }
}

/* ---- the frame ------------------------------------------------------------------------------------ */

terra_status terra_stream_update(terra_stream *s) {
    const double t_start = clock_ms(s);
    s->frame++;
    terra_stream_stats *st = &s->stats;
    const size_t peak = st->peak_bytes;
    const double worst = st->worst_work_ms;
    const uint64_t total_req = st->total_requested, total_arr = st->total_arrived, total_fail = st->total_failed;
    memset(st, 0, sizeof *st);
    st->peak_bytes = peak, st->worst_work_ms = worst, st->total_requested = total_req, st->total_arrived = total_arr;
    st->total_failed = total_fail;
    st->frame = s->frame;
    st->bytes_cap = s->d.capacity_bytes;
    s->spent_ms = 0;
    for (int k = 0; k < TERRA_WORK_KINDS; k++) s->ran[k] = 0, s->deferred[k] = false;

    terra_status status = gather_wanted(s);
    if (status != TERRA_OK) return status;
    take_in(s);
    check_replaced(s);
    for (int c = 0; c < s->d.max_cameras; c++)
        if (s->cams[c].handle) resolve_draws(s, &s->cams[c]);
    request_missing(s);
    unload_far(s);

    for (int k = 0; k < TERRA_WORK_KINDS; k++) {
        s->starved[k] = s->deferred[k] && s->ran[k] == 0;
        st->cost_ms[k] = s->cost_n[k] ? s->cost_sum[k] / (double)s->cost_n[k] : 0;
        st->pieces[k] = s->ran[k];
    }
    st->standing = s->nstanding, st->ready = s->nready, st->in_flight = s->nloading;
    for (int k = 0; k < s->nloading; k++) st->in_flight_stale += s->slots[s->loading[k]].stale;
    st->replacing = s->replacing;
    st->bytes_held = (size_t)(s->nstanding + s->nready + s->nloading) * s->tile_bytes;
    if (st->bytes_held > st->peak_bytes) st->peak_bytes = st->bytes_held;
    st->wanted = s->nwanted;
    st->failed_known = s->nfailed;
    for (int c = 0; c < s->d.max_cameras; c++)
        if (s->cams[c].handle) st->drawn += s->cams[c].ndraws;
    for (int i = 0; i < s->d.max_foci; i++) st->foci += s->foci[i].handle != 0;
    st->work_ms = s->spent_ms;
    if (st->work_ms > st->worst_work_ms) st->worst_work_ms = st->work_ms;
    st->update_ms = clock_ms(s) - t_start;
    return TERRA_OK;
}

static const camera_lists *camera_of(const terra_stream *s, terra_focus h) {
    for (int c = 0; c < s->d.max_cameras; c++)
        if (h && s->cams[c].handle == h) return &s->cams[c];
    return NULL;
}

terra_status terra_stream_draws(const terra_stream *s, terra_focus camera, const terra_stream_draw **draws, int *count) {
    const camera_lists *cl = camera_of(s, camera);
    if (!cl) return terra_fail(TERRA_E_NOT_FOUND, "stream: focus %u is not a camera", camera);
    *draws = cl->draws;
    *count = cl->ndraws;
    return TERRA_OK;
}

terra_status terra_stream_wanted(const terra_stream *s, terra_focus camera, const terra_selected_tile **tiles,
                                 int *count) {
    const camera_lists *cl = camera_of(s, camera);
    if (!cl) return terra_fail(TERRA_E_NOT_FOUND, "stream: focus %u is not a camera", camera);
    *tiles = cl->wanted;
    *count = cl->nwanted;
    return TERRA_OK;
}

int terra_stream_standing(const terra_stream *s, terra_tile_key *keys, int max) {
    int n = 0;
    for (int i = 0; i < s->nslots; i++)
        if (s->slots[i].state == SLOT_STANDING) {
            if (n < max) keys[n] = s->slots[i].key;
            n++;
        }
    return n;
}

bool terra_stream_is_standing(const terra_stream *s, terra_tile_key key) {
    const slot *sl = slot_of(s, key);
    return sl && sl->state == SLOT_STANDING;
}

bool terra_stream_is_wanted(const terra_stream *s, terra_tile_key key) {
    const slot *sl = slot_of(s, key);
    return (sl && sl->last_wanted == s->frame) || has_unheld(s, key);
}

int terra_stream_failed(const terra_stream *s, terra_tile_key *keys, int max) {
    for (int i = 0; i < s->nfailed && i < max; i++) keys[i] = s->failed_ring[(s->failed_head + i) % s->max_failed];
    return s->nfailed;
}

bool terra_stream_is_failed(const terra_stream *s, terra_tile_key key) { return is_failed(s, key); }

/* The stats say at once that the old source is in use (a caller may let it go on their word). */
static void note_replacing(terra_stream *s) {
    s->stats.replacing = s->replacing;
    s->stats.in_flight_stale = 0;
    for (int k = 0; k < s->nloading; k++) s->stats.in_flight_stale += s->slots[s->loading[k]].stale;
}

/* Drops what was made of the changed ground before it changed and was never drawn: a new version
 * waiting (arrived) or a load under way (dropped on arrival). */
static void drop_new(terra_stream *s, int i) {
    slot *sl = &s->slots[i];
    if (sl->state == SLOT_LOADING) sl->outdated = true;
    else if (sl->state != SLOT_FREE) release_slot(s, i, sl->state == SLOT_STANDING);
}

/* The selection's source while replacing: heights from the new source, ranges the union of both. */
static terra_status either_range(void *user, double x0, double z0, double x1, double z1, float *lo, float *hi) {
    const terra_stream *s = user;
    float a, b, c, d;
    terra_status st = terra_source_height_range(s->old_src, x0, z0, x1, z1, &a, &b);
    if (st == TERRA_OK) st = terra_source_height_range(s->d.source, x0, z0, x1, z1, &c, &d);
    if (st == TERRA_OK) *lo = fminf(a, c), *hi = fmaxf(b, d);
    return st;
}

static terra_status either_grid(void *user, const terra_grid_request *r, float *h, terra_surface *surf) {
    return terra_source_sample(((const terra_stream *)user)->d.source, r, h, surf);
}

terra_status terra_stream_set_source(terra_stream *s, const terra_source *src) {
    if (!src) return terra_fail(TERRA_E_INVALID, "stream: no source given");
    terra_source *either = NULL;
    const bool held = s->oldest >= 0;
    if (held && !s->either) { /* a second new source while one replaces keeps the first's old one */
        terra_status st = terra_source_create(&(terra_source_desc){.sample_grid = either_grid, .height_range = either_range,
                                                                 .user = s, .name = terra_source_name(src)},
                                              &either);
        if (st != TERRA_OK) return st;
        s->old_src = s->d.source;
        s->either = either;
        if (!s->replacing) s->replace_frame = s->frame; /* (an edit's replacement becomes this one) */
        s->replacing = true;
    }
    s->region[0] = s->region[1] = -INFINITY, s->region[2] = s->region[3] = INFINITY;
    s->d.source = src;
    terra_select_set_source(s->sel, s->replacing ? s->either : src);
    if (s->mesh) s->mesh->src = src;
    forget_failures(s); /* the new source may make them */
    for (int i = 0; i < s->nslots; i++) {
        slot *sl = &s->slots[i];
        if (sl->state == SLOT_FREE) continue;
        if (sl->newgen || sl->replaces >= 0) drop_new(s, i); /* made of the source before, never drawn */
        else sl->stale = true;
    }
    note_replacing(s);
    return TERRA_OK;
}

terra_status terra_stream_invalidate(terra_stream *s, const double region[4]) {
    if (!(region[0] <= region[2] && region[1] <= region[3]))
        return terra_fail(TERRA_E_INVALID, "stream: region %g, %g .. %g, %g is not a rectangle", region[0], region[1],
                          region[2], region[3]);
    const bool was = s->replacing;
    for (int i = 0; i < s->nslots; i++) {
        slot *sl = &s->slots[i];
        if (sl->state == SLOT_FREE || !meets(s, sl->key, region)) continue;
        if (sl->newgen || sl->replaces >= 0) drop_new(s, i); /* new ground made before this change, never drawn */
        else if (sl->state == SLOT_LOADING) sl->outdated = true;
        else sl->stale = true; /* the old ground: drawn until the new covers the view */
    }
    if (!was) {
        memcpy(s->region, region, sizeof s->region);
        s->replacing = true;
        s->replace_frame = s->frame;
    } else {
        s->region[0] = fmin(s->region[0], region[0]), s->region[1] = fmin(s->region[1], region[1]);
        s->region[2] = fmax(s->region[2], region[2]), s->region[3] = fmax(s->region[3], region[3]);
    }
    note_replacing(s);
    return TERRA_OK;
}
