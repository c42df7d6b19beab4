/* Greedy insertion (Garland & Heckbert 1995) over a raster into a Delaunay triangulation.
 *
 * Data layout (half-edge arrays, after delatin/hmm):
 *   hv[3t+i]  half-edge i of triangle t: .v its first vertex (vertex i of t, positive orient, see
 *             orient()) as its sample x | y << 16 (no lookup to test or rasterise; vertex ids are
 *             only needed for output: take_level maps samples back by their rank in a bitmap of
 *             vp[]), .he the opposite half-edge of 3t+i (vertex i -> i+1), -1 on the hull (a
 *             triangle: 24 bytes)
 *   vp[i]     vertex i's sample, in insertion order; heights are read from the raster
 *   tm[t]     the triangle's worst sample (cand, x | y << 16) and its error's key (a float rounded
 *             up, never below the error) while it is queued, else 0. Only triangles whose error is
 *             over the finest bound enter the queue: the rest can never be refined.
 *   queue     lazy: an entry (key, t) is live while tm[t].key still equals its key; stale ones are
 *             dropped at the top, or by a compaction when they would be the majority. Only the
 *             highest bucket of keys is a heap (`q`, small, hot in cache); lower keys wait unsorted
 *             in buckets of 1/32 octave (chunk lists), moved in one bucket at a time; a compaction
 *             also gives back the chunk pool's excess. The top is always the largest live key (ties
 *             by the higher triangle id): a true greedy order.
 * Triangle slots are never freed: a split reuses the old slot and adds two, a flip reuses both,
 * so every slot in [0, nt) is a live triangle. Triangles whose candidate is stale are marked in
 * `pbits` and wait (once) in `pend` until flush() rasterises them; nothing is popped meanwhile.
 *
 * Exactness: coordinates are integers below 2^16 (TERRA_TIN_MAX_SIDE), so orient() is exact in
 * int64 and incircle() in a double filter backed by int128; the rasteriser walks each edge's
 * crossing from row to row as an integer floor plus remainder (no rounding), or for a triangle at
 * most 4 (8) columns wide (at most 8 rows for 8) tests the edge functions of each row's 4 (8)
 * samples in int32 lanes, so the set of samples scanned per triangle is exact (the closed
 * triangle, edges included; a triangle of twice the area 1 has none but its vertices and is not
 * scanned). Heights are interpolated in double as delatin does, z0*w0 + z1*w1 + z2*w2 from integer
 * weights: at every sample of a narrow triangle, at the span start of a wider one's row and then a
 * step per sample (two samples at a time with SSE2, four with AVX2, each rounded exactly as the
 * scalar loop). The worst sample is the first maximum in row-major order: delatin's meshes on the
 * same heights (fuji 30 m: 5,668 vertices, 11,140 triangles), bar ties broken by the queue and
 * the wide rows' rounding. */
#include "terra/tin.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#if defined(__AVX2__)
#include <immintrin.h>
#elif defined(__SSE2__)
#include <emmintrin.h>
#endif

#if defined(__SIZEOF_INT128__)
__extension__ typedef __int128 tin_i128;
#else
#error "terra tin needs a compiler with 128-bit integers (gcc, clang)"
#endif

typedef struct tin_half {
    uint32_t v;                 /* vertex the half-edge starts from: its sample, x | y << 16 */
    int32_t he;                 /* opposite half-edge, -1 on the hull */
} tin_half;

/* A vertex's sample, packed: x | y << 16 (x, y < TERRA_TIN_MAX_SIDE). */
#define PX(p) ((int64_t)((p) & 0xffffu))
#define PY(p) ((int64_t)((p) >> 16))

typedef struct tin_meta {
    uint32_t cand;              /* worst sample, x | y << 16 (0 when out of the queue) */
    uint32_t key;               /* its error's key (see err_key) while queued, else 0 */
} tin_meta;

/* A queue entry: the error's key in the high half, the triangle in the low half, so entries order
 * by error first, then by triangle id (ties broken deterministically). An entry is live while its
 * key is the triangle's key (tm[t].key); the others are dropped when they come to the top. */
typedef uint64_t tin_qent;

/* Cold entries wait unsorted in buckets of keys (key >> TIN_BSHIFT: 1/32 of an octave of error),
 * kept as lists of chunks; only the highest bucket is a heap (the hot queue). */
#define TIN_BSHIFT 18
#define TIN_NBUCKET ((0x7f800000u >> TIN_BSHIFT) + 1) /* up to +inf */
#define TIN_CHUNK 126
typedef struct tin_chunk {
    int32_t next, n;
    tin_qent e[TIN_CHUNK];
} tin_chunk;

typedef struct tin {
    int w, h;
    const float *hl, *hu;       /* lower, upper (NULL) */
    bool holes;                 /* the lower layer has NaN samples */
    uint32_t *vp;               /* vertices in insertion order: their samples, packed */
    size_t nv, cap_v;
    tin_half *hv;               /* per half-edge: its first vertex and its opposite half-edge */
    tin_meta *tm;               /* per triangle: candidate and queue key */
    size_t nt, cap_t;
    tin_qent *q;                /* the hot queue: 4-ary max-heap of entries with key >> TIN_BSHIFT >= hot_b */
    size_t nq, cap_q;
    size_t nlive;               /* triangles with a key (each has exactly one live entry) */
    uint32_t hot_b;             /* buckets below it are cold */
    int32_t *bhead;             /* per cold bucket: its first chunk, -1 when empty */
    tin_chunk *ch;              /* chunk pool */
    size_t nch, cap_ch, ncold;
    int32_t ch_free;            /* free chunks, linked by .next */
    int32_t *pend;
    size_t npend, cap_pend;
    uint64_t *pbits;            /* per triangle: stale (in `pend`) */
    double bound;               /* finest bound: triangles at or under it stay out of the queue */
    bool nomem;
} tin;

/* ---- exact predicates ------------------------------------------------------------------- */

/* (b - c) x (a - c) in the raster's (column, row) frame; > 0 for every live triangle. */
static inline int64_t orient(int64_t ax, int64_t ay, int64_t bx, int64_t by, int64_t cx, int64_t cy) {
    return (bx - cx) * (ay - cy) - (by - cy) * (ax - cx);
}

/* True when p lies strictly inside the circle through a, b, c (a, b, c with positive orient).
 * A floating-point filter first: with |coordinates| < 2^16 the inner terms (a difference times a
 * lifted square, < 2^52) and their differences are exact in doubles, so only the three outer
 * products and two sums round; when |det| is above a bound on that rounding its sign is right.
 * Otherwise the same formula runs in 128-bit integers (exact for |coordinates| < 2^30). */
static bool incircle(int64_t ax, int64_t ay, int64_t bx, int64_t by, int64_t cx, int64_t cy, int64_t px,
                     int64_t py) {
    int64_t dx = ax - px, dy = ay - py, ex = bx - px, ey = by - py, fx = cx - px, fy = cy - py;
    int64_t ap = dx * dx + dy * dy, bp = ex * ex + ey * ey, cp = fx * fx + fy * fy;
    double t0 = (double)(ey * cp - bp * fy), t1 = (double)(ex * cp - bp * fx), t2 = (double)(ex * fy - ey * fx);
    double p0 = (double)dx * t0, p1 = (double)dy * t1, p2 = (double)ap * t2;
    double det = p0 - p1 + p2;
    double bound = (fabs(p0) + fabs(p1) + fabs(p2)) * 0x1p-50; /* 8 ulp: far above the two roundings */
    if (det > bound) return false;
    if (det < -bound) return true;
    tin_i128 e = (tin_i128)dx * (ey * cp - bp * fy) - (tin_i128)dy * (ex * cp - bp * fx) + (tin_i128)ap * (ex * fy - ey * fx);
    return e < 0;
}

/* ---- storage ----------------------------------------------------------------------------- */

static bool grow(void **p, size_t elem, size_t n) {
    void *q = terra_realloc(*p, elem * n);
    if (!q) return false;
    *p = q;
    return true;
}

static bool reserve_triangles(tin *T, size_t need) {
    if (need <= T->cap_t) return true;
    size_t cap = T->cap_t ? T->cap_t + T->cap_t / 2 : 1024;
    if (cap < need) cap = need;
    if (!grow((void **)&T->hv, 3 * sizeof(tin_half), cap) || !grow((void **)&T->tm, sizeof(tin_meta), cap) ||
        !grow((void **)&T->pbits, sizeof(uint64_t), cap / 64 + 1)) {
        T->nomem = true;
        return false;
    }
    memset(T->pbits + (T->cap_t ? T->cap_t / 64 + 1 : 0), 0, (cap / 64 + 1 - (T->cap_t ? T->cap_t / 64 + 1 : 0)) * sizeof(uint64_t));
    T->cap_t = cap;
    return true;
}

static bool reserve_vertices(tin *T, size_t need) {
    if (need <= T->cap_v) return true;
    size_t cap = T->cap_v ? T->cap_v + T->cap_v / 2 : 1024;
    if (cap < need) cap = need;
    if (!grow((void **)&T->vp, sizeof(uint32_t), cap)) {
        T->nomem = true;
        return false;
    }
    T->cap_v = cap;
    return true;
}

static uint32_t add_point(tin *T, int32_t x, int32_t y) {
    uint32_t p = (uint32_t)x | (uint32_t)y << 16;
    T->vp[T->nv++] = p;
    return p;
}


/* ---- the queue (lazy max-heap of triangles by error) ---------------------------------------- */

/* The error as a float rounded up (never below the error, so a key at or under a bound means the
 * error is too); non-negative floats order as their bit patterns. */
static inline uint32_t err_key(double e) {
    float f = (float)e;
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u + ((double)f < e); /* the next float up (e >= 0 finite, or +inf: never below) */
}

static inline double key_err(tin_qent q) {
    uint32_t u = (uint32_t)(q >> 32);
    float f;
    memcpy(&f, &u, sizeof f);
    return (double)f;
}

static inline int32_t q_tri(tin_qent q) { return (int32_t)(uint32_t)q; }
static inline bool q_live(const tin *T, tin_qent q) { return T->tm[q_tri(q)].key == (uint32_t)(q >> 32); }

/* The heap is 4-ary (children of i: 4i+1 .. 4i+4), about half as deep as a binary one, and the four
 * children sit side by side; q[nq .. nq+3] are kept 0 (below every entry) so the last parent's
 * missing children need no test. */

/* Moves entry x up from hole j (sifting parents down into it). */
static void q_up(tin_qent *q, size_t j, tin_qent x) {
    while (j > 0) {
        size_t i = (j - 1) >> 2;
        tin_qent p = q[i];
        if (p >= x) break;
        q[j] = p;
        j = i;
    }
    q[j] = x;
}

