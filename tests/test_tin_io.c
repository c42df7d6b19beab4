/* tin input and output: rasters through GDAL (GeoTIFF, ASCII grid, .hgt, 16-bit PNG, Terrain-RGB,
 * Terrarium), no-data as holes, spacing from georeferencing; OBJ / PLY / STL writers. */
#include "check.h"
#include "terra/raster.h"
#include "terra/tin.h"

#include <cpl_conv.h>
#include <gdal.h>
#include <math.h>
#include <string.h>
#include <unistd.h>

static const char *tmp_path(const char *name, char *buf, size_t n) {
    snprintf(buf, n, "tin_io_%ld_%s", (long)getpid(), name);
    return buf;
}

static long file_size(const char *p) {
    FILE *f = fopen(p, "rb");
    if (!f) return -1;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fclose(f);
    return n;
}

static void test_geotiff_nodata_georef(void) {
    char path[256];
    tmp_path("a.tif", path, sizeof path);
    GDALAllRegister();
    GDALDriverH drv = GDALGetDriverByName("GTiff");
    CHECK(drv != NULL);
    if (!drv) return;
    GDALDatasetH ds = GDALCreate(drv, path, 40, 30, 1, GDT_Int16, NULL);
    double gt[6] = {500000, 2, 0, 4000000, 0, -2};
    GDALSetGeoTransform(ds, gt);
    GDALRasterBandH b = GDALGetRasterBand(ds, 1);
    GDALSetRasterNoDataValue(b, -9999);
    int16_t v[40 * 30];
    for (int i = 0; i < 40 * 30; i++) v[i] = (int16_t)(100 + (i % 40) * 3 + (i / 40));
    for (int y = 10; y < 14; y++)
        for (int x = 20; x < 25; x++) v[y * 40 + x] = -9999;
    CHECK(GDALRasterIO(b, GF_Write, 0, 0, 40, 30, v, 40, 30, GDT_Int16, 0, 0) == CE_None);
    GDALClose(ds);

    terra_raster r;
    terra_raster_desc d = {0};
    d.path = path;
    CHECK(terra_raster_read(&d, &r) == TERRA_OK, "%s", terra_last_error());
    CHECK(r.width == 40 && r.height == 30);
    CHECK(r.nodata_count == 20, "%zu", r.nodata_count);
    CHECK(isnan(r.heights[11 * 40 + 21]) && r.heights[0] == 100);
    CHECK(r.georeferenced && r.spacing_x == 2 && r.spacing_y == 2);
    /* Mesh it: no triangle covers the hole, every other sample within the bound. */
    terra_tin_desc td = {0};
    td.width = r.width, td.height = r.height, td.heights = r.heights, td.max_error = 0.5;
    terra_tin_mesh m;
    CHECK(terra_tin_build(&td, &m) == TERRA_OK);
    terra_tin_level *lv = &m.levels[0];
    terra_tin_check_result cr;
    terra_tin_check(r.heights, r.width, r.height, m.xy, m.z, lv->vertex_count, lv->triangles, lv->triangle_count, NULL,
                    &cr);
    CHECK(cr.max_error <= 0.5 && cr.holes_covered == 0 && cr.uncovered == 0, "%g %zu %zu", cr.max_error,
          cr.holes_covered, cr.uncovered);
    terra_tin_mesh_free(&m);
    terra_raster_free(&r);
    /* A missing band. */
    d.band = 2;
    CHECK(terra_raster_read(&d, &r) == TERRA_E_FORMAT);
    CHECK(strstr(terra_last_error(), "missing band") && strstr(terra_last_error(), path), "%s", terra_last_error());
    /* Too large for the limit. */
    d.band = 0, d.max_side = 32;
    CHECK(terra_raster_read(&d, &r) == TERRA_E_UNSUPPORTED);
    CHECK(strstr(terra_last_error(), "supported size") != NULL, "%s", terra_last_error());
    remove(path);
}

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    if (!f) return;
    fputs(text, f);
    fclose(f);
}

