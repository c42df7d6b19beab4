/* Internal: the 1-D greedy insertion over a tile edge's height profile (src/tin_tiles.c), shared by
 * the tiled mesher and the cook's finest tiles (src/cook/raster_tiles.c): both neighbours of an edge
 * compute its vertices from the same samples, so they agree without seeing each other. */
#ifndef TERRA_TIN_EDGE_H
#define TERRA_TIN_EDGE_H

#include "terra/core.h"

/* Edge vertices are chosen at the finest bound times this margin, which keeps the 2-D mesher's
 * floating-point error on border samples under its bound (it then adds no vertex there). */
#define TERRA_TIN_BORDER_MARGIN 0.999

/* The samples h[0], h[stride], ... h[(n-1) * stride] of an edge: *pos (terra_alloc'ed, *count
 * entries, sorted) receives the offsets a greedy 1-D insertion keeps at `bound`, both ends
 * excluded (they are the tile's corners). With a no-data (NaN) sample on the edge every valid
 * sample is kept. */
terra_status terra_tin_edge_profile(const float *h, size_t stride, int32_t n, double bound, int32_t **pos,
                                    size_t *count);
/* The same with vertices only at offsets i = phase (mod every) at least `every` from both ends
 * of each run of valid samples, whose ends are kept (every > 1: positions that a tile many times
 * wider still quantizes apart); samples between may then stay over the bound. */
terra_status terra_tin_edge_profile_spaced(const float *h, size_t stride, int32_t n, double bound, int32_t every,
                                           int32_t phase, int32_t **pos, size_t *count);

#endif
