/* The event core of network/event_queue.py in C: the same calendar (one FIFO list of events per
 * tick, a heap of the ticks that have one), the same (time, insertion) order, the same budgets.
 *
 * Why C: an analytical run is some five events per message, and in Python the loop, the heap and
 * the two schedule calls of every link hop are a fifth of the run. The Python class stays the
 * reference and the fallback (no compiler at install, or DTSIM_PURE_PYTHON=1); a property test
 * holds the two to the same order on random programs.
 *
 * Layout: `ticks` is a slab of per-tick event arrays, reused; `heap` holds slab indices ordered
 * by tick; `map` finds a tick's slab by its time (open addressing, linear probing, deletion by
 * backward shift). A tick being run stays in `map` until its last event has run, so events
 * scheduled for it meanwhile join it; `head` is how many of its events have run.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <limits.h>

#include "_event_core.h"

/* An array of *cap elements of elem bytes, doubled (or first elements when empty): the new array
 * and *cap updated, or NULL with MemoryError and both left as they were. */
static void *grow(void *buf, Py_ssize_t *cap, Py_ssize_t first, size_t elem) {
    Py_ssize_t n = *cap ? *cap * 2 : first;
    void *b = PyMem_Realloc(buf, elem * (size_t)n);
    if (!b) return PyErr_NoMemory();
    *cap = n;
    return b;
}

/* -- the heap of ticks -------------------------------------------------------------------------- */

static int heap_push(Queue *q, Py_ssize_t idx) {
    if (q->heap_n == q->heap_cap) {
        Py_ssize_t *h = grow(q->heap, &q->heap_cap, 64, sizeof *h);
        if (!h) return -1;
        q->heap = h;
    }
    Py_ssize_t *h = q->heap;
    Tick *tk = q->ticks;
    long long t = tk[idx].t;
    Py_ssize_t i = q->heap_n++;
    while (i > 0) {
        Py_ssize_t p = (i - 1) >> 1;
        if (tk[h[p]].t <= t) break;
        h[i] = h[p];
        i = p;
    }
    h[i] = idx;
    return 0;
}

static Py_ssize_t heap_pop(Queue *q) {
    Py_ssize_t *h = q->heap;
    Tick *tk = q->ticks;
    Py_ssize_t top = h[0], last = h[--q->heap_n], n = q->heap_n, i = 0;
    long long t = tk[last].t;
    for (;;) {
        Py_ssize_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && tk[h[c + 1]].t < tk[h[c]].t) c++;
        if (tk[h[c]].t >= t) break;
        h[i] = h[c];
        i = c;
    }
    if (n) h[i] = last;
    return top;
}

/* -- scheduling --------------------------------------------------------------------------------- */

static Py_ssize_t new_tick(Queue *q, long long t) {
    Py_ssize_t idx;
    if (q->nfree) {
        idx = q->free_slots[--q->nfree];
    } else {
        if (q->nticks == q->ticks_cap) {
            Tick *tk = grow(q->ticks, &q->ticks_cap, 64, sizeof *tk);
            if (!tk) return -1;
            q->ticks = tk;
        }
        idx = q->nticks++;
        q->ticks[idx].ev = NULL;
        q->ticks[idx].cap = 0;
    }
    Tick *tk = &q->ticks[idx];
    tk->t = t;
    tk->n = tk->head = 0;
    if (lmap_put(&q->map, t, idx) < 0 || heap_push(q, idx) < 0) return -1;
    return idx;
}

/* A released slab entry keeps its event array for the next tick up to this many events; a larger
 * one is freed. Kept whole, every entry grew to the largest tick it ever held: a direct all-reduce
 * of 512 NPUs (all of a step's link frees in one tick) left 78 MB of arrays for ticks of a few events. */
#define TICK_KEEP_EVENTS 32

