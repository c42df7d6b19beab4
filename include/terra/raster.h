/* Elevation rasters through GDAL, and triangle meshes out (OBJ, PLY, STL). Not part of the core.
 * terra_raster_read lives in libterra-gdal (the one library linking GDAL); everything else here,
 * terra_raster_read_isolated included, in libterra-io. */
#ifndef TERRA_RASTER_H
#define TERRA_RASTER_H

#include "terra/core.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum terra_raster_encoding {
    TERRA_RASTER_PLAIN = 0,     /* heights in one band (any GDAL data type) */
    TERRA_RASTER_TERRAIN_RGB,   /* Mapbox: h = -10000 + (R*65536 + G*256 + B) * 0.1 */
    TERRA_RASTER_TERRARIUM      /* h = R*256 + G + B/256 - 32768 */
} terra_raster_encoding;

/* Zero-initialised fields mean the documented default. */
typedef struct terra_raster_desc {
    const char *path;
    terra_raster_encoding encoding;
    int band;                   /* plain encoding: 1-based band, 0 = 1 */
    double z_scale;             /* heights are multiplied by it after decoding, 0 = 1 */
    double spacing_m;           /* metres between samples; 0 = from georeferencing, else 1 */
    int max_side;               /* larger rasters are refused before reading; 0 = no limit */
    size_t max_bytes;           /* memory budget for reading, checked before allocating (see below);
                                   0 = half of the machine's physical memory */
} terra_raster_desc;

/* The memory budget a read runs under: max_bytes, or for 0 half of physical memory (sysconf). A
 * read counts 4 bytes a sample for the heights plus its working buffers, and an isolated read
 * through terra-raster (not a PNG read in process) counts the heights twice (the reader's copy and the caller's are alive at
 * once). A raster past the budget is refused with TERRA_E_CAPACITY, naming the file, its size, what
 * it would need and the budget, before anything of its size is allocated. */
size_t terra_raster_memory_budget(size_t max_bytes);

typedef struct terra_raster {
    int width, height;
    float *heights;             /* width*height metres, row-major from the top; NaN = no-data */
    size_t nodata_count;
    bool georeferenced;
    double geo[6];              /* GDAL geotransform (pixel corner), identity if none */
    double spacing_x, spacing_y;/* metres per sample */
    float min_z, max_z;         /* over valid samples */
} terra_raster;

/* Reads a raster. Errors name the file and the problem: unreadable, unknown format, missing band,
 * zero size, past max_side, NaN or infinite heights (NaN is a hole only when the band's no-data
 * value is NaN), every sample no-data. */
terra_status terra_raster_read(const terra_raster_desc *desc, terra_raster *out);
void terra_raster_free(terra_raster *r);

/* The same, read by the terra-raster program in a child process (built with terra; `reader` NULL:
 * $TERRA_RASTER_READER, else terra-raster next to the running program) and handed over through a
 * pipe. The caller links no GDAL and never maps its ~35 MB of libraries, so a program that goes on
 * to mesh the heights does so without them. The same heights, fields and errors as
 * terra_raster_read; getrusage(RUSAGE_CHILDREN) then reports the reader's peak memory.
 * A PNG that GDAL would read plainly (8- or 16-bit grey, 8-bit RGB or RGBA, non-interlaced, no
 * tRNS, no .aux.xml or world file beside it) is read in this process with libpng instead, with no
 * child (nothing for RUSAGE_CHILDREN) and one copy of the heights against the budget; a PNG that
 * fails there is read through terra-raster, so errors stay GDAL's. */
terra_status terra_raster_read_isolated(const terra_raster_desc *desc, const char *reader, terra_raster *out);

/* ---- meshes out ---------------------------------------------------------------------------- */

typedef struct terra_mesh_out {
    const char *path;           /* format from the extension: .obj, .ply (binary), .stl (binary) */
    size_t vertex_count;
    const double *xyz;          /* 3 per vertex; or NULL and positions come from xy, z, affine: */
    const int32_t *xy;          /*   2 per vertex (column, row) */
    const float *z;             /*   1 per vertex (NaN written as 0) */
    double affine[6];           /*   x = a0 + a1*col + a2*row, y = a3 + a4*col + a5*row */
    bool flip;                  /* write every triangle the other way round */
    const float *normals;       /* optional, 3 per vertex (OBJ vn, PLY nx ny nz; STL uses facets) */
    size_t triangle_count;
    const uint32_t *triangles;  /* 3 per triangle, counter-clockwise seen from outside */
    const char *comment;        /* optional single line (OBJ, PLY) */
} terra_mesh_out;

/* True when the extension of `path` is one terra_io_write_mesh knows. */
bool terra_io_mesh_format_known(const char *path);
/* Written to a temporary name and renamed into place; nothing is left behind on failure. */
terra_status terra_io_write_mesh(const terra_mesh_out *m);

/* Reads an OBJ (v and f lines; polygons fanned into triangles). Arrays are terra_alloc'ed. */
terra_status terra_io_read_obj(const char *path, double **xyz, size_t *vertex_count, uint32_t **triangles,
                               size_t *triangle_count);

#ifdef __cplusplus
}
#endif
#endif
