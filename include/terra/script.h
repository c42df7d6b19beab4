/* terra script: the ground written in Lua (LuaJIT), as a source.
 *
 * A script is a Lua file that returns the ground's table:
 *
 *     return {
 *       height = function(x, z) return 60 * terra.fbm(x / 900, z / 900) end,  -- metres; required
 *       layer  = function(x, z) if math.abs(z) < 4 then return "asphalt" end end, -- a surface name, or nil
 *       layers = { asphalt = { tint = { 0.06, 0.06, 0.07 } }, grass = { tint = { 0.3, 0.45, 0.2 } } },
 *       range  = function(x0, z0, x1, z1) return -60, 60 end, -- a conservative min and max there
 *       min_height = -60, max_height = 60,  -- a global bound: required without range
 *     }
 *
 * A source without a sound range is refused: either range, or both min_height and max_height, must
 * be given, and every height is checked against it (source.h). `layer` names surfaces: "grass",
 * "rock", "snow" and "sand" are the built-in ids, the names `layers` describes get ids from
 * TERRA_SURFACE_FIRST_USER in the order of their names, and any other name the next id free on first
 * use; nil names none (drawn by height and slope). `layers` is shaped like a baked landscape's layer
 * table: { name = { tint = { r, g, b }, albedo = path, normal = path, mask = path, tiling = metres } },
 * or an array of names and { name = ..., tint = ... } entries; texture paths are relative to the
 * script's folder, and unless trusted must be regular files under it (as modules: see Sandbox).
 *
 * Built-ins, in the global table `terra`, each a call into terra's C code (through LuaJIT's FFI, so
 * traces compile through them):
 *   terra.noise(x, z [, seed])                                  value noise on a unit lattice, [-1, 1]
 *   terra.fbm(x, z [, octaves, lacunarity, gain, seed])          fractal sum of it, [-1, 1] (5, 2, 0.5, 0)
 *   terra.ridged(x, z [, octaves, lacunarity, gain, seed])       ridged sum, [0, 1]
 *   terra.world(x, z)                the default world's height there (its seed: the desc's world_seed)
 *   terra.world_layer(x, z)          the default world's surface name there ("grass", ...), or nil
 *   terra.world_range(x0, z0, x1, z1)  a conservative min and max of the default world there
 *   terra.WORLD_MIN, terra.WORLD_MAX   the default world's global bound
 * so a script can carve a road into the default world and give a tight range for it.
 *
 * `require` finds modules under the script's folder (name "a.b": a/b.lua or a/b/init.lua; a file whose
 * real path leaves the folder, or that is not a regular file, is refused), and those are watched
 * (terra_script_changed).
 *
 * Sandbox. A script is code from whoever made the world, so unless the desc says `trusted` it gets
 * only what cannot reach the process or the file system: the base functions, string, table, math,
 * bit, coroutine, os.time and os.clock, `terra`, `require` as above, `print` (to terra_log, INFO) and
 * `load`/`loadstring` of source text. io, ffi, debug, jit, package, module, dofile, loadfile,
 * getfenv, setfenv, newproxy, string.dump, the rest of os, bytecode (a compiled chunk, which can crash
 * the VM: refused in `load`, in `require` and as the script itself) and every other module are
 * refused, each with an error naming what was refused and where. `trusted` opens all of LuaJIT's
 * libraries (and logs, WARN, that the script is trusted); the limits below hold either way.
 *
 * Limits. Errors, at load or in any call, carry the file:line of the script (or module) where they
 * rose; a call that fails fails the grid or query it served (TERRA_E_SOURCE), and nothing else.
 *  - Time: a call that runs longer than the time limit is stopped there (TERRA_E_SOURCE, "FILE:LINE:
 *    a call ran past its time limit of T s"). Interpreted code is stopped by a hook at its next
 *    instruction and the state is closed; compiled code (LuaJIT's traces never look at hooks) and C
 *    functions are stopped by a real-time signal, TERRA_SCRIPT_SIGNAL, whose handler the first
 *    terra_script_open installs for the process, and the line named is where the compiled loop
 *    starts (x86-64 and arm64; elsewhere, and in a C function the interpreter called, the line where
 *    height, layer or range starts); that state is abandoned (its memory is not freed: an interrupted state cannot
 *    be closed safely). Either way a fresh state is loaded for the next call. Once the states abandoned
 *    hold more than the memory limit in all, every later call fails at once (TERRA_E_SOURCE, "calls
 *    refused", naming where the first was stopped) until the script is opened again.
 *  - Memory: each Lua state (one per thread calling at once) may hold up to the memory limit,
 *    garbage not yet collected included. Past half of it the script is stopped at its next
 *    interpreted instruction; an allocation past the limit itself is refused. Either fails the call
 *    ("FILE:LINE: the script ran past its memory limit of N MiB", the line where a compiled loop
 *    starts when it was one; a single allocation too large from a C function names where the
 *    function the call ran starts) and closes the state. string.rep is refused up front, at its
 *    line, when its result would not fit in what is left.
 *  - Recursion: Lua recursion ends in LuaJIT's "stack overflow", with the place; recursion through C
 *    functions that call back into Lua (string.gsub, string.format, table.sort, coroutines, load,
 *    print, os.time) is refused ("calls nested too deeply", at the line) once it has used 1 MiB of C
 *    stack or comes within a quarter of the thread's stack (at most 256 KiB) of its end, so it never
 *    overflows the C stack.
 * The state's memory comes from LuaJIT's own allocator, not terra_set_allocator's: a call stopped by
 * the signal may be inside an allocation, and only a per-state allocator makes that harmless.
 */
