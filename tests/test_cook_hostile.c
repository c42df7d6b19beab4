/* terra cook on hostile rasters (issue 37): overlapping inputs that disagree cook by the stated
 * overlap rule with every stated error true (terra check agrees) and no coarser tile stating less
 * than its children; NaN no-data cooks as holes exactly as -9999 does; heights past the cook's bound
 * (1e30, 3.4e38) are refused naming the file, the sample and its place; an unknown PROJ string gives
 * PROJ's message; another body's CRS is refused on the globe and cooked in its own metres locally;
 * coordinates off the globe are refused naming the file. Rasters are written here (GDAL) and read as
 * terra cook reads them (terra_raster_open: the terra-raster child). */
#include "check.h"
#include "terra/cook_check.h"
#include "terra/cook_io.h"

#include <cpl_conv.h>
#include <gdal.h>
#include <gdal_utils.h>
#include <math.h>
#include <ogr_srs_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define HGT "data/dem/N44W072.hgt"
#define SOURCES 2 /* sources per input: two workers read at once */

static const char *tmp(const char *name, char *buf, size_t n) {
    snprintf(buf, n, "cook_hostile_%ld_%s", (long)getpid(), name);
    return buf;
}

static bool says(const char *what) { return strstr(terra_last_error(), what) != NULL; }

/* A float GeoTIFF: w x h heights (row-major from the top), geotransform gt, crs (NULL: none), no-data
 * (NULL: none declared). */
static void write_tif(const char *path, int w, int h, const double gt[6], const char *crs, const double *nodata,
                      const float *v) {
    GDALAllRegister();
    GDALDatasetH ds = GDALCreate(GDALGetDriverByName("GTiff"), path, w, h, 1, GDT_Float32, NULL);
    CHECK(ds != NULL, "%s", path);
    if (!ds) return;
    GDALSetGeoTransform(ds, (double *)gt);
    if (crs) {
        OGRSpatialReferenceH s = OSRNewSpatialReference(NULL);
        CHECK(OSRSetFromUserInput(s, crs) == OGRERR_NONE, "%s", crs);
        GDALSetSpatialRef(ds, s);
        OSRDestroySpatialReference(s);
    }
    GDALRasterBandH b = GDALGetRasterBand(ds, 1);
    if (nodata) GDALSetRasterNoDataValue(b, *nodata);
    CHECK(GDALRasterIO(b, GF_Write, 0, 0, w, h, (void *)v, w, h, GDT_Float32, 0, 0) == CE_None);
    GDALClose(ds);
}

/* A VRT over `tif` (its first band) that says the coordinate system is `srs`, as written. */
static void write_vrt(const char *path, const char *tif, int w, int h, const double gt[6], const char *srs) {
    FILE *f = fopen(path, "w");
    fprintf(f,
            "<VRTDataset rasterXSize=\"%d\" rasterYSize=\"%d\">\n  <SRS>%s</SRS>\n"
            "  <GeoTransform>%.17g, %.17g, 0, %.17g, 0, %.17g</GeoTransform>\n"
            "  <VRTRasterBand dataType=\"Float32\" band=\"1\">\n    <SimpleSource><SourceFilename relativeToVRT=\"0\">%s"
            "</SourceFilename><SourceBand>1</SourceBand></SimpleSource>\n  </VRTRasterBand>\n</VRTDataset>\n",
            w, h, srs, gt[0], gt[1], gt[3], gt[5], tif);
    fclose(f);
}

/* How terra cook opens an input. */
static terra_raster_desc cook_desc(const char *path) {
    terra_raster_desc d = {.path = path, .nan_is_nodata = true, .min_height = TERRA_COOK_MIN_HEIGHT,
                           .max_height = TERRA_COOK_MAX_HEIGHT};
    return d;
}

