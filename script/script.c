/* terra script: a source whose ground is a LuaJIT script (script.h).
 *
 * Each call takes a Lua state of its own from a small set (created and loaded from the file the first
 * time one more thread calls at once) and runs a driver written in Lua: its loops over a grid compile
 * together with the script's height function, and the built-ins are FFI calls into C, so a grid runs
 * as one trace. A watchdog thread stops a call past its deadline with a signal whose handler jumps
 * back to the call's start; the state it ran in is abandoned. */
#include "terra/script.h"

#include <errno.h>
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define MAX_STATES 64 /* threads calling one script at once */
#define MAX_FILES 64  /* the script and the modules it requires, watched for changes */

typedef struct lstate {
    lua_State *L;    /* NULL: not loaded yet, or abandoned */
    bool busy;       /* taken by a call (the fields below are then that call's) */
    bool timed_out;  /* the call was stopped at its deadline */
    pthread_t thread;
    double deadline; /* terra_now_s() */
} lstate;

typedef struct watched {
    char *path;
    struct timespec mtime;
    off_t size;
} watched;

struct terra_script {
    char *path, *dir;
    double limit_s;
    terra_source *world, *src;
    terra_surface_table *surfaces;
    bool has_layer, has_range;
    pthread_mutex_t lock; /* guards states, names, stop */
    pthread_cond_t freed, wake;
    lstate states[MAX_STATES];
    char *names[256]; /* surface id -> name (NULL: no name yet) */
    watched files[MAX_FILES];
    int nfiles, timeouts;
    atomic_int point_errors; /* failed point calls (logged: they have no error to return) */
    pthread_t watchdog;
    bool watchdog_started, stop;
};

/* ---- stopping a call at its deadline ------------------------------------------------------------ */

static _Thread_local sigjmp_buf *tl_jump;
static _Thread_local volatile sig_atomic_t tl_armed;

static void on_stop_signal(int sig) {
    (void)sig;
    if (tl_armed) {
        tl_armed = 0;
        siglongjmp(*tl_jump, 1);
    }
}

static pthread_once_t handler_once = PTHREAD_ONCE_INIT;
static int handler_error;
static void install_handler(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    handler_error = sigaction(TERRA_SCRIPT_SIGNAL, &sa, NULL) ? errno : 0;
}

static struct timespec abs_time(double t_now_s) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    const double at = (double)ts.tv_sec + ts.tv_nsec * 1e-9 + t_now_s;
    ts.tv_sec = (time_t)at;
    ts.tv_nsec = (long)((at - (double)ts.tv_sec) * 1e9);
    return ts;
}

/* Signals every call past its deadline, again each round until it has let go of its state (a
 * signal that lands while the call has disarmed itself is lost). */
