/* terra planet: collider blocks, the finest tiles around bodies, each in its own local frame. */
#include "terra/planet.h"

#include "../keymap.h"

#include <math.h>
#include <string.h>

typedef struct slot {
    terra_planet_block b;
    terra_grid_vertex *verts;
    uint32_t wanted; /* the update that last wanted it */
} slot;

struct terra_planet_colliders {
    terra_planet_colliders_desc d;
    int cells;
    slot *slots;
    int n;
    terra_planet_block *view; /* the standing blocks, as handed out */
    key_map index;            /* key -> slots[] */
    key_set queued;           /* an update's new tiles, each once */
    terra_tile_key *pending;  /* the same, in order */
    int npending;
    void *scratch;
    uint32_t update;
};

terra_status terra_planet_colliders_create(const terra_planet_colliders_desc *desc, terra_planet_colliders **out) {
    *out = NULL;
    if (!desc || !desc->planet) return terra_fail(TERRA_E_INVALID, "planet colliders: no planet given");
    terra_planet_colliders_desc d = *desc;
    if (d.max_blocks == 0) d.max_blocks = 4096;
    if (d.lead_s == 0) d.lead_s = 0.25;
    const int levels = terra_planet_get_desc(d.planet)->levels;
    if (d.level < 0 || d.level >= levels)
        return terra_fail(TERRA_E_INVALID, "planet colliders: level %d is not one of the planet's 0..%d", d.level, levels - 1);
    if (d.max_blocks < 9 || d.max_blocks > 1 << 20)
        return terra_fail(TERRA_E_INVALID, "planet colliders: max_blocks must be from 9 to 2^20 (got %d)", d.max_blocks);
    if (!(d.lead_s >= 0) || !(d.lead_s <= 10))
        return terra_fail(TERRA_E_INVALID, "planet colliders: lead_s must be from 0 to 10 s (got %g)", d.lead_s);
    terra_planet_colliders *c = terra_calloc(1, sizeof *c);
    if (!c) return terra_fail(TERRA_E_NOMEM, "planet colliders: out of memory");
    c->d = d;
    c->cells = terra_planet_get_desc(d.planet)->cells;
    c->slots = terra_calloc((size_t)d.max_blocks, sizeof *c->slots);
    c->view = terra_alloc(sizeof *c->view * (size_t)d.max_blocks);
    c->scratch = terra_alloc(terra_planet_scratch_bytes(c->cells));
    c->pending = terra_alloc(sizeof *c->pending * (size_t)d.max_blocks);
    if (!c->slots || !c->view || !c->scratch || !c->pending || !map_init(&c->index, d.max_blocks) ||
        !set_init(&c->queued, d.max_blocks)) {
        terra_planet_colliders_destroy(c);
        return terra_fail(TERRA_E_NOMEM, "planet colliders: out of memory");
    }
    *out = c;
    return TERRA_OK;
}

void terra_planet_colliders_destroy(terra_planet_colliders *c) {
    if (!c) return;
    if (c->slots)
        for (int i = 0; i < c->d.max_blocks; i++) terra_free(c->slots[i].verts);
    terra_free(c->slots);
    terra_free(c->view);
    terra_free(c->scratch);
    terra_free(c->pending);
    map_free(&c->index);
    set_free(&c->queued);
    terra_free(c);
}

/* Marks tile `key` wanted: a standing one kept, a new one queued to stand (once). */
static void want(terra_planet_colliders *c, terra_tile_key key) {
    const int32_t at = map_get(&c->index, key);
    if (at >= 0) c->slots[at].wanted = c->update;
    else if (set_add(&c->queued, key)) c->pending[c->npending++] = key; /* the set's capacity bounds it */
}

/* Stands a queued tile in the next free slot. */
static terra_status stand(terra_planet_colliders *c, terra_tile_key key) {
    slot *s = &c->slots[c->n];
    if (!s->verts) s->verts = terra_alloc(sizeof *s->verts * (size_t)terra_grid_vertex_count(c->cells));
    if (!s->verts) return terra_fail(TERRA_E_NOMEM, "planet colliders: out of memory");
    terra_status st = terra_planet_build(c->d.planet, key, s->verts, c->scratch, NULL);
    if (st != TERRA_OK) return st;
    s->b = (terra_planet_block){key, terra_planet_tile_origin(c->d.planet, key), s->verts, c->update};
    s->wanted = c->update;
    map_put(&c->index, key, c->n++);
    return TERRA_OK;
}

