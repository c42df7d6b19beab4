/* terra check (terra/cook_check.h) on archives built by hand, in both frames: a correct two-level
 * TIN pyramid over a synthetic raster passes; each broken promise on its own (a crack on a
 * same-level border, a T-junction across levels, a stated error below the truth, a triangle over
 * a hole, a tile that does not decode, a tile whose edge list lies) is caught and named.
 *
 * The ground: a raster of (4n + 1) x (2n + 1) samples (random smooth heights), eight finest tiles
 * of n x n cells (every sample a vertex: exact), two coarse tiles over four finest each, either a
 * fan from the centre to every border sample (border kept, interior simplified; stated error the
 * height range, a sound bound) or the children merged (a raster with a hole keeps it). */
#include "check.h"
#include "terra/archive_io.h"
#include "terra/cook_check.h"
#include "terra/scenery.h"

#include <gdal.h>
#include <math.h>
#include <string.h>
#include <unistd.h>

#define NODATA (-9999.0f)

typedef struct ground {
    terra_frame frame;
    int n;               /* cells per finest tile side */
    int W, H;            /* samples: 4n + 1 by 2n + 1 */
    float *h;            /* W * H, indexed by (c, yi): yi grows with tile y (north / +z) */
    double spacing;      /* local: metres per sample */
    int zoom;            /* geographic: zoom of the finest tiles */
    int32_t X0, Y0;      /* geographic: finest tiles are (zoom, 4 X0 + i, 2 Y0 + j) */
    int hole_c, hole_y;  /* a no-data sample, or -1 */
    char tif[128];
} ground;

static float sample(const ground *g, int c, int yi) { return g->h[(size_t)yi * g->W + c]; }

static void make_ground(ground *g, terra_frame frame, unsigned long long *rng, bool hole) {
    memset(g, 0, sizeof *g);
    g->frame = frame;
    static const int ns[3] = {4, 8, 16};
    g->n = ns[test_rand_u64(rng) % 3];
    g->W = 4 * g->n + 1, g->H = 2 * g->n + 1;
    static const double sps[3] = {1, 2.5, 10};
    g->spacing = sps[test_rand_u64(rng) % 3];
    g->zoom = 8 + (int)(test_rand_u64(rng) % 7);
    g->X0 = (int32_t)(test_rand_u64(rng) % ((uint64_t)1 << g->zoom)) / 2;
    g->Y0 = (int32_t)(test_rand_u64(rng) % ((uint64_t)1 << (g->zoom - 1))) / 2;
    g->h = malloc(sizeof(float) * (size_t)g->W * (size_t)g->H);
    double amp[3], fx[3], fy[3], ph[3];
    for (int k = 0; k < 3; k++)
        amp[k] = test_rand_range(rng, 5, 40), fx[k] = test_rand_range(rng, 0.05, 0.4),
        fy[k] = test_rand_range(rng, 0.05, 0.4), ph[k] = test_rand_range(rng, 0, 6.28);
    for (int y = 0; y < g->H; y++)
        for (int c = 0; c < g->W; c++) {
            double v = 300;
            for (int k = 0; k < 3; k++) v += amp[k] * sin(fx[k] * c + fy[k] * y + ph[k]);
            g->h[(size_t)y * g->W + c] = (float)v;
        }
    g->hole_c = g->hole_y = -1;
    if (hole) {
        /* inside finest tile (1, 0), off its border */
        g->hole_c = g->n + 1 + (int)(test_rand_u64(rng) % (uint64_t)(g->n - 1));
        g->hole_y = 1 + (int)(test_rand_u64(rng) % (uint64_t)(g->n - 1));
        g->h[(size_t)g->hole_y * g->W + g->hole_c] = NAN;
    }
}

/* The raster file: rows from the top (north / largest z first for geographic; local: row = yi so
 * sample (c, row) sits at x = c * spacing, z = row * spacing). */
