/* terra mesh: a heightmap into a triangle network (greedy insertion), with an independent check. */
#include "cli.h"
#include "terra/io.h"
#include "terra/raster.h"
#include "terra/tin.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <getopt.h>
#include <math.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#define CMD "mesh"
#define MAX_LEVELS 16

static void help(FILE *f) {
    fprintf(f,
            "Usage: terra mesh IN -o OUT --max-error M[,M2,...] [OPTIONS]\n"
            "       terra mesh IN --check-mesh MESH.obj [--max-error M] [--heatmap PNG] [OPTIONS]\n\n"
            "Meshes a heightmap into a triangle network by greedy insertion (Garland & Heckbert):\n"
            "the worst sample goes in first, until every sample is within the error bound.\n"
            "IN is anything GDAL reads (GeoTIFF, 16-bit PNG, SRTM .hgt, ASCII grid, ...).\n"
            "OUT's extension picks the format: .obj, .ply (binary) or .stl (binary).\n"
            "Several bounds (coarse to fine, one run) write OUT with .e<M> before the extension;\n"
            "coarser meshes use a prefix of the finer ones' vertices.\n"
            "Every output is written beside its name and renamed into place only when all of them\n"
            "are complete: a run that fails leaves what was there before untouched.\n\n"
            "Options:\n"
            "  -o, --output OUT          mesh file to write\n"
            "  -e, --max-error M[,...]   max vertical error in metres (> 0)\n"
            "  -t, --max-triangles N     stop at N triangles\n"
            "      --max-vertices N      stop at N vertices\n"
            "      --encoding E          plain (default), terrain-rgb or terrarium\n"
            "      --band N              band of a plain raster (default 1)\n"
            "      --z-scale S           multiply heights by S (e.g. 0.1 for decimetres)\n"
            "      --spacing M           metres between samples (default: georeferencing, else 1)\n"
            "      --xy samples|metres|geo  vertex x, y: sample column and row (default), metres from\n"
            "                            the north-west corner (y north), or georeferenced coordinates\n"
            "      --normals             write per-vertex normals (OBJ, PLY)\n"
            "      --upper FILE          two-layer ground: the upper layer (no-data where absent);\n"
            "                            one bound, no tiles, no count limits, no normals\n"
            "      --upper-band N        two-layer: the upper layer is band N of IN (a two-band file)\n"
            "      --thickness M         two-layer: slab thickness under the upper layer (0: to the ground)\n"
            "      --heatmap PNG         draw every sample's error at the finest bound (blue 0, red =\n"
            "                            bound, white above, magenta uncovered); runs the check\n"
            "      --verify              check every sample independently (every level, every tile,\n"
            "                            both layers); fail if one is over the bound or uncovered.\n"
            "                            Costs about 60%% of the meshing time on top (St Helens\n"
            "                            2000x2000 at 1 m: ~0.6 s more than ~1.0 s of meshing);\n"
            "                            without it max_error and rms_error are not measured\n"
            "      --check-mesh FILE     measure an existing OBJ (x = column, y = row) against IN;\n"
            "                            fails if a valid sample is uncovered, a triangle is degenerate\n"
            "                            or turned over, or (with -e) one is over the bound\n"
            "      --tile-size T         tiles of TxT samples sharing borders, each bound a level; writes\n"
            "                            OUT with .l<level>.<tx>_<ty> before the extension (0 coarsest)\n"
            "      --threads N           threads for the tiles, 1..64 (default: one per core)\n"
            "      --max-memory SIZE     memory budget for reading IN (e.g. 512M, 2G; default half of\n"
            "                            physical memory): a larger raster is refused before reading\n"
            "  -q, --quiet               no progress on stderr\n"
            "  -h, --help                this help\n\n"
            "Prints a report (key value lines): vertices, triangles, read_ms, mesh_ms, write_ms,\n"
            "peak_mb (this process), alloc_peak_mb (terra's own allocations), reader_peak_mb (the\n"
            "terra-raster process that read IN through GDAL, so the mesher never maps GDAL; 0 for a\n"
            "plain PNG, read in process without GDAL); with --verify or --heatmap also max_error,\n"
            "rms_error and check_ms.\n"
            "Exit 0 on success, 1 on failure, 2 on bad usage.\n");
}

/* terra's own allocations (raster, mesher, output), counted through the allocator hooks: the
 * process peak (peak_mb) adds the program and its libraries; GDAL's are mapped only by the
 * terra-raster reader (reader_peak_mb). Atomic: the tiled mode
 * allocates from every worker. */
static _Atomic size_t alloc_now, alloc_peak;
typedef union alloc_head {
    size_t size;
    max_align_t align;
} alloc_head;
static void counted(size_t add, size_t sub) {
    const size_t now = atomic_fetch_add(&alloc_now, add - sub) + add - sub; /* modular: add - sub may wrap */
    size_t peak = atomic_load(&alloc_peak);
    while (now > peak && !atomic_compare_exchange_weak(&alloc_peak, &peak, now)) {
    }
}
static void *count_alloc(size_t n, void *u) {
    (void)u;
    alloc_head *h = malloc(sizeof *h + n);
    if (!h) return NULL;
    h->size = n;
    counted(n, 0);
    return h + 1;
}
static void count_free(void *p, void *u) {
    (void)u;
    if (!p) return;
    alloc_head *h = (alloc_head *)p - 1;
    atomic_fetch_sub(&alloc_now, h->size);
    free(h);
}
static void *count_realloc(void *p, size_t n, void *u) {
    if (!p) return count_alloc(n, u);
    alloc_head *h = (alloc_head *)p - 1;
    size_t old = h->size;
    alloc_head *q = realloc(h, sizeof *q + n);
    if (!q) return NULL;
    q->size = n;
    counted(n, old);
    return q + 1;
}

/* Peak resident memory of this process, and of the terra-raster reader it ran (GDAL's process). */
static double peak_mb(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_maxrss / 1024.0;
}
static double reader_peak_mb(void) {
    struct rusage ru;
    getrusage(RUSAGE_CHILDREN, &ru);
    return (double)ru.ru_maxrss / 1024.0;
}

/* OUT with ".e<err>" before the extension. */
static char *level_name(const char *out, double err) {
    size_t n = strlen(out) + 48;
    char *s = malloc(n);
    if (!s) return NULL;
    const char *dot = strrchr(out, '.');
    const char *slash = strrchr(out, '/');
    if (!dot || (slash && dot < slash)) dot = out + strlen(out);
    snprintf(s, n, "%.*s.e%g%s", (int)(dot - out), out, err, dot);
    return s;
}

/* ---- outputs -------------------------------------------------------------------------------
 * Nothing a user had is lost when a run fails: every output is first checked (its directory
 * exists and is writable, the name is not a directory), then written to a staging file beside it
 * (OUT.tmp<pid>-s<n><ext>, the extension kept because it picks the mesh format), and only when
 * all of them are complete are they renamed into place. Should a rename fail halfway, the ones
 * already renamed are put back from hard links kept of the files they replaced. What a killed run
 * left (its process gone) is removed on the next write to the same name. */
