/* Triangle meshes out (OBJ, binary PLY, binary STL), written atomically; OBJ in. */
#include "terra/io.h"
#include "terra/raster.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum { FMT_NONE, FMT_OBJ, FMT_PLY, FMT_STL } mesh_fmt;

static mesh_fmt format_of(const char *path) {
    const char *dot = path ? strrchr(path, '.') : NULL;
    if (!dot) return FMT_NONE;
    char ext[8] = {0};
    for (int i = 0; i < 7 && dot[1 + i]; i++) ext[i] = (char)(dot[1 + i] | 0x20);
    if (!strcmp(ext, "obj")) return FMT_OBJ;
    if (!strcmp(ext, "ply")) return FMT_PLY;
    if (!strcmp(ext, "stl")) return FMT_STL;
    return FMT_NONE;
}

bool terra_io_mesh_format_known(const char *path) { return format_of(path) != FMT_NONE; }

static bool host_little_endian(void) {
    const uint16_t one = 1;
    uint8_t b;
    memcpy(&b, &one, 1);
    return b == 1;
}

static void put_f32(uint8_t *p, float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    p[0] = (uint8_t)u, p[1] = (uint8_t)(u >> 8), p[2] = (uint8_t)(u >> 16), p[3] = (uint8_t)(u >> 24);
}
static void put_u32(uint8_t *p, uint32_t u) {
    p[0] = (uint8_t)u, p[1] = (uint8_t)(u >> 8), p[2] = (uint8_t)(u >> 16), p[3] = (uint8_t)(u >> 24);
}

static void position(const terra_mesh_out *m, size_t v, double p[3]) {
    if (m->xyz) {
        p[0] = m->xyz[3 * v], p[1] = m->xyz[3 * v + 1], p[2] = m->xyz[3 * v + 2];
        return;
    }
    double c = m->xy[2 * v], r = m->xy[2 * v + 1];
    const double *a = m->affine;
    p[0] = a[0] + a[1] * c + a[2] * r;
    p[1] = a[3] + a[4] * c + a[5] * r;
    p[2] = m->z[v] == m->z[v] ? m->z[v] : 0.0;
}

static void corners(const terra_mesh_out *m, size_t t, uint32_t out[3]) {
    out[0] = m->triangles[3 * t];
    out[1] = m->triangles[3 * t + (m->flip ? 2 : 1)];
    out[2] = m->triangles[3 * t + (m->flip ? 1 : 2)];
}

/* Appends u in decimal, two digits at a time. */
static char *put_u64(char *s, uint64_t u) {
    static const char pairs[201] = "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
                                   "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
                                   "8081828384858687888990919293949596979899";
    char tmp[24];
    int n = 24;
    while (u >= 100 && u > 0xffffffffu) {
        unsigned k = (unsigned)(u % 100) * 2;
        u /= 100;
        tmp[--n] = pairs[k + 1], tmp[--n] = pairs[k];
    }
    uint32_t v = (uint32_t)u; /* indices and most columns: 32-bit division is cheaper */
    while (v >= 100) {
        unsigned k = (v % 100) * 2;
        v /= 100;
        tmp[--n] = pairs[k + 1], tmp[--n] = pairs[k];
    }
    u = v;
    if (u >= 10) {
        tmp[--n] = pairs[2 * u + 1], tmp[--n] = pairs[2 * u];
    } else {
        tmp[--n] = (char)('0' + u);
    }
    memcpy(s, tmp + n, (size_t)(24 - n));
    return s + (24 - n);
}

#ifdef __SIZEOF_INT128__
__extension__ typedef unsigned __int128 u128;

/* Appends v (non-integral, |v| in [0.01, 2^50)) as the fixed-point decimal with the fewest digits
 * after the point that reads back as v when rounded to `bits` of mantissa (53: a double, 24: a
 * float), the one nearest v among equals; NULL when it has no such form here (the caller prints).
 * Exact: v = m 2^e, and a decimal c / 10^d reads back as v when it lies between v's rounding
 * boundaries (4m -+ 2) 2^(e-2) (4m - 1 below a power of two), ends included when m is even
 * (ties go to even); both sides are compared as integers, c 2^(2-e) against N 10^d, in 128 bits
 * (m 10^d stays under 2^125 for the d tried). For floats d stays at most 11: a decimal that short
 * is never within a double's rounding of a float boundary, so reading it as a double and then
 * rounding to float gives v too (the --check-mesh reader does that). */
