/* terra stream: tiles made off the main thread, held in a capped cache, drawn without holes.
 *
 * Each frame (terra_stream_update):
 *  1. Every focus point selects the tiles it wants (cameras with their frustum, entities and fixed
 *     points all around), within the load radius (focus to the tile's nearest edge). The coarsest
 *     tiles within the load radius (or the selection's range) plus one coarsest tile more are
 *     always wanted: every wanted tile has an ancestor standing to fall back on, so after they
 *     first arrive the ground never shows a hole, even after a jump shorter than a coarsest tile.
 *  2. Results that came back are taken in and uploaded, within the frame budget.
 *  3. Requests no longer wanted are cancelled if they have not started; missing tiles are asked
 *     for coarsest first, then nearest, at most max_in_flight at once.
 *  4. Held tiles past the unload radius of every focus are let go of; when the cache is full the
 *     tile wanted longest ago goes first, never one wanted or drawn this frame.
 *  5. Each camera's draws are resolved: a wanted tile not yet held is replaced by its nearest held
 *     ancestor and every other wanted tile under that ancestor is dropped, so the ground is
 *     covered exactly once, coarser for a moment where it is still streaming.
 *
 * Failure: a tile whose load fails (the loader reports an error, or the tile overflows its buffer)
 * is logged once (terra_log, TERRA_LOG_WARN; with the default loader the line gives the source's
 * message), counted, and remembered: it is not asked for again until the source is replaced
 * (terra_stream_set_source). Its parent (or, while those fail too, the nearest ancestor that has not
 * failed) is wanted in its place and stands in for it for good; the view counts as settled (nothing
 * waiting) once that ancestor stands. The record holds as many tiles as the cache, and at least as
 * many as one focus can want in a frame (when it is full the oldest is forgotten, and asked for
 * again if it is wanted again).
 *
 * Memory: tile buffers are allocated once at creation, min(capacity_tiles, capacity_bytes /
 * tile_bytes) of them; tiles held plus tiles in flight never exceed either cap, and a frame
 * allocates nothing.
 */
/* Threads: a streamer is used by one thread at a time. The const queries (draws, wanted, foci, stats,
 * standing, failed...) read what an update writes: they may run concurrently with each other, between
 * updates only. The loader's start, cancel and poll, the upload and release callbacks, the clock and
 * the failure log line all run on the thread calling terra_stream_update (destroy calls cancel). The
 * default loader meshes tiles on the pool's workers, several at once, calling the source while the
 * updating thread asks it for height ranges (see source.h). A loader of the caller's may make tiles
 * on other threads; a buffer is the loader's from start until poll returns its ticket or cancel
 * returns true. A source replaced by terra_stream_set_source is still called by requests started
 * before and by the selection until the new tiles take over: keep it alive until an update reports
 * replacing false and in_flight_stale 0, or until the streamer is destroyed. With
 * a shared pool, terra_stream_destroy waits until the whole pool is idle. */
#ifndef TERRA_STREAM_H
#define TERRA_STREAM_H

#include "terra/pool.h"
#include "terra/select.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- how tiles are made ----------------------------------------------------------------------
 * A loader makes a tile into a buffer the streamer owns, off the main thread or however it likes.
 * The default loader runs jobs on a worker pool: meshing grid tiles from the source, or a `make`
 * function of the caller's (an archive's tiles read and decoded: archive_mesh.h); a test loader of
 * its own can model latency. */
typedef struct terra_stream_loader {
    /* Starts making tile `key` into buffer[capacity]; `ticket` names the request. */
    bool (*start)(void *user, uint64_t ticket, terra_tile_key key, void *buffer, size_t capacity);
    /* Drops a request that has not started; true if it will never complete. */
    bool (*cancel)(void *user, uint64_t ticket);
    /* Takes at most one finished request: true with its ticket, status and bytes used. */
    bool (*poll)(void *user, uint64_t *ticket, terra_status *status, size_t *bytes);
    size_t tile_bytes; /* buffer each tile needs (the largest tile) */
    void *user;
    /* terra_stream_destroy, after cancelling: ends every request still started (completes or
     * abandons it) and returns once none will touch its buffer again. NULL: destroy polls until
     * each started request has come back, so such a loader must finish them without more updates. */
    void (*drain)(void *user);
} terra_stream_loader;

/* Kinds of main-thread work the budget governs. */
typedef enum terra_stream_work { TERRA_WORK_TAKE_IN = 0, TERRA_WORK_UPLOAD = 1, TERRA_WORK_KINDS = 2 } terra_stream_work;

