/* Archives over HTTP range requests (libcurl). See terra/http.h. */
#include "terra/http.h"

#include <curl/curl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define MAX_HANDLES 16    /* idle easy handles kept (each keeps its connection open) */
#define PREFETCH_QUEUE 64 /* payloads waiting to be read ahead; more are not asked for */

typedef struct span { /* bytes held: the first page, the index, index pages, payloads */
    uint64_t start;
    size_t n;     /* 0: an empty entry */
    uint8_t *data;
    uint64_t used;
    bool pinned;  /* the first page and the whole index: never evicted */
} span;

typedef struct http_reader {
    char *url;
    terra_http_desc d;
    size_t page_bytes, cache_bytes, held;
    uint64_t size, data_offset; /* the index ends at data_offset, the payloads begin */
    const uint8_t *first;       /* the first page (a pinned span) */
    size_t first_n;
    _Atomic(const uint8_t *) index; /* the whole index from the file's start, once fetched (pinned) */
    pthread_mutex_t lock;       /* the spans and the idle handles */
    pthread_mutex_t index_lock; /* held while the whole index is fetched, so it is fetched once */
    span *spans;
    int nspans;
    uint64_t clock;
    CURL *idle[MAX_HANDLES];
    int nidle;
    double down_until; /* after a request failed every try: reads fail at once until then */
    char down_why[320];
    /* read-ahead: payloads asked for by prefetch, fetched by one thread of the reader's own */
    struct {
        uint64_t off[PREFETCH_QUEUE];
        size_t n[PREFETCH_QUEUE];
        int head, count;
        bool started, stop;
        pthread_t thread;
        pthread_cond_t wake;
    } ahead;
} http_reader;

#define DOWN_MS 10000.0 /* how long a host that failed every try is left alone */

#define WHOLE_INDEX_MAX ((uint64_t)16 << 20) /* an index up to this size is fetched whole, at once */

static atomic_ullong stat_requests, stat_bytes, stat_retries;
static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static bool curl_ok;

static void curl_init(void) { curl_ok = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK; }

void terra_http_get_stats(terra_http_stats *out) {
    out->requests = atomic_load(&stat_requests);
    out->bytes = atomic_load(&stat_bytes);
    out->retries = atomic_load(&stat_retries);
}

/* ---- one request --------------------------------------------------------------------------- */

typedef struct body {
    uint8_t *buf;
    size_t cap, n;
    bool overflow;
    bool have_range;
    uint64_t first, last, total; /* from Content-Range */
} body;

static size_t on_body(char *p, size_t size, size_t nmemb, void *user) {
    body *b = user;
    const size_t n = size * nmemb;
    if (n > b->cap - b->n) { /* more than asked for: a server that ignores the range */
        b->overflow = true;
        return 0;
    }
    memcpy(b->buf + b->n, p, n);
    b->n += n;
    return n;
}

static size_t on_header(char *p, size_t size, size_t nmemb, void *user) {
    body *b = user;
    const size_t n = size * nmemb;
    char line[256];
    const size_t m = n < sizeof line - 1 ? n : sizeof line - 1;
    memcpy(line, p, m);
    line[m] = 0;
    if (!strncmp(line, "HTTP/", 5)) b->have_range = false; /* a new response (after a redirect) */
    unsigned long long f, l, t;
    if (!strncasecmp(line, "content-range:", 14) && sscanf(line + 14, " bytes %llu-%llu/%llu", &f, &l, &t) == 3) {
        b->first = f, b->last = l, b->total = t;
        b->have_range = true;
    }
    return n;
}

static CURL *take_handle(http_reader *r) {
    pthread_mutex_lock(&r->lock);
    CURL *h = r->nidle ? r->idle[--r->nidle] : NULL;
    pthread_mutex_unlock(&r->lock);
    return h ? h : curl_easy_init();
}

static void give_handle(http_reader *r, CURL *h) {
    pthread_mutex_lock(&r->lock);
    if (r->nidle < MAX_HANDLES) r->idle[r->nidle++] = h, h = NULL;
    pthread_mutex_unlock(&r->lock);
    if (h) curl_easy_cleanup(h);
}

static void nap_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Reads bytes first..first+n-1 into buf (n > 0). `open`: the first request, the size not yet known,
 * the answer may be shorter than n (a file smaller than a page); *got receives the bytes read and
 * r->size the total. Retries as terra/http.h says. */
