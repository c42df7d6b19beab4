/* terra serve ARCHIVE: layer.json and tiles straight from an archive over HTTP (libmicrohttpd).
 *
 * Hardened against its file and its clients:
 * - The archive is read with pread through one descriptor per opening (whose identity is the
 *   ETag), never mapped: a file truncated or rewritten in place under the server gives read errors
 *   (500), not SIGBUS, and cuts /archive.terra short. A watcher thread stats the path and reopens the
 *   archive when it changes (rename, cp, rsync --inplace); while the changed file cannot be opened
 *   tiles are 503. Requests hold a reference to the opening they started with, and each request
 *   first checks (fstat) that the opened file is unchanged: one truncated or rewritten in place is
 *   503 at once, never a status whose Content-Length the file can no longer fill.
 * - Tiles: a stored or decompressed size over --max-tile-mb is 500; every tile is first held to the
 *   rules every reader applies (inflated to exactly the size the index states, so a bomb is never
 *   sent, and decoded): one they refuse is 500. Gzip payloads go out as stored only to clients that
 *   accept gzip, other clients get them inflated.
 * - Requests: the raw target is checked before libmicrohttpd unescapes or splits it
 *   (cli/serve_request.c): NUL, %00 and any byte outside the tile grammar are 400, more query
 *   parameters than --max-query-params 414. The header fields are judged by terra, not by
 *   libmicrohttpd 0.9 (which joins folded lines, keeps the first of several Content-Length values,
 *   accepts HTTP/1.1 without Host, and sends its own 400 for a bad Content-Length with the status
 *   line twice): a bad head is one 400, and the connection closes.
 * - Connections: kept alive between requests (HTTP/1.1). Capped in all and per client address;
 *   a client over its cap gets room by closing its own connection that has waited longest for a
 *   request, so idle connections cannot lock a client out. A sweeper thread closes any connection
 *   whose request has not fully arrived --request-timeout seconds after it began (after the
 *   connection or the previous response): a byte a second no longer holds a connection for ever.
 *   It is not the watcher's thread, so a reopen however long never holds the sweep up. */
#include "cli.h"
#include "serve_request.h"
#include "terra/archive_io.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

typedef struct server server;

/* What identifies the file's contents well enough to notice a rewrite. */
typedef struct file_id {
    bool exists;
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime, ctime;
} file_id;

/* One opening of the archive file. */
typedef struct generation {
    server *s;
    terra_archive *archive; /* read through fd (a local file), or from the URL */
    terra_tms_map map;
    char *layer_json;
    const char *content_type;
    terra_tile_rules rules; /* every tile sent passes them, as every reader's tiles do */
    int fd;        /* the file as opened, the one descriptor every byte served is read through; -1 for a URL */
    file_id id;    /* of fd when opened */
    char etag[96]; /* /archive.terra's strong entity tag, from id; "" for a URL */
    unsigned refs; /* under server.lock: the server's own, and one per request or response using it */
} generation;

/* One client connection (libmicrohttpd's socket context). */
typedef struct conn {
    struct conn *prev, *next;
    int fd;
    struct sockaddr_storage client;
    double since;   /* when its current request began to arrive: the connection, or the last response */
    bool receiving; /* that request has not fully arrived (or, between requests, not begun) */
    bool cut;       /* shut down: overdue, or closed to make room; no longer counted */
} conn;

enum { MAX_FIELDS = 64 }; /* header fields a request may have; more is 431 */

/* One request: made by the URI log callback from the raw target, before libmicrohttpd touches it. */
typedef struct request {
    serve_request r;
    const char *raw; /* the raw target in libmicrohttpd's buffer and its length as a C string */
    size_t raw_n;
    bool judged;     /* the head has been judged (on the handler's first call) */
    bool close;      /* answered on that first call, after which libmicrohttpd closes the connection */
    serve_field fields[MAX_FIELDS];
    size_t nfields;  /* fields seen, up to one past MAX_FIELDS */
} request;

struct server {
    const char *path;
    bool verbose;
    size_t max_query_params, max_tile_bytes;
    unsigned per_client;
    double request_timeout;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    bool stopping;
    generation *gen; /* NULL while the changed file cannot be opened */
    file_id id;      /* of the file gen was opened from, or of the last failed attempt */
    bool id_known;   /* false: the file changed while it was being opened, so look again */
    conn *conns;
    unsigned long long cut, made_room;
    /* error lines: at most a few a second, the rest counted */
    double log_second;
    unsigned log_lines;
    unsigned long long log_dropped;
};

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* An error line on stderr, at most 5 a second (a client asking for a damaged tile in a loop must
 * not flood the log); the lines held back are counted in the next one. */