/* Cooks files as terra cook does (each opened SOURCES times); TERRA_OK or the failure. */
static terra_status cook_files(const char *const *paths, int n, terra_cook_frame frame, double max_error, const char *out,
                               terra_cook_report *rep) {
    terra_raster_source *src[8 * SOURCES] = {0};
    terra_cook_input in[8];
    memset(in, 0, sizeof in);
    terra_status st = TERRA_OK;
    for (int i = 0; i < n && st == TERRA_OK; i++) {
        const terra_raster_desc d = cook_desc(paths[i]);
        for (int k = 0; k < SOURCES && st == TERRA_OK; k++) st = terra_raster_open(&d, NULL, &src[i * SOURCES + k]);
        in[i] = (terra_cook_input){.path = paths[i], .sources = src + i * SOURCES, .source_count = SOURCES};
    }
    if (st == TERRA_OK) {
        terra_cook_desc d = {.inputs = in, .input_count = (size_t)n, .output = out, .max_error = max_error,
                             .tile_size = 64, .frame = frame, .threads = 2, .compression = TERRA_COMPRESS_GZIP};
        st = terra_cook(&d, rep);
    }
    char keep[1024];
    snprintf(keep, sizeof keep, "%s", terra_last_error());
    for (int i = 0; i < 8 * SOURCES; i++) terra_raster_close(src[i]);
    if (st) terra_fail(st, "%s", keep);
    return st;
}

static terra_status check_files(const char *archive, const char *const *paths, int n, terra_cook_check_report *rep) {
    terra_raster_desc d[8];
    for (int i = 0; i < n; i++) d[i] = cook_desc(paths[i]), d[i].min_height = d[i].max_height = 0;
    const terra_cook_check_desc cd = {archive, d, n, NULL, false};
    return terra_cook_check(&cd, rep);
}

/* Every level's stated maximum at least the finer one's, and every tile's stated error finite and at
 * most `range` (a drawn height lies between vertex heights, a sample within the inputs' range: no
 * distance between them passes the range). */
static void check_stated(const char *archive, const terra_cook_report *rep, double range, const char *what) {
    for (int d = 1; d < rep->levels; d++)
        CHECK(rep->level[d].max_stated >= rep->level[d - 1].max_stated, "%s: depth %d states %g, depth %d %g", what, d,
              rep->level[d].max_stated, d - 1, rep->level[d - 1].max_stated);
    terra_archive *a = NULL;
    CHECK(terra_archive_open(archive, NULL, &a) == TERRA_OK, "%s", terra_last_error());
    if (!a) return;
    const uint64_t n = terra_archive_get_info(a)->tile_count;
    double most = 0;
    for (uint64_t i = 0; i < n; i++) {
        terra_archive_entry e;
        CHECK(terra_archive_entry_at(a, i, &e) == TERRA_OK);
        CHECK(isfinite(e.geometric_error) && e.geometric_error >= 0, "%s: entry %llu states %g", what,
              (unsigned long long)i, (double)e.geometric_error);
        most = fmax(most, e.geometric_error);
    }
    CHECK(n > 0 && most <= range, "%s: %llu tiles, the largest stated error %g m past the heights' range %g m", what,
          (unsigned long long)n, most, range);
    terra_archive_close(a);
}

/* ---- overlap ------------------------------------------------------------------------------------ */

/* The ground: smooth hills of up to ~300 m on 1000 m. */
static double hills(double lon, double lat, const double *k) {
    return 1000 + k[0] * sin(lon * k[1] + k[2]) + k[3] * cos(lat * k[4] + k[5]) + k[6] * sin((lon + lat) * k[7]);
}

typedef struct overlap {
    int w, h;
    double step, lon0, lat0, shift; /* B starts `shift` columns east of A, same rows */
    double offset;                  /* B's heights above the ground */
    double k[8];
    char a[256], b[256];
    double lo, hi;                  /* the heights' range */
} overlap;