static void *watchdog_main(void *arg) {
    terra_script *s = arg;
    pthread_mutex_lock(&s->lock);
    while (!s->stop) {
        const double now = terra_now_s();
        double next = INFINITY;
        for (int i = 0; i < MAX_STATES; i++) {
            lstate *ls = &s->states[i];
            if (!ls->busy) continue;
            if (ls->deadline <= now) {
                ls->timed_out = true;
                pthread_kill(ls->thread, TERRA_SCRIPT_SIGNAL);
                next = fmin(next, now + 0.02);
            } else {
                next = fmin(next, ls->deadline);
            }
        }
        if (isinf(next)) {
            pthread_cond_wait(&s->wake, &s->lock);
        } else {
            struct timespec ts = abs_time(next - now + 0.001);
            pthread_cond_timedwait(&s->wake, &s->lock, &ts);
        }
    }
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

/* lua_pcall, stopped at the call's deadline: the Lua status, or -1 when it was stopped. */
static int guarded_pcall(lua_State *L, int nargs, int nres) {
    sigjmp_buf jump;
    if (sigsetjmp(jump, 1)) return -1;
    tl_jump = &jump;
    tl_armed = 1;
    const int rc = lua_pcall(L, nargs, nres, 0);
    tl_armed = 0;
    return rc;
}

/* ---- what scripts call ---------------------------------------------------------------------------- */

static const char *const builtin_names[] = {[TERRA_SURFACE_GRASS] = "grass", [TERRA_SURFACE_ROCK] = "rock",
                                            [TERRA_SURFACE_SNOW] = "snow", [TERRA_SURFACE_SAND] = "sand"};

static int world_range(const terra_source *w, double x0, double z0, double x1, double z1, float *out) {
    return terra_source_height_range(w, fmin(x0, x1), fmin(z0, z1), fmax(x0, x1), fmax(z0, z1), &out[0], &out[1]);
}

/* The id of a surface name (terra.assign(name)): the one it has, or the next free one. */
static int l_assign(lua_State *L) {
    terra_script *s = lua_touserdata(L, lua_upvalueindex(1));
    const char *name = luaL_checkstring(L, 1);
    const sig_atomic_t armed = tl_armed;
    tl_armed = 0; /* never stopped holding the lock */
    int id = -1;
    pthread_mutex_lock(&s->lock);
    for (int i = 1; i < 256 && id < 0; i++)
        if (s->names[i] && !strcmp(s->names[i], name)) id = i;
    for (int i = TERRA_SURFACE_FIRST_USER; i < 256 && id < 0; i++)
        if (!s->names[i] && (s->names[i] = strdup(name))) id = i;
    pthread_mutex_unlock(&s->lock);
    tl_armed = armed;
    if (id < 0) return luaL_error(L, "%s: more surface names than the 240 ids terra has (at '%s')", s->path, name);
    lua_pushinteger(L, id);
    return 1;
}

static int l_print(lua_State *L) {
    const sig_atomic_t armed = tl_armed;
    tl_armed = 0; /* never stopped holding stderr's lock */
    const int n = lua_gettop(L);
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    for (int i = 1; i <= n; i++) {
        lua_getglobal(L, "tostring");
        lua_pushvalue(L, i);
        lua_call(L, 1, 1);
        if (i > 1) luaL_addchar(&b, '\t');
        luaL_addvalue(&b);
    }
    luaL_pushresult(&b);
    terra_log(TERRA_LOG_INFO, "%s", lua_tostring(L, -1));
    tl_armed = armed;
    return 0;
}

/* The built-ins and the driver, run in each state with (C pointers, the ground's table, the script's
 * name, the surface ids known, assign); returns grid, point, surface, range. */
static const char driver_lua[] =
    "local P, T, name, ids, assign = ...\n"
    "local ffi = require('ffi')\n"
    "local type, tostring, format, error = type, tostring, string.format, error\n"
    "local noise_f = ffi.cast('float (*)(uint64_t, double, double)', P.noise)\n"
    "local fbm_f = ffi.cast('float (*)(uint64_t, double, double, int, double, double)', P.fbm)\n"
    "local ridged_f = ffi.cast('float (*)(uint64_t, double, double, int, double, double)', P.ridged)\n"
    "local wh = ffi.cast('float (*)(const void *, double, double)', P.world_height)\n"
    "local ws = ffi.cast('uint8_t (*)(const void *, double, double)', P.world_surface)\n"
    "local wr = ffi.cast('int (*)(const void *, double, double, double, double, float *)', P.world_range)\n"
    "local W = ffi.cast('const void *', P.world)\n"
    "local wnames = {'grass', 'rock', 'snow', 'sand'}\n"
    "terra = {\n"
    "  noise = function(x, z, seed) return noise_f(seed or 0, x, z) end,\n"
    "  fbm = function(x, z, o, l, g, seed) return fbm_f(seed or 0, x, z, o or 5, l or 2, g or 0.5) end,\n"
    "  ridged = function(x, z, o, l, g, seed) return ridged_f(seed or 0, x, z, o or 5, l or 2, g or 0.5) end,\n"
    "  world = function(x, z) return wh(W, x, z) end,\n"
    "  world_layer = function(x, z) return wnames[ws(W, x, z)] end,\n"
    "  world_range = function(x0, z0, x1, z1)\n"
    "    local b = ffi.new('float[2]')\n"
    "    if wr(W, x0, z0, x1, z1, b) ~= 0 then error(format('terra.world_range(%g, %g, %g, %g) failed', x0, z0, x1, z1), 2) end\n"
    "    return b[0], b[1]\n"
    "  end,\n"
    "  WORLD_MIN = P.world_min, WORLD_MAX = P.world_max,\n"
    "}\n"
    "if T == nil then return end\n"
    "local height, layer, range = T.height, T.layer, T.range\n"
    "local function bad(what, x, z, v)\n"
    "  error(format('%s: %s(%.17g, %.17g) gave %s, not a number', name, what, x, z, tostring(v)), 0)\n"
    "end\n"
    "local function id_of(n)\n"
    "  if n == nil then return 0 end\n"
    "  local id = ids[n]\n"
    "  if id then return id end\n"
    "  if type(n) ~= 'string' then error(format('%s: layer gave %s, not a surface name', name, tostring(n)), 0) end\n"
    "  id = assign(n)\n"
    "  ids[n] = id\n"
    "  return id\n"
    "end\n"
    "local function grid(hp, sp, ix0, iz0, spacing, nx, nz)\n"
    "  local h = ffi.cast('float *', hp)\n"
    "  local k = 0\n"
    "  for j = 0, nz - 1 do\n"
    "    local z = (iz0 + j) * spacing\n"
    "    for i = 0, nx - 1 do\n"
    "      local x = (ix0 + i) * spacing\n"
    "      local v = height(x, z)\n"
    "      if type(v) ~= 'number' then bad('height', x, z, v) end\n"
    "      h[k] = v\n"
    "      k = k + 1\n"
    "    end\n"
    "  end\n"
    "  if sp == nil then return end\n"
    "  local s = ffi.cast('uint8_t *', sp)\n"
    "  k = 0\n"
    "  for j = 0, nz - 1 do\n"
    "    local z = (iz0 + j) * spacing\n"
    "    for i = 0, nx - 1 do\n"
    "      s[k] = layer and id_of(layer((ix0 + i) * spacing, z)) or 0\n"
    "      k = k + 1\n"
    "    end\n"
    "  end\n"
    "end\n"
    "local function point(x, z)\n"
    "  local v = height(x, z)\n"
    "  if type(v) ~= 'number' then bad('height', x, z, v) end\n"
    "  return v\n"
    "end\n"
    "local function surface(x, z) return layer and id_of(layer(x, z)) or 0 end\n"
    "local function ranged(x0, z0, x1, z1)\n"
    "  local lo, hi = range(x0, z0, x1, z1)\n"
    "  if type(lo) ~= 'number' or type(hi) ~= 'number' then\n"
    "    error(format('%s: range(%.17g, %.17g, %.17g, %.17g) gave %s, %s, not two numbers', name, x0, z0, x1, z1,\n"
    "                 tostring(lo), tostring(hi)), 0)\n"
    "  end\n"
    "  return lo, hi\n"
    "end\n"
    "return grid, point, surface, ranged\n";

enum { REF_GRID = 1, REF_POINT, REF_SURFACE, REF_RANGE }; /* the driver's functions, in L's registry */

/* A C function's address as FFI casts it from a light userdata (POSIX: the same bits). */
static void *fn_address(void (*f)(void)) {
    void *p;
    memcpy(&p, &f, sizeof p);
    return p;
}

static void push_pointers(lua_State *L, terra_script *s) {
    lua_createtable(L, 0, 10);
#define FN(name, f)                                                                                                    \
    lua_pushlightuserdata(L, fn_address((void (*)(void))(f)));                                                        \
    lua_setfield(L, -2, name)
    FN("noise", terra_noise);
    FN("fbm", terra_fbm);
    FN("ridged", terra_ridged);
    FN("world_height", terra_source_height_raw);
    FN("world_surface", terra_source_surface_raw);
    FN("world_range", world_range);
#undef FN
    lua_pushlightuserdata(L, s->world);
    lua_setfield(L, -2, "world");
    lua_pushnumber(L, TERRA_WORLD_MIN_HEIGHT);
    lua_setfield(L, -2, "world_min");
    lua_pushnumber(L, TERRA_WORLD_MAX_HEIGHT);
    lua_setfield(L, -2, "world_max");
}

/* The message on top of L's stack, as the error of a failed call. */
static terra_status lua_failure(terra_script *s, lua_State *L, int rc) {
    if (rc < 0)
        return terra_fail(TERRA_E_SOURCE, "%s: a call ran past its time limit of %g s (a loop that never ends?)",
                          s->path, s->limit_s);
    const char *msg = lua_tostring(L, -1);
    terra_status st = terra_fail(rc == LUA_ERRMEM ? TERRA_E_NOMEM : TERRA_E_SOURCE, "%s", msg ? msg : "(an error that is not a string)");
    lua_pop(L, 1);
    return st;
}

/* A new state: libraries, `require` beside the script, the file run, the driver over its table. */
static terra_status state_load(terra_script *s, lstate *ls) {
    lua_State *L = luaL_newstate();
    if (!L) return terra_fail(TERRA_E_NOMEM, "%s: no memory for a Lua state", s->path);
    ls->L = L;
    luaL_openlibs(L);
    lua_pushcfunction(L, l_print);
    lua_setglobal(L, "print");
    lua_getglobal(L, "package");
    lua_pushfstring(L, "%s/?.lua;%s/?/init.lua;", s->dir, s->dir);
    lua_getfield(L, -2, "path");
    lua_concat(L, 2);
    lua_setfield(L, -2, "path");
    lua_pop(L, 1);
    /* the built-ins first (the script's top level may call them) */
    if (luaL_loadbuffer(L, driver_lua, sizeof driver_lua - 1, "=terra driver")) return lua_failure(s, L, LUA_ERRSYNTAX);
    lua_pushvalue(L, -1);
    push_pointers(L, s);
    int rc = lua_pcall(L, 1, 0, 0);
    if (rc) return lua_failure(s, L, rc);
    const int driver = lua_gettop(L);
    rc = luaL_loadfile(L, s->path);
    if (rc == LUA_ERRFILE) {
        const char *msg = lua_tostring(L, -1);
        return terra_fail(TERRA_E_NOT_FOUND, "%s", msg ? msg : s->path);
    }
    if (rc) return lua_failure(s, L, rc);
    if ((rc = guarded_pcall(L, 0, 1))) return lua_failure(s, L, rc);
    if (!lua_istable(L, -1))
        return terra_fail(TERRA_E_INVALID, "%s: the script returns %s, not the ground's table { height = function(x, z) ... end }",
                          s->path, luaL_typename(L, -1));
    const int T = lua_gettop(L);
    lua_pushvalue(L, driver);
    push_pointers(L, s);
    lua_pushvalue(L, T);
    lua_pushstring(L, s->path);
    lua_createtable(L, 0, 16); /* the ids known now */
    pthread_mutex_lock(&s->lock);
    for (int i = 1; i < 256; i++)
        if (s->names[i]) {
            lua_pushinteger(L, i);
            lua_setfield(L, -2, s->names[i]);
        }
    pthread_mutex_unlock(&s->lock);
    lua_pushlightuserdata(L, s);
    lua_pushcclosure(L, l_assign, 1);
    if ((rc = lua_pcall(L, 5, 4, 0))) return lua_failure(s, L, rc);
    for (int r = REF_RANGE; r >= REF_GRID; r--) lua_rawseti(L, LUA_REGISTRYINDEX, r);
    lua_settop(L, T); /* the table stays below: state_check reads it */
    return TERRA_OK;
}

/* ---- the set of states ------------------------------------------------------------------------------ */

static lstate *acquire(terra_script *s, terra_status *st) {
    pthread_mutex_lock(&s->lock);
    lstate *ls = NULL;
    for (;;) {
        for (int i = 0; i < MAX_STATES && !ls; i++)
            if (!s->states[i].busy && s->states[i].L) ls = &s->states[i];
        for (int i = 0; i < MAX_STATES && !ls; i++)
            if (!s->states[i].busy) ls = &s->states[i];
        if (ls) break;
        pthread_cond_wait(&s->freed, &s->lock);
    }
    ls->busy = true;
    ls->timed_out = false;
    ls->thread = pthread_self();
    ls->deadline = terra_now_s() + s->limit_s;
    pthread_cond_signal(&s->wake);
    pthread_mutex_unlock(&s->lock);
    *st = ls->L ? TERRA_OK : state_load(s, ls); /* a new state has the ground's table on its stack */
    return ls;
}

/* Lets go of a state; one stopped at its deadline (or whose load failed) is abandoned. */
static void release(terra_script *s, lstate *ls, bool keep) {
    pthread_mutex_lock(&s->lock);
    if (ls->timed_out) s->timeouts++;
    if (!keep || ls->timed_out) {
        if (ls->L && !ls->timed_out) lua_close(ls->L); /* a stopped state cannot be closed safely */
        ls->L = NULL;
    }
    ls->busy = false;
    pthread_cond_signal(&s->freed);
    pthread_mutex_unlock(&s->lock);
}

/* Runs the driver's function `ref` in a state of its own: for the grid, p0 and p1 (heights,
 * surfaces or NULL) first, then args[nargs]; its first nres results go to res. */
static terra_status call(terra_script *s, int ref, int nargs, const double *args, void *p0, void *p1, int nres,
                         double *res) {
    terra_status st;
    lstate *ls = acquire(s, &st);
    if (st) {
        release(s, ls, false);
        return st;
    }
    lua_State *L = ls->L;
    lua_settop(L, 0);
    lua_rawgeti(L, LUA_REGISTRYINDEX, ref);
    int n = 0;
    if (ref == REF_GRID) {
        lua_pushlightuserdata(L, p0);
        if (p1) lua_pushlightuserdata(L, p1);
        else lua_pushnil(L);
        n = 2;
    }
    for (int i = 0; i < nargs; i++) lua_pushnumber(L, args[i]);
    const int rc = guarded_pcall(L, n + nargs, nres);
    if (rc) {
        st = lua_failure(s, L, rc);
    } else {
        for (int i = 0; i < nres; i++) res[i] = lua_tonumber(L, i - nres);
        lua_settop(L, 0);
    }
    release(s, ls, rc >= 0);
    return st;
}

/* ---- the source's callbacks --------------------------------------------------------------------------- */

static terra_status script_grid(void *user, const terra_grid_request *r, float *heights, terra_surface *surfaces) {
    terra_script *s = user;
    const double args[5] = {(double)r->ix0, (double)r->iz0, r->spacing, r->nx, r->nz};
    terra_status st = call(s, REF_GRID, 5, args, heights, s->has_layer ? surfaces : NULL, 0, NULL);
    if (st == TERRA_OK && surfaces && !s->has_layer) memset(surfaces, 0, (size_t)r->nx * (size_t)r->nz);
    return st;
}

/* A point call has no error to return (its NaN fails the query that asked): the first few are logged. */
static void point_failed(terra_script *s) {
    if (atomic_fetch_add(&s->point_errors, 1) < 5) terra_log(TERRA_LOG_WARN, "%s", terra_last_error());
}

static float script_height(void *user, double x, double z) {
    double v = NAN, args[2] = {x, z};
    if (call(user, REF_POINT, 2, args, NULL, NULL, 1, &v) != TERRA_OK) point_failed(user);
    return (float)v;
}

static terra_surface script_surface(void *user, double x, double z) {
    double v = 0, args[2] = {x, z};
    if (call(user, REF_SURFACE, 2, args, NULL, NULL, 1, &v) != TERRA_OK) point_failed(user);
    return (terra_surface)v;
}

static terra_status script_range(void *user, double x0, double z0, double x1, double z1, float *lo, float *hi) {
    double args[4] = {x0, z0, x1, z1}, v[2];
    terra_status st = call(user, REF_RANGE, 4, args, NULL, NULL, 2, v);
    if (st) return st;
    *lo = (float)v[0], *hi = (float)v[1];
    return TERRA_OK;
}

/* ---- opening: the table checked, the surfaces named, the files watched ---------------------------------- */

static bool file_stat(const char *path, struct timespec *mtime, off_t *size) {
    struct stat sb;
    if (stat(path, &sb)) return false;
    *mtime = sb.st_mtim;
    *size = sb.st_size;
    return true;
}

static void watch(terra_script *s, const char *path) {
    if (s->nfiles == MAX_FILES) return;
    for (int i = 0; i < s->nfiles; i++)
        if (!strcmp(s->files[i].path, path)) return;
    watched *w = &s->files[s->nfiles];
    if (!file_stat(path, &w->mtime, &w->size) || !(w->path = strdup(path))) return;
    s->nfiles++;
}

/* The files of the modules the script required: package.loaded's names found on package.path. */
static void watch_modules(terra_script *s, lua_State *L) {
    const int top = lua_gettop(L);
    lua_getglobal(L, "package");
    lua_getfield(L, -1, "loaded");
    lua_pushnil(L);
    while (lua_next(L, -2)) {
        lua_pop(L, 1);
        if (lua_type(L, -1) == LUA_TSTRING) {
            lua_getfield(L, top + 1, "searchpath");
            lua_pushvalue(L, -2);
            lua_getfield(L, top + 1, "path");
            if (lua_pcall(L, 2, 1, 0) == 0 && lua_isstring(L, -1)) watch(s, lua_tostring(L, -1));
            lua_pop(L, 1);
        }
    }
    lua_settop(L, top);
}

static bool name_surface(terra_script *s, const char *name) {
    for (int i = 1; i < 256; i++)
        if (s->names[i] && !strcmp(s->names[i], name)) return true;
    for (int i = TERRA_SURFACE_FIRST_USER; i < 256; i++)
        if (!s->names[i]) return (s->names[i] = strdup(name)) != NULL;
    return false;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static terra_surface id_of(const terra_script *s, const char *name) {
    for (int i = 1; i < 256; i++)
        if (s->names[i] && !strcmp(s->names[i], name)) return (terra_surface)i;
    return TERRA_SURFACE_NONE;
}

/* A texture path of a look: relative ones are the script's folder's. */
static char *look_path(const terra_script *s, lua_State *L, int look, const char *field) {
    if (!lua_istable(L, look)) return NULL;
    lua_getfield(L, look, field);
    const char *p = lua_isstring(L, -1) ? lua_tostring(L, -1) : NULL;
    char *out = NULL;
    if (p) {
        const size_t n = strlen(s->dir) + strlen(p) + 2;
        if ((out = malloc(n))) snprintf(out, n, "%s%s%s", p[0] == '/' ? "" : s->dir, p[0] == '/' ? "" : "/", p);
    }
    lua_pop(L, 1);
    return out;
}

/* One entry of `layers` (its look at the top of L's stack) into the surface table. */
static terra_status describe(terra_script *s, lua_State *L, const char *name) {
    const int look = lua_gettop(L);
    terra_surface_look lk = {.tint = {1, 1, 1}};
    if (lua_istable(L, look)) {
        lua_getfield(L, look, "tint");
        if (lua_istable(L, -1))
            for (int c = 0; c < 3; c++) {
                lua_rawgeti(L, -1, c + 1);
                if (!lua_isnumber(L, -1)) {
                    return terra_fail(TERRA_E_INVALID, "%s: layers.%s.tint wants three numbers { r, g, b } from 0 to 1",
                                      s->path, name);
                }
                lk.tint[c] = (float)lua_tonumber(L, -1);
                lua_pop(L, 1);
            }
        lua_pop(L, 1);
        lua_getfield(L, look, "tiling");
        lk.tiling_m = (float)lua_tonumber(L, -1);
        lua_pop(L, 1);
    }
    char *albedo = look_path(s, L, look, "albedo"), *normal = look_path(s, L, look, "normal"),
         *mask = look_path(s, L, look, "mask");
    lk.albedo = albedo, lk.normal = normal, lk.mask = mask;
    terra_status st = terra_surface_table_set(s->surfaces, id_of(s, name), &lk);
    free(albedo), free(normal), free(mask);
    return st;
}

/* `layers`: { name = look, ... } or { "name", { name = ..., tint = ... }, ... }. Names get their ids
 * in sorted order, then each is described. */
static terra_status read_layers(terra_script *s, lua_State *L, int T) {
    lua_getfield(L, T, "layers");
    if (lua_isnil(L, -1)) return TERRA_OK;
    if (!lua_istable(L, -1)) return terra_fail(TERRA_E_INVALID, "%s: layers is a %s, not a table", s->path, luaL_typename(L, -1));
    const int layers = lua_gettop(L);
    char *names[256];
    int n = 0;
    terra_status st = TERRA_OK;
    lua_pushnil(L);
    while (!st && lua_next(L, layers)) {
        const char *name = NULL;
        if (lua_type(L, -2) == LUA_TSTRING) name = lua_tostring(L, -2);
        else if (lua_type(L, -1) == LUA_TSTRING) name = lua_tostring(L, -1);
        else if (lua_istable(L, -1)) {
            lua_getfield(L, -1, "name");
            name = lua_isstring(L, -1) ? lua_tostring(L, -1) : NULL;
            lua_pop(L, 1);
        }
        if (!name) st = terra_fail(TERRA_E_INVALID, "%s: an entry of layers has no name", s->path);
        else if (n == 240) st = terra_fail(TERRA_E_INVALID, "%s: layers names more than 240 surfaces", s->path);
        else if (!(names[n++] = strdup(name))) st = terra_fail(TERRA_E_NOMEM, "%s: out of memory", s->path);
        lua_pop(L, 1);
    }
    qsort(names, (size_t)n, sizeof *names, cmp_str);
    for (int i = 0; !st && i < n; i++)
        if (!name_surface(s, names[i])) st = terra_fail(TERRA_E_NOMEM, "%s: out of memory", s->path);
    for (int i = 0; i < n; i++) free(names[i]);
    if (!st) st = terra_surface_table_create(&s->surfaces);
    lua_pushnil(L);
    while (!st && lua_next(L, layers)) {
        if (lua_type(L, -2) == LUA_TSTRING) {
            st = describe(s, L, lua_tostring(L, -2));
        } else if (lua_istable(L, -1)) {
            lua_getfield(L, -1, "name");
            char *name = strdup(lua_tostring(L, -1));
            lua_pop(L, 1);
            st = name ? describe(s, L, name) : terra_fail(TERRA_E_NOMEM, "%s: out of memory", s->path);
            free(name);
        } else {
            lua_pushnil(L); /* a bare name: described by its own colour */
            st = describe(s, L, lua_tostring(L, -2));
            lua_pop(L, 1);
        }
        lua_settop(L, layers + 1); /* the key, for lua_next */
    }
    lua_settop(L, layers - 1);
    return st;
}

/* The ground's table (at T): height a function, the others of their types, a sound range. */
static terra_status check_table(terra_script *s, lua_State *L, int T, float *lo, float *hi) {
    static const struct {
        const char *field;
        int type;
        const char *what;
    } fields[] = {{"height", LUA_TFUNCTION, "function(x, z) -> metres"},
                  {"layer", LUA_TFUNCTION, "function(x, z) -> a surface name"},
                  {"range", LUA_TFUNCTION, "function(x0, z0, x1, z1) -> min, max"},
                  {"min_height", LUA_TNUMBER, "number (metres)"},
                  {"max_height", LUA_TNUMBER, "number (metres)"}};
    bool have[5];
    for (int i = 0; i < 5; i++) {
        lua_getfield(L, T, fields[i].field);
        have[i] = !lua_isnil(L, -1);
        if (!have[i] && i == 0)
            return terra_fail(TERRA_E_INVALID, "%s: the ground's table has no height (a %s)", s->path, fields[i].what);
        if (have[i] && lua_type(L, -1) != fields[i].type)
            return terra_fail(TERRA_E_INVALID, "%s: the ground's %s is a %s, not a %s", s->path, fields[i].field,
                              luaL_typename(L, -1), fields[i].what);
        if (i == 3) *lo = (float)lua_tonumber(L, -1);
        if (i == 4) *hi = (float)lua_tonumber(L, -1);
        lua_pop(L, 1);
    }
    s->has_layer = have[1], s->has_range = have[2];
    if (!have[2] && !(have[3] && have[4]))
        return terra_fail(TERRA_E_INVALID,
                          "%s: the ground states no height range: give range = function(x0, z0, x1, z1) returning a "
                          "conservative min and max there, or min_height and max_height",
                          s->path);
    if (have[3] && have[4] && !(isfinite(*lo) && isfinite(*hi) && *lo < *hi))
        return terra_fail(TERRA_E_INVALID, "%s: min_height %g and max_height %g are not a range", s->path, *lo, *hi);
    return TERRA_OK;
}

static terra_status first_load(terra_script *s, float *lo, float *hi) {
    terra_status st;
    lstate *ls = acquire(s, &st);
    if (!st) {
        lua_State *L = ls->L;
        const int T = lua_gettop(L);
        st = check_table(s, L, T, lo, hi);
        if (!st) st = read_layers(s, L, T);
        watch(s, s->path);
        if (!st) watch_modules(s, L);
        lua_settop(L, 0);
    }
    release(s, ls, st == TERRA_OK); /* its ids table lacks the names of layers: assign() knows them */
    return st;
}

terra_status terra_script_open(const terra_script_desc *desc, terra_script **out) {
    *out = NULL;
    if (!desc || !desc->path || !*desc->path) return terra_fail(TERRA_E_INVALID, "script: no file given");
    if (!(desc->time_limit_s >= 0) || desc->time_limit_s > 3600)
        return terra_fail(TERRA_E_INVALID, "script: time limit %g s is not from 0 to 3600", desc->time_limit_s);
    pthread_once(&handler_once, install_handler);
    if (handler_error)
        return terra_fail(TERRA_E_IO, "script: cannot take signal %d to stop scripts: %s", (int)TERRA_SCRIPT_SIGNAL,
                          strerror(handler_error));
    terra_script *s = calloc(1, sizeof *s);
    if (!s) return terra_fail(TERRA_E_NOMEM, "script: out of memory");
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->freed, NULL);
    pthread_cond_init(&s->wake, NULL);
    s->limit_s = desc->time_limit_s > 0 ? desc->time_limit_s : TERRA_SCRIPT_DEFAULT_TIME_LIMIT_S;
    s->path = strdup(desc->path);
    const char *slash = strrchr(desc->path, '/');
    s->dir = slash ? strndup(desc->path, (size_t)(slash - desc->path) + (slash == desc->path)) : strdup(".");
    for (int i = 1; i < 5; i++) s->names[i] = strdup(builtin_names[i]);
    terra_status st = s->path && s->dir && s->names[4] ? TERRA_OK : terra_fail(TERRA_E_NOMEM, "script: out of memory");
    if (!st) st = terra_world_create(&(terra_world_desc){.seed = desc->world_seed}, &s->world);
    if (!st) {
        s->watchdog_started = pthread_create(&s->watchdog, NULL, watchdog_main, s) == 0;
        if (!s->watchdog_started) st = terra_fail(TERRA_E_NOMEM, "script: cannot start its watchdog thread");
    }
    float lo = 0, hi = 0;
    if (!st) st = first_load(s, &lo, &hi);
    if (!st) {
        terra_source_desc sd = {.height_at = script_height,
                                .surface_at = s->has_layer ? script_surface : NULL,
                                .sample_grid = script_grid,
                                .height_range = s->has_range ? script_range : NULL,
                                .user = s,
                                .min_height = lo,
                                .max_height = hi,
                                .name = s->path};
        st = terra_source_create(&sd, &s->src);
    }
    if (st) {
        terra_script_close(s);
        return st;
    }
    *out = s;
    return TERRA_OK;
}

void terra_script_close(terra_script *s) {
    if (!s) return;
    if (s->watchdog_started) {
        pthread_mutex_lock(&s->lock);
        s->stop = true;
        pthread_cond_signal(&s->wake);
        pthread_mutex_unlock(&s->lock);
        pthread_join(s->watchdog, NULL);
    }
    for (int i = 0; i < MAX_STATES; i++)
        if (s->states[i].L) lua_close(s->states[i].L);
    for (int i = 0; i < 256; i++) free(s->names[i]);
    for (int i = 0; i < s->nfiles; i++) free(s->files[i].path);
    terra_source_destroy(s->src);
    terra_source_destroy(s->world);
    terra_surface_table_destroy(s->surfaces);
    pthread_cond_destroy(&s->wake);
    pthread_cond_destroy(&s->freed);
    pthread_mutex_destroy(&s->lock);
    free(s->path);
    free(s->dir);
    free(s);
}

terra_source *terra_script_source(terra_script *s) { return s->src; }

const terra_surface_table *terra_script_surfaces(const terra_script *s) { return s->surfaces; }

bool terra_script_changed(const terra_script *s) {
    for (int i = 0; i < s->nfiles; i++) {
        struct timespec m;
        off_t n;
        if (!file_stat(s->files[i].path, &m, &n) || n != s->files[i].size || m.tv_sec != s->files[i].mtime.tv_sec ||
            m.tv_nsec != s->files[i].mtime.tv_nsec)
            return true;
    }
    return false;
}

int terra_script_timeouts(const terra_script *s) {
    pthread_mutex_lock((pthread_mutex_t *)&s->lock);
    const int n = s->timeouts;
    pthread_mutex_unlock((pthread_mutex_t *)&s->lock);
    return n;
}
