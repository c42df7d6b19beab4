/* libterra-http: archives read over HTTP range requests (libcurl), from any static host or CDN.
 *
 * An archive is read by its index, so it needs no tile server: the header and metadata come in the
 * first request (the archive's first 64 KiB), the rest of the index in the second (or, over 16 MiB,
 * in pages as lookups need them), each tile's payload by its own offset and size; what was read is
 * kept in a cache of a stated size; terra_archive_prefetch queues payloads for a thread of the
 * reader's own to fetch ahead (the TIN archive source asks for the children of each tile it
 * decodes). A request that fails (no connection, a
 * reset, a timeout, a stall, a 5xx or 429 answer, a short or mismatched body) is tried again after
 * a pause that doubles each time; after the last try, or at once for other 4xx answers and for a
 * server that ignores ranges, the read fails with a message naming the URL, the range and why.
 * Every payload still passes the archive's checksum, so a damaged answer is never drawn. */
#ifndef TERRA_HTTP_H
#define TERRA_HTTP_H

#include "terra/archive.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct terra_http_desc {
    int timeout_ms;         /* one request, whole; 0 = 30000 */
    int connect_timeout_ms; /* 0 = 5000 */
    int stall_s;            /* a request that receives nothing for this long is abandoned; 0 = 10 */
    int retries;            /* tries after the first; 0 = 4, negative: none */
    int backoff_ms;         /* the first pause between tries, doubled after each; 0 = 100 */
    int page_kib;           /* the first request's size, and the pages of an index over 16 MiB
                               (a smaller one is fetched whole at its first use); 0 = 64 */
    int cache_mib;          /* index pages and payloads kept, besides the first page and a whole
                               index; 0 = 32 */
    bool log;               /* every request to stderr: range, status, bytes, milliseconds */
} terra_http_desc;

/* Opens url (http:// or https://) as an archive reader: one request for its first page, which
 * also tells its size. desc may be NULL. Pass the reader to terra_archive_open_reader. */
TERRA_API terra_status terra_http_reader_open(const char *url, const terra_http_desc *desc, terra_archive_reader *out);

/* Makes terra_archive_open read http:// and https:// paths with terra_http_reader_open, with the
 * defaults above changed by the environment: TERRA_HTTP_TIMEOUT_MS, TERRA_HTTP_RETRIES,
 * TERRA_HTTP_STALL_S, TERRA_HTTP_LOG=1. Call it once, before opening archives. */
TERRA_API void terra_http_register(void);

/* Requests made and body bytes received by every reader of the process so far. */
typedef struct terra_http_stats {
    uint64_t requests, bytes, retries;
} terra_http_stats;
TERRA_API void terra_http_get_stats(terra_http_stats *out);

#ifdef __cplusplus
}
#endif
#endif