static void write_raster(ground *g, const char *tag) {
    snprintf(g->tif, sizeof g->tif, "cook_check_%ld_%s.tif", (long)getpid(), tag);
    GDALAllRegister();
    GDALDatasetH ds = GDALCreate(GDALGetDriverByName("GTiff"), g->tif, g->W, g->H, 1, GDT_Float32, NULL);
    CHECK(ds != NULL);
    if (!ds) return;
    float *rows = malloc(sizeof(float) * (size_t)g->W * (size_t)g->H);
    for (int r = 0; r < g->H; r++)
        for (int c = 0; c < g->W; c++) {
            const int yi = g->frame == TERRA_FRAME_LOCAL ? r : g->H - 1 - r;
            const float v = sample(g, c, yi);
            rows[(size_t)r * g->W + c] = isnan(v) ? NODATA : v;
        }
    if (g->frame == TERRA_FRAME_GEOGRAPHIC) {
        const double w = 180.0 / (double)(1 << g->zoom), px = w / g->n;
        const double west = -180 + 4.0 * g->X0 * w, north = -90 + 2.0 * g->Y0 * w + 2 * w;
        double gt[6] = {west - px / 2, px, 0, north + px / 2, 0, -px};
        GDALSetGeoTransform(ds, gt);
    }
    GDALRasterBandH b = GDALGetRasterBand(ds, 1);
    GDALSetRasterNoDataValue(b, NODATA);
    CHECK(GDALRasterIO(b, GF_Write, 0, 0, g->W, g->H, rows, g->W, g->H, GDT_Float32, 0, 0) == CE_None);
    GDALClose(ds);
    free(rows);
}

/* ---- tiles as triangles over sample ids (c + yi * W) ------------------------------------------- */

typedef struct tri_list {
    uint32_t *t;
    size_t n, cap;
} tri_list;

static void tri_add(tri_list *l, uint32_t a, uint32_t b, uint32_t c) {
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 256;
        l->t = realloc(l->t, l->cap * 3 * sizeof *l->t);
    }
    l->t[3 * l->n] = a, l->t[3 * l->n + 1] = b, l->t[3 * l->n + 2] = c;
    l->n++;
}

static bool valid(const ground *g, int c, int y) { return !isnan(sample(g, c, y)); }

/* Finest tile (i, j): two triangles a cell, counter-clockwise in (c, yi), cells touching no-data left
 * out (cover_hole: kept anyway). */
static void finest_tris(const ground *g, int i, int j, bool cover_hole, tri_list *l) {
    const int n = g->n;
    for (int y = j * n; y < (j + 1) * n; y++)
        for (int c = i * n; c < (i + 1) * n; c++) {
            if (!cover_hole && (!valid(g, c, y) || !valid(g, c + 1, y) || !valid(g, c, y + 1) || !valid(g, c + 1, y + 1)))
                continue;
            const uint32_t a = (uint32_t)(y * g->W + c), b = a + 1, d = a + 1 + (uint32_t)g->W, e = a + (uint32_t)g->W;
            tri_add(l, a, b, d);
            tri_add(l, a, d, e);
        }
}

/* Coarse tile ci (0 or 1): a fan from its centre to each border sample in turn, skipping border
 * sample `drop` of its west side (-1: none). */
static void fan_tris(const ground *g, int ci, int drop, tri_list *l) {
    const int s = 2 * g->n, c0 = ci * s;
    uint32_t ring[4 * 64];
    int k = 0;
    for (int c = 0; c < s; c++) ring[k++] = (uint32_t)(c0 + c);                         /* south, east-bound */
    for (int y = 0; y < s; y++) ring[k++] = (uint32_t)(y * g->W + c0 + s);              /* east, north-bound */
    for (int c = s; c > 0; c--) ring[k++] = (uint32_t)(s * g->W + c0 + c);              /* north, west-bound */
    for (int y = s; y > 0; y--)                                                          /* west, south-bound */
        if (y != drop) ring[k++] = (uint32_t)(y * g->W + c0);
    const uint32_t centre = (uint32_t)(g->n * g->W + c0 + g->n);
    for (int m = 0; m < k; m++) tri_add(l, centre, ring[m], ring[(m + 1) % k]);
}

typedef struct tile_spec {
    int level;
    int32_t x, y;      /* key */
    int c0, y0, span;  /* samples covered: [c0, c0 + span] x [y0, y0 + span] */
    double error;      /* stated */
} tile_spec;

