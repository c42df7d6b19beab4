/* What terra-raster (tools/terra_raster.c) and its callers (io/raster_client.c) say to each other,
 * and what the three kinds of terra_raster_source share. Both ends are built together, so structs
 * are sent as they are; magics and sizes catch a reader from another build.
 *
 * One-shot (terra_raster_read_isolated): terra-raster PATH ENCODING BAND Z_SCALE SPACING_M MAX_SIDE
 * MAX_BYTES writes a terra_raster_wire header, then width*height floats, to stdout.
 * Served (terra_raster_open): terra-raster --serve PATH ... (the same arguments) with stdin and
 * stdout one socket. It answers the open with a terra_raster_reply whose payload is a
 * terra_raster_info (crs_wkt NULL) and then the WKT's bytes; then each terra_raster_request with a
 * reply whose payload is w*h floats. A failure is a reply with the status and the message as
 * payload (a failed open, then the child exits). End of input: the child exits 0. */
#ifndef TERRA_RASTER_WIRE_H
#define TERRA_RASTER_WIRE_H

#include "terra/raster.h"

#include <pthread.h>

#define TERRA_RASTER_WIRE_MAGIC 0x54524157u /* "TRAW" */
/* The desc's fields after PATH on terra-raster's command line. */
#define TERRA_RASTER_ARGS 9

typedef struct terra_raster_wire {
    uint32_t magic;
    uint32_t size;         /* sizeof(terra_raster_wire) */
    terra_raster raster;   /* heights: NULL (they follow) */
} terra_raster_wire;

typedef enum terra_raster_request_kind {
    TERRA_RASTER_REQ_WINDOW = 1, /* terra_raster_read_window(x0, y0, w, h) */
    TERRA_RASTER_REQ_GEO = 2     /* terra_raster_read_geo(grid, x0, y0, w, h) */
} terra_raster_request_kind;

#define TERRA_RASTER_REQUEST_MAGIC 0x54525251u /* "TRRQ" */
#define TERRA_RASTER_REPLY_MAGIC 0x54525250u   /* "TRRP" */

typedef struct terra_raster_request {
    uint32_t magic;
    uint32_t kind;
    int32_t x0, y0, w, h;
    terra_raster_geo_grid grid;  /* TERRA_RASTER_REQ_GEO */
} terra_raster_request;

typedef struct terra_raster_reply {
    uint32_t magic;
    int32_t status;              /* terra_status */
    uint64_t bytes;              /* payload that follows: the answer, or the message without its 0 */
} terra_raster_reply;

/* A source's reads, one implementation per kind (libpng in process, GDAL in process, the child). */
typedef struct terra_raster_source_ops {
    terra_status (*window)(terra_raster_source *s, int x0, int y0, int w, int h, float *out);
    terra_status (*geo)(terra_raster_source *s, const terra_raster_geo_grid *g, int x0, int y0, int w, int h,
                        float *out);
    void (*close)(terra_raster_source *s);
} terra_raster_source_ops;

struct terra_raster_source {
    const terra_raster_source_ops *ops;
    terra_raster_desc desc;      /* desc.path points at path */
    char *path;
    char *wkt;                   /* info.crs_wkt */
    terra_raster_info info;
    void *impl;
    pthread_mutex_t lock;        /* one read at a time */
};

/* A source with the caller's desc copied (path duplicated), ops and impl set, info zeroed;
 * TERRA_E_NOMEM. Freed with terra_raster_source_free (after ops->close freed impl). */
TERRA_INTERNAL terra_status terra_raster_source_new(const terra_raster_desc *d, const terra_raster_source_ops *ops, void *impl,
                                     terra_raster_source **out);
void terra_raster_source_free(terra_raster_source *s);

/* Serves terra_raster_open's protocol on fds in/out for an opened source (terra-raster --serve)
 * until end of input: 0, or 1 when the socket broke. */
int terra_raster_serve(terra_raster_source *s, int in, int out);
/* Writes a reply (header + payload); false when the peer is gone. */
bool terra_raster_send_reply(int fd, terra_status st, const void *payload, size_t bytes);

/* A plain PNG (see raster_png.c) opened for window reads in process: *handled false when it is
 * not one (the caller goes through GDAL, whose answer is then the same). */
terra_status terra_raster_open_png(const terra_raster_desc *d, terra_raster_source **out, bool *handled);

/* TERRA_E_CORRUPT naming the first sample of a w x h window at (x0, y0) whose height is infinite
 * (a z_scale that overflows a float) or outside d's bound, with its place when geo (the raster's
 * geotransform) is given: longitude and latitude when `degrees`, else the CRS's x and y. */
TERRA_INTERNAL terra_status terra_raster_check_window(const terra_raster_desc *d, const double *geo, bool degrees,
                                                      const float *hs, int x0, int y0, int w, int h);

/* terra_raster_read with the heights counted `copies` times against the memory budget: 1 for a read
 * in the caller's process, 2 for terra-raster (its copy and the caller's are alive at once). */
terra_status terra_raster_read_counted(const terra_raster_desc *desc, int copies, terra_raster *out);

/* TERRA_OK when reading a w x h raster fits the budget: `copies` x 4 bytes a sample plus
 * `working` bytes of buffers. Else TERRA_E_CAPACITY naming the file, its size, the need and the
 * budget. Call before allocating anything of the raster's size. */
TERRA_INTERNAL terra_status terra_raster_check_budget(const char *path, int w, int h, int copies, size_t working, size_t max_bytes);

/* Scans w x h heights and fills out's size, no-data count and height range: TERRA_E_CORRUPT naming
 * the sample where a height is infinite, TERRA_E_SOURCE when every sample is no-data (NaN). */
TERRA_INTERNAL terra_status terra_raster_scan_heights(const char *path, const float *hs, int w, int h, terra_raster *out);

/* TERRA_OK when out's georeferencing and spacing put every sample at finite coordinates (the
 * geotransform at the raster's four corners, spacing times its size). Else TERRA_E_UNSUPPORTED
 * naming the file: a mesh written from it would hold infinities. */
TERRA_INTERNAL terra_status terra_raster_check_extent(const char *path, const terra_raster *out);

/* A PNG that GDAL would read plainly (see io/raster_png.c), read in process with libpng: *handled
 * true with the raster, or with an error that is final (past the memory budget). *handled false:
 * not such a PNG, or it failed; the caller reads it through GDAL, whose answer is then the same. */
terra_status terra_raster_read_png_direct(const terra_raster_desc *desc, terra_raster *out, bool *handled);

#endif
