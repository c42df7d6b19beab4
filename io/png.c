/* PNG output and input through libpng; output written atomically (io/atomic.c). */
#include "terra/io.h"

#include <errno.h>
#include <png.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

terra_status terra_io_read_png(const char *path, uint8_t **rgba, int *width, int *height) {
    png_image img;
    memset(&img, 0, sizeof img);
    img.version = PNG_IMAGE_VERSION;
    if (!png_image_begin_read_from_file(&img, path)) {
        terra_status s = terra_fail(errno == ENOENT ? TERRA_E_IO : TERRA_E_FORMAT, "%s: cannot read as PNG: %s", path,
                                    img.message);
        png_image_free(&img);
        return s;
    }
    img.format = PNG_FORMAT_RGBA;
    if (img.width == 0 || img.height == 0 || img.width > 16384 || img.height > 16384) {
        png_image_free(&img);
        return terra_fail(TERRA_E_FORMAT, "%s: unsupported PNG size %ux%u", path, img.width, img.height);
    }
    uint8_t *px = terra_alloc(PNG_IMAGE_SIZE(img));
    if (!px) {
        png_image_free(&img);
        return terra_fail(TERRA_E_NOMEM, "%s: out of memory", path);
    }
    if (!png_image_finish_read(&img, NULL, px, 0, NULL)) {
        terra_status s = terra_fail(TERRA_E_FORMAT, "%s: damaged PNG: %s", path, img.message);
        terra_free(px);
        png_image_free(&img);
        return s;
    }
    *rgba = px;
    *width = (int)img.width;
    *height = (int)img.height;
    return TERRA_OK;
}