typedef struct staged {
    char *final, *tmp;
} staged;
typedef struct out_set {
    staged *v;
    size_t n, cap;
} out_set;

/* The directory part of `path` ("." when it has none), malloc'ed. */
static char *dir_of(const char *path) {
    const char *slash = strrchr(path, '/');
    if (!slash) return strdup(".");
    if (slash == path) return strdup("/");
    return strndup(path, (size_t)(slash - path));
}

/* EXIT_OK when `path` can be written: not a directory, in an existing, writable directory. */
static int check_writable(const char *what, const char *path) {
    struct stat st;
    if (!*path || path[strlen(path) - 1] == '/') return cli_error(CMD, "%s '%s': not a file name", what, path);
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) return cli_error(CMD, "%s %s: is a directory", what, path);
    char *dir = dir_of(path);
    if (!dir) return cli_error(CMD, "out of memory");
    int rc = EXIT_OK;
    if (stat(dir, &st) != 0)
        rc = cli_error(CMD, "%s %s: cannot write there: %s: %s", what, path, dir, strerror(errno));
    else if (!S_ISDIR(st.st_mode))
        rc = cli_error(CMD, "%s %s: cannot write there: %s is not a directory", what, path, dir);
    else if (access(dir, W_OK | X_OK) != 0)
        rc = cli_error(CMD, "%s %s: cannot write there: %s: %s", what, path, dir, strerror(errno));
    free(dir);
    return rc;
}

/* Removes what a killed run left beside `prefix` (an output's name, or the start of the tiles'
 * names): PREFIX*.tmp<pid>-s<n><ext> and anything named after it (the writer's own temporary, a
 * kept link), where process <pid> no longer runs. */
static void sweep_stale(const char *prefix, const char *ext) {
    char *dir = dir_of(prefix);
    const char *slash = strrchr(prefix, '/'), *base = slash ? slash + 1 : prefix;
    DIR *d = dir ? opendir(dir) : NULL;
    size_t bn = strlen(base), en = strlen(ext);
    for (struct dirent *e; d && (e = readdir(d));) {
        const char *p = e->d_name, *t = strncmp(p, base, bn) ? NULL : strstr(p + bn, ".tmp");
        if (!t) continue;
        char *end;
        long pid = strtol(t + 4, &end, 10);
        if (pid <= 0 || end == t + 4 || end[0] != '-' || end[1] != 's' || !(end[2] >= '0' && end[2] <= '9'))
            continue;
        for (end += 2; *end >= '0' && *end <= '9'; end++) {
        }
        if (strncmp(end, ext, en) || pid == (long)getpid() || kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue;
        size_t n = strlen(dir) + strlen(p) + 2;
        char *path = malloc(n);
        if (path) snprintf(path, n, "%s/%s", dir, p), remove(path);
        free(path);
    }
    if (d) closedir(d);
    free(dir);
}

/* A staging name for `final`, reserved (created empty with O_EXCL); NULL after printing why.
 * `sweep`: first remove what killed runs left beside it. */
static const char *stage(out_set *o, const char *final, bool sweep) {
    if (o->n == o->cap) {
        size_t cap = o->cap ? 2 * o->cap : 16;
        staged *v = realloc(o->v, cap * sizeof *v);
        if (!v) return cli_error(CMD, "out of memory"), NULL;
        o->v = v, o->cap = cap;
    }
    const char *dot = strrchr(final, '.'), *slash = strrchr(final, '/');
    if (!dot || (slash && dot < slash)) dot = final + strlen(final);
    size_t n = strlen(final) * 2 + 64;
    char *tmp = malloc(n), *fin = strdup(final);
    if (!tmp || !fin) {
        free(tmp), free(fin);
        return cli_error(CMD, "out of memory"), NULL;
    }
    if (sweep) sweep_stale(final, dot);
    static unsigned serial;
    for (int tries = 0;; tries++) {
        snprintf(tmp, n, "%s.tmp%ld-s%u%s", final, (long)getpid(), serial++, dot);
        int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd >= 0) {
            close(fd);
            break;
        }
        if (errno != EEXIST || tries > 100) {
            cli_error(CMD, "%s: cannot create a file beside it (%s): %s", final, tmp, strerror(errno));
            free(tmp), free(fin);
            return NULL;
        }
    }
    o->v[o->n++] = (staged){fin, tmp};
    return tmp;
}

/* Prints the library's last error with a staging name replaced by the output's own. */
static int stage_error(const out_set *o) {
    const char *msg = terra_last_error();
    for (size_t i = 0; i < o->n; i++) {
        const char *at = strstr(msg, o->v[i].tmp);
        if (at) return cli_error(CMD, "%.*s%s%s", (int)(at - msg), msg, o->v[i].final, at + strlen(o->v[i].tmp));
    }
    return cli_error(CMD, "%s", msg);
}

/* Removes every staging file (the outputs' names are untouched). */
static void stage_abort(out_set *o) {
    for (size_t i = 0; i < o->n; i++) {
        remove(o->v[i].tmp);
        free(o->v[i].tmp), free(o->v[i].final);
    }
    free(o->v);
    memset(o, 0, sizeof *o);
}

/* Renames every staging file into place; on a failure puts back what the earlier renames replaced. */
static int stage_commit(out_set *o) {
    int rc = EXIT_OK;
    char **bak = calloc(o->n + 1, sizeof *bak);
    if (!bak) {
        stage_abort(o);
        return cli_error(CMD, "out of memory");
    }
    /* Hard links to the files about to be replaced (only needed when there is more than one);
     * an existing file that cannot be linked is marked by an empty name: it cannot be put back. */
    for (size_t i = 0; i < o->n && o->n > 1; i++) {
        struct stat st;
        if (lstat(o->v[i].final, &st) != 0) continue;
        size_t n = strlen(o->v[i].tmp) + 8;
        if (!(bak[i] = malloc(n))) continue;
        snprintf(bak[i], n, "%s.keep", o->v[i].tmp);
        if (!S_ISREG(st.st_mode) || link(o->v[i].final, bak[i]) != 0) bak[i][0] = 0;
    }
    size_t done = 0;
    for (; done < o->n; done++)
        if (rename(o->v[done].tmp, o->v[done].final) != 0) {
            rc = cli_error(CMD, "%s: cannot rename into place (from %s): %s", o->v[done].final, o->v[done].tmp,
                           strerror(errno));
            break;
        }
    if (rc != EXIT_OK) {
        for (size_t i = 0; i < done; i++) {
            if (bak[i] && !bak[i][0]) {
                cli_error(CMD, "%s: replaced, and what was there before could not be kept", o->v[i].final);
                continue;
            }
            if (bak[i] ? rename(bak[i], o->v[i].final) == 0 : remove(o->v[i].final) == 0) continue;
            cli_error(CMD, "%s: could not put back what was there before%s%s", o->v[i].final,
                      bak[i] ? "; it is kept as " : "", bak[i] ? bak[i] : "");
            free(bak[i]), bak[i] = NULL; /* kept, not removed below */
        }
        for (size_t i = done; i < o->n; i++) remove(o->v[i].tmp);
    }
    for (size_t i = 0; i < o->n; i++) {
        if (bak[i] && bak[i][0]) remove(bak[i]); /* gone already where it was renamed back */
        free(bak[i]);
        free(o->v[i].tmp), free(o->v[i].final);
    }
    free(bak);
    free(o->v);
    memset(o, 0, sizeof *o);
    return rc;
}

