/* terra serve ARCHIVE: layer.json and tiles straight from an archive over HTTP (libmicrohttpd). */
#include "cli.h"
#include "terra/archive_io.h"

#include <arpa/inet.h>
#include <getopt.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

typedef struct server {
    terra_archive *archive;
    terra_tms_map map;
    char *layer_json;
    const char *content_type;
    bool verbose;
} server;

static void help(FILE *f) {
    fprintf(f, "Usage: terra serve [OPTIONS] ARCHIVE\n\n"
               "Serves ARCHIVE to Cesium clients: GET /layer.json and GET /{z}/{x}/{y}.terrain. Gzip tiles are\n"
               "sent as stored with Content-Encoding: gzip (decompressed for clients that do not accept\n"
               "gzip); zstd tiles are decompressed. CORS is open. Absent tiles are 404, malformed paths 400.\n"
               "Runs until interrupted (Ctrl-C, SIGTERM).\n\n"
               "Options:\n"
               "  -p, --port N     TCP port (default 8080; 0 picks a free one, printed on start)\n"
               "  --bind ADDR      IPv4 address to listen on (default 127.0.0.1, loopback only)\n"
               "  --threads N      worker threads (default 4)\n"
               "  -v, --verbose    log every request to stderr\n"
               "  -h, --help       this text\n");
}

static enum MHD_Result send_buffer(struct MHD_Connection *c, unsigned code, const void *data, size_t n,
                                   enum MHD_ResponseMemoryMode mode, const char *type, const char *encoding) {
    struct MHD_Response *r = MHD_create_response_from_buffer(n, (void *)(uintptr_t)data, mode);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, "Access-Control-Allow-Origin", "*");
    if (type) MHD_add_response_header(r, "Content-Type", type);
    if (encoding) MHD_add_response_header(r, "Content-Encoding", encoding);
    if (code == MHD_HTTP_OK) MHD_add_response_header(r, "Cache-Control", "public, max-age=3600");
    enum MHD_Result ret = MHD_queue_response(c, code, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result send_text(struct MHD_Connection *c, unsigned code, const char *text) {
    return send_buffer(c, code, text, strlen(text), MHD_RESPMEM_MUST_COPY, "text/plain; charset=utf-8", NULL);
}

/* Parses a decimal number of at most 10 digits; false on anything else. */
static bool parse_uint(const char *s, size_t n, int64_t *out) {
    if (n == 0 || n > 10) return false;
    int64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return false;
        v = v * 10 + (s[i] - '0');
    }
    *out = v;
    return true;
}

/* "/z/x/y.terrain" -> 1 (parsed), 0 (not a tile path), -1 (a tile path that is malformed). */
static int parse_tile_path(const char *url, int *z, int64_t *x, int64_t *y) {
    size_t len = strlen(url);
    const char *suffix = ".terrain";
    size_t sl = strlen(suffix);
    if (len <= sl || strcmp(url + len - sl, suffix) != 0) return 0;
    if (url[0] != '/') return -1;
    const char *p = url + 1, *end = url + len - sl;
    int64_t v[3];
    for (int k = 0; k < 3; k++) {
        const char *q = p;
        while (q < end && *q != '/') q++;
        if ((k < 2 && q == end) || (k == 2 && q != end)) return -1;
        if (!parse_uint(p, (size_t)(q - p), &v[k])) return -1;
        p = q + 1;
    }
    if (v[0] > TERRA_TILE_MAX_LEVEL) return -1;
    *z = (int)v[0];
    *x = v[1];
    *y = v[2];
    return 1;
}

