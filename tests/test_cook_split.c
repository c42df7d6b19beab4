/* A cook split over processes (terra/cook.h, terra/cook_io.h): the plan of rounds over random
 * grids (every finest tile under exactly one root a round, rounds stacked, owners in range, the
 * stated imbalance the real one); part files read back equal, their key from the head alone, every
 * truncation and byte flip refused; and the split cook, its processes run one after another here, writing the same archive
 * byte for byte as the whole cook, local and geographic, for 2, 3 and 5 processes, with a lost part
 * rebuilt alone on a rerun, parts of another cook never reused, and parts swapped by hand rebuilt by
 * a round (with a warning) and refused by a merge. */
#include "check.h"
#include "terra/cook_io.h"

#include <dirent.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char dir[256];

static int32_t fl(int32_t v, int d) { return (int32_t)floor(ldexp(v, -d)); }

static void test_plan(void) {
    unsigned long long seed = 7;
    for (int round = 0; round < 200; round++) {
        terra_cook_grid g = {.frame = TERRA_FRAME_LOCAL, .unit = {1, 1}, .tile_units = 16,
                             .depth = 1 + (int)(test_rand_u64(&seed) % 7)};
        const int side = 1 << g.depth;
        size_t n = 0;
        int32_t *finest = malloc(2 * (size_t)side * side * sizeof *finest);
        const double keep = test_rand_range(&seed, 0.05, 1);
        for (int y = 0; y < side; y++)
            for (int x = 0; x < side; x++)
                if (test_rand_unit(&seed) < keep || n == 0) finest[2 * n] = x, finest[2 * n + 1] = y, n++;
        terra_cook_footprint fp[6];
        const size_t nf = 1 + test_rand_u64(&seed) % 6;
        for (size_t k = 0; k < nf; k++) {
            const double a = test_rand_range(&seed, 0, side * 16), b = test_rand_range(&seed, 0, side * 16);
            const double c = test_rand_range(&seed, 0, side * 16), d = test_rand_range(&seed, 0, side * 16);
            fp[k] = (terra_cook_footprint){{fmin(a, c), fmin(b, d), fmax(a, c), fmax(b, d)}, 1 + test_rand_u64(&seed) % 1000000};
        }
        const int ranks = 1 + (int)(test_rand_u64(&seed) % 9);
        terra_cook_split_plan p, again;
        CHECK(terra_cook_split_plan_make(&g, finest, n, fp, nf, ranks, &p) == TERRA_OK, "%s", terra_last_error());
        CHECK(terra_cook_split_plan_make(&g, finest, n, fp, nf, ranks, &again) == TERRA_OK, "%s", terra_last_error());
        CHECK(p.round_count == again.round_count && p.top_bottom == again.top_bottom, "plan %d not deterministic", round);
        if (ranks == 1) CHECK(p.round_count == 0, "one process: no rounds");
        for (int r = 0; r < p.round_count; r++) {
            const terra_cook_split_round *R = &p.round[r];
            CHECK(R->bottom == (r ? p.round[r - 1].top : 0) && R->top > R->bottom && R->top <= g.depth,
                  "round %d: depths %d..%d", r, R->bottom, R->top);
            CHECK(R->root_count == again.round[r].root_count &&
                      !memcmp(R->owner, again.round[r].owner, R->root_count * sizeof *R->owner),
                  "plan %d round %d not deterministic", round, r);
            uint64_t *load = calloc((size_t)ranks, sizeof *load), total = 0, most = 0;
            for (size_t i = 0; i < R->root_count; i++) {
                CHECK(R->owner[i] >= 0 && R->owner[i] < ranks, "owner %d of %d", R->owner[i], ranks);
                load[R->owner[i]] += R->work[i], total += R->work[i];
                for (size_t j = 0; j < i; j++)
                    CHECK(R->roots[2 * i] != R->roots[2 * j] || R->roots[2 * i + 1] != R->roots[2 * j + 1], "a root twice");
            }
            /* every finest tile under exactly one root */
            for (size_t t = 0; t < n; t++) {
                int under = 0;
                for (size_t i = 0; i < R->root_count; i++)
                    under += fl(finest[2 * t], R->top) == R->roots[2 * i] && fl(finest[2 * t + 1], R->top) == R->roots[2 * i + 1];
                CHECK(under == 1, "finest %d,%d under %d roots of depth %d", finest[2 * t], finest[2 * t + 1], under, R->top);
            }
            for (int k = 0; k < ranks; k++) most = load[k] > most ? load[k] : most;
            if (r == 0 && total)
                CHECK(fabs(p.imbalance - (double)most * ranks / (double)total) < 1e-9, "imbalance %g", p.imbalance);
            free(load);
        }
        if (p.round_count) CHECK(p.top_bottom == p.round[p.round_count - 1].top, "the last part starts at the last top");
        terra_cook_split_plan_free(&p);
        terra_cook_split_plan_free(&again);
        free(finest);
    }
}