/* Adds a tile with u, v, h, indices set: edge lists from u, v, header heights lo..hi. */
static void add_qmesh(terra_archive_writer *w, terra_tile_key key, terra_qmesh *m, float lo, float hi, double error) {
    const uint32_t nv = m->vertex_count;
    uint32_t *edges = malloc(sizeof(uint32_t) * 4 * (nv + 1));
    for (int s = 0; s < 4; s++) {
        m->edges[s] = edges + (size_t)s * nv;
        m->edge_count[s] = 0;
        for (uint32_t v = 0; v < nv; v++) {
            const uint16_t q = (s == TERRA_QMESH_WEST || s == TERRA_QMESH_EAST) ? m->u[v] : m->v[v];
            if (q == ((s == TERRA_QMESH_WEST || s == TERRA_QMESH_SOUTH) ? 0 : TERRA_QMESH_MAX_COORD))
                m->edges[s][m->edge_count[s]++] = v;
        }
    }
    m->header.min_height = lo, m->header.max_height = hi, m->header.sphere_radius = 1;
    CHECK(terra_qmesh_reorder(m, NULL) == TERRA_OK);
    const size_t cap = terra_qmesh_encoded_size(m);
    uint8_t *buf = malloc(cap);
    size_t n = 0;
    CHECK(terra_qmesh_encode(m, buf, cap, &n) == TERRA_OK, "%s", terra_last_error());
    const terra_archive_tile_info info = {(float)error, 1, lo, hi};
    CHECK(terra_archive_writer_add(w, key, buf, n, &info) == TERRA_OK, "%s", terra_last_error());
    free(buf), free(edges);
}

/* Encodes the triangles as one tile (u, v across its span; heights over its own range). */
static void add_tile(terra_archive_writer *w, const ground *g, const tile_spec *ts, const tri_list *l, float bump,
                     int bump_vertex_c, int bump_vertex_y) {
    int32_t *local = malloc(sizeof(int32_t) * (size_t)g->W * (size_t)g->H);
    for (size_t i = 0; i < (size_t)g->W * (size_t)g->H; i++) local[i] = -1;
    uint32_t nv = 0;
    uint32_t *ids = malloc(sizeof(uint32_t) * 3 * (l->n + 1));
    uint32_t *idx = malloc(sizeof(uint32_t) * 3 * (l->n + 1));
    for (size_t k = 0; k < 3 * l->n; k++) {
        if (local[l->t[k]] < 0) local[l->t[k]] = (int32_t)nv, ids[nv++] = l->t[k];
        idx[k] = (uint32_t)local[l->t[k]];
    }
    float lo = INFINITY, hi = -INFINITY;
    float *hv = malloc(sizeof(float) * (nv + 1));
    for (uint32_t v = 0; v < nv; v++) {
        const int c = (int)(ids[v] % (uint32_t)g->W), y = (int)(ids[v] / (uint32_t)g->W);
        hv[v] = sample(g, c, y);
        if (isnan(hv[v])) hv[v] = 0; /* only when a test covers a hole on purpose */
        if (c == bump_vertex_c && y == bump_vertex_y) hv[v] += bump;
        lo = fminf(lo, hv[v]), hi = fmaxf(hi, hv[v]);
    }
    terra_qmesh m;
    memset(&m, 0, sizeof m);
    m.vertex_count = nv, m.triangle_count = (uint32_t)l->n;
    uint16_t *uvh = malloc(sizeof(uint16_t) * 3 * (nv + 1));
    m.u = uvh, m.v = uvh + nv, m.h = uvh + 2 * nv;
    for (uint32_t v = 0; v < nv; v++) {
        const int c = (int)(ids[v] % (uint32_t)g->W), y = (int)(ids[v] / (uint32_t)g->W);
        m.u[v] = (uint16_t)lround((double)(c - ts->c0) * TERRA_QMESH_MAX_COORD / ts->span);
        m.v[v] = (uint16_t)lround((double)(y - ts->y0) * TERRA_QMESH_MAX_COORD / ts->span);
        m.h[v] = hi > lo ? (uint16_t)lround((hv[v] - lo) / (double)(hi - lo) * TERRA_QMESH_MAX_COORD) : 0;
    }
    m.indices = idx;
    add_qmesh(w, terra_tile_key_make(0, ts->level, ts->x, ts->y), &m, lo, hi, ts->error);
    free(uvh), free(hv), free(idx), free(ids), free(local);
}

/* What to break. */
typedef enum breakage { INTACT, CRACK, TJUNCTION, LOW_ERROR, COVER_HOLE, NO_DECODE, EDGE_LIST, UNQUANTIZED } breakage;

/* Every sample is a finest vertex: a finest tile departs from it by quantization alone, a few mm at
 * most here (a step of n * spacing / 32767 m or degrees, slopes below 50 m a sample); UNQUANTIZED
 * states 0, as a cook that measured before encoding would. */