static terra_status fetch(http_reader *r, uint64_t first, size_t n, uint8_t *buf, size_t *got, bool open) {
    pthread_mutex_lock(&r->lock);
    const bool down = now_ms() < r->down_until;
    char down_why[sizeof r->down_why];
    memcpy(down_why, r->down_why, sizeof down_why);
    pthread_mutex_unlock(&r->lock);
    if (down) /* one stalled or unreachable host must not cost every tile a round of tries */
        return terra_fail(TERRA_E_IO, "%s: reading bytes %" PRIu64 "-%" PRIu64 " not tried: %s", r->url, first,
                          first + n - 1, down_why);
    const int tries = 1 + (r->d.retries < 0 ? 0 : r->d.retries);
    long pause = r->d.backoff_ms;
    char why[300] = "";
    terra_status kind = TERRA_E_IO;
    for (int t = 0; t < tries; t++) {
        if (t > 0) {
            atomic_fetch_add(&stat_retries, 1);
            nap_ms(pause);
            pause *= 2;
        }
        CURL *h = take_handle(r);
        if (!h) return terra_fail(TERRA_E_NOMEM, "%s: out of memory for a request", r->url);
        char range[64];
        snprintf(range, sizeof range, "%" PRIu64 "-%" PRIu64, first, first + n - 1);
        body b = {.buf = buf, .cap = n};
        char errbuf[CURL_ERROR_SIZE] = "";
        curl_easy_reset(h);
        curl_easy_setopt(h, CURLOPT_URL, r->url);
        curl_easy_setopt(h, CURLOPT_RANGE, range);
        curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 1L);
        curl_easy_setopt(h, CURLOPT_MAXREDIRS, 8L);
        curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
        curl_easy_setopt(h, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
        curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)r->d.timeout_ms);
        curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)r->d.connect_timeout_ms);
        curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
        curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, (long)r->d.stall_s);
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
        curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
        curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
        curl_easy_setopt(h, CURLOPT_HEADERDATA, &b);
        curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
        curl_easy_setopt(h, CURLOPT_USERAGENT, "terra");
        const double t0 = now_ms();
        CURLcode cc = curl_easy_perform(h);
        long code = 0;
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
        give_handle(r, h);
        atomic_fetch_add(&stat_requests, 1);
        atomic_fetch_add(&stat_bytes, b.n);
        if (r->d.log)
            fprintf(stderr, "terra http: GET %s bytes=%s -> %ld, %zu bytes, %.0f ms%s%s\n", r->url, range, code, b.n,
                    now_ms() - t0, cc != CURLE_OK ? ": " : "", cc != CURLE_OK ? curl_easy_strerror(cc) : "");
        bool retry = true;
        if (b.overflow) {
            snprintf(why, sizeof why, "the server sent more than the %zu bytes asked for (HTTP %ld): it ignores range "
                     "requests, which an archive read over HTTP needs", n, code);
            kind = TERRA_E_UNSUPPORTED, retry = false;
        } else if (cc != CURLE_OK) {
            snprintf(why, sizeof why, "%s", errbuf[0] ? errbuf : curl_easy_strerror(cc));
        } else if (code >= 500 || code == 429 || code == 408) {
            snprintf(why, sizeof why, "HTTP %ld", code);
        } else if (code == 200 && first == 0 && open) { /* the whole file: fine when it fits the page */
            r->size = b.n;
            *got = b.n;
            return TERRA_OK;
        } else if (code == 200) {
            snprintf(why, sizeof why, "HTTP 200 to a range request: the server ignores ranges, which an archive read "
                     "over HTTP needs");
            kind = TERRA_E_UNSUPPORTED, retry = false;
        } else if (code != 206) {
            snprintf(why, sizeof why, "HTTP %ld", code);
            kind = code == 404 || code == 410 ? TERRA_E_NOT_FOUND : code == 416 ? TERRA_E_CORRUPT : TERRA_E_IO;
            retry = false;
        } else if (!b.have_range || b.first != first || b.last < first || b.last - first + 1 != b.n ||
                   (open ? b.n > n : b.n != n) || b.total == 0 || (!open && b.total != r->size)) {
            if (b.have_range && !open && b.total != r->size) {
                snprintf(why, sizeof why, "the archive changed on the server (%" PRIu64 " bytes, was %" PRIu64 ")",
                         b.total, r->size);
                kind = TERRA_E_CORRUPT, retry = false;
            } else {
                snprintf(why, sizeof why, "a short or mismatched answer (%zu bytes, Content-Range %s%" PRIu64 "-%" PRIu64
                         "/%" PRIu64 ")", b.n, b.have_range ? "" : "missing ", b.first, b.last, b.total);
            }
        } else {
            if (open) r->size = b.total;
            *got = b.n;
            return TERRA_OK;
        }
        if (!retry) break;
    }
    if (kind == TERRA_E_IO) { /* the host, not the request: left alone for a while */
        pthread_mutex_lock(&r->lock);
        r->down_until = now_ms() + DOWN_MS;
        snprintf(r->down_why, sizeof r->down_why, "a read failed every try %.0f s ago or less (%s)", DOWN_MS / 1000, why);
        pthread_mutex_unlock(&r->lock);
    }
    return terra_fail(kind, "%s: reading bytes %" PRIu64 "-%" PRIu64 " failed%s: %s", r->url, first, first + n - 1,
                      kind == TERRA_E_IO && tries > 1 ? " after every try" : "", why);
}

