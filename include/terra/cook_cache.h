/* terra cook's cache: a previous cook is reused only when everything that made it agrees.
 *
 * Beside each cooked archive the cache keeps a record (DIR/NAME.record, DIR = OUT.cache unless
 * --cache DIR says otherwise, NAME = the archive's file name) of:
 *  - the manifest of the inputs: every file that went in (the command line's inputs in their order,
 *    and the files they name: MTL, textures, glTF buffers, a raster's sidecars), each with its size,
 *    modification time and content hash (XXH64), or marked ABSENT when a scenery names a file it
 *    does not have;
 *  - the cook options as one canonical string, terra's archive format version and the cook's
 *    version (TERRA_COOK_VERSION), the grid the tiles were cut on and the driver's resolved settings;
 *  - the archive it describes (its size, header and a hash of its index: a record never vouches for
 *    another archive, even one copied over it);
 *  - for every tile of that archive, the inputs whose data went into it (the finest tiles: the
 *    inputs overlapping them; each coarser tile: the union over its children);
 *  - and, in DIR/NAME.meshes, every finest tile's mesh as the cook made it: a recooked coarser
 *    tile is built from its children down to the finest meshes, the unchanged ones too, and those
 *    come back from here exactly instead of being meshed from the sources again.
 *
 * What agrees. A file agrees when it is absent now and was absent then, or when its size and
 * content hash are the recorded ones: the hash decides, the time alone does not (a file touched
 * or copied without its time, content unchanged, is reused and reported as TERRA_COOK_INPUT_TOUCHED;
 * a file rewritten with other bytes of the same size, within the same second or even with its old
 * time restored, is changed). A file named but absent matches for as long as it stays absent (the
 * seed's bug was that an absent include never matched, so nothing beside it was ever reused) and
 * stops matching once it appears. Every input is read whole to hash it, at each cook (XXH64 runs
 * at about 10 GB/s: the disk is the limit). A no-op writes nothing, the record included, so a
 * touched file is reported as touched again by the next cook until one rewrites the record.
 *
 * A record that is damaged (checksum, truncation, impossible values) is ignored with a warning, and
 * so is a previous archive that is missing, is not the one recorded, or fails terra_archive_verify:
 * the cook then starts afresh. The record is written (temporary file renamed into place) only after
 * the new archive is in place, and describes that archive alone, so a cook killed between the two
 * leaves an old record that matches nothing.
 *
 * The driver's part (io/cook/cook.c), in order:
 *   1. terra_cook_manifest_create(options) and terra_cook_manifest_add_input / _add_named for
 *      every file, before reading any of them for cooking (a file changed afterwards is then seen
 *      as changed by the next cook, never the other way round);
 *   2. terra_cook_cache_open: TERRA_COOK_CACHE_UNCHANGED -> the archive is up to date: write
 *      nothing, close, done. Otherwise (FRESH or CHANGED):
 *   3. terra_cook_cache_begin(grid, settings); terra_cook_cache_set_finest for every finest tile;
 *      terra_cook_cache_plan;
 *   4. cook (terra_cook_pyramid): in make_finest, terra_cook_cache_load_finest first (TERRA_OK:
 *      done; anything else: make the tile from its sources), then terra_cook_cache_keep_finest
 *      either way; in emit, a tile for which terra_cook_cache_reusable says true is copied from
 *      the previous archive (terra_cook_cache_copy_tile) instead of being encoded and added;
 *   5. terra_archive_writer_finish, then terra_cook_cache_commit; terra_cook_cache_close.
 * --no-cache: skip the cache altogether (no open, no commit): the cook neither reads nor writes it.
 */
/* Threads: a manifest is written by one thread (create, add_input, add_named); once complete it is
 * only read, and the cache reads it until closed. open, begin, set_finest, plan, commit and close run
 * on one thread, never during another call on the cache. Between plan and commit,
 * terra_cook_cache_reusable, _copy_tile, _keep_finest and _load_finest may be called from several
 * threads at once (keep_finest takes a mutex; the others only read, and copy_tile adds through the
 * writer's own lock); get_outcome, reason and input_change only read what open set.
 * terra_cook_xxh64 is pure. */
#ifndef TERRA_COOK_CACHE_H
#define TERRA_COOK_CACHE_H

#include "terra/archive_io.h"
#include "terra/cook.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The cook's version: raise it whenever the cook makes other tiles from the same inputs and
 * options (a new simplifier, another encoding), so that no earlier cook is reused. */
#define TERRA_COOK_VERSION 2 /* 2: stated errors over the decoded triangles only, never below a child's */

/* XXH64 of n bytes (the hash xxhsum -H64 prints, seed 0): the content hash of the manifest. */
TERRA_API uint64_t terra_cook_xxh64(const void *data, size_t n, uint64_t seed);

/* ---- the manifest of the inputs --------------------------------------------------------------- */

