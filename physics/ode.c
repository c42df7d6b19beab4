/* libterra-ode: collider blocks as ODE trimeshes, and the drop proof. */
#include "terra/ode.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "drop.h"
#include "keymap.h"

typedef struct ground_geom {
    int32_t bx, bz;
    uint32_t version;
    dTriMeshDataID data;
    dGeomID geom;
    dReal *verts;
    bool seen;
} ground_geom;

struct terra_ode {
    terra_ground *ground;
    dSpaceID space;
    ground_geom *geoms;
    int ngeoms, cap;
    key_map index;   /* block key -> geoms[] */
    dTriIndex *indices;
    int nindices, cells;
};

static terra_tile_key block_key(int32_t bx, int32_t bz) { return terra_tile_key_make(7, 0, bx, bz); }


terra_status terra_ode_create(terra_ground *ground, dSpaceID space, terra_ode **out) {
    terra_ode *o = terra_calloc(1, sizeof *o);
    if (!o) return terra_fail(TERRA_E_NOMEM, "ode: out of memory");
    o->ground = ground;
    o->space = space;
    o->cap = 256;
    o->geoms = terra_alloc(sizeof *o->geoms * (size_t)o->cap);
    bool ok = o->geoms && map_init(&o->index, 1 << 16);
    if (!ok) {
        terra_ode_destroy(o);
        return terra_fail(TERRA_E_NOMEM, "ode: out of memory");
    }
    *out = o;
    return TERRA_OK;
}

static void drop_geom(terra_ode *o, int k) {
    ground_geom *g = &o->geoms[k];
    dGeomDestroy(g->geom);
    dGeomTriMeshDataDestroy(g->data);
    terra_free(g->verts);
    map_del(&o->index, block_key(g->bx, g->bz));
    if (k != o->ngeoms - 1) {
        o->geoms[k] = o->geoms[o->ngeoms - 1];
        map_put(&o->index, block_key(o->geoms[k].bx, o->geoms[k].bz), k);
    }
    o->ngeoms--;
}

void terra_ode_destroy(terra_ode *o) {
    if (!o) return;
    while (o->ngeoms > 0) drop_geom(o, o->ngeoms - 1);
    terra_free(o->geoms);
    terra_free(o->indices);
    map_free(&o->index);
    terra_free(o);
}

/* Fills a block's vertices in world space and (re)builds its trimesh. */
static terra_status build_geom(terra_ode *o, ground_geom *g, const terra_collider_block *b) {
    const int n = b->cells + 1;
    if (!g->verts) g->verts = terra_alloc(sizeof(dReal) * 3 * (size_t)n * (size_t)n);
    if (!g->verts) return terra_fail(TERRA_E_NOMEM, "ode: out of memory");
    for (int j = 0; j < n; j++)
        for (int i = 0; i < n; i++) {
            terra_vec3 p = terra_ground_block_point(o->ground, b, i, j);
            dReal *v = g->verts + 3 * ((size_t)j * n + (size_t)i);
            v[0] = p.x, v[1] = p.y, v[2] = p.z;
        }
    if (g->geom) dGeomDestroy(g->geom);
    if (g->data) dGeomTriMeshDataDestroy(g->data);
    g->data = dGeomTriMeshDataCreate();
    dGeomTriMeshDataBuildDouble(g->data, g->verts, 3 * sizeof(dReal), n * n, o->indices, o->nindices,
                                3 * sizeof(dTriIndex));
    g->geom = dCreateTriMesh(o->space, g->data, NULL, NULL, NULL);
    dGeomSetData(g->geom, o);
    dGeomSetCategoryBits(g->geom, GROUND_BITS);
    dGeomSetCollideBits(g->geom, ~(unsigned long)GROUND_BITS); /* blocks never test each other */
    g->bx = b->bx, g->bz = b->bz, g->version = b->version;
    return TERRA_OK;
}

