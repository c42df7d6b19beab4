/* qmesh: encode and decode speed (tiles/s, MB/s of encoded tile bytes) on the real tiles in
 * ../shared/data/qm and on tiles baked from the default world (33 x 33 grids with normals and
 * surfaces). */
#include "bench.h"
#include "terra/bake.h"

#include <dirent.h>
#include <string.h>

#define MAX_TILES 64

typedef struct set {
    uint8_t *data[MAX_TILES];
    size_t size[MAX_TILES];
    int n;
    size_t bytes;
} set;

static void add(set *s, uint8_t *d, size_t n) {
    if (s->n == MAX_TILES) {
        terra_free(d);
        return;
    }
    s->data[s->n] = d;
    s->size[s->n++] = n;
    s->bytes += n;
}

/* Real tiles: decoded once (gunzip where needed), re-encoded by terra so both sets are raw bytes. */
static void load_real(set *s) {
    const char *root = getenv("TERRA_SHARED");
    const char *dirs[] = {"bertt", "cesium-native", "here-qmd", "loadersgl", "cesium-native/9_759_335"};
    for (size_t k = 0; k < sizeof dirs / sizeof *dirs; k++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/data/qm/%s", root ? root : "../shared", dirs[k]);
        DIR *d = opendir(path);
        if (!d) continue;
        struct dirent *e;
        while ((e = readdir(d))) {
            if (!strstr(e->d_name, ".terrain")) continue;
            char f[1400];
            snprintf(f, sizeof f, "%s/%s", path, e->d_name);
            uint8_t *data;
            size_t n;
            if (terra_io_read_file(f, 64u << 20, &data, &n) != TERRA_OK) continue;
            terra_qmesh m;
            if (terra_qmesh_decode_any(data, n, NULL, &m) == TERRA_OK) add(s, data, n), terra_qmesh_free(&m);
            else terra_free(data);
        }
        closedir(d);
    }
}

static void load_baked(set *s) {
    terra_source *src;
    terra_world_desc wd = {.seed = 1};
    if (terra_world_create(&wd, &src) != TERRA_OK) return;
    terra_bake_desc in = {0}, d;
    in.levels = 4;
    terra_bake_desc_resolve(&in, &d);
    terra_bake_tile t;
    memset(&t, 0, sizeof t);
    for (int i = 0; i < 48; i++) {
        terra_tile_key k = terra_tile_key_make(0, i % 4, i, i / 3);
        if (terra_bake_tile_build(src, &d, k, false, &t) != TERRA_OK) continue;
        size_t cap = terra_qmesh_encoded_size(&t.mesh), n;
        uint8_t *buf = terra_alloc(cap);
        if (terra_qmesh_encode(&t.mesh, buf, cap, &n) == TERRA_OK) add(s, buf, n);
        else terra_free(buf);
    }
    terra_bake_tile_free(&t);
    terra_source_destroy(src);
}

static void run(const char *label, set *s) {
    if (!s->n) {
        printf("  (no %s tiles)\n", label);
        return;
    }
    enum { RUNS = 7 };
    double dec[RUNS], enc[RUNS], dec_t[RUNS], enc_t[RUNS];
    terra_qmesh meshes[MAX_TILES];
    uint8_t *out[MAX_TILES];
    size_t cap[MAX_TILES], outn[MAX_TILES];
    for (int i = 0; i < s->n; i++) {
        terra_qmesh_decode_any(s->data[i], s->size[i], NULL, &meshes[i]);
        meshes[i].extensions &= ~(uint32_t)TERRA_QMESH_HAS_LEGACY_NORMALS;
        cap[i] = terra_qmesh_encoded_size(&meshes[i]);
        out[i] = terra_alloc(cap[i]);
    }
    size_t enc_bytes = 0;
    for (int i = 0; i < s->n; i++) {
        size_t n = 0;
        terra_qmesh_encode(&meshes[i], out[i], cap[i], &n);
        outn[i] = n;
        enc_bytes += n;
    }
    for (int r = 0; r < RUNS; r++) {
        int reps = 0;
        double t0 = bench_now(), t;
        do {
            for (int i = 0; i < s->n; i++) {
                terra_qmesh m;
                if (terra_qmesh_decode(out[i], outn[i], NULL, &m) == TERRA_OK) terra_qmesh_free(&m);
                else abort();
            }
            reps++;
        } while ((t = bench_now() - t0) < 0.2);
        dec[r] = (double)enc_bytes * reps / t / 1e6;
        dec_t[r] = (double)s->n * reps / t;
        reps = 0;
        t0 = bench_now();
        do {
            for (int i = 0; i < s->n; i++) {
                size_t n;
                terra_qmesh_encode(&meshes[i], out[i], cap[i], &n);
            }
            reps++;
        } while ((t = bench_now() - t0) < 0.2);
        enc[r] = (double)enc_bytes * reps / t / 1e6;
        enc_t[r] = (double)s->n * reps / t;
    }
    char name[128];
    printf("  %s: %d tiles, %.1f kB encoded on average\n", label, s->n, enc_bytes / 1e3 / s->n);
    snprintf(name, sizeof name, "qmesh.decode_mb_s%s", label[0] == 'r' ? "" : ".baked");
    bench_record(name, bench_median(dec, RUNS), "MB/s", RUNS, "median");
    snprintf(name, sizeof name, "qmesh.decode_tiles_s%s", label[0] == 'r' ? "" : ".baked");
    bench_record(name, bench_median(dec_t, RUNS), "tiles/s", RUNS, "median");
    snprintf(name, sizeof name, "qmesh.encode_mb_s%s", label[0] == 'r' ? "" : ".baked");
    bench_record(name, bench_median(enc, RUNS), "MB/s", RUNS, "median");
    snprintf(name, sizeof name, "qmesh.encode_tiles_s%s", label[0] == 'r' ? "" : ".baked");
    bench_record(name, bench_median(enc_t, RUNS), "tiles/s", RUNS, "median");
    for (int i = 0; i < s->n; i++) {
        terra_qmesh_free(&meshes[i]);
        terra_free(out[i]);
    }
}

int main(void) {
    set real = {0}, baked = {0};
    load_real(&real);
    load_baked(&baked);
    run("real tiles (../shared/data/qm)", &real);
    run("baked tiles (default world, 33x33, normals + surfaces)", &baked);
    for (int i = 0; i < real.n; i++) terra_free(real.data[i]);
    for (int i = 0; i < baked.n; i++) terra_free(baked.data[i]);
    return 0;
}
