/* libterra-ode: a planet's collider blocks as ODE trimeshes, and the drop proof on curved ground. */
#include "terra/ode.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "drop.h"
#include "keymap.h"


typedef struct planet_geom {
    terra_tile_key key;
    dTriMeshDataID data;
    dGeomID geom;
    dReal *verts;
    bool seen;
} planet_geom;

struct terra_ode_planet {
    terra_planet_colliders *colliders;
    dSpaceID space;
    planet_geom *geoms;
    int n, cap;
    key_map index;
    dTriIndex *indices;
    int nindices, cells;
};

terra_status terra_ode_planet_create(terra_planet_colliders *colliders, dSpaceID space, terra_ode_planet **out) {
    *out = NULL;
    terra_ode_planet *o = terra_calloc(1, sizeof *o);
    if (!o) return terra_fail(TERRA_E_NOMEM, "ode planet: out of memory");
    o->colliders = colliders, o->space = space;
    o->cap = 256;
    o->geoms = terra_alloc(sizeof *o->geoms * (size_t)o->cap);
    /* the grid's triangles, shared by every block */
    const terra_planet_colliders_desc *cd = terra_planet_colliders_get_desc(colliders);
    o->cells = terra_planet_get_desc(cd->planet)->cells;
    o->nindices = terra_grid_index_count(o->cells);
    uint32_t *idx = terra_alloc(sizeof *idx * (size_t)o->nindices);
    o->indices = terra_alloc(sizeof *o->indices * (size_t)o->nindices);
    if (!o->geoms || !idx || !o->indices || !map_init(&o->index, cd->max_blocks)) { /* a geom per standing block */
        terra_free(idx);
        terra_ode_planet_destroy(o);
        return terra_fail(TERRA_E_NOMEM, "ode planet: out of memory");
    }
    /* a planet's tile has i x j along its up (planet.h), the plane's against it: the triangles turn
     * the other way, so each is reversed to face outward, as ODE's one-sided trimeshes need */
    terra_grid_indices(o->cells, idx);
    for (int k = 0; k < o->nindices; k += 3) {
        o->indices[k] = (dTriIndex)idx[k];
        o->indices[k + 1] = (dTriIndex)idx[k + 2];
        o->indices[k + 2] = (dTriIndex)idx[k + 1];
    }
    terra_free(idx);
    *out = o;
    return TERRA_OK;
}

static void drop_geom(terra_ode_planet *o, int k) {
    planet_geom *g = &o->geoms[k];
    dGeomDestroy(g->geom);
    dGeomTriMeshDataDestroy(g->data);
    terra_free(g->verts);
    map_del(&o->index, g->key);
    if (k != o->n - 1) {
        o->geoms[k] = o->geoms[o->n - 1];
        map_put(&o->index, o->geoms[k].key, k);
    }
    o->n--;
}

void terra_ode_planet_destroy(terra_ode_planet *o) {
    if (!o) return;
    while (o->n > 0) drop_geom(o, o->n - 1);
    terra_free(o->geoms);
    terra_free(o->indices);
    map_free(&o->index);
    terra_free(o);
}

/* A block's trimesh: its vertices relative to its origin, the geom placed there. */
static terra_status build_geom(terra_ode_planet *o, planet_geom *g, const terra_planet_block *b) {
    const int nv = terra_grid_vertex_count(o->cells);
    g->verts = terra_alloc(sizeof(dReal) * 3 * (size_t)nv);
    if (!g->verts) return terra_fail(TERRA_E_NOMEM, "ode planet: out of memory");
    for (int i = 0; i < nv; i++) {
        g->verts[3 * i] = b->verts[i].x, g->verts[3 * i + 1] = b->verts[i].y, g->verts[3 * i + 2] = b->verts[i].z;
    }
    g->data = dGeomTriMeshDataCreate();
    dGeomTriMeshDataBuildDouble(g->data, g->verts, 3 * sizeof(dReal), nv, o->indices, o->nindices, 3 * sizeof(dTriIndex));
    g->geom = dCreateTriMesh(o->space, g->data, NULL, NULL, NULL);
    dGeomSetPosition(g->geom, b->origin.x, b->origin.y, b->origin.z);
    dGeomSetData(g->geom, o);
    dGeomSetCategoryBits(g->geom, GROUND_BITS);
    dGeomSetCollideBits(g->geom, ~(unsigned long)GROUND_BITS);
    g->key = b->key;
    return TERRA_OK;
}