terra_status terra_ode_sync(terra_ode *o) {
    const terra_collider_block *blocks;
    const int n = terra_ground_blocks(o->ground, &blocks);
    if (n > 0 && o->cells != blocks[0].cells) { /* the shared triangles of a block */
        o->cells = blocks[0].cells;
        o->nindices = terra_grid_index_count(o->cells);
        terra_free(o->indices);
        uint32_t *idx = terra_alloc(sizeof *idx * (size_t)o->nindices);
        o->indices = terra_alloc(sizeof *o->indices * (size_t)o->nindices);
        if (!idx || !o->indices) {
            terra_free(idx);
            return terra_fail(TERRA_E_NOMEM, "ode: out of memory");
        }
        terra_grid_indices(o->cells, idx);
        for (int k = 0; k < o->nindices; k++) o->indices[k] = (dTriIndex)idx[k];
        terra_free(idx);
    }
    for (int k = 0; k < o->ngeoms; k++) o->geoms[k].seen = false;
    for (int b = 0; b < n; b++) {
        int32_t k = map_get(&o->index, block_key(blocks[b].bx, blocks[b].bz));
        if (k < 0) {
            if (o->ngeoms == o->cap) {
                ground_geom *grown = terra_realloc(o->geoms, sizeof *grown * (size_t)o->cap * 2);
                if (!grown) return terra_fail(TERRA_E_NOMEM, "ode: out of memory");
                o->geoms = grown;
                o->cap *= 2;
            }
            k = o->ngeoms++;
            memset(&o->geoms[k], 0, sizeof o->geoms[k]);
            map_put(&o->index, block_key(blocks[b].bx, blocks[b].bz), k);
            terra_status st = build_geom(o, &o->geoms[k], &blocks[b]);
            if (st != TERRA_OK) return st;
        } else if (o->geoms[k].version != blocks[b].version) {
            terra_status st = build_geom(o, &o->geoms[k], &blocks[b]);
            if (st != TERRA_OK) return st;
        }
        o->geoms[k].seen = true;
    }
    for (int k = o->ngeoms - 1; k >= 0; k--)
        if (!o->geoms[k].seen) drop_geom(o, k);
    return TERRA_OK;
}

bool terra_ode_is_ground(const terra_ode *o, dGeomID geom) {
    return dGeomGetClass(geom) == dTriMeshClass && dGeomGetData(geom) == (void *)o;
}

void terra_ode_contact_surface(const terra_ode *o, const dContactGeom *c, dSurfaceParameters *out,
                               terra_surface *surface) {
    terra_surface s = TERRA_SURFACE_NONE;
    terra_ground_surface_at(o->ground, c->pos[0], c->pos[2], &s);
    terra_surface_physics p = terra_ground_physics(o->ground, s);
    memset(out, 0, sizeof *out);
    out->mode = dContactBounce | dContactSoftCFM | dContactSoftERP | dContactApprox1;
    out->mu = p.friction;
    out->bounce = p.restitution;
    out->bounce_vel = 0.5;
    out->soft_cfm = 1e-5;
    out->soft_erp = 0.8;
    if (surface) *surface = s;
}

/* ---- the drop proof -------------------------------------------------------------------------------- */

typedef struct drop_body {
    dBodyID body;
    dGeomID geom;
    double radius;
    int32_t bx, bz;      /* block it is over */
    bool vehicle;
    double speed, heading;
    bool dropped;
    double drop_time;
} drop_body;

typedef struct drop_ctx {
    dWorldID world;
    dJointGroupID contacts;
    terra_ode *ode;
} drop_ctx;

static void near_ground(void *data, dGeomID a, dGeomID b) {
    drop_ctx *c = data;
    dContact contact[8];
    int n = dCollide(a, b, 8, &contact[0].geom, sizeof(dContact));
    for (int k = 0; k < n; k++) {
        terra_ode_contact_surface(c->ode, &contact[k].geom, &contact[k].surface, NULL);
        dJointID j = dJointCreateContact(c->world, c->contacts, &contact[k]);
        dJointAttach(j, dGeomGetBody(a), dGeomGetBody(b));
    }
}