/* Moves entry x down from hole i (sifting the largest child up into it). */
static void q_down(tin_qent *q, size_t n, size_t i, tin_qent x) {
    for (;;) {
        size_t c = 4 * i + 1;
        if (c >= n) break;
        tin_qent c0 = q[c], c1 = q[c + 1], c2 = q[c + 2], c3 = q[c + 3];
        size_t k01 = c1 > c0, k23 = c3 > c2;
        tin_qent m01 = k01 ? c1 : c0, m23 = k23 ? c3 : c2;
        size_t k = m23 > m01 ? 2 + k23 : k01;
        tin_qent m = m23 > m01 ? m23 : m01;
        if (m <= x) break;
        q[i] = m;
        i = c + k;
    }
    q[i] = x;
}

/* Pops the top. The next top is one of its children: their triangles' keys (read to tell whether
 * an entry is live) are asked for now, so that they are there when needed. */
static void q_pop(tin *T) {
    tin_qent x = T->q[--T->nq];
    T->q[T->nq] = 0;
    if (T->nq) q_down(T->q, T->nq, 0, x);
    for (size_t i = 0; i < 5 && i < T->nq; i++) __builtin_prefetch(&T->tm[q_tri(T->q[i])]);
}

static bool q_reserve(tin *T, size_t need) {
    if (need <= T->cap_q) return true;
    size_t cap = T->cap_q ? T->cap_q * 2 : 1024;
    if (cap < need) cap = need;
    if (!grow((void **)&T->q, sizeof(tin_qent), cap + 4)) {
        T->nomem = true;
        return false;
    }
    memset(T->q + T->cap_q, 0, (cap + 4 - T->cap_q) * sizeof(tin_qent));
    T->cap_q = cap;
    return true;
}

static void q_heapify(tin *T) {
    for (size_t i = T->nq / 4 + 1; i-- > 0;)
        if (i < T->nq) q_down(T->q, T->nq, i, T->q[i]);
}

static void chunk_free(tin *T, int32_t c) {
    T->ch[c].next = T->ch_free;
    T->ch_free = c;
}

static void cold_push(tin *T, uint32_t b, tin_qent x) {
    int32_t h = T->bhead[b];
    if (h < 0 || T->ch[h].n == TIN_CHUNK) {
        int32_t c = T->ch_free;
        if (c >= 0) {
            T->ch_free = T->ch[c].next;
        } else {
            if (T->nch == T->cap_ch) {
                size_t cap = T->cap_ch ? T->cap_ch + T->cap_ch / 2 : 256;
                if (!grow((void **)&T->ch, sizeof(tin_chunk), cap)) {
                    T->nomem = true;
                    return;
                }
                T->cap_ch = cap;
            }
            c = (int32_t)T->nch++;
        }
        T->ch[c].next = h;
        T->ch[c].n = 0;
        T->bhead[b] = h = c;
    }
    T->ch[h].e[T->ch[h].n++] = x;
    T->ncold++;
}

/* Keeps the live entries only (when stale ones are the majority): the hot heap is rebuilt, each
 * bucket's list is packed into its first chunks. */
static void q_compact(tin *T) {
    size_t n = 0;
    for (size_t i = 0; i < T->nq; i++)
        if (q_live(T, T->q[i])) T->q[n++] = T->q[i];
    for (size_t i = n; i < T->nq; i++) T->q[i] = 0;
    T->nq = n;
    q_heapify(T);
    size_t ncold = 0;
    for (uint32_t b = 0; b < T->hot_b; b++) {
        int32_t first = T->bhead[b];
        if (first < 0) continue;
        /* The write position never passes the read position, and no link changes on the way. */
        int32_t wc = first, wn = 0;
        for (int32_t rc = first; rc >= 0; rc = T->ch[rc].next) {
            const int32_t m = T->ch[rc].n;
            for (int32_t i = 0; i < m; i++) {
                tin_qent x = T->ch[rc].e[i];
                if (!q_live(T, x)) continue;
                if (wn == TIN_CHUNK) T->ch[wc].n = wn, wc = T->ch[wc].next, wn = 0;
                T->ch[wc].e[wn++] = x;
            }
        }
        ncold += (size_t)wn;
        for (int32_t c = first; c != wc; c = T->ch[c].next) ncold += TIN_CHUNK;
        T->ch[wc].n = wn;
        int32_t c = T->ch[wc].next;
        T->ch[wc].next = -1;
        while (c >= 0) {
            int32_t nx = T->ch[c].next;
            chunk_free(T, c);
            c = nx;
        }
        if (wn == 0) { /* only when nothing was kept: wc is still the first */
            chunk_free(T, wc);
            T->bhead[b] = -1;
        }
    }
    T->ncold = ncold;
    /* The chunks in use move to the front of the pool (into the free slots there), and the pool
     * gives back what it holds past twice that: it is sized by the queue's peak, not by now. */
    size_t used = 0;
    for (uint32_t b = 0; b < T->hot_b; b++)
        for (int32_t c = T->bhead[b]; c >= 0; c = T->ch[c].next) used++;
    if (T->cap_ch <= 2 * used + 512) return;
    int32_t holes = -1;
    for (int32_t c = T->ch_free; c >= 0;) {
        int32_t nx = T->ch[c].next;
        if ((size_t)c < used) T->ch[c].next = holes, holes = c;
        c = nx;
    }
    for (uint32_t b = 0; b < T->hot_b; b++)
        for (int32_t *link = &T->bhead[b]; *link >= 0; link = &T->ch[*link].next)
            if ((size_t)*link >= used) { /* as many holes below `used` as chunks in use above it */
                int32_t h = holes;
                holes = T->ch[h].next;
                T->ch[h] = T->ch[*link];
                *link = h;
            }
    T->nch = used;
    T->ch_free = -1;
    size_t cap = used + used / 2 + 256;
    tin_chunk *ch = terra_realloc(T->ch, cap * sizeof(tin_chunk));
    if (ch) T->ch = ch, T->cap_ch = cap;
}

/* Drops stale entries from the top, moving the next cold bucket in when the hot heap runs dry:
 * after it the top (if any) is live. */
static void q_clean_top(tin *T) {
    for (;;) {
        while (T->nq && !q_live(T, T->q[0])) q_pop(T);
        if (T->nq || !T->ncold) return;
        uint32_t b = T->hot_b;
        while (T->bhead[--b] < 0) {}
        size_t n = 0;
        for (int32_t c = T->bhead[b]; c >= 0; c = T->ch[c].next) n += (size_t)T->ch[c].n;
        if (!q_reserve(T, n)) return;
        /* Only the live entries move in: a stale one would cost a pop through the heap later. */
        for (int32_t c = T->bhead[b]; c >= 0;) {
            const int32_t nx = T->ch[c].next, m = T->ch[c].n;
            const tin_qent *e = T->ch[c].e;
            for (int32_t i = 0; i < m; i++) {
                if (i + 8 < m) __builtin_prefetch(&T->tm[q_tri(e[i + 8])]);
                T->q[T->nq] = e[i];
                T->nq += q_live(T, e[i]);
            }
            chunk_free(T, c);
            c = nx;
        }
        memset(T->q + T->nq, 0, 4 * sizeof(tin_qent)); /* the zeros past the heap (see q_down) */
        T->bhead[b] = -1;
        T->ncold -= n;
        T->hot_b = b;
        q_heapify(T);
    }
}

static void q_push(tin *T, tin_qent x) {
    if (T->nq + T->ncold >= T->nlive + T->nlive / 2 + 16384) q_compact(T);
    uint32_t b = (uint32_t)(x >> 32) >> TIN_BSHIFT;
    if (b < T->hot_b) {
        cold_push(T, b, x);
        return;
    }
    if (!q_reserve(T, T->nq + 1)) return;
    q_up(T->q, T->nq++, x);
}

/* Sets triangle t's candidate and error: queued when over the finest bound (an entry already in the
 * queue with the same key stays live), else out (its entry, if any, goes stale). */
static void q_set(tin *T, int32_t t, uint32_t cand, double err) {
    uint32_t key = err > T->bound ? err_key(err) : 0;
    tin_meta *m = &T->tm[t];
    m->cand = key ? cand : 0;
    if (key == m->key) return;
    T->nlive += (size_t)(key != 0) - (size_t)(m->key != 0);
    m->key = key;
    if (key) q_push(T, (tin_qent)key << 32 | (uint32_t)t);
}

/* Marks triangle t stale (once): flush() rasterises it again. Its queue entry (if any) keeps its
 * key until then (nothing is popped between). */
static inline bool pend_has(const tin *T, int32_t t) { return T->pbits[(uint32_t)t >> 6] >> ((uint32_t)t & 63) & 1u; }

static void pend_add(tin *T, int32_t t) {
    T->pbits[(uint32_t)t >> 6] |= (uint64_t)1 << ((uint32_t)t & 63);
    __builtin_prefetch(&T->tm[t], 1);
    if (T->npend == T->cap_pend) {
        size_t cap = T->cap_pend ? 2 * T->cap_pend : 256;
        if (!grow((void **)&T->pend, sizeof(int32_t), cap)) {
            T->nomem = true;
            return;
        }
        T->cap_pend = cap;
    }
    T->pend[T->npend++] = t;
}

/* ---- triangles ----------------------------------------------------------------------------- */

/* Writes triangle (a, b, c) with outer half-edges ab, bc, ca into slot e (or a new one when e < 0)
 * and marks it pending. Returns its first half-edge. */
static int32_t add_tri(tin *T, uint32_t a, uint32_t b, uint32_t c, int32_t ab, int32_t bc, int32_t ca, int32_t e) {
    bool fresh = e < 0;
    if (fresh) e = (int32_t)(3 * T->nt++);
    int32_t t = e / 3;
    T->hv[e].v = a;
    T->hv[e + 1].v = b;
    T->hv[e + 2].v = c;
    T->hv[e].he = ab;
    T->hv[e + 1].he = bc;
    T->hv[e + 2].he = ca;
    if (ab >= 0) T->hv[ab].he = e;
    if (bc >= 0) T->hv[bc].he = e + 1;
    if (ca >= 0) T->hv[ca].he = e + 2;
    if (fresh) T->tm[t].key = 0;
    if (!pend_has(T, t)) pend_add(T, t);
    return e;
}

