/* terra script: a source whose ground is a LuaJIT script (script.h).
 *
 * Each call takes a Lua state of its own from a small set (created and loaded from the file the first
 * time one more thread calls at once) and runs a driver written in Lua: its loops over a grid compile
 * together with the script's height function, and the built-ins are FFI calls into C, so a grid runs
 * as one trace. Unless trusted, the driver takes what it needs and leaves the script only what cannot
 * reach the process or the file system. A state's memory is counted through LuaJIT's own allocator,
 * and C recursion is stopped before the C stack runs out. A call past its deadline or its memory is
 * stopped by a hook at the next instruction it interprets (the state is then closed); one that runs
 * compiled code or a C function, which never look at hooks, by a signal whose handler jumps back to
 * the call's start (the state is abandoned). Either way the error names the script's file and line. */
#define _GNU_SOURCE /* pthread_getattr_np; the interrupted instruction in a signal's ucontext */
#include "terra/script.h"

#include <errno.h>
#include <fcntl.h>
#include <lauxlib.h>
#include <limits.h>
#include <lua.h>
#include <lualib.h>
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#define MAX_STATES 64 /* threads calling one script at once */
#define MAX_FILES 64  /* the script and the modules it requires, watched for changes */
#define DRIVER "terra driver" /* the driver's chunk name: a place in it is no place of the script's */
#define STACK_RESERVE (256 * 1024) /* bytes of C stack a script's C recursion leaves (a quarter of a smaller stack) */
#define STACK_BUDGET (1024 * 1024) /* and at most this much it may use (LuaJIT unwinds deep C nesting in quadratic time) */
#define PARSE_STACK (128 * 1024)   /* and more before compiling a chunk (the parser recurses) */
#define PLACE_SIZE (LUA_IDSIZE + 24) /* "file:line" */
#define STACK_SCAN (64 * 1024)       /* bytes of a stopped thread's stack searched for a return into a trace */
#define WINDOW_CPU 0.02  /* the thread's CPU time, seconds, without reaching the hook before the jump is taken */
#define WINDOW_WALL 0.5  /* or the clock's (a system call) */
#define UNWIND_CPU 0.25  /* the same once the hook has raised: the error may still be unwinding, which must not be left */
#define UNWIND_WALL 1.0
#define ABANDONED_EXTRA (512 * 1024) /* bytes an abandoned state holds beyond its count: its traces' machine code */
#define HOOK_GRACE 1.0   /* CPU seconds the hook may keep raising (a script catching it) before it jumps itself */

typedef struct span { /* a compiled trace's machine code, and the place in the script where it starts */
    uintptr_t lo, hi;
    char place[PLACE_SIZE];
} span;

typedef struct lstate {
    lua_State *L;          /* NULL: not loaded yet, or abandoned */
    bool busy;             /* taken by a call (the fields below are then that call's) */
    atomic_bool timed_out; /* the watchdog found the call past its deadline */
    pthread_t thread;
    double deadline;       /* terra_now_s() */
    lua_Alloc alloc;       /* LuaJIT's own allocator, which the count wraps */
    void *alloc_ud;
    size_t used, limit;    /* bytes the state holds; its limit while `capped` (the script's code runs) */
    bool capped;
    volatile sig_atomic_t time_hook;   /* the time limit set the stop hook */
    double hooked_cpu, hooked_wall;    /* the window's start: the thread's CPU time and the clock, in seconds */
    double time_hook_cpu;              /* the CPU time when the time limit set the hook */
    volatile sig_atomic_t hook_ran;    /* the hook ran since the signal's handler last looked */
    volatile sig_atomic_t hook_seen;   /* it ran during this call, since the time limit set it */
    volatile sig_atomic_t jump_in_hook; /* the hook has kept raising past HOOK_GRACE: it jumps itself */
    volatile sig_atomic_t over_memory; /* an allocation passed half the limit: the hook is set */
    bool jumped;           /* stopped by the signal's jump: the state is abandoned */
    int kind;              /* what the call runs (CALL_*) */
    uintptr_t stop_pc;     /* the compiled code the jump left, or that asked for memory past half the limit */
    char place[PLACE_SIZE]; /* the script's file:line where it was stopped, once known */
    span *spans;           /* its compiled traces (a jump out of one names where it starts) */
    int nspans, cap;
} lstate;

typedef struct watched {
    char *path;
    struct timespec mtime;
    off_t size;
} watched;

struct terra_script {
    char *path, *dir, *root; /* the file; its folder; that folder's real path (modules stay under it) */
    double limit_s;
    size_t memory_limit;
    bool trusted;
    bool watching;           /* the first load: the modules it requires are watched */
    int entry_line[3];       /* where height, layer and range start (0: not a Lua function) */
    terra_source *world, *src;
    terra_surface_table *surfaces;
    bool has_layer, has_range;
    pthread_mutex_t lock; /* guards states, names, stop */
    pthread_cond_t freed, wake;
    lstate states[MAX_STATES];
    char *names[256]; /* surface id -> name (NULL: no name yet) */
    watched files[MAX_FILES];
    int nfiles, timeouts;
    size_t abandoned;  /* bytes of the states the jump abandoned: past memory_limit, calls are refused */
    char first_jump[PLACE_SIZE + PATH_MAX]; /* where the first of those was stopped */
    atomic_int point_errors; /* failed point calls (logged: they have no error to return) */
    pthread_t watchdog;
    bool watchdog_started, stop;
};

static char *dup_text(const char *text, size_t n) {
    char *p = terra_alloc(n + 1);
    if (p) memcpy(p, text, n), p[n] = 0;
    return p;
}
static char *dup_str(const char *text) { return dup_text(text, strlen(text)); }

/* ---- where a script is ------------------------------------------------------------------------- */

/* The innermost place of L's stack that is the script's (or a module's), not the driver's. */
static bool locate(lua_State *L, char *out, size_t n) {
    lua_Debug d;
    for (int level = 0; lua_getstack(L, level, &d); level++) {
        if (!lua_getinfo(L, "Sl", &d) || d.currentline <= 0 || !strcmp(d.source, "=" DRIVER)) continue;
        snprintf(out, n, "%s:%d", d.short_src, d.currentline);
        return true;
    }
    return false;
}

/* Whether a message's first line names a place ("file:12: ..."). */
static bool has_place(const char *msg) {
    for (const char *p = msg; *p && *p != '\n'; p++)
        if (p[0] == ':' && p[1] >= '0' && p[1] <= '9') {
            const char *q = p + 1;
            while (*q >= '0' && *q <= '9') q++;
            if (*q == ':') return true;
        }
    return false;
}

/* The calls' message handler: an error without a place (a stack overflow inside a C function, an
 * error(msg, 0)) gets the script's place where it was raised. */
static int l_place_error(lua_State *L) {
    const char *msg = lua_tostring(L, 1);
    char place[PLACE_SIZE];
    if (msg && !has_place(msg) && locate(L, place, sizeof place)) lua_pushfstring(L, "%s: %s", place, msg);
    else lua_settop(L, 1);
    return 1;
}

/* ---- stopping a call at its time or memory limit ---------------------------------------------------- */

