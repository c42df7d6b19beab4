/* terra core: errors, allocator and log hooks, tile keys, small double-precision math.
 *
 * Conventions used across terra:
 *  - World space is metres, y up; the ground is a function of (x, z).
 *  - World positions are doubles; floats appear only relative to a tile or the camera.
 *  - Every fallible function returns a terra_status; on failure a sentence saying what broke is
 *    available from terra_last_error() on the same thread until the next failure.
 */
/* Threads: terra_last_error() and terra_fail() are per thread: a failure on a worker is seen there
 * only (terra's functions that run workers copy the first worker's message to the calling thread).
 * terra_set_allocator and terra_set_log write process-wide variables without a lock: call them before
 * any other thread uses terra (pools, streamers, bakes and cooks start threads) and never while a
 * terra call runs on another thread; memory goes back to the allocator that gave it. The hooks
 * themselves are called on whichever thread allocates or logs, pool workers included, several at
 * once: they must be thread-safe. Tile keys, camera and frustum math and terra_now_s are pure. */
#ifndef TERRA_CORE_H
#define TERRA_CORE_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include <math.h>

/* Marks what the libraries export. They are built with hidden visibility, so in a shared libterra
 * only what the headers declare with it is visible. TERRA_INTERNAL: exported too, for another of
 * terra's own libraries, declared in a header that is not installed; no part of the API. */
#if defined(__GNUC__) || defined(__clang__)
#define TERRA_API __attribute__((visibility("default")))
#else
#define TERRA_API
#endif
#define TERRA_INTERNAL TERRA_API