static bool accepts_gzip(struct MHD_Connection *c) {
    const char *ae = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_ACCEPT_ENCODING);
    return ae && strstr(ae, "gzip") != NULL;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                              const char *version, const char *upload_data, size_t *upload_size, void **state) {
    (void)version;
    (void)upload_data;
    server *s = cls;
    if (*state == NULL) { /* first call for this request: headers only */
        static int marker;
        *state = &marker;
        return MHD_YES;
    }
    if (*upload_size) { /* a body we do not want */
        *upload_size = 0;
        return MHD_YES;
    }
    if (s->verbose) fprintf(stderr, "terra serve: %s %s\n", method, url);
    if (!strcmp(method, "OPTIONS")) {
        struct MHD_Response *r = MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
        MHD_add_response_header(r, "Access-Control-Allow-Origin", "*");
        MHD_add_response_header(r, "Access-Control-Allow-Methods", "GET, HEAD, OPTIONS");
        MHD_add_response_header(r, "Access-Control-Allow-Headers", "Accept, Accept-Encoding, Range");
        enum MHD_Result ret = MHD_queue_response(c, MHD_HTTP_NO_CONTENT, r);
        MHD_destroy_response(r);
        return ret;
    }
    if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0)
        return send_text(c, MHD_HTTP_METHOD_NOT_ALLOWED, "only GET, HEAD and OPTIONS\n");
    if (!strcmp(url, "/layer.json"))
        return send_buffer(c, MHD_HTTP_OK, s->layer_json, strlen(s->layer_json), MHD_RESPMEM_PERSISTENT,
                           "application/json", NULL);
    int z;
    int64_t x, y;
    int kind = parse_tile_path(url, &z, &x, &y);
    if (kind == 0) return send_text(c, MHD_HTTP_NOT_FOUND, "not found: try /layer.json or /{z}/{x}/{y}.terrain\n");
    if (kind < 0) return send_text(c, MHD_HTTP_BAD_REQUEST, "malformed tile path: expected /{z}/{x}/{y}.terrain\n");
    terra_tile_key key;
    terra_archive_entry e;
    if (!terra_tms_to_key(&s->map, z, x, y, &key)) return send_text(c, MHD_HTTP_NOT_FOUND, "no such tile\n");
    terra_status st = terra_archive_find(s->archive, key, &e);
    if (st == TERRA_E_NOT_FOUND) return send_text(c, MHD_HTTP_NOT_FOUND, "no such tile\n");
    if (st != TERRA_OK) {
        fprintf(stderr, "terra serve: %s\n", terra_last_error());
        return send_text(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "damaged tile\n");
    }
    if (e.compression == TERRA_COMPRESS_GZIP && accepts_gzip(c)) {
        const uint8_t *view;
        if (terra_archive_view_stored(s->archive, &e, &view) == TERRA_OK)
            return send_buffer(c, MHD_HTTP_OK, view, e.size, MHD_RESPMEM_PERSISTENT, s->content_type, "gzip");
        /* not mapped: copy below */
        uint8_t *buf = malloc(e.size ? e.size : 1);
        if (buf && terra_archive_read_stored(s->archive, &e, buf, e.size) == TERRA_OK)
            return send_buffer(c, MHD_HTTP_OK, buf, e.size, MHD_RESPMEM_MUST_FREE, s->content_type, "gzip");
        free(buf);
        fprintf(stderr, "terra serve: %s\n", terra_last_error());
        return send_text(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "damaged tile\n");
    }
    uint8_t *raw;
    size_t n;
    if (terra_archive_read_entry(s->archive, &e, &raw, &n) != TERRA_OK) {
        fprintf(stderr, "terra serve: %s\n", terra_last_error());
        return send_text(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "damaged tile\n");
    }
    enum MHD_Result r = send_buffer(c, MHD_HTTP_OK, raw, n, MHD_RESPMEM_MUST_COPY, s->content_type, NULL);
    terra_free(raw);
    return r;
}

int cmd_serve(int argc, char **argv) {
    static const struct option opts[] = {{"port", required_argument, 0, 'p'},   {"bind", required_argument, 0, 'b'},
                                         {"threads", required_argument, 0, 't'}, {"verbose", no_argument, 0, 'v'},
                                         {"help", no_argument, 0, 'h'},         {0, 0, 0, 0}};
    long port = 8080, threads = 4;
    const char *bind_addr = "127.0.0.1";
    bool verbose = false;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "p:vh", opts, NULL)) != -1) {
        switch (c) {
        case 'p':
            if (!cli_parse_int(optarg, &port) || port < 0 || port > 65535)
                return cli_usage_error("serve", "--port: expected 0..65535, got '%s'", optarg);
            break;
        case 'b': bind_addr = optarg; break;
        case 't':
            if (!cli_parse_int(optarg, &threads) || threads < 1 || threads > 64)
                return cli_usage_error("serve", "--threads: expected 1..64, got '%s'", optarg);
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
    s.verbose = verbose;
    if (terra_archive_open(argv[optind], NULL, &s.archive) != TERRA_OK) return cli_error("serve", "%s", terra_last_error());
    if (terra_archive_tms_map(s.archive, &s.map) != TERRA_OK ||
        terra_archive_layer_json(s.archive, &s.map, &s.layer_json) != TERRA_OK) {
        int r = cli_error("serve", "%s", terra_last_error());
        terra_archive_close(s.archive);
        return r;
    }
    s.content_type = terra_archive_content_type(s.archive);

    /* Block the stop signals in every thread; the main thread waits for them below. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    struct MHD_Daemon *d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG, (uint16_t)port, NULL,
                                            NULL, handle, &s, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa,
                                            MHD_OPTION_THREAD_POOL_SIZE, (unsigned)threads,
                                            MHD_OPTION_CONNECTION_TIMEOUT, 30u, MHD_OPTION_END);
    if (!d) {
        terra_free(s.layer_json);
        terra_archive_close(s.archive);
        return cli_error("serve", "cannot listen on %s:%ld (port in use?)", bind_addr, port);
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    unsigned actual = info ? info->port : (unsigned)port;
    printf("terra serve: http://%s:%u/layer.json (%llu tiles, %s frame); Ctrl-C stops\n", bind_addr, actual,
           (unsigned long long)terra_archive_get_info(s.archive)->tile_count,
           terra_frame_name(terra_archive_get_info(s.archive)->frame));
    fflush(stdout);
    int sig = 0;
    sigwait(&set, &sig);
    MHD_stop_daemon(d);
    terra_free(s.layer_json);
    terra_archive_close(s.archive);
    fprintf(stderr, "terra serve: stopped (signal %d)\n", sig);
    return EXIT_OK;
}
