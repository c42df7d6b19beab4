/* libterra-ode: terra's collider blocks as ODE (Open Dynamics Engine) geometry.
 *
 * Each standing collider block becomes one ODE trimesh with the block's own triangles (the same
 * diagonal as the drawn mesh), so what bodies touch is what terra_ground_height_at answers.
 * terra_ode_sync() after every terra_ground_update() adds the blocks that stood up, rebuilds the
 * ones stood again from a new source, and removes the ones let go of.
 *
 * Not part of the core: link terra-ode (which links libode).
 */
/* Threads: terra_ode_sync changes the ODE space: run it on the thread that steps the world and collides
 * the space, after terra_ground_update and never during it or a collision pass. terra_ode_is_ground
 * and terra_ode_contact_surface only read (contact_surface makes a ground query): they may run on any
 * thread between a sync and the next update. terra_ode_drop_test calls dInitODE2 and dCloseODE itself:
 * run it only where no other thread uses ODE. */
#ifndef TERRA_ODE_H
#define TERRA_ODE_H

#include <ode/ode.h>

#include "terra/edit.h"
#include "terra/ground.h"
#include "terra/planet.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct terra_ode terra_ode;

/* Ground geoms go into `space`. */
TERRA_API terra_status terra_ode_create(terra_ground *ground, dSpaceID space, terra_ode **out);
TERRA_API void terra_ode_destroy(terra_ode *o);
/* Brings the ODE geoms in line with the ground's standing blocks. */
TERRA_API terra_status terra_ode_sync(terra_ode *o);
/* Whether a geom is one of the ground's. */
TERRA_API bool terra_ode_is_ground(const terra_ode *o, dGeomID geom);
/* Contact parameters from the surface under the contact point (friction, restitution). */
TERRA_API void terra_ode_contact_surface(const terra_ode *o, const dContactGeom *c, dSurfaceParameters *out,
                               terra_surface *surface);

/* ---- the proof: bodies dropped over the world while colliders stream around them -------------- */

typedef struct terra_drop_desc {
    const terra_source *source;  /* NULL: the default world, seed 1 */
    int bodies;                  /* dropped bodies; 0 = 200 */
    int vehicles;                /* fast bodies driving; 0 = 4 (30 to 300 m/s, one off a ridge) */
    double seconds;              /* simulated; 0 = 60 */
    double hz;                   /* steps per second; 0 = 240 */
    double area;                 /* side of the square bodies are dropped over; 0 = 800 m */
    uint64_t seed;
    /* With an edit layer (its source then takes the place of `source`): every dig_every_s (0 = 0.25 s)
     * a pit is dug in front of each vehicle, where it will be 0.3 s later (3 m deep, 5 m across,
     * falling off over 4 m), at the start of a frame: the ground is invalidated there and the
     * colliders stand again before the next step. */
    terra_edit_layer *edits;
    double dig_every_s;
    void (*progress)(void *user, double t, const char *line); /* once a simulated second; may be NULL */
    void *user;
} terra_drop_desc;

typedef struct terra_drop_result {
    long steps;
    long fell_through;           /* body-steps with a body's lowest point more than half its radius
                                    below the ground (soft contacts allow a little less) */
    double worst_depth_m;        /* deepest below the ground any body's lowest point went */
    double worst_depth_fraction; /* the same, as a fraction of that body's radius */
    double min_lead_ms;          /* smallest time between a block standing and a body entering it */
    long block_entries;          /* times a body entered a block (after the drop) */
    long entries_unready;        /* times a body entered a block that was not standing */
    int max_blocks;              /* blocks standing at most */
    double max_built_per_frame;  /* blocks built in one frame at most */
    double mean_build_ms;        /* per block */
    double vehicle_top_speed;    /* m/s, the fastest vehicle reached */
    double vehicle_max_height;   /* m above the ground a vehicle reached (the ridge jump) */
    long pits;                   /* pits dug (with edits) */
} terra_drop_result;

TERRA_API terra_status terra_ode_drop_test(const terra_drop_desc *desc, terra_drop_result *out);

/* ---- on a planet: its collider blocks as trimeshes, each placed at its block's origin ----------- */

typedef struct terra_ode_planet terra_ode_planet;

TERRA_API terra_status terra_ode_planet_create(terra_planet_colliders *colliders, dSpaceID space, terra_ode_planet **out);
TERRA_API void terra_ode_planet_destroy(terra_ode_planet *o);
/* After every terra_planet_colliders_update: geoms for the blocks that stood, none for those let go. */
TERRA_API terra_status terra_ode_planet_sync(terra_ode_planet *o);
TERRA_API bool terra_ode_planet_is_ground(const terra_ode_planet *o, dGeomID geom);

/* The proof on curved ground: bodies dropped around (lat, lon) and vehicles driven along great
 * circles, pulled toward the centre, the blocks following them. The result's fields as above
 * (depths measured from the planet's ground along each body's up; block entries by tiles of the
 * collider level; pits 0; vehicle_max_height over the ground). */
typedef struct terra_planet_drop_desc {
    const terra_planet *planet;  /* NULL: the built-in planet of seed 1, 16-cell tiles */
    double lat, lon;             /* degrees; both 0: seed 1's highest range (-4.3, -12.3) */
    int bodies, vehicles;        /* 0 = 100, 4 (30 to 300 m/s) */
    double seconds, hz;          /* 0 = 20 s, 240 */
    double area;                 /* side of the square bodies are dropped over; 0 = 400 m */
    uint64_t seed;
    void (*progress)(void *user, double t, const char *line); /* once a simulated second; may be NULL */
    void *user;
} terra_planet_drop_desc;

TERRA_API terra_status terra_ode_planet_drop_test(const terra_planet_drop_desc *desc, terra_drop_result *out);

#ifdef __cplusplus
}
#endif
#endif