static void serve_log(server *s, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
static void serve_vlog(server *s, const char *fmt, va_list ap) {
    char line[600];
    vsnprintf(line, sizeof line, fmt, ap);
    size_t n = strlen(line);
    while (n && line[n - 1] == '\n') line[--n] = 0;
    double t = now_s();
    pthread_mutex_lock(&s->lock);
    if (t - s->log_second >= 1) {
        s->log_second = t;
        s->log_lines = 0;
    }
    bool show = s->log_lines < 5;
    unsigned long long dropped = 0;
    if (show) {
        s->log_lines++;
        dropped = s->log_dropped;
        s->log_dropped = 0;
    } else {
        s->log_dropped++;
    }
    pthread_mutex_unlock(&s->lock);
    if (!show) return;
    if (dropped) fprintf(stderr, "terra serve: (%llu similar lines held back)\n", dropped);
    fprintf(stderr, "terra serve: %s\n", line);
}

static void serve_log(server *s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    serve_vlog(s, fmt, ap);
    va_end(ap);
}

/* libmicrohttpd's own messages (a connection closed mid-request, a client over its cap) go through
 * the same limit: a thousand slow clients must not write a thousand lines. */
static void mhd_log(void *cls, const char *fmt, va_list ap) { serve_vlog(cls, fmt, ap); }

/* stray_lines() reads libmicrohttpd 0.9.75's layout of the head; later versions parse folded lines
 * themselves, and terra does not look for them there */
#if MHD_VERSION <= 0x00097500
static const char obs_fold_caveat[] = "";
#else
static const char obs_fold_caveat[] = " with libmicrohttpd 0.9.75 and earlier (this build's newer one parses\n"
                                      "them itself)";
#endif

static void help(FILE *f) {
    fprintf(f,
            "Usage: terra serve [OPTIONS] ARCHIVE\n\n"
            "Serves ARCHIVE to Cesium clients: GET /layer.json and GET /{z}/{x}/{y}.terrain. Gzip tiles are\n"
            "sent as stored with Content-Encoding: gzip to clients that accept gzip (decompressed for the\n"
            "others); zstd and packed tiles are decompressed. Each tile is first held to the rules every\n"
            "terra reader applies (one they refuse is 500), and the bytes sent are the bytes checked.\n"
            "CORS is open. Absent tiles are 404, malformed requests 400. Runs until interrupted (Ctrl-C,\n"
            "SIGTERM).\n\n"
            "GET /archive.terra is the archive file itself, whole or the byte range asked for (Range:\n"
            "bytes=a-b, a-, -n; 206, or 416 past the end) with a strong ETag; If-Range with another\n"
            "validator (another or weak ETag, a date) gets the whole file (200). It is the origin for a\n"
            "CDN, or for terra reading the archive over HTTP (--archive http://HOST:PORT/archive.terra).\n\n"
            "The archive is read, not mapped: when it is replaced or rewritten in place, the server\n"
            "reopens it; meanwhile requests are 503 (Retry-After: 1), or 500 for a tile that cannot be\n"
            "read, and a response of /archive.terra going out is cut short. Connections are kept alive\n"
            "between requests. Requests with malformed framing (a bad or repeated Content-Length,\n"
            "HTTP/1.1 without Host...) are 400 and closed; so are folded header lines (obs-fold)%s.\n"
            "ARCHIVE may be an http:// or https:// URL (a static host answering range requests): it is\n"
            "read from there, as the environment says (TERRA_HTTP_TIMEOUT_MS, TERRA_HTTP_RETRIES,\n"
            "TERRA_HTTP_STALL_S, TERRA_HTTP_LOG=1), and never reopened.\n\n"
            "Options:\n"
            "  -p, --port N            TCP port (default 8080; 0 picks a free one, printed on start)\n"
            "  --bind ADDR             IPv4 address to listen on (default 127.0.0.1, loopback only)\n"
            "  --threads N             worker threads (default 4)\n"
            "  -v, --verbose           log every request to stderr\n"
            "  -h, --help              this text\n\n"
            "Limits (a request or connection beyond them is refused or closed):\n"
            "  --max-connections N     open connections in all (default 1000; 1..100000)\n"
            "  --max-per-client N      open connections from one client address (default 32; 1..100000);\n"
            "                          one more closes that client's connection that has waited longest\n"
            "                          for a request (refused only when all of them are being answered)\n"
            "  --request-timeout S     seconds a request (request line and headers) may take to arrive,\n"
            "                          counted from the connection or the previous response, not from the\n"
            "                          last byte; the connection is closed after, so it is also how long\n"
            "                          a kept-alive connection may stay idle (default 10; 0.1..3600)\n"
            "  --idle-timeout S        seconds a connection may stay silent, a client not reading its\n"
            "                          response included (default 30; 1..86400)\n"
            "  --max-query-params N    parameters after '?' (default 16; 0..1000); more are 414\n"
            "  --max-tile-mb N         largest tile served, stored or decompressed, in MiB (default 16;\n"
            "                          1..%u); larger ones are 500 and never inflated\n",
            obs_fold_caveat, TERRA_ARCHIVE_MAX_RAW_SIZE >> 20);
}

/* ---- the archive, reopened when the file changes ------------------------------------------- */

/* sb: NULL when the file could not be looked at */
static file_id id_of(const struct stat *sb) {
    file_id id;
    memset(&id, 0, sizeof id);
    if (!sb) return id;
    id.exists = true;
    id.dev = sb->st_dev;
    id.ino = sb->st_ino;
    id.size = sb->st_size;
    id.mtime = sb->st_mtim;
    id.ctime = sb->st_ctim;
    return id;
}

static file_id stat_id(const char *path) {
    struct stat sb;
    return id_of(stat(path, &sb) == 0 ? &sb : NULL);
}

static file_id fd_id(int fd) {
    struct stat sb;
    return id_of(fstat(fd, &sb) == 0 ? &sb : NULL);
}

static bool same_id(const file_id *a, const file_id *b) {
    if (a->exists != b->exists) return false;
    if (!a->exists) return true;
    return a->dev == b->dev && a->ino == b->ino && a->size == b->size && a->mtime.tv_sec == b->mtime.tv_sec &&
           a->mtime.tv_nsec == b->mtime.tv_nsec && a->ctime.tv_sec == b->ctime.tv_sec &&
           a->ctime.tv_nsec == b->ctime.tv_nsec;
}

static void gen_destroy(generation *g) {
    if (!g) return;
    terra_free(g->layer_json);
    terra_archive_close(g->archive);
    if (g->fd >= 0) close(g->fd);
    terra_free(g);
}

/* The archive's reader: pread on the opening's descriptor (never a mapping, which would die of
 * SIGBUS when the file shrinks). */
static terra_status fd_read(void *user, uint64_t offset, void *buf, size_t n) {
    const generation *g = user;
    for (uint8_t *p = buf; n;) {
        const ssize_t r = pread(g->fd, p, n, (off_t)offset);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0)
            return terra_fail(TERRA_E_IO, "%s: read failed at %llu: %s", g->s->path, (unsigned long long)offset,
                              r ? strerror(errno) : "the file ends there (truncated)");
        p += r, n -= (size_t)r, offset += (uint64_t)r;
    }
    return TERRA_OK;
}

