/* The plan of a cook shared by MPI ranks (terra_cook_split_plan_make) at the scale it is for: the
 * 3" SRTM's ~15,000 one-degree cells on 64 ranks. The cells are simulated (no such list ships with
 * terra): 15,000 distinct cells grown from 12 seeds into continents between 56 S and 60 N, each
 * 1201 x 1201 samples, planned on the geographic grid a 3" cook uses (256-sample tiles, finest zoom
 * 10), finest tiles as terra cook lists them (every tile a cell's box meets). Figures:
 * cook.mpi.plan_15000_cells_64_ranks.max_over_mean (goal <= 1.1), the subtrees and their depth,
 * and the planning time. */
#include "bench.h"
#include "terra/cook.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define CELLS 15000

static uint64_t rnd(uint64_t *s) {
    *s += 0x9E3779B97F4A7C15ull;
    uint64_t z = *s;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static int cmp_pair(const void *a, const void *b) {
    const int32_t *p = a, *q = b;
    return p[1] != q[1] ? (p[1] > q[1]) - (p[1] < q[1]) : (p[0] > q[0]) - (p[0] < q[0]);
}

int main(void) {
    static uint8_t land[180][360];
    int32_t (*cell)[2] = malloc(CELLS * sizeof *cell);
    uint64_t seed = 2026;
    int n = 0;
    while (n < 12) { /* seeds */
        int lat = -56 + (int)(rnd(&seed) % 116), lon = -180 + (int)(rnd(&seed) % 360);
        if (!land[lat + 90][lon + 180]) land[lat + 90][lon + 180] = 1, cell[n][0] = lon, cell[n][1] = lat, n++;
    }
    while (n < CELLS) { /* a random cell's random neighbour */
        const int *c = cell[rnd(&seed) % (uint64_t)n];
        static const int d[4][2] = {{1, 0}, {-1, 0}, {0, 1}, {0, -1}};
        const int k = (int)(rnd(&seed) % 4), lon = (c[0] + d[k][0] + 540) % 360 - 180, lat = c[1] + d[k][1];
        if (lat < -56 || lat >= 60 || land[lat + 90][lon + 180]) continue;
        land[lat + 90][lon + 180] = 1, cell[n][0] = lon, cell[n][1] = lat, n++;
    }
    const int S = 256, z = 10;
    terra_cook_grid g = {.frame = TERRA_FRAME_GEOGRAPHIC, .origin = {-180, -90}, .tile_units = S, .depth = z};
    g.unit[0] = g.unit[1] = 180.0 / ldexp(S, z);
    const double side = S * g.unit[0];
    terra_cook_footprint *fp = malloc(CELLS * sizeof *fp);
    size_t cap = 0, count = 0;
    int32_t *finest = NULL;
    for (int i = 0; i < CELLS; i++) {
        const double w = cell[i][0], s = cell[i][1], e = w + 1, nn = s + 1;
        fp[i] = (terra_cook_footprint){{(w + 180) / g.unit[0], (s + 90) / g.unit[1], (e + 180) / g.unit[0], (nn + 90) / g.unit[1]},
                                       1201ull * 1201ull};
        const int64_t x0 = (int64_t)floor((w + 180) / side), x1 = (int64_t)ceil((e + 180) / side) - 1;
        const int64_t y0 = (int64_t)floor((s + 90) / side), y1 = (int64_t)ceil((nn + 90) / side) - 1;
        for (int64_t y = y0; y <= y1; y++)
            for (int64_t x = x0; x <= x1; x++) {
                if (count == cap) finest = realloc(finest, 2 * (cap = cap ? 2 * cap : 65536) * sizeof *finest);
                finest[2 * count] = (int32_t)x, finest[2 * count + 1] = (int32_t)y, count++;
            }
    }
    qsort(finest, count, 2 * sizeof *finest, cmp_pair);
    size_t u = 0;
    for (size_t i = 0; i < count; i++)
        if (!u || cmp_pair(finest + 2 * i, finest + 2 * (u - 1))) finest[2 * u] = finest[2 * i], finest[2 * u + 1] = finest[2 * i + 1], u++;
    enum { RUNS = 5 };
    double t[RUNS];
    terra_cook_split_plan p;
    memset(&p, 0, sizeof p);
    for (int r = 0; r < RUNS; r++) {
        terra_cook_split_plan_free(&p);
        const double t0 = bench_now();
        if (terra_cook_split_plan_make(&g, finest, u, fp, CELLS, 64, &p) != TERRA_OK) {
            fprintf(stderr, "bench_cook_plan: %s\n", terra_last_error());
            return 1;
        }
        t[r] = (bench_now() - t0) * 1e3;
    }
    printf("  %d cells, %zu finest tiles, 64 ranks: %zu subtrees of depth %d (zoom %d)\n", CELLS, u,
           p.round_count ? p.round[0].root_count : 0, p.round_count ? p.round[0].top : -1, z - (p.round_count ? p.round[0].top : 0));
    bench_record("cook.mpi.plan_15000_cells_64_ranks.max_over_mean", p.imbalance, "ratio", 1, "value");
    bench_record("cook.mpi.plan_15000_cells_64_ranks.subtrees", p.round_count ? (double)p.round[0].root_count : 0, "count", 1, "value");
    bench_record("cook.mpi.plan_15000_cells_64_ranks.subtree_depth", p.round_count ? p.round[0].top : -1, "depth", 1, "value");
    bench_record("cook.mpi.plan_15000_cells_64_ranks.plan_ms", bench_median(t, RUNS), "ms", RUNS, "median");
    terra_cook_split_plan_free(&p);
    free(finest), free(fp), free(cell);
    return 0;
}