static void test_ascii_grid_and_bad_values(void) {
    char path[256];
    tmp_path("g.asc", path, sizeof path);
    write_text(path, "ncols 4\nnrows 3\nxllcorner 0\nyllcorner 0\ncellsize 5\nNODATA_value -1\n"
                     "1 2 3 4\n5 -1 7 8\n9 10 11 12\n");
    terra_raster r;
    terra_raster_desc d = {0};
    d.path = path;
    d.z_scale = 2;
    CHECK(terra_raster_read(&d, &r) == TERRA_OK, "%s", terra_last_error());
    if (r.heights) {
        CHECK(r.width == 4 && r.height == 3 && r.spacing_x == 5);
        CHECK(r.heights[0] == 2 && isnan(r.heights[5]) && r.heights[11] == 24);
        terra_raster_free(&r);
    }
    /* All no-data. */
    write_text(path, "ncols 2\nnrows 2\nxllcorner 0\nyllcorner 0\ncellsize 1\nNODATA_value -1\n-1 -1\n-1 -1\n");
    CHECK(terra_raster_read(&d, &r) == TERRA_E_SOURCE);
    CHECK(strstr(terra_last_error(), "no-data") != NULL, "%s", terra_last_error());
    remove(path);
    /* NaN heights that are not declared no-data. */
    char tif[256];
    tmp_path("nan.tif", tif, sizeof tif);
    GDALAllRegister();
    GDALDatasetH ds = GDALCreate(GDALGetDriverByName("GTiff"), tif, 3, 3, 1, GDT_Float32, NULL);
    float v[9] = {1, 2, 3, 4, NAN, 6, 7, 8, 9};
    CHECK(GDALRasterIO(GDALGetRasterBand(ds, 1), GF_Write, 0, 0, 3, 3, v, 3, 3, GDT_Float32, 0, 0) == CE_None);
    GDALClose(ds);
    d.path = tif, d.z_scale = 0;
    CHECK(terra_raster_read(&d, &r) == TERRA_E_CORRUPT);
    CHECK(strstr(terra_last_error(), "NaN") != NULL, "%s", terra_last_error());
    ds = GDALCreate(GDALGetDriverByName("GTiff"), tif, 3, 3, 1, GDT_Float32, NULL);
    v[4] = INFINITY;
    CHECK(GDALRasterIO(GDALGetRasterBand(ds, 1), GF_Write, 0, 0, 3, 3, v, 3, 3, GDT_Float32, 0, 0) == CE_None);
    GDALClose(ds);
    CHECK(terra_raster_read(&d, &r) == TERRA_E_CORRUPT);
    CHECK(strstr(terra_last_error(), "infinite") != NULL, "%s", terra_last_error());
    remove(tif);
    /* Unreadable. */
    d.path = "/nonexistent/dem.tif";
    CHECK(terra_raster_read(&d, &r) == TERRA_E_FORMAT);
    CHECK(strstr(terra_last_error(), "/nonexistent/dem.tif") != NULL);
}

static void test_real_formats(void) {
    if (!have_shared("test_real_formats")) return;
    char p[1024];
    terra_raster r;
    terra_raster_desc d = {0};
    /* SRTM .hgt: georeferenced in degrees, void samples are holes. */
    d.path = shared_path("data/dem/N44W072.hgt", p, sizeof p);
    CHECK(terra_raster_read(&d, &r) == TERRA_OK, "%s", terra_last_error());
    if (r.heights) {
        CHECK(r.width == 1201 && r.height == 1201);
        CHECK(r.georeferenced && r.spacing_x > 60 && r.spacing_x < 70 && r.spacing_y > 90 && r.spacing_y < 95,
              "%g %g", r.spacing_x, r.spacing_y);
        CHECK(r.min_z >= 100 && r.max_z <= 1920, "%g %g", r.min_z, r.max_z);
        terra_raster_free(&r);
    }
    /* 16-bit grey PNG in decimetres. */
    d.path = shared_path("data/dem/ps_height_1k.png", p, sizeof p);
    d.z_scale = 0.1;
    CHECK(terra_raster_read(&d, &r) == TERRA_OK, "%s", terra_last_error());
    if (r.heights) {
        CHECK(r.width == 1025 && fabs(r.max_z - 4379.8) < 0.05, "%g", r.max_z);
        terra_raster_free(&r);
    }
    /* Terrarium. */
    d.path = shared_path("data/dem/grand-canyon-terrarium.png", p, sizeof p);
    d.z_scale = 0, d.encoding = TERRA_RASTER_TERRARIUM;
    CHECK(terra_raster_read(&d, &r) == TERRA_OK, "%s", terra_last_error());
    if (r.heights) {
        CHECK(fabs(r.min_z - 715.2) < 0.1 && fabs(r.max_z - 2489.0) < 0.1, "%g %g", r.min_z, r.max_z);
        terra_raster_free(&r);
    }
    /* Terrain-RGB. */
    d.path = shared_path("data/dem/fuji.png", p, sizeof p);
    d.encoding = TERRA_RASTER_TERRAIN_RGB;
    CHECK(terra_raster_read(&d, &r) == TERRA_OK, "%s", terra_last_error());
    if (r.heights) {
        CHECK(fabs(r.min_z - 13.7) < 0.05 && fabs(r.max_z - 3751.0) < 0.05, "%g %g", r.min_z, r.max_z);
        terra_raster_free(&r);
    }
    /* An RGB encoding on a one-band file: missing band. */
    d.path = shared_path("data/dem/sthelens_10m.png", p, sizeof p);
    CHECK(terra_raster_read(&d, &r) == TERRA_E_FORMAT);
    CHECK(strstr(terra_last_error(), "missing band") != NULL, "%s", terra_last_error());
}