/* Opens the archive. A file is opened once: the descriptor its identity (and ETag) is taken from is
 * the one every byte is read through, so a rename in between cannot pair one file's bytes with
 * another's tag. */
static terra_status gen_open(server *s, generation **out) {
    *out = NULL;
    generation *g = terra_calloc(1, sizeof *g);
    if (!g) return terra_fail(TERRA_E_NOMEM, "serve: out of memory");
    g->s = s;
    g->refs = 1;
    g->fd = -1;
    terra_status st = TERRA_OK;
    if (terra_archive_path_is_url(s->path)) { /* a URL is not a file: no fd, no check, no ETag */
        st = terra_archive_open(s->path, NULL, &g->archive);
    } else if ((g->fd = open(s->path, O_RDONLY | O_CLOEXEC)) < 0) {
        st = terra_fail(errno == ENOENT ? TERRA_E_NOT_FOUND : TERRA_E_IO, "%s: cannot open: %s", s->path, strerror(errno));
    } else {
        g->id = fd_id(g->fd);
        snprintf(g->etag, sizeof g->etag, "\"%llx-%llx-%llx.%09ld\"", (unsigned long long)g->id.ino,
                 (unsigned long long)g->id.size, (unsigned long long)g->id.mtime.tv_sec, (long)g->id.mtime.tv_nsec);
        const terra_archive_reader r = {.user = g, .size = (uint64_t)g->id.size, .read = fd_read};
        st = terra_archive_open_reader(s->path, &r, &g->archive);
    }
    terra_archive_layout layout; /* what every reader checks; the rules each tile sent is held to */
    if (st == TERRA_OK && (st = terra_archive_validate(g->archive, NULL, NULL, &layout)) == TERRA_OK) g->rules = layout.rules;
    if (st == TERRA_OK) st = terra_archive_tms_map(g->archive, &g->map);
    if (st == TERRA_OK) st = terra_archive_layer_json(g->archive, &g->map, &g->layer_json);
    if (st) {
        gen_destroy(g);
        return st;
    }
    g->content_type = terra_archive_content_type(g->archive);
    *out = g;
    return TERRA_OK;
}

/* Whether the opened file is still as opened: false once it is truncated or rewritten in place
 * (its size or times changed), which the watcher notices only on its next tick. */
static bool gen_unchanged(const generation *g) {
    if (g->fd < 0) return true;
    file_id now = fd_id(g->fd);
    return same_id(&now, &g->id);
}

static generation *gen_acquire(server *s) {
    pthread_mutex_lock(&s->lock);
    generation *g = s->gen;
    if (g) g->refs++;
    pthread_mutex_unlock(&s->lock);
    return g;
}

static void gen_release(generation *g) {
    if (!g) return;
    server *s = g->s;
    pthread_mutex_lock(&s->lock);
    bool last = --g->refs == 0;
    pthread_mutex_unlock(&s->lock);
    if (last) gen_destroy(g);
}

static void gen_release_cb(void *g) { gen_release(g); }

/* Reopens the archive when its file is no longer the one opened (or last tried). Watcher thread. */
static void check_file(server *s) {
    file_id id = stat_id(s->path);
    if (s->id_known && same_id(&id, &s->id)) return;
    generation *g = NULL;
    terra_status st = id.exists ? gen_open(s, &g) : terra_fail(TERRA_E_NOT_FOUND, "%s: no such file", s->path);
    /* A file that fails to open is tried again once it changes again; one that changed while it
     * was being opened (a copy in progress) is looked at again on the next tick. */
    file_id after = stat_id(s->path);
    s->id = id;
    s->id_known = same_id(&after, &id);
    pthread_mutex_lock(&s->lock);
    generation *old = s->gen;
    s->gen = g;
    pthread_mutex_unlock(&s->lock);
    gen_release(old);
    if (st == TERRA_OK)
        fprintf(stderr, "terra serve: %s changed: reopened (%llu tiles)\n", s->path,
                (unsigned long long)terra_archive_get_info(g->archive)->tile_count);
    else if (s->id_known)
        serve_log(s, "%s changed and cannot be read (%s): tiles are 503 until it can", s->path, terra_last_error());
}

/* ---- connections --------------------------------------------------------------------------- */

static bool same_client(const struct sockaddr_storage *a, const struct sockaddr_storage *b) {
    if (a->ss_family != b->ss_family) return false;
    if (a->ss_family == AF_INET)
        return ((const struct sockaddr_in *)a)->sin_addr.s_addr == ((const struct sockaddr_in *)b)->sin_addr.s_addr;
    if (a->ss_family == AF_INET6)
        return !memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr, &((const struct sockaddr_in6 *)b)->sin6_addr,
                       sizeof(struct in6_addr));
    return true; /* no address to tell clients apart: one client */
}

