/* Elevation rasters through GDAL, and triangle meshes out (OBJ, PLY, STL). Not part of the core.
 * terra_raster_read lives in libterra-gdal (the one library linking GDAL); everything else here,
 * terra_raster_read_isolated included, in libterra-io. */
/* Threads: terra_raster_read, terra_raster_read_isolated and terra_raster_open share nothing between
 * calls (each opens its own GDAL dataset, child process or PNG reader), so several may run at once.
 * A terra_raster_source serves one read at a time: window and geographic reads from several threads
 * are serialised by its mutex, and terra_raster_close must not overlap them. The mesh writers and
 * terra_io_read_obj share nothing between calls. */
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
    bool nan_is_nodata;         /* a NaN sample is no-data whatever the band declares (a float raster
                                   whose no-data value is NaN, or undeclared); false: only where the
                                   band's no-data value is NaN, any other NaN is refused */
    double min_height, max_height; /* heights (metres, after z_scale) outside [min_height, max_height]
                                   are refused (TERRA_E_CORRUPT naming the file, the sample and its
                                   place); both 0: no bound, only infinite heights are refused */
} terra_raster_desc;

/* The memory budget a read runs under: max_bytes, or for 0 half of physical memory (sysconf). A
 * read counts 4 bytes a sample for the heights plus its working buffers, and an isolated read
 * through terra-raster (not a PNG read in process) counts the heights twice (the reader's copy and the caller's are alive at
 * once). A raster past the budget is refused with TERRA_E_CAPACITY, naming the file, its size, what
 * it would need and the budget, before anything of its size is allocated. */
TERRA_API size_t terra_raster_memory_budget(size_t max_bytes);

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
 * zero size, past max_side, NaN or infinite heights (NaN is a hole when the band's no-data value is
 * NaN or desc->nan_is_nodata), heights outside desc's bound, every sample no-data. Spacing from a
 * geographic CRS is metres on a sphere of its ellipsoid's mean radius ((2a + b) / 3: the Earth's
 * 6371 km on WGS 84, Mars' 3390 km on its IAU ellipsoid). */
TERRA_API terra_status terra_raster_read(const terra_raster_desc *desc, terra_raster *out);
TERRA_API void terra_raster_free(terra_raster *r);

/* The same, read by the terra-raster program in a child process (built with terra; `reader` NULL:
 * $TERRA_RASTER_READER, else terra-raster next to the running program) and handed over through a
 * pipe. The caller links no GDAL and never maps its ~35 MB of libraries, so a program that goes on
 * to mesh the heights does so without them. The same heights, fields and errors as
 * terra_raster_read; getrusage(RUSAGE_CHILDREN) then reports the reader's peak memory.
 * A PNG that GDAL would read plainly (8- or 16-bit grey, 8-bit RGB or RGBA, non-interlaced, no
 * tRNS, no .aux.xml or world file beside it) is read in this process with libpng instead, with no
 * child (nothing for RUSAGE_CHILDREN) and one copy of the heights against the budget; a PNG that
 * fails there is read through terra-raster, so errors stay GDAL's. */
TERRA_API terra_status terra_raster_read_isolated(const terra_raster_desc *desc, const char *reader, terra_raster *out);

/* ---- rasters opened for windowed and warped reads (terra cook) -------------------------------
 *
 * A raster larger than memory is read a window at a time: open it once (only the header is read),
 * ask for windows, close. A window read allocates O(window) (a PNG: O(raster width x window
 * height), see below), never the whole raster, and is checked against desc->max_bytes first.
 *
 * Conventions. Sample (i, j) is column i, row j from the top. Heights are metres after the
 * encoding, the band's scale/offset and z_scale, NaN = no-data: the same values terra_raster_read
 * gives for the same samples, bit for bit. A raster's own grid is GDAL's (the geotransform names
 * pixel corners: sample (i, j)'s centre is at geo[0] + (i + .5) geo[1] + (j + .5) geo[2], ...); a
 * geographic grid (terra_raster_geo_grid) is pixel-is-point: it names the samples' positions
 * themselves. A sample whose centre lies on a geo grid's point is that point's value exactly. */

/* What a raster is, known without reading its samples. */
typedef struct terra_raster_info {
    int width, height;
    double geo[6];              /* GDAL geotransform (pixel corners), identity if none */
    bool georeferenced;         /* a geotransform other than the identity */
    double spacing_x, spacing_y;/* metres per sample, as terra_raster_read gives them */
    bool has_crs;               /* a coordinate system: crs_wkt, epsg, ellipsoid */
    bool geographic;            /* longitude/latitude degrees on an Earth-sized ellipsoid (WGS84, NAD83,
                                   ...): the samples lie on a degree grid the cook can take as its own */
    int epsg;                   /* the CRS's EPSG code; 0: none or not known */
    const char *crs_wkt;        /* the CRS as WKT2, NULL without one; owned by the source */
    double semi_major_m, semi_minor_m; /* the CRS's ellipsoid (metres) */
    char ellipsoid[64];         /* and its name, as the CRS gives it */
    bool off_earth;             /* an ellipsoid no datum of the Earth has (semi-major axis outside
                                   6350..6400 km): another body's (Mars, the Moon...) */
    bool has_lonlat;            /* georeferenced on the Earth with a CRS that PROJ takes to EPSG:4326
                                   (a CRS in degrees must put its sample centres within longitudes
                                   -360..360 and latitudes -90..90, or opening fails); then: */
    double lonlat_bounds[4];    /*   west, south, east, north of the sample centres (degrees; sampled
                                     along the edges, so a projected raster's curved edges are inside) */
    double lonlat_step[2];      /*   degrees per sample east and north at the raster's centre */
    bool has_nodata;
    double nodata;              /* the band's no-data value as stored (before scale, offset, z_scale) */
    bool range_known;           /* the file states its statistics (never computed: that reads it all) */
    float min_z, max_z;         /*   their range in metres */
} terra_raster_info;

