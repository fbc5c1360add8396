/* A map from 64-bit integers (tick times) to non-negative Py_ssize_t values (a slab index, or a
 * pointer cast), open addressing with linear probing and backward-shift deletion, so no
 * tombstones build up as ticks come and go. The event queue's tick map (_event_core.c) and a
 * Sys's per-tick batches (system/_sys_core.c) both use it. */
#ifndef DTSIM_LONG_MAP_H
#define DTSIM_LONG_MAP_H

#include <Python.h>

typedef struct {
    long long *keys;
    Py_ssize_t *vals; /* LMAP_EMPTY: a free slot */
    Py_ssize_t cap, n; /* cap: a power of two, or 0 before lmap_init */
} LongMap;

#define LMAP_EMPTY ((Py_ssize_t)-1)

static inline size_t lmap_slot(long long k, Py_ssize_t cap) {
    unsigned long long h = (unsigned long long)k * 0x9E3779B97F4A7C15ULL;
    return (size_t)(h >> 32) & (size_t)(cap - 1);
}

/* k's value, or LMAP_EMPTY */
static inline Py_ssize_t lmap_get(const LongMap *m, long long k) {
    if (!m->cap) return LMAP_EMPTY;
    size_t mask = (size_t)m->cap - 1, i = lmap_slot(k, m->cap);
    for (;;) {
        Py_ssize_t v = m->vals[i];
        if (v == LMAP_EMPTY || m->keys[i] == k) return v;
        i = (i + 1) & mask;
    }
}

static inline void lmap_put_nogrow(LongMap *m, long long k, Py_ssize_t v) {
    size_t mask = (size_t)m->cap - 1, i = lmap_slot(k, m->cap);
    while (m->vals[i] != LMAP_EMPTY) i = (i + 1) & mask;
    m->keys[i] = k;
    m->vals[i] = v;
    m->n++;
}

static inline int lmap_init(LongMap *m, Py_ssize_t cap) {
    m->keys = PyMem_Malloc(sizeof(long long) * (size_t)cap);
    m->vals = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)cap);
    if (!m->keys || !m->vals) {
        PyMem_Free(m->keys);
        PyMem_Free(m->vals);
        m->keys = NULL;
        m->vals = NULL;
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < cap; i++) m->vals[i] = LMAP_EMPTY;
    m->cap = cap;
    m->n = 0;
    return 0;
}

/* k -> v for a k not in the map, growing it (from 64 slots) to stay at most half full */
static inline int lmap_put(LongMap *m, long long k, Py_ssize_t v) {
    if (2 * (m->n + 1) > m->cap) {
        LongMap old = *m;
        if (lmap_init(m, old.cap ? old.cap * 2 : 64) < 0) {
            *m = old;
            return -1;
        }
        for (Py_ssize_t i = 0; i < old.cap; i++)
            if (old.vals[i] != LMAP_EMPTY) lmap_put_nogrow(m, old.keys[i], old.vals[i]);
        PyMem_Free(old.keys);
        PyMem_Free(old.vals);
    }
    lmap_put_nogrow(m, k, v);
    return 0;
}

static inline void lmap_del(LongMap *m, long long k) {
    if (!m->cap) return;
    size_t mask = (size_t)m->cap - 1, i = lmap_slot(k, m->cap);
    while (m->keys[i] != k || m->vals[i] == LMAP_EMPTY) {
        if (m->vals[i] == LMAP_EMPTY) return;
        i = (i + 1) & mask;
    }
    /* backward shift: later entries of the probe run move up so that no lookup stops early */
    size_t j = i;
    for (;;) {
        m->vals[i] = LMAP_EMPTY;
        for (;;) {
            j = (j + 1) & mask;
            if (m->vals[j] == LMAP_EMPTY) {
                m->n--;
                return;
            }
            size_t home = lmap_slot(m->keys[j], m->cap);
            /* j's entry may fill i unless its home lies cyclically in (i, j] */
            if (i <= j ? (i < home && home <= j) : (i < home || home <= j)) continue;
            break;
        }
        m->keys[i] = m->keys[j];
        m->vals[i] = m->vals[j];
        i = j;
    }
}

static inline void lmap_free(LongMap *m) {
    PyMem_Free(m->keys);
    PyMem_Free(m->vals);
    m->keys = NULL;
    m->vals = NULL;
    m->cap = m->n = 0;
}

#endif
