/* terra mesh: a heightmap into a triangle network (greedy insertion), with an independent check. */
#include "cli.h"
#include "terra/io.h"
#include "terra/raster.h"
#include "terra/tin.h"

#include <getopt.h>
#include <math.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>

#define CMD "mesh"
#define MAX_LEVELS 16

static void help(FILE *f) {
    fprintf(f,
            "Usage: terra mesh IN -o OUT --max-error M[,M2,...] [OPTIONS]\n"
            "       terra mesh IN --check-mesh MESH.obj [--max-error M] [OPTIONS]\n\n"
            "Meshes a heightmap into a triangle network by greedy insertion (Garland & Heckbert):\n"
            "the worst sample goes in first, until every sample is within the error bound.\n"
            "IN is anything GDAL reads (GeoTIFF, 16-bit PNG, SRTM .hgt, ASCII grid, ...).\n"
            "OUT's extension picks the format: .obj, .ply (binary) or .stl (binary).\n"
            "Several bounds (coarse to fine, one run) write OUT with .e<M> before the extension;\n"
            "coarser meshes use a prefix of the finer ones' vertices.\n\n"
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
            "      --upper FILE          two-layer ground: the upper layer (no-data where absent)\n"
            "      --upper-band N        two-layer: the upper layer is band N of IN (a two-band file)\n"
            "      --thickness M         two-layer: slab thickness under the upper layer (0: to the ground)\n"
            "      --heatmap PNG         draw every sample's error (blue 0, red = bound, white above)\n"
            "      --verify              check every sample independently; fail if one is over the bound\n"
            "      --check-mesh FILE     measure an existing OBJ (x = column, y = row) against IN\n"
            "      --tile-size T         tiles of TxT samples sharing borders, each bound a level; writes\n"
            "                            OUT with .l<level>.<tx>_<ty> before the extension (0 coarsest)\n"
            "      --threads N           threads for the tiles (default 2)\n"
            "  -q, --quiet               no progress on stderr\n"
            "  -h, --help                this help\n\n"
            "Prints a report (key value lines): vertices, triangles, max_error, rms_error, mesh_ms,\n"
            "peak_mb (this process), alloc_peak_mb (terra's own allocations), reader_peak_mb (the\n"
            "terra-raster process that read IN through GDAL, so the mesher never maps GDAL).\n"
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

/* Tiled mode: OUT's name gets ".l<level>.<tx>_<ty>" before the extension; level 0 is the coarsest.
 * Vertices keep raster-wide coordinates, so tiles drawn together line up. */
static int mesh_tiles(const char *in, const char *out, const terra_raster *r, const double *errs_in, int nerr,
                      int tile_size, int threads, const xy_map *map, bool normals, bool verify, bool quiet) {
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
    size_t tris[MAX_LEVELS] = {0}, verts[MAX_LEVELS] = {0};
    double worst[MAX_LEVELS] = {0};
    const char *dot = strrchr(out, '.');
    size_t nbase = (size_t)(dot - out), nname = strlen(out) + 64;
    char *name = malloc(nname);
    char **done = calloc((size_t)T.tiles_x * (size_t)T.tiles_y * (size_t)nl + 1, sizeof(char *));
    size_t ndone = 0;
    float *hs = malloc((size_t)tile_size * (size_t)tile_size * sizeof(float));
    if (!name || !done || !hs) {
        rc = cli_error(CMD, "out of memory");
        goto end;
    }
    for (int i = 0; i < T.tiles_x * T.tiles_y && rc == EXIT_OK; i++) {
        terra_tin_tile *t = &T.tiles[i];
        xy_map tm = *map;
        for (int y = 0; y < t->h; y++)
            memcpy(hs + (size_t)y * t->w, r->heights + (size_t)(t->y0 + y) * r->width + t->x0, (size_t)t->w * sizeof(float));
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
            if (write_level(name, &t->mesh, lv->triangles, lv->triangle_count, lv->vertex_count, &tm, normals,
                            comment) != TERRA_OK) {
                rc = cli_error(CMD, "%s", terra_last_error());
                break;
            }
            done[ndone++] = strdup(name);
        }
        for (size_t v = 0; v < t->mesh.vertex_count; v++) xy[2 * v] -= t->x0, xy[2 * v + 1] -= t->y0;
        if (rc != EXIT_OK || !verify) continue;
        for (int l = 0; l < nl; l++) {
            const terra_tin_level *lv = &t->mesh.levels[l];
            terra_tin_check_result cr;
            if (terra_tin_check(hs, t->w, t->h, t->mesh.xy, t->mesh.z, lv->vertex_count, lv->triangles,
                                lv->triangle_count, NULL, &cr) != TERRA_OK) {
                rc = cli_error(CMD, "%s", terra_last_error());
                break;
            }
            if (cr.max_error > worst[l]) worst[l] = cr.max_error;
            if (cr.max_error > levels[l] || cr.holes_covered || cr.degenerate || cr.flipped) {
                rc = cli_error(CMD, "verify failed: tile %d,%d level %d is %.6f m off at (%d, %d)", t->tx, t->ty, l,
                               cr.max_error, t->x0 + cr.worst_x, t->y0 + cr.worst_y);
                break;
            }
        }
    }
    if (rc == EXIT_OK) {
        printf("input %s %dx%d\ntiles %d x %d of %d samples\n", in, r->width, r->height, T.tiles_x, T.tiles_y, tile_size);
        for (int l = 0; l < nl; l++)
            printf("level %d max_error %g vertices %zu triangles %zu%s%.6f\n", l, levels[l], verts[l], tris[l],
                   verify ? " checked " : "", verify ? worst[l] : 0.0);
        printf("triangles %zu\nmesh_ms %.3f\nthreads %d\npeak_mb %.1f\nreader_peak_mb %.1f\n", tris[nl - 1], T.seconds * 1e3,
               threads, peak_mb(), reader_peak_mb());
        if (verify) printf("verify ok\n");
    }
end:
    if (rc != EXIT_OK && done)
        for (size_t i = 0; i < ndone; i++) remove(done[i]);
    if (done)
        for (size_t i = 0; i < ndone; i++) free(done[i]);
    free(done);
    free(name);
    free(hs);
    terra_tin_tiles_free(&T);
    return rc;
}

static int check_mesh(const char *in, const terra_raster *r, const char *mesh_path, double bound, const char *heatmap,
                      bool quiet) {
    double *xyz = NULL;
    uint32_t *tri = NULL;
    size_t nv = 0, nt = 0;
    if (terra_io_read_obj(mesh_path, &xyz, &nv, &tri, &nt) != TERRA_OK) return cli_error(CMD, "%s", terra_last_error());
    int32_t *xy = malloc(nv * 2 * sizeof(int32_t) + 1);
    float *z = malloc(nv * sizeof(float) + 1);
    float *err = malloc((size_t)r->width * (size_t)r->height * sizeof(float));
    int rc = EXIT_OK;
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
        rc = cli_error(CMD, "%s", terra_last_error());
        goto out;
    }
    printf("input %s %dx%d\nmesh %s\nvertices %zu\ntriangles %zu\nmax_error %.6f\nrms_error %.6f\nworst %d %d\n"
           "uncovered %zu\nholes_covered %zu\ndegenerate %zu\n",
           in, r->width, r->height, mesh_path, nv, nt, res.max_error, res.rms_error, res.worst_x, res.worst_y,
           res.uncovered, res.holes_covered, res.degenerate);
    if (heatmap) {
        uint8_t *rgb = malloc((size_t)r->width * (size_t)r->height * 3);
        if (!rgb) {
            rc = cli_error(CMD, "out of memory");
            goto out;
        }
        terra_tin_error_colors(err, r->width, r->height, bound > 0 ? bound : res.max_error, rgb);
        if (terra_io_write_png(heatmap, rgb, r->width, r->height, 3) != TERRA_OK)
            rc = cli_error(CMD, "%s", terra_last_error());
        free(rgb);
    }
    if (bound > 0 && res.max_error > bound) {
        if (!quiet) fprintf(stderr, "terra mesh: %s: max error %.6f is over the bound %g\n", mesh_path, res.max_error, bound);
        rc = EXIT_FAIL;
    }
out:
    terra_free(xyz);
    terra_free(tri);
    free(xy);
    free(z);
    free(err);
    return rc;
}