/* Samples on EPSG:4326, pixel-is-point: grid sample (i, j) is the point longitude = west + i *
 * step_x, latitude = north - j * step_y (degrees; rows go south). Windows are asked of it by
 * integer indices, so a cook's tiles that share an edge ask for the same points. */
typedef struct terra_raster_geo_grid {
    double west, north;
    double step_x, step_y;      /* > 0 */
    int width, height;          /* the grid's extent: windows lie within [0, width) x [0, height) */
} terra_raster_geo_grid;

typedef struct terra_raster_source terra_raster_source;

/* Opens a raster for window reads. A plain PNG (as terra_raster_read_isolated says) is read in this
 * process with libpng; anything else by one terra-raster child (`reader` as for
 * terra_raster_read_isolated) that stays up until terra_raster_close and answers each read over a
 * socket, so GDAL is mapped once, in the child, and never here. Reads only the header: errors name
 * the file (unreadable, unknown format, missing band, zero size, past max_side, a coordinate system
 * PROJ cannot read: PROJ's own message, a CRS in degrees placing samples off the globe). */
TERRA_API terra_status terra_raster_open(const terra_raster_desc *desc, const char *reader, terra_raster_source **out);
/* The same in this process through GDAL (libterra-gdal; terra-raster serves with it). */
TERRA_API terra_status terra_raster_open_gdal(const terra_raster_desc *desc, terra_raster_source **out);
TERRA_API const terra_raster_info *terra_raster_source_info(const terra_raster_source *s);

/* The heights of samples [x0, x0 + w) x [y0, y0 + h) of the raster's own grid into out (w * h,
 * row-major, caller-owned). TERRA_E_INVALID for a window not inside the raster; TERRA_E_CORRUPT
 * naming the sample for a NaN that is not no-data, an overflowing height or one outside the desc's
 * bound (also for the samples a geographic read below interpolates); TERRA_E_CAPACITY past
 * the budget. Windows tile the raster exactly: read side by side they give terra_raster_read's
 * heights. A PNG is decoded top to bottom, keeping the last window's rows (the whole width): a
 * window starting at or below the previous one's first row continues from there, one starting
 * above it decodes from the top of the file again. So read a PNG in bands of rows, top down. */
TERRA_API terra_status terra_raster_read_window(terra_raster_source *s, int x0, int y0, int w, int h, float *out);

/* The heights at samples [x0, x0 + w) x [y0, y0 + h) of a geographic grid, into out (w * h,
 * row-major): each point taken to the raster's CRS with GDAL's warp transformer
 * (GDALCreateGenImgProjTransformer2: PROJ, datum shifts included; approximated along each row within
 * 1/64 of a sample, as gdalwarp does within 1/8) and interpolated bilinearly
 * between the four sample centres around it. NaN where one of those with a weight is no-data or
 * the point is outside the raster's sample centres (or off its CRS). Where grid and samples
 * coincide (a .hgt on a grid of its own step) the sample's own value comes back. The raster is
 * read in windows of what the points need: O(w * h) memory plus a bounded source window.
 * TERRA_E_UNSUPPORTED for a raster without georeferencing and CRS (and for an in-process PNG). */
TERRA_API terra_status terra_raster_read_geo(terra_raster_source *s, const terra_raster_geo_grid *grid, int x0, int y0, int w,
                                   int h, float *out);

/* Ends the child (if any) and frees the source; NULL is fine. */
TERRA_API void terra_raster_close(terra_raster_source *s);

/* One source serves one read at a time: calls from several threads are serialised. For reads in
 * parallel open one source per thread (each a child of its own; its pages of GDAL are shared). */

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
TERRA_API bool terra_io_mesh_format_known(const char *path);
/* Written to a temporary name and renamed into place; nothing is left behind on failure. */
TERRA_API terra_status terra_io_write_mesh(const terra_mesh_out *m);

/* Reads an OBJ (v and f lines; polygons fanned into triangles). Arrays are terra_alloc'ed. */
TERRA_API terra_status terra_io_read_obj(const char *path, double **xyz, size_t *vertex_count, uint32_t **triangles,
                               size_t *triangle_count);

#ifdef __cplusplus
}
#endif
#endif
