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
 * errors are GDAL's, word for word.
 *
 * The same decoder serves windows (terra_raster_open): a cursor that decodes top to bottom and
 * keeps the last window's rows, whole width, so a band of windows side by side costs one decode. */
#include "raster_wire.h"
#include "terra/raster.h"

#include <math.h>
#include <setjmp.h>
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

/* A PNG being decoded top to bottom. */
typedef struct png_cursor {
    FILE *f;
    png_structp png;
    png_infop info;
    int channels, depth;
    int w, h;
    size_t rowbytes;
    png_byte *row;  /* one stored row */
    int next;       /* the row the decoder gives next */
} png_cursor;

static void cursor_end(png_cursor *c) {
    if (c->png) png_destroy_read_struct(&c->png, c->info ? &c->info : NULL, NULL);
    if (c->f) fclose(c->f);
    terra_free(c->row);
    memset(c, 0, sizeof *c);
}

/* Opens `d->path` when it is a PNG this reader takes (header read, cursor at row 0); false with
 * nothing held when it is not one or fails. */
static bool cursor_start(const terra_raster_desc *d, png_cursor *c) {
    memset(c, 0, sizeof *c);
    if (d->encoding != TERRA_RASTER_PLAIN && d->encoding != TERRA_RASTER_TERRAIN_RGB &&
        d->encoding != TERRA_RASTER_TERRARIUM)
        return false;
    c->f = fopen(d->path, "rb");
    if (!c->f) return false;
    png_byte sig[8];
    if (fread(sig, 1, 8, c->f) != 8 || png_sig_cmp(sig, 0, 8) != 0 || has_sidecar(d->path)) goto fail;
    c->png = png_create_read_struct(PNG_LIBPNG_VER_STRING, NULL, png_fail, png_quiet_warning);
    c->info = c->png ? png_create_info_struct(c->png) : NULL;
    if (!c->png || !c->info) goto fail;
    if (setjmp(png_jmpbuf(c->png))) goto fail;
    png_init_io(c->png, c->f);
    png_set_sig_bytes(c->png, 8);
    png_read_info(c->png, c->info);
    png_uint_32 w32, h32;
    int color, interlace;
    png_get_IHDR(c->png, c->info, &w32, &h32, &c->depth, &color, &interlace, NULL, NULL);
    c->channels = color == PNG_COLOR_TYPE_GRAY   ? 1
                  : color == PNG_COLOR_TYPE_RGB  ? 3
                  : color == PNG_COLOR_TYPE_RGBA ? 4
                                                 : 0;
    bool plain_ok = d->encoding == TERRA_RASTER_PLAIN && (d->band > 0 ? d->band : 1) <= c->channels &&
                    (c->depth == 8 || (c->depth == 16 && c->channels == 1));
    bool rgb_ok = d->encoding != TERRA_RASTER_PLAIN && c->channels >= 3 && c->depth == 8;
    if (!c->channels || interlace != PNG_INTERLACE_NONE || png_get_valid(c->png, c->info, PNG_INFO_tRNS) ||
        w32 == 0 || h32 == 0 || w32 > 0x7fffffff || h32 > 0x7fffffff || !(plain_ok || rgb_ok) ||
        (d->max_side > 0 && (w32 > (png_uint_32)d->max_side || h32 > (png_uint_32)d->max_side)))
        goto fail;
    c->w = (int)w32;
    c->h = (int)h32;
    c->rowbytes = png_get_rowbytes(c->png, c->info);
    if (!(c->row = terra_alloc(c->rowbytes))) goto fail;
    return true;
fail:
    cursor_end(c);
    return false;
}

/* Decodes rows [y0, y0 + n) (y0 >= c->next: rows between are skipped) into out, n whole rows of
 * heights; false when the file is damaged (the cursor is then spent). */
static bool cursor_rows(png_cursor *c, const terra_raster_desc *d, int y0, int n, float *out) {
    if (setjmp(png_jmpbuf(c->png))) return false;
    for (; c->next < y0; c->next++) png_read_row(c->png, c->row, NULL);
    for (int i = 0; i < n; i++, c->next++) {
        png_read_row(c->png, c->row, NULL);
        decode_row(d, c->channels, c->depth, c->row, (size_t)c->w, out + (size_t)i * (size_t)c->w);
    }
    return true;
}