static void test_writers(void) {
    const double xyz[12] = {0, 0, 1, 1, 0, 2, 0, 1, 3, 1, 1, 4};
    const uint32_t tri[6] = {0, 1, 2, 2, 1, 3};
    const float nrm[12] = {0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 1};
    char obj[256], ply[256], stl[256], bad[256];
    tmp_path("m.obj", obj, sizeof obj);
    tmp_path("m.ply", ply, sizeof ply);
    tmp_path("m.stl", stl, sizeof stl);
    tmp_path("m.xyz", bad, sizeof bad);
    terra_mesh_out o = {0};
    o.path = obj, o.vertex_count = 4, o.xyz = xyz, o.normals = nrm, o.triangle_count = 2, o.triangles = tri;
    o.comment = "test";
    CHECK(terra_io_write_mesh(&o) == TERRA_OK, "%s", terra_last_error());
    double *rx;
    uint32_t *rt;
    size_t nv, nt;
    CHECK(terra_io_read_obj(obj, &rx, &nv, &rt, &nt) == TERRA_OK);
    if (nv == 4 && nt == 2) {
        CHECK(!memcmp(rx, xyz, sizeof xyz) && !memcmp(rt, tri, sizeof tri));
        terra_free(rx);
        terra_free(rt);
    } else {
        CHECK(0, "read back %zu vertices %zu triangles", nv, nt);
    }
    o.path = ply;
    CHECK(terra_io_write_mesh(&o) == TERRA_OK);
    o.path = stl, o.normals = NULL;
    CHECK(terra_io_write_mesh(&o) == TERRA_OK);
    CHECK(file_size(stl) == 84 + 2 * 50, "%ld", file_size(stl));
    long ps = file_size(ply);
    CHECK(ps > 4 * 36 + 2 * 13 && ps < 4 * 36 + 2 * 13 + 400, "%ld", ps);
    o.path = bad;
    CHECK(terra_io_write_mesh(&o) == TERRA_E_UNSUPPORTED);
    CHECK(file_size(bad) < 0);
    /* A bad index leaves nothing behind. */
    const uint32_t badtri[3] = {0, 1, 9};
    terra_mesh_out o2 = {0};
    o2.path = obj, o2.vertex_count = 4, o2.xyz = xyz, o2.triangle_count = 1, o2.triangles = badtri;
    remove(obj);
    CHECK(terra_io_write_mesh(&o2) == TERRA_E_INVALID);
    CHECK(file_size(obj) < 0);
    /* Unwritable place. */
    /* Positions from sample coordinates through an affine map, triangles turned over. */
    const int32_t sxy[8] = {0, 0, 1, 0, 0, 1, 1, 1};
    const float sz[4] = {1, 2, 3, NAN};
    terra_mesh_out o3 = {0};
    o3.path = obj, o3.vertex_count = 4, o3.xy = sxy, o3.z = sz, o3.triangle_count = 2, o3.triangles = tri;
    const double aff[6] = {100, 2, 0, 50, 0, -2};
    memcpy(o3.affine, aff, sizeof aff);
    o3.flip = true;
    CHECK(terra_io_write_mesh(&o3) == TERRA_OK);
    if (terra_io_read_obj(obj, &rx, &nv, &rt, &nt) == TERRA_OK) {
        CHECK(nv == 4 && rx[3] == 102 && rx[4] == 50 && rx[7] == 48 && rx[11] == 0, "%g %g %g %g", rx[3], rx[4], rx[7], rx[11]);
        CHECK(nt == 2 && rt[0] == 0 && rt[1] == 2 && rt[2] == 1);
        terra_free(rx);
        terra_free(rt);
    }
    o.path = "/nonexistent/dir/m.obj";
    CHECK(terra_io_write_mesh(&o) == TERRA_E_IO);
    remove(ply);
    remove(stl);
}