static void cut_conn(conn *k) {
    /* the socket stays open until libmicrohttpd closes it, which it does on the EOF */
    shutdown(k->fd, SHUT_RDWR);
    k->cut = true;
}

/* Under s->lock, k just linked: a client over --max-per-client makes room by losing its connection
 * that has waited longest for a request (idle between requests, or still sending one), or, when
 * every other one is being answered, the new one. A client holding idle connections therefore never
 * locks itself (or others on its address, such as every loopback client) out. */
static void admit(server *s, conn *k) {
    unsigned n = 0;
    conn *oldest = NULL;
    for (conn *o = s->conns; o; o = o->next) {
        if (o->cut || !same_client(&o->client, &k->client)) continue;
        n++;
        if (o != k && o->receiving && (!oldest || o->since < oldest->since)) oldest = o;
    }
    if (n <= s->per_client) return;
    cut_conn(oldest ? oldest : k);
    s->made_room++;
}

static void notify_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                              enum MHD_ConnectionNotificationCode code) {
    server *s = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        conn *k = calloc(1, sizeof *k);
        if (!k || !ci) {
            free(k);
            *socket_context = NULL;
            return;
        }
        k->fd = ci->connect_fd;
        k->since = now_s();
        k->receiving = true;
        const union MHD_ConnectionInfo *ai = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        if (ai && ai->client_addr) {
            const sa_family_t family = ai->client_addr->sa_family;
            memcpy(&k->client, ai->client_addr,
                   family == AF_INET6 ? sizeof(struct sockaddr_in6)
                   : family == AF_INET ? sizeof(struct sockaddr_in)
                                       : sizeof(sa_family_t));
        }
        pthread_mutex_lock(&s->lock);
        k->next = s->conns;
        if (s->conns) s->conns->prev = k;
        s->conns = k;
        admit(s, k);
        pthread_mutex_unlock(&s->lock);
        *socket_context = k;
    } else if (code == MHD_CONNECTION_NOTIFY_CLOSED && *socket_context) {
        /* libmicrohttpd closes the socket after this: once unlinked here, the watcher never touches it */
        conn *k = *socket_context;
        pthread_mutex_lock(&s->lock);
        if (k->prev) k->prev->next = k->next;
        else s->conns = k->next;
        if (k->next) k->next->prev = k->prev;
        pthread_mutex_unlock(&s->lock);
        free(k);
        *socket_context = NULL;
    }
}

static conn *conn_of(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? ci->socket_context : NULL;
}

/* Under s->lock: waits up to `seconds` or until the server stops. */
static void wait_locked(server *s, double seconds) {
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    long ns = until.tv_nsec + (long)(seconds * 1e9);
    until.tv_sec += ns / 1000000000L;
    until.tv_nsec = ns % 1000000000L;
    pthread_cond_timedwait(&s->wake, &s->lock, &until);
}

/* The sweeper: closes connections whose request is overdue. A thread of its own, so that a reopen
 * that takes long (a large archive's validation and layer.json, a file that blocks) never holds it
 * up. */