static void make_overlap(overlap *o, unsigned long long *rng, double offset) {
    o->w = 40 + (int)(test_rand_u64(rng) % 40), o->h = 40 + (int)(test_rand_u64(rng) % 40);
    o->step = test_rand_u64(rng) % 2 ? 1.0 / 1200 : 1.0 / 2400;
    o->lon0 = -72 + test_rand_range(rng, 0, 1), o->lat0 = 44 + test_rand_range(rng, 0, 1);
    o->shift = (double)(o->w / 2);
    o->offset = offset;
    const double amp[3] = {test_rand_range(rng, 20, 150), test_rand_range(rng, 20, 100), test_rand_range(rng, 5, 50)};
    o->k[0] = amp[0], o->k[1] = test_rand_range(rng, 50, 400), o->k[2] = test_rand_range(rng, 0, 6);
    o->k[3] = amp[1], o->k[4] = test_rand_range(rng, 50, 400), o->k[5] = test_rand_range(rng, 0, 6);
    o->k[6] = amp[2], o->k[7] = test_rand_range(rng, 300, 900);
    float *v = malloc(sizeof(float) * (size_t)o->w * (size_t)o->h);
    o->lo = INFINITY, o->hi = -INFINITY;
    for (int which = 0; which < 2; which++) {
        const double west = o->lon0 + (which ? o->shift * o->step : 0), north = o->lat0;
        for (int r = 0; r < o->h; r++)
            for (int c = 0; c < o->w; c++) {
                const double z = hills(west + (c + 0.5) * o->step, north - (r + 0.5) * o->step, o->k) + (which ? offset : 0);
                v[(size_t)r * o->w + c] = (float)z;
                o->lo = fmin(o->lo, (float)z), o->hi = fmax(o->hi, (float)z);
            }
        const double gt[6] = {west, o->step, 0, north, 0, -o->step};
        write_tif(which ? o->b : o->a, o->w, o->h, gt, "EPSG:4326", NULL, v);
    }
    free(v);
}

/* input 0's height at longitude, latitude by bilinear interpolation (what the plane holds there),
 * NAN outside its sample centres (a sample from the edge inwards: the interior). */
static double overlap_height(const overlap *o, int which, double lon, double lat) {
    const double west = o->lon0 + (which ? o->shift * o->step : 0);
    const double fx = (lon - west) / o->step - 0.5, fy = (o->lat0 - lat) / o->step - 0.5;
    if (!(fx >= 1 && fx <= o->w - 2 && fy >= 1 && fy <= o->h - 2)) return NAN;
    const int i = (int)fx, j = (int)fy;
    const double tx = fx - i, ty = fy - j;
    double z[2][2];
    for (int b = 0; b < 2; b++)
        for (int a = 0; a < 2; a++)
            z[b][a] = (float)(hills(west + (i + a + 0.5) * o->step, o->lat0 - (j + b + 0.5) * o->step, o->k) +
                              (which ? o->offset : 0));
    return (1 - ty) * ((1 - tx) * z[0][0] + tx * z[0][1]) + ty * ((1 - tx) * z[1][0] + tx * z[1][1]);
}

/* Every finest vertex inside the winner's interior holds the winner's height (to quantization), and
 * at least one vertex is in the overlap. */
static void check_winner(const overlap *o, const char *archive, int zoom, int winner, const char *what) {
    terra_archive *a = NULL;
    CHECK(terra_archive_open(archive, NULL, &a) == TERRA_OK, "%s", terra_last_error());
    if (!a) return;
    const uint64_t n = terra_archive_get_info(a)->tile_count;
    const double side = 180.0 / (double)(1 << zoom);
    size_t in_overlap = 0, wrong = 0;
    double worst = 0;
    for (uint64_t i = 0; i < n; i++) {
        terra_archive_entry e;
        CHECK(terra_archive_entry_at(a, i, &e) == TERRA_OK);
        if (terra_tile_key_level(e.key) != zoom) continue;
        uint8_t *raw = NULL;
        size_t rn = 0;
        terra_qmesh q;
        CHECK(terra_archive_read_entry(a, &e, &raw, &rn) == TERRA_OK && terra_qmesh_decode_any(raw, rn, NULL, &q) == TERRA_OK,
              "%s", terra_last_error());
        const double x0 = -180 + terra_tile_key_x(e.key) * side, y0 = -90 + terra_tile_key_y(e.key) * side;
        const double lo = q.header.min_height, step_h = (q.header.max_height - lo) / 32767.0;
        for (uint32_t v = 0; v < q.vertex_count; v++) {
            const double lon = x0 + side * q.u[v] / 32767.0, lat = y0 + side * q.v[v] / 32767.0;
            const double hw = overlap_height(o, winner, lon, lat), hl = overlap_height(o, !winner, lon, lat);
            if (isnan(hw) || isnan(hl)) continue;
            in_overlap++;
            const double d = fabs(lo + step_h * q.h[v] - hw);
            worst = fmax(worst, d);
            wrong += d > 0.5;
        }
        terra_qmesh_free(&q);
        terra_free(raw);
    }
    CHECK(in_overlap > 20 && wrong == 0, "%s: %zu of %zu vertices in the overlap off the winner's ground (by up to %g m)",
          what, wrong, in_overlap, worst);
    terra_archive_close(a);
}

