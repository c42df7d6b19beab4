/* PNG output through libpng, written atomically (temporary file, then rename). */
#include "terra/io.h"

#include <errno.h>
#include <png.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

terra_status terra_io_open_temp(const char *path, char **tmp_out, void **file_out) {
    size_t n = strlen(path) + 32;
    char *tmp = terra_alloc(n);
    if (!tmp) return terra_fail(TERRA_E_NOMEM, "%s: out of memory", path);
    snprintf(tmp, n, "%s.tmp%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        terra_status s = terra_fail(TERRA_E_IO, "%s: cannot create: %s", tmp, strerror(errno));
        terra_free(tmp);
        return s;
    }
    *tmp_out = tmp;
    *file_out = f;
    return TERRA_OK;
}

terra_status terra_io_commit(char *tmp, const char *path) {
    terra_status s = TERRA_OK;
    if (rename(tmp, path) != 0) {
        s = terra_fail(TERRA_E_IO, "%s: cannot rename into place: %s", path, strerror(errno));
        remove(tmp);
    }
    terra_free(tmp);
    return s;
}

void terra_io_abort(char *tmp) {
    if (!tmp) return;
    remove(tmp);
    terra_free(tmp);
}

terra_status terra_io_write_png(const char *path, const uint8_t *pixels, int width, int height, int channels) {
    if (!path || !pixels || width <= 0 || height <= 0 || (channels != 3 && channels != 4))
        return terra_fail(TERRA_E_INVALID, "%s: bad image arguments (%dx%d, %d channels)", path ? path : "(null)",
                          width, height, channels);
    char *tmp;
    void *fv;
    terra_status s = terra_io_open_temp(path, &tmp, &fv);
    if (s) return s;
    FILE *f = fv;
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    if (!png || !info) {
        png_destroy_write_struct(&png, &info);
        fclose(f);
        terra_io_abort(tmp);
        return terra_fail(TERRA_E_NOMEM, "%s: cannot start PNG writer", path);
    }
    if (setjmp(png_jmpbuf(png))) {
        png_destroy_write_struct(&png, &info);
        fclose(f);
        terra_io_abort(tmp);
        return terra_fail(TERRA_E_IO, "%s: PNG write failed", path);
    }
    png_init_io(png, f);
    png_set_IHDR(png, info, (png_uint_32)width, (png_uint_32)height, 8,
                 channels == 4 ? PNG_COLOR_TYPE_RGBA : PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE,
                 PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    png_write_info(png, info);
    for (int y = 0; y < height; y++) png_write_row(png, (png_const_bytep)(pixels + (size_t)y * width * channels));
    png_write_end(png, NULL);
    png_destroy_write_struct(&png, &info);
    if (fclose(f) != 0) {
        terra_io_abort(tmp);
        return terra_fail(TERRA_E_IO, "%s: write failed: %s", path, strerror(errno));
    }
    return terra_io_commit(tmp, path);
}