typedef struct terra_cook_manifest terra_cook_manifest;

typedef struct terra_cook_file {
    const char *path;     /* as given (for messages, and to open) */
    const char *key;      /* what identifies it across cooks: the absolute path, "." and ".." removed */
    bool named;           /* a file an input names (may be absent), not one of the command line's inputs */
    bool absent;          /* named but not there */
    uint64_t size;        /* bytes (0 when absent) */
    int64_t mtime_ns;     /* modification time, ns since 1970 (0 when absent) */
    uint64_t hash;        /* XXH64 of the content (0 when absent) */
} terra_cook_file;

/* An empty manifest for a cook with `options`: one canonical string of every option that shapes
 * the tiles (e.g. "max_error=1;levels=8;tile_size=256;frame=auto;z_scale=1"), the same string for
 * the same settings whatever way they were spelled; never options that do not (--threads).
 * TERRA_E_NOMEM, TERRA_E_INVALID (options NULL). */
TERRA_API terra_status terra_cook_manifest_create(const char *options, terra_cook_manifest **out);
TERRA_API void terra_cook_manifest_free(terra_cook_manifest *m);

/* Adds one of the command line's inputs (their order is part of what must agree: where inputs
 * overlap, the order may decide) and hashes it; *index (may be NULL) receives its number. It must
 * be a readable regular file: TERRA_E_IO / TERRA_E_INVALID naming it otherwise. A path already in
 * the manifest (same key) is not added again: TERRA_E_INVALID for an input given twice. */
TERRA_API terra_status terra_cook_manifest_add_input(terra_cook_manifest *m, const char *path, uint32_t *index);
/* Adds a file an input names (resolved to a path by the driver, e.g. relative to the scenery):
 * absent (no such file, a directory on the way missing, not readable, not a regular file: what a
 * scenery loader does without) is recorded as such; present, it is hashed. Adding a key already
 * there gives its existing number (two sceneries naming one texture). TERRA_E_IO for other
 * failures (a read error half way). */
TERRA_API terra_status terra_cook_manifest_add_named(terra_cook_manifest *m, const char *path, uint32_t *index);

TERRA_API uint32_t terra_cook_manifest_count(const terra_cook_manifest *m);
/* File i (0 .. count-1), valid until the manifest is freed. */
TERRA_API const terra_cook_file *terra_cook_manifest_file(const terra_cook_manifest *m, uint32_t i);

/* ---- the cache -------------------------------------------------------------------------------- */

typedef struct terra_cook_cache terra_cook_cache;

typedef enum terra_cook_cache_outcome {
    TERRA_COOK_CACHE_FRESH = 0,  /* nothing to reuse (no record, or it disagrees in options, version,
                                    the list of inputs, or the archive): cook every tile */
    TERRA_COOK_CACHE_UNCHANGED,  /* everything agrees: the archive is up to date, write nothing */
    TERRA_COOK_CACHE_CHANGED     /* some inputs differ: cook the tiles they went into, copy the rest */
} terra_cook_cache_outcome;

/* Each input of the new manifest against the record. */
typedef enum terra_cook_input_change {
    TERRA_COOK_INPUT_SAME = 0,
    TERRA_COOK_INPUT_TOUCHED,   /* another modification time, same size and content: agrees */
    TERRA_COOK_INPUT_CHANGED,   /* other size or content (or no longer the same kind: input / named) */
    TERRA_COOK_INPUT_NEW,       /* not in the previous cook */
    TERRA_COOK_INPUT_APPEARED,  /* named, absent then, present now */
    TERRA_COOK_INPUT_VANISHED   /* named, present then, absent now */
} terra_cook_input_change;
TERRA_API const char *terra_cook_input_change_name(terra_cook_input_change c);

/* Compares the manifest with the record for the archive at `output` (dir NULL: "OUTPUT.cache").
 * The manifest must outlive the cache. A damaged record or previous archive is a warning
 * (terra_log) and the FRESH outcome, never an error: errors are TERRA_E_NOMEM and TERRA_E_INVALID
 * (arguments). The previous archive is verified (terra_archive_verify) only when the record
 * otherwise agrees; it stays open, read-only, until commit or close. */
TERRA_API terra_status terra_cook_cache_open(const char *dir, const char *output, const terra_cook_manifest *m,
                                   terra_cook_cache **out);
TERRA_API terra_cook_cache_outcome terra_cook_cache_get_outcome(const terra_cook_cache *c);
/* Why, in a sentence for the report: "no previous cook (no record at ...)", "the options changed",
 * "2 of 7 inputs changed: a.tif (changed), grass.png (appeared)", "up to date". */
TERRA_API const char *terra_cook_cache_reason(const terra_cook_cache *c);
/* Input i of the new manifest against the record (TERRA_COOK_INPUT_NEW for every input when
 * there is no usable record). */
