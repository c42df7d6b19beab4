/* terra surface: what each surface id looks like.
 *
 * A source's surface function names what each sample is (see source.h); a surface table says what
 * each looks like: a tint, optional albedo / normal / mask textures and how many metres one repeat
 * of them covers. A surface the table does not describe gets a colour of its own (stable, from its
 * id); where the function names no surface (TERRA_SURFACE_NONE) the renderer draws its built-in
 * height-and-slope style, so a source can name only the road.
 *
 * A tile draws at most TERRA_TILE_SURFACES surfaces: the ones covering most of it
 * (terra_surface_palette), with a log line when it names more.
 */
/* Threads: a surface table is used by one thread at a time while it is written: terra_surface_table_set
 * frees the look it replaces, so it must not overlap a get, a version, a destroy, or a terra_gl_draw
 * whose style names the table. A look's texture paths stay valid until that id is set again or the
 * table is destroyed. Versions come from one atomic counter, so separate tables may be written on
 * separate threads. terra_surface_palette is pure (it may log). */
#ifndef TERRA_SURFACE_H
#define TERRA_SURFACE_H

#include "terra/source.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TERRA_TILE_SURFACES 8

typedef struct terra_surface_look {
    float tint[3];        /* linear RGB in [0, 1]; multiplies the albedo texture */
    const char *albedo;   /* texture paths, or NULL (copied by the table) */
    const char *normal;
    const char *mask;
    float tiling_m;       /* metres one repeat of the textures covers; 0 = 4 */
} terra_surface_look;

typedef struct terra_surface_table terra_surface_table;

TERRA_API terra_status terra_surface_table_create(terra_surface_table **out);
TERRA_API void terra_surface_table_destroy(terra_surface_table *t);
/* Describes surface `id` (1..255; 0 means "no surface" and cannot be described). */
TERRA_API terra_status terra_surface_table_set(terra_surface_table *t, terra_surface id, const terra_surface_look *look);
/* Changes whenever a surface is described, unique across tables (a renderer reloads textures when
 * it changes); 0 for a table never written to or NULL. */
TERRA_API uint32_t terra_surface_table_version(const terra_surface_table *t);
/* The look of `id`: true if the table describes it. An undescribed id still gets a tint of its own;
 * TERRA_SURFACE_NONE gets none (false, tint zero): draw the built-in style there. */
TERRA_API bool terra_surface_table_get(const terra_surface_table *t, terra_surface id, terra_surface_look *out);

/* The surfaces a tile draws: the (at most TERRA_TILE_SURFACES) ids covering most of its samples,
 * most common first (ties: smaller id first), TERRA_SURFACE_NONE included like any other. Returns
 * how many distinct ids the samples name; when that is more than TERRA_TILE_SURFACES the rest are
 * drawn as the tile's most common surface, and a warning is logged naming the tile. */
TERRA_API int terra_surface_palette(const terra_surface *ids, size_t n, size_t stride, terra_tile_key tile,
                          terra_surface out[TERRA_TILE_SURFACES], int *kept);

#ifdef __cplusplus
}
#endif
#endif