static void *sweep(void *arg) {
    server *s = arg;
    const double tick = s->request_timeout / 4 < 0.25 ? s->request_timeout / 4 : 0.25;
    pthread_mutex_lock(&s->lock);
    while (!s->stopping) {
        const double t = now_s();
        for (conn *k = s->conns; k; k = k->next)
            if (k->receiving && !k->cut && t - k->since > s->request_timeout) {
                cut_conn(k);
                s->cut++;
            }
        wait_locked(s, tick);
    }
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

/* The watcher: notices a changed archive and reopens it, every 0.25 s. */
static void *watch(void *arg) {
    server *s = arg;
    pthread_mutex_lock(&s->lock);
    while (!s->stopping) {
        pthread_mutex_unlock(&s->lock);
        check_file(s);
        pthread_mutex_lock(&s->lock);
        if (!s->stopping) wait_locked(s, 0.25);
    }
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

/* ---- requests ------------------------------------------------------------------------------ */

#if MHD_VERSION < 0x01000000
/* libmicrohttpd 0.9 judges the first Content-Length itself before the handler sees the request, and
 * answers a malformed one with its status line and headers twice (0.9.75 builds its error response
 * twice). This field, added before the client's, is the one it finds and takes (0: no content);
 * terra judges the client's in judge() and answers any request with content at once, closing the
 * connection, so libmicrohttpd never has to read content. Recognized by its address. */
static const char content_length_0[] = "0";
#endif

/* Sees the request target as sent, before libmicrohttpd splits off and unescapes the query, and
 * before it parses the header fields. */
static void *uri_log(void *cls, const char *uri, struct MHD_Connection *c) {
    server *s = cls;
    request *q = calloc(1, sizeof *q);
    if (!q) return NULL; /* the handler closes the connection */
    q->raw = uri;
    q->raw_n = strlen(uri);
    serve_request_target(uri, q->raw_n, s->max_query_params, &q->r);
#if MHD_VERSION < 0x01000000
    /* run in the connection's thread, in its processing, as the handler is */
    if (MHD_set_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH, content_length_0) != MHD_YES) {
        free(q);
        return NULL;
    }
    /* libmicrohttpd 0.9 parses every query parameter into the connection's 32 KB pool next, and
     * when the pool runs out (~500 parameters) it neither answers nor closes: the connection hung
     * for its whole timeout. terra reads no parameter, and the verdict above is taken: end the
     * query in libmicrohttpd's (writable) buffer so that nothing is parsed. */
    char *query = strchr(uri, '?');
    if (query && query[1]) query[1] = 0;
#else
    (void)c;
#endif
    return q;
}

static void request_completed(void *cls, struct MHD_Connection *c, void **state, enum MHD_RequestTerminationCode toe) {
    server *s = cls;
    (void)toe;
    free(*state);
    *state = NULL;
    /* a kept-alive connection starts waiting for its next request */
    conn *k = conn_of(c);
    if (k) {
        pthread_mutex_lock(&s->lock);
        k->since = now_s();
        k->receiving = true;
        pthread_mutex_unlock(&s->lock);
    }
}

static void request_arrived(server *s, struct MHD_Connection *c) {
    conn *k = conn_of(c);
    if (!k) return;
    pthread_mutex_lock(&s->lock);
    k->receiving = false;
    pthread_mutex_unlock(&s->lock);
}

static enum MHD_Result queue(struct MHD_Connection *c, unsigned code, struct MHD_Response *r, const char *type,
                             const char *encoding) {
    if (!r) return MHD_NO;
    MHD_add_response_header(r, "Access-Control-Allow-Origin", "*");
    if (type) MHD_add_response_header(r, "Content-Type", type);
    if (encoding) MHD_add_response_header(r, "Content-Encoding", encoding);
    if (code == MHD_HTTP_OK) {
        MHD_add_response_header(r, "Cache-Control", "public, max-age=3600");
        MHD_add_response_header(r, "Vary", "Accept-Encoding");
    }
    enum MHD_Result ret = MHD_queue_response(c, code, r);
    MHD_destroy_response(r);
    return ret;
}

static struct MHD_Response *text_response(const char *text) {
    return MHD_create_response_from_buffer(strlen(text), (void *)(uintptr_t)text, MHD_RESPMEM_PERSISTENT);
}

static enum MHD_Result send_text(struct MHD_Connection *c, unsigned code, const char *text) {
    return queue(c, code, text_response(text), "text/plain; charset=utf-8", NULL);
}

/* 503: the archive is changing; a client may try again in a second. */
static enum MHD_Result send_unavailable(struct MHD_Connection *c, const char *text) {
    struct MHD_Response *r = text_response(text);
    if (r) MHD_add_response_header(r, MHD_HTTP_HEADER_RETRY_AFTER, "1");
    return queue(c, MHD_HTTP_SERVICE_UNAVAILABLE, r, "text/plain; charset=utf-8", NULL);
}

/* Sends a buffer from terra_alloc, freed with the response. */
static enum MHD_Result send_owned(struct MHD_Connection *c, uint8_t *data, size_t n, const char *type,
                                  const char *encoding) {
    struct MHD_Response *r = MHD_create_response_from_buffer_with_free_callback(n, data, terra_free);
    if (!r) terra_free(data);
    return queue(c, MHD_HTTP_OK, r, type, encoding);
}

static enum MHD_Result send_tile(server *s, generation *g, struct MHD_Connection *c, const serve_request *r) {
    terra_tile_key key;
    terra_archive_entry e;
    /* log lines name the tile by the request's path, z/x/y, as the archive's messages do */
    char req[80];
    snprintf(req, sizeof req, "/%d/%lld/%lld.terrain", r->z, (long long)r->x, (long long)r->y);
    if (!terra_tms_to_key(&g->map, r->z, r->x, r->y, &key)) return send_text(c, MHD_HTTP_NOT_FOUND, "no such tile\n");
    terra_status st = terra_archive_find(g->archive, key, &e);
    if (st == TERRA_E_NOT_FOUND) return send_text(c, MHD_HTTP_NOT_FOUND, "no such tile\n");
    if (st != TERRA_OK) {
        serve_log(s, "%s: %s", req, terra_last_error());
        return send_text(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "unreadable tile\n");
    }
    if (e.size > s->max_tile_bytes || (e.compression != TERRA_COMPRESS_NONE && e.raw_size > s->max_tile_bytes)) {
        serve_log(s, "%s: %u bytes stored, %u decompressed: over the limit of %zu (--max-tile-mb)", req, e.size,
                  e.raw_size, s->max_tile_bytes);
        return send_text(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "tile over the server's size limit\n");
    }
    /* a tile the readers refuse (info --verify names it) is not sent: read once, decompressed to
     * exactly its stated size (a bomb costs at most that) and decoded by the archive's rules; the
     * bytes sent are the bytes checked, as stored (gzip to a client that takes it) or decompressed */
    const char *ae = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_ACCEPT_ENCODING);
    const bool gzip = e.compression == TERRA_COMPRESS_GZIP && serve_accepts_gzip(ae, ae ? strlen(ae) : 0);
    uint8_t *data = NULL;
    size_t n = 0;
    st = terra_archive_check_tile_bytes(g->archive, &e, &g->rules, &g->map, NULL, gzip, &data, &n);
    if (st == TERRA_E_NOMEM) return send_unavailable(c, "out of memory\n");
    if (st != TERRA_OK) {
        serve_log(s, "%s: %s", req, terra_last_error());
        return send_text(c, MHD_HTTP_INTERNAL_SERVER_ERROR, st == TERRA_E_IO ? "unreadable tile\n" : "damaged tile\n");
    }
    return send_owned(c, data, n, g->content_type, gzip ? "gzip" : NULL);
}

/* /archive.terra: the file itself, whole or the one range asked for, read through the opening
 * (a local file, or the URL this server reads from), so it can be the origin of a CDN or of
 * another terra reading archives over HTTP. */