static char *put_shortest(char *s, double v, int bits) {
    int E;
    double f = frexp(fabs(v), &E);
    uint64_t m = (uint64_t)ldexp(f, bits);
    int e = E - bits;
    if (e >= -1 || e < -100) return NULL;
    const unsigned t = (unsigned)-e, sh = t + 2;
    const u128 hi = (u128)(4 * m + 2);
    const u128 lo = (u128)(m == (uint64_t)1 << (bits - 1) ? 4 * m - 1 : 4 * m - 2);
    const bool closed = (m & 1) == 0;
    const int dmax = bits == 24 ? 11 : 21;
    u128 p10 = 1;
    for (int d = 0; d <= dmax; d++, p10 *= 10) {
        u128 X = (u128)m * p10; /* v 10^d = X / 2^t */
        u128 c0 = X >> t, rem = X - (c0 << t), half = (u128)1 << (t - 1);
        u128 lo10 = lo * p10, hi10 = hi * p10;
        u128 cand[2] = {c0, c0 + 1};
        int best = -1;
        for (int i = 0; i < 2; i++) {
            u128 a = cand[i] << sh;
            bool in = closed ? (a >= lo10 && a <= hi10) : (a > lo10 && a < hi10);
            if (!in) continue;
            if (best < 0 || (i == 1 && (rem > half || (rem == half && (c0 & 1))))) best = i;
        }
        if (best < 0) continue;
        u128 c = cand[best];
        if (c >> 63) return NULL;
        uint64_t ip = (uint64_t)(c / p10), fr = (uint64_t)(c % p10);
        if (v < 0) *s++ = '-';
        s = put_u64(s, ip);
        if (d > 0) {
            *s++ = '.';
            char digits[24];
            char *q = put_u64(digits, fr);
            int nd = (int)(q - digits);
            for (int k = nd; k < d; k++) *s++ = '0';
            memcpy(s, digits, (size_t)nd);
            s += nd;
        }
        return s;
    }
    return NULL;
}
#else
static char *put_shortest(char *s, double v, int bits) {
    (void)s, (void)v, (void)bits;
    return NULL;
}
#endif

/* Appends v so that it reads back exactly as the double: integers as such, most others as the
 * shortest fixed-point decimal, the rest as %.17g. */
static char *put_num(char *s, double v) {
    if (v == (double)(int64_t)v && fabs(v) < 1e15) {
        if (v < 0) {
            *s++ = '-';
            return put_u64(s, (uint64_t)-(int64_t)v);
        }
        return put_u64(s, (uint64_t)v);
    }
    char *e = fabs(v) >= 0.01 && fabs(v) < 0x1p50 ? put_shortest(s, v, 53) : NULL;
    return e ? e : s + sprintf(s, "%.17g", v);
}

/* Appends a float height so that it reads back as the same float (as a float, or as a double
 * then rounded to float): as put_num, with %.9g (nine significant digits suffice) for the rest. */
static char *put_height(char *s, double v) {
    if (v == (double)(int64_t)v && fabs(v) < 1e15) return put_num(s, v);
    char *e = fabs(v) >= 0.01 && fabs(v) < 0x1p50 ? put_shortest(s, v, 24) : NULL;
    return e ? e : s + sprintf(s, "%.9g", v);
}

/* Lines gathered into 64 kB blocks, one fwrite (and one lock of the stream) a block instead of one
 * a line: a third of the OBJ writing time was spent in per-line fwrite calls. */
typedef struct out_block {
    FILE *f;
    size_t n;
    char buf[1 << 16];
} out_block;

/* Room for one more line (at most 256 bytes) at the end of the block. */
static char *line_start(out_block *b) {
    if (b->n > sizeof b->buf - 256) fwrite(b->buf, 1, b->n, b->f), b->n = 0;
    return b->buf + b->n;
}

static bool write_obj(FILE *f, const terra_mesh_out *m) {
    if (m->comment) fprintf(f, "# %s\n", m->comment);
    out_block *b = terra_alloc(sizeof *b);
    if (!b) return errno = ENOMEM, false;
    b->f = f, b->n = 0;
    for (size_t v = 0; v < m->vertex_count; v++) {
        double p[3];
        position(m, v, p);
        char *s = line_start(b), *s0 = s;
        *s++ = 'v';
        for (int i = 0; i < 3; i++) {
            *s++ = ' ';
            s = (i == 2 && !m->xyz) ? put_height(s, p[2]) : put_num(s, p[i]);
        }
        *s++ = '\n';
        b->n += (size_t)(s - s0);
    }
    for (size_t v = 0; m->normals && v < m->vertex_count; v++) {
        char *s0 = line_start(b);
        b->n += (size_t)snprintf(s0, 256, "vn %.6g %.6g %.6g\n", m->normals[3 * v], m->normals[3 * v + 1],
                                 m->normals[3 * v + 2]);
    }
    for (size_t t = 0; t < m->triangle_count; t++) {
        uint32_t k[3];
        corners(m, t, k);
        char *s = line_start(b), *s0 = s;
        *s++ = 'f';
        for (int i = 0; i < 3; i++) {
            *s++ = ' ';
            s = put_u64(s, (uint64_t)k[i] + 1);
            if (m->normals) *s++ = '/', *s++ = '/', s = put_u64(s, (uint64_t)k[i] + 1);
        }
        *s++ = '\n';
        b->n += (size_t)(s - s0);
    }
    fwrite(b->buf, 1, b->n, f);
    terra_free(b);
    return !ferror(f);
}

