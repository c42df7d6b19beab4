/* terra-raster: reads one elevation raster through GDAL (terra_raster_read) and writes it to
 * standard output for terra_raster_read_isolated, so the program that meshes never maps GDAL and
 * its libraries. Not meant to be run by hand; see io/raster_client.c for the protocol:
 *   terra-raster PATH ENCODING BAND Z_SCALE SPACING_M MAX_SIDE MAX_BYTES NAN_IS_NODATA MIN_HEIGHT MAX_HEIGHT
 * stdout: a terra_raster_wire header, then width*height float heights. On failure: nothing on
 * stdout, the message on stderr, exit status 64 + the terra_status.
 *   terra-raster --serve PATH ENCODING ... (the same arguments)
 * opens the raster once and answers window requests on stdin/stdout (one socket) until end of
 * input, for terra_raster_open (the protocol: io/raster_wire.h).
 * Each read, and each request served, may take the CPU time io/child.h states. */
#include "terra/raster.h"
#include "child.h"
#include "raster_wire.h"

#include <cpl_conv.h>
#include <gdal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool write_all(const void *p, size_t n) { return fwrite(p, 1, n, stdout) == n; }

/* terra-raster --serve: the description, then reads until the caller hangs up. */
static int serve(const terra_raster_desc *d) {
    terra_raster_source *s = NULL;
    terra_status st = terra_raster_open_gdal(d, &s);
    if (st) {
        const char *m = terra_last_error();
        return terra_raster_send_reply(1, st, m, strlen(m)) ? 0 : 64 + TERRA_E_IO;
    }
    const terra_raster_info *in = terra_raster_source_info(s);
    terra_raster_info wire = *in;
    wire.crs_wkt = NULL;
    size_t wkt = in->crs_wkt ? strlen(in->crs_wkt) : 0;
    uint8_t *payload = terra_alloc(sizeof wire + wkt);
    bool ok = payload != NULL;
    if (ok) {
        memcpy(payload, &wire, sizeof wire);
        if (wkt) memcpy(payload + sizeof wire, in->crs_wkt, wkt);
        ok = terra_raster_send_reply(1, TERRA_OK, payload, sizeof wire + wkt);
        terra_free(payload);
    } else {
        const char *m = "terra-raster: out of memory";
        terra_raster_send_reply(1, TERRA_E_NOMEM, m, strlen(m));
    }
    int rc = ok ? terra_raster_serve(s, 0, 1) : 1;
    terra_raster_close(s);
    return rc ? 64 + TERRA_E_IO : 0;
}

int main(int argc, char **argv) {
    bool serving = argc > 1 && strcmp(argv[1], "--serve") == 0;
    if (serving) {
        argc--;
        argv++;
    }
    if (argc != 2 + TERRA_RASTER_ARGS) {
        fprintf(stderr, "terra-raster: reads a raster for terra (usage: terra-raster PATH ENCODING BAND Z_SCALE "
                        "SPACING_M MAX_SIDE MAX_BYTES NAN_IS_NODATA MIN_HEIGHT MAX_HEIGHT)\n");
        return 64 + TERRA_E_INVALID;
    }
    terra_raster_desc d = {.path = argv[1],
                           .encoding = (terra_raster_encoding)atoi(argv[2]),
                           .band = atoi(argv[3]),
                           .z_scale = strtod(argv[4], NULL),
                           .spacing_m = strtod(argv[5], NULL),
                           .max_side = atoi(argv[6]),
                           .max_bytes = (size_t)strtoull(argv[7], NULL, 10),
                           .nan_is_nodata = atoi(argv[8]) != 0,
                           .min_height = strtod(argv[9], NULL),
                           .max_height = strtod(argv[10], NULL)};
    terra_child_limit_cpu(); /* the open (and a whole read); each request served gets its own */
    /* GDAL's block cache would keep a decoded copy of the input beside terra's: keep it small. */
    if (!CPLGetConfigOption("GDAL_CACHEMAX", NULL)) GDALSetCacheMax64((GIntBig)16 << 20);
    if (serving) return serve(&d);
    terra_raster r;
    /* Counted twice: the heights are alive here and in the caller at once while they cross the pipe. */
    terra_status st = terra_raster_read_counted(&d, 2, &r);
    if (st != TERRA_OK) {
        fprintf(stderr, "%s\n", terra_last_error());
        return 64 + (int)st;
    }
    terra_raster_wire w = {.magic = TERRA_RASTER_WIRE_MAGIC, .size = sizeof w, .raster = r};
    w.raster.heights = NULL;
    const size_t n = (size_t)r.width * (size_t)r.height;
    bool ok = write_all(&w, sizeof w) && write_all(r.heights, n * sizeof(float)) && fflush(stdout) == 0;
    terra_raster_free(&r);
    if (!ok) {
        fprintf(stderr, "%s: cannot hand the heights over (pipe closed)\n", d.path);
        return 64 + TERRA_E_IO;
    }
    return 0;
}