static void legalize(tin *T, int32_t a) {
    int32_t b = T->hv[a].he;
    if (b < 0) return;
    int32_t a0 = a - a % 3, b0 = b - b % 3;
    int32_t al = a0 + (a + 1) % 3, ar = a0 + (a + 2) % 3;
    int32_t bl = b0 + (b + 2) % 3, br = b0 + (b + 1) % 3;
    uint32_t p0 = T->hv[ar].v, pr = T->hv[a].v, pl = T->hv[al].v, p1 = T->hv[bl].v;
    if (!incircle(PX(p0), PY(p0), PX(pr), PY(pr), PX(pl), PY(pl), PX(p1), PY(p1))) return;
    int32_t hal = T->hv[al].he, har = T->hv[ar].he, hbl = T->hv[bl].he, hbr = T->hv[br].he;
    int32_t t0 = add_tri(T, p0, p1, pl, -1, hbl, hal, a0);
    int32_t t1 = add_tri(T, p1, p0, pr, t0, har, hbr, b0);
    legalize(T, t0 + 1);
    legalize(T, t1 + 2);
}

/* Inserts vertex pn on half-edge a (pn lies on it, strictly between its ends). */
static void split_edge(tin *T, uint32_t pn, int32_t a) {
    int32_t a0 = a - a % 3, al = a0 + (a + 1) % 3, ar = a0 + (a + 2) % 3;
    uint32_t p0 = T->hv[ar].v, pr = T->hv[a].v, pl = T->hv[al].v;
    int32_t hal = T->hv[al].he, har = T->hv[ar].he;
    int32_t b = T->hv[a].he;
    if (b < 0) {
        int32_t t0 = add_tri(T, pn, p0, pr, -1, har, -1, a0);
        int32_t t1 = add_tri(T, p0, pn, pl, t0, -1, hal, -1);
        legalize(T, t0 + 1);
        legalize(T, t1 + 2);
        return;
    }
    int32_t b0 = b - b % 3, bl = b0 + (b + 2) % 3, br = b0 + (b + 1) % 3;
    uint32_t p1 = T->hv[bl].v;
    int32_t hbl = T->hv[bl].he, hbr = T->hv[br].he;
    int32_t t0 = add_tri(T, p0, pr, pn, har, -1, -1, a0);
    int32_t t1 = add_tri(T, pr, p1, pn, hbr, -1, t0 + 1, b0);
    int32_t t2 = add_tri(T, p1, pl, pn, hbl, -1, t1 + 1, -1);
    int32_t t3 = add_tri(T, pl, p0, pn, hal, t0 + 2, t2 + 1, -1);
    legalize(T, t0);
    legalize(T, t1);
    legalize(T, t2);
    legalize(T, t3);
}

/* Inserts (px, py) into triangle t (its slot is reused, so it goes stale). */
static void insert_in(tin *T, int32_t t, int32_t px, int32_t py) {
    int32_t e0 = 3 * t, e1 = e0 + 1, e2 = e0 + 2;
    uint32_t p0 = T->hv[e0].v, p1 = T->hv[e1].v, p2 = T->hv[e2].v;
    int64_t ax = PX(p0), ay = PY(p0), bx = PX(p1), by = PY(p1), cx = PX(p2), cy = PY(p2);
    uint32_t pn = add_point(T, px, py);
    if (orient(ax, ay, bx, by, px, py) == 0) {
        split_edge(T, pn, e0);
    } else if (orient(bx, by, cx, cy, px, py) == 0) {
        split_edge(T, pn, e1);
    } else if (orient(cx, cy, ax, ay, px, py) == 0) {
        split_edge(T, pn, e2);
    } else {
        int32_t h0 = T->hv[e0].he, h1 = T->hv[e1].he, h2 = T->hv[e2].he;
        int32_t t0 = add_tri(T, p0, p1, pn, h0, -1, -1, e0);
        int32_t t1 = add_tri(T, p1, p2, pn, h1, -1, t0 + 1, -1);
        int32_t t2 = add_tri(T, p2, p0, pn, h2, t0 + 2, t1 + 1, -1);
        legalize(T, t0);
        legalize(T, t1);
        legalize(T, t2);
    }
}

/* ---- candidates: rasterise a triangle, find its worst sample -------------------------------- */

/* Exact scanline spans. For each edge, w(k) = w + a*k is the edge function along the current row
 * (k = offset from minx); the samples inside are those where all three are >= 0. Each edge keeps
 * its crossing offset (first k with w(k) >= 0 for a > 0, last for a < 0) and walks it from row to
 * row, so a row costs a few additions instead of divisions. */
typedef struct edge_walk {
    int64_t w, a, b;            /* w at (minx, row); per-column a, per-row b */
    int64_t k;                  /* crossing offset (unclamped) */
} edge_walk;

static inline void edge_init(edge_walk *e, int64_t w, int64_t a, int64_t b) {
    e->w = w, e->a = a, e->b = b;
    /* The crossing from a floating-point division (integer division is slow), then made exact. */
    if (a > 0) {
        int64_t k = (int64_t)ceil(-(double)w / (double)a);   /* ceil(-w / a) */
        while (w + a * k < 0) k++;
        while (w + a * (k - 1) >= 0) k--;
        e->k = k;
    } else if (a < 0) {
        int64_t k = (int64_t)floor((double)w / (double)-a);  /* floor(w / -a) */
        while (w + a * k < 0) k--;
        while (w + a * (k + 1) >= 0) k++;
        e->k = k;
    } else {
        e->k = 0;
    }
}

static inline void edge_next_row(edge_walk *e) {
    e->w += e->b;
    int64_t a = e->a;
    if (a > 0) {
        int64_t v = e->w + a * e->k;
        while (v < 0) e->k++, v += a;
        while (v - a >= 0) e->k--, v -= a;
    } else if (a < 0) {
        int64_t v = e->w + a * e->k;
        while (v < 0) e->k--, v -= a;
        while (v + a >= 0) e->k++, v += a;
    }
}

static inline void edge_clip(const edge_walk *e, int64_t *lo, int64_t *hi) {
    if (e->a > 0) {
        if (e->k > *lo) *lo = e->k;
    } else if (e->a < 0) {
        if (e->k < *hi) *hi = e->k;
    } else if (e->w < 0) {
        *lo = 1, *hi = 0;
    }
}

typedef struct tri_geom {
    int64_t x[3], y[3];
    float z[3];
    int64_t minx, miny, maxx, maxy;
    int64_t a01, b01, a12, b12, a20, b20, area;
    edge_walk e0, e1, e2;       /* edges opposite vertex 0, 1, 2 (barycentric weights times area) */
} tri_geom;

static void tri_setup_from(const tin *T, const uint32_t p[3], tri_geom *g) {
    for (int i = 0; i < 3; i++) {
        uint32_t v = p[i];
        g->x[i] = PX(v);
        g->y[i] = PY(v);
        g->z[i] = T->hl[(size_t)PY(v) * (size_t)T->w + (size_t)PX(v)];
    }
    int64_t *x = g->x, *y = g->y;
    g->minx = x[0] < x[1] ? (x[0] < x[2] ? x[0] : x[2]) : (x[1] < x[2] ? x[1] : x[2]);
    g->miny = y[0] < y[1] ? (y[0] < y[2] ? y[0] : y[2]) : (y[1] < y[2] ? y[1] : y[2]);
    g->maxx = x[0] > x[1] ? (x[0] > x[2] ? x[0] : x[2]) : (x[1] > x[2] ? x[1] : x[2]);
    g->maxy = y[0] > y[1] ? (y[0] > y[2] ? y[0] : y[2]) : (y[1] > y[2] ? y[1] : y[2]);
    g->a01 = y[1] - y[0], g->b01 = x[0] - x[1];
    g->a12 = y[2] - y[1], g->b12 = x[1] - x[2];
    g->a20 = y[0] - y[2], g->b20 = x[2] - x[0];
    g->area = orient(x[0], y[0], x[1], y[1], x[2], y[2]);
    edge_init(&g->e0, orient(x[1], y[1], x[2], y[2], g->minx, g->miny), g->a12, g->b12);
    edge_init(&g->e1, orient(x[2], y[2], x[0], y[0], g->minx, g->miny), g->a20, g->b20);
    edge_init(&g->e2, orient(x[0], y[0], x[1], y[1], g->minx, g->miny), g->a01, g->b01);
}

static inline void tri_setup(const tin *T, int32_t t, tri_geom *g) {
    const uint32_t p[3] = {T->hv[3 * t].v, T->hv[3 * t + 1].v, T->hv[3 * t + 2].v};
    tri_setup_from(T, p, g);
}

/* Span of the current row (offsets from minx) inside the closed triangle; empty when lo > hi. */
static inline void row_span(const tri_geom *g, int64_t *lo, int64_t *hi) {
    *lo = 0;
    *hi = g->maxx - g->minx;
    edge_clip(&g->e0, lo, hi);
    edge_clip(&g->e1, lo, hi);
    edge_clip(&g->e2, lo, hi);
}

static inline void next_row(tri_geom *g) {
    edge_next_row(&g->e0);
    edge_next_row(&g->e1);
    edge_next_row(&g->e2);
}

static inline bool is_vertex(const tri_geom *g, int64_t x, int64_t y) {
    return (x == g->x[0] && y == g->y[0]) || (x == g->x[1] && y == g->y[1]) || (x == g->x[2] && y == g->y[2]);
}

/* General path: holes and/or two layers. Layers whose triangle would cover an invalid sample or
 * use an invalid vertex are not drawn; if such a layer has valid samples left inside (besides the
 * vertices) the triangle must be split: error +inf, candidate the valid sample nearest the centroid. */