#define FINEST_ERROR 0.05

/* Keys of finest tile (i, j) and coarse tile ci. */
static void finest_key(const ground *g, int i, int j, tile_spec *ts) {
    if (g->frame == TERRA_FRAME_LOCAL) ts->level = 0, ts->x = i, ts->y = j;
    else ts->level = g->zoom, ts->x = 4 * g->X0 + i, ts->y = 2 * g->Y0 + j;
    ts->c0 = i * g->n, ts->y0 = j * g->n, ts->span = g->n;
}
static void coarse_key(const ground *g, int ci, tile_spec *ts) {
    if (g->frame == TERRA_FRAME_LOCAL) ts->level = 1, ts->x = ci, ts->y = 0;
    else ts->level = g->zoom - 1, ts->x = 2 * g->X0 + ci, ts->y = g->Y0;
    ts->c0 = ci * 2 * g->n, ts->y0 = 0, ts->span = 2 * g->n;
}

/* The metadata's "source" (NULL: none): a scenery's layer table for the material tests. */
static const char *source_json;

static void write_archive(const ground *g, const char *path, breakage b) {
    terra_archive_write_desc wd = {0};
    wd.source_json = source_json;
    wd.frame = g->frame;
    wd.compression = TERRA_COMPRESS_GZIP;
    wd.tile_size_m = g->n * g->spacing;
    wd.tin = true;
    terra_archive_writer *w = NULL;
    CHECK(terra_archive_writer_create(path, &wd, &w) == TERRA_OK, "%s", terra_last_error());
    if (!w) return;
    const bool hole = g->hole_c >= 0;
    for (int j = 0; j < 2; j++)
        for (int i = 0; i < 4; i++) {
            tile_spec ts = {0};
            finest_key(g, i, j, &ts);
            tri_list l = {0};
            finest_tris(g, i, j, b == COVER_HOLE && i == 1 && j == 0, &l);
            /* CRACK: tile (0, 0) lifts the middle vertex of its east side */
            const bool crack = b == CRACK && i == 0 && j == 0;
            /* a crack the stated error allows for is still a crack */
            ts.error = crack ? 1 : b == UNQUANTIZED ? 0 : FINEST_ERROR;
            add_tile(w, g, &ts, &l, crack ? 0.75f : 0, crack ? g->n : -1, g->n / 2);
            free(l.t);
        }
    for (int ci = 0; ci < 2; ci++) {
        tile_spec ts = {0};
        coarse_key(g, ci, &ts);
        tri_list l = {0};
        float lo = INFINITY, hi = -INFINITY;
        for (int y = 0; y <= 2 * g->n; y++)
            for (int c = ts.c0; c <= ts.c0 + 2 * g->n; c++)
                if (valid(g, c, y)) lo = fminf(lo, sample(g, c, y)), hi = fmaxf(hi, sample(g, c, y));
        if (hole) {
            for (int j = 0; j < 2; j++)
                for (int i = 2 * ci; i < 2 * ci + 2; i++) finest_tris(g, i, j, false, &l);
            ts.error = b == UNQUANTIZED ? 0 : FINEST_ERROR;
        } else {
            /* TJUNCTION: coarse tile 1 leaves out a west-side sample that finest tile (1, 0) has */
            fan_tris(g, ci, b == TJUNCTION && ci == 1 ? g->n / 2 + 1 : -1, &l);
            ts.error = b == LOW_ERROR && ci == 0 ? 0 : hi - lo;
        }
        add_tile(w, g, &ts, &l, 0, -1, -1);
        free(l.t);
    }
    if (b == NO_DECODE) {
        /* a tile next to the others whose bytes are not quantized-mesh: counts past the data */
        uint8_t junk[120];
        memset(junk, 0x7f, sizeof junk);
        tile_spec ts = {0};
        finest_key(g, 0, 2, &ts);
        const terra_archive_tile_info info = {0, 1, 0, 1};
        CHECK(terra_archive_writer_add(w, terra_tile_key_make(0, ts.level, ts.x, ts.y), junk, sizeof junk, &info) ==
              TERRA_OK);
    }
    if (b == EDGE_LIST) {
        /* one triangle whose west vertex is left out of the west edge list */
        tile_spec ts = {0};
        finest_key(g, 3, 2, &ts);
        uint16_t u[3] = {0, 32767, 0}, v[3] = {0, 0, 32767}, h[3] = {0, 0, 0};
        uint32_t idx[3] = {0, 1, 2}, west[1] = {0}, south[2] = {0, 1}, east[1] = {1}, north[1] = {2};
        terra_qmesh m;
        memset(&m, 0, sizeof m);
        m.vertex_count = 3, m.triangle_count = 1, m.u = u, m.v = v, m.h = h, m.indices = idx;
        m.edge_count[0] = 1, m.edges[0] = west; /* vertex 2 (u = 0) is missing here */
        m.edge_count[1] = 2, m.edges[1] = south;
        m.edge_count[2] = 1, m.edges[2] = east;
        m.edge_count[3] = 1, m.edges[3] = north;
        m.header.min_height = 300, m.header.max_height = 300;
        uint8_t buf[512];
        size_t n = 0;
        CHECK(terra_qmesh_encode(&m, buf, sizeof buf, &n) == TERRA_OK);
        const terra_archive_tile_info info = {0, 1, 300, 300};
        CHECK(terra_archive_writer_add(w, terra_tile_key_make(0, ts.level, ts.x, ts.y), buf, n, &info) == TERRA_OK);
    }
    CHECK(terra_archive_writer_finish(w) == TERRA_OK, "%s", terra_last_error());
}