typedef struct terra_stream_desc {
    terra_select_desc select;     /* tiles and levels (see select.h) */
    const terra_source *source;   /* for selection's height ranges and the default loader */
    int capacity_tiles;           /* 0 = 1024 */
    size_t capacity_bytes;        /* 0 = capacity_tiles × tile bytes */
    int max_in_flight;            /* 0 = 16 */
    double load_radius;           /* metres from a focus to a tile's nearest edge (horizontal), for
                                     foci that do not name their own; 0 = unlimited */
    double unload_radius;         /* 0 = 1.25 × load_radius; a tile past the unload radius of every
                                     focus is let go of (a focus with no radius keeps all) */
    double budget_ms;             /* main-thread work per frame; 0 = 4 */
    int max_foci;                 /* 0 = 16 */
    int max_cameras;              /* cameras with a draw list; 0 = 4 */
    terra_stream_loader loader;   /* zero: mesh grid tiles from `source` on `pool` */
    terra_pool *pool;             /* for the default loader; NULL: the streamer starts its own */
    /* Main-thread upload of a tile that came in (a renderer's copy to the GPU); NULL: none. A
     * status other than TERRA_OK is a failed tile (see Failure above): not standing, its ancestor
     * stands in. A second upload of a key the client holds is its new version (a replaced source):
     * it takes the old one's place. */
    terra_status (*upload)(void *user, terra_tile_key key, const void *data, size_t bytes);
    /* Main thread: a tile the client was given by upload is no longer held (evicted, unloaded, or
     * gone with its source); the client may free what it keeps for it. Not called for a version
     * an upload replaced, nor by terra_stream_destroy. NULL: the client asks terra_stream_is_standing. */
    void (*release)(void *user, terra_tile_key key);
    void *upload_user; /* for upload and release */
    /* Clock for budget accounting, in seconds; NULL: the monotonic clock. */
    double (*clock)(void *user);
    void *clock_user;
    /* With no loader of the caller's: how a tile is made on the pool's workers (several at once)
     * into buffer[capacity], *bytes receiving its size, and make_bytes the most any tile takes; the
     * default loader runs it as it runs its own meshing. NULL: grid tiles meshed from `source`.
     * Failing, it calls terra_fail on its thread: the streamer logs that message. */
    terra_status (*make)(void *user, terra_tile_key key, void *buffer, size_t capacity, size_t *bytes);
    void *make_user;
    size_t make_bytes;
    /* N > 0: for each wanted tile not yet standing, its ancestor N - 1 levels up (its parent for 2)
     * is wanted and asked for before everything but the coarsest tiles, so a stand-in at most about
     * N levels coarser than the tiles it covers soon stands (stats.standin_levels says how deep this
     * frame's are; a caller that must not draw deeper updates again until it is within N, as
     * terra_gl_scene does). A camera turning also selects over a margin around its view, as many
     * degrees as twice its last turn (at most 30): the tiles there are not drawn, but their
     * ancestors N - 1 levels up are wanted and asked for first likewise, so as the turn goes on
     * the ground coming into view has its stand-ins already. 0: tiles are asked for coarsest, then
     * nearest first, and a stand-in is whatever nearest ancestor stands. */
    int max_standin_levels;
} terra_stream_desc;

typedef enum terra_focus_kind {
    TERRA_FOCUS_CAMERA = 0, /* draws: selects with its frustum; has a draw list */
    TERRA_FOCUS_ENTITY = 1, /* a body: wants the ground all around it */
    TERRA_FOCUS_FIXED = 2   /* a place: wants the ground all around it */
} terra_focus_kind;

typedef struct terra_focus_desc {
    terra_focus_kind kind;
    terra_camera camera;  /* cameras: the whole camera; others: camera.eye is the position */
    bool collision;       /* entities: needs collider blocks (see ground.h) */
    double load_radius;   /* this focus's load radius; 0: the stream's. Unload radius: 1.25 x. */
    terra_vec3 velocity;  /* m/s, if known: reported by terra_stream_foci (colliders stand ahead) */
} terra_focus_desc;

typedef uint32_t terra_focus; /* a handle; 0 is never a valid one */

typedef struct terra_stream_stats {
    uint64_t frame;
    int foci, wanted, standing, ready, in_flight, drawn, fallbacks, uncovered;
    int requested, arrived, cancelled, evicted, unloaded, failed; /* this frame */
    int waiting;       /* tiles the cameras want that are neither standing nor failed: still to come
                          (0: every camera's view is settled) */
    int failed_wanted; /* tiles the cameras want whose load failed: ancestors stand in for good */
    int standin_levels; /* the most levels between a tile a camera wants and the drawn tile over it
                           (0: every wanted tile drawn itself; its stand-in's level less its own) */
    int failed_known;  /* failed tiles remembered (not asked for again) */
    int in_flight_stale; /* of in_flight, requests started before the last terra_stream_set_source */
    bool replacing;      /* a replaced source's tiles are still drawn (terra_stream_set_source); once this
                            is false and in_flight_stale 0, nothing calls the replaced source any more
                            (both are brought up to date by set_source and invalidate themselves) */
    size_t bytes_held, bytes_cap, peak_bytes;                    /* held + ready + in flight */
    double work_ms, worst_work_ms;                               /* budgeted work this frame, worst so far */
    double update_ms;                                            /* the whole update this frame */
    double select_ms;                                            /* of which the CDLOD selections */
    double cost_ms[TERRA_WORK_KINDS];                            /* mean cost of one piece of each kind */
    int pieces[TERRA_WORK_KINDS];                                /* pieces of each kind this frame */
    uint64_t total_requested, total_arrived, total_failed;
} terra_stream_stats;