static bool write_ply(FILE *f, const terra_mesh_out *m) {
    fprintf(f, "ply\nformat binary_little_endian 1.0\n");
    if (m->comment) fprintf(f, "comment %s\n", m->comment);
    fprintf(f, "element vertex %zu\nproperty double x\nproperty double y\nproperty double z\n", m->vertex_count);
    if (m->normals) fprintf(f, "property float nx\nproperty float ny\nproperty float nz\n");
    fprintf(f, "element face %zu\nproperty list uchar uint vertex_indices\nend_header\n", m->triangle_count);
    uint8_t buf[40];
    bool le = host_little_endian();
    for (size_t v = 0; v < m->vertex_count; v++) {
        double p[3];
        position(m, v, p);
        for (int i = 0; i < 3; i++) {
            double d = p[i];
            uint8_t raw[8];
            memcpy(raw, &d, 8);
            for (int k = 0; k < 8; k++) buf[8 * i + k] = le ? raw[k] : raw[7 - k];
        }
        size_t n = 24;
        if (m->normals) {
            for (int i = 0; i < 3; i++) put_f32(buf + 24 + 4 * i, m->normals[3 * v + i]);
            n = 36;
        }
        fwrite(buf, 1, n, f);
    }
    for (size_t t = 0; t < m->triangle_count; t++) {
        uint32_t k[3];
        corners(m, t, k);
        buf[0] = 3;
        for (int i = 0; i < 3; i++) put_u32(buf + 1 + 4 * i, k[i]);
        fwrite(buf, 1, 13, f);
    }
    return !ferror(f);
}

static bool write_stl(FILE *f, const terra_mesh_out *m) {
    uint8_t head[84] = {0};
    snprintf((char *)head, 80, "terra binary STL%s%s", m->comment ? ": " : "", m->comment ? m->comment : "");
    put_u32(head + 80, (uint32_t)m->triangle_count);
    fwrite(head, 1, 84, f);
    uint8_t rec[50];
    for (size_t t = 0; t < m->triangle_count; t++) {
        double q[3][3];
        uint32_t k[3];
        corners(m, t, k);
        for (int i = 0; i < 3; i++) position(m, k[i], q[i]);
        const double *p[3] = {q[0], q[1], q[2]};
        double ux = p[1][0] - p[0][0], uy = p[1][1] - p[0][1], uz = p[1][2] - p[0][2];
        double vx = p[2][0] - p[0][0], vy = p[2][1] - p[0][1], vz = p[2][2] - p[0][2];
        double nx = uy * vz - uz * vy, ny = uz * vx - ux * vz, nz = ux * vy - uy * vx;
        double len = sqrt(nx * nx + ny * ny + nz * nz);
        if (len > 0) nx /= len, ny /= len, nz /= len;
        put_f32(rec, (float)nx), put_f32(rec + 4, (float)ny), put_f32(rec + 8, (float)nz);
        for (int i = 0; i < 3; i++)
            for (int k = 0; k < 3; k++) put_f32(rec + 12 + 12 * i + 4 * k, (float)p[i][k]);
        rec[48] = rec[49] = 0;
        fwrite(rec, 1, 50, f);
    }
    return !ferror(f);
}

