/* Script sources against C (script.h): ns per sample of 33x33 grids, one thread, for the default
 * world from C, the same world through a script (source.lua_vs_c, goal <= 1.5), a script that
 * changes the world (a road cut into it), and a plain script that calls no world. */
#include "bench.h"
#include "terra/script.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { RUNS = 7, GRIDS = 120, N = 33 };

static char dir[] = "/tmp/terra_bench_script_XXXXXX";
static const char *const files[] = {"same.lua", "road.lua", "plain.lua"};

static void remove_dir(void) { /* at exit, whichever way the benchmark ends */
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        unlink(path);
    }
    rmdir(dir);
}

static double ns_per_sample(const terra_source *src) {
    static float h[N * N];
    static terra_surface s[N * N];
    unsigned long long seed = 42;
    const double t0 = bench_now();
    for (int g = 0; g < GRIDS; g++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        const terra_grid_request r = {.ix0 = (int64_t)(seed >> 44) - 500000, .iz0 = (int64_t)((seed >> 20) & 0xfffff) - 500000,
                                      .spacing = 2, .nx = N, .nz = N};
        if (terra_source_sample(src, &r, h, g % 2 ? s : NULL) != TERRA_OK) {
            fprintf(stderr, "bench_script: %s\n", terra_last_error());
            exit(1);
        }
    }
    return (bench_now() - t0) * 1e9 / (GRIDS * (double)N * N);
}

static terra_script *open_script(const char *name, const char *text) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (!f) return NULL;
    fputs(text, f);
    fclose(f);
    terra_script *s = NULL;
    if (terra_script_open(&(terra_script_desc){.path = path, .world_seed = 1}, &s) != TERRA_OK)
        fprintf(stderr, "bench_script: %s\n", terra_last_error());
    return s;
}

int main(void) {
    if (!mkdtemp(dir)) return 1;
    atexit(remove_dir);
    terra_source *world = NULL;
    if (terra_world_create(&(terra_world_desc){.seed = 1}, &world) != TERRA_OK) return 1;
    terra_script *same = open_script("same.lua", "return { height = terra.world, layer = terra.world_layer, "
                                                 "range = terra.world_range }\n");
    terra_script *road = open_script("road.lua",
                                     "return { layer = terra.world_layer, height = function(x, z)\n"
                                     "  local h = terra.world(x, z)\n"
                                     "  if math.abs(z % 1000) < 6 then h = h * 0.5 end\n"
                                     "  return h end,\n"
                                     "  range = function(x0, z0, x1, z1) local lo, hi = terra.world_range(x0, z0, x1, z1)\n"
                                     "    return math.min(lo, lo * 0.5), math.max(hi, hi * 0.5) end }\n");
    terra_script *plain = open_script("plain.lua",
                                      "return { min_height = -60, max_height = 60, height = function(x, z)\n"
                                      "  return 40 * math.sin(x / 300) * math.cos(z / 500) + 10 * terra.fbm(x / 900, z / 900)\n"
                                      "end }\n");
    if (!same || !road || !plain) return 1;
    double c[RUNS], s[RUNS], r[RUNS], p[RUNS], sc[RUNS], rc[RUNS];
    ns_per_sample(world); /* warm: every script's traces compiled before timing */
    ns_per_sample(terra_script_source(same)), ns_per_sample(terra_script_source(road));
    ns_per_sample(terra_script_source(plain));
    for (int k = 0; k < RUNS; k++) { /* alternated, so the machine's noise falls on all alike */
        c[k] = ns_per_sample(world);
        s[k] = ns_per_sample(terra_script_source(same));
        r[k] = ns_per_sample(terra_script_source(road));
        p[k] = ns_per_sample(terra_script_source(plain));
        sc[k] = s[k] / c[k], rc[k] = r[k] / c[k];
    }
    bench_record("source.c_world_ns", bench_median(c, RUNS), "ns", RUNS, "median");
    bench_record("source.lua_world_ns", bench_median(s, RUNS), "ns", RUNS, "median");
    bench_record("source.lua_vs_c", bench_median(sc, RUNS), "ratio", RUNS, "median");
    bench_record("source.lua_road_vs_c", bench_median(rc, RUNS), "ratio", RUNS, "median");
    bench_record("source.lua_plain_ns", bench_median(p, RUNS), "ns", RUNS, "median");
    terra_script_close(same), terra_script_close(road), terra_script_close(plain);
    terra_source_destroy(world);
    return 0;
}