/* Runs the check with the ground's raster as the source. */
static terra_status run_check_q(const ground *g, const char *path, bool allow_q, terra_cook_check_report *rep) {
    terra_raster_desc rd = {0};
    rd.path = g->tif;
    if (g->frame == TERRA_FRAME_LOCAL) rd.spacing_m = g->spacing;
    terra_cook_check_desc d = {path, &rd, 1, NULL, allow_q};
    return terra_cook_check(&d, rep);
}
static terra_status run_check(const ground *g, const char *path, terra_cook_check_report *rep) {
    return run_check_q(g, path, false, rep);
}

static bool says(const char *what) { return strstr(terra_last_error(), what) != NULL; }

static void one_case(terra_frame frame, unsigned long long seed) {
    unsigned long long rng = seed;
    char path[128], nm[64];
    snprintf(path, sizeof path, "cook_check_%ld_%llu.terra", (long)getpid(), seed);
    ground g;
    make_ground(&g, frame, &rng, false);
    write_raster(&g, "plain");
    terra_cook_check_report rep;
    tile_spec f00, f10, c0, c1;
    finest_key(&g, 0, 0, &f00), finest_key(&g, 1, 0, &f10), coarse_key(&g, 0, &c0), coarse_key(&g, 1, &c1);
    const char *fr = frame == TERRA_FRAME_LOCAL ? "local" : "geographic";

    write_archive(&g, path, INTACT);
    terra_status st = run_check(&g, path, &rep);
    CHECK(st == TERRA_OK && !rep.broken, "%s seed %llu: %s", fr, seed, terra_last_error());
    CHECK(rep.tiles == 10 && rep.frame == frame);
    const int fine = f00.level, coarse = c0.level;
    CHECK(rep.level[fine].tiles == 8 && rep.level[coarse].tiles == 2);
    /* pairs: finest 4 x 2 tiles have 10 same-level neighbours, 4 finest sides lie on coarse sides
     * (columns 1 and 2 facing the other coarse tile), the coarse pair 1 */
    CHECK(rep.level[fine].border_pairs == 14, "%s: %llu pairs", fr, (unsigned long long)rep.level[fine].border_pairs);
    CHECK(rep.level[coarse].border_pairs == 1);
    /* every sample under each tile once: (n + 1)^2 a finest tile, (2n + 1)^2 a coarse one */
    CHECK(rep.level[fine].samples == 8ull * (g.n + 1) * (g.n + 1), "%llu", (unsigned long long)rep.level[fine].samples);
    CHECK(rep.level[coarse].samples == 2ull * (2 * g.n + 1) * (2 * g.n + 1));
    /* every sample is a finest vertex: what is measured there is quantization alone */
    CHECK(rep.level[fine].measured_error_max > 0 && rep.level[fine].measured_error_max <= rep.level[fine].quantization_max,
          "%g > %g", rep.level[fine].measured_error_max, rep.level[fine].quantization_max);

    /* stated errors measured before encoding: held only with the quantization allowance */
    write_archive(&g, path, UNQUANTIZED);
    st = run_check(&g, path, &rep);
    CHECK(st == TERRA_E_CORRUPT && rep.broken && says("states a geometric error of 0 m") && says("quantization accounts"),
          "%s unquantized: %s", fr, terra_last_error());
    st = run_check_q(&g, path, true, &rep);
    CHECK(st == TERRA_OK, "%s unquantized, allowed: %s", fr, terra_last_error());
    CHECK(rep.level[coarse].measured_error_max > 0.1 && rep.level[coarse].measured_error_max <= rep.level[coarse].stated_error_max);

    write_archive(&g, path, CRACK);
    st = run_check(&g, path, &rep);
    snprintf(nm, sizeof nm, "%d/%d/%d", f10.level, f10.x, f10.y);
    CHECK(st == TERRA_E_CORRUPT && rep.broken && says("crack") && says(nm), "%s crack: %s", fr, terra_last_error());

    write_archive(&g, path, TJUNCTION);
    st = run_check(&g, path, &rep);
    snprintf(nm, sizeof nm, "%d/%d/%d", c1.level, c1.x, c1.y);
    CHECK(st == TERRA_E_CORRUPT && rep.broken && says("T-junction") && says(nm), "%s T-junction: %s", fr, terra_last_error());

    write_archive(&g, path, LOW_ERROR);
    st = run_check(&g, path, &rep);
    snprintf(nm, sizeof nm, "tile %d/%d/%d states a geometric error of 0 m", c0.level, c0.x, c0.y);
    CHECK(st == TERRA_E_CORRUPT && rep.broken && says(nm), "%s low error: %s", fr, terra_last_error());

    write_archive(&g, path, NO_DECODE);
    st = run_check(&g, path, &rep);
    CHECK(st == TERRA_E_CORRUPT && rep.broken && says("does not decode"), "%s decode: %s", fr, terra_last_error());

    write_archive(&g, path, EDGE_LIST);
    st = run_check(&g, path, &rep);
    CHECK(st == TERRA_E_CORRUPT && rep.broken && says("west side") && says("edge list"), "%s edges: %s", fr,
          terra_last_error());
    unlink(g.tif);
    free(g.h);

    /* a hole: kept at every level passes; a finest tile over it is named with the sample */
    make_ground(&g, frame, &rng, true);
    write_raster(&g, "hole");
    write_archive(&g, path, INTACT);
    st = run_check(&g, path, &rep);
    CHECK(st == TERRA_OK && rep.holes == 1, "%s hole kept: %s", fr, terra_last_error());
    write_archive(&g, path, COVER_HOLE);
    st = run_check(&g, path, &rep);
    finest_key(&g, 1, 0, &f10);
    snprintf(nm, sizeof nm, "tile %d/%d/%d covers a hole", f10.level, f10.x, f10.y);
    CHECK(st == TERRA_E_CORRUPT && rep.broken && says(nm), "%s hole covered: %s", fr, terra_last_error());
    unlink(g.tif);
    unlink(path);
    free(g.h);
}