TERRA_API terra_cook_input_change terra_cook_cache_input_change(const terra_cook_cache *c, uint32_t i);

/* Starts the new cook's record with its grid and `settings`: every setting the driver resolved
 * that shapes tiles and is not in the options or the grid (an automatic error bound, the material
 * layer table's order...), as a canonical string ("" when none). When the grid or settings differ
 * from the record's, no tile is reusable. Call once, after open, whatever the outcome. */
TERRA_API terra_status terra_cook_cache_begin(terra_cook_cache *c, const terra_cook_grid *grid, const char *settings);
/* The inputs (manifest numbers, any order, duplicates allowed) whose data goes into finest tile
 * (tx, ty): the rasters overlapping it, the sceneries with ground in it together with the files
 * they name. Once per finest tile; not thread-safe. TERRA_E_INVALID for a tile given twice or an
 * input number outside the manifest. */
TERRA_API terra_status terra_cook_cache_set_finest(terra_cook_cache *c, int32_t tx, int32_t ty, const uint32_t *inputs,
                                         size_t n);
/* After the last set_finest: gives every coarser tile up to grid->depth the union of its
 * children's inputs and decides which tiles are reusable; *reusable (may be NULL) receives their
 * number, *total (may be NULL) the number of tiles planned. */
TERRA_API terra_status terra_cook_cache_plan(terra_cook_cache *c, uint64_t *reusable, uint64_t *total);
/* True when tile `key` (terra_cook_key) may be copied from the previous archive: the outcome is
 * CHANGED, the grid and settings agree, the previous archive holds the tile, and its recorded
 * inputs are exactly the new ones, none of them changed. Thread-safe after plan. */
TERRA_API bool terra_cook_cache_reusable(const terra_cook_cache *c, terra_tile_key key);
/* Copies tile `key`'s stored payload and index values from the previous archive into `w`
 * (terra_archive_writer_add_stored: no decompression, no re-encoding). Thread-safe after plan.
 * TERRA_E_INVALID when the tile is not reusable; the archive's errors (TERRA_E_CORRUPT...) as is. */
TERRA_API terra_status terra_cook_cache_copy_tile(const terra_cook_cache *c, terra_tile_key key, terra_archive_writer *w);
/* The geometric error the previous archive's index states for reusable tile `key` (what copy_tile
 * copies; the cook needs it for the tile's parent). Thread-safe after plan. TERRA_E_INVALID when the
 * tile is not reusable; the archive's errors as is. */
TERRA_API terra_status terra_cook_cache_stated_error(const terra_cook_cache *c, terra_tile_key key, double *out);

/* ---- finest meshes kept for the next cook ------------------------------------------------------ */

/* Keeps finest tile (tx, ty)'s mesh exactly as it is (positions, heights, normals and materials
 * when present, triangles) and its error, for the next cook. Call it for every finest tile the
 * cook has, made or loaded. Thread-safe after plan (blobs go to a temporary beside the store, put
 * in place by commit). TERRA_E_INVALID for a tile that was not planned; a failure to write
 * (TERRA_E_IO, TERRA_E_NOMEM) means only that no meshes are kept this time: the cook goes on. */
TERRA_API terra_status terra_cook_cache_keep_finest(terra_cook_cache *c, int32_t tx, int32_t ty, const terra_cook_mesh *m,
                                          double error);
/* The mesh the previous cook kept for finest tile (tx, ty), into *out (an empty mesh, grown with
 * terra_cook_mesh_reserve: what make_finest hands over) and *error, when the tile is reusable.
 * TERRA_E_NOT_FOUND when it is not reusable or no mesh was kept for it; TERRA_E_CORRUPT (and a
 * warning) when the kept one is damaged: either way the driver makes the tile from its sources.
 * Thread-safe after plan. */
TERRA_API terra_status terra_cook_cache_load_finest(const terra_cook_cache *c, int32_t tx, int32_t ty, terra_cook_mesh *out,
                                          double *error);

/* After the new archive is in place at `output` (terra_archive_writer_finish succeeded): closes
 * the previous archive, puts the kept finest meshes in place, and writes the record of the new
 * archive (the directory is created if need be), its tiles' inputs from the plan. Every tile of
 * the new archive must have been planned: TERRA_E_INVALID naming the first that was not (or a
 * finest tile kept twice); TERRA_E_IO when the record cannot be written
 * (then there is no record and the next cook starts afresh; the archive itself is good). */
TERRA_API terra_status terra_cook_cache_commit(terra_cook_cache *c);
TERRA_API void terra_cook_cache_close(terra_cook_cache *c);

/* Where the record of the archive at `output` is kept with cache directory `dir` (NULL: the
 * default): *out (terra_free) is DIR/NAME.record. */
TERRA_API terra_status terra_cook_cache_record_path(const char *dir, const char *output, char **out);

#ifdef __cplusplus
}
#endif
#endif
