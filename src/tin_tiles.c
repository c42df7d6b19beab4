/* Tiles with levels of detail and stable borders, meshed in parallel on a worker pool.
 *
 * Each tile edge's vertices are chosen once, by a 1-D greedy insertion over the edge's profile
 * (worst sample first until every sample is within the bound; per segment this is exactly
 * Douglas-Peucker), at a bound a little under the finest level's. Both tiles sharing the edge seed
 * their meshes with those vertices, at every level; the 2-D mesher never adds another one there,
 * since every border sample is already within the (finest, hence every) level's bound. */
#include "terra/tin.h"
#include "tin_edge.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct profile {
    int32_t *pos;               /* sample offsets along the edge (sorted, excluding both ends) */
    size_t n;
} profile;

/* Marks the samples of the run [r0, r1] (stride apart) that a greedy 1-D insertion keeps (worst
 * sample first; per segment exactly Douglas-Peucker), where only offsets i = phase (mod every), at
 * least `every` from both ends of the run, may be kept: the worst sample's segment is split at the
 * allowed offset nearest to it, until no segment over the bound has one. every 1: any sample. */
static void simplify_1d(const float *h, size_t stride, int32_t i0, int32_t i1, double bound, int32_t every,
                               int32_t phase, int32_t r0, int32_t r1, uint8_t *keep) {
    double z0 = h[(size_t)i0 * stride], z1 = h[(size_t)i1 * stride];
    double worst = 0;
    int32_t wi = -1;
    for (int32_t i = i0 + 1; i < i1; i++) {
        double t = (double)(i - i0) / (double)(i1 - i0);
        double e = fabs(z0 + (z1 - z0) * t - h[(size_t)i * stride]);
        if (e > worst) worst = e, wi = i;
    }
    if (wi < 0 || worst <= bound) return;
    const int32_t lo = i0 + 1 > r0 + every ? i0 + 1 : r0 + every, hi = i1 - 1 < r1 - every ? i1 - 1 : r1 - every;
    /* the allowed offsets in [lo, hi]: first .. last */
    const int32_t first = lo + (((phase - lo) % every) + every) % every, last = hi - (((hi - phase) % every) + every) % every;
    if (first > last) return;
    const int32_t below = wi - (((wi - phase) % every) + every) % every, above = below + every;
    int32_t best = wi - below <= above - wi ? below : above;
    best = best < first ? first : best > last ? last : best;
    keep[best] = 1;
    simplify_1d(h, stride, i0, best, bound, every, phase, r0, r1, keep);
    simplify_1d(h, stride, best, i1, bound, every, phase, r0, r1, keep);
}

terra_status terra_tin_edge_profile(const float *h, size_t stride, int32_t n, double bound, int32_t **pos,
                                    size_t *count) {
    return terra_tin_edge_profile_spaced(h, stride, n, bound, 1, 0, pos, count);
}

terra_status terra_tin_edge_profile_spaced(const float *h, size_t stride, int32_t n, double bound, int32_t every,
                                           int32_t phase, int32_t **pos, size_t *count) {
    *pos = NULL;
    *count = 0;
    uint8_t *keep = terra_calloc((size_t)n + 1, 1);
    if (!keep) return terra_fail(TERRA_E_NOMEM, "tin tiles: out of memory");
    bool holes = false;
    for (int32_t i = 0; i < n; i++) holes |= h[(size_t)i * stride] != h[(size_t)i * stride];
    if (holes && every == 1) {
        /* Conservative with no-data on a border: keep every valid sample. */
        for (int32_t i = 1; i < n - 1; i++) keep[i] = h[(size_t)i * stride] == h[(size_t)i * stride];
    } else {
        /* each run of valid samples: its ends kept, spaced vertices between */
        for (int32_t r0 = 0; r0 < n; r0++) {
            if (h[(size_t)r0 * stride] != h[(size_t)r0 * stride]) continue;
            int32_t r1 = r0;
            while (r1 + 1 < n && h[(size_t)(r1 + 1) * stride] == h[(size_t)(r1 + 1) * stride]) r1++;
            keep[r0] = keep[r1] = 1;
            if (r1 > r0) simplify_1d(h, stride, r0, r1, bound, every, phase, r0, r1, keep);
            r0 = r1;
        }
    }
    size_t cnt = 0;
    for (int32_t i = 1; i < n - 1; i++) cnt += keep[i];
    int32_t *p = terra_alloc(cnt * sizeof(int32_t) + 1);
    if (!p) {
        terra_free(keep);
        return terra_fail(TERRA_E_NOMEM, "tin tiles: out of memory");
    }
    for (int32_t i = 1; i < n - 1; i++)
        if (keep[i]) p[(*count)++] = i;
    *pos = p;
    terra_free(keep);
    return TERRA_OK;
}

typedef struct tiles_job {
    const terra_tin_tiles_desc *d;
    terra_tin_tiles *T;
    profile *hedges, *vedges;   /* horizontal: (tiles_y + 1) * tiles_x; vertical: tiles_y * (tiles_x + 1) */
    double finest;
    pthread_mutex_t lock;
    int next;
    terra_status status;
    char error[256];
} tiles_job;