static void find_candidate_general(tin *T, int32_t t, const tri_geom *g) {
    const int nl = T->hu ? 2 : 1;
    const float *layer[2] = {T->hl, T->hu};
    double zv[2][3];
    bool vert_ok[2];
    for (int k = 0; k < nl; k++) {
        vert_ok[k] = true;
        for (int i = 0; i < 3; i++) {
            size_t s = (size_t)g->y[i] * (size_t)T->w + (size_t)g->x[i];
            float hv = layer[k][s];
            if (k == 1 && T->hl[s] != T->hl[s]) hv = NAN;
            if (hv != hv) vert_ok[k] = false;
            zv[k][i] = (double)hv / (double)g->area;
        }
    }
    int64_t invalid[2] = {0, 0}, valid_nv[2] = {0, 0};
    int64_t near_d[2] = {INT64_MAX, INT64_MAX}, near_x[2] = {0, 0}, near_y[2] = {0, 0};
    int64_t sx = g->x[0] + g->x[1] + g->x[2], sy = g->y[0] + g->y[1] + g->y[2];
    double best = 0;
    int64_t bx = 0, by = 0;
    tri_geom G = *g;
    for (int64_t y = G.miny; y <= G.maxy; y++, next_row(&G)) {
        int64_t lo, hi;
        row_span(&G, &lo, &hi);
        double w0 = (double)(G.e0.w + g->a12 * lo), w1 = (double)(G.e1.w + g->a20 * lo), w2 = (double)(G.e2.w + g->a01 * lo);
        for (int64_t k = lo; k <= hi; k++) {
            int64_t x = g->minx + k;
            size_t s = (size_t)y * (size_t)T->w + (size_t)x;
            bool lower_ok = T->hl[s] == T->hl[s];
            bool vtx = is_vertex(g, x, y);
            for (int l = 0; l < nl; l++) {
                float hv = layer[l][s];
                bool ok = (hv == hv) && lower_ok;
                if (!ok) {
                    invalid[l]++;
                    continue;
                }
                if (vtx) continue;
                valid_nv[l]++;
                int64_t dx = 3 * x - sx, dy = 3 * y - sy, d = dx * dx + dy * dy;
                if (d < near_d[l]) near_d[l] = d, near_x[l] = x, near_y[l] = y;
                if (vert_ok[l]) {
                    double z = zv[l][0] * w0 + zv[l][1] * w1 + zv[l][2] * w2;
                    double dz = fabs(z - (double)hv);
                    if (dz > best) best = dz, bx = x, by = y;
                }
            }
            w0 += (double)g->a12;
            w1 += (double)g->a20;
            w2 += (double)g->a01;
        }
    }
    for (int l = 0; l < nl; l++) {
        bool drawable = vert_ok[l] && invalid[l] == 0;
        if (!drawable && valid_nv[l] > 0) {
            q_set(T, t, (uint32_t)near_x[l] | (uint32_t)near_y[l] << 16, INFINITY);
            return;
        }
    }
    q_set(T, t, (uint32_t)bx | (uint32_t)by << 16, best);
}

/* One triangle edge walked down the rows: its crossing with row y is xs + (y - ys) * dx / dy, kept
 * as floor (x) plus remainder (r / dy, 0 <= r < dy), so the closed span's ends are exact integers
 * (floor on the right, ceiling on the left) after a few additions per row. */
typedef struct edge_dda {
    int64_t x, r;               /* floor of the crossing, remainder */
    int64_t q, rq, dy;          /* per row: floor(dx / dy), dx - q * dy, dy (1 for a flat edge) */
} edge_dda;

static inline edge_dda dda_init(int64_t xs, int64_t dx, int64_t dy) {
    edge_dda d = {xs, 0, 0, 0, 1};
    if (dy > 0) {
        /* |dx|, |dy| < 2^16: the double quotient is never rounded across an integer. */
        int64_t q = (int64_t)((double)dx / (double)dy); /* truncated: one less for a negative fraction */
        d.q = q - (q * dy > dx);
        d.rq = dx - d.q * dy;
        d.dy = dy;
    }
    return d;
}

static inline void dda_step(edge_dda *d) {
    d->x += d->q;
    d->r += d->rq;
    int64_t c = d->r >= d->dy;
    d->x += c;
    d->r -= c * d->dy;
}

/* The worst sample of a triangle, row after row: the largest |zs + k * dzdx - row[k]| (each term
 * rounded as in a scalar loop) and the first sample (in row-major order) where it is reached, kept
 * as its index in the raster (exact in a double). With SSE2 (AVX2) two (four) lanes each keep their
 * own first maximum over the samples they see (in raster order), merged at the end; NaN heights are
 * ignored (and reported with `check_nan`). All terms 0 give (0, index 0). */
#if defined(__AVX2__)
typedef __m256d tin_vd;         /* the lanes of a scan: 4 doubles */
#define VD_SET1 _mm256_set1_pd
#define VD_ADD _mm256_add_pd
#elif defined(__SSE2__)
typedef __m128d tin_vd;         /* 2 doubles */
#define VD_SET1 _mm_set1_pd
#define VD_ADD _mm_add_pd
#endif

typedef struct scan_acc {
#if defined(__SSE2__)
    tin_vd m, mk, bad;
#else
    double m, mk;
    bool bad;
#endif
} scan_acc;

static inline void scan_init(scan_acc *a) {
#if defined(__SSE2__)
    a->m = a->mk = a->bad = VD_SET1(0.0);
#else
    a->m = a->mk = 0, a->bad = false;
#endif
}

/* Samples k in [0, n] of a row; the first one is raster sample `pos0`. */
static inline void scan_row(scan_acc *a, const float *row, int64_t n, double zs, double dzdx, double pos0,
                            bool check_nan) {
#if defined(__AVX2__)
    const __m256d vzs = _mm256_set1_pd(zs), vd = _mm256_set1_pd(dzdx), four = _mm256_set1_pd(4.0);
    const __m256d absm = _mm256_castsi256_pd(_mm256_set1_epi64x(INT64_MAX));
    __m256d kv = _mm256_set_pd(3.0, 2.0, 1.0, 0.0), pv = _mm256_add_pd(_mm256_set1_pd(pos0), kv);
    __m256d m = a->m, mk = a->mk, bad = a->bad;
    int64_t k = 0;
    for (; k + 3 <= n; k += 4) {
        const __m256d h = _mm256_cvtps_pd(_mm_loadu_ps(row + k));
        const __m256d dz = _mm256_and_pd(_mm256_sub_pd(_mm256_add_pd(vzs, _mm256_mul_pd(kv, vd)), h), absm);
        if (check_nan) bad = _mm256_or_pd(bad, _mm256_cmp_pd(h, h, _CMP_UNORD_Q));
        const __m256d gt = _mm256_cmp_pd(dz, m, _CMP_GT_OQ); /* false for a NaN dz */
        m = _mm256_max_pd(dz, m);
        mk = _mm256_blendv_pd(mk, pv, gt);
        kv = _mm256_add_pd(kv, four);
        pv = _mm256_add_pd(pv, four);
    }
    if (k <= n) { /* 1 to 3 samples left; the lanes past them are neither loaded nor counted */
        const __m128i in = _mm_cmpgt_epi32(_mm_set1_epi32((int)(n - k + 1)), _mm_set_epi32(3, 2, 1, 0));
        const __m256d keep = _mm256_castsi256_pd(_mm256_cvtepi32_epi64(in));
        const __m256d h = _mm256_cvtps_pd(_mm_maskload_ps(row + k, in));
        const __m256d dz =
            _mm256_and_pd(_mm256_and_pd(_mm256_sub_pd(_mm256_add_pd(vzs, _mm256_mul_pd(kv, vd)), h), absm), keep);
        if (check_nan) bad = _mm256_or_pd(bad, _mm256_and_pd(keep, _mm256_cmp_pd(h, h, _CMP_UNORD_Q)));
        const __m256d gt = _mm256_cmp_pd(dz, m, _CMP_GT_OQ);
        m = _mm256_max_pd(dz, m);
        mk = _mm256_blendv_pd(mk, pv, gt);
    }
    a->m = m, a->mk = mk, a->bad = bad;
#elif defined(__SSE2__)
    const __m128d vzs = _mm_set1_pd(zs), vd = _mm_set1_pd(dzdx), two = _mm_set1_pd(2.0);
    __m128d kv = _mm_set_pd(1.0, 0.0), pv = _mm_add_pd(_mm_set1_pd(pos0), kv);
    __m128d m = a->m, mk = a->mk, bad = a->bad;
    int64_t k = 0;
    for (; k + 1 <= n; k += 2) {
        double two_h; /* two floats, as one 8-byte load (rows have no alignment) */
        memcpy(&two_h, row + k, sizeof two_h);
        __m128d h = _mm_cvtps_pd(_mm_castpd_ps(_mm_set_sd(two_h)));
        __m128d dz = _mm_and_pd(_mm_sub_pd(_mm_add_pd(vzs, _mm_mul_pd(kv, vd)), h),
                                _mm_castsi128_pd(_mm_set1_epi64x(INT64_MAX)));
        if (check_nan) bad = _mm_or_pd(bad, _mm_cmpunord_pd(h, h));
        __m128d gt = _mm_cmpgt_pd(dz, m); /* false for a NaN dz */
        m = _mm_max_pd(dz, m);
        mk = _mm_or_pd(_mm_and_pd(gt, pv), _mm_andnot_pd(gt, mk));
        kv = _mm_add_pd(kv, two);
        pv = _mm_add_pd(pv, two);
    }
    if (k == n) { /* the last sample alone, in the low lane (the high one is masked to 0) */
        __m128d h = _mm_cvtps_pd(_mm_load_ss(row + k));
        __m128d dz = _mm_and_pd(_mm_sub_pd(_mm_add_pd(vzs, _mm_mul_pd(kv, vd)), h),
                                _mm_castsi128_pd(_mm_set_epi64x(0, INT64_MAX)));
        if (check_nan) bad = _mm_or_pd(bad, _mm_cmpunord_pd(h, h));
        __m128d gt = _mm_cmpgt_pd(dz, m);
        m = _mm_max_pd(dz, m);
        mk = _mm_or_pd(_mm_and_pd(gt, pv), _mm_andnot_pd(gt, mk));
    }
    a->m = m, a->mk = mk, a->bad = bad;
#else
    for (int64_t k = 0; k <= n; k++) {
        double z = zs + (double)k * dzdx;
        float hv = row[k];
        double dz = fabs(z - (double)hv);
        if (dz > a->m) a->m = dz, a->mk = pos0 + (double)k;
        if (check_nan) a->bad |= hv != hv;
    }
#endif
}

#if defined(__SSE2__)
/* Merges two argmax lane pairs: b's lane wins when larger, or as large at an earlier position. */
static inline void amax_merge(__m128d *m, __m128d *p, __m128d mb, __m128d pb) {
    const __m128d take = _mm_or_pd(_mm_cmpgt_pd(mb, *m), _mm_and_pd(_mm_cmpeq_pd(mb, *m), _mm_cmplt_pd(pb, *p)));
    *m = _mm_or_pd(_mm_and_pd(take, mb), _mm_andnot_pd(take, *m));
    *p = _mm_or_pd(_mm_and_pd(take, pb), _mm_andnot_pd(take, *p));
}

/* The lanes' maximum in the low lane of *m, its first position in the low lane of *p. */
static inline void amax_reduce(tin_vd m, tin_vd p, double *best, double *pos) {
#if defined(__AVX2__)
    __m128d m2 = _mm256_castpd256_pd128(m), p2 = _mm256_castpd256_pd128(p);
    amax_merge(&m2, &p2, _mm256_extractf128_pd(m, 1), _mm256_extractf128_pd(p, 1));
#else
    __m128d m2 = m, p2 = p;
#endif
    amax_merge(&m2, &p2, _mm_unpackhi_pd(m2, m2), _mm_unpackhi_pd(p2, p2));
    *best = _mm_cvtsd_f64(m2);
    *pos = _mm_cvtsd_f64(p2);
}
#endif