/* Two inputs of one step overlapping by half, the second raised 500 m (or not): the first given is
 * the ground where it has data (and the second when given first), every stated error holds against
 * both inputs' own samples by the same rule, no level states less than a finer one, none passes
 * the heights' range. */
static void test_overlap_synthetic(void) {
    for (unsigned long long seed = 1; seed <= 4; seed++) {
        unsigned long long rng = seed;
        overlap o;
        tmp("ov_a.tif", o.a, sizeof o.a), tmp("ov_b.tif", o.b, sizeof o.b);
        make_overlap(&o, &rng, seed % 2 ? 500 : 0);
        char out[256], what[128];
        tmp("ov.terra", out, sizeof out);
        for (int order = 0; order < 2; order++) {
            const char *paths[2] = {order ? o.b : o.a, order ? o.a : o.b};
            snprintf(what, sizeof what, "seed %llu offset %g %s first", seed, o.offset, order ? "B" : "A");
            terra_cook_report rep;
            terra_status st = cook_files(paths, 2, TERRA_COOK_FRAME_AUTO, 1.0 + (double)(seed % 3), out, &rep);
            CHECK(st == TERRA_OK, "%s: %s", what, terra_last_error());
            if (st) continue;
            check_stated(out, &rep, o.hi - o.lo, what);
            terra_cook_check_report cr;
            CHECK(check_files(out, paths, 2, &cr) == TERRA_OK, "%s: %s", what, terra_last_error());
            CHECK(cr.level[cr.min_level].samples > 0);
            if (o.offset != 0) check_winner(&o, out, rep.grid.depth, order, what);
        }
        unlink(o.a), unlink(o.b), unlink(out);
    }
}

/* Two windows of the SRTM cell overlapping by half, one raised 500 m (GDALTranslate -srcwin), and
 * the same without the offset: terra check agrees with every stated error, levels in order. */
static void test_overlap_srtm(void) {
    if (!have_shared("overlapping SRTM windows")) return;
    char hgt[512], a[256], b[256], out[256];
    shared_path(HGT, hgt, sizeof hgt);
    tmp("srtm_a.tif", a, sizeof a), tmp("srtm_b.tif", b, sizeof b), tmp("srtm.terra", out, sizeof out);
    GDALAllRegister();
    GDALDatasetH src = GDALOpen(hgt, GA_ReadOnly);
    CHECK(src != NULL);
    if (!src) return;
    for (int raised = 1; raised >= 0; raised--) {
        const char *win[2][4] = {{"300", "300", "240", "240"}, {"420", "300", "240", "240"}};
        for (int k = 0; k < 2; k++) {
            char *args[] = {"-srcwin", (char *)win[k][0], (char *)win[k][1], (char *)win[k][2], (char *)win[k][3],
                            "-ot", "Float32", "-of", "GTiff", NULL};
            GDALTranslateOptions *opt = GDALTranslateOptionsNew(args, NULL);
            GDALDatasetH d = GDALTranslate(k ? b : a, src, opt, NULL);
            GDALTranslateOptionsFree(opt);
            CHECK(d != NULL);
            if (k && raised && d) {
                float *v = malloc(sizeof(float) * 240 * 240);
                GDALRasterBandH band = GDALGetRasterBand(d, 1);
                CHECK(GDALRasterIO(band, GF_Read, 0, 0, 240, 240, v, 240, 240, GDT_Float32, 0, 0) == CE_None);
                for (int i = 0; i < 240 * 240; i++) v[i] += 500;
                CHECK(GDALRasterIO(band, GF_Write, 0, 0, 240, 240, v, 240, 240, GDT_Float32, 0, 0) == CE_None);
                free(v);
            }
            if (d) GDALClose(d);
        }
        const char *paths[2] = {a, b};
        terra_cook_report rep;
        terra_status st = cook_files(paths, 2, TERRA_COOK_FRAME_AUTO, 5, out, &rep);
        CHECK(st == TERRA_OK, "%s", terra_last_error());
        if (st) continue;
        /* the cell's heights: 115..1908 m, +500 */
        check_stated(out, &rep, 1908 + 500 - 115, raised ? "SRTM raised" : "SRTM");
        terra_cook_check_report cr;
        CHECK(check_files(out, paths, 2, &cr) == TERRA_OK, "%s: %s", raised ? "SRTM raised" : "SRTM", terra_last_error());
    }
    GDALClose(src);
    unlink(a), unlink(b), unlink(out);
}