typedef struct xy_map {
    int mode; /* 0 samples, 1 metres, 2 geo */
    double gt[6];
    int height;
    double sx, sy;
} xy_map;

static void map_xy(const xy_map *m, double col, double row, double *x, double *y) {
    if (m->mode == 0) {
        *x = col, *y = row;
    } else if (m->mode == 1) {
        *x = col * m->sx, *y = ((double)m->height - 1 - row) * m->sy;
    } else {
        double c = col + 0.5, r = row + 0.5;
        *x = m->gt[0] + c * m->gt[1] + r * m->gt[2];
        *y = m->gt[3] + c * m->gt[4] + r * m->gt[5];
    }
}

/* Sign of the (column, row) -> (x, y) map's determinant. */
static bool map_flips(const xy_map *m) {
    if (m->mode == 0) return false;
    if (m->mode == 1) return true;
    return m->gt[1] * m->gt[5] - m->gt[2] * m->gt[4] < 0;
}

/* The (column, row) -> (x, y) map of an output as an affine transform. */
static void map_affine(const xy_map *m, double a[6]) {
    if (m->mode == 0) {
        const double id[6] = {0, 1, 0, 0, 0, 1};
        memcpy(a, id, sizeof id);
    } else if (m->mode == 1) {
        const double me[6] = {0, m->sx, 0, ((double)m->height - 1) * m->sy, 0, -m->sy};
        memcpy(a, me, sizeof me);
    } else {
        const double *g = m->gt; /* sample centres */
        const double ge[6] = {g[0] + 0.5 * g[1] + 0.5 * g[2], g[1], g[2], g[3] + 0.5 * g[4] + 0.5 * g[5], g[4], g[5]};
        memcpy(a, ge, sizeof ge);
    }
}

static float *vertex_normals(const terra_tin_mesh *m, size_t nv, const uint32_t *tri, size_t nt, const double a[6],
                             bool flip) {
    float *n = calloc(nv * 3 + 1, sizeof(float));
    if (!n) return NULL;
    for (size_t t = 0; t < nt; t++) {
        double p[3][3];
        for (int k = 0; k < 3; k++) {
            uint32_t v = tri[3 * t + k];
            double c = m->xy[2 * v], r = m->xy[2 * v + 1];
            p[k][0] = a[0] + a[1] * c + a[2] * r, p[k][1] = a[3] + a[4] * c + a[5] * r;
            p[k][2] = m->z[v] == m->z[v] ? m->z[v] : 0.0;
        }
        double ux = p[1][0] - p[0][0], uy = p[1][1] - p[0][1], uz = p[1][2] - p[0][2];
        double vx = p[2][0] - p[0][0], vy = p[2][1] - p[0][1], vz = p[2][2] - p[0][2];
        double s = flip ? -1.0 : 1.0;
        double f[3] = {s * (uy * vz - uz * vy), s * (uz * vx - ux * vz), s * (ux * vy - uy * vx)};
        for (int k = 0; k < 3; k++)
            for (int i = 0; i < 3; i++) n[3 * tri[3 * t + k] + i] += (float)f[i];
    }
    for (size_t v = 0; v < nv; v++) {
        double l = sqrt((double)n[3 * v] * n[3 * v] + (double)n[3 * v + 1] * n[3 * v + 1] + (double)n[3 * v + 2] * n[3 * v + 2]);
        for (int i = 0; i < 3; i++) n[3 * v + i] = l > 0 ? (float)(n[3 * v + i] / l) : (i == 2 ? 1.0f : 0.0f);
    }
    return n;
}

/* Stored triangles turn clockwise in (column, row); the writer keeps normals up in the output. */
static terra_status write_level(const char *path, const terra_tin_mesh *m, const uint32_t *tri, size_t nt, size_t nv,
                                const xy_map *map, bool normals, const char *comment) {
    terra_mesh_out o = {0};
    o.path = path, o.vertex_count = nv, o.xy = m->xy, o.z = m->z;
    o.triangle_count = nt, o.triangles = tri, o.comment = comment;
    map_affine(map, o.affine);
    o.flip = !map_flips(map);
    float *nrm = NULL;
    if (normals) {
        nrm = vertex_normals(m, nv, tri, nt, o.affine, o.flip);
        if (!nrm) return terra_fail(TERRA_E_NOMEM, "%s: out of memory", path);
        o.normals = nrm;
    }
    terra_status s = terra_io_write_mesh(&o);
    free(nrm);
    return s;
}

static int cmp_desc(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x < y) - (x > y);
}

/* Merges one tile's per-sample errors into the raster-wide map (shared border samples keep the
 * larger error; a sample one tile covers is not uncovered because its neighbour leaves it out). */
static void merge_errors(float *map, int width, const float *tile, int x0, int y0, int w, int h) {
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            float e = tile[(size_t)y * w + x], *m = &map[(size_t)(y0 + y) * width + x0 + x];
            if (e != e) *m = e;
            else if (e > *m) *m = e;
        }
}

/* Tiled mode: OUT's name gets ".l<level>.<tx>_<ty>" before the extension; level 0 is the coarsest.
 * Vertices keep raster-wide coordinates, so tiles drawn together line up. */
