/* libFuzzer target: the renderer's mesh-tile check and expansion (terra/tile_mesh.h) on arbitrary
 * bytes. The first byte picks how the rest is read: odd, as a mesh tile's bytes; even, as a recipe
 * for a valid tile (counts, positions and indices taken from the bytes, indices reduced below the
 * vertex count) whose last recipe byte may flip one byte of it, so mutations reach the expansion
 * and not only the header's rules. Must never crash or read out of bounds; a tile the check passes
 * must expand, and every index written must lie below the vertices written. */
#include "terra/tile_mesh.h"

#include <stdlib.h>
#include <string.h>

static uint32_t take(const uint8_t **p, const uint8_t *end, int n) {
    uint32_t v = 0;
    for (int i = 0; i < n && *p < end; i++) v |= (uint32_t)*(*p)++ << (8 * i);
    return v;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    uint8_t *tile = NULL;
    size_t n = 0;
    if (data[0] & 1) {
        n = size - 1;
        tile = malloc(n ? n : 1);
        if (!tile) return 0;
        if (n) memcpy(tile, data + 1, n);
    } else {
        const uint8_t *p = data + 1, *end = data + size;
        const uint32_t V = 3 + take(&p, end, 1) % 200, I = 3 * (1 + take(&p, end, 1) % 300);
        n = terra_tile_mesh_bytes(V, I);
        tile = calloc(1, n);
        if (!tile) return 0;
        terra_tile_mesh h = {TERRA_TILE_MESH_MAGIC, V, I, 0, 1.0f + (float)take(&p, end, 2), 0, 0, 0, 0, 0};
        h.size_z = h.size_x, h.max_height = (float)take(&p, end, 2), h.skirt_m = (float)(take(&p, end, 1) % 16);
        memcpy(tile, &h, sizeof h);
        terra_tile_mesh_vertex *v = (terra_tile_mesh_vertex *)(void *)(tile + sizeof h);
        for (uint32_t i = 0; i < V; i++) {
            /* corners and sides often: skirts and colour conflicts get exercised */
            const uint32_t c = take(&p, end, 1);
            v[i].u = (uint16_t)(c & 1 ? (c & 2 ? 32767 : 0) : take(&p, end, 2) % 32768);
            v[i].v = (uint16_t)(c & 4 ? (c & 8 ? 32767 : 0) : take(&p, end, 2) % 32768);
            v[i].h = (uint16_t)(take(&p, end, 2) % 32768);
        }
        uint32_t *idx = (uint32_t *)(void *)(tile + (n - (size_t)I * 4));
        for (uint32_t i = 0; i < I; i++) idx[i] = take(&p, end, 1) % V;
        if (p < end && (*p & 0x80)) tile[take(&p, end, 2) % n] ^= (uint8_t)take(&p, end, 1);
    }
    if (terra_tile_mesh_check(tile, n) == TERRA_OK) {
        terra_tile_mesh h;
        memcpy(&h, tile, sizeof h);
        terra_tile_mesh_limits lim;
        if (terra_tile_mesh_limits_for(h.vertex_count, h.index_count, &lim) != TERRA_OK) abort();
        terra_grid_vertex *vo = malloc(lim.vertices * sizeof *vo);
        uint32_t *io = malloc(lim.indices * sizeof *io);
        void *scratch = malloc(lim.scratch_bytes ? lim.scratch_bytes : 1);
        terra_tile_mesh_info info;
        if (vo && io && scratch) {
            if (terra_tile_mesh_expand(tile, n, terra_tile_key_make(0, 3, 1, 2), vo, io, scratch, &info) != TERRA_OK) abort();
            const uint32_t written = info.indices;
            if (written != 3 * (info.triangles + info.skirt_triangles) || info.vertices > lim.vertices || written > lim.indices)
                abort();
            for (uint32_t i = 0; i < written; i++)
                if (io[i] >= info.vertices) abort();
        }
        free(vo), free(io), free(scratch);
    }
    free(tile);
    return 0;
}