static void release_tick(Queue *q, Py_ssize_t idx) {
    lmap_del(&q->map, q->ticks[idx].t);
    if (q->ticks[idx].cap > TICK_KEEP_EVENTS) {
        PyMem_Free(q->ticks[idx].ev);
        q->ticks[idx].ev = NULL;
        q->ticks[idx].cap = 0;
    }
    if (q->nfree == q->free_cap) {
        Py_ssize_t *f = grow(q->free_slots, &q->free_cap, 64, sizeof *f);
        if (!f) {  /* keep the slab entry unused rather than fail: it is only memory */
            PyErr_Clear();
            PyMem_Free(q->ticks[idx].ev);
            q->ticks[idx].ev = NULL;
            q->ticks[idx].cap = 0;
            return;
        }
        q->free_slots = f;
    }
    q->free_slots[q->nfree++] = idx;
}

/* SimulationLimitError for a time past 2^63 ns, from network.event_queue (imported on this path only) */
static int time_overflow(long long now, PyObject *delay) {
    PyObject *mod = PyImport_ImportModule("network.event_queue");
    PyObject *err = mod ? PyObject_CallMethod(mod, "_time_overflow_error", "LO", now, delay) : NULL;
    Py_XDECREF(mod);
    if (err) {
        PyErr_SetObject((PyObject *)Py_TYPE(err), err);
        Py_DECREF(err);
    }
    return -1;
}

/* Steals nothing: takes new references to cb and args (args may be NULL for a native event). */
static int push(Queue *q, long long delay, PyObject *cb, PyObject *args, int one, dtsim_native_fn fn, long long x) {
    if (delay > 0 && q->now > LLONG_MAX - delay) {
        PyObject *d = PyLong_FromLongLong(delay);
        if (d) {
            time_overflow(q->now, d);
            Py_DECREF(d);
        }
        return -1;
    }
    long long t = q->now + delay;
    Py_ssize_t idx = lmap_get(&q->map, t);
    if (idx < 0 && (idx = new_tick(q, t)) < 0) return -1;
    Tick *tk = &q->ticks[idx];
    if (tk->n == tk->cap) {
        Ev *ev = grow(tk->ev, &tk->cap, 4, sizeof *ev);
        if (!ev) return -1;
        tk->ev = ev;
    }
    Ev *e = &tk->ev[tk->n];
    e->cb = Py_NewRef(cb);
    e->args = Py_XNewRef(args);
    e->one = one;
    e->fn = fn;
    e->x = x;
    tk->n++;
    return 0;
}

int dtsim_push_event(Queue *q, long long delay, PyObject *cb, PyObject *args) {
    return push(q, delay, cb, args, 0, NULL, 0);
}

int dtsim_push_event1(Queue *q, long long delay, PyObject *cb, PyObject *arg) {
    return push(q, delay, cb, arg, 1, NULL, 0);
}

int dtsim_push_native(Queue *q, long long delay, dtsim_native_fn fn, PyObject *owner, PyObject *arg, long long x) {
    return push(q, delay, owner, arg, 0, fn, x);
}

static int as_delay(Queue *q, PyObject *o, long long *out) {
    long long d = PyLong_AsLongLong(o);
    if (d == -1 && PyErr_Occurred()) {
        if (PyErr_ExceptionMatches(PyExc_OverflowError)) {
            PyErr_Clear();
            return time_overflow(q->now, o);
        }
        return -1;
    }
    *out = d;
    return 0;
}

