/* terra core: errors, hooks, tile keys, camera and frustum math. */
#include "terra/core.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- errors ---------------------------------------------------------------------------- */

const char *terra_error_string(terra_status s) {
    switch (s) {
    case TERRA_OK: return "ok";
    case TERRA_E_INVALID: return "invalid argument";
    case TERRA_E_NOMEM: return "out of memory";
    case TERRA_E_IO: return "input/output error";
    case TERRA_E_FORMAT: return "bad format";
    case TERRA_E_CORRUPT: return "corrupt data";
    case TERRA_E_VERSION: return "unsupported format version";
    case TERRA_E_UNSUPPORTED: return "unsupported";
    case TERRA_E_SOURCE: return "bad height source";
    case TERRA_E_NOT_FOUND: return "not found";
    case TERRA_E_CAPACITY: return "capacity exceeded";
    }
    return "unknown error";
}

static _Thread_local char last_error[1024];

const char *terra_last_error(void) { return last_error; }

terra_status terra_fail(terra_status status, const char *fmt, ...) {
    /* Formatted aside first: callers often pass terra_last_error() itself as an argument. */
    char msg[sizeof last_error];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    memcpy(last_error, msg, sizeof msg);
    return status;
}

/* ---- allocator ------------------------------------------------------------------------- */

static terra_allocator g_alloc; /* zero: libc */

void terra_set_allocator(const terra_allocator *a) {
    if (a && a->alloc && a->realloc && a->free)
        g_alloc = *a;
    else
        memset(&g_alloc, 0, sizeof g_alloc);
}

void *terra_alloc(size_t size) {
    return g_alloc.alloc ? g_alloc.alloc(size, g_alloc.user) : malloc(size);
}

void *terra_calloc(size_t count, size_t size) {
    if (size && count > SIZE_MAX / size) return NULL;
    void *p = terra_alloc(count * size);
    if (p) memset(p, 0, count * size);
    return p;
}

void *terra_realloc(void *ptr, size_t size) {
    return g_alloc.realloc ? g_alloc.realloc(ptr, size, g_alloc.user) : realloc(ptr, size);
}

void terra_free(void *ptr) {
    if (!ptr) return;
    if (g_alloc.free)
        g_alloc.free(ptr, g_alloc.user);
    else
        free(ptr);
}

/* ---- log --------------------------------------------------------------------------------- */

static void log_stderr(terra_log_level level, const char *msg, void *user) {
    (void)user;
    if (level >= TERRA_LOG_WARN) fprintf(stderr, "terra: %s\n", msg);
}

static terra_log_fn g_log = log_stderr;
static void *g_log_user;

void terra_set_log(terra_log_fn fn, void *user) {
    g_log = fn;
    g_log_user = user;
}

void terra_log(terra_log_level level, const char *fmt, ...) {
    if (!g_log) return;
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    g_log(level, buf, g_log_user);
}

/* ---- tile keys --------------------------------------------------------------------------- */

static int32_t floor_div2(int32_t v) { return (v >= 0) ? v / 2 : -((-v + 1) / 2); }

terra_tile_key terra_tile_key_parent(terra_tile_key k) {
    return terra_tile_key_make(terra_tile_key_face(k), terra_tile_key_level(k) + 1,
                               floor_div2(terra_tile_key_x(k)), floor_div2(terra_tile_key_y(k)));
}

terra_tile_key terra_tile_key_child(terra_tile_key k, int i) {
    return terra_tile_key_make(terra_tile_key_face(k), terra_tile_key_level(k) - 1,
                               terra_tile_key_x(k) * 2 + (i & 1), terra_tile_key_y(k) * 2 + (i >> 1));
}

/* ---- camera and frustum ------------------------------------------------------------------- */

void terra_camera_basis(const terra_camera *cam, terra_vec3 *f, terra_vec3 *r, terra_vec3 *u) {
    double cy = cos(cam->yaw_rad), sy = sin(cam->yaw_rad);
    double cp = cos(cam->pitch_rad), sp = sin(cam->pitch_rad);
    terra_vec3 fwd = {sy * cp, sp, -cy * cp};
    terra_vec3 right = {cy, 0, sy};
    const terra_vec3 lu = cam->up;
    const double ul = sqrt(lu.x * lu.x + lu.y * lu.y + lu.z * lu.z);
    if (ul > 0) { /* a local frame: north (toward +y in the tangent plane, else -z), east = north x up */
        const terra_vec3 u = {lu.x / ul, lu.y / ul, lu.z / ul};
        terra_vec3 n = {-u.y * u.x, 1.0 - u.y * u.y, -u.y * u.z};
        double nl = sqrt(n.x * n.x + n.y * n.y + n.z * n.z);
        if (nl <= 1e-12) { /* at a pole: -z less its part along up */
            n = (terra_vec3){u.z * u.x, u.z * u.y, -1.0 + u.z * u.z};
            nl = sqrt(n.x * n.x + n.y * n.y + n.z * n.z);
        }
        n = (terra_vec3){n.x / nl, n.y / nl, n.z / nl};
        const terra_vec3 e = {n.y * u.z - n.z * u.y, n.z * u.x - n.x * u.z, n.x * u.y - n.y * u.x};
        fwd = (terra_vec3){cp * (cy * n.x + sy * e.x) + sp * u.x, cp * (cy * n.y + sy * e.y) + sp * u.y,
                           cp * (cy * n.z + sy * e.z) + sp * u.z};
        right = (terra_vec3){cy * e.x - sy * n.x, cy * e.y - sy * n.y, cy * e.z - sy * n.z};
    }
    /* up = right x forward */
    terra_vec3 up = {right.y * fwd.z - right.z * fwd.y, right.z * fwd.x - right.x * fwd.z,
                     right.x * fwd.y - right.y * fwd.x};
    if (f) *f = fwd;
    if (r) *r = right;
    if (u) *u = up;
}