static _Thread_local sigjmp_buf *tl_jump;
static _Thread_local volatile sig_atomic_t tl_armed; /* the jump may be taken (no lock held) */
static _Thread_local lstate *tl_ls;                  /* the state this thread's call runs in */
static _Thread_local uintptr_t tl_stack_end;         /* this thread's stack end, STACK_RESERVE above it */
static _Thread_local uintptr_t tl_floor;             /* the lowest C stack address the call's recursion may use */
static _Thread_local uintptr_t tl_stack_top;         /* the guarded call's frame: its code's stack is below */

/* At the next instruction the VM interprets (in any coroutine: LuaJIT's hooks are global): an error
 * the script may catch, but the hook stays and raises again at the next instruction after it. */
static void stop_hook(lua_State *L, lua_Debug *ar) {
    (void)ar;
    lstate *ls = tl_ls;
    if (ls && !ls->place[0]) locate(L, ls->place, sizeof ls->place);
    if (ls) ls->hook_ran = 1;
    if (ls && ls->jump_in_hook && tl_armed) { /* the VM between instructions: no lock or unwinder to leave */
        tl_armed = 0;
        siglongjmp(*tl_jump, 1);
    }
    lua_pushliteral(L, "stopped at a limit of terra's");
    lua_error(L);
}

/* Whether code at pc is a compiled trace's (the spans are written only while the jump is disarmed). */
static bool in_trace(const lstate *ls, uintptr_t pc) {
    for (int i = 0; i < ls->nspans; i++)
        if (pc >= ls->spans[i].lo && pc < ls->spans[i].hi) return true;
    return false;
}

/* A return address into a compiled trace among the words of the stack from sp up to the guarded
 * call (a trace that called the C function running now: libm, a string function, the allocator);
 * 0 when there is none. */
__attribute__((no_sanitize_address)) /* it reads other frames' words */
static uintptr_t trace_below(const lstate *ls, uintptr_t sp) {
    for (uintptr_t at = sp & ~(uintptr_t)7, end = sp + STACK_SCAN; at < end && at < tl_stack_top; at += 8) {
        const uintptr_t word = *(const volatile uintptr_t *)at;
        if (in_trace(ls, word)) return word;
    }
    return 0;
}

/* The instruction a stopped thread was at if it is a trace's, else the trace below it, else 0. */
static uintptr_t stopped_at(const lstate *ls, const void *context) {
    const ucontext_t *uc = context;
#if defined(__x86_64__)
    const uintptr_t pc = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP], sp = (uintptr_t)uc->uc_mcontext.gregs[REG_RSP];
#elif defined(__aarch64__)
    const uintptr_t pc = (uintptr_t)uc->uc_mcontext.pc, sp = (uintptr_t)uc->uc_mcontext.sp;
    if (!in_trace(ls, pc) && in_trace(ls, (uintptr_t)uc->uc_mcontext.regs[30])) return (uintptr_t)uc->uc_mcontext.regs[30];
#else
    (void)uc;
    const uintptr_t pc = 0, sp = 0; /* no line for a compiled loop on this machine */
#endif
    return in_trace(ls, pc) ? pc : sp ? trace_below(ls, sp) : 0;
}

/* Counts a state's memory around LuaJIT's allocator. While the script's code runs, growth past half
 * the limit sets the stop hook (so a table or string that doubles is stopped at its line before an
 * allocation is refused), and growth past the limit is refused too (LUA_ERRMEM). */
static void *counted_alloc(void *ud, void *p, size_t osize, size_t nsize) {
    lstate *ls = ud;
    if (ls->capped && nsize > osize) {
        const size_t after = ls->used + (nsize - osize);
        const bool refused = after > ls->limit || after < ls->used;
        if ((refused || after > ls->limit / 2) && !ls->over_memory) {
            ls->over_memory = 1;
            lua_sethook(ls->L, stop_hook, LUA_MASKCOUNT, 1);
        }
        if ((refused || after > ls->limit / 2) && !ls->stop_pc) /* a compiled loop never sees the hook */
            ls->stop_pc = trace_below(ls, (uintptr_t)__builtin_frame_address(0));
        if (refused) return NULL;
    }
    void *q = ls->alloc(ls->alloc_ud, p, osize, nsize);
    if (q || !nsize) ls->used = ls->used - osize + nsize;
    return q;
}