static const char *write_dir; /* --write DIR: the codec test's parts go there (fuzzing seeds) */

static void test_part_codec(void) {
    unsigned long long seed = 11;
    for (int round = 0; round < 20; round++) {
        terra_cook_part p = {.fingerprint = test_rand_u64(&seed), .bottom = round % 3, .depth = 3 + round % 3};
        p.root.tx = (int32_t)(test_rand_u64(&seed) % 1000), p.root.ty = 7, p.root.error = 1.25, p.root.finest_error = 0.5;
        const uint32_t nv = 3 + (uint32_t)(test_rand_u64(&seed) % 50), nt = nv - 2;
        CHECK(terra_cook_mesh_reserve(&p.root.mesh, nv, nt, round & 1, round & 2) == TERRA_OK, "reserve");
        terra_cook_mesh *m = &p.root.mesh;
        m->vertex_count = nv, m->triangle_count = nt;
        for (uint32_t v = 0; v < nv; v++) {
            m->xy[2 * v] = test_rand_range(&seed, 0, 100), m->xy[2 * v + 1] = test_rand_range(&seed, 0, 100);
            m->z[v] = (float)test_rand_range(&seed, -10, 10);
            if (m->normal) m->normal[3 * v] = 0, m->normal[3 * v + 1] = 0.6f, m->normal[3 * v + 2] = 0.8f;
            if (m->material) m->material[v] = (uint16_t)v;
        }
        for (uint32_t t = 0; t < nt; t++) m->tri[3 * t] = 0, m->tri[3 * t + 1] = t + 1, m->tri[3 * t + 2] = t + 2;
        int32_t fin[4] = {1, 2, 3, 4};
        p.root.finest = fin, p.root.finest_count = 2;
        uint8_t data[3][40];
        terra_cook_part_tile tiles[3];
        for (int i = 0; i < 3; i++) {
            for (int k = 0; k < 40; k++) data[i][k] = (uint8_t)test_rand_u64(&seed);
            tiles[i] = (terra_cook_part_tile){.entry = {.key = 100 + (uint64_t)i, .size = 10u + (uint32_t)i * 10, .raw_size = 99,
                                                        .compression = 1, .geometric_error = 2.5f, .longest_edge = 3,
                                                        .min_height = -1, .max_height = 1},
                                              .data = data[i], .vertices = 5, .triangles = 4, .quantization = 0.25f};
        }
        p.tiles = tiles, p.tile_count = (size_t)(round % 4 == 3 ? 0 : 3);
        uint8_t *b;
        size_t n;
        CHECK(terra_cook_part_encode(&p, &b, &n) == TERRA_OK, "encode");
        if (write_dir && round < 4) {
            char path[600];
            snprintf(path, sizeof path, "%s/seed_%d.part", write_dir, round);
            FILE *f = fopen(path, "wb");
            CHECK(f && fwrite(b, 1, n, f) == n, "write %s", path);
            if (f) fclose(f);
        }
        terra_cook_part q;
        CHECK(terra_cook_part_decode(b, n, &q) == TERRA_OK, "decode: %s", terra_last_error());
        CHECK(q.fingerprint == p.fingerprint && q.bottom == p.bottom && q.depth == p.depth && q.root.tx == p.root.tx &&
                  q.root.error == 1.25 && q.root.finest_error == 0.5 && q.root.finest_count == 2 && q.tile_count == p.tile_count,
              "header back");
        CHECK(q.root.mesh.vertex_count == nv && !memcmp(q.root.mesh.xy, m->xy, 16 * (size_t)nv) &&
                  !memcmp(q.root.mesh.z, m->z, 4 * (size_t)nv) && !memcmp(q.root.mesh.tri, m->tri, 12 * (size_t)nt) &&
                  !q.root.mesh.normal == !m->normal && !q.root.mesh.material == !m->material &&
                  (!m->material || !memcmp(q.root.mesh.material, m->material, 2 * (size_t)nv)) &&
                  !memcmp(q.root.finest, fin, sizeof fin),
              "mesh back");
        for (size_t i = 0; i < q.tile_count; i++)
            CHECK(q.tiles[i].entry.key == tiles[i].entry.key && q.tiles[i].entry.size == tiles[i].entry.size &&
                      !memcmp(q.tiles[i].data, data[i], tiles[i].entry.size) && q.tiles[i].quantization == 0.25f &&
                      q.tiles[i].entry.geometric_error == 2.5f,
                  "tile %zu back", i);
        terra_cook_part_free(&q);
        /* the key from the head alone, as decoded; a head cut short or not a part's is refused */
        terra_cook_part_key key;
        CHECK(terra_cook_part_key_read(b, TERRA_COOK_PART_KEY_BYTES, &key) == TERRA_OK && key.fingerprint == p.fingerprint &&
                  key.bottom == p.bottom && key.depth == p.depth && key.tx == p.root.tx && key.ty == p.root.ty,
              "key: %s", terra_last_error());
        for (size_t cut = 0; cut < TERRA_COOK_PART_KEY_BYTES; cut++)
            CHECK(terra_cook_part_key_read(b, cut, &key) == TERRA_E_CORRUPT, "a key cut at %zu accepted", cut);
        for (size_t at = 0; at < 12; at++) {
            b[at] ^= 0x10;
            CHECK(terra_cook_part_key_read(b, n, &key) == TERRA_E_CORRUPT, "a key with byte %zu flipped accepted", at);
            b[at] ^= 0x10;
        }
        b[28] = (uint8_t)p.bottom; /* depth = bottom: not a round */
        CHECK(terra_cook_part_key_read(b, n, &key) == TERRA_E_CORRUPT && strstr(terra_last_error(), "bytes 24..31"),
              "a round of no depth: %s", terra_last_error());
        b[28] = (uint8_t)p.depth;
        /* every cut and every flipped byte is refused (the checksum, or a count that does not fit) */
        for (size_t cut = 0; cut < n; cut++) {
            uint8_t *c = malloc(cut + 1);
            memcpy(c, b, cut);
            CHECK(terra_cook_part_decode(c, cut, &q) == TERRA_E_CORRUPT, "cut at %zu accepted", cut);
            free(c);
        }
        for (size_t at = 0; at < n; at++) {
            b[at] ^= 0x10;
            CHECK(terra_cook_part_decode(b, n, &q) == TERRA_E_CORRUPT, "flip at %zu accepted", at);
            b[at] ^= 0x10;
        }
        terra_free(b);
        p.root.finest = NULL;
        terra_cook_mesh_free(&p.root.mesh);
    }
}