/* Through the terra-raster child process: the same raster, bit for bit, and the same errors. */
static void test_isolated_read_equals_in_process(void) {
    if (!have_shared("test_isolated_read_equals_in_process")) return;
    char p[1024], bad[256], msg[1024];
    struct {
        const char *file;
        terra_raster_encoding enc;
        double z_scale;
    } cases[] = {{"data/dem/N44W072.hgt", TERRA_RASTER_PLAIN, 0}, {"data/dem/sthelens_10m.png", TERRA_RASTER_PLAIN, 0.1},
                 {"data/dem/fuji.png", TERRA_RASTER_TERRAIN_RGB, 0}, {"data/dem/sthelens_10m.png", TERRA_RASTER_TERRAIN_RGB, 0}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        terra_raster_desc d = {.path = shared_path(cases[c].file, p, sizeof p), .encoding = cases[c].enc,
                               .z_scale = cases[c].z_scale};
        terra_raster a, b;
        terra_status sa = terra_raster_read(&d, &a);
        snprintf(msg, sizeof msg, "%s", terra_last_error());
        terra_status sb = terra_raster_read_isolated(&d, NULL, &b);
        CHECK(sa == sb, "%s: status %d in process, %d isolated (%s)", cases[c].file, sa, sb, terra_last_error());
        if (sa != TERRA_OK) {
            CHECK(strcmp(msg, terra_last_error()) == 0, "messages differ: '%s' vs '%s'", msg, terra_last_error());
            continue;
        }
        if (sb != TERRA_OK) {
            terra_raster_free(&a);
            continue;
        }
        const size_t n = (size_t)a.width * (size_t)a.height;
        CHECK(a.width == b.width && a.height == b.height && a.nodata_count == b.nodata_count &&
                  a.georeferenced == b.georeferenced && memcmp(a.geo, b.geo, sizeof a.geo) == 0 &&
                  a.spacing_x == b.spacing_x && a.spacing_y == b.spacing_y && a.min_z == b.min_z && a.max_z == b.max_z,
              "%s: fields differ", cases[c].file);
        CHECK(memcmp(a.heights, b.heights, n * sizeof(float)) == 0, "%s: heights differ", cases[c].file);
        terra_raster_free(&a);
        terra_raster_free(&b);
    }
    /* A file that is not a raster: the reader's message, naming it, and no heights. */
    tmp_path("junk.tif", bad, sizeof bad);
    write_text(bad, "not a raster\n");
    terra_raster r;
    CHECK(terra_raster_read_isolated(&(terra_raster_desc){.path = bad}, NULL, &r) == TERRA_E_FORMAT && !r.heights);
    CHECK(strstr(terra_last_error(), bad) != NULL, "%s", terra_last_error());
    remove(bad);
    /* No reader where it is said to be: a clear error. */
    CHECK(terra_raster_read_isolated(&(terra_raster_desc){.path = bad}, "/nonexistent/terra-raster", &r) ==
          TERRA_E_UNSUPPORTED);
    CHECK(strstr(terra_last_error(), "/nonexistent/terra-raster") != NULL, "%s", terra_last_error());
}

int main(void) {
    RUN(test_geotiff_nodata_georef);
    RUN(test_ascii_grid_and_bad_values);
    RUN(test_real_formats);
    RUN(test_writers);
    RUN(test_isolated_read_equals_in_process);
    return finish();
}
