/* The HTTP archive reader against a range server on loopback (tests/http_range_server.py): what
 * it reads equals the file, from four threads at once (run under ThreadSanitizer too); what was
 * read once is read again without a request; a host that is not there fails fast with its URL. */
#include "check.h"
#include "terra/http.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char dir[] = "/tmp/terra_test_http_XXXXXX";
static char path[128], url[128];
static pid_t server = -1;
static terra_archive *local, *remote;

static bool start_server(void) {
    char portfile[160], log[160];
    snprintf(portfile, sizeof portfile, "%s/port", dir);
    snprintf(log, sizeof log, "%s/log", dir);
    server = fork();
    if (server == 0) {
        execlp("python3", "python3", TERRA_TESTS_DIR "/http_range_server.py", dir, portfile, log, (char *)NULL);
        _exit(127);
    }
    for (int i = 0; i < 200; i++) {
        FILE *f = fopen(portfile, "r");
        int port = 0;
        if (f && fscanf(f, "%d", &port) == 1 && port > 0) {
            fclose(f);
            snprintf(url, sizeof url, "http://127.0.0.1:%d/a.terra", port);
            return true;
        }
        if (f) fclose(f);
        nanosleep(&(struct timespec){0, 50000000}, NULL);
    }
    return false;
}

typedef struct worker {
    unsigned seed;
    int checked, bad;
} worker;

/* Random entries and payloads through both archives: the same bytes. */
static void *compare(void *arg) {
    worker *w = arg;
    const uint64_t n = terra_archive_get_info(local)->tile_count;
    uint8_t *a = malloc(1 << 20), *b = malloc(1 << 20);
    for (int k = 0; k < 200; k++) {
        w->seed = w->seed * 1103515245u + 12345u;
        const uint64_t i = (w->seed >> 8) % n;
        terra_archive_entry el, er;
        if (terra_archive_entry_at(local, i, &el) != TERRA_OK || terra_archive_entry_at(remote, i, &er) != TERRA_OK ||
            el.key != er.key || el.offset != er.offset || el.size != er.size || el.raw_size != er.raw_size ||
            el.checksum != er.checksum || el.geometric_error != er.geometric_error || el.min_height != er.min_height || terra_archive_read_stored(local, &el, a, 1 << 20) != TERRA_OK ||
            terra_archive_read_stored(remote, &er, b, 1 << 20) != TERRA_OK || memcmp(a, b, el.size) != 0)
            w->bad++;
        w->checked++;
    }
    free(a);
    free(b);
    return NULL;
}

static void reads_equal_the_file(void) {
    const terra_archive_info *L = terra_archive_get_info(local), *R = terra_archive_get_info(remote);
    CHECK(L->tile_count == R->tile_count && L->file_size == R->file_size && L->data_offset == R->data_offset &&
              !strcmp(L->metadata, R->metadata),
          "the header and metadata over HTTP are the file's");
    pthread_t t[4];
    worker w[4];
    for (int i = 0; i < 4; i++) {
        w[i] = (worker){.seed = 17u + (unsigned)i};
        pthread_create(&t[i], NULL, compare, &w[i]);
    }
    int checked = 0, bad = 0;
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        checked += w[i].checked, bad += w[i].bad;
    }
    CHECK(bad == 0, "%d of %d entries or payloads differ over HTTP", bad, checked);
    /* everything again: from the cache (32 MiB holds this archive), no request */
    terra_http_stats before, after;
    terra_http_get_stats(&before);
    for (uint64_t i = 0; i < L->tile_count; i++) {
        terra_archive_entry e;
        static uint8_t buf[1 << 20];
        CHECK(terra_archive_entry_at(remote, i, &e) == TERRA_OK && terra_archive_read_stored(remote, &e, buf, sizeof buf) == TERRA_OK,
              "%s", terra_last_error());
    }
    terra_http_get_stats(&after);
    const uint64_t first_pass = after.requests;
    for (uint64_t i = 0; i < L->tile_count; i++) {
        terra_archive_entry e;
        static uint8_t buf[1 << 20];
        CHECK(terra_archive_entry_at(remote, i, &e) == TERRA_OK && terra_archive_read_stored(remote, &e, buf, sizeof buf) == TERRA_OK);
    }
    terra_http_get_stats(&after);
    CHECK(after.requests == first_pass, "a second pass over every tile made %llu requests",
          (unsigned long long)(after.requests - first_pass));
    printf("  %d random reads on 4 threads equal the file; every tile read: %llu requests, %.2f MB (file %.2f MB)\n",
           checked, (unsigned long long)(first_pass - before.requests), (double)(after.bytes) / 1e6, (double)L->file_size / 1e6);
}

