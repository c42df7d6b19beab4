/* Script sources (script.h): a script that returns the default world is the default world bit for
 * bit, on every thread at once; the noise built-ins are the C ones; surfaces are named as documented;
 * a broken script says file:line and fails only what it served; one that loops is stopped; a table
 * without a sound range is refused; a required module is watched. */
#include "check.h"
#include "terra/ground.h"
#include "terra/script.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static char dir[] = "/tmp/terra_script_XXXXXX";

static const char *write_file(const char *name, const char *text) {
    static char path[4][512];
    static int k;
    char *p = path[k++ % 4];
    snprintf(p, 512, "%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    if (f) fputs(text, f), fclose(f);
    return p;
}

static terra_status open_text(const char *text, double limit_s, terra_script **s) {
    return terra_script_open(&(terra_script_desc){.path = write_file("world.lua", text), .world_seed = 7,
                                                  .time_limit_s = limit_s},
                             s);
}

/* ---- the default world, through a script ------------------------------------------------------------- */

static const char *world_lua = "return { height = terra.world, layer = terra.world_layer, range = terra.world_range }\n";

typedef struct {
    const terra_source *a, *b;
    unsigned long long seed;
    int grids, mismatches, failures;
} same_job;

/* Random grids (spacings 2^-3..2^6, anywhere within 100 km): heights and surfaces equal bit for bit. */
static void *same_grids(void *arg) {
    same_job *j = arg;
    enum { N = 33 };
    float ha[N * N], hb[N * N];
    terra_surface sa[N * N], sb[N * N];
    for (int g = 0; g < j->grids; g++) {
        const double spacing = ldexp(1.0, (int)(test_rand_u64(&j->seed) % 10) - 3);
        const terra_grid_request r = {.ix0 = (int64_t)(test_rand_range(&j->seed, -1e5, 1e5) / spacing),
                                      .iz0 = (int64_t)(test_rand_range(&j->seed, -1e5, 1e5) / spacing),
                                      .spacing = spacing,
                                      .nx = 1 + (int)(test_rand_u64(&j->seed) % N),
                                      .nz = 1 + (int)(test_rand_u64(&j->seed) % N)};
        const bool surf = g % 2;
        if (terra_source_sample(j->a, &r, ha, surf ? sa : NULL) || terra_source_sample(j->b, &r, hb, surf ? sb : NULL)) {
            j->failures++;
            continue;
        }
        const size_t n = (size_t)r.nx * (size_t)r.nz;
        j->mismatches += memcmp(ha, hb, n * sizeof *ha) != 0 || (surf && memcmp(sa, sb, n) != 0);
    }
    return NULL;
}

static void test_world_through_script(void) {
    terra_script *s = NULL;
    terra_source *w = NULL;
    CHECK(open_text(world_lua, 0, &s) == TERRA_OK, "open: %s", terra_last_error());
    CHECK(terra_world_create(&(terra_world_desc){.seed = 7}, &w) == TERRA_OK, "world");
    if (!s || !w) return;
    const terra_source *src = terra_script_source(s);
    enum { THREADS = 4 };
    pthread_t t[THREADS];
    same_job jobs[THREADS];
    for (int i = 0; i < THREADS; i++) {
        jobs[i] = (same_job){.a = src, .b = w, .seed = 11 + (unsigned long long)i, .grids = 150};
        pthread_create(&t[i], NULL, same_grids, &jobs[i]);
    }
    int mismatches = 0, failures = 0;
    for (int i = 0; i < THREADS; i++) {
        pthread_join(t[i], NULL);
        mismatches += jobs[i].mismatches, failures += jobs[i].failures;
    }
    CHECK(failures == 0, "%d grids failed: %s", failures, terra_last_error());
    CHECK(mismatches == 0, "%d of %d grids differ from the default world", mismatches, THREADS * 150);
    /* points and ranges too */
    unsigned long long seed = 5;
    int bad = 0;
    for (int i = 0; i < 2000; i++) {
        const double x = test_rand_range(&seed, -5e4, 5e4), z = test_rand_range(&seed, -5e4, 5e4);
        float a = 0, b = 1, lo_a = 0, hi_a = 0, lo_b = 1, hi_b = 1;
        terra_source_height(src, x, z, &a);
        terra_source_height(w, x, z, &b);
        terra_source_height_range(src, x, z, x + 300, z + 700, &lo_a, &hi_a);
        terra_source_height_range(w, x, z, x + 300, z + 700, &lo_b, &hi_b);
        bad += a != b || lo_a != lo_b || hi_a != hi_b;
    }
    CHECK(bad == 0, "%d of 2000 points or ranges differ", bad);
    CHECK(terra_script_surfaces(s) == NULL, "no layers, no table");
    CHECK(terra_script_timeouts(s) == 0, "no timeouts");
    terra_source_destroy(w);
    terra_script_close(s);
}

/* ---- built-ins ---------------------------------------------------------------------------------------- */

static void test_builtins(void) {
    terra_script *s = NULL;
    CHECK(open_text("local k = 0\n"
                    "return { min_height = -100, max_height = 100, height = function(x, z)\n"
                    "  k = (k + 1) % 3\n"
                    "  if k == 0 then return 50 * terra.noise(x, z, 3) end\n"
                    "  if k == 1 then return 50 * terra.fbm(x, z, 6, 2.1, 0.45, 9) end\n"
                    "  return 50 * terra.ridged(x, z) end }\n",
                    0, &s) == TERRA_OK,
          "open: %s", terra_last_error());
    if (!s) return;
    /* one grid, row by row: sample k used built-in k % 3 */
    enum { NX = 40, NZ = 25 };
    float h[NX * NZ];
    const terra_grid_request r = {.ix0 = -17, .iz0 = 33, .spacing = 0.37, .nx = NX, .nz = NZ};
    CHECK(terra_source_sample(terra_script_source(s), &r, h, NULL) == TERRA_OK, "sample: %s", terra_last_error());
    int bad = 0;
    for (int k = 0; k < NX * NZ; k++) {
        const double x = (double)(r.ix0 + k % NX) * r.spacing, z = (double)(r.iz0 + k / NX) * r.spacing;
        const int b = (k + 1) % 3;
        const float want = b == 0   ? (float)(50 * (double)terra_noise(3, x, z))
                           : b == 1 ? (float)(50 * (double)terra_fbm(9, x, z, 6, 2.1, 0.45))
                                    : (float)(50 * (double)terra_ridged(0, x, z, 5, 2, 0.5));
        bad += h[k] != want;
    }
    CHECK(bad == 0, "%d of %d samples differ from the C built-ins", bad, NX * NZ);
    terra_script_close(s);
    /* the built-ins' stated bounds hold */
    unsigned long long seed = 3;
    int out = 0;
    for (int i = 0; i < 20000; i++) {
        const double x = test_rand_range(&seed, -1e4, 1e4), z = test_rand_range(&seed, -1e4, 1e4);
        const float n = terra_noise(i, x, z), f = terra_fbm(i, x, z, 1 + i % 16, 1.5 + i % 3, 0.3 + (i % 5) * 0.2),
                    g = terra_ridged(i, x, z, 1 + i % 16, 2, 0.5);
        out += !(n >= -1 && n <= 1) || !(f >= -1 && f <= 1) || !(g >= 0 && g <= 1);
    }
    CHECK(out == 0, "%d built-in values outside their bounds", out);
}

/* ---- surfaces ------------------------------------------------------------------------------------------- */

static void test_layers(void) {
    terra_script *s = NULL;
    CHECK(open_text("return { min_height = 0, max_height = 1, height = function(x, z) return 0.5 end,\n"
                    "  layer = function(x, z)\n"
                    "    if x < 1 then return nil elseif x < 2 then return 'rock' elseif x < 3 then return 'road' \n"
                    "    elseif x < 4 then return 'asphalt' else return 'moss' end end,\n"
                    "  layers = { road = { tint = { 0.1, 0.2, 0.3 }, albedo = 'road.png', tiling = 8 },\n"
                    "             asphalt = { tint = { 0.06, 0.06, 0.07 } }, grass = { tint = { 0.3, 0.45, 0.2 } } } }\n",
                    0, &s) == TERRA_OK,
          "open: %s", terra_last_error());
    if (!s) return;
    float h[5];
    terra_surface id[5];
    const terra_grid_request r = {.ix0 = 0, .iz0 = 0, .spacing = 1, .nx = 5, .nz = 1};
    CHECK(terra_source_sample(terra_script_source(s), &r, h, id) == TERRA_OK, "sample: %s", terra_last_error());
    /* nil: none; rock: built-in; layers' names in sorted order from 16 (asphalt, road; grass is built-in);
     * moss, not described: the next free id */
    const terra_surface want[5] = {0, TERRA_SURFACE_ROCK, 17, 16, 18};
    for (int i = 0; i < 5; i++) CHECK(id[i] == want[i], "sample %d: surface %d, not %d", i, id[i], want[i]);
    const terra_surface_table *t = terra_script_surfaces(s);
    terra_surface_look lk;
    CHECK(t && terra_surface_table_get(t, 17, &lk) && fabsf(lk.tint[2] - 0.3f) < 1e-6f && lk.tiling_m == 8 &&
              lk.albedo && strstr(lk.albedo, "/road.png"),
          "road's look: %s", lk.albedo ? lk.albedo : "(no albedo)");
    CHECK(t && terra_surface_table_get(t, TERRA_SURFACE_GRASS, &lk) && fabsf(lk.tint[1] - 0.45f) < 1e-6f, "grass");
    CHECK(t && !terra_surface_table_get(t, 18, &lk), "moss is not described");
    float hh;
    CHECK(terra_source_height(terra_script_source(s), 2.5, 0, &hh) == TERRA_OK && hh == 0.5f, "a point");
    terra_script_close(s);
}

/* ---- what is refused ------------------------------------------------------------------------------------- */

static void expect_refused(const char *text, terra_status want, const char *says) {
    terra_script *s = NULL;
    const terra_status st = open_text(text, 0, &s);
    CHECK(st == want && !s, "'%s': status %d", text, st);
    CHECK(strstr(terra_last_error(), says) != NULL, "'%s' says '%s', wanted '%s'", text, terra_last_error(), says);
    terra_script_close(s);
}

static void test_refused(void) {
    expect_refused("return { height = function(x, z) return 0 end", TERRA_E_SOURCE, "world.lua:1:");
    expect_refused("local a = nil\nlocal b = a.field\nreturn {}", TERRA_E_SOURCE, "world.lua:2:");
    expect_refused("return 42", TERRA_E_INVALID, "returns number");
    expect_refused("return { min_height = 0, max_height = 1 }", TERRA_E_INVALID, "no height");
    expect_refused("return { height = 5, min_height = 0, max_height = 1 }", TERRA_E_INVALID, "height is a number");
    expect_refused("return { height = function() return 0 end }", TERRA_E_INVALID, "no height range");
    expect_refused("return { height = function() return 0 end, min_height = 0 }", TERRA_E_INVALID, "no height range");
    expect_refused("return { height = function() return 0 end, min_height = 3, max_height = 1 }", TERRA_E_INVALID,
                   "not a range");
    expect_refused("return { height = function() return 0 end, range = 'wide' }", TERRA_E_INVALID, "range is a string");
    terra_script *s = NULL;
    CHECK(terra_script_open(&(terra_script_desc){.path = "/nonexistent/world.lua"}, &s) == TERRA_E_NOT_FOUND && !s,
          "a missing file: %s", terra_last_error());
    CHECK(strstr(terra_last_error(), "/nonexistent/world.lua"), "names the file: %s", terra_last_error());
}

/* A script that fails at some points fails the grids that reach them, with its file:line; the
 * others stand; heights outside the stated range fail as the source contract says. */
static void test_errors_in_calls(void) {
    terra_script *s = NULL;
    CHECK(open_text("return { min_height = 0, max_height = 10, height = function(x, z)\n"
                    "  if x > 100 then error('no ground east of 100') end\n"
                    "  if x < -100 then return nil end\n"
                    "  if z > 100 then return 11 end\n"
                    "  return 1 end }\n",
                    0, &s) == TERRA_OK,
          "open: %s", terra_last_error());
    if (!s) return;
    const terra_source *src = terra_script_source(s);
    float h[16];
    terra_grid_request r = {.ix0 = 0, .iz0 = 0, .spacing = 1, .nx = 4, .nz = 4};
    CHECK(terra_source_sample(src, &r, h, NULL) == TERRA_OK && h[15] == 1, "a good grid");
    r.ix0 = 99;
    CHECK(terra_source_sample(src, &r, h, NULL) == TERRA_E_SOURCE, "east of 100 fails");
    CHECK(strstr(terra_last_error(), "world.lua:2: no ground east of 100"), "says: %s", terra_last_error());
    r.ix0 = -103;
    CHECK(terra_source_sample(src, &r, h, NULL) == TERRA_E_SOURCE && strstr(terra_last_error(), "gave nil"),
          "nil: %s", terra_last_error());
    r.ix0 = 0, r.iz0 = 99;
    CHECK(terra_source_sample(src, &r, h, NULL) == TERRA_E_SOURCE && strstr(terra_last_error(), "outside"),
          "out of range: %s", terra_last_error());
    r.iz0 = 0;
    CHECK(terra_source_sample(src, &r, h, NULL) == TERRA_OK, "the good grid again: %s", terra_last_error());
    terra_script_close(s);
}

/* A call that loops is stopped at the limit; the next call elsewhere runs in a fresh state. */
static void test_time_limit(void) {
    terra_script *s = NULL;
    CHECK(open_text("return { min_height = 0, max_height = 10, height = function(x, z)\n"
                    "  while x > 50 do end\n"
                    "  return 2 end }\n",
                    0.2, &s) == TERRA_OK,
          "open: %s", terra_last_error());
    if (!s) return;
    const terra_source *src = terra_script_source(s);
    float h[16];
    terra_grid_request r = {.ix0 = 60, .iz0 = 0, .spacing = 1, .nx = 4, .nz = 4};
    const double t0 = terra_now_s();
    CHECK(terra_source_sample(src, &r, h, NULL) == TERRA_E_SOURCE, "the loop is stopped");
    const double took = terra_now_s() - t0;
    CHECK(strstr(terra_last_error(), "time limit of 0.2 s"), "says: %s", terra_last_error());
    CHECK(took >= 0.19 && took < 2.0, "stopped after %.3f s", took);
    r.ix0 = 0;
    CHECK(terra_source_sample(src, &r, h, NULL) == TERRA_OK && h[0] == 2, "then a grid elsewhere: %s",
          terra_last_error());
    CHECK(terra_script_timeouts(s) == 1, "%d timeouts", terra_script_timeouts(s));
    terra_script_close(s);
    /* a script whose top level loops is refused the same way */
    CHECK(open_text("while true do end", 0.2, &s) == TERRA_E_SOURCE && !s && strstr(terra_last_error(), "time limit"),
          "a looping load: %s", terra_last_error());
}

/* require finds a module beside the script, and the module is watched. */
static void test_modules(void) {
    write_file("hills.lua", "return { h = function(x, z) return 3 end }\n");
    terra_script *s = NULL;
    CHECK(open_text("local hills = require('hills')\n"
                    "return { min_height = 0, max_height = 10, height = function(x, z) return hills.h(x, z) end }\n",
                    0, &s) == TERRA_OK,
          "open: %s", terra_last_error());
    if (!s) return;
    float h = 0;
    CHECK(terra_source_height(terra_script_source(s), 1, 2, &h) == TERRA_OK && h == 3, "the module's height");
    CHECK(!terra_script_changed(s), "nothing changed yet");
    write_file("hills.lua", "return { h = function(x, z) return 4 end } -- changed\n");
    CHECK(terra_script_changed(s), "the module changed");
    terra_script_close(s);
    CHECK(open_text(world_lua, 0, &s) == TERRA_OK, "open: %s", terra_last_error());
    CHECK(s && !terra_script_changed(s), "the new script is as read");
    write_file("world.lua", "return { height = terra.world, min_height = -450, max_height = 3200 } --\n");
    CHECK(s && terra_script_changed(s), "the script changed");
    terra_script_close(s);
}

/* A script opened again (hot reload) and handed to the ground: the collider block under a body is
 * the new ground on the very next update, whatever the budget, and queries answer from it at once. */
static void test_reload_colliders(void) {
    const char *hills = "return { min_height = 0, max_height = 100, height = function(x, z)\n"
                        "  return %d + 20 * terra.fbm(x / 300, z / 300) end }\n";
    char text[256];
    snprintf(text, sizeof text, hills, 50);
    terra_script *a = NULL, *b = NULL;
    CHECK(open_text(text, 0, &a) == TERRA_OK, "open: %s", terra_last_error());
    if (!a) return;
    terra_ground *g = NULL;
    CHECK(terra_ground_create(&(terra_ground_desc){.source = terra_script_source(a), .grid = {.tile0_size = 64, .cells = 64}},
                              &g) == TERRA_OK,
          "ground: %s", terra_last_error());
    const terra_focus_info body = {.handle = 1, .kind = TERRA_FOCUS_ENTITY, .position = {37, 60, -12}, .collision = true};
    CHECK(g && terra_ground_update(g, &body, 1) == TERRA_OK, "update: %s", terra_last_error());
    snprintf(text, sizeof text, hills, 55);
    CHECK(open_text(text, 0, &b) == TERRA_OK, "reopen: %s", terra_last_error());
    if (!g || !b) return;
    const terra_source *nb = terra_script_source(b);
    CHECK(terra_ground_set_source(g, nb) == TERRA_OK, "set source");
    double y = 0;
    float want = 0;
    terra_source_height(nb, 37, -12, &want);
    CHECK(terra_ground_height_at(g, 37, -12, &y) == TERRA_OK && fabs(y - want) < 1e-3, "query %g, new ground %g", y, want);
    CHECK(terra_ground_update(g, &body, 1) == TERRA_OK, "update: %s", terra_last_error());
    const terra_collider_block *blocks;
    const int n = terra_ground_blocks(g, &blocks);
    int under = 0, wrong = 0;
    for (int k = 0; k < n; k++) {
        const terra_collider_block *c = &blocks[k];
        const double x0 = (double)c->ix0 * c->spacing, z0 = (double)c->iz0 * c->spacing, side = c->cells * c->spacing;
        if (!(37 >= x0 && 37 <= x0 + side && -12 >= z0 && -12 <= z0 + side)) continue;
        under++;
        for (int j = 0; j <= c->cells; j++)
            for (int i = 0; i <= c->cells; i++) {
                float h = 0;
                terra_source_height(nb, (double)(c->ix0 + i) * c->spacing, (double)(c->iz0 + j) * c->spacing, &h);
                wrong += c->heights[j * (c->cells + 1) + i] != h;
            }
    }
    CHECK(under > 0 && wrong == 0, "%d blocks under the body, %d heights not the new ground's", under, wrong);
    terra_ground_destroy(g);
    terra_script_close(a);
    terra_script_close(b);
}

int main(void) {
    if (!mkdtemp(dir)) return 1;
    RUN(test_world_through_script);
    RUN(test_builtins);
    RUN(test_layers);
    RUN(test_refused);
    RUN(test_errors_in_calls);
#ifdef UNDER_TSAN
    (void)test_time_limit;
#else
    RUN(test_time_limit);
#endif
    RUN(test_modules);
    RUN(test_reload_colliders);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd)) return 1;
    return finish();
}