terra_status terra_io_write_mesh(const terra_mesh_out *m) {
    if (!m || !m->path || (m->vertex_count && !m->xyz && (!m->xy || !m->z)) || (m->triangle_count && !m->triangles))
        return terra_fail(TERRA_E_INVALID, "mesh output: bad arguments");
    mesh_fmt fmt = format_of(m->path);
    if (fmt == FMT_NONE)
        return terra_fail(TERRA_E_UNSUPPORTED, "%s: unknown mesh format (use .obj, .ply or .stl)", m->path);
    if (fmt == FMT_STL && m->triangle_count > 0xffffffffu)
        return terra_fail(TERRA_E_UNSUPPORTED, "%s: too many triangles for STL", m->path);
    for (size_t t = 0; t < 3 * m->triangle_count; t++)
        if (m->triangles[t] >= m->vertex_count)
            return terra_fail(TERRA_E_INVALID, "%s: triangle index %u past %zu vertices", m->path, m->triangles[t],
                              m->vertex_count);
    /* Infinities or NaN would be written as "inf" / "nan" (OBJ) or as such floats (PLY, STL), which
     * no reader takes for a position: refused before anything is written. */
    for (size_t v = 0; v < m->vertex_count; v++) {
        double p[3];
        position(m, v, p);
        if (!isfinite(p[0]) || !isfinite(p[1]) || !isfinite(p[2]))
            return terra_fail(TERRA_E_INVALID, "%s: vertex %zu is at a non-finite position (%g, %g, %g); nothing written",
                              m->path, v + 1, p[0], p[1], p[2]);
        /* STL stores floats: past FLT_MAX a finite double becomes an infinity there. */
        if (fmt == FMT_STL && (fabs(p[0]) > FLT_MAX || fabs(p[1]) > FLT_MAX || fabs(p[2]) > FLT_MAX))
            return terra_fail(TERRA_E_INVALID, "%s: vertex %zu at (%g, %g, %g) is past the range of STL's floats; "
                              "nothing written", m->path, v + 1, p[0], p[1], p[2]);
        if (m->normals && (!isfinite(m->normals[3 * v]) || !isfinite(m->normals[3 * v + 1]) ||
                           !isfinite(m->normals[3 * v + 2])))
            return terra_fail(TERRA_E_INVALID, "%s: vertex %zu has a non-finite normal; nothing written", m->path, v + 1);
    }
    char *tmp = NULL;
    void *fv = NULL;
    terra_status s = terra_io_open_temp(m->path, &tmp, &fv);
    if (s != TERRA_OK) return s;
    FILE *f = fv;
    char big[1 << 16]; /* PLY and STL write a record at a time; the stream buffers them (OBJ has its own) */
    setvbuf(f, big, _IOFBF, sizeof big);
    bool ok = fmt == FMT_OBJ ? write_obj(f, m) : fmt == FMT_PLY ? write_ply(f, m) : write_stl(f, m);
    int saved = errno;
    if (fclose(f) != 0) ok = false, saved = errno;
    if (!ok) {
        terra_io_abort(tmp);
        return terra_fail(TERRA_E_IO, "%s: write failed: %s", m->path, strerror(saved));
    }
    return terra_io_commit(tmp, m->path);
}

terra_status terra_io_read_obj(const char *path, double **xyz_out, size_t *nv_out, uint32_t **tri_out,
                               size_t *nt_out) {
    FILE *f = fopen(path, "rb");
    if (!f) return terra_fail(TERRA_E_IO, "%s: cannot open: %s", path, strerror(errno));
    size_t nv = 0, cv = 0, nt = 0, ct = 0;
    double *xyz = NULL;
    uint32_t *tri = NULL;
    char line[4096];
    terra_status st = TERRA_OK;
    size_t lineno = 0;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        if (line[0] == 'v' && line[1] == ' ') {
            if (nv == cv) {
                cv = cv ? 2 * cv : 4096;
                double *n = terra_realloc(xyz, cv * 3 * sizeof(double));
                if (!n) goto nomem;
                xyz = n;
            }
            double a = 0, b = 0, c = 0;
            if (sscanf(line + 2, "%lf %lf %lf", &a, &b, &c) < 2) {
                st = terra_fail(TERRA_E_FORMAT, "%s:%zu: bad vertex line", path, lineno);
                goto out;
            }
            xyz[3 * nv] = a, xyz[3 * nv + 1] = b, xyz[3 * nv + 2] = c;
            nv++;
        } else if (line[0] == 'f' && line[1] == ' ') {
            long idx[64];
            int k = 0;
            char *p = line + 2;
            while (*p && k < 64) {
                char *end;
                long v = strtol(p, &end, 10);
                if (end == p) break;
                if (v < 0) v = (long)nv + v + 1;
                if (v < 1 || (size_t)v > nv) {
                    st = terra_fail(TERRA_E_FORMAT, "%s:%zu: face index %ld out of range", path, lineno, v);
                    goto out;
                }
                idx[k++] = v - 1;
                while (*end && *end != ' ' && *end != '\t') end++;
                while (*end == ' ' || *end == '\t') end++;
                p = end;
            }
            for (int i = 2; i < k; i++) {
                if (nt == ct) {
                    ct = ct ? 2 * ct : 8192;
                    uint32_t *n = terra_realloc(tri, ct * 3 * sizeof(uint32_t));
                    if (!n) goto nomem;
                    tri = n;
                }
                tri[3 * nt] = (uint32_t)idx[0], tri[3 * nt + 1] = (uint32_t)idx[i - 1], tri[3 * nt + 2] = (uint32_t)idx[i];
                nt++;
            }
        }
    }
    goto out;
nomem:
    st = terra_fail(TERRA_E_NOMEM, "%s: out of memory", path);
out:
    fclose(f);
    if (st != TERRA_OK) {
        terra_free(xyz);
        terra_free(tri);
        return st;
    }
    *xyz_out = xyz;
    *nv_out = nv;
    *tri_out = tri;
    *nt_out = nt;
    return TERRA_OK;
}