enum { OPT_MAXV = 256, OPT_ENC, OPT_BAND, OPT_ZS, OPT_SPACING, OPT_XY, OPT_NORMALS, OPT_UPPER, OPT_THICK, OPT_HEAT,
       OPT_VERIFY, OPT_CHECK, OPT_TILE, OPT_THREADS, OPT_UPPER_BAND };

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
        {"upper-band", required_argument, 0, OPT_UPPER_BAND},
        {"help", no_argument, 0, 'h'},               {0, 0, 0, 0}};
    const char *out = NULL, *heatmap = NULL, *upper_path = NULL, *check_path = NULL;
    double errs[MAX_LEVELS];
    int nerr = 0;
    long max_tri = 0, max_vert = 0, band = 0, tile_size = 0, threads = 2, upper_band = 0;
    double zscale = 0, spacing = 0, thickness = 0;
    terra_raster_encoding enc = TERRA_RASTER_PLAIN;
    xy_map map = {0};
    bool normals = false, verify = false, quiet = false;
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
    if (!check_path) {
        if (!out) return cli_usage_error(CMD, "no output (-o OUT)");
        if (!terra_io_mesh_format_known(out))
            return cli_usage_error(CMD, "%s: unknown mesh format (use .obj, .ply or .stl)", out);
        if (nerr == 0) return cli_usage_error(CMD, "no error bound (--max-error M)");
        if (upper_path && nerr > 1) return cli_usage_error(CMD, "--upper takes a single --max-error");
        if (upper_path && tile_size) return cli_usage_error(CMD, "--upper and --tile-size do not go together");
    }

    terra_raster r = {0}, ru = {0};
    terra_raster_desc rd = {0};
    rd.path = in, rd.encoding = enc, rd.band = (int)band, rd.z_scale = zscale, rd.spacing_m = spacing;
    rd.max_side = TERRA_TIN_MAX_SIDE;
    terra_allocator counting = {count_alloc, count_realloc, count_free, NULL};
    terra_set_allocator(&counting);
    double t_read = terra_now_s();
    if (terra_raster_read_isolated(&rd, NULL, &r) != TERRA_OK) return cli_error(CMD, "%s", terra_last_error());
    t_read = terra_now_s() - t_read;
    if (r.width < 2 || r.height < 2) {
        terra_raster_free(&r);
        return cli_error(CMD, "%s: raster %dx%d is too small to mesh (at least 2x2)", in, r.width, r.height);
    }
    if (map.mode == 2 && !r.georeferenced) {
        terra_raster_free(&r);
        return cli_error(CMD, "%s: --xy geo needs a georeferenced raster", in);
    }
    memcpy(map.gt, r.geo, sizeof map.gt);
    map.height = r.height, map.sx = r.spacing_x, map.sy = r.spacing_y;
    if (check_path) {
        int rc = check_mesh(in, &r, check_path, nerr ? errs[0] : 0, heatmap, quiet);
        terra_raster_free(&r);
        return rc;
    }
    if (upper_path) {
        rd.path = upper_path;
        if (upper_band) rd.band = (int)upper_band;
        if (terra_raster_read_isolated(&rd, NULL, &ru) != TERRA_OK) {
            terra_raster_free(&r);
            return cli_error(CMD, "%s", terra_last_error());
        }
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
    char *names[MAX_LEVELS] = {0};
    int written = 0;
    double finest = errs[0];
    for (int i = 1; i < nerr; i++)
        if (errs[i] < finest) finest = errs[i];
    terra_tin_mesh m = {0};
    terra_tin_layers L = {0};
    if (tile_size) {
        rc = mesh_tiles(in, out, &r, errs, nerr, (int)tile_size, (int)threads, &map, normals, verify, quiet);
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
    if (!quiet) fprintf(stderr, "terra mesh: meshed in %.0f ms; writing...\n", mesh_s * 1e3);

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
        o.path = out, o.vertex_count = L.soup_vertex_count, o.xyz = xyz;
        o.triangle_count = L.soup_triangle_count, o.triangles = t2, o.comment = "terra two-layer ground";
        if (terra_io_write_mesh(&o) != TERRA_OK) rc = cli_error(CMD, "%s", terra_last_error());
        free(xyz);
        free(t2);
        if (rc == EXIT_OK)
            printf("input %s %dx%d\nvertices %zu\nlower_triangles %zu\nupper_triangles %zu\nwalls %zu\n"
                   "triangles %zu\nmesh_ms %.3f\npeak_mb %.1f\nreader_peak_mb %.1f\n",
                   in, r.width, r.height, L.mesh.vertex_count, L.mesh.levels[0].triangle_count,
                   L.mesh.levels[0].upper_triangle_count, L.wall_count, L.soup_triangle_count, mesh_s * 1e3, peak_mb(),
                   reader_peak_mb());
        goto out;
    }

    /* Write every level: OUT itself for one bound, OUT.e<M>.ext for several. */
    for (int li = 0; li < m.level_count; li++) {
        const terra_tin_level *lv = &m.levels[li];
        const char *path = out;
        if (nerr > 1) {
            names[li] = level_name(out, lv->max_error);
            if (!names[li]) {
                rc = cli_error(CMD, "out of memory");
                goto out;
            }
            path = names[li];
        }
        char comment[160];
        snprintf(comment, sizeof comment, "terra mesh: max error %g m, %zu vertices, %zu triangles", lv->max_error,
                 lv->vertex_count, lv->triangle_count);
        if (write_level(path, &m, lv->triangles, lv->triangle_count, lv->vertex_count, &map, normals, comment) !=
            TERRA_OK) {
            rc = cli_error(CMD, "%s", terra_last_error());
            goto out;
        }
        written = li + 1;
    }

    /* The report, checked independently on every sample of the finest level. */
    const terra_tin_level *fl = &m.levels[m.level_count - 1];
    float *err = heatmap ? malloc((size_t)r.width * (size_t)r.height * sizeof(float)) : NULL;
    terra_tin_check_result res;
    if ((heatmap && !err) || terra_tin_check(r.heights, r.width, r.height, m.xy, m.z, fl->vertex_count, fl->triangles,
                                fl->triangle_count, err, &res) != TERRA_OK) {
        free(err);
        rc = cli_error(CMD, "checking failed: %s", terra_last_error());
        goto out;
    }
    printf("input %s %dx%d\nspacing_m %g %g\nnodata %zu\n", in, r.width, r.height, r.spacing_x, r.spacing_y,
           r.nodata_count);
    for (int li = 0; li < m.level_count; li++) {
        const terra_tin_level *lv = &m.levels[li];
        printf("level %d max_error %g vertices %zu triangles %zu reached %.6f%s\n", li, lv->max_error,
               lv->vertex_count, lv->triangle_count, lv->reached_error,
               lv->stop == TERRA_TIN_STOP_TRIANGLES ? " (stopped at max triangles)"
               : lv->stop == TERRA_TIN_STOP_VERTICES ? " (stopped at max vertices)" : "");
    }
    printf("vertices %zu\ntriangles %zu\nmax_error %.6f\nrms_error %.6f\nmesh_ms %.3f\npeak_mb %.1f\nalloc_peak_mb %.1f\n"
           "reader_peak_mb %.1f\n",
           fl->vertex_count, fl->triangle_count, res.max_error, res.rms_error, mesh_s * 1e3, peak_mb(),
           (double)alloc_peak / 1048576.0, reader_peak_mb());
    if (heatmap) {
        uint8_t *rgb = malloc((size_t)r.width * (size_t)r.height * 3);
        if (!rgb) {
            free(err);
            rc = cli_error(CMD, "out of memory");
            goto out;
        }
        terra_tin_error_colors(err, r.width, r.height, fl->max_error, rgb);
        terra_status hs = terra_io_write_png(heatmap, rgb, r.width, r.height, 3);
        free(rgb);
        if (hs != TERRA_OK) {
            free(err);
            rc = cli_error(CMD, "%s", terra_last_error());
            goto out;
        }
    }
    free(err);
    if (verify) {
        bool bad = fl->stop == TERRA_TIN_STOP_ERROR && res.max_error > fl->max_error;
        bad |= res.holes_covered > 0 || res.degenerate > 0 || res.flipped > 0;
        bad |= fl->stop == TERRA_TIN_STOP_ERROR && res.uncovered > 0;
        printf("verify %s (max %.6f <= %g, uncovered %zu, holes covered %zu, degenerate %zu)\n", bad ? "FAILED" : "ok",
               res.max_error, fl->max_error, res.uncovered, res.holes_covered, res.degenerate);
        if (bad) {
            rc = cli_error(CMD, "verify failed: worst sample (%d, %d) is %.6f m off", res.worst_x, res.worst_y,
                           res.max_error);
            goto out;
        }
    }
out:
    if (rc != EXIT_OK) {
        /* No partial output: remove what this run already wrote. */
        for (int i = 0; i < written; i++) remove(nerr > 1 ? names[i] : out);
    }
    for (int i = 0; i < MAX_LEVELS; i++) free(names[i]);
    terra_tin_mesh_free(&m);
    terra_tin_layers_free(&L);
    terra_raster_free(&r);
    terra_raster_free(&ru);
    return rc;
}