/* ---- the split cook against the whole one ------------------------------------------------------ */

static float height(double x, double y) {
    return (float)(80 * sin(x * 0.031) * cos(y * 0.027) + 25 * sin(x * 0.13 + y * 0.07) + 6 * sin(x * 0.71) * sin(y * 0.53));
}

static void make_raster(terra_raster *r, int w, int h, bool geo) {
    memset(r, 0, sizeof *r);
    r->width = w, r->height = h;
    r->heights = malloc(sizeof(float) * (size_t)w * (size_t)h);
    for (int j = 0; j < h; j++)
        for (int i = 0; i < w; i++) {
            float z = height(i, j);
            /* a hole, so roots with little or no ground are planned too */
            if (hypot(i - 0.8 * w, j - 0.25 * h) < 0.12 * w) z = NAN;
            r->heights[(size_t)j * w + i] = z;
        }
    r->spacing_x = r->spacing_y = 2;
    const double geo_t[6] = {-72.0, 1.0 / 1200, 0, 45.0, 0, -1.0 / 1200}, plain[6] = {0, 1, 0, 0, 0, 1};
    memcpy(r->geo, geo ? geo_t : plain, sizeof r->geo);
    r->georeferenced = geo;
}

static uint8_t *slurp(const char *path, size_t *n) {
    uint8_t *d = NULL;
    *n = 0;
    return terra_io_read_file(path, (size_t)1 << 28, &d, n) == TERRA_OK ? d : NULL;
}