/* The maximum; *pos its first sample; *nan whether a NaN was seen (with check_nan). */
static inline double scan_result(const scan_acc *a, double *pos, bool *nan) {
#if defined(__AVX2__)
    *nan = _mm256_movemask_pd(a->bad) != 0;
#elif defined(__SSE2__)
    *nan = _mm_movemask_pd(a->bad) != 0;
#endif
#if defined(__SSE2__)
    double best;
    amax_reduce(a->m, a->mk, &best, pos);
    return best;
#else
    *nan = a->bad;
    *pos = a->mk;
    return a->m;
#endif
}

#if defined(__SSE2__)
/* The narrow scans' running maximum over a group of 4 columns: per lane, the largest distance
 * seen and the row of its first occurrence. */
typedef struct quad_acc {
#if defined(__AVX2__)
    __m256d m, p, bad;
#else
    __m128d m01, m23, p01, p23, bad;
#endif
} quad_acc;

static inline void quad_init(quad_acc *q) { memset(q, 0, sizeof *q); }

/* Four samples of a row: heights h4, the edge functions opposite vertex 0, 1, 2 at them (w0, w1, w2:
 * the vertices' barycentric weights times the area, exact integers), lanes of `out` all ones
 * outside the triangle. Each sample's height on the plane is z0 * w0 + z1 * w1 + z2 * w2 (zi: a
 * vertex's height over the area), rounded in that order; its distance from the sample updates the
 * running maximum and the row py where each lane first reached it; a NaN inside is noted in q->bad. */
static inline __attribute__((always_inline)) void quad_step(quad_acc *q, __m128 h4, __m128i out, __m128i w0,
                                                           __m128i w1, __m128i w2, tin_vd z0, tin_vd z1, tin_vd z2,
                                                           tin_vd py, bool check_nan) {
#if defined(__AVX2__)
    const __m256d absm = _mm256_castsi256_pd(_mm256_set1_epi64x(INT64_MAX));
    const __m256d z = _mm256_add_pd(_mm256_add_pd(_mm256_mul_pd(z0, _mm256_cvtepi32_pd(w0)),
                                                  _mm256_mul_pd(z1, _mm256_cvtepi32_pd(w1))),
                                    _mm256_mul_pd(z2, _mm256_cvtepi32_pd(w2)));
    const __m256d h = _mm256_cvtps_pd(h4), o = _mm256_castsi256_pd(_mm256_cvtepi32_epi64(out));
    const __m256d d = _mm256_andnot_pd(o, _mm256_and_pd(_mm256_sub_pd(z, h), absm));
    if (check_nan) q->bad = _mm256_or_pd(q->bad, _mm256_andnot_pd(o, _mm256_cmp_pd(h, h, _CMP_UNORD_Q)));
    const __m256d g = _mm256_cmp_pd(d, q->m, _CMP_GT_OQ); /* strictly larger: each lane keeps its first */
    q->m = _mm256_max_pd(d, q->m);
    q->p = _mm256_blendv_pd(q->p, py, g);
#else
    const __m128d absm = _mm_castsi128_pd(_mm_set1_epi64x(INT64_MAX));
    for (int half = 0; half < 2; half++) { /* lanes 0-1, then 2-3 */
        const __m128d z = _mm_add_pd(_mm_add_pd(_mm_mul_pd(z0, _mm_cvtepi32_pd(w0)), _mm_mul_pd(z1, _mm_cvtepi32_pd(w1))),
                                     _mm_mul_pd(z2, _mm_cvtepi32_pd(w2)));
        const __m128d h = _mm_cvtps_pd(h4), o = _mm_castsi128_pd(_mm_unpacklo_epi32(out, out));
        const __m128d d = _mm_andnot_pd(o, _mm_and_pd(_mm_sub_pd(z, h), absm));
        if (check_nan) q->bad = _mm_or_pd(q->bad, _mm_andnot_pd(o, _mm_cmpunord_pd(h, h)));
        __m128d *m = half ? &q->m23 : &q->m01, *p = half ? &q->p23 : &q->p01;
        const __m128d g = _mm_cmpgt_pd(d, *m); /* strictly larger: each lane keeps its first maximum */
        *m = _mm_max_pd(d, *m);
        *p = _mm_or_pd(_mm_and_pd(g, py), _mm_andnot_pd(g, *p));
        h4 = _mm_movehl_ps(h4, h4);
        out = _mm_unpackhi_epi64(out, out), w0 = _mm_unpackhi_epi64(w0, w0), w1 = _mm_unpackhi_epi64(w1, w1),
        w2 = _mm_unpackhi_epi64(w2, w2);
    }
#endif
}

static inline bool quad_bad(const quad_acc *q) {
#if defined(__AVX2__)
    return _mm256_movemask_pd(q->bad) != 0;
#else
    return _mm_movemask_pd(q->bad) != 0;
#endif
}

/* The group's lanes with positions as `cols` * row + column (row-major order, exact). */
static inline void quad_lanes(const quad_acc *q, double cols, double kb, tin_vd *m, tin_vd *p) {
#if defined(__AVX2__)
    *m = q->m;
    *p = _mm256_add_pd(_mm256_mul_pd(q->p, _mm256_set1_pd(cols)), _mm256_set_pd(kb + 3, kb + 2, kb + 1, kb));
#else
    __m128d m01 = q->m01, p01 = _mm_add_pd(_mm_mul_pd(q->p01, _mm_set1_pd(cols)), _mm_set_pd(kb + 1, kb));
    const __m128d p23 = _mm_add_pd(_mm_mul_pd(q->p23, _mm_set1_pd(cols)), _mm_set_pd(kb + 3, kb + 2));
    amax_merge(&m01, &p01, q->m23, p23);
    *m = m01, *p = p01;
#endif
}

/* Edge function e (a, b, c: a * x + b * y + c) at columns minx .. minx + 3 of row miny, as int32. */
static inline __m128i edge_lanes(const int64_t e[3], int64_t minx, int64_t miny) {
    const int64_t r = e[2] + e[1] * miny + e[0] * minx;
    return _mm_set_epi32((int)(r + 3 * e[0]), (int)(r + 2 * e[0]), (int)(r + e[0]), (int)r);
}

/* A narrow triangle (at most 4 columns, most of them late in the refinement): every row is one
 * group of 4 samples from minx, inside where the three edge functions are >= 0 (the same closed
 * triangle as the walk in find_candidate_fast), each height interpolated from the sample's own
 * weights as delatin does (see quad_step); no branch per row. ec: a, b, c of the edges opposite
 * vertex 0, 1, 2; zc: z0, z1, z2 (heights over the area); vx: the vertices' samples. False when a NaN
 * is under the triangle. */
static inline __attribute__((always_inline)) bool scan_narrow(tin *T, int32_t t, const bool check_nan,
                                                              const uint32_t vx[3], const int64_t ec[9],
                                                              const double zc[3], int64_t minx, int64_t miny,
                                                              int64_t maxy) {
    const size_t W = (size_t)T->w;
    /* Within the box the edge functions are small (|w| < 6 * 65536): int32 lanes, stepped a row at a
     * time; a sample is outside when one of them is negative (its sign bit in the OR of the three). */
    __m128i w0 = edge_lanes(ec, minx, miny), w1 = edge_lanes(ec + 3, minx, miny), w2 = edge_lanes(ec + 6, minx, miny);
    const __m128i s0 = _mm_set1_epi32((int)ec[1]), s1 = _mm_set1_epi32((int)ec[4]), s2 = _mm_set1_epi32((int)ec[7]);
    const tin_vd z0 = VD_SET1(zc[0]), z1 = VD_SET1(zc[1]), z2 = VD_SET1(zc[2]), one = VD_SET1(1.0);
    tin_vd py = VD_SET1((double)miny);
    quad_acc q;
    quad_init(&q);
    const float *row = T->hl + (size_t)miny * W + (size_t)minx;
    for (int64_t yy = miny; yy <= maxy; yy++, row += W) {
        const __m128i out = _mm_srai_epi32(_mm_or_si128(_mm_or_si128(w0, w1), w2), 31);
        quad_step(&q, _mm_loadu_ps(row), out, w0, w1, w2, z0, z1, z2, py, check_nan);
        py = VD_ADD(py, one);
        w0 = _mm_add_epi32(w0, s0), w1 = _mm_add_epi32(w1, s1), w2 = _mm_add_epi32(w2, s2);
    }
    if (check_nan && quad_bad(&q)) return false;
    tin_vd m, p;
    quad_lanes(&q, 4.0, 0.0, &m, &p);
    double best, pos;
    amax_reduce(m, p, &best, &pos);
    const int64_t pk = (int64_t)pos, by = pk >> 2, bx = minx + (pk & 3);
    const uint32_t pc = (uint32_t)bx | (uint32_t)by << 16;
    if ((pc == vx[0]) | (pc == vx[1]) | (pc == vx[2])) best = 0;
    q_set(T, t, pc, best);
    return true;
}

/* The same for a triangle 5 to 8 columns wide (the caller takes those at most 8 rows high: taller
 * ones cost less walked): two groups of 4 samples a row (|w| < 14 * 65536). */