static void test_local_frame(void) {
    for (unsigned long long s = 1; s <= 3; s++) one_case(TERRA_FRAME_LOCAL, s);
}

static void test_geographic_frame(void) {
    for (unsigned long long s = 11; s <= 13; s++) one_case(TERRA_FRAME_GEOGRAPHIC, s);
}

/* Without sources only the tiles, their borders and the order of stated errors are checked (0 m
 * stated everywhere passes; a coarse tile stating less than its children does not); an archive
 * that is missing is an error, not a broken promise. */
static void test_without_source(void) {
    unsigned long long rng = 99;
    ground g;
    make_ground(&g, TERRA_FRAME_LOCAL, &rng, false);
    char path[128];
    snprintf(path, sizeof path, "cook_check_%ld_nosrc.terra", (long)getpid());
    write_archive(&g, path, UNQUANTIZED);
    terra_cook_check_desc d = {path, NULL, 0, NULL, false};
    terra_cook_check_report rep;
    CHECK(terra_cook_check(&d, &rep) == TERRA_OK && rep.level[0].samples == 0, "%s", terra_last_error());
    write_archive(&g, path, LOW_ERROR);
    CHECK(terra_cook_check(&d, &rep) == TERRA_E_CORRUPT && rep.broken && says("tile 1/0/0 states a geometric error of 0 m") &&
              says("less than its child 0/"),
          "%s", terra_last_error());
    d.archive = "cook_check_absent.terra";
    CHECK(terra_cook_check(&d, &rep) != TERRA_OK && !rep.broken);
    unlink(path);
    free(g.h);
}