static int mesh_tiles(const char *in, const char *out, const terra_raster *r, const double *errs_in, int nerr,
                      int tile_size, int threads, const xy_map *map, bool normals, bool verify, const char *heatmap,
                      double t_read, bool quiet) {
    double levels[MAX_LEVELS];
    memcpy(levels, errs_in, (size_t)nerr * sizeof(double));
    qsort(levels, (size_t)nerr, sizeof(double), cmp_desc);
    int nl = 0;
    for (int i = 0; i < nerr; i++)
        if (!nl || levels[nl - 1] != levels[i]) levels[nl++] = levels[i];
    terra_tin_tiles_desc td = {r->width, r->height, r->heights, tile_size, levels, nl, threads, NULL};
    terra_tin_tiles T;
    if (!quiet)
        fprintf(stderr, "terra mesh: %s: tiles of %d samples, %d level%s, %d thread%s...\n", in, tile_size, nl,
                nl == 1 ? "" : "s", threads, threads == 1 ? "" : "s");
    if (terra_tin_tiles_build(&td, &T) != TERRA_OK) return cli_error(CMD, "%s: %s", in, terra_last_error());
    int rc = EXIT_OK;
    out_set os = {0};
    size_t tris[MAX_LEVELS] = {0}, verts[MAX_LEVELS] = {0};
    double worst[MAX_LEVELS] = {0}, sum2 = 0;
    size_t nsamples = 0;
    const char *dot = strrchr(out, '.');
    size_t nbase = (size_t)(dot - out), nname = strlen(out) + 64;
    char *name = malloc(nname);
    const size_t N = (size_t)r->width * (size_t)r->height;
    float *hs = malloc((size_t)tile_size * (size_t)tile_size * sizeof(float));
    float *terr = heatmap ? malloc((size_t)tile_size * (size_t)tile_size * sizeof(float)) : NULL;
    float *err = heatmap ? malloc(N * sizeof(float)) : NULL;
    uint8_t *rgb = heatmap ? malloc(N * 3) : NULL;
    const bool check = verify || heatmap;
    double check_s = 0, write_s = 0;
    if (!name || !hs || (heatmap && (!terr || !err || !rgb))) {
        rc = cli_error(CMD, "out of memory");
        goto end;
    }
    if (err)
        for (size_t i = 0; i < N; i++) err[i] = -1.0f;
    /* Every tile checked (each level with --verify, the finest for the heatmap) before anything is
     * written: a failed check writes nothing. */
    double t0 = terra_now_s();
    for (int i = 0; i < T.tiles_x * T.tiles_y && check && rc == EXIT_OK; i++) {
        terra_tin_tile *t = &T.tiles[i];
        for (int y = 0; y < t->h; y++)
            memcpy(hs + (size_t)y * t->w, r->heights + (size_t)(t->y0 + y) * r->width + t->x0, (size_t)t->w * sizeof(float));
        for (int l = verify ? 0 : nl - 1; l < nl; l++) {
            const terra_tin_level *lv = &t->mesh.levels[l];
            terra_tin_check_result cr;
            float *eo = l == nl - 1 ? terr : NULL;
            if (terra_tin_check(hs, t->w, t->h, t->mesh.xy, t->mesh.z, lv->vertex_count, lv->triangles,
                                lv->triangle_count, eo, &cr) != TERRA_OK) {
                rc = cli_error(CMD, "%s", terra_last_error());
                break;
            }
            if (eo) merge_errors(err, r->width, eo, t->x0, t->y0, t->w, t->h);
            if (cr.max_error > worst[l]) worst[l] = cr.max_error;
            if (l == nl - 1) sum2 += cr.rms_error * cr.rms_error * (double)cr.samples, nsamples += cr.samples;
            if (verify && (cr.max_error > levels[l] || cr.uncovered || cr.holes_covered || cr.degenerate || cr.flipped)) {
                rc = cli_error(CMD,
                               "verify failed: tile %d,%d level %d: max error %.6f m at (%d, %d) (bound %g), "
                               "%zu uncovered, %zu holes covered, %zu degenerate, %zu turned over",
                               t->tx, t->ty, l, cr.max_error, t->x0 + cr.worst_x, t->y0 + cr.worst_y, levels[l],
                               cr.uncovered, cr.holes_covered, cr.degenerate, cr.flipped);
                break;
            }
        }
    }
    check_s = terra_now_s() - t0;
    if (rc != EXIT_OK) goto end;
    /* Every name is checked before the first is written. */
    t0 = terra_now_s();
    for (int i = 0; i < T.tiles_x * T.tiles_y && rc == EXIT_OK; i++)
        for (int l = 0; l < nl && rc == EXIT_OK; l++) {
            snprintf(name, nname, "%.*s.l%d.%d_%d%s", (int)nbase, out, l, T.tiles[i].tx, T.tiles[i].ty, dot);
            rc = check_writable("output", name);
        }
    if (heatmap) {
        terra_tin_error_colors(err, r->width, r->height, levels[nl - 1], rgb);
        const char *tmp = stage(&os, heatmap, true);
        if (!tmp) rc = EXIT_FAIL;
        else if (terra_io_write_png(tmp, rgb, r->width, r->height, 3) != TERRA_OK) rc = stage_error(&os);
    }
    snprintf(name, nname, "%.*s.l", (int)nbase, out);
    sweep_stale(name, dot);
    for (int i = 0; i < T.tiles_x * T.tiles_y && rc == EXIT_OK; i++) {
        terra_tin_tile *t = &T.tiles[i];
        /* Tile-local (column, row) -> raster-wide output coordinates. */
        int32_t *xy = t->mesh.xy;
        for (size_t v = 0; v < t->mesh.vertex_count; v++) xy[2 * v] += t->x0, xy[2 * v + 1] += t->y0;
        for (int l = 0; l < nl && rc == EXIT_OK; l++) {
            const terra_tin_level *lv = &t->mesh.levels[l];
            tris[l] += lv->triangle_count, verts[l] += lv->vertex_count;
            snprintf(name, nname, "%.*s.l%d.%d_%d%s", (int)nbase, out, l, t->tx, t->ty, dot);
            char comment[160];
            snprintf(comment, sizeof comment, "terra mesh tile %d,%d level %d: max error %g m", t->tx, t->ty, l,
                     levels[l]);
            const char *tmp = stage(&os, name, false); /* swept once for all tiles, above */
            if (!tmp) rc = EXIT_FAIL;
            else if (write_level(tmp, &t->mesh, lv->triangles, lv->triangle_count, lv->vertex_count, map, normals,
                                 comment) != TERRA_OK)
                rc = stage_error(&os);
        }
        for (size_t v = 0; v < t->mesh.vertex_count; v++) xy[2 * v] -= t->x0, xy[2 * v + 1] -= t->y0;
    }
    if (rc == EXIT_OK) rc = stage_commit(&os);
    write_s = terra_now_s() - t0;
    if (rc == EXIT_OK) {
        printf("input %s %dx%d\ntiles %d x %d of %d samples\n", in, r->width, r->height, T.tiles_x, T.tiles_y, tile_size);
        for (int l = 0; l < nl; l++) {
            printf("level %d max_error %g vertices %zu triangles %zu", l, levels[l], verts[l], tris[l]);
            if (verify || (check && l == nl - 1)) printf(" checked %.6f", worst[l]);
            printf("\n");
        }
        printf("triangles %zu\n", tris[nl - 1]);
        if (check)
            printf("max_error %.6f\nrms_error %.6f\n", worst[nl - 1], nsamples ? sqrt(sum2 / (double)nsamples) : 0.0);
        printf("read_ms %.3f\nmesh_ms %.3f\n", t_read * 1e3, T.seconds * 1e3);
        if (check) printf("check_ms %.3f\n", check_s * 1e3);
        printf("write_ms %.3f\nthreads %d\npeak_mb %.1f\nalloc_peak_mb %.1f\nreader_peak_mb %.1f\n", write_s * 1e3,
               threads, peak_mb(), (double)alloc_peak / 1048576.0, reader_peak_mb());
        if (verify) printf("verify ok\n");
    }
end:
    stage_abort(&os); /* after a commit there is nothing left to remove */
    free(name);
    free(hs);
    free(terr);
    free(err);
    free(rgb);
    terra_tin_tiles_free(&T);
    return rc;
}

/* Measures another mesh against IN. It passes only when it covers every valid sample (or puts a
 * vertex on it), covers no hole, has no degenerate or turned-over triangle, and (with a bound) no
 * sample is over the bound: a mesh that covers nothing never passes. */