static double clock_s(clockid_t clock) {
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The watchdog's signal (every 20 ms past the deadline): the first sets the stop hook; a later one
 * jumps back to the call's start only after a whole window in which the hook never ran: 20 ms of the
 * thread's own time (compiled code or a C function; or 0.5 s of the clock, a system call), or, once
 * the hook has raised, 0.25 s (1 s): its error may be unwinding through deep C frames, and the
 * unwinder holds locks that a jump out of it would never release. A hook that keeps running (a
 * script catching its error again and again) is told to jump itself, at an instruction. */
static void on_stop_signal(int sig, siginfo_t *info, void *context) {
    (void)sig, (void)info;
    lstate *ls = tl_ls;
    if (!tl_armed || !ls || !atomic_load_explicit(&ls->timed_out, memory_order_relaxed)) return;
    const double cpu = clock_s(CLOCK_THREAD_CPUTIME_ID), wall = clock_s(CLOCK_MONOTONIC);
    if (!ls->time_hook) {
        ls->time_hook = 1;
        ls->hooked_cpu = ls->time_hook_cpu = cpu, ls->hooked_wall = wall;
        ls->hook_ran = 0;
        lua_sethook(ls->L, stop_hook, LUA_MASKCOUNT, 1); /* safe in a handler, as Lua's own interpreter uses it */
        return;
    }
    if (ls->hook_ran) {
        ls->hook_ran = 0;
        ls->hook_seen = 1;
        ls->hooked_cpu = cpu, ls->hooked_wall = wall;
        if (cpu - ls->time_hook_cpu > HOOK_GRACE) ls->jump_in_hook = 1;
        return;
    }
    if (cpu - ls->hooked_cpu < (ls->hook_seen ? UNWIND_CPU : WINDOW_CPU) &&
        wall - ls->hooked_wall < (ls->hook_seen ? UNWIND_WALL : WINDOW_WALL))
        return;
    ls->stop_pc = stopped_at(ls, context);
    tl_armed = 0;
    siglongjmp(*tl_jump, 1);
}

static pthread_once_t handler_once = PTHREAD_ONCE_INIT;
static int handler_error;
static void install_handler(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_stop_signal;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    handler_error = sigaction(TERRA_SCRIPT_SIGNAL, &sa, NULL) ? errno : 0;
}

static struct timespec abs_time(double t_now_s) { /* on the clock of the watchdog's condition */
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
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
                atomic_store(&ls->timed_out, true);
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

/* The end of this thread's C stack, STACK_RESERVE above it. */
static uintptr_t stack_end(void) {
    pthread_attr_t a;
    void *lo = NULL;
    size_t n = 0;
    if (!pthread_getattr_np(pthread_self(), &a)) {
        if (pthread_attr_getstack(&a, &lo, &n)) lo = NULL;
        pthread_attr_destroy(&a);
    }
    char here;
    if (!lo || !n) return (uintptr_t)&here - 4 * STACK_RESERVE; /* unknown: a modest stack assumed */
    return (uintptr_t)lo + (n / 4 < STACK_RESERVE ? n / 4 : STACK_RESERVE);
}

/* Whether the C stack is within `extra` bytes of the floor (the driver's guards call it through the
 * FFI before a C function that may call back into Lua). */
static int stack_low(double extra) {
    char here;
    return tl_floor && (uintptr_t)&here < tl_floor + (uintptr_t)extra;
}

/* The function below nargs arguments, run with the message handler at index 1 and stopped at the
 * call's limits: the Lua status, or -1 when the signal's jump stopped it (the state is abandoned). */
static int guarded_pcall(lstate *ls, int nargs, int nres) {
    if (!tl_stack_end) tl_stack_end = stack_end();
    tl_stack_top = (uintptr_t)__builtin_frame_address(0);
    tl_floor = tl_stack_top - STACK_BUDGET > tl_stack_end ? tl_stack_top - STACK_BUDGET : tl_stack_end;
    tl_ls = ls;
    sigjmp_buf jump;
    if (sigsetjmp(jump, 1)) {
        ls->capped = false;
        ls->jumped = true;
        return -1;
    }
    tl_jump = &jump;
    ls->capped = true;
    tl_armed = 1;
    const int rc = lua_pcall(ls->L, nargs, nres, 1);
    tl_armed = 0;
    ls->capped = false;
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
        if (!s->names[i] && (s->names[i] = dup_str(name))) id = i;
    pthread_mutex_unlock(&s->lock);
    tl_armed = armed;
    if (id < 0) return luaL_error(L, "%s: more surface names than the 240 ids terra has (at '%s')", s->path, name);
    lua_pushinteger(L, id);
    return 1;
}

static int l_print(lua_State *L) {
    if (stack_low(0)) return luaL_error(L, "print: calls nested too deeply (the C stack is nearly used up)");
    const int n = lua_gettop(L);
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    for (int i = 1; i <= n; i++) {
        lua_getglobal(L, "tostring"); /* the script's code may run here: it stays stoppable */
        lua_pushvalue(L, i);
        lua_call(L, 1, 1);
        if (i > 1) luaL_addchar(&b, '\t');
        luaL_addvalue(&b);
    }
    luaL_pushresult(&b);
    const sig_atomic_t armed = tl_armed;
    tl_armed = 0; /* never stopped holding stderr's lock */
    terra_log(TERRA_LOG_INFO, "%s", lua_tostring(L, -1));
    tl_armed = armed;
    return 0;
}

/* A compiled trace (machine code from lo, n bytes, starting in chunk `source` at a line), or none
 * left (a flush). */
static int l_note_trace(lua_State *L) {
    lstate *ls = lua_touserdata(L, lua_upvalueindex(1));
    const sig_atomic_t armed = tl_armed;
    tl_armed = 0; /* never stopped inside the allocator */
    if (lua_isnoneornil(L, 1)) {
        ls->nspans = 0;
    } else {
        const uintptr_t lo = (uintptr_t)lua_tonumber(L, 1), hi = lo + (uintptr_t)lua_tonumber(L, 2);
        const char *source = lua_tostring(L, 3);
        const int line = (int)lua_tointeger(L, 4);
        int k = 0;
        for (int i = 0; i < ls->nspans; i++) /* code that was there before is gone */
            if (ls->spans[i].hi <= lo || ls->spans[i].lo >= hi) ls->spans[k++] = ls->spans[i];
        ls->nspans = k;
        if (k == ls->cap) {
            const int cap = ls->cap ? 2 * ls->cap : 64;
            span *grown = terra_realloc(ls->spans, sizeof *grown * (size_t)cap);
            if (grown) ls->spans = grown, ls->cap = cap;
        }
        if (source && (*source == '@' || *source == '=') && strcmp(source, "=" DRIVER) && line > 0 &&
            ls->nspans < ls->cap) {
            span *sp = &ls->spans[ls->nspans++];
            sp->lo = lo, sp->hi = hi;
            const size_t n = strlen(source + 1), room = LUA_IDSIZE - 4; /* as Lua shortens a long name */
            snprintf(sp->place, sizeof sp->place, "%s%s:%d", n > room ? "..." : "", source + 1 + (n > room ? n - room : 0), line);
        }
    }
    tl_armed = armed;
    return 0;
}

static void watch(terra_script *s, const char *path);

/* Whether a real path is the script's folder's or under it. */
static bool in_root(const terra_script *s, const char *real) {
    const size_t r = strlen(s->root);
    return !strncmp(real, s->root, r) && (real[r] == '/' || !strcmp(s->root, "/"));
}

/* A file for reading when it is a regular one (never waiting on a FIFO or a device): NULL, errno
 * set (EINVAL for another kind), when not. */
static FILE *open_regular(const char *path) {
    const int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    struct stat sb;
    if (fd < 0) return NULL;
    FILE *f = fstat(fd, &sb) ? NULL : !S_ISREG(sb.st_mode) ? (errno = EINVAL, NULL) : fdopen(fd, "r");
    if (!f) {
        const int e = errno;
        close(fd);
        errno = e;
    }
    return f;
}

typedef struct {
    FILE *f;
    char buf[4096];
} file_reader;

static const char *read_piece(lua_State *L, void *data, size_t *size) {
    (void)L;
    file_reader *r = data;
    *size = fread(r->buf, 1, sizeof r->buf, r->f);
    return *size ? r->buf : NULL;
}

/* Loads the chunk of a module's file (its real path under the folder): Lua's status, the chunk or
 * the message on L's stack. */
static int load_module(const terra_script *s, lua_State *L, const char *path, const char *real) {
    file_reader r = {.f = open_regular(real)};
    if (!r.f) {
        lua_pushfstring(L, "%s: %s", path, errno == EINVAL ? "not a regular file (a module is one)" : strerror(errno));
        return LUA_ERRFILE;
    }
    lua_pushfstring(L, "@%s", path);
    int rc = lua_loadx(L, read_piece, &r, lua_tostring(L, -1), s->trusted ? NULL : "t");
    lua_remove(L, -2);
    if (!rc && ferror(r.f)) rc = LUA_ERRFILE, lua_pop(L, 1), lua_pushfstring(L, "%s: cannot be read", path);
    fclose(r.f);
    return rc;
}

/* A module under the script's folder (require(name), name "a.b" from a/b.lua or a/b/init.lua): its
 * chunk, or nil and why not. Source text only unless trusted; a file whose real path leaves the
 * folder (a link), or that is not a regular file (a FIFO would wait forever), is refused. */
static int l_find_module(lua_State *L) {
    terra_script *s = lua_touserdata(L, lua_upvalueindex(1));
    const char *name = luaL_checkstring(L, 1);
    char rel[256];
    size_t n = 0;
    bool ok = *name && *name != '.';
    for (const char *c = name; ok && *c; c++) {
        ok = n + 1 < sizeof rel && (c[0] != '.' || (c[1] && c[1] != '.')) &&
             (*c == '.' || *c == '_' || *c == '-' || (*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'z') ||
              (*c >= 'A' && *c <= 'Z'));
        if (ok) rel[n++] = *c == '.' ? '/' : *c;
    }
    if (!ok) {
        lua_pushnil(L);
        lua_pushfstring(L, "require('%s'): a module's name is words of letters, digits, _ and - joined by dots", name);
        return 2;
    }
    rel[n] = 0;
    lstate *ls = tl_ls;
    const sig_atomic_t armed = tl_armed;
    const bool capped = ls && ls->capped;
    tl_armed = 0; /* never stopped inside stdio */
    if (ls) ls->capped = false; /* nor failing for memory while disarmed: a module is the author's file */
    char path[PATH_MAX + 32], real[PATH_MAX];
    int found = 0;
    for (int k = 0; k < 2 && !found; k++) {
        snprintf(path, sizeof path, k ? "%s/%s/init.lua" : "%s/%s.lua", s->dir, rel);
        if (!realpath(path, real)) continue;
        if (!in_root(s, real)) {
            lua_pushnil(L);
            lua_pushfstring(L, "require('%s'): %s is %s, outside the script's folder %s", name, path, real, s->root);
            found = 2;
        } else {
            const int rc = load_module(s, L, path, real);
            if (rc && lua_isstring(L, -1) && strstr(lua_tostring(L, -1), "wrong mode")) {
                lua_pop(L, 1);
                lua_pushfstring(L, "%s: a compiled (bytecode) chunk is refused: a world script is sandboxed, "
                                   "source text only (--trust-script allows it)", path);
            }
            if (rc) lua_pushnil(L), lua_insert(L, -2);
            else if (s->watching) watch(s, path);
            found = rc ? 2 : 1;
        }
    }
    if (ls) ls->capped = capped;
    tl_armed = armed;
    if (!found) {
        lua_pushnil(L);
        lua_pushfstring(L, "require('%s'): neither %s/%s.lua nor %s/%s/init.lua is there (a world script requires "
                           "only modules under its folder)", name, s->dir, rel, s->dir, rel);
    }
    return found == 1 ? 1 : 2;
}

/* The driver, run in each state before the script with (C pointers, C functions, trusted, the memory
 * limit): the built-ins; the guards kept even when trusted (C recursion stopped before the C stack
 * runs out, string.rep before it asks for more than the limit leaves); the compiled traces noted;
 * `require` beside the script; then, unless trusted, the sandbox. It returns the function that,
 * given the ground's table, its name, the surface ids known and assign, returns the functions C
 * calls: heights, layers, point, surface, range. */
static const char *const driver_lua[] = { /* pieces under C's 4095 characters, read in turn */
    "local P, C, trusted, limit = ...\n"
    "local ffi = require('ffi')\n"
    "local type, tostring, format, error, pcall, rawget = type, tostring, string.format, error, pcall, rawget\n"
    "local str_sub, str_find = string.sub, string.find -- the script may change string's fields; these stay\n"
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
    , /* the guards */
    "local low = ffi.cast('int (*)(double)', P.stack_low)\n"
    "local room = ffi.cast('double (*)(const void *)', P.room)\n"
    "local state = ffi.cast('const void *', P.state)\n"
    "local function guard(f, name, extra)\n"
    "  return function(...)\n"
    "    if low(extra or 0) ~= 0 then\n"
    "      error(name .. ': calls nested too deeply (the C stack is nearly used up): a recursion without end?', 2)\n"
    "    end\n"
    "    return f(...)\n"
    "  end\n"
    "end\n"
    "local cowrap = coroutine.wrap\n"
    "coroutine.resume = guard(coroutine.resume, 'coroutine.resume')\n"
    "coroutine.wrap = function(f)\n"
    "  if type(f) ~= 'function' then error(\"bad argument #1 to 'wrap' (function expected, got \" .. type(f) .. ')', 2) end\n"
    "  return guard(cowrap(f), 'a coroutine.wrap function')\n"
    "end\n"
    "string.gsub = guard(string.gsub, 'string.gsub')\n"
    "string.format = guard(string.format, 'string.format')\n"
    "table.sort = guard(table.sort, 'table.sort')\n"
    "os.time = guard(os.time, 'os.time')\n"
    "local srep = string.rep\n"
    "local function len(v) return type(v) == 'string' and #v or type(v) == 'number' and #tostring(v) or 0 end\n"
    "string.rep = function(s, n, sep)\n"
    "  if type(n) == 'number' and n > 1 then\n"
    "    local bytes = len(s) * n + len(sep) * (n - 1)\n"
    "    if bytes > room(state) then\n"
    "      error(format(\"string.rep: %.0f bytes would pass the script's memory limit of %g MiB\", bytes, limit / 1048576), 2)\n"
    "    end\n"
    "  end\n"
    "  return srep(s, n, sep)\n"
    "end\n"
    , /* compiled traces: where each starts */
    "if jit and jit.status() then\n"
    "  local ju, note, starts = require('jit.util'), C.note_trace, {}\n"
    "  jit.attach(function(what, tr, func, pc)\n"
    "    if what == 'start' then starts[tr] = ju.funcinfo(func, pc)\n"
    "    elseif what == 'stop' then\n"
    "      local mc, addr = ju.tracemc(tr)\n"
    "      local at = starts[tr]\n"
    "      if mc and at then note(addr, #mc, at.source, at.currentline) end\n"
    "    elseif what == 'flush' then note() end\n"
    "  end, 'trace')\n"
    "end\n"
    "local find = C.find_module\n"
    "if trusted then\n"
    "  load, loadstring = guard(load, 'load', P.parse_stack), guard(loadstring, 'loadstring', P.parse_stack)\n"
    "  table.insert(package.loaders, 2, function(name) local f, why = find(name) return f or '\\n\\t' .. why end)\n"
    "else\n"
    , /* the sandbox: what is gone raises an error naming it */
    "  local G = _G\n"
    "  local why = ' is refused: a world script is sandboxed, kept from the process and the file system '\n"
    "    .. '(--trust-script, or terra_script_desc.trusted, lifts it)'\n"
    "  local function refuse(what) error(what .. why, 3) end\n"
    "  local gone = {ffi = true}\n"
    "  for _, k in ipairs({'io', 'debug', 'jit', 'package', 'module', 'dofile', 'loadfile', 'getfenv', 'setfenv',\n"
    "                      'newproxy'}) do gone[k] = true G[k] = nil end\n"
    "  setmetatable(G, {__index = function(_, k) if gone[k] then refuse(tostring(k)) end end})\n"
    "  os = setmetatable({time = os.time, clock = os.clock},\n"
    "    {__index = function(_, k) refuse('os.' .. tostring(k)) end})\n"
    "  string.dump = nil\n"
    "  setmetatable(string, {__index = function(_, k) if k == 'dump' then refuse('string.dump') end end})\n"
    "  local oload = load\n"
    "  load = function(chunk, name, mode, env)\n"
    "    if low(P.parse_stack) ~= 0 then error('load: calls nested too deeply (the C stack is nearly used up)', 2) end\n"
    "    local f, err = oload(chunk, name, 't', env)\n"
    "    if not f and type(err) == 'string' and str_find(err, 'wrong mode', 1, true) then\n"
    "      err = 'load of a compiled (bytecode) chunk' .. why\n"
    "    end\n"
    "    return f, err\n"
    "  end\n"
    "  local text = load\n"
    "  loadstring = function(s, name) return text(s, name) end\n"
    "  local libs = {string = string, table = table, math = math, bit = bit, coroutine = coroutine, os = os}\n"
    "  local loaded, loading = {}, {}\n"
    "  require = function(name)\n"
    "    if type(name) ~= 'string' then error(\"bad argument #1 to 'require' (string expected, got \" .. type(name) .. ')', 2) end\n"
    "    local m = libs[name] or loaded[name]\n"
    "    if m ~= nil then return m end\n"
    "    if gone[name] or str_sub(name, 1, 4) == 'jit.' then refuse(\"require('\" .. name .. \"')\") end\n"
    "    if loading[name] then error(\"require('\" .. name .. \"'): the module requires itself\", 2) end\n"
    "    if low(P.parse_stack) ~= 0 then error('require: calls nested too deeply (the C stack is nearly used up)', 2) end\n"
    "    local f, why = find(name)\n"
    "    if not f then error(why, 2) end\n"
    "    loading[name] = true\n"
    "    local ok, r = pcall(f, name)\n"
    "    loading[name] = nil\n"
    "    if not ok then error(r, 0) end\n"
    "    if r == nil then r = true end\n"
    "    loaded[name] = r\n"
    "    return r\n"
    "  end\n"
    "end\n"
    , /* the functions C calls, over the ground's table (read raw: no metamethod of the script's runs here) */
    "return function(T, name, ids, assign)\n"
    "  local height, layer, range = rawget(T, 'height'), rawget(T, 'layer'), rawget(T, 'range')\n"
    "  local function bad(what, x, z, v)\n"
    "    error(format('%s: %s(%.17g, %.17g) gave %s, not a number', name, what, x, z, tostring(v)), 0)\n"
    "  end\n"
    "  local function id_of(n)\n"
    "    if n == nil then return 0 end\n"
    "    local id = ids[n]\n"
    "    if id then return id end\n"
    "    if type(n) ~= 'string' then error(format('%s: layer gave %s, not a surface name', name, tostring(n)), 0) end\n"
    "    id = assign(n)\n"
    "    ids[n] = id\n"
    "    return id\n"
    "  end\n"
    "  local function heights(hp, ix0, iz0, spacing, nx, nz)\n"
    "    local h = ffi.cast('float *', hp)\n"
    "    local k = 0\n"
    "    for j = 0, nz - 1 do\n"
    "      local z = (iz0 + j) * spacing\n"
    "      for i = 0, nx - 1 do\n"
    "        local x = (ix0 + i) * spacing\n"
    "        local v = height(x, z)\n"
    "        if type(v) ~= 'number' then bad('height', x, z, v) end\n"
    "        h[k] = v\n"
    "        k = k + 1\n"
    "      end\n"
    "    end\n"
    "  end\n"
    "  local function layers(sp, ix0, iz0, spacing, nx, nz)\n"
    "    local s = ffi.cast('uint8_t *', sp)\n"
    "    local k = 0\n"
    "    for j = 0, nz - 1 do\n"
    "      local z = (iz0 + j) * spacing\n"
    "      for i = 0, nx - 1 do\n"
    "        s[k] = id_of(layer((ix0 + i) * spacing, z))\n"
    "        k = k + 1\n"
    "      end\n"
    "    end\n"
    "  end\n"
    "  local function point(x, z)\n"
    "    local v = height(x, z)\n"
    "    if type(v) ~= 'number' then bad('height', x, z, v) end\n"
    "    return v\n"
    "  end\n"
    "  local function surface(x, z) return layer and id_of(layer(x, z)) or 0 end\n"
    "  local function ranged(x0, z0, x1, z1)\n"
    "    local lo, hi = range(x0, z0, x1, z1)\n"
    "    if type(lo) ~= 'number' or type(hi) ~= 'number' then\n"
    "      error(format('%s: range(%.17g, %.17g, %.17g, %.17g) gave %s, %s, not two numbers', name, x0, z0, x1, z1,\n"
    "                   tostring(lo), tostring(hi)), 0)\n"
    "    end\n"
    "    return lo, hi\n"
    "  end\n"
    "  return heights, layers, point, surface, ranged\n"
    "end\n"};

static const char *read_driver(lua_State *L, void *data, size_t *size) {
    (void)L;
    int *next = data;
    if (*next == (int)(sizeof driver_lua / sizeof *driver_lua)) return NULL;
    const char *piece = driver_lua[(*next)++];
    *size = strlen(piece);
    return piece;
}

/* The registry's slots: the message handler, the driver's second half, and the functions C calls
 * (each kind of call names its function's slot). */
enum { REF_HANDLER = 1, REF_MAKE, CALL_HEIGHTS, CALL_LAYERS, CALL_POINT, CALL_SURFACE, CALL_RANGE, CALL_LOAD };

/* A C function's address as FFI casts it from a light userdata (POSIX: the same bits). */
static void *fn_address(void (*f)(void)) {
    void *p;
    memcpy(&p, &f, sizeof p);
    return p;
}

/* What the state's memory limit leaves (string.rep's guard). */
static double room(const lstate *ls) { return ls->used < ls->limit ? (double)(ls->limit - ls->used) : 0; }

static void push_pointers(lua_State *L, terra_script *s, lstate *ls) {
    lua_createtable(L, 0, 16);
#define FN(name, f)                                                                                                    \
    lua_pushlightuserdata(L, fn_address((void (*)(void))(f)));                                                        \
    lua_setfield(L, -2, name)
    FN("noise", terra_noise);
    FN("fbm", terra_fbm);
    FN("ridged", terra_ridged);
    FN("world_height", terra_source_height_raw);
    FN("world_surface", terra_source_surface_raw);
    FN("world_range", world_range);
    FN("stack_low", stack_low);
    FN("room", room);
#undef FN
    lua_pushlightuserdata(L, s->world);
    lua_setfield(L, -2, "world");
    lua_pushlightuserdata(L, ls);
    lua_setfield(L, -2, "state");
    lua_pushnumber(L, TERRA_WORLD_MIN_HEIGHT);
    lua_setfield(L, -2, "world_min");
    lua_pushnumber(L, TERRA_WORLD_MAX_HEIGHT);
    lua_setfield(L, -2, "world_max");
    lua_pushnumber(L, PARSE_STACK);
    lua_setfield(L, -2, "parse_stack");
}

static void push_c_functions(lua_State *L, terra_script *s, lstate *ls) {
    lua_createtable(L, 0, 2);
    lua_pushlightuserdata(L, ls);
    lua_pushcclosure(L, l_note_trace, 1);
    lua_setfield(L, -2, "note_trace");
    lua_pushlightuserdata(L, s);
    lua_pushcclosure(L, l_find_module, 1);
    lua_setfield(L, -2, "find_module");
}

/* ---- failures --------------------------------------------------------------------------------------- */

static const char *const entry_names[] = {"height", "layer", "range"};

static int entry_of(int kind) {
    return kind == CALL_HEIGHTS || kind == CALL_POINT ? 0 : kind == CALL_LAYERS || kind == CALL_SURFACE ? 1 : 2;
}

/* Where a stopped call was: the hook's place, the compiled loop the jump left (or that asked for the
 * memory), or else the function it called ("world.lua:3, in height"; at load, its top level). */
static void stop_place(const terra_script *s, lstate *ls, int kind, char *out, size_t n) {
    for (int i = 0; i < ls->nspans && ls->stop_pc && !ls->place[0]; i++)
        if (ls->stop_pc >= ls->spans[i].lo && ls->stop_pc < ls->spans[i].hi)
            snprintf(ls->place, sizeof ls->place, "%s", ls->spans[i].place);
    if (ls->place[0]) snprintf(out, n, "%s", ls->place);
    else if (kind == CALL_LOAD) snprintf(out, n, "%s, at its top level", s->path);
    else snprintf(out, n, "%s:%d, in %s", s->path, s->entry_line[entry_of(kind)], entry_names[entry_of(kind)]);
}

/* The error of a failed call or load (Lua status rc, -1 for the jump), its message on L's stack. */
static terra_status lua_failure(terra_script *s, lstate *ls, int kind, int rc) {
    const bool timed = atomic_load(&ls->timed_out) && (ls->time_hook || ls->jumped);
    char place[PLACE_SIZE + PATH_MAX];
    if (timed || ls->over_memory || rc == LUA_ERRMEM) stop_place(s, ls, kind, place, sizeof place);
    if (timed)
        return terra_fail(TERRA_E_SOURCE, "%s: a call ran past its time limit of %g s (a loop that never ends?)", place,
                          s->limit_s);
    if (ls->over_memory || rc == LUA_ERRMEM)
        return terra_fail(TERRA_E_SOURCE, "%s: the script ran past its memory limit of %g MiB (a table or a string that "
                                          "grows without end?)", place, (double)ls->limit / 1048576);
    const char *msg = lua_tostring(ls->L, -1);
    return terra_fail(TERRA_E_SOURCE, "%s", msg ? msg : "(an error that is not a string)");
}

/* ---- a state ------------------------------------------------------------------------------------------ */

static void state_close(lstate *ls) {
    if (!ls->L) return;
    lua_setallocf(ls->L, ls->alloc, ls->alloc_ud); /* LuaJIT frees its own arena only under its own allocator */
    lua_close(ls->L);
    ls->L = NULL;
}

static void raw_field(lua_State *L, int t, const char *key) {
    lua_pushstring(L, key);
    lua_rawget(L, t);
}

/* A new state: libraries, the driver, the file run (the ground's table left on the stack, above the
 * message handler), and the functions C calls made over it. */
static terra_status state_load(terra_script *s, lstate *ls) {
    lua_State *L = luaL_newstate();
    if (!L) return terra_fail(TERRA_E_NOMEM, "%s: no memory for a Lua state", s->path);
    ls->L = L;
    ls->alloc = lua_getallocf(L, &ls->alloc_ud);
    ls->used = (size_t)lua_gc(L, LUA_GCCOUNT, 0) * 1024 + (size_t)lua_gc(L, LUA_GCCOUNTB, 0);
    ls->limit = s->memory_limit;
    ls->nspans = 0;
    lua_setallocf(L, counted_alloc, ls);
    luaL_openlibs(L);
    lua_pushcfunction(L, l_print);
    lua_setglobal(L, "print");
    lua_pushcfunction(L, l_place_error);
    lua_pushvalue(L, -1);
    lua_rawseti(L, LUA_REGISTRYINDEX, REF_HANDLER); /* and stays at index 1 */
    int piece = 0;
    if (lua_load(L, read_driver, &piece, "=" DRIVER)) return lua_failure(s, ls, CALL_LOAD, LUA_ERRSYNTAX);
    push_pointers(L, s, ls);
    push_c_functions(L, s, ls);
    lua_pushboolean(L, s->trusted);
    lua_pushnumber(L, (double)s->memory_limit);
    int rc = lua_pcall(L, 4, 1, 1);
    if (rc) return lua_failure(s, ls, CALL_LOAD, rc);
    lua_rawseti(L, LUA_REGISTRYINDEX, REF_MAKE);
    rc = luaL_loadfilex(L, s->path, s->trusted ? NULL : "t");
    if (rc == LUA_ERRFILE) {
        const char *msg = lua_tostring(L, -1);
        return terra_fail(TERRA_E_NOT_FOUND, "%s", msg ? msg : s->path);
    }
    if (rc && !s->trusted && lua_isstring(L, -1) && strstr(lua_tostring(L, -1), "wrong mode"))
        return terra_fail(TERRA_E_SOURCE, "%s: a compiled (bytecode) chunk is refused: a world script is sandboxed, "
                                          "source text only (--trust-script allows it)", s->path);
    if (rc) return lua_failure(s, ls, CALL_LOAD, rc);
    ls->kind = CALL_LOAD;
    if ((rc = guarded_pcall(ls, 0, 1))) return lua_failure(s, ls, CALL_LOAD, rc);
    if (!lua_istable(L, -1))
        return terra_fail(TERRA_E_INVALID, "%s: the script returns %s, not the ground's table { height = function(x, z) ... end }",
                          s->path, luaL_typename(L, -1));
    const int T = lua_gettop(L);
    lua_rawgeti(L, LUA_REGISTRYINDEX, REF_MAKE);
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
    if ((rc = lua_pcall(L, 4, 5, 1))) return lua_failure(s, ls, CALL_LOAD, rc);
    for (int r = CALL_RANGE; r >= CALL_HEIGHTS; r--) lua_rawseti(L, LUA_REGISTRYINDEX, r);
    lua_settop(L, T); /* the table stays below: first_load reads it */
    return TERRA_OK;
}

/* ---- the set of states ------------------------------------------------------------------------------ */

/* A free state for this thread's call (NULL, with *st the error, once abandoned states have passed
 * the memory limit). */
static lstate *acquire(terra_script *s, terra_status *st) {
    pthread_mutex_lock(&s->lock);
    if (s->abandoned > s->memory_limit) {
        *st = terra_fail(TERRA_E_SOURCE,
                         "%s: calls refused: calls stopped in compiled code or a C function (the first at %s) left %.1f "
                         "MiB of Lua states that cannot be freed, past the memory limit of %g MiB (open the script "
                         "again to start over)",
                         s->path, s->first_jump, (double)s->abandoned / 1048576, (double)s->memory_limit / 1048576);
        pthread_mutex_unlock(&s->lock);
        return NULL;
    }
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
    atomic_store(&ls->timed_out, false);
    ls->time_hook = ls->over_memory = ls->hook_ran = ls->hook_seen = ls->jump_in_hook = 0;
    ls->jumped = false;
    ls->stop_pc = 0;
    ls->place[0] = 0;
    ls->thread = pthread_self();
    ls->deadline = terra_now_s() + s->limit_s;
    pthread_cond_signal(&s->wake);
    pthread_mutex_unlock(&s->lock);
    *st = ls->L ? TERRA_OK : state_load(s, ls); /* a new state has the ground's table on its stack */
    return ls;
}

/* Lets go of a state (keep: it loaded). One a limit stopped (or whose load failed) is closed; one the
 * jump stopped is abandoned: it may have been stopped inside the VM, so it is neither closed nor used
 * again (its memory is lost, and counted: acquire refuses calls once it passes the memory limit). */
static void release(terra_script *s, lstate *ls, bool keep) {
    if (!ls->jumped && (!keep || ls->time_hook || ls->over_memory)) state_close(ls);
    pthread_mutex_lock(&s->lock);
    if (atomic_load(&ls->timed_out) && (ls->time_hook || ls->jumped)) s->timeouts++;
    if (ls->jumped) {
        if (!s->abandoned) stop_place(s, ls, ls->kind, s->first_jump, sizeof s->first_jump);
        s->abandoned += ls->used + ABANDONED_EXTRA;
        ls->L = NULL;
    }
    ls->busy = false;
    pthread_cond_signal(&s->freed);
    pthread_mutex_unlock(&s->lock);
}

/* Runs the function of `kind` in a state the caller holds: its buffer p (a grid's) first, if any,
 * then args[nargs]; its first nres results go to res. */
static terra_status run(terra_script *s, lstate *ls, int kind, void *p, int nargs, const double *args, int nres,
                        double *res) {
    lua_State *L = ls->L;
    ls->kind = kind;
    lua_settop(L, 0);
    lua_rawgeti(L, LUA_REGISTRYINDEX, REF_HANDLER);
    lua_rawgeti(L, LUA_REGISTRYINDEX, kind);
    if (p) lua_pushlightuserdata(L, p);
    for (int i = 0; i < nargs; i++) lua_pushnumber(L, args[i]);
    const int rc = guarded_pcall(ls, nargs + (p != NULL), nres);
    if (rc) return lua_failure(s, ls, kind, rc);
    for (int i = 0; i < nres; i++) res[i] = lua_tonumber(L, 2 + i);
    lua_settop(L, 0);
    return TERRA_OK;
}

static terra_status call(terra_script *s, int kind, int nargs, const double *args, int nres, double *res) {
    terra_status st;
    lstate *ls = acquire(s, &st);
    if (!ls) return st;
    const bool loaded = st == TERRA_OK;
    if (loaded) st = run(s, ls, kind, NULL, nargs, args, nres, res);
    release(s, ls, loaded);
    return st;
}

/* ---- the source's callbacks --------------------------------------------------------------------------- */

static terra_status script_grid(void *user, const terra_grid_request *r, float *heights, terra_surface *surfaces) {
    terra_script *s = user;
    const double args[5] = {(double)r->ix0, (double)r->iz0, r->spacing, r->nx, r->nz};
    terra_status st;
    lstate *ls = acquire(s, &st);
    if (!ls) return st;
    const bool loaded = st == TERRA_OK;
    if (loaded) st = run(s, ls, CALL_HEIGHTS, heights, 5, args, 0, NULL);
    if (!st && surfaces && s->has_layer) st = run(s, ls, CALL_LAYERS, surfaces, 5, args, 0, NULL);
    release(s, ls, loaded);
    if (st == TERRA_OK && surfaces && !s->has_layer) memset(surfaces, 0, (size_t)r->nx * (size_t)r->nz);
    return st;
}

/* A point call has no error to return (its NaN fails the query that asked): the first few are logged. */
static void point_failed(terra_script *s) {
    if (atomic_fetch_add(&s->point_errors, 1) < 5) terra_log(TERRA_LOG_WARN, "%s", terra_last_error());
}

static float script_height(void *user, double x, double z) {
    double v = NAN, args[2] = {x, z};
    if (call(user, CALL_POINT, 2, args, 1, &v) != TERRA_OK) point_failed(user);
    return (float)v;
}

static terra_surface script_surface(void *user, double x, double z) {
    double v = 0, args[2] = {x, z};
    if (call(user, CALL_SURFACE, 2, args, 1, &v) != TERRA_OK) point_failed(user);
    return (terra_surface)v;
}

static terra_status script_range(void *user, double x0, double z0, double x1, double z1, float *lo, float *hi) {
    double args[4] = {x0, z0, x1, z1}, v[2];
    terra_status st = call(user, CALL_RANGE, 4, args, 2, v);
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
    if (!file_stat(path, &w->mtime, &w->size) || !(w->path = dup_str(path))) return;
    s->nfiles++;
}

static bool name_surface(terra_script *s, const char *name) {
    for (int i = 1; i < 256; i++)
        if (s->names[i] && !strcmp(s->names[i], name)) return true;
    for (int i = TERRA_SURFACE_FIRST_USER; i < 256; i++)
        if (!s->names[i]) return (s->names[i] = dup_str(name)) != NULL;
    return false;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static terra_surface id_of(const terra_script *s, const char *name) {
    for (int i = 1; i < 256; i++)
        if (s->names[i] && !strcmp(s->names[i], name)) return (terra_surface)i;
    return TERRA_SURFACE_NONE;
}

/* A texture path of a look (*out NULL: none): relative ones are the script's folder's. Unless
 * trusted, it is held to the rule of modules: a file under the folder (by its real path) and a
 * regular one; a file not there yet is left to the renderer, which draws the surface without it. */
static terra_status look_path(const terra_script *s, lua_State *L, int look, const char *name, const char *field,
                              char **out) {
    *out = NULL;
    if (!lua_istable(L, look)) return TERRA_OK;
    raw_field(L, look, field);
    const char *p = lua_isstring(L, -1) ? lua_tostring(L, -1) : NULL;
    terra_status st = TERRA_OK;
    if (p) {
        const size_t n = strlen(s->dir) + strlen(p) + 2;
        if ((*out = terra_alloc(n))) snprintf(*out, n, "%s%s%s", p[0] == '/' ? "" : s->dir, p[0] == '/' ? "" : "/", p);
        else st = terra_fail(TERRA_E_NOMEM, "%s: out of memory", s->path);
    }
    lua_pop(L, 1);
    char real[PATH_MAX];
    struct stat sb;
    const char *why = NULL;
    if (st || !*out || s->trusted) return st;
    if (!realpath(*out, real)) why = errno == ENOENT ? NULL : strerror(errno);
    else if (!in_root(s, real)) why = "outside the script's folder";
    else if (stat(real, &sb) || !S_ISREG(sb.st_mode)) why = "not a regular file";
    if (why) {
        st = terra_fail(TERRA_E_INVALID, "%s: layers.%s.%s '%s' is refused: %s (a sandboxed script names only "
                                         "regular files under its folder %s; --trust-script lifts it)",
                        s->path, name, field, *out, why, s->root);
        terra_free(*out);
        *out = NULL;
    }
    return st;
}

/* One entry of `layers` (its look at the top of L's stack) into the surface table. */
static terra_status describe(terra_script *s, lua_State *L, const char *name) {
    const int look = lua_gettop(L);
    terra_surface_look lk = {.tint = {1, 1, 1}};
    if (lua_istable(L, look)) {
        raw_field(L, look, "tint");
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
        raw_field(L, look, "tiling");
        lk.tiling_m = (float)lua_tonumber(L, -1);
        lua_pop(L, 1);
    }
    char *albedo = NULL, *normal = NULL, *mask = NULL;
    terra_status st = look_path(s, L, look, name, "albedo", &albedo);
    if (!st) st = look_path(s, L, look, name, "normal", &normal);
    if (!st) st = look_path(s, L, look, name, "mask", &mask);
    lk.albedo = albedo, lk.normal = normal, lk.mask = mask;
    if (!st) st = terra_surface_table_set(s->surfaces, id_of(s, name), &lk);
    terra_free(albedo), terra_free(normal), terra_free(mask);
    return st;
}

/* `layers`: { name = look, ... } or { "name", { name = ..., tint = ... }, ... }. Names get their ids
 * in sorted order, then each is described. */
static terra_status read_layers(terra_script *s, lua_State *L, int T) {
    raw_field(L, T, "layers");
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
            raw_field(L, lua_gettop(L), "name");
            name = lua_isstring(L, -1) ? lua_tostring(L, -1) : NULL;
            lua_pop(L, 1);
        }
        if (!name) st = terra_fail(TERRA_E_INVALID, "%s: an entry of layers has no name", s->path);
        else if (n == 240) st = terra_fail(TERRA_E_INVALID, "%s: layers names more than 240 surfaces", s->path);
        else if (!(names[n++] = dup_str(name))) st = terra_fail(TERRA_E_NOMEM, "%s: out of memory", s->path);
        lua_pop(L, 1);
    }
    qsort(names, (size_t)n, sizeof *names, cmp_str);
    for (int i = 0; !st && i < n; i++)
        if (!name_surface(s, names[i])) st = terra_fail(TERRA_E_NOMEM, "%s: out of memory", s->path);
    for (int i = 0; i < n; i++) terra_free(names[i]);
    if (!st) st = terra_surface_table_create(&s->surfaces);
    lua_pushnil(L);
    while (!st && lua_next(L, layers)) {
        if (lua_type(L, -2) == LUA_TSTRING) {
            st = describe(s, L, lua_tostring(L, -2));
        } else if (lua_istable(L, -1)) {
            raw_field(L, lua_gettop(L), "name");
            char *name = lua_isstring(L, -1) ? dup_str(lua_tostring(L, -1)) : NULL;
            lua_pop(L, 1);
            st = name ? describe(s, L, name) : terra_fail(TERRA_E_NOMEM, "%s: out of memory", s->path);
            terra_free(name);
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
        raw_field(L, T, fields[i].field);
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
    s->watching = true; /* the modules it requires now are watched */
    lstate *ls = acquire(s, &st); /* not NULL: nothing is abandoned yet */
    const bool loaded = st == TERRA_OK;
    watch(s, s->path);
    if (loaded) {
        lua_State *L = ls->L;
        const int T = lua_gettop(L);
        st = check_table(s, L, T, lo, hi);
        if (!st) st = read_layers(s, L, T);
        for (int i = 0; !st && i < 3; i++) { /* where each function starts, for the messages of stopped calls */
            raw_field(L, T, entry_names[i]);
            lua_Debug d;
            if (lua_isfunction(L, -1) && lua_getinfo(L, ">S", &d)) s->entry_line[i] = d.linedefined;
            else lua_pop(L, 1);
        }
        lua_settop(L, 0);
    }
    s->watching = false;
    release(s, ls, loaded && st == TERRA_OK); /* its ids table lacks the names of layers: assign() knows them */
    return st;
}

terra_status terra_script_open(const terra_script_desc *desc, terra_script **out) {
    *out = NULL;
    if (!desc || !desc->path || !*desc->path) return terra_fail(TERRA_E_INVALID, "script: no file given");
    if (!(desc->time_limit_s >= 0) || desc->time_limit_s > 3600)
        return terra_fail(TERRA_E_INVALID, "script: time limit %g s is not from 0 to 3600", desc->time_limit_s);
    if (desc->memory_limit_bytes && desc->memory_limit_bytes < TERRA_SCRIPT_MIN_MEMORY_LIMIT)
        return terra_fail(TERRA_E_INVALID, "script: memory limit %zu bytes is under the %d MiB a state needs",
                          desc->memory_limit_bytes, TERRA_SCRIPT_MIN_MEMORY_LIMIT >> 20);
    pthread_once(&handler_once, install_handler);
    if (handler_error)
        return terra_fail(TERRA_E_IO, "script: cannot take signal %d to stop scripts: %s", (int)TERRA_SCRIPT_SIGNAL,
                          strerror(handler_error));
    terra_script *s = terra_calloc(1, sizeof *s);
    if (!s) return terra_fail(TERRA_E_NOMEM, "script: out of memory");
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->freed, NULL);
    pthread_condattr_t monotonic; /* the watchdog's waits are not moved by a change of the date */
    pthread_condattr_init(&monotonic);
    pthread_condattr_setclock(&monotonic, CLOCK_MONOTONIC);
    pthread_cond_init(&s->wake, &monotonic);
    pthread_condattr_destroy(&monotonic);
    s->limit_s = desc->time_limit_s > 0 ? desc->time_limit_s : TERRA_SCRIPT_DEFAULT_TIME_LIMIT_S;
    s->memory_limit = desc->memory_limit_bytes ? desc->memory_limit_bytes : TERRA_SCRIPT_DEFAULT_MEMORY_LIMIT;
    s->trusted = desc->trusted;
    s->path = dup_str(desc->path);
    const char *slash = strrchr(desc->path, '/');
    s->dir = slash ? dup_text(desc->path, (size_t)(slash - desc->path) + (slash == desc->path)) : dup_str(".");
    char real[PATH_MAX];
    s->root = dup_str(s->dir && realpath(s->dir, real) ? real : s->dir ? s->dir : "");
    for (int i = 1; i < 5; i++) s->names[i] = dup_str(builtin_names[i]);
    terra_status st = s->path && s->dir && s->root && s->names[4] ? TERRA_OK : terra_fail(TERRA_E_NOMEM, "script: out of memory");
    if (!st) st = terra_world_create(&(terra_world_desc){.seed = desc->world_seed}, &s->world);
    if (!st) {
        s->watchdog_started = pthread_create(&s->watchdog, NULL, watchdog_main, s) == 0;
        if (!s->watchdog_started) st = terra_fail(TERRA_E_NOMEM, "script: cannot start its watchdog thread");
    }
    if (!st && s->trusted)
        terra_log(TERRA_LOG_WARN, "%s: trusted: the script runs with every library of LuaJIT (os, io, ffi, debug, "
                                  "bytecode), as any program the user runs", s->path);
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
    for (int i = 0; i < MAX_STATES; i++) {
        state_close(&s->states[i]);
        terra_free(s->states[i].spans);
    }
    for (int i = 0; i < 256; i++) terra_free(s->names[i]);
    for (int i = 0; i < s->nfiles; i++) terra_free(s->files[i].path);
    terra_source_destroy(s->src);
    terra_source_destroy(s->world);
    terra_surface_table_destroy(s->surfaces);
    pthread_cond_destroy(&s->wake);
    pthread_cond_destroy(&s->freed);
    pthread_mutex_destroy(&s->lock);
    terra_free(s->path);
    terra_free(s->dir);
    terra_free(s->root);
    terra_free(s);
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