#ifdef __cplusplus
extern "C" {
#endif

/* ---- errors ---------------------------------------------------------------------------- */

typedef enum terra_status {
    TERRA_OK = 0,
    TERRA_E_INVALID,     /* an argument or option broke a documented rule */
    TERRA_E_NOMEM,       /* an allocation failed */
    TERRA_E_IO,          /* reading or writing a file failed */
    TERRA_E_FORMAT,      /* input is not in the expected format */
    TERRA_E_CORRUPT,     /* input is in the format but damaged (checksum, truncation, range) */
    TERRA_E_VERSION,     /* input is of another format version */
    TERRA_E_UNSUPPORTED, /* valid input that terra does not handle */
    TERRA_E_SOURCE,      /* a height source answered something impossible (NaN, inverted range) */
    TERRA_E_NOT_FOUND,   /* the thing asked for is not there */
    TERRA_E_CAPACITY     /* a caller-owned buffer or a configured capacity is too small */
} terra_status;

/* The name of a status code, e.g. "invalid argument". Never NULL. */
TERRA_API const char *terra_error_string(terra_status status);

/* The sentence describing the last failure on this thread ("" if none). */
TERRA_API const char *terra_last_error(void);

/* Records a failure for terra_last_error() and returns `status` (for `return terra_fail(...)`). */
TERRA_API terra_status terra_fail(terra_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* ---- allocator and log hooks ---------------------------------------------------------------
 * Process-wide; install them before creating any terra object. A zero-initialised struct (or
 * NULL) restores malloc/realloc/free. Every allocation terra makes goes through these hooks. */

typedef struct terra_allocator {
    void *(*alloc)(size_t size, void *user);
    void *(*realloc)(void *ptr, size_t size, void *user);
    void (*free)(void *ptr, void *user);
    void *user;
} terra_allocator;

TERRA_API void terra_set_allocator(const terra_allocator *allocator);
TERRA_API void *terra_alloc(size_t size);
TERRA_API void *terra_calloc(size_t count, size_t size); /* zeroed; NULL on overflow */
TERRA_API void *terra_realloc(void *ptr, size_t size);
TERRA_API void terra_free(void *ptr);

typedef enum terra_log_level { TERRA_LOG_DEBUG, TERRA_LOG_INFO, TERRA_LOG_WARN, TERRA_LOG_ERROR } terra_log_level;
typedef void (*terra_log_fn)(terra_log_level level, const char *message, void *user);
/* NULL silences the log. By default warnings and errors go to stderr. */
TERRA_API void terra_set_log(terra_log_fn fn, void *user);
TERRA_API void terra_log(terra_log_level level, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* ---- tile keys ------------------------------------------------------------------------------
 * A tile is (face, level, x, y): level 0 is the finest; x, y are signed world tile coordinates
 * at that level (the world has no edge). Packed into 64 bits:
 *   bits 61..63 face (0..7), bits 56..60 level (0..31), bits 28..55 x, bits 0..27 y,
 * x and y as 28-bit two's complement (TERRA_TILE_COORD_MIN..MAX). */

typedef uint64_t terra_tile_key;

#define TERRA_TILE_COORD_MAX ((int32_t)((1 << 27) - 1))
#define TERRA_TILE_COORD_MIN ((int32_t)(-(1 << 27)))
#define TERRA_TILE_MAX_LEVEL 31

static inline terra_tile_key terra_tile_key_make(int face, int level, int32_t x, int32_t y) {
    return ((uint64_t)(face & 7) << 61) | ((uint64_t)(level & 31) << 56) |
           ((uint64_t)((uint32_t)x & 0x0fffffffu) << 28) | (uint64_t)((uint32_t)y & 0x0fffffffu);
}
static inline int terra_tile_key_face(terra_tile_key k) { return (int)(k >> 61); }
static inline int terra_tile_key_level(terra_tile_key k) { return (int)((k >> 56) & 31); }
static inline int32_t terra_tile_key_x(terra_tile_key k) {
    uint32_t v = (uint32_t)(k >> 28) & 0x0fffffffu;
    return (int32_t)(v ^ 0x08000000u) - 0x08000000; /* sign-extend 28 bits */
}
static inline int32_t terra_tile_key_y(terra_tile_key k) {
    uint32_t v = (uint32_t)k & 0x0fffffffu;
    return (int32_t)(v ^ 0x08000000u) - 0x08000000;
}
/* The parent (one level coarser) and child i (0..3: x + 2y) of a tile. */
TERRA_API terra_tile_key terra_tile_key_parent(terra_tile_key k);
TERRA_API terra_tile_key terra_tile_key_child(terra_tile_key k, int i);

/* ---- math ------------------------------------------------------------------------------------ */

typedef struct terra_vec3 { double x, y, z; } terra_vec3;
typedef struct terra_box3 { terra_vec3 min, max; } terra_box3;
typedef struct terra_plane { double a, b, c, d; } terra_plane;   /* a*x + b*y + c*z + d >= 0 inside */
typedef struct terra_frustum { terra_plane planes[6]; } terra_frustum;

/* A camera: eye in world doubles, yaw about +y (0 looks along -z, positive turns toward +x),
 * pitch up from the horizon, vertical field of view, aspect = width / height. */
typedef struct terra_camera {
    terra_vec3 eye;
    double yaw_rad, pitch_rad;
    double fov_y_rad;   /* 0 = 60 degrees */
    double aspect;      /* 0 = 16/9 */
    double near_m;      /* 0 = 0.5 */
    double far_m;       /* 0 = no far plane (infinitely far) */
    /* The local up that yaw turns about and pitch rises from: all zero = +y (the plane). On a planet,
     * the eye's up (terra_planet_frame): yaw then turns from the local north, the direction toward
     * +y in the tangent plane (-z at the poles), toward the local east, as yaw 0 on the plane looks
     * along -z and turns toward +x. */
    terra_vec3 up;
} terra_camera;

/* Unit view direction, right and up vectors of a camera (its up counted). */
TERRA_API void terra_camera_basis(const terra_camera *cam, terra_vec3 *forward, terra_vec3 *right, terra_vec3 *up);
/* The camera's frustum planes in world space (normals point inward). With far_m = 0 the far
 * plane is placed where it never culls. */
TERRA_API void terra_camera_frustum(const terra_camera *cam, terra_frustum *out);

typedef enum terra_cull { TERRA_CULL_OUTSIDE = 0, TERRA_CULL_INTERSECTS = 1, TERRA_CULL_INSIDE = 2 } terra_cull;
TERRA_API terra_cull terra_frustum_test_box(const terra_frustum *f, const terra_box3 *b);
TERRA_API bool terra_frustum_contains_point(const terra_frustum *f, terra_vec3 p);
/* Euclidean distance from p to the nearest point of box b (0 inside). */
TERRA_API double terra_box3_distance(const terra_box3 *b, terra_vec3 p);

/* Octahedral encoding of a unit normal into two signed bytes (nearest of 255 steps per axis),
 * and back. Inline: grid tiles encode one per vertex. */
static inline int8_t terra_snorm8_(float v) {
    v = v < -1.0f ? -1.0f : (v > 1.0f ? 1.0f : v);
    return (int8_t)lrintf(v * 127.0f);
}
static inline void terra_oct_encode(const float n[3], int8_t out[2]) {
    float ax = n[0] < 0 ? -n[0] : n[0], ay = n[1] < 0 ? -n[1] : n[1], az = n[2] < 0 ? -n[2] : n[2];
    float inv = 1.0f / (ax + ay + az);
    float x = n[0] * inv, y = n[1] * inv;
    if (n[2] < 0) {
        float ox = (1.0f - (y < 0 ? -y : y)) * (x >= 0 ? 1.0f : -1.0f);
        float oy = (1.0f - (x < 0 ? -x : x)) * (y >= 0 ? 1.0f : -1.0f);
        x = ox, y = oy;
    }
    out[0] = terra_snorm8_(x);
    out[1] = terra_snorm8_(y);
}
TERRA_API void terra_oct_decode(const int8_t in[2], float n[3]);

/* Monotonic clock in seconds. */
TERRA_API double terra_now_s(void);
/* The calling thread's CPU time in seconds: what it ran, not the time other threads (a pool's
 * workers, a software GL's) took its core from it. What frame timings are measured in. */
TERRA_API double terra_thread_cpu_s(void);

/* What a `threads` of 0 means everywhere (pools, streamers, bakes, cooks, tiled meshing): one
 * worker per online core, 1 to 64. */
TERRA_API int terra_default_threads(void);

#ifdef __cplusplus
}
#endif
#endif