typedef struct terra_stream terra_stream;

TERRA_API terra_status terra_stream_create(const terra_stream_desc *desc, terra_stream **out);
/* Cancels what has not started and waits for what has (a loader of the caller's is drained, or
 * polled until it has answered for every request it started); frees every buffer. */
TERRA_API void terra_stream_destroy(terra_stream *s);
TERRA_API size_t terra_stream_tile_bytes(const terra_stream *s);
TERRA_API int terra_stream_slots(const terra_stream *s);

TERRA_API terra_status terra_stream_add_focus(terra_stream *s, const terra_focus_desc *desc, terra_focus *out);
TERRA_API terra_status terra_stream_update_focus(terra_stream *s, terra_focus f, const terra_camera *camera);
/* Sets a focus's velocity (m/s, finite), which terra_stream_foci reports until it is set again. */
TERRA_API terra_status terra_stream_set_focus_velocity(terra_stream *s, terra_focus f, terra_vec3 velocity);
TERRA_API terra_status terra_stream_remove_focus(terra_stream *s, terra_focus f);

typedef struct terra_focus_info {
    terra_focus handle;
    terra_focus_kind kind;
    terra_vec3 position;
    bool collision;
    terra_vec3 velocity; /* m/s as last set (zero if never): lets colliders stand where a body is going */
} terra_focus_info;
/* This frame's focus points; returns how many (at most max written). */
TERRA_API int terra_stream_foci(const terra_stream *s, terra_focus_info *out, int max);

/* Replaces the source (a new function table, or one whose user data changed). Every tile held is
 * made again from the new source, coarsest and nearest first, within the budget. The cameras go on
 * drawing the old tiles alone until the new ones cover each view at least as finely, then the new
 * ones alone, all in one frame (never both at once: their seams could be any depth); meanwhile the
 * new versions wait unuploaded and the selection takes the union of both sources' height ranges.
 * A second replacement during one keeps the first's old tiles as the old ones. The new source must
 * outlive the streamer; the old one must live until the stats show replacing false and
 * in_flight_stale 0. */
TERRA_API terra_status terra_stream_set_source(terra_stream *s, const terra_source *src);
/* The source's ground changed inside region (x0, z0, x1, z1, metres: an edit, edit.h): every tile
 * held over it, at every level, is made again, and as after terra_stream_set_source the cameras draw
 * the old ground alone (those tiles as they were, and the rest) until the new versions cover each
 * view as finely, then the new alone: an edit shows whole or not yet, never half. A change during
 * one widens it; what was made of the ground before that change and not yet drawn is made again. */
TERRA_API terra_status terra_stream_invalidate(terra_stream *s, const double region[4]);

/* Runs one frame. */
TERRA_API terra_status terra_stream_update(terra_stream *s);

/* One tile to draw: held data for `key`, drawn at `level` with the camera's morph range. */
typedef struct terra_stream_draw {
    terra_tile_key key;
    int level;
    float morph_start, morph_end;
    const void *data;
    size_t bytes;
    bool fallback; /* an ancestor drawn in place of finer tiles still streaming */
} terra_stream_draw;

/* The camera's draws this frame (valid until the next update). */
TERRA_API terra_status terra_stream_draws(const terra_stream *s, terra_focus camera, const terra_stream_draw **draws, int *count);
/* The tiles the camera wanted this frame (its selection within the load radius). */
TERRA_API terra_status terra_stream_wanted(const terra_stream *s, terra_focus camera, const terra_selected_tile **tiles,
                                 int *count);

TERRA_API const terra_stream_stats *terra_stream_get_stats(const terra_stream *s);
/* The standing (held and uploaded) tiles: keys, at most max; returns how many there are. */
TERRA_API int terra_stream_standing(const terra_stream *s, terra_tile_key *keys, int max);
/* Whether a tile is standing; whether some focus wanted it this frame. */
TERRA_API bool terra_stream_is_standing(const terra_stream *s, terra_tile_key key);
TERRA_API bool terra_stream_is_wanted(const terra_stream *s, terra_tile_key key);
/* The failed tiles remembered (see Failure above), oldest first: keys, at most max; returns how
 * many there are. Whether one tile is among them. */
TERRA_API int terra_stream_failed(const terra_stream *s, terra_tile_key *keys, int max);
TERRA_API bool terra_stream_is_failed(const terra_stream *s, terra_tile_key key);

#ifdef __cplusplus
}
#endif
#endif