terra_status terra_ode_drop_test(const terra_drop_desc *desc, terra_drop_result *r) {
    terra_drop_desc d = desc ? *desc : (terra_drop_desc){0};
    if (d.bodies == 0) d.bodies = 200;
    if (d.vehicles == 0) d.vehicles = 4;
    if (d.seconds == 0) d.seconds = 60;
    if (d.hz == 0) d.hz = 240;
    if (d.area == 0) d.area = 800;
    if (d.bodies < 0 || d.vehicles < 0 || d.vehicles > 16 || !(d.seconds > 0) || !(d.hz >= 30))
        return terra_fail(TERRA_E_INVALID, "drop test: bad options");
    memset(r, 0, sizeof *r);
    r->min_lead_ms = INFINITY;
    if (d.dig_every_s == 0) d.dig_every_s = 0.25;
    if (!(d.dig_every_s > 0)) return terra_fail(TERRA_E_INVALID, "drop test: bad options");
    terra_source *own = NULL;
    const terra_source *src = d.edits ? terra_edit_layer_source(d.edits) : d.source;
    if (!src) {
        terra_status st = terra_world_create(&(terra_world_desc){.seed = 1}, &own);
        if (st != TERRA_OK) return st;
        src = own;
    }
    terra_ground *ground = NULL;
    terra_status st = terra_ground_create(&(terra_ground_desc){.source = src, .max_blocks = 8192, .budget_ms = 4}, &ground);
    if (st != TERRA_OK) {
        terra_source_destroy(own);
        return st;
    }
    dInitODE2(0);
    dAllocateODEDataForThread(dAllocateMaskAll); /* ODE: required on every thread that collides */
    dWorldID world = dWorldCreate();
    dWorldSetGravity(world, 0, -9.81, 0);
    dWorldSetERP(world, 0.8);
    dWorldSetCFM(world, 1e-5);
    dSpaceID space = dHashSpaceCreate(0);
    dHashSpaceSetLevels(space, 2, 7); /* cells of 4 to 128 m: bodies of a metre, blocks of 32 m */
    dJointGroupID contacts = dJointGroupCreate(0);
    terra_ode *ode = NULL;
    st = terra_ode_create(ground, space, &ode);
    const int nb = d.bodies + d.vehicles;
    drop_body *bodies = terra_calloc((size_t)nb, sizeof *bodies);
    terra_focus_info *foci = terra_calloc((size_t)nb, sizeof *foci);
    if (st == TERRA_OK && (!bodies || !foci))
        st = terra_fail(TERRA_E_NOMEM, "drop test: out of memory");
    uint64_t seed = d.seed * 2654435761u + 17;
    const double span = 32.0;
    /* the ridge: the highest ground near the origin, approached by the fastest vehicle */
    double rx = 0, rz = 0, rh = -INFINITY;
    for (int k = 0; st == TERRA_OK && k < 400; k++) {
        double x = (k % 20 - 10) * 100.0, z = (k / 20 - 10) * 100.0, y;
        if (terra_ground_height_at(ground, x, z, &y) == TERRA_OK && y > rh) rx = x, rz = z, rh = y;
    }
    for (int b = 0; st == TERRA_OK && b < nb; b++) {
        drop_body *db = &bodies[b];
        db->vehicle = b >= d.bodies;
        db->radius = db->vehicle ? 1.5 : 0.4 + 0.6 * drop_rnd(&seed);
        double x, z;
        if (db->vehicle) {
            int v = b - d.bodies;
            db->speed = v == 0 ? 30.0 : (v == d.vehicles - 1 ? 300.0 : 30.0 + 270.0 * v / (d.vehicles - 1));
            db->heading = 2.0 * 3.14159265358979 * v / d.vehicles;
            /* the last (fastest) starts 600 m before the ridge, heading over it */
            x = v == d.vehicles - 1 ? rx - 600.0 * cos(db->heading) : 0;
            z = v == d.vehicles - 1 ? rz - 600.0 * sin(db->heading) : 0;
            db->drop_time = 0;
        } else {
            x = (drop_rnd(&seed) - 0.5) * d.area, z = (drop_rnd(&seed) - 0.5) * d.area;
            db->drop_time = 10.0 * b / d.bodies; /* dropped in a stream over the first 10 s */
        }
        double gy = 0;
        terra_ground_height_at(ground, x, z, &gy);
        db->body = dBodyCreate(world);
        dMass m;
        dMassSetSphere(&m, 500, db->radius);
        dBodySetMass(db->body, &m);
        dBodySetPosition(db->body, x, gy + (db->vehicle ? db->radius + 0.05 : 5.0 + 35.0 * drop_rnd(&seed)), z);
        dBodySetLinearDamping(db->body, 0.001);
        dBodySetAngularDamping(db->body, 0.05);
        if (db->vehicle) dBodySetLinearVel(db->body, db->speed * cos(db->heading), 0, db->speed * sin(db->heading));
        db->geom = dCreateSphere(space, db->radius);
        dGeomSetBody(db->geom, db->body);
        dGeomSetCategoryBits(db->geom, BODY_BITS);
        dGeomSetCollideBits(db->geom, GROUND_BITS); /* bodies meet the ground, not each other */
        db->bx = db->bz = INT32_MIN;
        if (db->drop_time > 0) dBodyDisable(db->body);
    }
    drop_ctx ctx = {world, contacts, ode};
    const double dt = 1.0 / d.hz;
    const int steps_per_frame = (int)fmax(1, round(d.hz / 60.0));
    const long steps = (long)(d.seconds * d.hz);
    double built_sum_ms = 0;
    long built_n = 0;
    for (long s = 0; st == TERRA_OK && s < steps; s++) {
        const double t = s * dt;
        if (s % steps_per_frame == 0) { /* a frame: colliders follow the bodies */
            const long dig_steps = (long)fmax(1, round(d.dig_every_s * d.hz));
            for (int b = d.bodies; d.edits && s > 0 && s % dig_steps < steps_per_frame && b < nb && st == TERRA_OK; b++) {
                /* a pit where the vehicle will be in 0.3 s: the ground changes under it as it comes */
                const dReal *p = dBodyGetPosition(bodies[b].body), *v = dBodyGetLinearVel(bodies[b].body);
                const double px = p[0] + 0.3 * v[0], pz = p[2] + 0.3 * v[2];
                double gy = 0;
                if (terra_ground_height_at(ground, px, pz, &gy) != TERRA_OK) continue;
                double region[4];
                st = terra_edit_apply(d.edits, &(terra_edit){.brush = TERRA_BRUSH_DIG, .shape = TERRA_SHAPE_PIT, .x = px,
                                                             .z = pz, .radius = 2.5, .falloff = 4, .amount = gy - 3},
                                      region);
                if (st == TERRA_OK) st = terra_ground_invalidate(ground, region);
                r->pits += st == TERRA_OK;
            }
            if (st != TERRA_OK) break;
            int nf = 0;
            for (int b = 0; b < nb; b++) {
                if (!bodies[b].dropped && t < bodies[b].drop_time) continue;
                const dReal *p = dBodyGetPosition(bodies[b].body), *v = dBodyGetLinearVel(bodies[b].body);
                foci[nf++] = (terra_focus_info){.handle = (terra_focus)(b + 1), .kind = TERRA_FOCUS_ENTITY,
                                                .position = {p[0], p[1], p[2]}, .collision = true,
                                                .velocity = {v[0], v[1], v[2]}};
            }
            st = terra_ground_update(ground, foci, nf);
            if (st != TERRA_OK) break;
            const terra_ground_stats *gs = terra_ground_get_stats(ground);
            built_sum_ms += gs->build_ms;
            built_n += gs->blocks_built;
            if (gs->blocks_built > r->max_built_per_frame) r->max_built_per_frame = gs->blocks_built;
            st = terra_ode_sync(ode);
            if (st != TERRA_OK) break;
            const terra_collider_block *blocks;
            int n = terra_ground_blocks(ground, &blocks);
            if (n > r->max_blocks) r->max_blocks = n;
            if (d.progress && s % (long)d.hz == 0) {
                char line[160];
                snprintf(line, sizeof line, "t=%5.1f s  blocks %4d  built %3d (%.1f ms)  fell %ld", t, n, gs->blocks_built,
                         gs->build_ms, r->fell_through);
                d.progress(d.user, t, line);
            }
        }
        for (int b = 0; b < nb; b++) {
            drop_body *db = &bodies[b];
            if (!db->dropped && t >= db->drop_time) {
                db->dropped = true;
                dBodyEnable(db->body);
            }
            if (!db->dropped) continue;
            if (db->vehicle) { /* driven: its speed along its heading, whatever the ground does */
                const dReal *v = dBodyGetLinearVel(db->body);
                dBodySetLinearVel(db->body, db->speed * cos(db->heading), v[1], db->speed * sin(db->heading));
            }
        }
        dSpaceCollide(space, &ctx, near_ground);
        dWorldQuickStep(world, dt);
        dJointGroupEmpty(contacts);
        /* every body's lowest point against the ground, every step; block entries */
        for (int b = 0; b < nb; b++) {
            drop_body *db = &bodies[b];
            if (!db->dropped) continue;
            const dReal *p = dBodyGetPosition(db->body);
            double gy;
            if (terra_ground_height_at(ground, p[0], p[2], &gy) != TERRA_OK) continue;
            double depth = gy - (p[1] - db->radius);
            if (depth > r->worst_depth_m) r->worst_depth_m = depth;
            if (depth / db->radius > r->worst_depth_fraction) r->worst_depth_fraction = depth / db->radius;
            /* soft contacts let a body sink a little into what it hits before they push it out: past
             * half its radius it is falling through */
            if (depth > 0.5 * db->radius) r->fell_through++;
            if (db->vehicle) {
                const dReal *v = dBodyGetLinearVel(db->body);
                double sp = sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]);
                if (sp > r->vehicle_top_speed) r->vehicle_top_speed = sp;
                if (-depth > r->vehicle_max_height) r->vehicle_max_height = -depth;
            }
            const int32_t bx = (int32_t)floor(p[0] / span), bz = (int32_t)floor(p[2] / span);
            if (bx == db->bx && bz == db->bz) continue;
            const bool first = db->bx == INT32_MIN;
            db->bx = bx, db->bz = bz;
            if (first) continue; /* dropped in: the block under it is stood up that frame */
            r->block_entries++;
            const terra_collider_block *blk = terra_ground_block_at(ground, p[0], p[2]);
            if (!blk) {
                r->entries_unready++;

                r->min_lead_ms = 0;
            } else { /* stood at the start of its frame; the body arrives at the end of this step */
                const long stood_step = (long)(blk->stood_frame - 1) * steps_per_frame;
                const double lead = (double)(s + 1 - stood_step) * dt * 1e3;
                if (lead < r->min_lead_ms) r->min_lead_ms = lead;
            }
        }
        r->steps++;
    }
    r->mean_build_ms = built_n ? built_sum_ms / (double)built_n : 0;
    if (bodies)
        for (int b = 0; b < nb; b++)
            if (bodies[b].body) {
                dGeomDestroy(bodies[b].geom);
                dBodyDestroy(bodies[b].body);
            }
    terra_ode_destroy(ode);
    dJointGroupDestroy(contacts);
    dSpaceDestroy(space);
    dWorldDestroy(world);
    dCloseODE();
    terra_free(bodies);
    terra_free(foci);
    terra_ground_destroy(ground);
    terra_source_destroy(own);
    return st;
}
