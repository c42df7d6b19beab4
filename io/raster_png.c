/* PNG elevation rasters read in process with libpng, without GDAL: terra_raster_read_isolated
 * takes this path for the PNGs GDAL would read plainly, so `terra mesh` on a PNG neither starts
 * terra-raster nor maps GDAL's libraries (30-60 ms and ~35 MB a run).
 *
 * It gives what terra_raster_read gives (tests/test_io_files.c compares every PNG in
 * ../shared/data/dem both ways): GDAL's PNG driver reads the samples as they are stored (no gamma,
 * 16-bit grey as UInt16), has no georeferencing without a world file, and takes no-data only from
 * tRNS or .aux.xml. So this path takes only non-interlaced 8- or 16-bit grey and 8-bit RGB / RGBA
 * without tRNS, with no .aux.xml or world file beside them; anything else, and any failure at all
 * (a damaged file, every sample no-data, past max_side), is left to the GDAL reader, so the
 * errors are GDAL's, word for word. */
#include "raster_wire.h"
#include "terra/raster.h"

#include <math.h>
#include <png.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static void png_quiet_warning(png_structp png, png_const_charp msg) {
    (void)png;
    (void)msg;
}

static void png_fail(png_structp png, png_const_charp msg) {
    (void)msg;
    png_longjmp(png, 1);
}

/* True when GDAL would find something beside `path` that this reader does not read: PAM
 * metadata (.aux.xml) or a world file (.pgw, .pngw, .wld; GDAL tries both cases). */
static bool has_sidecar(const char *path) {
    size_t n = strlen(path);
    const char *dot = strrchr(path, '.');
    const char *slash = strrchr(path, '/');
    if (!dot || (slash && dot < slash)) return true; /* GDAL derives world-file names from the extension */
    char ext[8] = {0};
    for (int i = 0; i < 7 && dot[1 + i]; i++) ext[i] = (char)(dot[1 + i] | 0x20);
    if (strcmp(ext, "png") != 0) return true;
    char buf[4096];
    if (n + 16 > sizeof buf) return true;
    static const char *const suffixes[] = {".aux.xml", ".pgw", ".pngw", ".wld", ".PGW", ".PNGW", ".WLD"};
    for (size_t i = 0; i < sizeof suffixes / sizeof suffixes[0]; i++) {
        if (i == 0) {
            snprintf(buf, sizeof buf, "%s%s", path, suffixes[i]);
        } else {
            snprintf(buf, sizeof buf, "%.*s%s", (int)(dot - path), path, suffixes[i]);
        }
        if (access(buf, F_OK) == 0) return true;
    }
    return false;
}

/* The heights of one row from its stored samples, as raster.c computes them from GDAL's. */
static void decode_row(const terra_raster_desc *d, int channels, int depth, const png_byte *row, size_t W, float *out) {
    const double zs = d->z_scale != 0 ? d->z_scale : 1.0;
    if (d->encoding == TERRA_RASTER_PLAIN) {
        const int c = (d->band > 0 ? d->band : 1) - 1;
        for (size_t i = 0; i < W; i++) {
            double v = depth == 16 ? (double)((row[2 * i] << 8) | row[2 * i + 1]) : (double)row[i * (size_t)channels + (size_t)c];
            out[i] = (float)((v * 1.0 + 0.0) * zs); /* scale 1, offset 0: GDAL has none for a PNG */
        }
        return;
    }
    for (size_t i = 0; i < W; i++) {
        const png_byte *p = row + i * (size_t)channels;
        if (channels == 4 && p[3] == 0) {
            out[i] = NAN;
            continue;
        }
        double v;
        if (d->encoding == TERRA_RASTER_TERRAIN_RGB)
            v = -10000.0 + (double)(p[0] * 65536 + p[1] * 256 + p[2]) * 0.1;
        else
            v = (double)p[0] * 256.0 + (double)p[1] + (double)p[2] / 256.0 - 32768.0;
        out[i] = (float)(v * zs);
    }
}