static int die_countdown;
static int die_now(void *user) {
    (void)user;
    return --die_countdown == 0;
}

/* The processes of a split cook one after another: plan, each round on each process, merge. */
static terra_status split_cook(terra_cook_desc d, const char *parts, int ranks, uint64_t fp, uint64_t *built,
                               uint64_t *reused, int *rounds) {
    terra_cook_split s = {.stage = TERRA_COOK_STAGE_PLAN, .parts = parts, .fingerprint = fp, .ranks = ranks};
    d.split = &s;
    terra_cook_report rep;
    terra_status st = terra_cook(&d, &rep);
    *built = *reused = 0;
    *rounds = s.plan.round_count;
    for (int r = 0; st == TERRA_OK && r < s.plan.round_count; r++)
        for (int k = 0; st == TERRA_OK && k < ranks; k++) {
            s.stage = TERRA_COOK_STAGE_ROUND, s.round = r, s.rank = k, s.parts_built = s.parts_reused = 0;
            st = terra_cook(&d, &rep);
            *built += s.parts_built, *reused += s.parts_reused;
        }
    s.stage = TERRA_COOK_STAGE_MERGE;
    if (st == TERRA_OK) st = terra_cook(&d, &rep);
    if (st == TERRA_OK) CHECK(s.merge_s >= 0 && s.top_s >= 0 && rep.tiles > 0, "merge report");
    terra_cook_split_plan_free(&s.plan);
    return st;
}

static size_t count_parts(const char *parts) {
    DIR *D = opendir(parts);
    size_t n = 0;
    for (struct dirent *e; D && (e = readdir(D));) n += strstr(e->d_name, ".part") != NULL;
    if (D) closedir(D);
    return n;
}

static void remove_parts(const char *parts) {
    DIR *D = opendir(parts);
    char p[600];
    for (struct dirent *e; D && (e = readdir(D));)
        if (e->d_name[0] != '.') snprintf(p, sizeof p, "%s/%s", parts, e->d_name), unlink(p);
    if (D) closedir(D);
    rmdir(parts);
}

static char logged[4096];
static void capture_log(terra_log_level level, const char *message, void *user) {
    (void)user;
    const size_t n = strlen(logged);
    if (level == TERRA_LOG_WARN) snprintf(logged + n, sizeof logged - n, "%s\n", message);
}
static void log_stderr(terra_log_level level, const char *message, void *user) { /* as terra's default */
    (void)user;
    if (level >= TERRA_LOG_WARN) fprintf(stderr, "terra: %s\n", message);
}

/* Two first-round part files swapped by hand: each holds the other's root. */
static bool swap_two_parts(const char *parts, char a[600], char b[600]) {
    DIR *D = opendir(parts);
    a[0] = b[0] = 0;
    for (struct dirent *e; D && (e = readdir(D));)
        if (strstr(e->d_name, ".part") && !strncmp(e->d_name, "0-", 2))
            snprintf(a[0] ? b : a, 600, "%s/%s", parts, e->d_name);
    if (D) closedir(D);
    char tmp[700];
    snprintf(tmp, sizeof tmp, "%s.swap", a);
    return a[0] && b[0] && !rename(a, tmp) && !rename(b, a) && !rename(tmp, b);
}

/* Swapped parts are never taken: a round builds both again (a warning names each file), and a merge
 * or a later round that finds one refuses it, naming the file and both roots. */
