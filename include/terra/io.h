/* libterra-io: files and images. Depends on libpng (and, for rasters, GDAL); not part of the core. */
/* Threads: every function here may run on several threads at once. Writers of one target, even from
 * one process, get distinct temporaries (PID plus an atomic counter, O_EXCL) and the last rename
 * wins; the sweep of stale temporaries and its per-directory record are shared under a mutex. The PNG
 * functions share nothing between calls. */
#ifndef TERRA_IO_H
#define TERRA_IO_H

#include "terra/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Writes an 8-bit RGB (channels 3) or RGBA (4) image, rows top to bottom, to a PNG file.
 * Written to a temporary name beside `path` and renamed into place when complete. */
TERRA_API terra_status terra_io_write_png(const char *path, const uint8_t *pixels, int width, int height, int channels);

/* Reads a PNG file as 8-bit RGBA, rows top to bottom, into *rgba (free with terra_free).
 * TERRA_E_IO / TERRA_E_FORMAT name the file and the problem. */
TERRA_API terra_status terra_io_read_png(const char *path, uint8_t **rgba, int *width, int *height);

/* Opens a temporary file beside `path`, PATH.tmpPID-N (created with O_EXCL, so unique across
 * processes and threads), for writing; *tmp_out receives its name (terra_io_commit or
 * terra_io_abort frees it), *file_out the FILE*. Temporaries of the same target left by processes
 * that are gone (killed mid-write) are removed first. terra_io_commit renames the temporary over
 * `path`, terra_io_abort removes it. Errors name `path`, the temporary only as detail. */
TERRA_API terra_status terra_io_open_temp(const char *path, char **tmp_out, void **file_out /* FILE* */);
TERRA_API terra_status terra_io_commit(char *tmp, const char *path);
TERRA_API void terra_io_abort(char *tmp);

/* The path of program `name` in the directory of the running program (how terra finds terra-raster
 * and its other programs). false when it cannot be told or does not fit in cap bytes. */
TERRA_API bool terra_io_sibling_path(const char *name, char *out, size_t cap);

/* Leftover temporaries beside `path`: PATH.tmpPID-N (or PATH.tmpPID, the earlier name) whose
 * process no longer runs on this host. fn (may be NULL) is called once for each with its name,
 * the PID in it and its size; *count and *bytes (either may be NULL) receive the totals.
 * TERRA_E_IO when the directory cannot be read. Nothing is removed. */
typedef void (*terra_io_temp_fn)(void *ctx, const char *temp_path, long pid, uint64_t bytes);
TERRA_API terra_status terra_io_stale_temps(const char *path, terra_io_temp_fn fn, void *ctx, size_t *count, uint64_t *bytes);
/* Removes them (what terra_io_open_temp does before each write); returns how many it removed. */
TERRA_API size_t terra_io_remove_stale_temps(const char *path);

#ifdef __cplusplus
}
#endif
#endif