static terra_status mesh_tile(tiles_job *J, terra_tin_tile *tl) {
    const terra_tin_tiles_desc *d = J->d;
    const int tx = tl->tx, ty = tl->ty, nx = J->T->tiles_x;
    const size_t W = (size_t)tl->w, H = (size_t)tl->h;
    float *hs = terra_alloc(W * H * sizeof(float));
    const profile *top = &J->hedges[ty * nx + tx], *bot = &J->hedges[(ty + 1) * nx + tx];
    const profile *left = &J->vedges[ty * (nx + 1) + tx], *right = &J->vedges[ty * (nx + 1) + tx + 1];
    size_t ns = top->n + bot->n + left->n + right->n;
    int32_t *seeds = terra_alloc(2 * ns * sizeof(int32_t) + 1);
    if (!hs || !seeds) {
        terra_free(hs);
        terra_free(seeds);
        return terra_fail(TERRA_E_NOMEM, "tin tiles: out of memory");
    }
    for (size_t y = 0; y < H; y++)
        memcpy(hs + y * W, d->heights + ((size_t)tl->y0 + y) * (size_t)d->width + (size_t)tl->x0, W * sizeof(float));
    size_t k = 0;
    for (size_t i = 0; i < top->n; i++) seeds[2 * k] = top->pos[i], seeds[2 * k + 1] = 0, k++;
    for (size_t i = 0; i < bot->n; i++) seeds[2 * k] = bot->pos[i], seeds[2 * k + 1] = (int32_t)H - 1, k++;
    for (size_t i = 0; i < left->n; i++) seeds[2 * k] = 0, seeds[2 * k + 1] = left->pos[i], k++;
    for (size_t i = 0; i < right->n; i++) seeds[2 * k] = (int32_t)W - 1, seeds[2 * k + 1] = right->pos[i], k++;
    terra_tin_desc td = {0};
    td.width = (int)W, td.height = (int)H, td.heights = hs;
    td.max_error = J->finest;
    td.levels = d->levels, td.level_count = d->level_count;
    td.seed_xy = seeds, td.seed_count = ns;
    terra_status st = terra_tin_build(&td, &tl->mesh);
    terra_free(hs);
    terra_free(seeds);
    if (st == TERRA_OK && tl->mesh.level_count != d->level_count)
        st = terra_fail(TERRA_E_INVALID, "tin tiles: levels must be distinct");
    return st;
}

/* One worker's share: tiles taken from a shared counter until none is left. */
static void tiles_worker(terra_job *job) {
    tiles_job *J = job->user;
    const int n = J->T->tiles_x * J->T->tiles_y;
    for (;;) {
        pthread_mutex_lock(&J->lock);
        int i = J->status == TERRA_OK ? J->next++ : n;
        pthread_mutex_unlock(&J->lock);
        if (i >= n) break;
        terra_status st = mesh_tile(J, &J->T->tiles[i]);
        if (st != TERRA_OK) {
            pthread_mutex_lock(&J->lock);
            if (J->status == TERRA_OK) {
                J->status = st;
                strncpy(J->error, terra_last_error(), sizeof J->error - 1);
            }
            pthread_mutex_unlock(&J->lock);
        }
    }
    job->status = TERRA_OK;
}

void terra_tin_tiles_free(terra_tin_tiles *T) {
    if (!T) return;
    if (T->tiles)
        for (int i = 0; i < T->tiles_x * T->tiles_y; i++) terra_tin_mesh_free(&T->tiles[i].mesh);
    terra_free(T->tiles);
    memset(T, 0, sizeof *T);
}