static inline __attribute__((always_inline)) bool scan_narrow8(tin *T, int32_t t, const bool check_nan,
                                                              const uint32_t vx[3], const int64_t ec[9],
                                                              const double zc[3], int64_t minx, int64_t miny,
                                                              int64_t maxy) {
    const size_t W = (size_t)T->w;
    __m128i w0 = edge_lanes(ec, minx, miny), w1 = edge_lanes(ec + 3, minx, miny), w2 = edge_lanes(ec + 6, minx, miny);
    const __m128i c0 = _mm_set1_epi32((int)(4 * ec[0])), c1 = _mm_set1_epi32((int)(4 * ec[3])),
                  c2 = _mm_set1_epi32((int)(4 * ec[6]));
    const __m128i s0 = _mm_set1_epi32((int)ec[1]), s1 = _mm_set1_epi32((int)ec[4]), s2 = _mm_set1_epi32((int)ec[7]);
    const tin_vd z0 = VD_SET1(zc[0]), z1 = VD_SET1(zc[1]), z2 = VD_SET1(zc[2]), one = VD_SET1(1.0);
    tin_vd py = VD_SET1((double)miny);
    quad_acc qa, qb;
    quad_init(&qa);
    quad_init(&qb);
    const float *row = T->hl + (size_t)miny * W + (size_t)minx;
    for (int64_t yy = miny; yy <= maxy; yy++, row += W) {
        const __m128i v0 = _mm_add_epi32(w0, c0), v1 = _mm_add_epi32(w1, c1), v2 = _mm_add_epi32(w2, c2);
        const __m128i out = _mm_srai_epi32(_mm_or_si128(_mm_or_si128(w0, w1), w2), 31);
        const __m128i out4 = _mm_srai_epi32(_mm_or_si128(_mm_or_si128(v0, v1), v2), 31);
        quad_step(&qa, _mm_loadu_ps(row), out, w0, w1, w2, z0, z1, z2, py, check_nan);
        quad_step(&qb, _mm_loadu_ps(row + 4), out4, v0, v1, v2, z0, z1, z2, py, check_nan);
        py = VD_ADD(py, one);
        w0 = _mm_add_epi32(w0, s0), w1 = _mm_add_epi32(w1, s1), w2 = _mm_add_epi32(w2, s2);
    }
    if (check_nan && (quad_bad(&qa) || quad_bad(&qb))) return false;
    tin_vd ma, pa, mb, pb;
    quad_lanes(&qa, 8.0, 0.0, &ma, &pa);
    quad_lanes(&qb, 8.0, 4.0, &mb, &pb);
    double best, pos, best_b, pos_b;
    amax_reduce(ma, pa, &best, &pos);
    amax_reduce(mb, pb, &best_b, &pos_b);
    if (best_b > best || (best_b == best && pos_b < pos)) best = best_b, pos = pos_b;
    const int64_t pk = (int64_t)pos, by = pk >> 3, bx = minx + (pk & 7);
    const uint32_t pc = (uint32_t)bx | (uint32_t)by << 16;
    if ((pc == vx[0]) | (pc == vx[1]) | (pc == vx[2])) best = 0;
    q_set(T, t, pc, best);
    return true;
}
#endif

#if !defined(__SSE2__)
/* Without SSE2: the samples scan_narrow and scan_narrow8 measure, with their arithmetic, one at a
 * time (the same meshes as with SSE2 or AVX2). */
static bool scan_box(tin *T, int32_t t, bool check_nan, const uint32_t vx[3], const int64_t ec[9],
                     const double zc[3], int64_t minx, int64_t maxx, int64_t miny, int64_t maxy) {
    double best = 0;
    uint32_t pc = 0;
    for (int64_t y = miny; y <= maxy; y++) {
        const float *row = T->hl + (size_t)y * (size_t)T->w;
        for (int64_t x = minx; x <= maxx; x++) {
            const int64_t w0 = ec[2] + ec[1] * y + ec[0] * x, w1 = ec[5] + ec[4] * y + ec[3] * x,
                          w2 = ec[8] + ec[7] * y + ec[6] * x;
            if (w0 < 0 || w1 < 0 || w2 < 0) continue;
            const float h = row[x];
            if (check_nan && h != h) return false;
            const double d = fabs(zc[0] * (double)w0 + zc[1] * (double)w1 + zc[2] * (double)w2 - (double)h);
            if (d > best) best = d, pc = (uint32_t)x | (uint32_t)y << 16;
        }
    }
    if ((pc == vx[0]) | (pc == vx[1]) | (pc == vx[2])) best = 0;
    q_set(T, t, pc, best);
    return true;
}
#endif

/* The lower layer alone, without holes under the triangle (else find_candidate_general). */
static inline __attribute__((always_inline)) void find_candidate_fast(tin *T, int32_t t, const bool check_nan) {
    int64_t x[3], y[3];
    float zf[3];
    for (int i = 0; i < 3; i++) {
        const uint32_t v = T->hv[3 * t + i].v;
        x[i] = PX(v), y[i] = PY(v);
    }
    /* Twice the area 1: no sample but the vertices (Pick), nothing to measure. */
    if (orient(x[0], y[0], x[1], y[1], x[2], y[2]) == 1) {
        q_set(T, t, 0, 0.0);
        return;
    }
    for (int i = 0; i < 3; i++) zf[i] = T->hl[(size_t)y[i] * (size_t)T->w + (size_t)x[i]];
    if (zf[0] != zf[0] || zf[1] != zf[1] || zf[2] != zf[2]) goto general;
    {
        const float *hd = T->hl;
        const size_t W = (size_t)T->w;
        /* Barycentric weights times area: w_i(px, py) = c_i + a_i * px + b_i * py, as orient(). */
        const int64_t a12 = y[2] - y[1], b12 = x[1] - x[2], c12 = x[2] * y[1] - y[2] * x[1];
        const int64_t a20 = y[0] - y[2], b20 = x[2] - x[0], c20 = x[0] * y[2] - y[0] * x[2];
        const int64_t a01 = y[1] - y[0], b01 = x[0] - x[1], c01 = x[1] * y[0] - y[1] * x[0];
        const double area = (double)orient(x[0], y[0], x[1], y[1], x[2], y[2]);
        const double z0 = (double)zf[0] / area, z1 = (double)zf[1] / area, z2 = (double)zf[2] / area;
        const double dzdx = z0 * (double)a12 + z1 * (double)a20 + z2 * (double)a01;
        /* A narrow triangle: see scan_narrow. */
        {
            const int64_t minx = x[0] < x[1] ? (x[0] < x[2] ? x[0] : x[2]) : (x[1] < x[2] ? x[1] : x[2]);
            const int64_t maxx = x[0] > x[1] ? (x[0] > x[2] ? x[0] : x[2]) : (x[1] > x[2] ? x[1] : x[2]);
            const int64_t miny = y[0] < y[1] ? (y[0] < y[2] ? y[0] : y[2]) : (y[1] < y[2] ? y[1] : y[2]);
            const int64_t maxy = y[0] > y[1] ? (y[0] > y[2] ? y[0] : y[2]) : (y[1] > y[2] ? y[1] : y[2]);
            const int64_t ec[9] = {a12, b12, c12, a20, b20, c20, a01, b01, c01};
            const double zc[3] = {z0, z1, z2};
            const uint32_t vx[3] = {T->hv[3 * t].v, T->hv[3 * t + 1].v, T->hv[3 * t + 2].v};
            const size_t end = (size_t)maxy * W + (size_t)minx, nall = W * (size_t)T->h;
#if defined(__SSE2__)
            if (maxx - minx <= 3 && end + 4 <= nall) {
                if (!scan_narrow(T, t, check_nan, vx, ec, zc, minx, miny, maxy)) goto general;
                return;
            }
            if (maxx - minx <= 7 && maxy - miny <= 7 && end + 8 <= nall) {
                if (!scan_narrow8(T, t, check_nan, vx, ec, zc, minx, miny, maxy)) goto general;
                return;
            }
#else
            if ((maxx - minx <= 3 && end + 4 <= nall) || (maxx - minx <= 7 && maxy - miny <= 7 && end + 8 <= nall)) {
                if (!scan_box(T, t, check_nan, vx, ec, zc, minx, maxx, miny, maxy)) goto general;
                return;
            }
#endif
        }
        /* Vertices by row: top, middle, bottom. */
        int it = 0, im = 1, ib = 2;
        if (y[im] < y[it]) { int s = it; it = im; im = s; }
        if (y[ib] < y[im]) { int s = im; im = ib; ib = s; }
        if (y[im] < y[it]) { int s = it; it = im; im = s; }
        const int64_t xt = x[it], yt = y[it], xm = x[im], ym = y[im], xb = x[ib], yb = y[ib];
        /* Ask for the rows early: the loads then overlap instead of missing one after another. */
        {
            int64_t minx = x[0] < x[1] ? x[0] : x[1], maxx = x[0] < x[1] ? x[1] : x[0];
            if (x[2] < minx) minx = x[2];
            if (x[2] > maxx) maxx = x[2];
            const float *p = hd + (size_t)yt * W + (size_t)minx;
            const int64_t wd = maxx - minx;
            int64_t nr = yb - yt < 24 ? yb - yt : 24;
            for (int64_t i = 0; i <= nr; i++, p += W) {
                __builtin_prefetch(p);
                if (wd >= 8) __builtin_prefetch(p + wd);
            }
        }
        /* Is the middle vertex left of edge top-bottom? */
        const bool mleft = (xm - xt) * (yb - yt) < (xb - xt) * (ym - yt);
        const edge_dda etb = dda_init(xt, xb - xt, yb - yt), etm = dda_init(xt, xm - xt, ym - yt);
        edge_dda l = mleft ? etm : etb, r = mleft ? etb : etm;
        scan_acc acc;
        scan_init(&acc);
        int64_t y0 = yt;
        for (int half = 0; half < 2; half++) {
            const int64_t yend = half ? yb + 1 : ym;
            for (; y0 < yend; y0++) {
                const int64_t lo = l.x + (l.r > 0), hi = r.x;
                dda_step(&l);
                dda_step(&r);
                if (lo > hi) continue;
                const size_t s0 = (size_t)y0 * W + (size_t)lo;
                /* z is affine along the row: its value at the span start plus a step per sample. */
                double w0 = (double)(c12 + b12 * y0 + a12 * lo), w1 = (double)(c20 + b20 * y0 + a20 * lo),
                       w2 = (double)(c01 + b01 * y0 + a01 * lo);
                const double zs = z0 * w0 + z1 * w1 + z2 * w2;
                scan_row(&acc, hd + s0, hi - lo, zs, dzdx, (double)s0, check_nan);
            }
            if (half == 0) {
                const edge_dda emb = dda_init(xm, xb - xm, yb - ym);
                if (mleft)
                    l = emb;
                else
                    r = emb;
            }
        }
        double pos;
        bool nan;
        double best = scan_result(&acc, &pos, &nan);
        if (check_nan && nan) goto general;
        const size_t ps = (size_t)pos;
        int64_t by = (int64_t)(pos / (double)W); /* exact: a correctly rounded quotient of small integers */
        const int64_t bx = (int64_t)(ps - (size_t)by * W);
        if ((bx == x[0] && by == y[0]) || (bx == x[1] && by == y[1]) || (bx == x[2] && by == y[2])) best = 0;
        q_set(T, t, (uint32_t)bx | (uint32_t)by << 16, best);
        return;
    }
general : {
    tri_geom g;
    tri_setup(T, t, &g);
    find_candidate_general(T, t, &g);
}
}

static void find_candidate(tin *T, int32_t t) {
    if (T->hu) {
        tri_geom g;
        tri_setup(T, t, &g);
        find_candidate_general(T, t, &g);
    } else if (T->holes) {
        find_candidate_fast(T, t, true);
    } else {
        find_candidate_fast(T, t, false);
    }
}