/* Payloads asked for ahead are fetched in the background and then read without a request. */
static void read_ahead(void) {
    terra_archive *a = NULL;
    CHECK(terra_archive_open(url, NULL, &a) == TERRA_OK, "%s", terra_last_error());
    if (!a) return;
    const uint64_t n = terra_archive_get_info(a)->tile_count;
    terra_archive_entry e;
    int asked = 0;
    uint64_t which[200];
    for (uint64_t i = 0; i < n && i < 200; i++)
        if (terra_archive_entry_at(a, i, &e) == TERRA_OK && terra_archive_prefetch(a, &e)) which[asked++] = i;
    CHECK(asked >= 32, "only %d of 200 payloads taken for read-ahead", asked);
    terra_http_stats st, prev = {0};
    for (int k = 0; k < 100; k++) { /* until the read-ahead is done (no request for 0.1 s) */
        nanosleep(&(struct timespec){0, 100000000}, NULL);
        terra_http_get_stats(&st);
        if (k > 0 && st.requests == prev.requests) break;
        prev = st;
    }
    static uint8_t buf[1 << 20];
    for (int i = 0; i < asked; i++)
        CHECK(terra_archive_entry_at(a, which[i], &e) == TERRA_OK && terra_archive_read_stored(a, &e, buf, sizeof buf) == TERRA_OK,
              "%s", terra_last_error());
    terra_http_get_stats(&prev);
    CHECK(prev.requests == st.requests, "%llu requests for %d payloads read ahead",
          (unsigned long long)(prev.requests - st.requests), asked);
    terra_archive_close(a); /* with read-ahead possibly still queued: the thread is stopped and joined */
    printf("  %d payloads read ahead, then read without a request\n", asked);
}

static void clear_failures(void) {
    terra_archive_reader r;
    CHECK(terra_http_reader_open("ftp://127.0.0.1/a.terra", NULL, &r) == TERRA_E_INVALID);
    const time_t t0 = time(NULL);
    terra_status st = terra_http_reader_open("http://127.0.0.1:9/a.terra", &(terra_http_desc){.retries = 1}, &r);
    CHECK(st == TERRA_E_IO && strstr(terra_last_error(), "http://127.0.0.1:9/a.terra") &&
              strstr(terra_last_error(), "bytes 0-65535"),
          "%d: %s", st, terra_last_error());
    CHECK(time(NULL) - t0 < 10, "a closed port took %ld s", (long)(time(NULL) - t0));
    char missing[160];
    snprintf(missing, sizeof missing, "%s.missing", url);
    terra_archive *a = NULL;
    st = terra_archive_open(missing, NULL, &a);
    CHECK(st == TERRA_E_NOT_FOUND && !a && strstr(terra_last_error(), "HTTP 404"), "%d: %s", st, terra_last_error());
}

int main(void) {
    const char *bin = getenv("TERRA_BIN");
    char cmd[512];
    if (!bin || !mkdtemp(dir)) {
        fprintf(stderr, "test_http: TERRA_BIN not set or no temporary directory\n");
        return 1;
    }
    if (system("command -v python3 >/dev/null") != 0) {
        printf("SKIP test_http: python3 not installed\n");
        rmdir(dir);
        return 77;
    }
    snprintf(path, sizeof path, "%s/a.terra", dir);
    snprintf(cmd, sizeof cmd, "'%s' bake -q --levels 4 --area 0,0,1024,1024 --cells 32 '%s'", bin, path);
    int failed = 0;
    if (system(cmd) != 0 || !start_server()) {
        fprintf(stderr, "test_http: no archive or no server (%s)\n", cmd);
        failed = 1;
    } else {
        terra_http_register();
        CHECK(terra_archive_open(path, NULL, &local) == TERRA_OK, "%s", terra_last_error());
        CHECK(terra_archive_open(url, NULL, &remote) == TERRA_OK, "%s", terra_last_error());
        if (local && remote) RUN(reads_equal_the_file);
        RUN(read_ahead);
        RUN(clear_failures);
        terra_archive_close(local);
        terra_archive_close(remote);
        failed = finish();
    }
    if (server > 0) {
        kill(server, SIGTERM);
        waitpid(server, NULL, 0);
    }
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "test_http: could not remove %s\n", dir);
    return failed;
}
