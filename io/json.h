/* libterra-io internal: cJSON's parse behind one lock. cJSON_Parse writes a process-wide error
 * pointer on every call, so two threads parsing at once race (serve answers layer.json on any of
 * its threads); terra's own parses go through this. */
#ifndef TERRA_IO_JSON_H
#define TERRA_IO_JSON_H

#include "terra/core.h"

#include <cjson/cJSON.h>

/* cJSON_Parse(text), or NULL for NULL text. */
TERRA_INTERNAL cJSON *terra_json_parse(const char *text);
/* cJSON_ParseWithLength(text, n). */
TERRA_INTERNAL cJSON *terra_json_parse_length(const char *text, size_t n);
/* The n bytes at text (text[n] = 0) as one JSON value with nothing after it but white space, and no
 * NUL byte anywhere (cJSON would skip one as white space, where terra_json_parse stops at it); NULL
 * otherwise, with *error_at (may be NULL) the byte where the text stops being that (a NUL: the
 * first). */
TERRA_INTERNAL cJSON *terra_json_parse_whole(const char *text, size_t n, size_t *error_at);

#endif