terra_status terra_ode_planet_sync(terra_ode_planet *o) {
    const terra_planet_block *blocks;
    const int n = terra_planet_colliders_blocks(o->colliders, &blocks);
    for (int k = 0; k < o->n; k++) o->geoms[k].seen = false;
    for (int b = 0; b < n; b++) {
        int32_t k = map_get(&o->index, blocks[b].key);
        if (k < 0) {
            if (o->n == o->cap) {
                planet_geom *grown = terra_realloc(o->geoms, sizeof *grown * (size_t)o->cap * 2);
                if (!grown) return terra_fail(TERRA_E_NOMEM, "ode planet: out of memory");
                o->geoms = grown, o->cap *= 2;
            }
            k = o->n++;
            memset(&o->geoms[k], 0, sizeof o->geoms[k]);
            map_put(&o->index, blocks[b].key, k);
            terra_status st = build_geom(o, &o->geoms[k], &blocks[b]);
            if (st != TERRA_OK) { /* nothing half made is kept: the next sync tries again */
                terra_free(o->geoms[k].verts);
                map_del(&o->index, blocks[b].key);
                o->n--;
                return st;
            }
        }
        o->geoms[k].seen = true;
    }
    for (int k = o->n - 1; k >= 0; k--)
        if (!o->geoms[k].seen) drop_geom(o, k);
    return TERRA_OK;
}

bool terra_ode_planet_is_ground(const terra_ode_planet *o, dGeomID geom) {
    return dGeomGetClass(geom) == dTriMeshClass && dGeomGetData(geom) == (void *)o;
}

/* ---- the drop proof on a planet -------------------------------------------------------------------- */

typedef struct pbody {
    dBodyID body;
    dGeomID geom;
    double radius, mass, speed;
    terra_vec3 heading; /* vehicles: the way they drive, kept tangent (a great circle) */
    terra_tile_key tile;
    bool vehicle, dropped;
    double drop_time;
} pbody;

typedef struct pdrop_ctx {
    dWorldID world;
    dJointGroupID contacts;
} pdrop_ctx;

static void planet_contact(void *data, dGeomID a, dGeomID b) {
    pdrop_ctx *c = data;
    dContact contact[8];
    const int n = dCollide(a, b, 8, &contact[0].geom, sizeof(dContact));
    for (int k = 0; k < n; k++) {
        dSurfaceParameters *s = &contact[k].surface;
        memset(s, 0, sizeof *s);
        s->mode = dContactBounce | dContactSoftCFM | dContactSoftERP | dContactApprox1;
        s->mu = 0.8, s->bounce = 0.2, s->bounce_vel = 0.5, s->soft_cfm = 1e-6, s->soft_erp = 0.95;
        dJointID j = dJointCreateContact(c->world, c->contacts, &contact[k]);
        dJointAttach(j, dGeomGetBody(a), dGeomGetBody(b));
    }
}


static terra_vec3 v3_of(const dReal *p) { return (terra_vec3){p[0], p[1], p[2]}; }
static double v3_dot(terra_vec3 a, terra_vec3 b) { return a.x * b.x + a.y * b.y + a.z * b.z; }
static terra_vec3 v3_unit(terra_vec3 a) {
    const double l = sqrt(v3_dot(a, a));
    return (terra_vec3){a.x / l, a.y / l, a.z / l};
}