static int check_mesh(const char *in, const terra_raster *r, const char *mesh_path, double bound, const char *heatmap) {
    struct stat st;
    if (stat(mesh_path, &st) != 0) return cli_error(CMD, "%s: cannot read: %s", mesh_path, strerror(errno));
    if (!S_ISREG(st.st_mode)) return cli_error(CMD, "%s: not a regular file (a mesh in OBJ expected)", mesh_path);
    double *xyz = NULL;
    uint32_t *tri = NULL;
    size_t nv = 0, nt = 0;
    if (terra_io_read_obj(mesh_path, &xyz, &nv, &tri, &nt) != TERRA_OK) return cli_error(CMD, "%s", terra_last_error());
    int32_t *xy = malloc(nv * 2 * sizeof(int32_t) + 1);
    float *z = malloc(nv * sizeof(float) + 1);
    float *err = malloc((size_t)r->width * (size_t)r->height * sizeof(float));
    int rc = EXIT_OK;
    out_set os = {0};
    if (!xy || !z || !err) {
        rc = cli_error(CMD, "out of memory");
        goto out;
    }
    for (size_t v = 0; v < nv; v++) {
        double x = xyz[3 * v], y = xyz[3 * v + 1];
        if (x != floor(x) || y != floor(y) || fabs(x) > 1e9 || fabs(y) > 1e9) {
            rc = cli_error(CMD, "%s: vertex %zu (%g, %g) is not on a sample (x = column, y = row expected)", mesh_path,
                           v + 1, x, y);
            goto out;
        }
        xy[2 * v] = (int32_t)x, xy[2 * v + 1] = (int32_t)y, z[v] = (float)xyz[3 * v + 2];
    }
    terra_tin_check_result res;
    if (terra_tin_check(r->heights, r->width, r->height, xy, z, nv, tri, nt, err, &res) != TERRA_OK) {
        rc = cli_error(CMD, "%s: %s", mesh_path, terra_last_error());
        goto out;
    }
    printf("input %s %dx%d\nmesh %s\nvertices %zu\ntriangles %zu\nmax_error %.6f\nrms_error %.6f\nworst %d %d\n"
           "uncovered %zu\nholes_covered %zu\ndegenerate %zu\nturned_over %zu\n",
           in, r->width, r->height, mesh_path, nv, nt, res.max_error, res.rms_error, res.worst_x, res.worst_y,
           res.uncovered, res.holes_covered, res.degenerate, res.flipped);
    if (heatmap) {
        uint8_t *rgb = malloc((size_t)r->width * (size_t)r->height * 3);
        if (!rgb) {
            rc = cli_error(CMD, "out of memory");
            goto out;
        }
        terra_tin_error_colors(err, r->width, r->height, bound > 0 ? bound : res.max_error, rgb);
        const char *tmp = stage(&os, heatmap, true);
        if (!tmp) rc = EXIT_FAIL;
        else if (terra_io_write_png(tmp, rgb, r->width, r->height, 3) != TERRA_OK) rc = stage_error(&os);
        free(rgb);
        if (rc == EXIT_OK) rc = stage_commit(&os);
        if (rc != EXIT_OK) goto out;
    }
    /* Every failed rule is named (the heatmap is still drawn: it shows where). */
#define PL(n) (n) == 1 ? "" : "s", (n) == 1 ? "is" : "are"
    if (res.uncovered)
        rc = cli_error(CMD, "%s: %zu valid sample%s %s not covered by any triangle", mesh_path, res.uncovered,
                       PL(res.uncovered));
    if (res.holes_covered)
        rc = cli_error(CMD, "%s: %zu no-data sample%s %s covered", mesh_path, res.holes_covered, PL(res.holes_covered));
    if (res.degenerate)
        rc = cli_error(CMD, "%s: %zu triangle%s %s of no area", mesh_path, res.degenerate, PL(res.degenerate));
    if (res.flipped)
        rc = cli_error(CMD, "%s: %zu triangle%s %s turned over against the first", mesh_path, res.flipped,
                       PL(res.flipped));
#undef PL
    if (bound > 0 && res.max_error > bound)
        rc = cli_error(CMD, "%s: max error %.6f at (%d, %d) is over the bound %g", mesh_path, res.max_error,
                       res.worst_x, res.worst_y, bound);
    printf("check %s\n", rc == EXIT_OK ? "ok" : "FAILED");
out:
    stage_abort(&os);
    terra_free(xyz);
    terra_free(tri);
    free(xy);
    free(z);
    free(err);
    return rc;
}

enum { OPT_MAXV = 256, OPT_ENC, OPT_BAND, OPT_ZS, OPT_SPACING, OPT_XY, OPT_NORMALS, OPT_UPPER, OPT_THICK, OPT_HEAT,
       OPT_VERIFY, OPT_CHECK, OPT_TILE, OPT_THREADS, OPT_UPPER_BAND, OPT_MAXMEM };

/* Checks one layer of the two-layer ground; NULL triangles are the lower layer's. */
static int check_layer(const char *what, const float *heights, int w, int h, const terra_tin_mesh *m, const float *z,
                       const uint32_t *tri, size_t nt, float *err, terra_tin_check_result *res) {
    if (terra_tin_check(heights, w, h, m->xy, z, m->vertex_count, tri, nt, err, res) != TERRA_OK)
        return cli_error(CMD, "checking the %s layer failed: %s", what, terra_last_error());
    return EXIT_OK;
}

