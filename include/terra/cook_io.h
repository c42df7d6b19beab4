/* terra cook, the whole job: elevation rasters and scenery meshes in, a TIN tile archive out
 * (libterra-cook: links terra-io, meshoptimizer and assimp; rasters are read through terra-raster,
 * the isolated GDAL reader). The pyramid itself is terra/cook.h, in the core. */
#ifndef TERRA_COOK_IO_H
#define TERRA_COOK_IO_H

#include "terra/archive_io.h"
#include "terra/cook.h"
#include "terra/raster.h"

#ifdef __cplusplus
extern "C" {
#endif

/* meshoptimizer's simplifier with the border locked, as a terra_cook_simplify_fn (user unused). */
size_t terra_cook_simplify_meshopt(void *user, const float *pos, uint32_t vertex_count, const uint32_t *tri,
                                   size_t triangle_count, double target_error, uint32_t *out_tri);

#ifdef __cplusplus
}
#endif
#endif