terra_status terra_ode_planet_drop_test(const terra_planet_drop_desc *desc, terra_drop_result *r) {
    terra_planet_drop_desc d = desc ? *desc : (terra_planet_drop_desc){0};
    if (d.bodies == 0) d.bodies = 100;
    if (d.vehicles == 0) d.vehicles = 4;
    if (d.seconds == 0) d.seconds = 20;
    if (d.hz == 0) d.hz = 240;
    if (d.area == 0) d.area = 400;
    if (d.lat == 0 && d.lon == 0) d.lat = -4.3, d.lon = -12.3;
    if (d.bodies < 0 || d.vehicles < 0 || d.vehicles > 16 || !(d.seconds > 0) || !(d.hz >= 30) || !(d.area > 0) ||
        !(fabs(d.lat) <= 90) || !(fabs(d.lon) <= 180))
        return terra_fail(TERRA_E_INVALID, "planet drop test: bad options");
    memset(r, 0, sizeof *r);
    r->min_lead_ms = INFINITY;
    terra_planet *own = NULL;
    const terra_planet *p = d.planet;
    if (!p) {
        terra_status st = terra_planet_create(&(terra_planet_desc){.seed = 1, .cells = 16}, &own);
        if (st != TERRA_OK) return st;
        p = own;
    }
    terra_planet_colliders *col = NULL;
    terra_status st = terra_planet_colliders_create(&(terra_planet_colliders_desc){.planet = p, .max_blocks = 1 << 14}, &col);
    if (st != TERRA_OK) {
        terra_planet_destroy(own);
        return st;
    }
    dInitODE2(0);
    dAllocateODEDataForThread(dAllocateMaskAll);
    dWorldID world = dWorldCreate();
    dWorldSetGravity(world, 0, 0, 0); /* each body is pulled toward the centre instead */
    dWorldSetERP(world, 0.8);
    dWorldSetCFM(world, 1e-5);
    dSpaceID space = dHashSpaceCreate(0);
    dHashSpaceSetLevels(space, 2, 7);
    dJointGroupID contacts = dJointGroupCreate(0);
    terra_ode_planet *ode = NULL;
    st = terra_ode_planet_create(col, space, &ode);
    const int nb = d.bodies + d.vehicles;
    pbody *bodies = terra_calloc((size_t)nb, sizeof *bodies);
    terra_vec3 *pos = terra_calloc((size_t)nb, sizeof *pos), *vel = terra_calloc((size_t)nb, sizeof *vel);
    if (st == TERRA_OK && (!bodies || !pos || !vel)) st = terra_fail(TERRA_E_NOMEM, "planet drop test: out of memory");
    uint64_t seed = d.seed * 2654435761u + 17;
    const terra_vec3 centre = terra_planet_latlon_dir(d.lat, d.lon);
    terra_vec3 east, north;
    terra_planet_frame(centre, &east, &north, NULL);
    const double R = terra_planet_get_desc(p)->radius_m, g = 9.81;
    const int level = 0;
    for (int b = 0; st == TERRA_OK && b < nb; b++) {
        pbody *pb = &bodies[b];
        pb->vehicle = b >= d.bodies;
        pb->radius = pb->vehicle ? 1.5 : 0.4 + 0.6 * drop_rnd(&seed);
        double x = (drop_rnd(&seed) - 0.5) * d.area, z = (drop_rnd(&seed) - 0.5) * d.area;
        if (pb->vehicle) {
            const int v = b - d.bodies;
            pb->speed = d.vehicles == 1 ? 30.0 : 30.0 + 270.0 * v / (d.vehicles - 1);
            const double h = 2.0 * 3.14159265358979 * v / d.vehicles;
            pb->heading = (terra_vec3){cos(h) * north.x + sin(h) * east.x, cos(h) * north.y + sin(h) * east.y,
                                       cos(h) * north.z + sin(h) * east.z};
            x = z = 0;
        } else {
            pb->drop_time = 5.0 * b / (d.bodies ? d.bodies : 1); /* a stream over the first 5 s */
        }
        const terra_vec3 dir = v3_unit((terra_vec3){R * centre.x + x * east.x + z * north.x, R * centre.y + x * east.y + z * north.y,
                                                    R * centre.z + x * east.z + z * north.z});
        const double lift = pb->vehicle ? pb->radius + 0.05 : 5.0 + 25.0 * drop_rnd(&seed);
        const terra_vec3 at0 = terra_planet_point(p, dir, terra_planet_height(p, dir) + lift);
        pb->body = dBodyCreate(world);
        dMass m;
        dMassSetSphere(&m, 500, pb->radius);
        dBodySetMass(pb->body, &m);
        pb->mass = m.mass;
        dBodySetPosition(pb->body, at0.x, at0.y, at0.z);
        dBodySetLinearDamping(pb->body, 0.001);
        dBodySetAngularDamping(pb->body, 0.05);
        pb->geom = dCreateSphere(space, pb->radius);
        dGeomSetBody(pb->geom, pb->body);
        dGeomSetCategoryBits(pb->geom, BODY_BITS);
        dGeomSetCollideBits(pb->geom, GROUND_BITS);
        pb->tile = ~(terra_tile_key)0;
        if (pb->drop_time > 0) dBodyDisable(pb->body);
    }
    pdrop_ctx ctx = {world, contacts};
    const double dt = 1.0 / d.hz;
    const int steps_per_frame = (int)fmax(1, round(d.hz / 60.0));
    const long steps = (long)(d.seconds * d.hz);
    uint32_t frame = 0;
    double built_ms = 0;
    long built = 0;
    for (long s = 0; st == TERRA_OK && s < steps; s++) {
        const double t = s * dt;
        if (s % steps_per_frame == 0) { /* a frame: the blocks follow the bodies */
            frame++;
            int n = 0;
            for (int b = 0; b < nb; b++) {
                if (!bodies[b].dropped && t < bodies[b].drop_time) continue;
                pos[n] = v3_of(dBodyGetPosition(bodies[b].body)), vel[n] = v3_of(dBodyGetLinearVel(bodies[b].body));
                n++;
            }
            const terra_planet_block *blocks;
            const double t0 = terra_now_s();
            st = terra_planet_colliders_update(col, pos, vel, n);
            if (st == TERRA_OK) st = terra_ode_planet_sync(ode);
            if (st != TERRA_OK) break;
            const int now = terra_planet_colliders_blocks(col, &blocks);
            int fresh = 0;
            for (int k = 0; k < now; k++) fresh += blocks[k].stood == frame;
            built += fresh, built_ms += (terra_now_s() - t0) * 1e3;
            if (fresh > r->max_built_per_frame) r->max_built_per_frame = fresh;
            if (now > r->max_blocks) r->max_blocks = now;
            if (d.progress && s % (long)d.hz == 0) {
                char line[160];
                snprintf(line, sizeof line, "t=%5.1f s  blocks %5d  built %4d  fell %ld", t, now, fresh, r->fell_through);
                d.progress(d.user, t, line);
            }
        }
        for (int b = 0; b < nb; b++) {
            pbody *pb = &bodies[b];
            if (!pb->dropped && t >= pb->drop_time) pb->dropped = true, dBodyEnable(pb->body);
            if (!pb->dropped) continue;
            const terra_vec3 up = v3_unit(v3_of(dBodyGetPosition(pb->body)));
            dBodyAddForce(pb->body, -up.x * g * pb->mass, -up.y * g * pb->mass, -up.z * g * pb->mass);
            if (pb->vehicle) { /* driven: its speed along its great circle, along the ground's slope under it
                                  (what pushes it off the ground, or out of it, is the contacts') */
                const double k = v3_dot(pb->heading, up);
                pb->heading = v3_unit((terra_vec3){pb->heading.x - k * up.x, pb->heading.y - k * up.y, pb->heading.z - k * up.z});
                terra_vec3 n; /* the slope where it will be after this step */
                const terra_vec3 at = v3_of(dBodyGetPosition(pb->body));
                const double ahead = pb->speed * dt;
                terra_planet_altitude(p, (terra_vec3){at.x + pb->heading.x * ahead, at.y + pb->heading.y * ahead, at.z + pb->heading.z * ahead},
                                      NULL, &n);
                const double kn = v3_dot(pb->heading, n);
                const terra_vec3 along = v3_unit((terra_vec3){pb->heading.x - kn * n.x, pb->heading.y - kn * n.y, pb->heading.z - kn * n.z});
                const terra_vec3 v = v3_of(dBodyGetLinearVel(pb->body));
                const double vn = v3_dot(v, n), sp = pb->speed * fmin(1.0, 0.1 + t / 2); /* up to speed in 2 s */
                dBodySetLinearVel(pb->body, along.x * sp + n.x * vn, along.y * sp + n.y * vn, along.z * sp + n.z * vn);
            }
        }
        dSpaceCollide(space, &ctx, planet_contact);
        dWorldQuickStep(world, dt);
        dJointGroupEmpty(contacts);
        for (int b = 0; b < nb; b++) { /* every body's lowest point against the ground, every step */
            pbody *pb = &bodies[b];
            if (!pb->dropped) continue;
            const terra_vec3 at = v3_of(dBodyGetPosition(pb->body));
            const double depth = pb->radius - terra_planet_altitude(p, at, NULL, NULL);
            if (depth > r->worst_depth_m) r->worst_depth_m = depth;
            if (depth / pb->radius > r->worst_depth_fraction) r->worst_depth_fraction = depth / pb->radius;
            if (depth > 0.5 * pb->radius) r->fell_through++;
            if (pb->vehicle) {
                const terra_vec3 v = v3_of(dBodyGetLinearVel(pb->body));
                const double sp = sqrt(v3_dot(v, v));
                if (sp > r->vehicle_top_speed) r->vehicle_top_speed = sp;
                if (-depth > r->vehicle_max_height) r->vehicle_max_height = -depth;
            }
            const terra_tile_key tile = terra_planet_key_at(p, terra_planet_up_at(p, at, NULL), level);
            if (tile == pb->tile) continue;
            const bool first = pb->tile == ~(terra_tile_key)0;
            pb->tile = tile;
            if (first) continue;
            r->block_entries++;
            const terra_planet_block *blk = terra_planet_colliders_block_at(col, at);
            if (!blk) {
                r->entries_unready++;
                r->min_lead_ms = 0;
            } else {
                const double lead = (double)(s + 1 - (long)(blk->stood - 1) * steps_per_frame) * dt * 1e3;
                if (lead < r->min_lead_ms) r->min_lead_ms = lead;
            }
        }
        r->steps++;
    }
    r->mean_build_ms = built ? built_ms / (double)built : 0;
    if (bodies)
        for (int b = 0; b < nb; b++)
            if (bodies[b].body) {
                dGeomDestroy(bodies[b].geom);
                dBodyDestroy(bodies[b].body);
            }
    terra_ode_planet_destroy(ode);
    dJointGroupDestroy(contacts);
    dSpaceDestroy(space);
    dWorldDestroy(world);
    dCloseODE();
    terra_free(bodies), terra_free(pos), terra_free(vel);
    terra_planet_colliders_destroy(col);
    terra_planet_destroy(own);
    return st;
}