static void check_swapped_parts(terra_cook_desc d, const char *parts, int ranks, uint64_t built, const uint8_t *want,
                                size_t want_n) {
    char a[600], b[600];
    CHECK(swap_two_parts(parts, a, b), "two first-round parts to swap in %s", parts);
    logged[0] = 0;
    terra_set_log(capture_log, NULL);
    uint64_t built2, reused2;
    int rounds;
    CHECK(split_cook(d, parts, ranks, 42, &built2, &reused2, &rounds) == TERRA_OK, "swapped: %s", terra_last_error());
    terra_set_log(log_stderr, NULL);
    CHECK(built2 == 2 && reused2 == built - 2, "swapped: built %llu, reused %llu of %llu", (unsigned long long)built2,
          (unsigned long long)reused2, (unsigned long long)built);
    const char *files[2] = {a, b};
    for (int k = 0; k < 2; k++) {
        char says[700];
        snprintf(says, sizeof says, "%s holds the part of root ", files[k]);
        const char *at = strstr(logged, says);
        CHECK(at && strstr(at, "not the one its name gives") && strstr(at, "built again"), "%s: warned '%s'", files[k],
              logged);
    }
    size_t n;
    uint8_t *got = slurp(d.output, &n);
    CHECK(got && n == want_n && !memcmp(got, want, n), "swapped: not the whole cook's bytes");
    free(got);
    /* swapped after the rounds: the merge refuses */
    CHECK(swap_two_parts(parts, a, b), "two parts to swap again");
    terra_cook_split s = {.stage = TERRA_COOK_STAGE_PLAN, .parts = parts, .fingerprint = 42, .ranks = ranks};
    d.split = &s;
    terra_cook_report rep;
    CHECK(terra_cook(&d, &rep) == TERRA_OK, "plan: %s", terra_last_error());
    s.stage = TERRA_COOK_STAGE_MERGE;
    CHECK(terra_cook(&d, &rep) == TERRA_E_NOT_FOUND && strstr(terra_last_error(), "holds the part of root") &&
              strstr(terra_last_error(), "not the one its name gives"),
          "a merge of swapped parts: %s", terra_last_error());
    terra_cook_split_plan_free(&s.plan);
    CHECK(swap_two_parts(parts, a, b), "swapped back"); /* the first two again: a and b as before */
}

static void split_equals_whole(bool geo) {
    terra_raster r;
    make_raster(&r, geo ? 600 : 321, geo ? 480 : 257, geo);
    terra_cook_input in = {.path = "synthetic", .raster = &r};
    char whole[300], split[300], parts[300];
    snprintf(whole, sizeof whole, "%s/whole.terra", dir);
    snprintf(split, sizeof split, "%s/split.terra", dir);
    snprintf(parts, sizeof parts, "%s/parts", dir);
    terra_cook_desc d = {.inputs = &in, .input_count = 1, .output = whole, .max_error = 0.5, .tile_size = geo ? 16 : 20,
                         .threads = 2, .compression = TERRA_COMPRESS_PACKED};
    terra_cook_report rep;
    CHECK(terra_cook(&d, &rep) == TERRA_OK, "whole: %s", terra_last_error());
    size_t na, nb;
    uint8_t *a = slurp(whole, &na);
    d.output = split;
    const int ranks[] = {2, 3, 5};
    for (int i = 0; i < 3; i++) {
        remove_parts(parts);
        uint64_t built, reused;
        int rounds;
        CHECK(split_cook(d, parts, ranks[i], 42, &built, &reused, &rounds) == TERRA_OK, "split %d: %s", ranks[i],
              terra_last_error());
        uint8_t *b = slurp(split, &nb);
        CHECK(a && b && na == nb && !memcmp(a, b, na), "%s, %d processes (%d rounds): %zu bytes, not the whole cook's %zu",
              geo ? "geographic" : "local", ranks[i], rounds, nb, na);
        CHECK(rounds > 0 && built == count_parts(parts) && reused == 0, "%d rounds, %llu parts built, %zu on disk", rounds,
              (unsigned long long)built, count_parts(parts));
        printf("     %s, %d processes: %d rounds, %llu parts, %zu bytes, %d levels\n", geo ? "geographic" : "local", ranks[i],
               rounds, (unsigned long long)built, nb, rep.levels);
        free(b);
        if (i) continue;
        /* a part lost (its process died): the rerun builds it alone and the archive is the same */
        DIR *D = opendir(parts);
        char victim[600] = "";
        for (struct dirent *e; D && (e = readdir(D));)
            if (strstr(e->d_name, ".part") && strncmp(e->d_name, "0-", 2) == 0) snprintf(victim, sizeof victim, "%s/%s", parts, e->d_name);
        if (D) closedir(D);
        CHECK(victim[0] && unlink(victim) == 0, "a first-round part to lose");
        unlink(split);
        uint64_t built2, reused2;
        CHECK(split_cook(d, parts, ranks[i], 42, &built2, &reused2, &rounds) == TERRA_OK, "rerun: %s", terra_last_error());
        CHECK(built2 == 1 && reused2 == built - 1, "rerun built %llu, reused %llu of %llu", (unsigned long long)built2,
              (unsigned long long)reused2, (unsigned long long)built);
        b = slurp(split, &nb);
        CHECK(b && na == nb && !memcmp(a, b, na), "rerun: not the whole cook's bytes");
        free(b);
        check_swapped_parts(d, parts, ranks[i], built, a, na);
        /* another cook's parts (another fingerprint) are never taken */
        CHECK(split_cook(d, parts, ranks[i], 43, &built2, &reused2, &rounds) == TERRA_OK, "fingerprint 43: %s",
              terra_last_error());
        CHECK(reused2 == 0 && built2 == built, "another cook reused %llu parts", (unsigned long long)reused2);
        /* a process that dies after its first part: that part stays for the rerun */
        remove_parts(parts);
        terra_cook_split s = {.stage = TERRA_COOK_STAGE_PLAN, .parts = parts, .fingerprint = 42, .ranks = 2};
        d.split = &s;
        CHECK(terra_cook(&d, &rep) == TERRA_OK, "plan");
        fflush(NULL);
        pid_t pid = fork();
        if (pid == 0) {
            /* one worker: with more, another subtree may be written while the hook ends the process */
            d.threads = 1;
            s.stage = TERRA_COOK_STAGE_ROUND, s.round = 0, s.rank = 1, s.die_after = die_now;
            die_countdown = 1;
            terra_cook(&d, &rep);
            _exit(0); /* not reached: the hook ends the process after its first part */
        }
        int status = 0;
        waitpid(pid, &status, 0);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 3, "the dying process ended with %d", status);
        CHECK(count_parts(parts) == 1, "%zu parts after the death, 1 expected", count_parts(parts));
        terra_cook_split_plan_free(&s.plan);
        d.split = NULL;
    }
    remove_parts(parts);
    /* what a split cook refuses */
    terra_cook_split s = {.stage = TERRA_COOK_STAGE_ROUND, .parts = parts, .ranks = 2, .round = 0};
    d.split = &s;
    CHECK(terra_cook(&d, &rep) == TERRA_E_INVALID, "a round without a plan");
    CHECK(strstr(terra_last_error(), "round 0 of 0"), "says so: %s", terra_last_error());
    free(a);
    unlink(whole), unlink(split);
    free(r.heights);
}