/* Threads: the source's callbacks may run on any number of threads at once (source.h): each call
 * takes a Lua state of its own (one per thread calling at once, loaded from the file when first
 * needed; states share nothing but the surface ids). terra_script_changed may run concurrently with
 * the callbacks. terra_script_close must not overlap any use of the script or its source. */
#ifndef TERRA_SCRIPT_H
#define TERRA_SCRIPT_H

#include "terra/source.h"
#include "terra/surface.h"

#include <signal.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TERRA_SCRIPT_SIGNAL (SIGRTMIN + 4) /* <signal.h> */
#define TERRA_SCRIPT_DEFAULT_TIME_LIMIT_S 2.0
#define TERRA_SCRIPT_DEFAULT_MEMORY_LIMIT ((size_t)256 << 20) /* bytes per Lua state */
#define TERRA_SCRIPT_MIN_MEMORY_LIMIT (4 << 20)               /* a state with the built-ins takes ~100 KiB */

typedef struct terra_script_desc {
    const char *path;     /* the Lua file; required */
    uint64_t world_seed;  /* the seed of terra.world (0 is a valid seed) */
    double time_limit_s;  /* how long one call (a grid, a point, a range, the load) may run; 0 = 2 s */
    size_t memory_limit_bytes; /* what each Lua state may hold; 0 = 256 MiB, else at least 4 MiB */
    bool trusted;         /* all of LuaJIT's libraries (the command line's --trust-script): only for a
                             script the user wrote or trusts as a program; logged */
} terra_script_desc;

typedef struct terra_script terra_script;

/* Loads the script once to check it: it must return a table with a height function and a sound
 * range, each field of the right type. Fails with TERRA_E_NOT_FOUND / TERRA_E_IO when the file cannot
 * be read, TERRA_E_SOURCE with the script's file:line for a Lua error, a refusal of the sandbox or a
 * limit passed, TERRA_E_INVALID naming the field for a table of the wrong shape or a limit out of
 * range. */
TERRA_API terra_status terra_script_open(const terra_script_desc *desc, terra_script **out);
TERRA_API void terra_script_close(terra_script *s);
/* The ground the script describes; owned by the script. */
TERRA_API terra_source *terra_script_source(terra_script *s);
/* What its `layers` say each surface looks like; NULL when the script has no `layers`. */
TERRA_API const terra_surface_table *terra_script_surfaces(const terra_script *s);
/* Whether the file, or a file of a module it required while loading, has changed (modification
 * time or size) since terra_script_open read it: the cue to open it again (hot reload). */
TERRA_API bool terra_script_changed(const terra_script *s);
/* How many calls (and loads) were stopped at the time limit so far. */
TERRA_API int terra_script_timeouts(const terra_script *s);

#ifdef __cplusplus
}
#endif
#endif