static void flush(tin *T) {
    for (size_t i = 0; i < T->npend; i++) {
        int32_t t = T->pend[i];
        T->pbits[(uint32_t)t >> 6] &= ~((uint64_t)1 << ((uint32_t)t & 63));
        find_candidate(T, t);
    }
    T->npend = 0;
}

/* Inserts the worst sample of the worst triangle (the queue's top, live). */
static void step(tin *T) {
    int32_t t = q_tri(T->q[0]);
    uint32_t c = T->tm[t].cand;
    {
        /* The triangle's rows are cold (last read when it was made): ask for them now, so that they
         * arrive while the mesh is updated around the new point. */
        const uint32_t v0 = T->hv[3 * t].v, v1 = T->hv[3 * t + 1].v, v2 = T->hv[3 * t + 2].v;
        int64_t x0 = PX(v0), x1 = x0, y0 = PY(v0), y1 = y0;
        if (PX(v1) < x0) x0 = PX(v1);
        if (PX(v1) > x1) x1 = PX(v1);
        if (PX(v2) < x0) x0 = PX(v2);
        if (PX(v2) > x1) x1 = PX(v2);
        if (PY(v1) < y0) y0 = PY(v1);
        if (PY(v1) > y1) y1 = PY(v1);
        if (PY(v2) < y0) y0 = PY(v2);
        if (PY(v2) > y1) y1 = PY(v2);
        if ((y1 - y0 + 1) * ((x1 - x0) / 16 + 1) <= 64) {
            const float *row = T->hl + (size_t)y0 * (size_t)T->w;
            for (int64_t y = y0; y <= y1; y++, row += T->w) {
                /* Each cache line of the row's span once. */
                const uintptr_t l0 = (uintptr_t)(row + x0) & ~(uintptr_t)63, l1 = (uintptr_t)(row + x1);
                for (uintptr_t l = l0; l <= l1; l += 64) __builtin_prefetch((const void *)l);
            }
        }
    }
    /* The three neighbours are read (and written) first thing by the insertion. */
    for (int i = 0; i < 3; i++) {
        const int32_t h = T->hv[3 * t + i].he;
        if (h >= 0) __builtin_prefetch(&T->hv[h - h % 3]);
    }
    q_pop(T);
    /* The next top is most often the new root: its half-edges are asked for a step ahead. */
    if (T->nq) __builtin_prefetch(&T->hv[3 * (size_t)q_tri(T->q[0])]);
    T->tm[t].key = 0;
    T->nlive--;
    insert_in(T, t, (int32_t)(c & 0xffffu), (int32_t)(c >> 16));
    flush(T);
}

/* Walks from triangle `start` to the one containing (px, py). -1 if outside the raster. */
static int32_t locate(const tin *T, int32_t start, int64_t px, int64_t py) {
    int32_t t = start;
    size_t guard = 0;
    for (;;) {
        bool moved = false;
        for (int i = 0; i < 3 && !moved; i++) {
            uint32_t a = T->hv[3 * t + i].v, b = T->hv[3 * t + (i + 1) % 3].v;
            if (orient(PX(a), PY(a), PX(b), PY(b), px, py) < 0) {
                int32_t n = T->hv[3 * t + i].he;
                if (n < 0) return -1;
                t = n / 3;
                moved = true;
            }
        }
        if (!moved) return t;
        if (++guard > 4 * T->nt + 16) return -1;
    }
}

/* ---- output ------------------------------------------------------------------------------- */

/* Bit 0: the lower layer may draw triangle t; bit 1: the upper layer may. */
static unsigned tri_drawable(const tin *T, const uint32_t p[3]) {
    tri_geom g;
    tri_setup_from(T, p, &g);
    const int nl = T->hu ? 2 : 1;
    unsigned ok = nl == 2 ? 3u : 1u;
    for (int64_t y = g.miny; y <= g.maxy && ok; y++, next_row(&g)) {
        int64_t lo, hi;
        row_span(&g, &lo, &hi);
        const size_t base = (size_t)y * (size_t)T->w + (size_t)g.minx;
        for (int64_t k = lo; k <= hi; k++) {
            float l = T->hl[base + (size_t)k];
            if (l != l) return 0;
            if (nl == 2) {
                float u = T->hu[base + (size_t)k];
                if (u != u) ok &= 1u;
            }
        }
    }
    return ok;
}

/* Samples back to vertex ids: a bit per sample (a vertex there), the vertices before each 64-bit
 * word, and the ids in sample order: a sample's id is found by its rank among the vertices. Small
 * (1/21 of the heights and 4 bytes a vertex) and read almost in cache. */
typedef struct tin_vmap {
    uint64_t *bits;
    uint32_t *rank;
    uint32_t *id;
    size_t w;
} tin_vmap;

static inline size_t vmap_rank(const tin_vmap *m, uint32_t p) {
    const size_t s = (size_t)PY(p) * m->w + (size_t)PX(p);
    const uint64_t below = m->bits[s >> 6] & (((uint64_t)1 << (s & 63)) - 1);
    return (size_t)m->rank[s >> 6] + (size_t)__builtin_popcountll(below);
}

static void vmap_free(tin_vmap *m) {
    terra_free(m->bits);
    terra_free(m->rank);
    terra_free(m->id);
}

static bool vmap_build(const tin *T, tin_vmap *m) {
    const size_t nw = ((size_t)T->w * (size_t)T->h + 63) / 64;
    m->w = (size_t)T->w;
    m->bits = terra_calloc(nw, sizeof(uint64_t));
    m->rank = terra_alloc(nw * sizeof(uint32_t));
    m->id = terra_alloc(T->nv * sizeof(uint32_t) + 1);
    if (!m->bits || !m->rank || !m->id) {
        vmap_free(m);
        return false;
    }
    for (size_t v = 0; v < T->nv; v++) {
        const size_t s = (size_t)PY(T->vp[v]) * m->w + (size_t)PX(T->vp[v]);
        m->bits[s >> 6] |= (uint64_t)1 << (s & 63);
    }
    uint32_t r = 0;
    for (size_t i = 0; i < nw; i++) m->rank[i] = r, r += (uint32_t)__builtin_popcountll(m->bits[i]);
    for (size_t v = 0; v < T->nv; v++) m->id[vmap_rank(m, T->vp[v])] = (uint32_t)v;
    return true;
}

static inline uint32_t vmap_get(const tin_vmap *m, uint32_t p) { return m->id[vmap_rank(m, p)]; }

/* Copies the live triangles (those the layers may draw) into a level. `in_place` (the last level):
 * the half-edge array itself becomes the triangle list: first its vertices' samples are packed
 * (triangle t moves from byte 24t to 12t, never over one still to be read) and the array shrunk to
 * that, then the samples are mapped to ids (and the undrawable triangles dropped) in place, so the
 * sample-to-id table never sits beside the full half-edge array. */
static terra_status take_level(tin *T, terra_tin_level *lv, bool filter, bool in_place) {
    lv->vertex_count = T->nv;
    const size_t n = T->nt;
    const uint32_t *src; /* 3 samples per triangle */
    uint32_t *packed = NULL;
    if (in_place) {
        packed = (uint32_t *)(void *)T->hv;
        for (size_t i = 0; i < 3 * n; i++) packed[i] = T->hv[i].v; /* byte 4i from byte 8i */
        T->hv = NULL, T->cap_t = 0;
        uint32_t *shrunk = terra_realloc(packed, 3 * n * sizeof(uint32_t) + 1);
        if (shrunk) packed = shrunk;
        lv->triangles = packed;
        src = packed;
    } else {
        lv->triangles = terra_alloc(3 * n * sizeof(uint32_t) + 1);
        src = NULL;
    }
    if (T->hu) lv->upper_triangles = terra_alloc(3 * n * sizeof(uint32_t) + 1);
    tin_vmap vm;
    if (!lv->triangles || (T->hu && !lv->upper_triangles) || !vmap_build(T, &vm))
        return terra_fail(TERRA_E_NOMEM, "tin: out of memory");
    size_t nl = 0, nu = 0;
    const bool check = filter || T->hu;
    for (size_t t = 0; t < n; t++) {
        uint32_t p[3];
        for (int i = 0; i < 3; i++) p[i] = src ? src[3 * t + (size_t)i] : T->hv[3 * t + (size_t)i].v;
        unsigned ok = 1u;
        if (check) ok = tri_drawable(T, p);
        uint32_t v0 = vmap_get(&vm, p[0]), v1 = vmap_get(&vm, p[1]), v2 = vmap_get(&vm, p[2]);
        if (ok & 1u) { /* in place: written at or before triangle t, which is read already */
            lv->triangles[3 * nl] = v0, lv->triangles[3 * nl + 1] = v1, lv->triangles[3 * nl + 2] = v2;
            nl++;
        }
        if (ok & 2u) {
            lv->upper_triangles[3 * nu] = v0, lv->upper_triangles[3 * nu + 1] = v1, lv->upper_triangles[3 * nu + 2] = v2;
            nu++;
        }
    }
    vmap_free(&vm);
    if (in_place && nl < n) {
        uint32_t *shrunk = terra_realloc(lv->triangles, 3 * nl * sizeof(uint32_t) + 1);
        if (shrunk) lv->triangles = shrunk;
    }
    lv->triangle_count = nl;
    lv->upper_triangle_count = nu;
    return TERRA_OK;
}

static int cmp_desc(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x < y) - (x > y);
}

#if !defined(TIN_VARIANT)
void terra_tin_mesh_free(terra_tin_mesh *m) {
    if (!m) return;
    terra_free(m->xy);
    terra_free(m->z);
    terra_free(m->z_upper);
    for (int i = 0; i < m->level_count && m->levels; i++) {
        terra_free(m->levels[i].triangles);
        terra_free(m->levels[i].upper_triangles);
    }
    terra_free(m->levels);
    memset(m, 0, sizeof *m);
}
#endif

static void tin_release(tin *T) {
    terra_free(T->vp);
    terra_free(T->hv);
    terra_free(T->tm);
    terra_free(T->q);
    terra_free(T->pend);
    terra_free(T->bhead);
    terra_free(T->ch);
    terra_free(T->pbits);
}

/* This file is compiled once as is and, on x86-64, once more by tin_avx2.c for AVX2-class CPUs
 * with TIN_VARIANT naming the copy's entry (tests/tin_scalar.c makes a third, without SIMD);
 * terra_tin_build picks one. The entries take a zeroed *out. */
#if defined(TIN_VARIANT)
#define TIN_ENTRY TIN_VARIANT
#else
#define TIN_ENTRY tin_build_portable
#endif
terra_status TIN_ENTRY(const terra_tin_desc *d, terra_tin_mesh *out);
terra_status tin_build_avx2(const terra_tin_desc *d, terra_tin_mesh *out);