terra_status terra_raster_read_png_direct(const terra_raster_desc *d, terra_raster *out, bool *handled) {
    *handled = false;
    memset(out, 0, sizeof *out);
    if (d->encoding != TERRA_RASTER_PLAIN && d->encoding != TERRA_RASTER_TERRAIN_RGB &&
        d->encoding != TERRA_RASTER_TERRARIUM)
        return TERRA_OK;
    FILE *f = fopen(d->path, "rb");
    if (!f) return TERRA_OK;
    png_byte sig[8];
    if (fread(sig, 1, 8, f) != 8 || png_sig_cmp(sig, 0, 8) != 0 || has_sidecar(d->path)) {
        fclose(f);
        return TERRA_OK;
    }
    png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, NULL, png_fail, png_quiet_warning);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    float *volatile hs = NULL;
    png_byte *volatile row = NULL;
    volatile terra_status st = TERRA_OK;
    if (!png || !info) goto done;
    if (setjmp(png_jmpbuf(png))) {
        terra_free(hs);
        hs = NULL;
        goto done;
    }
    png_init_io(png, f);
    png_set_sig_bytes(png, 8);
    png_read_info(png, info);
    png_uint_32 w32, h32;
    int depth, color, interlace;
    png_get_IHDR(png, info, &w32, &h32, &depth, &color, &interlace, NULL, NULL);
    int channels = color == PNG_COLOR_TYPE_GRAY ? 1 : color == PNG_COLOR_TYPE_RGB ? 3 : color == PNG_COLOR_TYPE_RGBA ? 4 : 0;
    bool plain_ok = d->encoding == TERRA_RASTER_PLAIN && (d->band > 0 ? d->band : 1) <= channels &&
                    (depth == 8 || (depth == 16 && channels == 1));
    bool rgb_ok = d->encoding != TERRA_RASTER_PLAIN && channels >= 3 && depth == 8;
    if (!channels || interlace != PNG_INTERLACE_NONE || png_get_valid(png, info, PNG_INFO_tRNS) ||
        w32 == 0 || h32 == 0 || w32 > 0x7fffffff || h32 > 0x7fffffff || !(plain_ok || rgb_ok) ||
        (d->max_side > 0 && (w32 > (png_uint_32)d->max_side || h32 > (png_uint_32)d->max_side)))
        goto done;
    const int w = (int)w32, h = (int)h32;
    const size_t W = w32, H = h32, rowbytes = png_get_rowbytes(png, info);
    /* The heights and one row, in this process only (no second copy as with terra-raster). */
    st = terra_raster_check_budget(d->path, w, h, 1, rowbytes, d->max_bytes);
    if (st) {
        *handled = true;
        goto done;
    }
    row = terra_alloc(rowbytes);
    hs = terra_alloc(W * H * sizeof(float));
    if (!row || !hs) {
        terra_free(hs);
        hs = NULL;
        goto done; /* GDAL's reader says it, in a process of its own */
    }
    for (size_t y = 0; y < H; y++) {
        png_read_row(png, row, NULL);
        decode_row(d, channels, depth, row, W, hs + y * W);
    }
    if (terra_raster_scan_heights(d->path, hs, w, h, out) != TERRA_OK) {
        memset(out, 0, sizeof *out);
        goto drop; /* GDAL's reader says it, in a process of its own */
    }
    out->georeferenced = false;
    const double gt[6] = {0, 1, 0, 0, 0, 1};
    memcpy(out->geo, gt, sizeof gt);
    out->spacing_x = out->spacing_y = d->spacing_m > 0 ? d->spacing_m : 1.0;
    if (terra_raster_check_extent(d->path, out) != TERRA_OK) {
        memset(out, 0, sizeof *out);
        goto drop;
    }
    out->heights = hs;
    hs = NULL;
    *handled = true;
    goto done;
drop:
    terra_free(hs);
    hs = NULL;
done:
    terra_free(row);
    if (png) png_destroy_read_struct(&png, info ? &info : NULL, NULL);
    fclose(f);
    return st;
}