/* Too little ground to share (one tile): no round, and the merge is the whole cook. */
static void test_split_one_tile(void) {
    terra_raster r;
    make_raster(&r, 17, 17, false);
    terra_cook_input in = {.path = "synthetic", .raster = &r};
    char whole[300], split[300], parts[300];
    snprintf(whole, sizeof whole, "%s/one_whole.terra", dir);
    snprintf(split, sizeof split, "%s/one_split.terra", dir);
    snprintf(parts, sizeof parts, "%s/one_parts", dir);
    terra_cook_desc d = {.inputs = &in, .input_count = 1, .output = whole, .max_error = 0.5, .tile_size = 16, .threads = 1};
    terra_cook_report rep;
    CHECK(terra_cook(&d, &rep) == TERRA_OK && rep.levels == 1, "whole: %s", terra_last_error());
    d.output = split;
    uint64_t built, reused;
    int rounds;
    CHECK(split_cook(d, parts, 4, 1, &built, &reused, &rounds) == TERRA_OK, "split: %s", terra_last_error());
    size_t na, nb;
    uint8_t *a = slurp(whole, &na), *b = slurp(split, &nb);
    CHECK(rounds == 0 && built == 0 && a && b && na == nb && !memcmp(a, b, na), "one tile: %d rounds, %zu vs %zu bytes",
          rounds, nb, na);
    free(a), free(b), free(r.heights);
    unlink(whole), unlink(split);
}

static void test_split_local(void) { split_equals_whole(false); }
static void test_split_geographic(void) { split_equals_whole(true); }

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "--write")) {
        write_dir = argv[2];
        RUN(test_part_codec);
        return finish();
    }
    snprintf(dir, sizeof dir, "/tmp/terra-test-split-%d", (int)getpid());
    mkdir(dir, 0777);
    RUN(test_plan);
    RUN(test_part_codec);
    RUN(test_split_one_tile);
    RUN(test_split_local);
    RUN(test_split_geographic);
    rmdir(dir);
    return finish();
}
