#include "json.h"

#include <pthread.h>
#include <string.h>

static pthread_mutex_t parse_lock = PTHREAD_MUTEX_INITIALIZER;

cJSON *terra_json_parse_length(const char *text, size_t n) {
    if (!text) return NULL;
    pthread_mutex_lock(&parse_lock);
    cJSON *j = cJSON_ParseWithLength(text, n);
    pthread_mutex_unlock(&parse_lock);
    return j;
}

cJSON *terra_json_parse(const char *text) { return text ? terra_json_parse_length(text, strlen(text) + 1) : NULL; }

cJSON *terra_json_parse_whole(const char *text, size_t n, size_t *error_at) {
    /* cJSON skips a NUL as white space, where readers that parse up to the first NUL stop */
    const char *nul = memchr(text, 0, n);
    if (nul) {
        if (error_at) *error_at = (size_t)(nul - text);
        return NULL;
    }
    const char *end = text;
    pthread_mutex_lock(&parse_lock);
    cJSON *j = cJSON_ParseWithLengthOpts(text, n + 1, &end, 1); /* end: after the value, or where it failed */
    pthread_mutex_unlock(&parse_lock);
    if (j && end != text + n) cJSON_Delete(j), j = NULL;
    if (error_at) *error_at = end >= text && end <= text + n ? (size_t)(end - text) : n;
    return j;
}