/* ---- what is held ------------------------------------------------------------------------ */

/* Whether [off, off+n) lies in a span held; copies it then. */
static bool cached(http_reader *r, uint64_t off, void *buf, size_t n) {
    bool hit = false;
    pthread_mutex_lock(&r->lock);
    for (int i = 0; i < r->nspans && !hit; i++) {
        span *p = &r->spans[i];
        if (p->n && off >= p->start && off + n <= p->start + p->n) {
            memcpy(buf, p->data + (off - p->start), n);
            p->used = ++r->clock;
            hit = true;
        }
    }
    pthread_mutex_unlock(&r->lock);
    return hit;
}

/* Keeps data (malloc'd, n bytes at start; taken over): in an empty entry or in place of the least
 * recently used ones while the bytes held are over the cache's size. */
static void keep(http_reader *r, uint64_t start, uint8_t *data, size_t n, bool pinned) {
    pthread_mutex_lock(&r->lock);
    span *slot = NULL;
    for (;;) {
        span *lru = NULL;
        slot = NULL;
        for (int i = 0; i < r->nspans; i++) {
            span *p = &r->spans[i];
            if (!p->n) slot = slot ? slot : p;
            else if (!p->pinned && (!lru || p->used < lru->used)) lru = p;
        }
        if (slot && (pinned || r->held + n <= r->cache_bytes)) break;
        if (!lru) break;
        r->held -= lru->n;
        free(lru->data);
        *lru = (span){0};
    }
    if (slot) {
        *slot = (span){.start = start, .n = n, .data = data, .used = ++r->clock, .pinned = pinned};
        r->held += n;
    } else {
        free(data); /* larger than the whole cache: read, not kept */
    }
    pthread_mutex_unlock(&r->lock);
}

/* Fetches [start, start+n) and keeps it. */
static terra_status fetch_kept(http_reader *r, uint64_t start, size_t n) {
    uint8_t *data = malloc(n);
    if (!data) return terra_fail(TERRA_E_NOMEM, "%s: out of memory for %zu bytes", r->url, n);
    size_t got = 0;
    terra_status st = fetch(r, start, n, data, &got, false);
    if (st) free(data);
    else keep(r, start, data, n, false);
    return st;
}

/* A read within the index: the whole index, fetched once, when it is small enough; else the
 * aligned pages the read touches. */
