/* Shared by the event queue (_event_core.c) and the congestion-aware links (_aware_links.c),
 * which put their hop events straight into the queue's calendar. */
#ifndef DTSIM_EVENT_CORE_H
#define DTSIM_EVENT_CORE_H

#include <Python.h>

#include "_long_map.h"

/* A native event's function: fn(owner, arg, x), 0 or -1 with an exception set. */
typedef int (*dtsim_native_fn)(PyObject *owner, PyObject *arg, long long x);

typedef struct {
    PyObject *cb;   /* the callable; a native event's owner (the event keeps it alive) */
    PyObject *args; /* a tuple; with ``one`` set, the only argument itself (no tuple per event);
                     * a native event's argument, or NULL */
    dtsim_native_fn fn; /* set: a native event, run as fn(cb, args, x) without a Python call */
    long long x;
    int one;
} Ev;

typedef struct {
    long long t;
    Ev *ev;
    Py_ssize_t n, cap, head;
} Tick;

typedef struct {
    PyObject_HEAD
    long long now;
    long long events_processed;
    PyObject *max_events;   /* int or None */
    PyObject *wall_limit_s; /* float or None */
    PyObject *wall_origin;  /* float or None */
    PyObject *on_tick;      /* callable or None */
    Tick *ticks;
    Py_ssize_t nticks, ticks_cap;
    Py_ssize_t *free_slots;
    Py_ssize_t nfree, free_cap;
    Py_ssize_t *heap;
    Py_ssize_t heap_n, heap_cap;
    LongMap map; /* tick time -> slab index */
} Queue;

/* Queue a call of cb(*args) at now + delay, after what that tick holds (new references). */
int dtsim_push_event(Queue *q, long long delay, PyObject *cb, PyObject *args);
/* The same for cb(arg): most events have one argument (a hop's chunk, a Sys's tick), and a
 * tuple made and freed for each was a tenth of the loop's allocations. */
int dtsim_push_event1(Queue *q, long long delay, PyObject *cb, PyObject *arg);
/* The same for an event of C code (a link's free, a hop's arrival, a Sys's batch): fn(owner, arg,
 * x) at its place in the calendar, as a Python callback would run there, without the call. */
int dtsim_push_native(Queue *q, long long delay, dtsim_native_fn fn, PyObject *owner, PyObject *arg, long long x);

/* The queue's type, for a link to check that its queue is one. */
extern PyTypeObject *dtsim_core_type;

/* Adds Link, Chunk and ChunkArrival to the module (_aware_links.c). */
int dtsim_add_aware_links(PyObject *module);

/* Adds Channel, Pairing and noop to the module (_pairing.c). */
int dtsim_add_pairing(PyObject *module);

/* What other extensions (system/_sys_core.c) use of the queue, through the capsule below: its
 * type, to know a queue when they see one, and its calendar. */
typedef struct {
    size_t size; /* sizeof(DtsimCoreAPI) when compiled: another value refuses the capsule */
    PyTypeObject *core_type;
    int (*push_event)(Queue *q, long long delay, PyObject *cb, PyObject *args);
    int (*push_event1)(Queue *q, long long delay, PyObject *cb, PyObject *arg);
    int (*push_native)(Queue *q, long long delay, dtsim_native_fn fn, PyObject *owner, PyObject *arg, long long x);
} DtsimCoreAPI;

#define DTSIM_CORE_API_CAPSULE "network._event_core._C_API"

#endif