/* A wall standing on a tile side is laid once, in one tile: the tile on its foot's side has ground
 * at the foot only, and the pair is sound when that ground meets the wall (not when it floats). */
static void wall_case(float west_ground, bool twice, const char *path) {
    terra_archive_write_desc wd = {0};
    wd.frame = TERRA_FRAME_LOCAL, wd.tile_size_m = 10, wd.tin = true;
    terra_archive_writer *w = NULL;
    CHECK(terra_archive_writer_create(path, &wd, &w) == TERRA_OK);
    if (!w) return;
    /* west tile (0, 0): flat ground at west_ground */
    uint16_t u0[4] = {0, 32767, 32767, 0}, v0[4] = {0, 0, 32767, 32767}, h0[4] = {0, 0, 0, 0};
    uint32_t t0[6] = {0, 1, 2, 0, 2, 3};
    terra_qmesh m;
    memset(&m, 0, sizeof m);
    m.vertex_count = 4, m.triangle_count = 2, m.u = u0, m.v = v0, m.h = h0, m.indices = t0;
    if (twice) { /* the same wall on the west tile's east side too */
        uint16_t u2[6] = {0, 32767, 32767, 0, 32767, 32767}, v2[6] = {0, 0, 32767, 32767, 0, 32767};
        uint16_t h2[6] = {0, 0, 0, 0, 32767, 32767};
        uint32_t t2[12] = {0, 1, 2, 0, 2, 3, 1, 4, 5, 1, 5, 2};
        m.vertex_count = 6, m.triangle_count = 4, m.u = u2, m.v = v2, m.h = h2, m.indices = t2;
        add_qmesh(w, terra_tile_key_make(0, 0, 0, 0), &m, 0, 5, 0);
    } else
        add_qmesh(w, terra_tile_key_make(0, 0, 0, 0), &m, west_ground, west_ground, 0);
    /* east tile (1, 0): ground at 5 m and, on its west side, a wall from 0 to 5 m */
    uint16_t u1[6] = {0, 32767, 32767, 0, 0, 0}, v1[6] = {0, 0, 32767, 32767, 0, 32767};
    uint16_t h1[6] = {32767, 32767, 32767, 32767, 0, 0};
    uint32_t t1[12] = {0, 1, 2, 0, 2, 3, 4, 5, 3, 4, 3, 0};
    memset(&m, 0, sizeof m);
    m.vertex_count = 6, m.triangle_count = 4, m.u = u1, m.v = v1, m.h = h1, m.indices = t1;
    add_qmesh(w, terra_tile_key_make(0, 0, 1, 0), &m, 0, 5, 0);
    CHECK(terra_archive_writer_finish(w) == TERRA_OK);
}

static void test_wall_on_a_side(void) {
    char path[128];
    snprintf(path, sizeof path, "cook_check_%ld_wall.terra", (long)getpid());
    terra_cook_check_desc d = {path, NULL, 0, NULL, false};
    terra_cook_check_report rep;
    wall_case(0, false, path);
    CHECK(terra_cook_check(&d, &rep) == TERRA_OK && rep.level[0].border_pairs == 1, "%s", terra_last_error());
    wall_case(2.5f, false, path); /* the west ground meets the wall half way up: still sound */
    CHECK(terra_cook_check(&d, &rep) == TERRA_OK, "%s", terra_last_error());
    wall_case(7, false, path); /* above the wall's top: a crack */
    CHECK(terra_cook_check(&d, &rep) == TERRA_E_CORRUPT && says("crack between tiles 0/") && says("0/0/0") &&
              says("0/1/0") && says("a wall stands"),
          "%s", terra_last_error());
    wall_case(0, true, path); /* laid in both tiles */
    CHECK(terra_cook_check(&d, &rep) == TERRA_E_CORRUPT && says("a wall is laid twice at level 0, in tile 0/"),
          "%s", terra_last_error());
    unlink(path);
}

/* The ground as a scenery: an OBJ of the valid samples (x = c * spacing, y up = height, z = yi *
 * spacing), two triangles a cell with four valid corners: the finest tiles are exactly its
 * triangles, so the check measures it vertex for vertex. */