/* ---- NaN no-data ------------------------------------------------------------------------------- */

/* Tiles of two archives byte for byte. */
static void same_tiles(const char *x, const char *y, const char *what) {
    terra_archive *a = NULL, *b = NULL;
    CHECK(terra_archive_open(x, NULL, &a) == TERRA_OK && terra_archive_open(y, NULL, &b) == TERRA_OK, "%s",
          terra_last_error());
    if (a && b) {
        const uint64_t n = terra_archive_get_info(a)->tile_count;
        CHECK(n > 0 && n == terra_archive_get_info(b)->tile_count, "%s: %llu tiles against %llu", what,
              (unsigned long long)n, (unsigned long long)terra_archive_get_info(b)->tile_count);
        size_t differ = 0;
        for (uint64_t i = 0; i < n && i < terra_archive_get_info(b)->tile_count; i++) {
            terra_archive_entry e, f;
            uint8_t *p = NULL, *q = NULL;
            size_t pn = 0, qn = 0;
            CHECK(terra_archive_entry_at(a, i, &e) == TERRA_OK && terra_archive_entry_at(b, i, &f) == TERRA_OK);
            CHECK(terra_archive_read_entry(a, &e, &p, &pn) == TERRA_OK && terra_archive_read_entry(b, &f, &q, &qn) == TERRA_OK);
            differ += e.key != f.key || e.geometric_error != f.geometric_error || pn != qn || (p && q && memcmp(p, q, pn));
            terra_free(p), terra_free(q);
        }
        CHECK(differ == 0, "%s: %zu tiles differ", what, differ);
    }
    terra_archive_close(a), terra_archive_close(b);
}

/* Distance in samples from sample coordinate x (column or row from the raster's first sample
 * centre at `first` plane units, `per` plane units a sample) to the nearest line of tiles `side`
 * plane units apart. */
static double to_tile_line(double x, double first, double per, double side) {
    const double p = first + x * per, m = fmod(p, side);
    return fmin(fabs(m), fabs(side - fabs(m))) / fabs(per);
}

/* A float raster with holes: NaN declared as no-data (GDAL_NODATA "nan"), NaN undeclared, and -9999
 * declared cook to the very same tiles, with the holes kept (terra check: none covered). The holes
 * stay clear of the finest tiles' sides (one across a side: T-junctions, NaN or -9999 alike; see
 * the report of issue 37). */