static terra_status index_read(http_reader *r, uint64_t off, uint8_t *buf, size_t n) {
    if (r->data_offset <= WHOLE_INDEX_MAX && r->data_offset > r->first_n) {
        /* one span from the file's start: the first page copied, the rest fetched */
        pthread_mutex_lock(&r->index_lock);
        terra_status st = TERRA_OK;
        if (!cached(r, off, buf, n)) {
            uint8_t *all = malloc((size_t)r->data_offset);
            size_t got = 0;
            st = all ? TERRA_OK : terra_fail(TERRA_E_NOMEM, "%s: out of memory for the index", r->url);
            if (st == TERRA_OK) {
                memcpy(all, r->first, r->first_n);
                st = fetch(r, r->first_n, (size_t)(r->data_offset - r->first_n), all + r->first_n, &got, false);
            }
            if (st) free(all);
            else keep(r, 0, all, (size_t)r->data_offset, true), atomic_store(&r->index, all);
        }
        pthread_mutex_unlock(&r->index_lock);
        if (st || cached(r, off, buf, n)) return st;
    }
    while (n) { /* a read may straddle two pages */
        const uint64_t start = off / r->page_bytes * r->page_bytes;
        const uint64_t end = start + r->page_bytes < r->size ? start + r->page_bytes : r->size;
        const size_t k = off + n < end ? n : (size_t)(end - off);
        if (!cached(r, off, buf, k)) {
            terra_status st = fetch_kept(r, start, (size_t)(end - start));
            if (st) return st;
            if (!cached(r, off, buf, k)) return terra_fail(TERRA_E_NOMEM, "%s: index page not kept", r->url);
        }
        buf += k, off += k, n -= k;
    }
    return TERRA_OK;
}

static terra_status http_read(void *user, uint64_t off, void *buf, size_t n) {
    http_reader *r = user;
    /* the header, metadata and index lookups without the lock: both spans never change or go */
    const uint8_t *index = atomic_load(&r->index);
    if (off + n <= r->first_n || (index && off + n <= r->data_offset)) {
        memcpy(buf, (off + n <= r->first_n ? r->first : index) + off, n);
        return TERRA_OK;
    }
    if (n == 0 || cached(r, off, buf, n)) return TERRA_OK;
    if (off + n <= r->data_offset) return index_read(r, off, buf, n);
    /* payloads (and anything else): exactly what is asked, kept (the archive source may decode a
     * tile again, after its own cache let it go) */
    uint8_t *data = malloc(n);
    if (!data) return terra_fail(TERRA_E_NOMEM, "%s: out of memory for %zu bytes", r->url, n);
    size_t got = 0;
    terra_status st = fetch(r, off, n, data, &got, false);
    if (st == TERRA_OK) {
        memcpy(buf, data, n);
        keep(r, off, data, n, false);
    } else {
        free(data);
    }
    return st;
}

/* ---- read-ahead ------------------------------------------------------------------------------ */

static void *ahead_main(void *arg) {
    http_reader *r = arg;
    pthread_mutex_lock(&r->lock);
    for (;;) {
        while (!r->ahead.stop && r->ahead.count == 0) pthread_cond_wait(&r->ahead.wake, &r->lock);
        if (r->ahead.stop) break;
        const uint64_t off = r->ahead.off[r->ahead.head];
        const size_t n = r->ahead.n[r->ahead.head];
        r->ahead.head = (r->ahead.head + 1) % PREFETCH_QUEUE;
        r->ahead.count--;
        pthread_mutex_unlock(&r->lock);
        uint8_t *scratch = malloc(n);
        if (scratch && !cached(r, off, scratch, n)) (void)http_read(r, off, scratch, n); /* kept by the read */
        free(scratch);
        pthread_mutex_lock(&r->lock);
    }
    pthread_mutex_unlock(&r->lock);
    return NULL;
}

static bool http_prefetch(void *user, uint64_t off, size_t n) {
    http_reader *r = user;
    if (n == 0 || off + n <= r->data_offset || n > r->cache_bytes / 4) return false;
    pthread_mutex_lock(&r->lock);
    bool queued = false;
    if (!r->ahead.started && !r->ahead.stop)
        r->ahead.started = pthread_create(&r->ahead.thread, NULL, ahead_main, r) == 0, r->ahead.stop = !r->ahead.started;
    if (r->ahead.started && r->ahead.count < PREFETCH_QUEUE && now_ms() >= r->down_until) {
        const int at = (r->ahead.head + r->ahead.count) % PREFETCH_QUEUE;
        r->ahead.off[at] = off, r->ahead.n[at] = n;
        r->ahead.count++;
        queued = true;
        pthread_cond_signal(&r->ahead.wake);
    }
    pthread_mutex_unlock(&r->lock);
    return queued;
}