typedef struct file_part {
    generation *g;
    uint64_t first;
} file_part;

static ssize_t read_part(void *cls, uint64_t pos, char *buf, size_t max) {
    file_part *f = cls;
    const uint64_t size = terra_archive_get_info(f->g->archive)->file_size;
    const uint64_t at = f->first + pos;
    if (at >= size) return MHD_CONTENT_READER_END_OF_STREAM;
    const size_t n = max < size - at ? max : (size_t)(size - at);
    if (terra_archive_read_bytes(f->g->archive, at, buf, n) != TERRA_OK) {
        serve_log(f->g->s, "archive bytes at %llu: %s", (unsigned long long)at, terra_last_error());
        return MHD_CONTENT_READER_END_WITH_ERROR;
    }
    /* bytes read after the file was rewritten in place would splice two files under one ETag: the
     * response ends short instead (the connection closes, which is how HTTP says a body was cut) */
    if (!gen_unchanged(f->g)) {
        serve_log(f->g->s, "/archive.terra: %s changed while byte %llu went out: the response is cut short",
                  f->g->s->path, (unsigned long long)at);
        return MHD_CONTENT_READER_END_WITH_ERROR;
    }
    return (ssize_t)n;
}

static void free_part(void *cls) {
    file_part *f = cls;
    gen_release(f->g);
    terra_free(f);
}

static enum MHD_Result send_archive(generation *g, struct MHD_Connection *c) {
    const uint64_t size = terra_archive_get_info(g->archive)->file_size;
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_RANGE);
    const char *ir = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_IF_RANGE);
    const char *etag = g->etag[0] ? g->etag : NULL;
    if (!serve_if_range(ir, ir ? strlen(ir) : 0, etag)) h = NULL; /* another version than the client has */
    uint64_t first = 0, last = size ? size - 1 : 0;
    const serve_range range = serve_request_range(h, h ? strlen(h) : 0, size, &first, &last);
    char cr[96];
    if (range == SERVE_RANGE_UNSATISFIABLE) {
        gen_release(g);
        struct MHD_Response *r = MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
        snprintf(cr, sizeof cr, "bytes */%llu", (unsigned long long)size);
        if (r) MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_RANGE, cr);
        return queue(c, MHD_HTTP_RANGE_NOT_SATISFIABLE, r, NULL, NULL);
    }
    file_part *f = terra_alloc(sizeof *f);
    struct MHD_Response *r = NULL;
    if (f) {
        *f = (file_part){g, first};
        r = MHD_create_response_from_callback(size ? last - first + 1 : 0, 64 * 1024, read_part, f, free_part);
        if (!r) terra_free(f);
    }
    if (!r) {
        gen_release(g);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_ACCEPT_RANGES, "bytes");
    MHD_add_response_header(r, "Access-Control-Expose-Headers", "Content-Range, Accept-Ranges, Content-Length, ETag");
    if (etag) MHD_add_response_header(r, MHD_HTTP_HEADER_ETAG, etag);
    if (range == SERVE_RANGE_PART) {
        snprintf(cr, sizeof cr, "bytes %llu-%llu/%llu", (unsigned long long)first, (unsigned long long)last,
                 (unsigned long long)size);
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_RANGE, cr);
    }
    return queue(c, range == SERVE_RANGE_PART ? MHD_HTTP_PARTIAL_CONTENT : MHD_HTTP_OK, r, "application/octet-stream",
                 NULL);
}

static enum MHD_Result collect_field(void *cls, enum MHD_ValueKind kind, const char *key, size_t key_size,
                                     const char *value, size_t value_size) {
    (void)kind;
    request *q = cls;
#if MHD_VERSION < 0x01000000
    if (value == content_length_0) return MHD_YES; /* terra's own, not the client's */
#endif
    if (q->nfields < MAX_FIELDS)
        q->fields[q->nfields] = (serve_field){.name = key, .name_n = key_size, .value = value, .value_n = value_size};
    return ++q->nfields <= MAX_FIELDS ? MHD_YES : MHD_NO;
}

#if MHD_VERSION <= 0x00097500 /* the layout read in 0.9.75's source, not assumed of later ones */
/* libmicrohttpd 0.9 parses the head in place: it starts at the method, is header_size bytes long, and
 * each field's name and value point into it. A line it joined to the field before (obs-fold: it moves
 * that field elsewhere and concatenates the line without a space) or a line cut short at a NUL leaves
 * bytes there outside every field. */
static bool stray_lines(const request *q, struct MHD_Connection *c, const char *method, const char *version) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE);
    if (!ci || !method || !version) return false;
    const char *fields = version + strlen(version); /* the request line's end */
    const uintptr_t head = (uintptr_t)method, end = head + ci->header_size;
    if ((uintptr_t)fields <= head || (uintptr_t)fields > end) return false; /* not laid out so: nothing to judge */
    return serve_request_stray(fields, (size_t)(end - (uintptr_t)fields), q->fields, q->nfields);
}
#endif

/* The handler's first call, once the head is in: the verdict on the request (q->r), and whether it
 * is answered at once and its connection closed (q->close): a malformed head, or content to skip. */
