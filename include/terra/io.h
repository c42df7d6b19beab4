/* libterra-io: files and images. Depends on libpng (and, for rasters, GDAL); not part of the core. */
#ifndef TERRA_IO_H
#define TERRA_IO_H

#include "terra/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Writes an 8-bit RGB (channels 3) or RGBA (4) image, rows top to bottom, to a PNG file.
 * Written to a temporary name beside `path` and renamed into place when complete. */
terra_status terra_io_write_png(const char *path, const uint8_t *pixels, int width, int height, int channels);

/* Reads a PNG file as 8-bit RGBA, rows top to bottom, into *rgba (free with terra_free).
 * TERRA_E_IO / TERRA_E_FORMAT name the file and the problem. */
terra_status terra_io_read_png(const char *path, uint8_t **rgba, int *width, int *height);

/* Opens `path` + a unique suffix for writing beside `path`; *tmp_out receives the name
 * (caller frees with terra_free). terra_io_commit renames it over `path`, terra_io_abort removes it. */
terra_status terra_io_open_temp(const char *path, char **tmp_out, void **file_out /* FILE* */);
terra_status terra_io_commit(char *tmp, const char *path);
void terra_io_abort(char *tmp);

#ifdef __cplusplus
}
#endif
#endif