static PyObject *Queue_schedule(Queue *q, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs < 2) {
        PyErr_SetString(PyExc_TypeError, "schedule(delay_ns, callback, *args)");
        return NULL;
    }
    long long d;
    if (as_delay(q, args[0], &d) < 0) return NULL;
    if (nargs == 3) {
        if (push(q, d, args[1], args[2], 1, NULL, 0) < 0) return NULL;
        Py_RETURN_NONE;
    }
    PyObject *tup = PyTuple_New(nargs - 2);
    if (!tup) return NULL;
    for (Py_ssize_t i = 2; i < nargs; i++) {
        Py_INCREF(args[i]);
        PyTuple_SET_ITEM(tup, i - 2, args[i]);
    }
    int r = dtsim_push_event(q, d, args[1], tup);
    Py_DECREF(tup);
    if (r < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *Queue_schedule_two(Queue *q, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 6 || !PyTuple_Check(args[2]) || !PyTuple_Check(args[5])) {
        PyErr_SetString(PyExc_TypeError,
                        "schedule_two(delay_a, callback_a, args_a, delay_b, callback_b, args_b), args as tuples");
        return NULL;
    }
    long long da, db;
    if (as_delay(q, args[0], &da) < 0 || as_delay(q, args[3], &db) < 0) return NULL;
    if (dtsim_push_event(q, da, args[1], args[2]) < 0 || dtsim_push_event(q, db, args[4], args[5]) < 0) return NULL;
    Py_RETURN_NONE;
}

static Py_ssize_t Queue_len(Queue *q) {
    Py_ssize_t s = 0;
    for (Py_ssize_t k = 0; k < q->heap_n; k++) {
        Tick *tk = &q->ticks[q->heap[k]];
        s += tk->n - tk->head;
    }
    return s;
}

/* -- running ------------------------------------------------------------------------------------ */

/* clock() as a float; -1 with an exception set when it fails */
static double read_clock(PyObject *clock) {
    PyObject *r = PyObject_CallNoArgs(clock);
    if (!r) return -1.0;
    double v = PyFloat_AsDouble(r);
    Py_DECREF(r);
    return v;
}

/* _run(limit, deadline, clock, every, next_tick) -> (status, next_tick): status 0 done, 1 the
 * event budget, 2 the wall budget. limit < 0: none; clock None: no wall budget, else deadline is
 * in clock()'s seconds and read every 64 events; every 0: no progress hook. Events of a tick not
 * yet run stay queued when the run stops early (a budget or an exception). */
static PyObject *Queue_run_loop(Queue *q, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "_run(limit, deadline, clock, every, next_tick)");
        return NULL;
    }
    long long limit = PyLong_AsLongLong(args[0]);
    double deadline = PyFloat_AsDouble(args[1]);
    PyObject *clock = args[2] == Py_None ? NULL : args[2];
    long long every = PyLong_AsLongLong(args[3]);
    long long next_tick = PyLong_AsLongLong(args[4]);
    if (PyErr_Occurred()) return NULL;
    long long n = q->events_processed;
    int status = 0;
    Py_ssize_t idx = 0;
    /* a reference of our own: the hook may clear on_tick while it runs */
    PyObject *tick = every && q->on_tick && q->on_tick != Py_None ? Py_NewRef(q->on_tick) : NULL;
    while (q->heap_n) {
        idx = heap_pop(q);
        q->now = q->ticks[idx].t;
        for (;;) {
            Tick *tk = &q->ticks[idx]; /* re-read: a callback may grow the slab or this tick */
            if (tk->head == tk->n) break;
            Ev e = tk->ev[tk->head++];
            if (e.fn) {
                int ok = e.fn(e.cb, e.args, e.x);
                Py_DECREF(e.cb);
                Py_XDECREF(e.args);
                if (ok < 0) goto error;
            } else {
                PyObject *res = e.one ? PyObject_CallOneArg(e.cb, e.args) : PyObject_Call(e.cb, e.args, NULL);
                Py_DECREF(e.cb);
                Py_DECREF(e.args);
                if (!res) goto error;
                Py_DECREF(res);
            }
            n++;
            if (limit >= 0 && n >= limit) {
                tk = &q->ticks[idx];
                if (tk->head < tk->n || q->heap_n) {
                    status = 1;
                    goto halt;
                }
            }
            if (clock && !(n & 0x3F)) {
                double now_s = read_clock(clock);
                if (now_s == -1.0 && PyErr_Occurred()) goto error;
                if (now_s > deadline) {
                    status = 2;
                    goto halt;
                }
            }
            if (tick && n == next_tick) {
                next_tick += every;
                q->events_processed = n;
                PyObject *r = PyObject_CallFunction(tick, "LL", q->now, n);
                if (!r) goto error;
                Py_DECREF(r);
            }
        }
        release_tick(q, idx);
    }
    q->events_processed = n;
    Py_XDECREF(tick);
    return Py_BuildValue("iL", 0, next_tick);
