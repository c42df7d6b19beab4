/* terra-raster: reads one elevation raster through GDAL (terra_raster_read) and writes it to
 * standard output for terra_raster_read_isolated, so the program that meshes never maps GDAL and
 * its libraries. Not meant to be run by hand; see io/raster_client.c for the protocol:
 *   terra-raster PATH ENCODING BAND Z_SCALE SPACING_M MAX_SIDE MAX_BYTES
 * stdout: a terra_raster_wire header, then width*height float heights. On failure: nothing on
 * stdout, the message on stderr, exit status 64 + the terra_status. */
#include "terra/raster.h"
#include "raster_wire.h"

#include <cpl_conv.h>
#include <gdal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool write_all(const void *p, size_t n) { return fwrite(p, 1, n, stdout) == n; }

int main(int argc, char **argv) {
    if (argc != 8) {
        fprintf(stderr, "terra-raster: reads a raster for terra (usage: terra-raster PATH ENCODING BAND Z_SCALE "
                        "SPACING_M MAX_SIDE MAX_BYTES)\n");
        return 64 + TERRA_E_INVALID;
    }
    terra_raster_desc d = {.path = argv[1],
                           .encoding = (terra_raster_encoding)atoi(argv[2]),
                           .band = atoi(argv[3]),
                           .z_scale = strtod(argv[4], NULL),
                           .spacing_m = strtod(argv[5], NULL),
                           .max_side = atoi(argv[6]),
                           .max_bytes = (size_t)strtoull(argv[7], NULL, 10)};
    /* GDAL's block cache would keep a decoded copy of the input beside terra's: keep it small. */
    if (!CPLGetConfigOption("GDAL_CACHEMAX", NULL)) GDALSetCacheMax64((GIntBig)16 << 20);
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