static void judge(request *q, struct MHD_Connection *c, const char *url, const char *method, const char *version) {
    serve_request *r = &q->r;
#if MHD_VERSION < 0x01000000
    /* libmicrohttpd 0.9 passes the target as a C string: a NUL sent inside it cuts it short (the
     * old server answered /0/0/0.terrain%00 and /0/0/0.terrain<NUL>junk with the tile). The target
     * ends where the version begins; a gap after the string means bytes after a NUL. */
    if (url == q->raw && version && *version) {
        uintptr_t gap = (uintptr_t)version - ((uintptr_t)q->raw + q->raw_n + 1);
        if (gap != 0 && gap < 65536) {
            r->route = SERVE_ROUTE_ERROR;
            r->status = MHD_HTTP_BAD_REQUEST;
            r->message = "malformed request target: a NUL byte\n";
        }
    }
#else
    (void)url;
#endif
    serve_request_method(method, r);
    MHD_get_connection_values_n(c, MHD_HEADER_KIND, collect_field, q);
    serve_head h = {.status = MHD_HTTP_REQUEST_HEADER_FIELDS_TOO_LARGE, .message = "too many header fields\n"};
    bool ok = q->nfields <= MAX_FIELDS && serve_request_head(q->fields, q->nfields, version && !strcmp(version, "HTTP/1.0"), &h);
#if MHD_VERSION <= 0x00097500
    if (ok && stray_lines(q, c, method, version)) {
        ok = false;
        h.status = MHD_HTTP_BAD_REQUEST;
        h.message = "malformed header: a line that is not a field (folded onto the one before, obs-fold)\n";
    }
#endif
    q->close = !ok || h.content;
    if (!ok) {
        r->route = SERVE_ROUTE_ERROR;
        r->status = h.status;
        r->message = h.message;
    }
}

static enum MHD_Result answer(server *s, const request *q, struct MHD_Connection *c, const char *url,
                              const char *method) {
    const serve_request *r = &q->r;
    if (s->verbose)
        fprintf(stderr, "terra serve: %s %s -> %u%s\n", method, url, r->route == SERVE_ROUTE_ERROR ? r->status : 200,
                q->close ? " (closed)" : "");
    switch (r->route) {
    case SERVE_ROUTE_ERROR: return send_text(c, r->status, r->message);
    case SERVE_ROUTE_OPTIONS: {
        struct MHD_Response *resp = MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
        if (resp) {
            MHD_add_response_header(resp, "Access-Control-Allow-Methods", "GET, HEAD, OPTIONS");
            MHD_add_response_header(resp, "Access-Control-Allow-Headers", "Accept, Accept-Encoding, Range, If-Range");
        }
        return queue(c, MHD_HTTP_NO_CONTENT, resp, NULL, NULL);
    }
    default: break;
    }
    generation *g = gen_acquire(s);
    if (!g) return send_unavailable(c, "the archive is being replaced; try again\n");
    if (!gen_unchanged(g)) { /* truncated or rewritten in place: the watcher reopens it within 0.25 s */
        gen_release(g);
        return send_unavailable(c, "the archive changed; try again\n");
    }
    if (r->route == SERVE_ROUTE_LAYER_JSON) {
        /* the response holds the opening until it is sent */
        struct MHD_Response *resp = MHD_create_response_from_buffer_with_free_callback_cls(
            strlen(g->layer_json), g->layer_json, gen_release_cb, g);
        if (!resp) gen_release(g);
        return queue(c, MHD_HTTP_OK, resp, "application/json", NULL);
    }
    if (r->route == SERVE_ROUTE_ARCHIVE) return send_archive(g, c); /* the response holds the opening */
    enum MHD_Result ret = send_tile(s, g, c, r);
    gen_release(g);
    return ret;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                              const char *version, const char *upload_data, size_t *upload_size, void **state) {
    (void)upload_data;
    (void)upload_size; /* a request with content is answered on the first call, before any is read */
    server *s = cls;
    request *q = *state;
    if (!q) return MHD_NO; /* no memory for the request: close */
    if (!q->judged) {
        q->judged = true;
        request_arrived(s, c);
        judge(q, c, url, method, version);
        /* libmicrohttpd 0.9 closes the connection after a response queued on this first call: a
         * request is answered on the next one (the request complete, with no content) so that its
         * connection is kept alive, unless it is to be closed anyway. */
        if (!q->close) return MHD_YES;
    }
    return answer(s, q, c, url, method);
}

/* ---- the command --------------------------------------------------------------------------- */

/* Stops the sweeper and the watcher (may be NULL) and waits for them. */
static void stop_threads(server *s, pthread_t *sweeper, pthread_t *watcher) {
    pthread_mutex_lock(&s->lock);
    s->stopping = true;
    pthread_cond_broadcast(&s->wake);
    pthread_mutex_unlock(&s->lock);
    pthread_join(*sweeper, NULL);
    if (watcher) pthread_join(*watcher, NULL);
}