halt:
    q->events_processed = n;
    Py_XDECREF(tick);
    if (heap_push(q, idx) < 0) return NULL;
    return Py_BuildValue("iL", status, next_tick);
error:  /* the tick keeps its events not yet run, as after a budget */
    q->events_processed = n;
    Py_XDECREF(tick);
    if (heap_push(q, idx) < 0) PyErr_Clear();
    return NULL;
}

/* -- the type ----------------------------------------------------------------------------------- */

static int Queue_init(Queue *q, PyObject *args, PyObject *kw) {
    static char *names[] = {"max_events", "wall_limit_s", NULL};
    PyObject *me = Py_None, *wl = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|OO", names, &me, &wl)) return -1;
    Py_INCREF(me);
    Py_XSETREF(q->max_events, me);
    Py_INCREF(wl);
    Py_XSETREF(q->wall_limit_s, wl);
    Py_INCREF(Py_None);
    Py_XSETREF(q->wall_origin, Py_None);
    Py_INCREF(Py_None);
    Py_XSETREF(q->on_tick, Py_None);
    q->now = 0;
    q->events_processed = 0;
    if (!q->map.cap && lmap_init(&q->map, 64) < 0) return -1;
    return 0;
}

static int Queue_traverse(Queue *q, visitproc visit, void *arg) {
    for (Py_ssize_t k = 0; k < q->nticks; k++) {
        Tick *tk = &q->ticks[k];
        if (!tk->ev) continue;
        for (Py_ssize_t i = tk->head; i < tk->n; i++) {
            Py_VISIT(tk->ev[i].cb);
            Py_VISIT(tk->ev[i].args);
        }
    }
    Py_VISIT(q->on_tick);
    Py_VISIT(q->max_events);
    Py_VISIT(q->wall_limit_s);
    Py_VISIT(q->wall_origin);
    Py_VISIT(Py_TYPE(q));
    return 0;
}

static int Queue_clear(Queue *q) {
    for (Py_ssize_t k = 0; k < q->nticks; k++) {
        Tick *tk = &q->ticks[k];
        if (!tk->ev) continue;
        Py_ssize_t n = tk->n;
        Py_ssize_t i = tk->head;
        tk->head = tk->n = 0; /* first: a decref may run code that looks at the queue */
        for (; i < n; i++) {
            Py_CLEAR(tk->ev[i].cb);
            Py_CLEAR(tk->ev[i].args);
        }
    }
    q->heap_n = 0;
    Py_CLEAR(q->on_tick);
    Py_CLEAR(q->max_events);
    Py_CLEAR(q->wall_limit_s);
    Py_CLEAR(q->wall_origin);
    return 0;
}

static void Queue_dealloc(Queue *q) {
    PyTypeObject *tp = Py_TYPE(q);
    PyObject_GC_UnTrack(q);
    Queue_clear(q);
    for (Py_ssize_t k = 0; k < q->nticks; k++) PyMem_Free(q->ticks[k].ev);
    PyMem_Free(q->ticks);
    PyMem_Free(q->free_slots);
    PyMem_Free(q->heap);
    lmap_free(&q->map);
    tp->tp_free((PyObject *)q);
    Py_DECREF(tp);
}

/* time() -> now: the clock as a call, for the system layer's now() (a bound C method is a fifth of
 * the cost of the backend's Python method that reads the same member) */
static PyObject *Queue_time(Queue *q, PyObject *Py_UNUSED(ignored)) { return PyLong_FromLongLong(q->now); }