/* The tile under a position and its eight neighbours: the tiles under the directions of their
 * middles, half a tile past each side (the face's mapping goes on past its edges, so across an edge
 * they fall on the face beyond; at a cube's corner two of them are the same tile). */
static void want_around(terra_planet_colliders *c, terra_vec3 pos) {
    const terra_tile_key k = terra_planet_key_at(c->d.planet, terra_planet_up_at(c->d.planet, pos, NULL), c->d.level);
    const int N = c->cells;
    for (int j = -1; j <= 1; j++)
        for (int i = -1; i <= 1; i++) {
            const terra_vec3 d = terra_planet_tile_dir(c->d.planet, k, N / 2 + i * N, N / 2 + j * N);
            want(c, i == 0 && j == 0 ? k : terra_planet_key_at(c->d.planet, d, c->d.level));
        }
}

/* In three steps, so that a failure leaves what stands consistent: what is wanted is marked (the
 * new tiles queued), what is not is let go, then the queued tiles stand. */
terra_status terra_planet_colliders_update(terra_planet_colliders *c, const terra_vec3 *pos, const terra_vec3 *vel, int n) {
    for (int b = 0; b < n; b++) {
        const terra_vec3 p = pos[b];
        if (!isfinite(p.x) || !isfinite(p.y) || !isfinite(p.z) || (p.x == 0 && p.y == 0 && p.z == 0))
            return terra_fail(TERRA_E_INVALID, "planet colliders: body %d is at (%g, %g, %g)", b, p.x, p.y, p.z);
        if (vel && !(isfinite(vel[b].x) && isfinite(vel[b].y) && isfinite(vel[b].z)))
            return terra_fail(TERRA_E_INVALID, "planet colliders: body %d moves at (%g, %g, %g)", b, vel[b].x, vel[b].y, vel[b].z);
    }
    c->update++;
    set_clear(&c->queued);
    c->npending = 0;
    for (int b = 0; b < n; b++) {
        const terra_vec3 p = pos[b];
        want_around(c, p);
        if (vel) {
            const double k = c->d.lead_s;
            want_around(c, (terra_vec3){p.x + vel[b].x * k, p.y + vel[b].y * k, p.z + vel[b].z * k});
        }
    }
    /* let go of what no body wanted: the last slot fills the hole */
    for (int i = c->n - 1; i >= 0; i--) {
        if (c->slots[i].wanted == c->update) continue;
        map_del(&c->index, c->slots[i].b.key);
        if (i != c->n - 1) {
            const slot keep = c->slots[i];
            c->slots[i] = c->slots[c->n - 1];
            c->slots[c->n - 1] = keep; /* its vertex buffer is reused */
            map_put(&c->index, c->slots[i].b.key, i);
        }
        c->n--;
    }
    terra_status st = TERRA_OK;
    if (c->n + c->npending > c->d.max_blocks || c->queued.count >= c->queued.capacity)
        st = terra_fail(TERRA_E_CAPACITY, "planet colliders: the bodies need more than max_blocks (%d) blocks", c->d.max_blocks);
    for (int i = 0; i < c->npending && st == TERRA_OK; i++) st = stand(c, c->pending[i]);
    for (int i = 0; i < c->n; i++) c->view[i] = c->slots[i].b;
    return st;
}

int terra_planet_colliders_blocks(const terra_planet_colliders *c, const terra_planet_block **blocks) {
    *blocks = c->view;
    return c->n;
}

const terra_planet_block *terra_planet_colliders_block_at(const terra_planet_colliders *c, terra_vec3 pos) {
    const int32_t at = map_get(&c->index, terra_planet_key_at(c->d.planet, terra_planet_up_at(c->d.planet, pos, NULL), c->d.level));
    return at >= 0 ? &c->view[at] : NULL;
}

const terra_planet_colliders_desc *terra_planet_colliders_get_desc(const terra_planet_colliders *c) { return &c->d; }
