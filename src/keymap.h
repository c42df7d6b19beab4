/* Internal: hash containers keyed by tile keys, allocated once and never per frame.
 *  - key_map: key -> int, open addressing with backward-shift deletion (no tombstones);
 *  - key_set: a set cleared in O(1) by bumping a stamp (entries of older stamps are empty). */
#ifndef TERRA_KEYMAP_H
#define TERRA_KEYMAP_H

#include "terra/core.h"

#include <string.h>

typedef struct key_map {
    terra_tile_key *keys;
    int32_t *vals; /* -1: empty */
    uint32_t mask;
} key_map;

static inline uint32_t hash_key(terra_tile_key k) {
    k ^= k >> 31;
    k *= 0x7fb5d329728ea185ull;
    k ^= k >> 27;
    k *= 0x81dadef4bc2dd44dull;
    k ^= k >> 33;
    return (uint32_t)k;
}

static inline bool map_init(key_map *m, int capacity) {
    uint32_t n = 16;
    while (n < (uint32_t)capacity * 2u) n <<= 1;
    m->keys = terra_alloc(sizeof *m->keys * n);
    m->vals = terra_alloc(sizeof *m->vals * n);
    m->mask = n - 1;
    if (!m->keys || !m->vals) return false;
    for (uint32_t i = 0; i < n; i++) m->vals[i] = -1;
    return true;
}

static inline void map_free(key_map *m) {
    terra_free(m->keys);
    terra_free(m->vals);
}

static inline int32_t map_get(const key_map *m, terra_tile_key k) {
    for (uint32_t i = hash_key(k) & m->mask;; i = (i + 1) & m->mask) {
        if (m->vals[i] < 0) return -1;
        if (m->keys[i] == k) return m->vals[i];
    }
}

static inline void map_put(key_map *m, terra_tile_key k, int32_t v) {
    uint32_t i = hash_key(k) & m->mask;
    while (m->vals[i] >= 0 && m->keys[i] != k) i = (i + 1) & m->mask;
    m->keys[i] = k;
    m->vals[i] = v;
}

/* Removes k, shifting later entries of its run back so lookups stay correct without tombstones. */
static inline void map_del(key_map *m, terra_tile_key k) {
    uint32_t i = hash_key(k) & m->mask;
    while (m->vals[i] >= 0 && m->keys[i] != k) i = (i + 1) & m->mask;
    if (m->vals[i] < 0) return;
    for (uint32_t j = (i + 1) & m->mask;; j = (j + 1) & m->mask) {
        if (m->vals[j] < 0) break;
        uint32_t home = hash_key(m->keys[j]) & m->mask;
        /* move j back to i if its home is not in (i, j] (cyclically) */
        bool stays = (i <= j) ? (home > i && home <= j) : (home > i || home <= j);
        if (!stays) {
            m->keys[i] = m->keys[j];
            m->vals[i] = m->vals[j];
            i = j;
        }
    }
    m->vals[i] = -1;
}

typedef struct key_set {
    terra_tile_key *keys;
    uint32_t *stamps; /* an entry belongs to the set while its stamp is the current one */
    uint32_t mask, stamp;
    int count, capacity;
} key_set;

static inline bool set_init(key_set *s, int capacity) {
    uint32_t n = 16;
    while (n < (uint32_t)capacity * 2u) n <<= 1;
    s->keys = terra_alloc(sizeof *s->keys * n);
    s->stamps = terra_calloc(n, sizeof *s->stamps);
    s->mask = n - 1;
    s->stamp = 1;
    s->capacity = capacity;
    return s->keys && s->stamps;
}

static inline void set_free(key_set *s) {
    terra_free(s->keys);
    terra_free(s->stamps);
}

static inline void set_clear(key_set *s) {
    if (++s->stamp == 0) { /* wrapped: forget every old stamp */
        memset(s->stamps, 0, sizeof *s->stamps * (s->mask + 1));
        s->stamp = 1;
    }
    s->count = 0;
}

static inline bool set_has(const key_set *s, terra_tile_key k) {
    for (uint32_t i = hash_key(k) & s->mask;; i = (i + 1) & s->mask) {
        if (s->stamps[i] != s->stamp) return false;
        if (s->keys[i] == k) return true;
    }
}

/* Adds k; false if it was there already or the set is full. */
static inline bool set_add(key_set *s, terra_tile_key k) {
    if (s->count >= s->capacity) return false;
    uint32_t i = hash_key(k) & s->mask;
    for (; s->stamps[i] == s->stamp; i = (i + 1) & s->mask)
        if (s->keys[i] == k) return false;
    s->stamps[i] = s->stamp;
    s->keys[i] = k;
    s->count++;
    return true;
}

#endif