static PyMethodDef Queue_methods[] = {
    {"time", (PyCFunction)Queue_time, METH_NOARGS, "time() -> now, the simulated time in ns"},
    {"schedule", (PyCFunction)(void (*)(void))Queue_schedule, METH_FASTCALL,
     "schedule(delay_ns, callback, *args): run callback(*args) at now + delay_ns, after what is there"},
    {"schedule_two", (PyCFunction)(void (*)(void))Queue_schedule_two, METH_FASTCALL,
     "schedule_two(delay_a, callback_a, args_a, delay_b, callback_b, args_b): two schedule calls in one"},
    {"_run", (PyCFunction)(void (*)(void))Queue_run_loop, METH_FASTCALL,
     "_run(limit, deadline, every, next_tick) -> (status, next_tick)"},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef Queue_members[] = {
    {"now", T_LONGLONG, offsetof(Queue, now), 0, "the simulated time, ns"},
    {"events_processed", T_LONGLONG, offsetof(Queue, events_processed), 0, "events run so far"},
    {"max_events", T_OBJECT, offsetof(Queue, max_events), 0, "the event budget or None"},
    {"wall_limit_s", T_OBJECT, offsetof(Queue, wall_limit_s), 0, "the wall budget in seconds or None"},
    {"wall_origin", T_OBJECT, offsetof(Queue, wall_origin), 0, "time.monotonic() the wall budget counts from"},
    {"on_tick", T_OBJECT, offsetof(Queue, on_tick), 0, "on_tick(now_ns, events), every TICK_EVENTS events"},
    {NULL, 0, 0, 0, NULL},
};

static PyType_Slot Queue_slots[] = {
    {Py_tp_doc, "The calendar event queue's core (network/event_queue.py)."},
    {Py_tp_new, PyType_GenericNew},
    {Py_tp_init, Queue_init},
    {Py_tp_dealloc, Queue_dealloc},
    {Py_tp_traverse, Queue_traverse},
    {Py_tp_clear, Queue_clear},
    {Py_tp_methods, Queue_methods},
    {Py_tp_members, Queue_members},
    {Py_sq_length, Queue_len},
    {0, NULL},
};

static PyType_Spec Queue_spec = {
    .name = "network._event_core.Core",
    .basicsize = sizeof(Queue),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .slots = Queue_slots,
};

PyTypeObject *dtsim_core_type = NULL;

static int exec_module(PyObject *m) {
    PyObject *tp = PyType_FromModuleAndSpec(m, &Queue_spec, NULL);
    if (!tp) return -1;
    dtsim_core_type = (PyTypeObject *)tp;
    Py_INCREF(tp); /* the module keeps the type for the link code (_aware_links.c) */
    if (PyModule_AddObject(m, "Core", tp) < 0) {
        Py_DECREF(tp);
        return -1;
    }
#ifndef DTSIM_SOURCE_CHECKSUM
#define DTSIM_SOURCE_CHECKSUM "unknown"
#endif
    /* network/native_build.py: what the sources were when this was compiled */
    if (PyModule_AddStringConstant(m, "SOURCE_CHECKSUM", DTSIM_SOURCE_CHECKSUM) < 0) return -1;
    if (dtsim_add_aware_links(m) < 0) return -1;
    if (dtsim_add_pairing(m) < 0) return -1;
    static DtsimCoreAPI api = {sizeof(DtsimCoreAPI), NULL, dtsim_push_event, dtsim_push_event1, dtsim_push_native};
    api.core_type = dtsim_core_type;
    PyObject *capsule = PyCapsule_New(&api, DTSIM_CORE_API_CAPSULE, NULL);
    if (!capsule) return -1;
    if (PyModule_AddObject(m, "_C_API", capsule) < 0) {
        Py_DECREF(capsule);
        return -1;
    }
    return 0;
}

static PyModuleDef_Slot module_slots[] = {
    {Py_mod_exec, exec_module},
    {0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_event_core", "The calendar event queue in C (network/event_queue.py).", 0,
    NULL, module_slots, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__event_core(void) { return PyModuleDef_Init(&module); }