static void test_nan_nodata(void) {
    const int W = 96, H = 80, T = 64;
    float *v = malloc(sizeof(float) * W * H);
    unsigned long long rng = 7;
    for (int frame = 0; frame < 2; frame++) {
        const double step = 1.0 / 1200;
        const double gt_geo[6] = {-71.5, step, 0, 44.5, 0, -step}, gt_loc[6] = {0, 1, 0, 0, 0, 1};
        const double *gt = frame ? gt_loc : gt_geo;
        const char *crs = frame ? NULL : "EPSG:4326";
        /* the finest tiles' sides: every T samples locally; geographically every 180 / 2^z degrees */
        int z = 0;
        while (180.0 / ldexp(T, z) > step) z++;
        const double side = frame ? T : 180.0 / ldexp(1, z);
        const double first_x = frame ? 0 : 180 + gt[0] + 0.5 * step, first_y = frame ? 0 : 90 + gt[3] - 0.5 * step;
        /* hills, and random round holes */
        double hc[4][3];
        for (int k = 0; k < 4; k++)
            do {
                hc[k][0] = test_rand_range(&rng, 5, W - 5), hc[k][1] = test_rand_range(&rng, 5, H - 5),
                hc[k][2] = test_rand_range(&rng, 2, 7);
            } while (to_tile_line(hc[k][0], first_x, frame ? 1 : step, side) < hc[k][2] + 2 ||
                     to_tile_line(hc[k][1], first_y, frame ? 1 : -step, side) < hc[k][2] + 2);
        char path[3][256], out[3][256];
        const char *tag[3] = {"nan", "undeclared", "minus9999"};
        for (int variant = 0; variant < 3; variant++) {
            for (int r = 0; r < H; r++)
                for (int c = 0; c < W; c++) {
                    bool hole = false;
                    for (int k = 0; k < 4; k++) hole |= hypot(c - hc[k][0], r - hc[k][1]) < hc[k][2];
                    v[r * W + c] = hole ? (variant == 2 ? -9999.0f : NAN) : (float)(300 + 40 * sin(c * 0.15) * cos(r * 0.11));
                }
            char name[64];
            snprintf(name, sizeof name, "%s_%d.tif", tag[variant], frame);
            tmp(name, path[variant], sizeof path[variant]);
            snprintf(name, sizeof name, "%s_%d.terra", tag[variant], frame);
            tmp(name, out[variant], sizeof out[variant]);
            const double nan_nd = NAN, minus = -9999;
            write_tif(path[variant], W, H, gt, crs, variant == 0 ? &nan_nd : variant == 2 ? &minus : NULL, v);
            const char *p[1] = {path[variant]};
            terra_cook_report rep;
            CHECK(cook_files(p, 1, frame ? TERRA_COOK_FRAME_LOCAL : TERRA_COOK_FRAME_AUTO, 1, out[variant], &rep) == TERRA_OK,
                  "%s: %s", tag[variant], terra_last_error());
            terra_cook_check_report cr;
            CHECK(check_files(out[variant], p, 1, &cr) == TERRA_OK && cr.holes > 0, "%s: %s", tag[variant],
                  terra_last_error());
            CHECK(rep.grid.frame == (frame ? TERRA_FRAME_LOCAL : TERRA_FRAME_GEOGRAPHIC));
        }
        same_tiles(out[0], out[2], frame ? "local: NaN against -9999" : "geographic: NaN against -9999");
        same_tiles(out[1], out[2], frame ? "local: undeclared NaN against -9999" : "geographic: undeclared NaN");
        for (int variant = 0; variant < 3; variant++) unlink(path[variant]), unlink(out[variant]);
    }
    free(v);
}

/* ---- heights past the bound --------------------------------------------------------------------- */

/* 0 and 1e30 alternating, one 3.4e38 among ordinary heights, and heights a little past either end of
 * the bound are refused, read in windows and whole, naming the file, the sample (column, row) and
 * its longitude and latitude; heights at the bound itself are taken. terra_cook refuses a raster in
 * memory the same way, and a refused cook leaves no archive. */