terra_status terra_raster_read_png_direct(const terra_raster_desc *d, terra_raster *out, bool *handled) {
    *handled = false;
    memset(out, 0, sizeof *out);
    png_cursor c;
    if (!cursor_start(d, &c)) return TERRA_OK;
    const size_t W = (size_t)c.w, H = (size_t)c.h;
    /* The heights and one row, in this process only (no second copy as with terra-raster). */
    terra_status st = terra_raster_check_budget(d->path, c.w, c.h, 1, c.rowbytes, d->max_bytes);
    if (st) {
        *handled = true;
        cursor_end(&c);
        return st;
    }
    float *hs = terra_alloc(W * H * sizeof(float));
    /* On any failure GDAL's reader says it, in a process of its own. */
    if (!hs || !cursor_rows(&c, d, 0, c.h, hs) || terra_raster_check_window(d, NULL, false, hs, 0, 0, c.w, c.h) ||
        terra_raster_scan_heights(d->path, hs, c.w, c.h, out) != TERRA_OK)
        goto drop;
    out->georeferenced = false;
    const double gt[6] = {0, 1, 0, 0, 0, 1};
    memcpy(out->geo, gt, sizeof gt);
    out->spacing_x = out->spacing_y = d->spacing_m > 0 ? d->spacing_m : 1.0;
    if (terra_raster_check_extent(d->path, out) != TERRA_OK) goto drop;
    out->heights = hs;
    *handled = true;
    cursor_end(&c);
    return TERRA_OK;
drop:
    memset(out, 0, sizeof *out);
    terra_free(hs);
    cursor_end(&c);
    return TERRA_OK;
}

/* ---- windows ------------------------------------------------------------------------------------ */

typedef struct png_source {
    png_cursor c;        /* at row band_y0 + band_h */
    float *band;         /* rows [band_y0, band_y0 + band_h), whole width */
    int band_y0, band_h;
} png_source;

static terra_status png_window(terra_raster_source *s, int x0, int y0, int w, int h, float *out) {
    png_source *p = s->impl;
    const size_t W = (size_t)s->info.width;
    if (y0 < p->band_y0 || !p->c.png) { /* above what was kept: decode from the top again */
        cursor_end(&p->c);
        terra_free(p->band);
        p->band = NULL;
        p->band_y0 = p->band_h = 0;
        if (!cursor_start(&s->desc, &p->c))
            return terra_fail(TERRA_E_IO, "%s: cannot read the PNG again (changed or gone?)", s->path);
    }
    const int band_end = p->band_y0 + p->band_h;
    if (y0 + h > band_end) {
        /* A new band, [y0, y0 + h): the old one's rows it shares, the rest decoded. */
        size_t old = p->band ? W * (size_t)p->band_h * sizeof(float) : 0;
        terra_status st = terra_raster_check_budget(s->path, s->info.width, h, 1, old + p->c.rowbytes,
                                                    s->desc.max_bytes);
        if (st) return st;
        float *band = terra_alloc(W * (size_t)h * sizeof(float));
        if (!band) return terra_fail(TERRA_E_NOMEM, "%s: out of memory for %dx%d samples", s->path, s->info.width, h);
        int kept = y0 < band_end ? band_end - y0 : 0;
        if (kept) memcpy(band, p->band + (size_t)(y0 - p->band_y0) * W, (size_t)kept * W * sizeof(float));
        if (!cursor_rows(&p->c, &s->desc, y0 + kept, h - kept, band + (size_t)kept * W)) {
            terra_free(band);
            cursor_end(&p->c); /* the next read starts from the top */
            return terra_fail(TERRA_E_CORRUPT, "%s: the PNG is damaged below row %d", s->path, y0 + kept);
        }
        terra_free(p->band);
        p->band = band;
        p->band_y0 = y0;
        p->band_h = h;
    }
    for (int j = 0; j < h; j++)
        memcpy(out + (size_t)j * (size_t)w, p->band + (size_t)(y0 - p->band_y0 + j) * W + (size_t)x0,
               (size_t)w * sizeof(float));
    return terra_raster_check_window(&s->desc, NULL, false, out, x0, y0, w, h);
}

static void png_source_free(png_source *p) {
    cursor_end(&p->c);
    terra_free(p->band);
    terra_free(p);
}

static void png_close(terra_raster_source *s) { png_source_free(s->impl); }

static const terra_raster_source_ops png_ops = {png_window, NULL, png_close};

terra_status terra_raster_open_png(const terra_raster_desc *d, terra_raster_source **out, bool *handled) {
    *handled = false;
    png_source *p = terra_alloc(sizeof *p);
    if (!p) return TERRA_OK; /* GDAL's reader says it, in a process of its own */
    memset(p, 0, sizeof *p);
    if (!cursor_start(d, &p->c)) {
        terra_free(p);
        return TERRA_OK;
    }
    terra_raster r = {.width = p->c.w, .height = p->c.h, .geo = {0, 1, 0, 0, 0, 1}};
    r.spacing_x = r.spacing_y = d->spacing_m > 0 ? d->spacing_m : 1.0;
    if (terra_raster_check_extent(d->path, &r) != TERRA_OK ||
        terra_raster_source_new(d, &png_ops, p, out) != TERRA_OK) {
        png_source_free(p);
        return TERRA_OK;
    }
    terra_raster_info *in = &(*out)->info;
    in->width = r.width;
    in->height = r.height;
    memcpy(in->geo, r.geo, sizeof r.geo);
    in->spacing_x = r.spacing_x;
    in->spacing_y = r.spacing_y;
    *handled = true;
    return TERRA_OK;
}