static void http_close(void *user) {
    http_reader *r = user;
    if (!r) return;
    pthread_mutex_lock(&r->lock);
    r->ahead.stop = true;
    pthread_cond_signal(&r->ahead.wake);
    const bool started = r->ahead.started;
    pthread_mutex_unlock(&r->lock);
    if (started) pthread_join(r->ahead.thread, NULL);
    pthread_cond_destroy(&r->ahead.wake);
    for (int i = 0; i < r->nidle; i++) curl_easy_cleanup(r->idle[i]);
    for (int i = 0; r->spans && i < r->nspans; i++) free(r->spans[i].data);
    free(r->spans);
    free(r->url);
    pthread_mutex_destroy(&r->lock);
    pthread_mutex_destroy(&r->index_lock);
    free(r);
}

terra_status terra_http_reader_open(const char *url, const terra_http_desc *desc, terra_archive_reader *out) {
    *out = (terra_archive_reader){0};
    if (!terra_archive_path_is_url(url)) return terra_fail(TERRA_E_INVALID, "%s: not an http:// or https:// URL", url);
    pthread_once(&curl_once, curl_init);
    if (!curl_ok) return terra_fail(TERRA_E_UNSUPPORTED, "%s: libcurl failed to initialise", url);
    http_reader *r = calloc(1, sizeof *r);
    if (!r) return terra_fail(TERRA_E_NOMEM, "http: out of memory");
    if (desc) r->d = *desc;
    terra_http_desc *d = &r->d;
    if (d->timeout_ms <= 0) d->timeout_ms = 30000;
    if (d->connect_timeout_ms <= 0) d->connect_timeout_ms = 5000;
    if (d->stall_s <= 0) d->stall_s = 10;
    if (d->retries == 0) d->retries = 4;
    if (d->backoff_ms <= 0) d->backoff_ms = 100;
    if (d->page_kib <= 0) d->page_kib = 64;
    if (d->cache_mib <= 0) d->cache_mib = 32;
    r->page_bytes = (size_t)d->page_kib << 10;
    r->cache_bytes = (size_t)d->cache_mib << 20;
    r->nspans = 4096;
    pthread_mutex_init(&r->lock, NULL);
    pthread_mutex_init(&r->index_lock, NULL);
    pthread_cond_init(&r->ahead.wake, NULL);
    r->url = strdup(url);
    r->spans = calloc((size_t)r->nspans, sizeof *r->spans);
    uint8_t *first = malloc(r->page_bytes);
    terra_status st = r->url && r->spans && first ? TERRA_OK : terra_fail(TERRA_E_NOMEM, "http: out of memory");
    size_t got = 0;
    if (st == TERRA_OK) st = fetch(r, 0, r->page_bytes, first, &got, true);
    if (st) {
        free(first);
        http_close(r);
        return st;
    }
    /* the first page is the header, the metadata and the index's start: the header says where the
     * index ends (the archive checks the header; a wrong offset only sends reads the other way) */
    if (got >= 40 && !memcmp(first, TERRA_ARCHIVE_MAGIC, 8))
        for (int i = 7; i >= 0; i--) r->data_offset = r->data_offset << 8 | first[32 + i];
    if (r->data_offset > r->size) r->data_offset = r->size;
    keep(r, 0, first, got, true);
    r->first = first, r->first_n = got;
    *out = (terra_archive_reader){.user = r, .size = r->size, .read = http_read, .close = http_close,
                                  .prefetch = http_prefetch};
    return TERRA_OK;
}

/* ---- terra_archive_open's URLs --------------------------------------------------------------- */

static terra_http_desc env_desc;

static int env_int(const char *name) {
    const char *v = getenv(name);
    return v && *v ? atoi(v) : 0;
}

static terra_status open_url(const char *url, terra_archive_reader *reader) {
    return terra_http_reader_open(url, &env_desc, reader);
}

void terra_http_register(void) {
    env_desc = (terra_http_desc){.timeout_ms = env_int("TERRA_HTTP_TIMEOUT_MS"),
                                 .retries = env_int("TERRA_HTTP_RETRIES"),
                                 .stall_s = env_int("TERRA_HTTP_STALL_S"),
                                 .log = env_int("TERRA_HTTP_LOG") > 0};
    const char *none = getenv("TERRA_HTTP_RETRIES");
    if (none && !strcmp(none, "0")) env_desc.retries = -1; /* 0 from the environment: no retries */
    terra_archive_set_url_opener(open_url);
}