static void test_height_bound(void) {
    const int W = 32, H = 24;
    float *v = malloc(sizeof(float) * W * H);
    const double gt[6] = {-72, 0.001, 0, 45, 0, -0.001};
    char path[256], out[256];
    tmp("bound.tif", path, sizeof path), tmp("bound.terra", out, sizeof out);
    unsigned long long rng = 3;
    typedef struct bad_case {
        float value;
        bool alternate; /* 0 and value alternating, else one sample at a random place */
        bool refused;
    } bad_case;
    const bad_case cases[] = {{1e30f, true, true},     {3.4e38f, false, true},    {10000.5f, false, true},
                              {-12000.5f, false, true}, {10000.0f, false, false}, {-12000.0f, false, false},
                              {-1e30f, false, true}};
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        const bad_case *b = &cases[k];
        int bc = (int)(test_rand_u64(&rng) % W), br = (int)(test_rand_u64(&rng) % H);
        for (int r = 0; r < H; r++)
            for (int c = 0; c < W; c++) v[r * W + c] = (float)(200 + 10 * sin(c * 0.3 + r * 0.2));
        if (b->alternate) {
            for (int i = 0; i < W * H; i++) v[i] = (i % W + i / W) % 2 ? b->value : 0;
            bc = 1, br = 0;
        } else {
            v[br * W + bc] = b->value;
        }
        write_tif(path, W, H, gt, "EPSG:4326", NULL, v);
        char col[64], lon[64];
        snprintf(col, sizeof col, "column %d, row %d", bc, br);
        snprintf(lon, sizeof lon, "lon %.9g, lat %.9g", -72 + (bc + 0.5) * 0.001, 45 - (br + 0.5) * 0.001);
        /* windows */
        const terra_raster_desc d = cook_desc(path);
        terra_raster_source *s = NULL;
        CHECK(terra_raster_open(&d, NULL, &s) == TERRA_OK, "%s", terra_last_error());
        float *got = malloc(sizeof(float) * W * H);
        terra_status st = s ? terra_raster_read_window(s, 0, 0, W, H, got) : TERRA_E_INVALID;
        terra_raster_close(s);
        if (b->refused)
            CHECK(st == TERRA_E_CORRUPT && says(path) && says(col) && says(lon) && says("-12000..10000"),
                  "%g window: %s", (double)b->value, terra_last_error());
        else CHECK(st == TERRA_OK, "%g window: %s", (double)b->value, terra_last_error());
        /* whole, as terra check and terra mesh read; without a bound 1e30 is a height */
        terra_raster r;
        st = terra_raster_read_isolated(&d, NULL, &r);
        if (b->refused) CHECK(st == TERRA_E_CORRUPT && says(path) && says(col), "%g whole: %s", (double)b->value, terra_last_error());
        else CHECK(st == TERRA_OK, "%g whole: %s", (double)b->value, terra_last_error());
        terra_raster_free(&r);
        terra_raster_desc plain = {.path = path};
        CHECK(terra_raster_read_isolated(&plain, NULL, &r) == TERRA_OK, "unbounded: %s", terra_last_error());
        /* the cook: from the file, and from a raster in memory */
        const char *p[1] = {path};
        unlink(out);
        st = cook_files(p, 1, TERRA_COOK_FRAME_AUTO, 1, out, NULL);
        /* (which of the alternating samples the workers meet first varies) */
        if (b->refused)
            CHECK(st == TERRA_E_CORRUPT && says(path) && says(b->alternate ? "m at sample (column " : col) &&
                      says("lat") && access(out, F_OK) != 0,
                  "%g cook: %s", (double)b->value, terra_last_error());
        else CHECK(st == TERRA_OK, "%g cook: %s", (double)b->value, terra_last_error());
        const terra_cook_input in = {.path = path, .raster = &r};
        terra_cook_desc cd = {.inputs = &in, .input_count = 1, .output = out, .frame = TERRA_COOK_FRAME_LOCAL,
                              .tile_size = 16, .threads = 1};
        unlink(out);
        st = terra_cook(&cd, NULL);
        if (b->refused)
            CHECK(st == TERRA_E_CORRUPT && says(path) && says(col) && access(out, F_OK) != 0, "%g in memory: %s",
                  (double)b->value, terra_last_error());
        else CHECK(st == TERRA_OK, "%g in memory: %s", (double)b->value, terra_last_error());
        terra_raster_free(&r);
        free(got);
    }
    unlink(path), unlink(out);
    free(v);
}

/* ---- coordinate systems ------------------------------------------------------------------------ */

/* An unknown PROJ string is PROJ's own complaint, naming the file; Mars (an IAU CRS) and a sphere of
 * Mars' radius are another body: refused on the globe by name, cooked locally in that body's metres;
 * Earth datums of other ellipsoids (ED50's Hayford, a 6371 km sphere) are the Earth. */