static void write_obj(const ground *g, const char *path) {
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (!f) return;
    int *id = malloc(sizeof(int) * (size_t)g->W * (size_t)g->H);
    int n = 0;
    for (int y = 0; y < g->H; y++)
        for (int c = 0; c < g->W; c++) {
            id[y * g->W + c] = valid(g, c, y) ? ++n : 0;
            if (valid(g, c, y)) fprintf(f, "v %.9g %.9g %.9g\n", c * g->spacing, (double)sample(g, c, y), y * g->spacing);
        }
    for (int y = 0; y + 1 < g->H; y++)
        for (int c = 0; c + 1 < g->W; c++) {
            const int a = id[y * g->W + c], b = id[y * g->W + c + 1], d = id[(y + 1) * g->W + c + 1], e = id[(y + 1) * g->W + c];
            if (a && b && d && e) fprintf(f, "f %d %d %d\nf %d %d %d\n", a, b, d, a, d, e);
        }
    fclose(f);
    free(id);
}

static void test_scenery_source(void) {
    for (unsigned long long seed = 21; seed <= 22; seed++) {
        unsigned long long rng = seed;
        char path[128], obj[128];
        snprintf(path, sizeof path, "cook_check_%ld_scn.terra", (long)getpid());
        snprintf(obj, sizeof obj, "cook_check_%ld_scn.obj", (long)getpid());
        ground g;
        make_ground(&g, TERRA_FRAME_LOCAL, &rng, seed == 22);
        write_obj(&g, obj);
        terra_raster_desc rd = {0};
        rd.path = obj;
        terra_cook_check_desc d = {path, &rd, 1, NULL, false};
        terra_cook_check_report rep;
        write_archive(&g, path, INTACT);
        CHECK(terra_cook_check(&d, &rep) == TERRA_OK, "scenery seed %llu: %s", seed, terra_last_error());
        /* each tile's vertices once: (n + 1)^2 a finest tile, (2n + 1)^2 a coarse one, less the hole */
        const uint64_t hole = g.hole_c >= 0;
        CHECK(rep.level[0].samples == 8ull * (g.n + 1) * (g.n + 1) - hole, "%llu", (unsigned long long)rep.level[0].samples);
        CHECK(rep.level[1].samples == 2ull * (2 * g.n + 1) * (2 * g.n + 1) - hole);
        CHECK(rep.level[0].measured_error_max <= FINEST_ERROR);
        if (!hole) {
            /* the layer table: the scenery's passes, another repeat length is named */
            terra_scenery sc;
            const terra_scenery_desc sd = {.path = obj};
            CHECK(terra_scenery_read(&sd, &sc) == TERRA_OK && sc.layer_count == 1, "%s", terra_last_error());
            char js[512];
            for (int wrong = 0; wrong < 2 && sc.layer_count >= 1; wrong++) {
                snprintf(js, sizeof js,
                         "{\"inputs\":[{\"kind\":\"scenery\",\"layers\":[{\"name\":\"%s\",\"metres_per_repeat\":%.17g}]}]}",
                         sc.layers[0].name,
                         sc.layers[0].metres_per_repeat + wrong * 0.5);
                source_json = sc.layer_count == 1 ? js : NULL;
                write_archive(&g, path, INTACT);
                const terra_status st = terra_cook_check(&d, &rep);
                if (!wrong) CHECK(st == TERRA_OK && rep.layers == (int)sc.layer_count, "%s", terra_last_error());
                else CHECK(st == TERRA_E_CORRUPT && says("its tiling differs"), "%s", terra_last_error());
            }
            source_json = NULL;
            terra_scenery_free(&sc);
            write_archive(&g, path, LOW_ERROR);
            CHECK(terra_cook_check(&d, &rep) == TERRA_E_CORRUPT && says("tile 1/0/0 states a geometric error of 0 m") &&
                      says("ground vertex"),
                  "%s", terra_last_error());
        } else {
            write_archive(&g, path, COVER_HOLE);
            CHECK(terra_cook_check(&d, &rep) == TERRA_E_CORRUPT && says("tile 0/1/0 covers a hole") && says("no ground"),
                  "%s", terra_last_error());
        }
        unlink(obj);
        unlink(path);
        free(g.h);
    }
}

int main(void) {
    RUN(test_local_frame);
    RUN(test_geographic_frame);
    RUN(test_without_source);
    RUN(test_wall_on_a_side);
    RUN(test_scenery_source);
    return finish();
}