int cmd_mesh(int argc, char **argv) {
    static const struct option opts[] = {
        {"output", required_argument, 0, 'o'},       {"max-error", required_argument, 0, 'e'},
        {"max-triangles", required_argument, 0, 't'}, {"max-vertices", required_argument, 0, OPT_MAXV},
        {"encoding", required_argument, 0, OPT_ENC}, {"band", required_argument, 0, OPT_BAND},
        {"z-scale", required_argument, 0, OPT_ZS},   {"spacing", required_argument, 0, OPT_SPACING},
        {"xy", required_argument, 0, OPT_XY},        {"normals", no_argument, 0, OPT_NORMALS},
        {"upper", required_argument, 0, OPT_UPPER},  {"thickness", required_argument, 0, OPT_THICK},
        {"heatmap", required_argument, 0, OPT_HEAT}, {"verify", no_argument, 0, OPT_VERIFY},
        {"check-mesh", required_argument, 0, OPT_CHECK}, {"quiet", no_argument, 0, 'q'},
        {"tile-size", required_argument, 0, OPT_TILE}, {"threads", required_argument, 0, OPT_THREADS},
        {"upper-band", required_argument, 0, OPT_UPPER_BAND}, {"max-memory", required_argument, 0, OPT_MAXMEM},
        {"help", no_argument, 0, 'h'},               {0, 0, 0, 0}};
    const char *out = NULL, *heatmap = NULL, *upper_path = NULL, *check_path = NULL;
    double errs[MAX_LEVELS];
    int nerr = 0;
    long max_tri = 0, max_vert = 0, band = 0, tile_size = 0, threads = terra_default_threads(), upper_band = 0;
    double zscale = 0, spacing = 0, thickness = 0;
    size_t max_bytes = 0;
    terra_raster_encoding enc = TERRA_RASTER_PLAIN;
    xy_map map = {0};
    bool normals = false, verify = false, quiet = false, threads_set = false, thickness_set = false, xy_set = false;
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":o:e:t:qh", opts, NULL)) != -1) {
        switch (c) {
        case 'o': out = optarg; break;
        case 'e': {
            nerr = 0;
            char *s = optarg;
            for (;;) {
                char *end;
                double v = strtod(s, &end);
                if (end == s || (*end && *end != ',') || nerr == MAX_LEVELS)
                    return cli_usage_error(CMD, "--max-error: '%s' is not a list of numbers", optarg);
                if (!(v > 0) || !isfinite(v))
                    return cli_usage_error(CMD, "--max-error: the bound must be a positive number of metres (got %s)",
                                           optarg);
                errs[nerr++] = v;
                if (!*end) break;
                s = end + 1;
            }
            break;
        }
        case 't':
            if (!cli_parse_int(optarg, &max_tri) || max_tri < 2)
                return cli_usage_error(CMD, "--max-triangles: '%s' is not a count of at least 2", optarg);
            break;
        case OPT_MAXV:
            if (!cli_parse_int(optarg, &max_vert) || max_vert < 4)
                return cli_usage_error(CMD, "--max-vertices: '%s' is not a count of at least 4", optarg);
            break;
        case OPT_ENC:
            if (!strcmp(optarg, "plain")) enc = TERRA_RASTER_PLAIN;
            else if (!strcmp(optarg, "terrain-rgb")) enc = TERRA_RASTER_TERRAIN_RGB;
            else if (!strcmp(optarg, "terrarium")) enc = TERRA_RASTER_TERRARIUM;
            else return cli_usage_error(CMD, "--encoding: '%s' is not plain, terrain-rgb or terrarium", optarg);
            break;
        case OPT_BAND:
            if (!cli_parse_int(optarg, &band) || band < 1 || band > 65535)
                return cli_usage_error(CMD, "--band: '%s' is not a band number", optarg);
            break;
        case OPT_ZS:
            if (!cli_parse_double(optarg, &zscale) || zscale == 0 || !isfinite(zscale))
                return cli_usage_error(CMD, "--z-scale: '%s' is not a non-zero number", optarg);
            break;
        case OPT_SPACING:
            if (!cli_parse_double(optarg, &spacing) || !(spacing > 0) || !isfinite(spacing))
                return cli_usage_error(CMD, "--spacing: '%s' is not a positive number", optarg);
            break;
        case OPT_XY:
            xy_set = true;
            if (!strcmp(optarg, "samples")) map.mode = 0;
            else if (!strcmp(optarg, "metres") || !strcmp(optarg, "meters")) map.mode = 1;
            else if (!strcmp(optarg, "geo")) map.mode = 2;
            else return cli_usage_error(CMD, "--xy: '%s' is not samples, metres or geo", optarg);
            break;
        case OPT_NORMALS: normals = true; break;
        case OPT_UPPER: upper_path = optarg; break;
        case OPT_UPPER_BAND:
            if (!cli_parse_int(optarg, &upper_band) || upper_band < 1 || upper_band > 65535)
                return cli_usage_error(CMD, "--upper-band: '%s' is not a band number", optarg);
            break;
        case OPT_THICK:
            if (!cli_parse_double(optarg, &thickness) || thickness < 0 || !isfinite(thickness))
                return cli_usage_error(CMD, "--thickness: '%s' is not a number >= 0", optarg);
            thickness_set = true;
            break;
        case OPT_HEAT: heatmap = optarg; break;
        case OPT_VERIFY: verify = true; break;
        case OPT_CHECK: check_path = optarg; break;
        case OPT_TILE:
            if (!cli_parse_int(optarg, &tile_size) || tile_size < 3 || tile_size > 65536)
                return cli_usage_error(CMD, "--tile-size: '%s' is not a size of 3 to 65536 samples", optarg);
            break;
        case OPT_THREADS:
            if (!cli_parse_int(optarg, &threads) || threads < 1 || threads > 64)
                return cli_usage_error(CMD, "--threads: '%s' is not 1 to 64", optarg);
            threads_set = true;
            break;
        case OPT_MAXMEM:
            if (!cli_parse_bytes(optarg, &max_bytes))
                return cli_usage_error(CMD, "--max-memory: '%s' is not a size from 1M to 1P (e.g. 512M, 2G)", optarg);
            break;
        case 'q': quiet = true; break;
        case 'h': help(stdout); return EXIT_OK;
        case ':': return cli_usage_error(CMD, "option '%s' needs a value", argv[optind - 1]);
        default: return cli_usage_error(CMD, "unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind != argc - 1) return cli_usage_error(CMD, optind >= argc ? "no input raster" : "more than one input");
    const char *in = argv[optind];
    if (upper_band && upper_path) return cli_usage_error(CMD, "--upper and --upper-band do not go together");
    if (upper_band) {
        if (enc != TERRA_RASTER_PLAIN) return cli_usage_error(CMD, "--upper-band needs a plain encoding");
        upper_path = in; /* a two-band file: the upper layer is another band of IN */
    }
    /* Every option given does something, or the run is refused: none is silently ignored. */
    if (check_path) {
        const char *unused = out ? "-o" : upper_path ? (upper_band ? "--upper-band" : "--upper")
                             : tile_size ? "--tile-size" : threads_set ? "--threads" : max_tri ? "--max-triangles"
                             : max_vert ? "--max-vertices" : normals ? "--normals" : thickness_set ? "--thickness"
                             : xy_set ? "--xy" : nerr > 1 ? "a list of bounds" : NULL;
        if (unused) return cli_usage_error(CMD, "--check-mesh measures a mesh and writes none: %s does not apply", unused);
    } else {
        if (!out) return cli_usage_error(CMD, "no output (-o OUT)");
        if (!terra_io_mesh_format_known(out))
            return cli_usage_error(CMD, "%s: unknown mesh format (use .obj, .ply or .stl)", out);
        if (nerr == 0) return cli_usage_error(CMD, "no error bound (--max-error M)");
        if (upper_path) {
            const char *unsupported = nerr > 1 ? "several bounds" : tile_size ? "--tile-size" : max_tri
                                      ? "--max-triangles" : max_vert ? "--max-vertices" : normals ? "--normals" : NULL;
            if (unsupported)
                return cli_usage_error(CMD, "two-layer ground (--upper) takes one bound, without tiles, count "
                                            "limits or normals: %s is not supported with it", unsupported);
        } else if (thickness_set) {
            return cli_usage_error(CMD, "--thickness is for two-layer ground (--upper or --upper-band)");
        }
        if (tile_size && (max_tri || max_vert))
            return cli_usage_error(CMD, "--tile-size meshes every tile to its bounds: %s does not apply",
                                   max_tri ? "--max-triangles" : "--max-vertices");
        if (threads_set && !tile_size) return cli_usage_error(CMD, "--threads is for the tiled mode (--tile-size)");
        /* Outputs are checked before anything is read or written. */
        if (tile_size || nerr == 1) {
            if (check_writable("output", out) != EXIT_OK) return EXIT_FAIL;
        } else {
            for (int i = 0; i < nerr; i++) {
                char *name = level_name(out, errs[i]);
                int rc = name ? check_writable("output", name) : cli_error(CMD, "out of memory");
                free(name);
                if (rc != EXIT_OK) return rc;
            }
        }
    }
    if (heatmap && out && !strcmp(heatmap, out)) return cli_usage_error(CMD, "--heatmap and -o name the same file");
    if (heatmap && check_writable("heatmap", heatmap) != EXIT_OK) return EXIT_FAIL;

    terra_raster r = {0}, ru = {0};
    terra_raster_desc rd = {0};
    rd.path = in, rd.encoding = enc, rd.band = (int)band, rd.z_scale = zscale, rd.spacing_m = spacing;
    rd.max_side = TERRA_TIN_MAX_SIDE;
    rd.max_bytes = max_bytes;
    terra_allocator counting = {count_alloc, count_realloc, count_free, NULL};
    terra_set_allocator(&counting);
    double t_read = terra_now_s();
    if (terra_raster_read_isolated(&rd, NULL, &r) != TERRA_OK) return cli_error(CMD, "%s", terra_last_error());
    t_read = terra_now_s() - t_read;
    if (r.width < 2 || r.height < 2) {
        int w = r.width, h = r.height;
        terra_raster_free(&r);
        return cli_error(CMD, "%s: raster %dx%d is too small to mesh (at least 2x2)", in, w, h);
    }
    if (map.mode == 2 && !r.georeferenced) {
        terra_raster_free(&r);
        return cli_error(CMD, "%s: --xy geo needs a georeferenced raster", in);
    }
    memcpy(map.gt, r.geo, sizeof map.gt);
    map.height = r.height, map.sx = r.spacing_x, map.sy = r.spacing_y;
    if (check_path) {
        int rc = check_mesh(in, &r, check_path, nerr ? errs[0] : 0, heatmap);
        terra_raster_free(&r);
        return rc;
    }
    if (upper_path) {
        rd.path = upper_path;
        if (upper_band) rd.band = (int)upper_band;
        double t1 = terra_now_s();
        if (terra_raster_read_isolated(&rd, NULL, &ru) != TERRA_OK) {
            terra_raster_free(&r);
            return cli_error(CMD, "%s", terra_last_error());
        }
        t_read += terra_now_s() - t1;
        if (ru.width != r.width || ru.height != r.height) {
            terra_raster_free(&r);
            terra_raster_free(&ru);
            return cli_error(CMD, "%s: upper layer is %dx%d, lower is %dx%d", upper_path, ru.width, ru.height, r.width,
                             r.height);
        }
    }
    if (!quiet)
        fprintf(stderr, "terra mesh: %s %dx%d read in %.0f ms; meshing at %g m...\n", in, r.width, r.height,
                t_read * 1e3, errs[nerr - 1]);

    int rc = EXIT_OK;
    const bool check = verify || heatmap;
    const size_t N = (size_t)r.width * (size_t)r.height;
    double finest = errs[0];
    for (int i = 1; i < nerr; i++)
        if (errs[i] < finest) finest = errs[i];
    terra_tin_mesh m = {0};
    terra_tin_layers L = {0};
    out_set os = {0};
    float *err = NULL, *err2 = NULL;
    uint8_t *rgb = NULL;
    terra_tin_check_result res = {0}, res2 = {0};
    double check_s = 0, write_s = 0;
    if (tile_size) {
        rc = mesh_tiles(in, out, &r, errs, nerr, (int)tile_size, (int)threads, &map, normals, verify, heatmap, t_read,
                        quiet);
        goto out;
    }
    double t0 = terra_now_s();
    if (upper_path) {
        terra_tin_layers_desc ld = {r.width, r.height, r.heights, ru.heights, finest, thickness};
        if (terra_tin_layers_build(&ld, &L) != TERRA_OK) {
            rc = cli_error(CMD, "%s: %s", in, terra_last_error());
            goto out;
        }
    } else {
        terra_tin_desc d = {0};
        d.width = r.width, d.height = r.height, d.heights = r.heights, d.max_error = finest;
        d.max_triangles = (size_t)max_tri, d.max_vertices = (size_t)max_vert;
        d.levels = errs, d.level_count = nerr;
        if (terra_tin_build(&d, &m) != TERRA_OK) {
            rc = cli_error(CMD, "%s: %s", in, terra_last_error());
            goto out;
        }
    }
    double mesh_s = terra_now_s() - t0;
    if (!quiet) fprintf(stderr, "terra mesh: meshed in %.0f ms; %s...\n", mesh_s * 1e3, check ? "checking" : "writing");

    /* The check (opt-in: it costs about 60% of the meshing time), before anything is written, so a mesh
     * that fails it replaces nothing. The finest level, or both layers of two-layer ground. */
    const terra_tin_mesh *cm = upper_path ? &L.mesh : &m;
    const terra_tin_level *fl = &cm->levels[cm->level_count - 1];
    if (check) {
        t0 = terra_now_s();
        if (heatmap && (!(err = malloc(N * sizeof(float))) || !(rgb = malloc(N * 3)) ||
                        (upper_path && !(err2 = malloc(N * sizeof(float)))))) {
            rc = cli_error(CMD, "out of memory");
            goto out;
        }
        if ((rc = check_layer(upper_path ? "lower" : "finest", r.heights, r.width, r.height, cm, cm->z, fl->triangles,
                              fl->triangle_count, err, &res)) != EXIT_OK)
            goto out;
        if (upper_path) {
            if ((rc = check_layer("upper", ru.heights, r.width, r.height, cm, cm->z_upper, fl->upper_triangles,
                                  fl->upper_triangle_count, err2, &res2)) != EXIT_OK)
                goto out;
            if (err) /* one map of both layers: the larger error where the upper layer is present */
                for (size_t i = 0; i < N; i++) {
                    float e = err2[i];
                    if (e != e) continue;
                    if (e < 0 || err[i] != err[i] || e > err[i]) err[i] = e;
                }
        }
        /* --verify holds every level to its own bound, the coarser ones too. */
        for (int li = 0; verify && !upper_path && li < m.level_count - 1; li++) {
            const terra_tin_level *lv = &m.levels[li];
            terra_tin_check_result cr;
            if ((rc = check_layer("coarser", r.heights, r.width, r.height, &m, m.z, lv->triangles, lv->triangle_count,
                                  NULL, &cr)) != EXIT_OK)
                goto out;
            bool stopped = lv->stop != TERRA_TIN_STOP_ERROR;
            if ((!stopped && (cr.max_error > lv->max_error || cr.uncovered)) || cr.holes_covered || cr.degenerate ||
                cr.flipped) {
                printf("verify FAILED (level %d: max %.6f <= %g, uncovered %zu, holes covered %zu, degenerate %zu, "
                       "turned over %zu)\n",
                       li, cr.max_error, lv->max_error, cr.uncovered, cr.holes_covered, cr.degenerate, cr.flipped);
                rc = cli_error(CMD, "verify failed: level %d (bound %g): worst sample (%d, %d) is %.6f m off; nothing "
                               "was written", li, lv->max_error, cr.worst_x, cr.worst_y, cr.max_error);
                goto out;
            }
        }
        check_s = terra_now_s() - t0;
    }
    if (verify) {
        bool stopped = fl->stop != TERRA_TIN_STOP_ERROR;
        bool bad = !stopped && (res.max_error > fl->max_error || res2.max_error > fl->max_error);
        bad |= res.holes_covered || res.degenerate || res.flipped || res2.holes_covered || res2.degenerate || res2.flipped;
        bad |= !stopped && (res.uncovered || res2.uncovered);
        if (bad) {
            const terra_tin_check_result *w = upper_path && res2.max_error > res.max_error ? &res2 : &res;
            printf("verify FAILED (max %.6f <= %g, uncovered %zu, holes covered %zu, degenerate %zu, turned over %zu)\n",
                   w->max_error, fl->max_error, res.uncovered + res2.uncovered, res.holes_covered + res2.holes_covered,
                   res.degenerate + res2.degenerate, res.flipped + res2.flipped);
            rc = cli_error(CMD, "verify failed: worst sample (%d, %d)%s is %.6f m off; nothing was written", w->worst_x,
                           w->worst_y, w == &res2 ? " of the upper layer" : "", w->max_error);
            goto out;
        }
    }

    t0 = terra_now_s();
    if (heatmap) {
        terra_tin_error_colors(err, r.width, r.height, fl->max_error, rgb);
        const char *tmp = stage(&os, heatmap, true);
        if (!tmp) rc = EXIT_FAIL;
        else if (terra_io_write_png(tmp, rgb, r.width, r.height, 3) != TERRA_OK) rc = stage_error(&os);
        if (rc != EXIT_OK) goto out;
    }
    if (upper_path) {
        /* Two-layer ground: one triangle soup (lower, upper top, underside, walls). */
        double *xyz = malloc(L.soup_vertex_count * 3 * sizeof(double) + 1);
        uint32_t *t2 = malloc(L.soup_triangle_count * 3 * sizeof(uint32_t) + 1);
        if (!xyz || !t2) {
            free(xyz);
            free(t2);
            rc = cli_error(CMD, "out of memory");
            goto out;
        }
        bool keep = map_flips(&map);
        for (size_t v = 0; v < L.soup_vertex_count; v++) {
            map_xy(&map, L.soup_xyz[3 * v], L.soup_xyz[3 * v + 1], &xyz[3 * v], &xyz[3 * v + 1]);
            xyz[3 * v + 2] = L.soup_xyz[3 * v + 2];
        }
        for (size_t t = 0; t < L.soup_triangle_count; t++) {
            t2[3 * t] = L.soup_triangles[3 * t];
            t2[3 * t + 1] = L.soup_triangles[3 * t + (keep ? 1 : 2)];
            t2[3 * t + 2] = L.soup_triangles[3 * t + (keep ? 2 : 1)];
        }
        terra_mesh_out o = {0};
        o.vertex_count = L.soup_vertex_count, o.xyz = xyz;
        o.triangle_count = L.soup_triangle_count, o.triangles = t2, o.comment = "terra two-layer ground";
        if (!(o.path = stage(&os, out, true))) rc = EXIT_FAIL;
        else if (terra_io_write_mesh(&o) != TERRA_OK) rc = stage_error(&os);
        free(xyz);
        free(t2);
    } else {
        /* Every level: OUT itself for one bound, OUT.e<M>.ext for several. */
        for (int li = 0; li < m.level_count && rc == EXIT_OK; li++) {
            const terra_tin_level *lv = &m.levels[li];
            char *name = nerr > 1 ? level_name(out, lv->max_error) : NULL;
            const char *tmp = nerr > 1 && !name ? NULL : stage(&os, name ? name : out, true);
            free(name);
            if (!tmp) {
                rc = EXIT_FAIL;
                break;
            }
            char comment[160];
            snprintf(comment, sizeof comment, "terra mesh: max error %g m, %zu vertices, %zu triangles", lv->max_error,
                     lv->vertex_count, lv->triangle_count);
            if (write_level(tmp, &m, lv->triangles, lv->triangle_count, lv->vertex_count, &map, normals, comment) !=
                TERRA_OK)
                rc = stage_error(&os);
        }
    }
    if (rc == EXIT_OK) rc = stage_commit(&os);
    write_s = terra_now_s() - t0;
    if (rc != EXIT_OK) goto out;

    printf("input %s %dx%d\nspacing_m %g %g\nnodata %zu\n", in, r.width, r.height, r.spacing_x, r.spacing_y,
           r.nodata_count);
    if (upper_path) {
        printf("vertices %zu\nlower_triangles %zu\nupper_triangles %zu\nwalls %zu\ntriangles %zu\n", L.mesh.vertex_count,
               fl->triangle_count, fl->upper_triangle_count, L.wall_count, L.soup_triangle_count);
    } else {
        for (int li = 0; li < m.level_count; li++) {
            const terra_tin_level *lv = &m.levels[li];
            printf("level %d max_error %g vertices %zu triangles %zu reached %.6f%s\n", li, lv->max_error,
                   lv->vertex_count, lv->triangle_count, lv->reached_error,
                   lv->stop == TERRA_TIN_STOP_TRIANGLES ? " (stopped at max triangles)"
                   : lv->stop == TERRA_TIN_STOP_VERTICES ? " (stopped at max vertices)" : "");
        }
        printf("vertices %zu\ntriangles %zu\n", fl->vertex_count, fl->triangle_count);
    }
    if (check) {
        double mx = res.max_error > res2.max_error ? res.max_error : res2.max_error;
        double n1 = (double)res.samples, n2 = (double)res2.samples;
        double rms = n1 + n2 > 0 ? sqrt((res.rms_error * res.rms_error * n1 + res2.rms_error * res2.rms_error * n2) / (n1 + n2)) : 0.0;
        printf("max_error %.6f\nrms_error %.6f\n", mx, rms);
    }
    printf("read_ms %.3f\nmesh_ms %.3f\n", t_read * 1e3, mesh_s * 1e3);
    if (check) printf("check_ms %.3f\n", check_s * 1e3);
    printf("write_ms %.3f\npeak_mb %.1f\nalloc_peak_mb %.1f\nreader_peak_mb %.1f\n", write_s * 1e3, peak_mb(),
           (double)alloc_peak / 1048576.0, reader_peak_mb());
    if (verify)
        printf("verify ok (max %.6f <= %g, uncovered %zu, holes covered %zu, degenerate %zu%s)\n",
               res.max_error > res2.max_error ? res.max_error : res2.max_error, fl->max_error,
               res.uncovered + res2.uncovered, res.holes_covered + res2.holes_covered, res.degenerate + res2.degenerate,
               upper_path ? ", both layers" : "");
out:
    stage_abort(&os); /* nothing is left after a commit; after a failure, the staging files go */
    free(err);
    free(err2);
    free(rgb);
    terra_tin_mesh_free(&m);
    terra_tin_layers_free(&L);
    terra_raster_free(&r);
    terra_raster_free(&ru);
    return rc;
}