int cmd_serve(int argc, char **argv) {
    enum { O_BIND = 256, O_THREADS, O_MAXCONN, O_PERCLIENT, O_REQTIMEOUT, O_IDLE, O_QUERY, O_TILEMB };
    static const struct option opts[] = {{"port", required_argument, 0, 'p'},
                                         {"bind", required_argument, 0, O_BIND},
                                         {"threads", required_argument, 0, O_THREADS},
                                         {"max-connections", required_argument, 0, O_MAXCONN},
                                         {"max-per-client", required_argument, 0, O_PERCLIENT},
                                         {"request-timeout", required_argument, 0, O_REQTIMEOUT},
                                         {"idle-timeout", required_argument, 0, O_IDLE},
                                         {"max-query-params", required_argument, 0, O_QUERY},
                                         {"max-tile-mb", required_argument, 0, O_TILEMB},
                                         {"verbose", no_argument, 0, 'v'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    long port = 8080, threads = 4, max_conn = 1000, per_client = 32, idle = 30, max_query = 16, tile_mb = 16;
    double req_timeout = 10;
    const char *bind_addr = "127.0.0.1";
    bool verbose = false;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "p:vh", opts, NULL)) != -1) {
        switch (c) {
        case 'p':
            if (!cli_opt_long("serve", "--port", optarg, 0, 65535, &port)) return EXIT_USAGE;
            break;
        case O_BIND: bind_addr = optarg; break;
        case O_THREADS:
            if (!cli_opt_long("serve", "--threads", optarg, 1, 64, &threads)) return EXIT_USAGE;
            break;
        case O_MAXCONN:
            if (!cli_opt_long("serve", "--max-connections", optarg, 1, 100000, &max_conn)) return EXIT_USAGE;
            break;
        case O_PERCLIENT:
            if (!cli_opt_long("serve", "--max-per-client", optarg, 1, 100000, &per_client)) return EXIT_USAGE;
            break;
        case O_REQTIMEOUT:
            if (!cli_opt_double("serve", "--request-timeout", optarg, "seconds", 0.1, 3600, &req_timeout))
                return EXIT_USAGE;
            break;
        case O_IDLE:
            if (!cli_opt_long("serve", "--idle-timeout", optarg, 1, 86400, &idle)) return EXIT_USAGE;
            break;
        case O_QUERY:
            if (!cli_opt_long("serve", "--max-query-params", optarg, 0, 1000, &max_query)) return EXIT_USAGE;
            break;
        case O_TILEMB:
            /* no archive holds a larger tile (terra/archive.h) */
            if (!cli_opt_long("serve", "--max-tile-mb", optarg, 1, TERRA_ARCHIVE_MAX_RAW_SIZE >> 20, &tile_mb))
                return EXIT_USAGE;
            break;
        case 'v': verbose = true; break;
        case 'h': help(stdout); return EXIT_OK;
        default: return cli_usage_error("serve", "unknown option");
        }
    }
    if (optind != argc - 1) return cli_usage_error("serve", "expected one ARCHIVE");
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)port);
    if (inet_pton(AF_INET, bind_addr, &sa.sin_addr) != 1)
        return cli_usage_error("serve", "--bind: '%s' is not an IPv4 address", bind_addr);

    server s;
    memset(&s, 0, sizeof s);
    s.path = argv[optind];
    s.verbose = verbose;
    s.max_query_params = (size_t)max_query;
    s.max_tile_bytes = (size_t)tile_mb << 20;
    s.per_client = (unsigned)per_client;
    s.request_timeout = req_timeout;
    pthread_mutex_init(&s.lock, NULL);
    pthread_cond_init(&s.wake, NULL);
    s.id = stat_id(s.path);
    s.id_known = true;
    if (gen_open(&s, &s.gen) != TERRA_OK) {
        int r = cli_error("serve", "%s", terra_last_error());
        pthread_cond_destroy(&s.wake);
        pthread_mutex_destroy(&s.lock);
        return r;
    }
    const terra_archive_info *I = terra_archive_get_info(s.gen->archive);
    unsigned long long tiles = (unsigned long long)I->tile_count;
    const char *frame = terra_frame_name(I->frame);

    /* Block the stop signals in every thread; the main thread waits for them below. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    /* one option pair a line; the logger first, so that it receives every message */
    struct MHD_Daemon *d = MHD_start_daemon(
        MHD_USE_AUTO_INTERNAL_THREAD | MHD_USE_ERROR_LOG, (uint16_t)port, NULL, NULL, handle, &s,
        MHD_OPTION_EXTERNAL_LOGGER, mhd_log, &s,
        MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa,
        MHD_OPTION_THREAD_POOL_SIZE, (unsigned)threads,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned)max_conn,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)idle,
        MHD_OPTION_URI_LOG_CALLBACK, uri_log, &s,
        MHD_OPTION_NOTIFY_COMPLETED, request_completed, &s,
        MHD_OPTION_NOTIFY_CONNECTION, notify_connection, &s,
        MHD_OPTION_END);
    pthread_t watcher, sweeper;
    const bool sweeping = d && pthread_create(&sweeper, NULL, sweep, &s) == 0;
    const bool watching = sweeping && pthread_create(&watcher, NULL, watch, &s) == 0;
    if (!watching) {
        if (sweeping) stop_threads(&s, &sweeper, NULL);
        if (d) MHD_stop_daemon(d);
        gen_release(s.gen);
        pthread_cond_destroy(&s.wake);
        pthread_mutex_destroy(&s.lock);
        if (d) return cli_error("serve", "cannot start a thread");
        return cli_error("serve", "cannot listen on %s:%ld (port in use?)", bind_addr, port);
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    unsigned actual = info ? info->port : (unsigned)port;
    printf("terra serve: http://%s:%u/layer.json (%llu tiles, %s frame); Ctrl-C stops\n", bind_addr, actual, tiles,
           frame);
    fflush(stdout);
    int sig = 0;
    sigwait(&set, &sig);
    MHD_stop_daemon(d);
    stop_threads(&s, &sweeper, &watcher);
    gen_release(s.gen);
    pthread_cond_destroy(&s.wake);
    pthread_mutex_destroy(&s.lock);
    fprintf(stderr, "terra serve: stopped (signal %d)\n", sig);
    if (s.cut)
        fprintf(stderr, "terra serve: %llu connections closed without a whole request within --request-timeout\n",
                s.cut);
    if (s.made_room)
        fprintf(stderr, "terra serve: %llu connections closed over --max-per-client (the client's longest waiting)\n",
                s.made_room);
    return EXIT_OK;
}