terra_status TIN_ENTRY(const terra_tin_desc *d, terra_tin_mesh *out) {
    if (!d->heights) return terra_fail(TERRA_E_INVALID, "tin: no heights");
    if (d->width < 2 || d->height < 2)
        return terra_fail(TERRA_E_INVALID, "tin: raster %dx%d is too small (at least 2x2 samples)", d->width,
                          d->height);
    if (d->width > TERRA_TIN_MAX_SIDE || d->height > TERRA_TIN_MAX_SIDE)
        return terra_fail(TERRA_E_UNSUPPORTED, "tin: raster %dx%d is past the supported size (%d samples a side)",
                          d->width, d->height, TERRA_TIN_MAX_SIDE);
    if (!(d->max_error > 0) || !isfinite(d->max_error))
        return terra_fail(TERRA_E_INVALID, "tin: max error must be a positive number of metres (got %g)",
                          d->max_error);
    if (d->level_count < 0 || d->level_count > 64 || (d->level_count && !d->levels))
        return terra_fail(TERRA_E_INVALID, "tin: bad level list");

    const size_t W = (size_t)d->width, H = (size_t)d->height, N = W * H;
    bool holes = false, any_valid = false;
    for (size_t i = 0; i < N; i++) {
        float v = d->heights[i];
        if (v != v) {
            holes = true;
        } else if (!isfinite(v)) {
            return terra_fail(TERRA_E_SOURCE, "tin: infinite height at sample (%zu, %zu)", i % W, i / W);
        } else {
            any_valid = true;
        }
    }
    if (!any_valid) return terra_fail(TERRA_E_SOURCE, "tin: every sample is no-data");
    if (d->upper)
        for (size_t i = 0; i < N; i++)
            if (isinf(d->upper[i]))
                return terra_fail(TERRA_E_SOURCE, "tin: infinite upper height at sample (%zu, %zu)", i % W, i / W);

    /* Bounds to stop at: the extra levels (coarser than max_error), descending, then max_error. */
    double bounds[65];
    int nb = 0;
    for (int i = 0; i < d->level_count; i++) {
        double b = d->levels[i];
        if (!(b > 0) || !isfinite(b)) return terra_fail(TERRA_E_INVALID, "tin: level bound %g is not positive", b);
        if (b > d->max_error) bounds[nb++] = b;
    }
    qsort(bounds, (size_t)nb, sizeof(double), cmp_desc);
    int nu = 0;
    for (int i = 0; i < nb; i++)
        if (nu == 0 || bounds[nu - 1] != bounds[i]) bounds[nu++] = bounds[i];
    nb = nu;
    bounds[nb++] = d->max_error;

    tin T;
    memset(&T, 0, sizeof T);
    T.w = d->width;
    T.h = d->height;
    T.hl = d->heights;
    T.hu = d->upper;
    T.holes = holes;
    T.hot_b = TIN_NBUCKET;
    T.ch_free = -1;
    T.bhead = terra_alloc(TIN_NBUCKET * sizeof(int32_t));
    if (T.bhead) memset(T.bhead, 0xff, TIN_NBUCKET * sizeof(int32_t));
    T.bound = d->max_error;
    terra_status st = TERRA_OK;
    out->levels = terra_calloc((size_t)nb, sizeof(terra_tin_level));
    if (!out->levels || !T.bhead || !reserve_triangles(&T, 1024) || !reserve_vertices(&T, 1024 + d->seed_count)) {
        st = terra_fail(TERRA_E_NOMEM, "tin: out of memory");
        goto done;
    }
    out->level_count = nb;
    out->width = d->width;
    out->height = d->height;
    out->has_holes = holes;

    int32_t x1 = d->width - 1, y1 = d->height - 1;
    uint32_t p0 = add_point(&T, 0, 0), p1 = add_point(&T, x1, 0), p2 = add_point(&T, 0, y1), p3 = add_point(&T, x1, y1);
    int32_t t0 = add_tri(&T, p3, p0, p2, -1, -1, -1, -1);
    add_tri(&T, p0, p3, p1, t0, -1, -1, -1);

    for (size_t i = 0; i < d->seed_count; i++) {
        int32_t sx = d->seed_xy[2 * i], sy = d->seed_xy[2 * i + 1];
        if (sx < 0 || sy < 0 || sx > x1 || sy > y1) {
            st = terra_fail(TERRA_E_INVALID, "tin: seed point (%d, %d) is outside the raster", sx, sy);
            goto done;
        }
        if (!reserve_triangles(&T, T.nt + 3) || !reserve_vertices(&T, T.nv + 1)) break;
        int32_t t = locate(&T, (int32_t)T.nt - 1, sx, sy);
        if (t < 0) {
            st = terra_fail(TERRA_E_INVALID, "tin: cannot place seed point (%d, %d)", sx, sy);
            goto done;
        }
        bool dup = false;
        for (int k = 0; k < 3; k++) {
            uint32_t v = T.hv[3 * t + k].v;
            if (PX(v) == sx && PY(v) == sy) dup = true;
        }
        if (dup) continue;
        insert_in(&T, t, sx, sy);
    }
    flush(&T);
    if (T.nomem) {
        st = terra_fail(TERRA_E_NOMEM, "tin: out of memory");
        goto done;
    }

    int li = 0;
    terra_tin_stop stop = TERRA_TIN_STOP_ERROR;
    for (;;) {
        q_clean_top(&T);
        if (T.nomem) { /* an empty queue then says nothing of the error left */
            st = terra_fail(TERRA_E_NOMEM, "tin: out of memory at %zu triangles", T.nt);
            goto done;
        }
        double top = T.nq ? key_err(T.q[0]) : 0.0;
        while (li < nb && top <= bounds[li]) {
            terra_tin_level *lv = &out->levels[li];
            lv->max_error = bounds[li];
            lv->reached_error = top;
            lv->stop = TERRA_TIN_STOP_ERROR;
            if (li < nb - 1 && (st = take_level(&T, lv, holes, false)) != TERRA_OK) goto done;
            li++;
        }
        if (li == nb) break;
        if (d->max_vertices && T.nv >= d->max_vertices) stop = TERRA_TIN_STOP_VERTICES;
        if (d->max_triangles && T.nt + 2 > d->max_triangles) stop = TERRA_TIN_STOP_TRIANGLES;
        if (T.nv >= TERRA_TIN_MAX_VERTICES) {
            st = terra_fail(TERRA_E_CAPACITY, "tin: more than %u vertices", TERRA_TIN_MAX_VERTICES);
            goto done;
        }
        if (stop != TERRA_TIN_STOP_ERROR) {
            for (; li < nb; li++) {
                terra_tin_level *lv = &out->levels[li];
                lv->max_error = bounds[li];
                lv->reached_error = top;
                lv->stop = stop;
                if (li < nb - 1 && (st = take_level(&T, lv, holes, false)) != TERRA_OK) goto done;
            }
            break;
        }
        if (!reserve_triangles(&T, T.nt + 2) || !reserve_vertices(&T, T.nv + 1)) {
            st = terra_fail(TERRA_E_NOMEM, "tin: out of memory at %zu triangles", T.nt);
            goto done;
        }
        step(&T);
        if (T.nomem) {
            st = terra_fail(TERRA_E_NOMEM, "tin: out of memory at %zu triangles", T.nt);
            goto done;
        }
    }

    /* The last level: the queue and candidates go first, then the half-edges become its list. */
    terra_free(T.q), T.q = NULL;
    terra_free(T.bhead), T.bhead = NULL;
    terra_free(T.ch), T.ch = NULL;
    terra_free(T.tm), T.tm = NULL;
    terra_free(T.pend), T.pend = NULL;
    terra_free(T.pbits), T.pbits = NULL;
    if ((st = take_level(&T, &out->levels[nb - 1], holes, true)) != TERRA_OK) goto done;
    out->vertex_count = T.nv;
    out->xy = terra_alloc(2 * T.nv * sizeof(int32_t));
    out->z = terra_alloc(T.nv * sizeof(float));
    if (d->upper) out->z_upper = terra_alloc(T.nv * sizeof(float));
    if (!out->xy || !out->z || (d->upper && !out->z_upper)) {
        st = terra_fail(TERRA_E_NOMEM, "tin: out of memory");
        goto done;
    }
    for (size_t v = 0; v < T.nv; v++) out->xy[2 * v] = (int32_t)PX(T.vp[v]), out->xy[2 * v + 1] = (int32_t)PY(T.vp[v]);
    for (size_t v = 0; v < T.nv; v++) {
        size_t s = (size_t)PY(T.vp[v]) * W + (size_t)PX(T.vp[v]);
        out->z[v] = d->heights[s];
        if (d->upper) out->z_upper[v] = d->heights[s] == d->heights[s] ? d->upper[s] : NAN;
    }
done:
    tin_release(&T);
    if (st != TERRA_OK) terra_tin_mesh_free(out);
    return st;
}

#if !defined(TIN_VARIANT)
/* TERRA_TIN_AVX2: the build compiled tin_avx2.c with the AVX2 flags (CMakeLists.txt). */
static bool avx2_usable(void) {
#if defined(TERRA_TIN_AVX2) && (defined(__x86_64__) || defined(__i386__))
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("bmi") && __builtin_cpu_supports("bmi2") &&
           __builtin_cpu_supports("popcnt");
#else
    return false;
#endif
}

#if !defined(TERRA_TIN_AVX2)
terra_status tin_build_avx2(const terra_tin_desc *d, terra_tin_mesh *out) {
    (void)d, (void)out;
    return terra_fail(TERRA_E_UNSUPPORTED, "tin: this build has no AVX2 mesher");
}
#endif

terra_status terra_tin_build(const terra_tin_desc *d, terra_tin_mesh *out) {
    if (!d || !out) return terra_fail(TERRA_E_INVALID, "tin: NULL argument");
    memset(out, 0, sizeof *out);
    switch (d->isa) {
    case TERRA_TIN_ISA_AUTO:
        return avx2_usable() ? tin_build_avx2(d, out) : tin_build_portable(d, out);
    case TERRA_TIN_ISA_PORTABLE:
        return tin_build_portable(d, out);
    case TERRA_TIN_ISA_AVX2:
        if (!avx2_usable()) return terra_fail(TERRA_E_UNSUPPORTED, "tin: the AVX2 mesher needs a CPU with AVX2, BMI1/2 and POPCNT and a build for x86-64");
        return tin_build_avx2(d, out);
    }
    return terra_fail(TERRA_E_INVALID, "tin: unknown isa %d", (int)d->isa);
}
#endif