terra_status terra_tin_tiles_build(const terra_tin_tiles_desc *d, terra_tin_tiles *T) {
    if (!d || !T || !d->heights) return terra_fail(TERRA_E_INVALID, "tin tiles: NULL argument");
    memset(T, 0, sizeof *T);
    int ts = d->tile_size ? d->tile_size : 128;
    if (ts < 3) return terra_fail(TERRA_E_INVALID, "tin tiles: tile size %d is under 3 samples", ts);
    if (d->width < 2 || d->height < 2 || d->width > TERRA_TIN_MAX_SIDE || d->height > TERRA_TIN_MAX_SIDE)
        return terra_fail(TERRA_E_INVALID, "tin tiles: bad raster size %dx%d", d->width, d->height);
    if (d->level_count < 1 || d->level_count > 16 || !d->levels)
        return terra_fail(TERRA_E_INVALID, "tin tiles: 1 to 16 levels needed");
    for (int i = 0; i < d->level_count; i++)
        if (!(d->levels[i] > 0) || !isfinite(d->levels[i]) || (i && !(d->levels[i] < d->levels[i - 1])))
            return terra_fail(TERRA_E_INVALID, "tin tiles: levels must be positive and strictly decreasing");
    double t0 = terra_now_s();
    const int step = ts - 1;
    const int nx = (d->width - 1 + step - 1) / step, ny = (d->height - 1 + step - 1) / step;
    T->tiles_x = nx, T->tiles_y = ny, T->tile_size = ts, T->level_count = d->level_count;
    T->tiles = terra_calloc((size_t)nx * (size_t)ny, sizeof(terra_tin_tile));
    tiles_job J;
    memset(&J, 0, sizeof J);
    J.d = d, J.T = T;
    J.finest = d->levels[d->level_count - 1];
    J.hedges = terra_calloc((size_t)(ny + 1) * (size_t)nx, sizeof(profile));
    J.vedges = terra_calloc((size_t)ny * (size_t)(nx + 1), sizeof(profile));
    terra_status st = TERRA_OK;
    if (!T->tiles || !J.hedges || !J.vedges) {
        st = terra_fail(TERRA_E_NOMEM, "tin tiles: out of memory");
        goto done;
    }
    const size_t Wr = (size_t)d->width;
    const double bb = J.finest * TERRA_TIN_BORDER_MARGIN;
    for (int j = 0; j <= ny && st == TERRA_OK; j++) {
        int y = j * step < d->height - 1 ? j * step : d->height - 1;
        for (int i = 0; i < nx && st == TERRA_OK; i++) {
            int x0 = i * step, x1 = x0 + step < d->width - 1 ? x0 + step : d->width - 1;
            profile *pr = &J.hedges[j * nx + i];
            st = terra_tin_edge_profile(d->heights + (size_t)y * Wr + (size_t)x0, 1, x1 - x0 + 1, bb, &pr->pos, &pr->n);
        }
    }
    for (int j = 0; j < ny && st == TERRA_OK; j++) {
        int y0 = j * step, y1 = y0 + step < d->height - 1 ? y0 + step : d->height - 1;
        for (int i = 0; i <= nx && st == TERRA_OK; i++) {
            int x = i * step < d->width - 1 ? i * step : d->width - 1;
            profile *pr = &J.vedges[j * (nx + 1) + i];
            st = terra_tin_edge_profile(d->heights + (size_t)y0 * Wr + (size_t)x, Wr, y1 - y0 + 1, bb, &pr->pos, &pr->n);
        }
    }
    if (st != TERRA_OK) goto done;
    for (int j = 0; j < ny; j++)
        for (int i = 0; i < nx; i++) {
            terra_tin_tile *tl = &T->tiles[j * nx + i];
            tl->tx = i, tl->ty = j, tl->x0 = i * step, tl->y0 = j * step;
            tl->w = (tl->x0 + step < d->width - 1 ? tl->x0 + step : d->width - 1) - tl->x0 + 1;
            tl->h = (tl->y0 + step < d->height - 1 ? tl->y0 + step : d->height - 1) - tl->y0 + 1;
        }
    /* One job per worker, each taking tiles until none is left. */
    terra_pool *pool = d->pool, *own = NULL;
    if (!pool && (st = terra_pool_create(&(terra_pool_desc){.threads = d->threads > 0 ? d->threads : terra_default_threads()}, &own)) != TERRA_OK)
        goto done;
    if (!pool) pool = own;
    terra_job_queue *queue = NULL;
    if ((st = terra_job_queue_create(&queue)) != TERRA_OK) {
        terra_pool_destroy(own);
        goto done;
    }
    int nj = terra_pool_threads(pool);
    if (nj > 64) nj = 64;
    terra_job jobs[64];
    pthread_mutex_init(&J.lock, NULL);
    for (int i = 0; i < nj; i++) {
        jobs[i] = (terra_job){.run = tiles_worker, .user = &J, .queue = queue};
        terra_pool_submit(pool, &jobs[i]);
    }
    for (int back = 0; back < nj;) {
        terra_job *done_jobs[64];
        int n = terra_job_queue_poll(queue, done_jobs, 64);
        back += n;
        if (n == 0) nanosleep(&(struct timespec){.tv_nsec = 200000}, NULL);
    }
    pthread_mutex_destroy(&J.lock);
    terra_job_queue_destroy(queue);
    terra_pool_destroy(own);
    if (J.status != TERRA_OK) st = terra_fail(J.status, "%s", J.error);
done:
    if (J.hedges)
        for (int i = 0; i < (ny + 1) * nx; i++) terra_free(J.hedges[i].pos);
    if (J.vedges)
        for (int i = 0; i < ny * (nx + 1); i++) terra_free(J.vedges[i].pos);
    terra_free(J.hedges);
    terra_free(J.vedges);
    if (st != TERRA_OK) terra_tin_tiles_free(T);
    T->seconds = terra_now_s() - t0;
    return st;
}

int terra_tin_level_for_distance(const double *levels, int level_count, double distance, double fov_y_rad,
                                 double viewport_px, double pixel_error) {
    if (!levels || level_count <= 0) return 0;
    if (!(fov_y_rad > 0)) fov_y_rad = 60.0 * 3.14159265358979323846 / 180.0;
    if (!(viewport_px > 0)) viewport_px = 1080;
    if (!(pixel_error > 0)) pixel_error = 1;
    if (!(distance > 0)) return level_count - 1;
    double px_per_m = viewport_px / (2.0 * distance * tan(0.5 * fov_y_rad));
    for (int i = 0; i < level_count; i++)
        if (levels[i] * px_per_m <= pixel_error) return i;
    return level_count - 1;
}