static void test_crs(void) {
    const int W = 24, H = 20;
    float *v = malloc(sizeof(float) * W * H);
    for (int i = 0; i < W * H; i++) v[i] = (float)(100 + i % 7);
    char tif[256], vrt[256], out[256];
    tmp("crs.tif", tif, sizeof tif), tmp("crs.vrt", vrt, sizeof vrt), tmp("crs.terra", out, sizeof out);
    const double gt[6] = {10, 0.01, 0, 5, 0, -0.01};
    write_tif(tif, W, H, gt, NULL, NULL, v);
    terra_raster_source *s = NULL;
    terra_raster_desc d = cook_desc(vrt);

    write_vrt(vrt, tif, W, H, gt, "+proj=foobar +datum=WGS84");
    CHECK(terra_raster_open(&d, NULL, &s) == TERRA_E_FORMAT && !s && says(vrt) && says("Unknown projection") &&
              !says("out of memory"),
          "%s", terra_last_error());

    const char *mars[2] = {"IAU_2015:49900", "+proj=longlat +R=3396190 +no_defs"};
    for (int k = 0; k < 2; k++) {
        write_vrt(vrt, tif, W, H, gt, mars[k]);
        CHECK(terra_raster_open(&d, NULL, &s) == TERRA_OK, "%s: %s", mars[k], terra_last_error());
        if (!s) continue;
        const terra_raster_info *in = terra_raster_source_info(s);
        const double m_per_deg = 3396190.0 * 3.14159265358979323846 / 180;
        CHECK(in->off_earth && !in->has_lonlat && fabs(in->semi_major_m - 3396190) < 1, "%s: off %d lonlat %d a %g",
              mars[k], in->off_earth, in->has_lonlat, in->semi_major_m);
        CHECK(fabs(in->spacing_y - 0.01 * m_per_deg) < 1e-6 * in->spacing_y, "%s: %g m a sample", mars[k], in->spacing_y);
        terra_raster_close(s), s = NULL;
        const char *p[1] = {vrt};
        for (int f = 0; f < 3; f++) {
            const terra_cook_frame fr[3] = {TERRA_COOK_FRAME_AUTO, TERRA_COOK_FRAME_GEOGRAPHIC, TERRA_COOK_FRAME_LOCAL};
            terra_cook_report rep;
            unlink(out);
            terra_status st = cook_files(p, 1, fr[f], 1, out, &rep);
            if (fr[f] == TERRA_COOK_FRAME_LOCAL)
                CHECK(st == TERRA_OK && fabs(rep.grid.unit[1] - 0.01 * m_per_deg) < 1e-6 * rep.grid.unit[1], "%s local: %s",
                      mars[k], terra_last_error());
            else
                CHECK(st == TERRA_E_UNSUPPORTED && says(vrt) && says("not the Earth") && says("--frame local") &&
                          access(out, F_OK) != 0,
                      "%s frame %d: %s", mars[k], f, terra_last_error());
        }
    }
    const char *earth[2] = {"EPSG:4230", "+proj=longlat +R=6371000 +no_defs"};
    for (int k = 0; k < 2; k++) {
        write_vrt(vrt, tif, W, H, gt, earth[k]);
        CHECK(terra_raster_open(&d, NULL, &s) == TERRA_OK, "%s: %s", earth[k], terra_last_error());
        if (s) CHECK(!terra_raster_source_info(s)->off_earth, "%s", earth[k]);
        terra_raster_close(s), s = NULL;
    }
    unlink(tif), unlink(vrt), unlink(out);
    free(v);
}

/* A raster in degrees whose geotransform puts it at longitude 1e30, or steps it 1e300 a sample, is
 * refused naming the file, and so is the cook of it. */
static void test_far_coordinates(void) {
    const int W = 16, H = 16;
    float v[16 * 16];
    for (int i = 0; i < W * H; i++) v[i] = (float)(50 + i % 5);
    char tif[256], out[256];
    tmp("far.tif", tif, sizeof tif), tmp("far.terra", out, sizeof out);
    const double gts[3][6] = {{1e30, 0.001, 0, 45, 0, -0.001}, {-72, 0.001, 0, 1e30, 0, -0.001}, {-72, 1e300, 0, 45, 0, -1e300}};
    for (int k = 0; k < 3; k++) {
        write_tif(tif, W, H, gts[k], "EPSG:4326", NULL, v);
        const terra_raster_desc d = cook_desc(tif);
        terra_raster_source *s = NULL;
        CHECK(terra_raster_open(&d, NULL, &s) != TERRA_OK && !s && says(tif), "case %d: %s", k, terra_last_error());
        const char *p[1] = {tif};
        CHECK(cook_files(p, 1, TERRA_COOK_FRAME_AUTO, 1, out, NULL) != TERRA_OK && says(tif) && access(out, F_OK) != 0,
              "case %d cook: %s", k, terra_last_error());
    }
    unlink(tif);
}

int main(void) {
    setenv("GDAL_PAM_ENABLED", "NO", 1);
    RUN(test_overlap_synthetic);
    RUN(test_overlap_srtm);
    RUN(test_nan_nodata);
    RUN(test_height_bound);
    RUN(test_crs);
    RUN(test_far_coordinates);
    return finish();
}