static terra_plane plane_through(terra_vec3 n, terra_vec3 p) {
    double len = sqrt(n.x * n.x + n.y * n.y + n.z * n.z);
    terra_plane pl = {n.x / len, n.y / len, n.z / len, 0};
    pl.d = -(pl.a * p.x + pl.b * p.y + pl.c * p.z);
    return pl;
}

static terra_vec3 v3(double x, double y, double z) { return (terra_vec3){x, y, z}; }
static terra_vec3 v3_add(terra_vec3 a, terra_vec3 b) { return v3(a.x + b.x, a.y + b.y, a.z + b.z); }
static terra_vec3 v3_scale(terra_vec3 a, double s) { return v3(a.x * s, a.y * s, a.z * s); }

void terra_camera_frustum(const terra_camera *cam, terra_frustum *out) {
    terra_vec3 f, r, u;
    terra_camera_basis(cam, &f, &r, &u);
    double fov = cam->fov_y_rad > 0 ? cam->fov_y_rad : 60.0 * 3.14159265358979323846 / 180.0;
    double aspect = cam->aspect > 0 ? cam->aspect : 16.0 / 9.0;
    double near_m = cam->near_m > 0 ? cam->near_m : 0.5;
    double ty = tan(fov * 0.5), tx = ty * aspect;
    terra_vec3 e = cam->eye;
    /* Side planes pass through the eye; inward normals from the edge directions. */
    terra_vec3 left_n = v3_add(v3_scale(r, 1.0), v3_scale(f, tx));   /* normal of left plane */
    terra_vec3 right_n = v3_add(v3_scale(r, -1.0), v3_scale(f, tx));
    terra_vec3 bottom_n = v3_add(v3_scale(u, 1.0), v3_scale(f, ty));
    terra_vec3 top_n = v3_add(v3_scale(u, -1.0), v3_scale(f, ty));
    out->planes[0] = plane_through(left_n, e);
    out->planes[1] = plane_through(right_n, e);
    out->planes[2] = plane_through(bottom_n, e);
    out->planes[3] = plane_through(top_n, e);
    out->planes[4] = plane_through(f, v3_add(e, v3_scale(f, near_m)));
    if (cam->far_m > 0) {
        out->planes[5] = plane_through(v3_scale(f, -1.0), v3_add(e, v3_scale(f, cam->far_m)));
    } else {
        out->planes[5] = (terra_plane){0, 0, 0, 1}; /* always inside */
    }
}

terra_cull terra_frustum_test_box(const terra_frustum *fr, const terra_box3 *b) {
    terra_cull result = TERRA_CULL_INSIDE;
    for (int i = 0; i < 6; i++) {
        const terra_plane *p = &fr->planes[i];
        /* the box corner furthest along the normal (p-vertex) and nearest (n-vertex) */
        double px = p->a >= 0 ? b->max.x : b->min.x, nx = p->a >= 0 ? b->min.x : b->max.x;
        double py = p->b >= 0 ? b->max.y : b->min.y, ny = p->b >= 0 ? b->min.y : b->max.y;
        double pz = p->c >= 0 ? b->max.z : b->min.z, nz = p->c >= 0 ? b->min.z : b->max.z;
        if (p->a * px + p->b * py + p->c * pz + p->d < 0) return TERRA_CULL_OUTSIDE;
        if (p->a * nx + p->b * ny + p->c * nz + p->d < 0) result = TERRA_CULL_INTERSECTS;
    }
    return result;
}

bool terra_frustum_contains_point(const terra_frustum *fr, terra_vec3 q) {
    for (int i = 0; i < 6; i++) {
        const terra_plane *p = &fr->planes[i];
        if (p->a * q.x + p->b * q.y + p->c * q.z + p->d < 0) return false;
    }
    return true;
}

double terra_box3_distance(const terra_box3 *b, terra_vec3 p) {
    double dx = p.x < b->min.x ? b->min.x - p.x : (p.x > b->max.x ? p.x - b->max.x : 0);
    double dy = p.y < b->min.y ? b->min.y - p.y : (p.y > b->max.y ? p.y - b->max.y : 0);
    double dz = p.z < b->min.z ? b->min.z - p.z : (p.z > b->max.z ? p.z - b->max.z : 0);
    return sqrt(dx * dx + dy * dy + dz * dz);
}

/* ---- octahedral normals ------------------------------------------------------------------- */

static float sign_nz(float v) { return v >= 0.0f ? 1.0f : -1.0f; }

void terra_oct_decode(const int8_t in[2], float n[3]) {
    float x = fmaxf(-1.0f, in[0] / 127.0f), y = fmaxf(-1.0f, in[1] / 127.0f);
    float z = 1.0f - fabsf(x) - fabsf(y);
    if (z < 0) {
        float ox = (1.0f - fabsf(y)) * sign_nz(x);
        float oy = (1.0f - fabsf(x)) * sign_nz(y);
        x = ox;
        y = oy;
    }
    float len = sqrtf(x * x + y * y + z * z);
    n[0] = x / len;
    n[1] = y / len;
    n[2] = z / len;
}

double terra_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

double terra_thread_cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int terra_default_threads(void) {
    const long cores = sysconf(_SC_NPROCESSORS_ONLN);
    return cores < 1 ? 1 : cores > 64 ? 64 : (int)cores;
}
