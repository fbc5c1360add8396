/* The system layer's per-message path in C, for the Ring, AllToAll (direct) and HalvingDoubling
 * algorithms (system/sys.py and system/collective/{ring,all_to_all,halving_doubling,packet_algorithm}.py
 * are the reference, and run wherever this is not compiled or does not apply; tests hold the two to
 * every cycle, event and byte).
 *
 * A ring message is one trip round this loop, in Python some twelve calls:
 *   insert_packet -> mem_bus_transfer -> (the tick's batch) -> _bundle_arrived -> run_general
 *   -> ready -> collective_send_recv -> the backend's exchange -> ... -> on_packet_received -> ...
 * Here the same steps run as C functions on the same objects: the algorithm, stream, phase and
 * data set keep their state in their Python __slots__, which this code reads and writes at the
 * slots' offsets (taken from the classes' member descriptors, for exactly those classes), so the
 * Python code that runs around the loop (a phase's start and end, the batched ring phases, the
 * report) sees what it always saw. Anything else (a tree, a custom algorithm, a subclass) calls the Python
 * methods. Events still go through the Sys's per-tick batches (a C table here, ``Sys._batches``
 * in Python) and the backend's schedule, in the order the Python code puts them there.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <descrobject.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>

#include "_event_core.h" /* network/: the queue's capsule, DtsimCoreAPI */
#include "_feeder.h"     /* the workload's feeder, a type of this module */
#include "_ring_recurrence.h" /* the batched ring recurrence, a function of this module */

static DtsimCoreAPI *core_api = NULL; /* NULL where network._event_core is not there */

/* the C queue's calendar, where it is built; else every call goes through Python. PyCapsule_Import
 * imports only the package and then reads attributes, so the extension is imported first: a
 * process that imported this module before network._event_core (import system.generation) ran
 * every Sys through Python's calls otherwise. SysFast_init asks again while it is missing. */
static void load_core_api(void) {
    if (core_api) return;
    PyObject *mod = PyImport_ImportModule("network._event_core");
    DtsimCoreAPI *api = mod ? PyCapsule_Import(DTSIM_CORE_API_CAPSULE, 0) : NULL;
    if (api && api->size == sizeof(DtsimCoreAPI)) core_api = api;
    Py_XDECREF(mod);
    PyErr_Clear();
}

/* -- slots of Python classes -------------------------------------------------------------------- */

enum {
    A_PACKETS, A_STREAM_COUNT, A_FREE_PACKETS, A_ZERO, A_NONZERO, A_TOGGLE, A_REMAINED, A_PARALLEL,
    A_NODES, A_COM_TYPE, A_MSG_SIZE, A_FAST, A_RECEIVER, A_SENDER, A_RECEIVED, A_STREAM, A_SYS, A_N
};
static const char *algo_slots[A_N] = {
    "packets", "stream_count", "free_packets", "zero_latency_packets", "non_zero_latency_packets", "toggle",
    "remained_packets_per_message", "parallel_reduce", "nodes_in_ring", "com_type", "msg_size", "fast",
    "curr_receiver", "curr_sender", "total_packets_received", "stream", "sys",
};
enum { S_PHASE, S_STREAM_ID, S_DATASET, S_N };
static const char *stream_slots[S_N] = {"my_current_phase", "stream_id", "dataset"};

static PyTypeObject *ring_type, *stream_type, *phase_type, *dataset_type;
/* AllToAll (system/collective/all_to_all.py: direct), a Ring with these slots more, and its topology */
enum { D_MIDDLE, D_PENDING, D_RECV_INDEX, D_SEND_INDEX, D_STEP, D_TOPOLOGY, D_N };
static const char *direct_slots[D_N] = {"middle_point", "pending", "_receiver_index", "_sender_index", "_step",
                                        "topology"};
enum { T_LOCAL, T_INDEX, T_NODES, T_LIST, T_BASE, T_OFFSET, T_IDENTITY, T_N };
static const char *topo_slots[T_N] = {"local", "index_in_ring", "nodes_in_ring", "_list", "_base", "_offset",
                                      "_identity"};
static PyTypeObject *direct_type, *topo_type;
static Py_ssize_t direct_off[D_N], topo_off[T_N];
/* HalvingDoubling (system/collective/halving_doubling.py), a PacketAlgorithm with these slots more */
enum { H_OFFSET, H_MULTIPLIER, H_PENDING, H_TOPOLOGY, H_ID, H_N };
static const char *hd_slots[H_N] = {"rank_offset", "offset_multiplier", "pending", "topology", "id"};
static PyTypeObject *hd_type;
static Py_ssize_t hd_off[H_N];
/* the scheduler's state (Sys.proceed_to_next_vnet_baseline, Sys.schedule, SchedulerUnit) */
enum { SS_PHASES, SS_PRIORITY, SS_STEPS, SS_QUEUE, SS_COMTYPE, SS_INIT, SS_N };
static const char *sched_stream_slots[SS_N] = {"phases_to_go", "priority", "steps_finished", "current_queue_id",
                                               "current_com_type", "initialized"};
enum { PH_QUEUE, PH_ENABLED, PH_COMTYPE, PH_N };
static const char *phase_slots[PH_N] = {"queue_id", "enabled", "comm_type"};
enum { DS_FINISHED_STREAMS, DS_TOTAL, DS_FINISHED, DS_TICK, DS_NOTIFIER, DS_N };
static const char *ds_slots[DS_N] = {"finished_streams", "total_streams", "finished", "finish_tick", "notifier"};
enum { SU_RUNNING, SU_MAX, SU_RLT, SU_QT, SU_N };
static const char *su_slots[SU_N] = {"running_streams", "max_running_streams", "ready_list_threshold",
                                     "queue_threshold"};
static Py_ssize_t ss_off[SS_N], ph_off[PH_N], ds_off[DS_N], su_off[SU_N];
static PyTypeObject *su_type;
static PyObject *str_fps, *str_trs, *str_active_streams, *str_ready_list, *str_run_stream_init, *str_init,
    *str_notify_stream_finished, *str_ring_batcher;
static PyObject *str_append, *str_popleft, *str_member_at;
/* collections.deque and its append and popleft: a direct or halving-doubling phase queues each packet's
 * (destination, source) in a deque, and looking the methods up by name per packet was 3-5 % of a
 * 128-rank direct layout */
static PyTypeObject *deque_type;
static PyObject *deque_append, *deque_popleft;
static Py_ssize_t algo_off[A_N], stream_off[S_N], phase_algorithm_off, dataset_label_off;
/* PacketAlgorithm.topology (Ring's and HalvingDoubling's) and Ring.direction, for the phase batcher */
static Py_ssize_t packet_topology_off, ring_direction_off;
/* new_stream's: StreamBaseline.__init__ and Algorithm.init as configured, and the slots they set */
static PyTypeObject *algorithm_type = NULL;
static PyObject *stream_init_method = NULL, *algorithm_init_method = NULL, *str___init__ = NULL;
static Py_ssize_t stream_owner_off, algo_stream_off, algo_sys_off;
static PyObject *all_reduce, *reduce_scatter; /* ComType members */
static PyObject *empty_tuple, *str_now, *str_exit, *str_run_general, *str_on_packet_received,
    *str_note_zero_delay, *str_note_zero_message, *str_bundle_arrived_py, *str_register_event, *str_identity,
    *str__fast;

static int slot_offset(PyTypeObject *tp, const char *name, Py_ssize_t *out) {
    PyObject *descr = PyObject_GetAttrString((PyObject *)tp, name);
    if (!descr) return -1;
    int ok = Py_IS_TYPE(descr, &PyMemberDescr_Type) &&
             ((PyMemberDescrObject *)descr)->d_member->type == T_OBJECT_EX;
    if (ok) *out = ((PyMemberDescrObject *)descr)->d_member->offset;
    Py_DECREF(descr);
    if (!ok) PyErr_Format(PyExc_TypeError, "%s.%s is not a __slots__ member", tp->tp_name, name);
    return ok ? 0 : -1;
}

#define SLOT(obj, off) (*(PyObject **)((char *)(obj) + (off)))

/* a borrowed reference to a set slot, or NULL with AttributeError */
static PyObject *get(PyObject *obj, Py_ssize_t off, const char *name) {
    PyObject *v = SLOT(obj, off);
    if (!v) PyErr_Format(PyExc_AttributeError, "'%s' object has no attribute '%s'", Py_TYPE(obj)->tp_name, name);
    return v;
}

static int read_ll(PyObject *obj, Py_ssize_t off, const char *name, long long *out) {
    PyObject *v = get(obj, off, name);
    if (!v) return -1;
    *out = PyLong_AsLongLong(v);
    return (*out == -1 && PyErr_Occurred()) ? -1 : 0;
}

static void set_new(PyObject *obj, Py_ssize_t off, PyObject *v) { /* steals v */
    Py_XSETREF(SLOT(obj, off), v);
}

static int write_ll(PyObject *obj, Py_ssize_t off, long long v) {
    PyObject *o = PyLong_FromLongLong(v);
    if (!o) return -1;
    set_new(obj, off, o);
    return 0;
}

/* the algorithm slots by their A_ index */
#define get_ll(obj, i, out) read_ll((obj), algo_off[i], algo_slots[i], (out))
#define set_ll(obj, i, v) write_ll((obj), algo_off[i], (v))

/* -- SysFast: one Sys's half of the loop ---------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    PyObject *sys;      /* the Sys */
    PyObject *clock;    /* the object whose .now is the time (the backend's queue) */
    struct Ticks *ticks; /* the per-tick batches (Sys._batches in Python), see register_event */
    PyObject *schedule; /* the backend's schedule(delay, callback, *args) */
    PyObject *exchange; /* the backend's exchange(me, dst, src, size, tag, label, callback, arg) */
    PyObject *id;       /* the NPU id */
    long long endpoint_delay;
    double mem_bw;      /* local-mem-bw in bytes/s */
    int mem_bw_exact;   /* mem_bw is the config's value exactly (so size / bw rounds as Python's) */
    Queue *core;        /* clock as the C queue, whose schedule is f->schedule; NULL: another queue */
    PyObject *call_events_cb; /* bound C methods, made once */
    PyObject *bundle_cb;
    PyObject *received_cb;
    /* set by enable_scheduling: the streams' moves between queues run here too */
    PyObject *su;         /* the Sys's SchedulerUnit */
    PyObject *sysdict;    /* the Sys's __dict__: first_phase_streams, total_running_streams, ... */
    PyObject *py_proceed; /* Sys.proceed_to_next_vnet_baseline, the Python function, for other streams */
    /* set by enable_phase_batch (system/shortcuts/phase_batch.py): ring and halving-doubling phases join here */
    PyObject *batch_open;    /* phase key -> [(start ns, algorithm), ...] */
    PyObject *batch_advance; /* PhaseBatcher.advance(key, entries): checks a phase, makes its shape's plan */
    PyObject *batch_abandoned; /* BatchAbandoned: the run is redone without batching */
    PyObject *batch_plans;   /* shape -> (int64 partners, delays and extra as bytes, processed, size, steps, rows) */
    PyObject *batch_uses;    /* shape -> phases run with its plan */
    PyObject *finish_phase_cb; /* this SysFast's finish_phase, bound once */
    long long batch_min_steps, batch_max_time;
} SysFast;

static int proceed(SysFast *f, PyObject *stream);

static int now_of(SysFast *f, long long *now) {
    if (f->core) {
        *now = f->core->now;
        return 0;
    }
    PyObject *t = PyObject_GetAttr(f->clock, str_now);
    if (!t) return -1;
    *now = PyLong_AsLongLong(t);
    Py_DECREF(t);
    return (*now == -1 && PyErr_Occurred()) ? -1 : 0;
}

/* -- the per-tick batches (ASTRA-sim: Sys::try_register_event) ------------------------------------
 * Only the first event of a Sys for a tick schedules a queue event (call_events(t)); later ones join
 * its batch, which runs in registration order, late joiners included. Python's Sys keeps them in a
 * dict of lists of (callback, args) tuples; here a table of C arrays (a tuple, a dict lookup and a
 * list entry less per message), and a bundle's return holds its three values without a tuple. */

typedef struct {
    PyObject *cb;   /* NULL: a bundle's return, a = (stream, needs_processing, size) */
    PyObject *a[3]; /* else a[0]: the args tuple */
} Entry;

typedef struct {
    Entry *e;
    Py_ssize_t n, cap;
} Batch;

struct Ticks {
    LongMap map; /* tick -> its Batch, as (Py_ssize_t) pointer (network/_long_map.h, as the queue's) */
    Batch *spare[16];
    int n_spare;
};

static Batch *tick_find(struct Ticks *k, long long t) {
    Py_ssize_t v = k ? lmap_get(&k->map, t) : LMAP_EMPTY;
    return v == LMAP_EMPTY ? NULL : (Batch *)v;
}

static void entry_release(Entry *e) {
    Py_XDECREF(e->cb);
    Py_XDECREF(e->a[0]);
    Py_XDECREF(e->a[1]);
    Py_XDECREF(e->a[2]);
}

/* A spare batch keeps its array for the next tick up to this many entries: a direct all-reduce
 * of 256 NPUs (a rank's 255 receipts in one tick) kept 8 MB of spare arrays. */
#define BATCH_KEEP_ENTRIES 32

static void batch_release(struct Ticks *k, Batch *b) {
    while (b->n) { /* from the end: a release may run Python, which sees a consistent batch */
        Entry e = b->e[--b->n];
        entry_release(&e);
    }
    if (k->n_spare < (int)(sizeof k->spare / sizeof k->spare[0])) {
        if (b->cap > BATCH_KEEP_ENTRIES) { /* kept whole, each spare grew to the largest batch it held */
            PyMem_Free(b->e);
            b->e = NULL;
            b->cap = 0;
        }
        k->spare[k->n_spare++] = b;
        return;
    }
    PyMem_Free(b->e);
    PyMem_Free(b);
}

/* every pending batch released and forgotten (the map's memory kept) */
static void ticks_clear(struct Ticks *k) {
    for (Py_ssize_t i = 0; k && i < k->map.cap; i++) {
        Py_ssize_t v = k->map.vals[i];
        if (v == LMAP_EMPTY) continue;
        k->map.vals[i] = LMAP_EMPTY;
        k->map.n--;
        batch_release(k, (Batch *)v);
    }
}

static void ticks_free(struct Ticks *k) {
    if (!k) return;
    ticks_clear(k);
    while (k->n_spare) {
        Batch *b = k->spare[--k->n_spare];
        PyMem_Free(b->e);
        PyMem_Free(b);
    }
    lmap_free(&k->map);
    PyMem_Free(k);
}

/* a delay that puts the tick past 2^63 ns: the queue's own error (network.event_queue's
 * SimulationLimitError, as its schedule raises it) */
static int time_past_clock(SysFast *f, PyObject *delay) {
    long long now;
    if (now_of(f, &now) < 0) return -1;
    PyObject *mod = PyImport_ImportModule("network.event_queue");
    PyObject *err = mod ? PyObject_CallMethod(mod, "_time_overflow_error", "LO", now, delay) : NULL;
    Py_XDECREF(mod);
    if (err) {
        PyErr_SetObject((PyObject *)Py_TYPE(err), err);
        Py_DECREF(err);
    }
    return -1;
}

static int run_batch(SysFast *f, long long tick);
static int batch_native(PyObject *f, PyObject *unused, long long tick);

/* Sys.register_event(delay, ...) for one entry (its references are taken, not stolen) */
static int register_entry(SysFast *f, long long delay, const Entry *e) {
    long long now;
    if (now_of(f, &now) < 0) return -1;
    if (delay > 0 && now > LLONG_MAX - delay) {
        PyObject *d = PyLong_FromLongLong(delay);
        if (!d) return -1;
        time_past_clock(f, d);
        Py_DECREF(d);
        return -1;
    }
    long long t = now + delay;
    struct Ticks *k = f->ticks;
    if (!k) {
        PyErr_SetString(PyExc_RuntimeError, "SysFast was not initialised");
        return -1;
    }
    Batch *b = tick_find(k, t);
    if (!b) {
        if (k->n_spare) {
            b = k->spare[--k->n_spare];
        } else if (!(b = PyMem_Calloc(1, sizeof(Batch)))) {
            PyErr_NoMemory();
            return -1;
        }
        if (lmap_put(&k->map, t, (Py_ssize_t)b) < 0) {
            batch_release(k, b);
            return -1;
        }
        int r;
        if (f->core) { /* call_events(t) as a native event: no int, no call */
            r = core_api->push_native(f->core, delay, batch_native, (PyObject *)f, NULL, t);
        } else { /* schedule(delay, call_events, t) */
            PyObject *tt = PyLong_FromLongLong(t);
            PyObject *d = tt ? PyLong_FromLongLong(delay) : NULL;
            PyObject *res = d ? PyObject_CallFunctionObjArgs(f->schedule, d, f->call_events_cb, tt, NULL) : NULL;
            Py_XDECREF(tt);
            Py_XDECREF(d);
            r = res ? 0 : -1;
            Py_XDECREF(res);
        }
        if (r < 0) return -1;
    }
    if (b->n == b->cap) {
        Py_ssize_t cap = b->cap ? 2 * b->cap : 8;
        Entry *grown = PyMem_Realloc(b->e, cap * sizeof(Entry));
        if (!grown) {
            PyErr_NoMemory();
            return -1;
        }
        b->e = grown;
        b->cap = cap;
    }
    Entry *slot = &b->e[b->n++];
    slot->cb = Py_XNewRef(e->cb);
    for (int i = 0; i < 3; i++) slot->a[i] = Py_XNewRef(e->a[i]);
    return 0;
}

static PyTypeObject *sysfast_type; /* SysFast, once the module is set up */
static int register_event(SysFast *f, long long delay, PyObject *cb, PyObject *args);

int dtsim_sys_register1(PyObject *sysfast, long long delay, PyObject *cb, PyObject *arg) {
    if (!sysfast_type || Py_TYPE(sysfast) != sysfast_type) {
        PyErr_SetString(PyExc_TypeError, "dtsim_sys_register1: not a SysFast");
        return -1;
    }
    PyObject *tup = PyTuple_Pack(1, arg);
    if (!tup) return -1;
    int r = register_event((SysFast *)sysfast, delay, cb, tup);
    Py_DECREF(tup);
    return r;
}

/* Sys.register_event(delay, cb, *args) with args already a tuple */
static int register_event(SysFast *f, long long delay, PyObject *cb, PyObject *args) {
    Entry e = {cb, {args, NULL, NULL}};
    return register_entry(f, delay, &e);
}

/* a bundle's return through the memory bus: Sys._bundle_arrived(stream, processed, size) later */
static int register_bundle(SysFast *f, long long delay, PyObject *stream, PyObject *processed, PyObject *size) {
    Entry e = {NULL, {stream, processed, size}};
    return register_entry(f, delay, &e);
}

static PyObject *SysFast_register_event(SysFast *f, PyObject *const *args, Py_ssize_t n) {
    if (n < 2) {
        PyErr_SetString(PyExc_TypeError, "register_event(delay_ns, callback, *args)");
        return NULL;
    }
    PyObject *d = PyNumber_Index(args[0]); /* an int, or anything the queue's schedule takes as one */
    if (!d) return NULL;
    int overflow = 0;
    long long delay = PyLong_AsLongLongAndOverflow(d, &overflow);
    if (overflow) {
        if (overflow > 0) time_past_clock(f, d);
        else PyErr_SetString(PyExc_OverflowError, "register_event: a delay before the start of time");
        Py_DECREF(d);
        return NULL;
    }
    Py_DECREF(d);
    if (delay == -1 && PyErr_Occurred()) return NULL;
    PyObject *tup = PyTuple_New(n - 2);
    if (!tup) return NULL;
    for (Py_ssize_t i = 2; i < n; i++) PyTuple_SET_ITEM(tup, i - 2, Py_NewRef(args[i]));
    int r = register_event(f, delay, args[1], tup);
    Py_DECREF(tup);
    if (r < 0) return NULL;
    Py_RETURN_NONE;
}

/* Sys.mem_bus_transfer(stream, fast, needs_processing, size) */
static int mem_bus_transfer(SysFast *f, PyObject *stream, int fast, PyObject *processed, PyObject *size) {
    long long delay = fast ? 10 : f->endpoint_delay;
    if (!delay) {
        long long now;
        if (now_of(f, &now) < 0) return -1;
        if (!now) {
            PyObject *r = PyObject_CallMethodNoArgs(f->sys, str_note_zero_delay);
            if (!r) return -1;
            Py_DECREF(r);
        }
    }
    return register_bundle(f, delay, stream, processed, size);
}

/* PacketAlgorithm._take_packet: 1 when the packet carries a reduction */
static int take_packet(PyObject *a, long long non_zero_per_group) {
    long long zl, nzl, pr;
    if (get_ll(a, A_ZERO, &zl) < 0 || get_ll(a, A_NONZERO, &nzl) < 0) return -1;
    if (zl == 0 && nzl == 0) {
        if (get_ll(a, A_PARALLEL, &pr) < 0) return -1;
        zl = pr;
        nzl = non_zero_per_group;
        PyObject *tog = get(a, algo_off[A_TOGGLE], "toggle");
        if (!tog) return -1;
        int t = PyObject_IsTrue(tog);
        if (t < 0) return -1;
        set_new(a, algo_off[A_TOGGLE], Py_NewRef(t ? Py_False : Py_True));
        if (set_ll(a, A_NONZERO, nzl) < 0) return -1;
    }
    if (zl > 0) {
        if (set_ll(a, A_ZERO, zl - 1) < 0) return -1;
        return 0;
    }
    if (set_ll(a, A_NONZERO, nzl - 1) < 0) return -1;
    PyObject *ct = get(a, algo_off[A_COM_TYPE], "com_type");
    if (!ct) return -1;
    if (ct == reduce_scatter) return 1;
    if (ct != all_reduce) return 0;
    PyObject *tog = get(a, algo_off[A_TOGGLE], "toggle");
    return tog ? PyObject_IsTrue(tog) : -1;
}

/* self.sys.mem_bus_transfer(self.stream, self.fast, processed, size): every insert_packet's end */
static int to_mem_bus(SysFast *f, PyObject *a, int processed, PyObject *size) {
    PyObject *stream = get(a, algo_off[A_STREAM], "stream"), *fast = get(a, algo_off[A_FAST], "fast");
    if (!stream || !fast) return -1;
    int isfast = PyObject_IsTrue(fast);
    if (isfast < 0) return -1;
    Py_INCREF(stream);
    Py_INCREF(size);
    int r = mem_bus_transfer(f, stream, isfast, processed ? Py_True : Py_False, size);
    Py_DECREF(stream);
    Py_DECREF(size);
    return r;
}

/* PacketAlgorithm.iteratable: the phase ends when every message is out and every slot back;
 * Algorithm.exit is sys.proceed_to_next_vnet_baseline(self.stream), and a is f's (see ours) */
static int iteratable(SysFast *f, PyObject *a) {
    long long sc, fp, pr;
    if (get_ll(a, A_STREAM_COUNT, &sc) < 0 || get_ll(a, A_FREE_PACKETS, &fp) < 0 || get_ll(a, A_PARALLEL, &pr) < 0)
        return -1;
    if (sc == 0 && fp == pr) {
        if (f->su) {
            PyObject *stream = get(a, algo_off[A_STREAM], "stream");
            if (!stream) return -1;
            Py_INCREF(stream);
            int r = proceed(f, stream);
            Py_DECREF(stream);
            return r;
        }
        PyObject *r = PyObject_CallMethodNoArgs(a, str_exit);
        if (!r) return -1;
        Py_DECREF(r);
    }
    return 0;
}

/* Ring.insert_packet */
static int ring_insert_packet(SysFast *f, PyObject *a) {
    long long nodes, pr, packets;
    if (get_ll(a, A_NODES, &nodes) < 0 || get_ll(a, A_PARALLEL, &pr) < 0) return -1;
    int processed = take_packet(a, (nodes - 1) * pr);
    if (processed < 0 || get_ll(a, A_PACKETS, &packets) < 0 || set_ll(a, A_PACKETS, packets + 1) < 0) return -1;
    PyObject *size = get(a, algo_off[A_MSG_SIZE], "msg_size");
    return size ? to_mem_bus(f, a, processed, size) : -1;
}

/* stream.my_current_phase.algorithm, borrowed; NULL with an error, or NULL without one when the
 * objects are not the exact classes this code knows */
static PyObject *current_algorithm(PyObject *stream) {
    if (!Py_IS_TYPE(stream, stream_type)) return NULL;
    PyObject *phase = get(stream, stream_off[S_PHASE], "my_current_phase");
    if (!phase || !Py_IS_TYPE(phase, phase_type)) return NULL;
    return get(phase, phase_algorithm_off, "algorithm");
}

/* Sys.collective_send_recv(stream, dst, src, size) */
static int collective_send_recv(SysFast *f, PyObject *stream, PyObject *dst, PyObject *src, PyObject *size) {
    int zero = PyObject_Not(size);
    if (zero < 0) return -1;
    if (zero) {
        PyObject *r = PyObject_CallMethodOneArg(f->sys, str_note_zero_message, stream);
        if (!r) return -1;
        Py_DECREF(r);
    }
    /* stream.dataset.label, stream.stream_id and stream.my_current_phase.algorithm, new references */
    PyObject *algo = NULL, *label = NULL, *sid = NULL;
    if (Py_IS_TYPE(stream, stream_type)) {
        PyObject *ds = get(stream, stream_off[S_DATASET], "dataset");
        if (!ds) return -1;
        label = Py_IS_TYPE(ds, dataset_type) ? Py_XNewRef(get(ds, dataset_label_off, "label"))
                                             : PyObject_GetAttrString(ds, "label");
        sid = Py_XNewRef(get(stream, stream_off[S_STREAM_ID], "stream_id"));
        algo = Py_XNewRef(current_algorithm(stream));
    }
    if (!algo && !PyErr_Occurred()) { /* not the classes this code knows: through their attributes */
        PyObject *ds = PyObject_GetAttrString(stream, "dataset");
        Py_XSETREF(label, ds ? PyObject_GetAttrString(ds, "label") : NULL);
        Py_XDECREF(ds);
        Py_XSETREF(sid, label ? PyObject_GetAttrString(stream, "stream_id") : NULL);
        PyObject *phase = sid ? PyObject_GetAttrString(stream, "my_current_phase") : NULL;
        algo = phase ? PyObject_GetAttrString(phase, "algorithm") : NULL;
        Py_XDECREF(phase);
    }
    if (!algo || !label || !sid) {
        Py_XDECREF(algo);
        Py_XDECREF(label);
        Py_XDECREF(sid);
        return -1;
    }
    long long id = PyLong_AsLongLong(sid);
    Py_DECREF(sid);
    PyObject *tag = NULL;
    if (!(id == -1 && PyErr_Occurred())) {
        const long long span = 500000000LL; /* COLLECTIVE_TAG_OFFSET - NATIVE_TAG_OFFSET, sys.py */
        long long m = id % span;
        if (m < 0) m += span; /* Python's modulo */
        tag = PyLong_FromLongLong(m + 500000000LL);
    }
    if (!tag) {
        Py_DECREF(algo);
        Py_DECREF(label);
        return -1;
    }
    PyObject *cb;
    if (Py_IS_TYPE(algo, ring_type) || (direct_type && Py_IS_TYPE(algo, direct_type)) ||
        (hd_type && Py_IS_TYPE(algo, hd_type))) {
        cb = Py_NewRef(f->received_cb);
    } else {
        cb = PyObject_GetAttr((PyObject *)Py_TYPE(algo), str_on_packet_received); /* type(algo).on_packet_received */
    }
    PyObject *res = NULL;
    if (cb) {
        PyObject *args[] = {f->id, dst, src, size, tag, label, cb, algo};
        res = PyObject_Vectorcall(f->exchange, args, 8, NULL);
        Py_DECREF(cb);
    }
    Py_DECREF(algo);
    Py_DECREF(label);
    Py_DECREF(tag);
    if (!res) return -1;
    Py_DECREF(res);
    return 0;
}

/* PacketAlgorithm._message_sent */
static int message_sent(PyObject *a) {
    long long rem, sc, fp;
    if (get_ll(a, A_REMAINED, &rem) < 0 || get_ll(a, A_STREAM_COUNT, &sc) < 0 || get_ll(a, A_FREE_PACKETS, &fp) < 0)
        return -1;
    if (rem > 0) rem--;
    if (rem == 0 && sc > 0) {
        sc--;
        if (sc > 0) rem = 1;
    }
    if (set_ll(a, A_REMAINED, rem) < 0 || set_ll(a, A_STREAM_COUNT, sc) < 0 || set_ll(a, A_FREE_PACKETS, fp - 1) < 0)
        return -1;
    return 0;
}

/* collective_send_recv(self.stream, dst, src, size), then _message_sent: a ready() that sends */
static int send_step(SysFast *f, PyObject *a, PyObject *dst, PyObject *src, PyObject *size) {
    PyObject *stream = get(a, algo_off[A_STREAM], "stream");
    if (!stream) return -1;
    Py_INCREF(stream);
    int r = collective_send_recv(f, stream, dst, src, size);
    Py_DECREF(stream);
    return r < 0 || message_sent(a) < 0 ? -1 : 1;
}

/* Ring.ready */
static int ring_ready(SysFast *f, PyObject *a) {
    long long packets, sc, fp;
    if (get_ll(a, A_PACKETS, &packets) < 0 || get_ll(a, A_STREAM_COUNT, &sc) < 0 ||
        get_ll(a, A_FREE_PACKETS, &fp) < 0)
        return -1;
    if (packets == 0 || sc == 0 || fp == 0) return 0;
    PyObject *recv = get(a, algo_off[A_RECEIVER], "curr_receiver"), *send = get(a, algo_off[A_SENDER], "curr_sender"),
             *size = get(a, algo_off[A_MSG_SIZE], "msg_size");
    if (!recv || !send || !size) return -1;
    PyObject *keep[] = {recv, send, size};
    for (int i = 0; i < 3; i++) Py_INCREF(keep[i]);
    int r = send_step(f, a, recv, send, size); /* _message_sent leaves packets alone: -1 after it is the same */
    for (int i = 0; i < 3; i++) Py_DECREF(keep[i]);
    if (r < 0 || get_ll(a, A_PACKETS, &packets) < 0 || set_ll(a, A_PACKETS, packets - 1) < 0) return -1;
    return 1;
}

/* PacketAlgorithm.run_general, with the algorithm's ready */
static int packet_run_general(SysFast *f, PyObject *a, int (*ready)(SysFast *, PyObject *)) {
    long long fp;
    if (get_ll(a, A_FREE_PACKETS, &fp) < 0 || set_ll(a, A_FREE_PACKETS, fp + 1) < 0 || ready(f, a) < 0) return -1;
    return iteratable(f, a);
}

/* -- AllToAll (direct) ----------------------------------------------------------------------------- */

static long long pymod(long long a, long long n) { /* Python's a % n for n > 0 */
    long long m = a % n;
    return m < 0 ? m + n : m;
}

#define get_d(obj, i, out) read_ll((obj), direct_off[i], direct_slots[i], (out))
#define set_d(obj, i, v) write_ll((obj), direct_off[i], (v))

/* topology.member_at(i) for 0 <= i < nodes_in_ring, a new reference */
static PyObject *member_at(PyObject *topo, long long i) {
    if (Py_IS_TYPE(topo, topo_type)) {
        PyObject *list = get(topo, topo_off[T_LIST], "_list");
        if (!list) return NULL;
        if (list != Py_None) {
            if (!PyList_Check(list) || i < 0 || i >= PyList_GET_SIZE(list)) {
                PyErr_SetString(PyExc_IndexError, "a ring's member index is out of range");
                return NULL;
            }
            return Py_NewRef(PyList_GET_ITEM(list, i));
        }
        PyObject *base = get(topo, topo_off[T_BASE], "_base"), *off = get(topo, topo_off[T_OFFSET], "_offset");
        if (!base || !off) return NULL;
        long long b = PyLong_AsLongLong(base), o = PyLong_AsLongLong(off);
        if (PyErr_Occurred()) return NULL;
        return PyLong_FromLongLong(b + i * o);
    }
    PyObject *idx = PyLong_FromLongLong(i);
    if (!idx) return NULL;
    PyObject *r = PyObject_CallMethodOneArg(topo, str_member_at, idx);
    Py_DECREF(idx);
    return r;
}

static int topo_ll(PyObject *topo, int i, long long *out) {
    PyObject *v = Py_IS_TYPE(topo, topo_type) ? Py_XNewRef(get(topo, topo_off[i], topo_slots[i]))
                                              : PyObject_GetAttrString(topo, topo_slots[i]);
    if (!v) return -1;
    if (i == T_LOCAL) {
        int t = PyObject_IsTrue(v);
        Py_DECREF(v);
        *out = t;
        return t < 0 ? -1 : 0;
    }
    *out = PyLong_AsLongLong(v);
    Py_DECREF(v);
    return (*out == -1 && PyErr_Occurred()) ? -1 : 0;
}

/* pending.append((x, y)) */
static int push_pending(PyObject *pending, PyObject *x, PyObject *y) {
    PyObject *pair = PyTuple_Pack(2, x, y);
    if (!pair) return -1;
    PyObject *r;
    if (Py_IS_TYPE(pending, deque_type)) { /* exactly a deque: its own method, not one of a subclass */
        PyObject *args[] = {pending, pair};
        r = PyObject_Vectorcall(deque_append, args, 2, NULL);
    } else {
        r = PyObject_CallMethodOneArg(pending, str_append, pair);
    }
    Py_DECREF(pair);
    Py_XDECREF(r);
    return r ? 0 : -1;
}

/* the head of ``pending`` (at slot offset ``off``) when a message may go: packets waiting, messages
 * left and a free slot (the ready() test of AllToAll and HalvingDoubling); 1 with *pair a new
 * reference, 0 not ready, -1 error */
static int pop_pending(PyObject *a, Py_ssize_t off, PyObject **pair) {
    long long sc, fp;
    PyObject *pending = get(a, off, "pending");
    if (!pending) return -1;
    Py_ssize_t waiting = PyObject_Length(pending);
    if (waiting < 0 || get_ll(a, A_STREAM_COUNT, &sc) < 0 || get_ll(a, A_FREE_PACKETS, &fp) < 0) return -1;
    if (waiting == 0 || sc == 0 || fp == 0) return 0;
    *pair = Py_IS_TYPE(pending, deque_type) ? PyObject_Vectorcall(deque_popleft, &pending, 1, NULL)
                                            : PyObject_CallMethodNoArgs(pending, str_popleft);
    if (!*pair) return -1;
    if (!PyTuple_Check(*pair) || PyTuple_GET_SIZE(*pair) != 2) {
        Py_CLEAR(*pair);
        PyErr_SetString(PyExc_TypeError, "a pending packet is not a pair");
        return -1;
    }
    return 1;
}

/* AllToAll._next_peers */
static int direct_next_peers(PyObject *a) {
    long long n, step, own, ri, si;
    PyObject *topo = get(a, direct_off[D_TOPOLOGY], "topology");
    if (!topo || get_ll(a, A_NODES, &n) < 0 || get_d(a, D_STEP, &step) < 0 || get_d(a, D_RECV_INDEX, &ri) < 0 ||
        get_d(a, D_SEND_INDEX, &si) < 0)
        return -1;
    Py_INCREF(topo);
    int r = -1;
    if (n <= 0) {
        PyErr_SetString(PyExc_ZeroDivisionError, "a ring of no NPUs");
        goto done;
    }
    if (topo_ll(topo, T_INDEX, &own) < 0) goto done;
    long long i = pymod(ri + step, n);
    if (i == own) i = pymod(i + step, n);
    if (set_d(a, D_RECV_INDEX, i) < 0) goto done;
    PyObject *m = member_at(topo, i);
    if (!m) goto done;
    set_new(a, algo_off[A_RECEIVER], m);
    i = pymod(si - step, n);
    if (i == own) i = pymod(i - step, n);
    if (set_d(a, D_SEND_INDEX, i) < 0) goto done;
    if (!(m = member_at(topo, i))) goto done;
    set_new(a, algo_off[A_SENDER], m);
    r = 0;
done:
    Py_DECREF(topo);
    return r;
}

/* AllToAll.insert_packet */
static int direct_insert_packet(SysFast *f, PyObject *a) {
    long long nodes, pr, local;
    PyObject *topo = get(a, direct_off[D_TOPOLOGY], "topology");
    if (!topo || get_ll(a, A_NODES, &nodes) < 0 || get_ll(a, A_PARALLEL, &pr) < 0 || topo_ll(topo, T_LOCAL, &local) < 0)
        return -1;
    int processed = take_packet(a, pr * (local ? nodes - 1 : 1));
    if (processed < 0) return -1;
    PyObject *pending = get(a, direct_off[D_PENDING], "pending"), *recv = get(a, algo_off[A_RECEIVER], "curr_receiver"),
             *send = get(a, algo_off[A_SENDER], "curr_sender"), *size = get(a, algo_off[A_MSG_SIZE], "msg_size");
    if (!pending || !recv || !send || !size || push_pending(pending, recv, send) < 0) return -1;
    return to_mem_bus(f, a, processed, size) < 0 ? -1 : direct_next_peers(a);
}

/* AllToAll.ready: 1 sent, 0 not */
static int direct_ready(SysFast *f, PyObject *a) {
    PyObject *pair; /* (destination, source) */
    int r = pop_pending(a, direct_off[D_PENDING], &pair);
    if (r <= 0) return r;
    PyObject *size = Py_XNewRef(get(a, algo_off[A_MSG_SIZE], "msg_size"));
    r = size ? send_step(f, a, PyTuple_GET_ITEM(pair, 0), PyTuple_GET_ITEM(pair, 1), size) : -1;
    Py_XDECREF(size);
    Py_DECREF(pair);
    return r;
}

/* AllToAll.run_general */
static int direct_run_general(SysFast *f, PyObject *a) {
    long long fp, sc, pr, middle, received;
    if (get_ll(a, A_FREE_PACKETS, &fp) < 0 || set_ll(a, A_FREE_PACKETS, fp + 1) < 0) return -1;
    PyObject *ct = get(a, algo_off[A_COM_TYPE], "com_type");
    if (!ct || get_ll(a, A_STREAM_COUNT, &sc) < 0 || get_d(a, D_MIDDLE, &middle) < 0) return -1;
    if (ct == all_reduce && sc <= middle) {
        /* the all-gather half waits for every reduce-scatter message (AllToAll::run) */
        if (get_ll(a, A_RECEIVED, &received) < 0) return -1;
        if (received < middle) return 0;
        if (get_ll(a, A_PARALLEL, &pr) < 0) return -1;
        for (long long k = 0; k < pr; k++) {
            int r = direct_ready(f, a);
            if (r < 0) return -1;
            if (!r) break;
        }
    } else if (direct_ready(f, a) < 0) {
        return -1;
    }
    return iteratable(f, a);
}

/* -- HalvingDoubling ------------------------------------------------------------------------------- */
/* Its PacketAlgorithm slots sit where a Ring's do (configure checks); it has no ``packets``. */

#define get_hd(obj, i, out) read_ll((obj), hd_off[i], hd_slots[i], (out))
#define set_hd(obj, i, v) write_ll((obj), hd_off[i], (v))

#define EXACT(x) ((x) <= (1LL << 53) && (x) >= -(1LL << 53))

/* HalvingDoubling._next_step and _find_partner; 1 done, 0 the values leave what a double holds
 * exactly (the caller hands the step to Python), -1 error */
static int hd_next_step(PyObject *a) {
    long long offset, size, n;
    PyObject *mult_o = get(a, hd_off[H_MULTIPLIER], "offset_multiplier");
    if (!mult_o || get_ll(a, A_NODES, &n) < 0 || get_hd(a, H_OFFSET, &offset) < 0 || get_ll(a, A_MSG_SIZE, &size) < 0)
        return -1;
    double mult = PyFloat_AsDouble(mult_o);
    if (mult == -1.0 && PyErr_Occurred()) return -1;
    if (!PyFloat_CheckExact(mult_o) || !EXACT(offset) || !EXACT(size) || !(mult == 2.0 || mult == 0.5)) return 0;
    offset = (long long)((double)offset * mult);
    size = (long long)((double)size / mult);
    PyObject *ct = get(a, algo_off[A_COM_TYPE], "com_type");
    if (!ct) return -1;
    if (offset == n && ct == all_reduce) {
        mult = 0.5;
        PyObject *half = PyFloat_FromDouble(0.5);
        if (!half) return -1;
        set_new(a, hd_off[H_MULTIPLIER], half);
        offset = (long long)((double)offset * mult);
        size = (long long)((double)size / mult);
    }
    if (set_hd(a, H_OFFSET, offset) < 0 || set_ll(a, A_MSG_SIZE, size) < 0) return -1;
    /* _find_partner */
    PyObject *partner;
    if (offset == 0) {
        partner = Py_XNewRef(get(a, hd_off[H_ID], "id"));
    } else {
        PyObject *topo = get(a, hd_off[H_TOPOLOGY], "topology");
        long long index;
        if (!topo || topo_ll(topo, T_INDEX, &index) < 0) return -1;
        long long q = index / offset; /* both >= 0 here: Python's // */
        if (index < 0 || offset < 0 || n <= 0) {
            PyErr_SetString(PyExc_ValueError, "a halving-doubling step with a negative place");
            return -1;
        }
        long long step = (q % 2 == 0) ? 1 : -1;
        Py_INCREF(topo);
        partner = member_at(topo, pymod(index + step * offset, n));
        Py_DECREF(topo);
    }
    if (!partner) return -1;
    set_new(a, algo_off[A_RECEIVER], Py_NewRef(partner));
    set_new(a, algo_off[A_SENDER], partner);
    return 1;
}

/* HalvingDoubling.insert_packet */
static int hd_insert_packet(SysFast *f, PyObject *a) {
    long long n, pr;
    if (get_ll(a, A_NODES, &n) < 0 || get_ll(a, A_PARALLEL, &pr) < 0) return -1;
    if (n <= 0) { /* log2 of no NPUs: Python's method and its error */
        PyObject *res = PyObject_CallMethod(a, "insert_packet", NULL);
        Py_XDECREF(res);
        return res ? 0 : -1;
    }
    /* int(math.log2(nodes_in_ring) - 1 * parallel_reduce) */
    int processed = take_packet(a, (long long)(log2((double)n) - (double)pr));
    if (processed < 0) return -1;
    PyObject *pending = get(a, hd_off[H_PENDING], "pending"), *recv = get(a, algo_off[A_RECEIVER], "curr_receiver"),
             *size = get(a, algo_off[A_MSG_SIZE], "msg_size");
    if (!pending || !recv || !size || push_pending(pending, recv, size) < 0 || to_mem_bus(f, a, processed, size) < 0)
        return -1;
    int done = hd_next_step(a);
    if (done < 0) return -1;
    if (!done) { /* Python's floats for values a double does not hold exactly */
        PyObject *res = PyObject_CallMethod(a, "_next_step", NULL);
        if (!res) return -1;
        Py_DECREF(res);
    }
    return 1;
}
/* HalvingDoubling.ready: 1 sent, 0 not */
static int hd_ready(SysFast *f, PyObject *a) {
    PyObject *pair; /* (partner, size) */
    int r = pop_pending(a, hd_off[H_PENDING], &pair);
    if (r <= 0) return r;
    PyObject *partner = PyTuple_GET_ITEM(pair, 0);
    r = send_step(f, a, partner, partner, PyTuple_GET_ITEM(pair, 1));
    Py_DECREF(pair);
    return r;
}

/* which of this Sys's algorithms the loop runs in C: 1 Ring, 2 AllToAll, 3 HalvingDoubling, 0 none */
static int ours(SysFast *f, PyObject *a) {
    int kind = Py_IS_TYPE(a, ring_type) ? 1 : (direct_type && Py_IS_TYPE(a, direct_type)) ? 2
               : (hd_type && Py_IS_TYPE(a, hd_type)) ? 3 : 0;
    return kind && SLOT(a, algo_off[A_SYS]) == f->sys ? kind : 0; /* the slot is read only on those types */
}

/* Sys._bundle_arrived(stream, needs_processing, size) */
static PyObject *bundle_arrived(SysFast *f, PyObject *stream, PyObject *processed, PyObject *size) {
    int p = PyObject_IsTrue(processed);
    if (p < 0) return NULL;
    if (p) {
        if (!f->mem_bw_exact || f->mem_bw <= 0) /* the Python method: its error, or its arithmetic */
            return PyObject_CallMethodObjArgs(f->sys, str_bundle_arrived_py, stream, processed, size, NULL);
        long long n = PyLong_AsLongLong(size);
        if (n == -1 && PyErr_Occurred()) return NULL;
        if (n > (1LL << 53) || n < -(1LL << 53))
            return PyObject_CallMethodObjArgs(f->sys, str_bundle_arrived_py, stream, processed, size, NULL);
        /* write + read + read, each truncated (PacketBundle::call); as 3 * int(size / bw * 1e9) */
        double d = (double)n / f->mem_bw * 1e9;
        if (!(d < 3.0e18 && d > -3.0e18)) /* 3 * int(d) within 64 bits, else Python's ints */
            return PyObject_CallMethodObjArgs(f->sys, str_bundle_arrived_py, stream, processed, size, NULL);
        long long delay = 3 * (long long)d;
        if (register_bundle(f, delay, stream, Py_False, size) < 0) return NULL;
        Py_RETURN_NONE;
    }
    PyObject *algo = current_algorithm(stream);
    int kind = algo ? ours(f, algo) : 0;
    if (kind) {
        Py_INCREF(algo);
        int r = kind == 1 ? packet_run_general(f, algo, ring_ready) : kind == 2 ? direct_run_general(f, algo)
                                                                            : packet_run_general(f, algo, hd_ready);
        Py_DECREF(algo);
        if (r < 0) return NULL;
        Py_RETURN_NONE;
    }
    if (PyErr_Occurred()) return NULL;
    /* stream.my_current_phase.algorithm.run_general(), in Python */
    PyObject *phase = PyObject_GetAttrString(stream, "my_current_phase");
    if (!phase) return NULL;
    algo = PyObject_GetAttrString(phase, "algorithm");
    Py_DECREF(phase);
    if (!algo) return NULL;
    PyObject *r = PyObject_CallMethodNoArgs(algo, str_run_general);
    Py_DECREF(algo);
    return r;
}

static PyObject *SysFast_bundle_arrived(SysFast *f, PyObject *const *args, Py_ssize_t n) {
    if (n != 3) {
        PyErr_SetString(PyExc_TypeError, "_bundle_arrived(stream, needs_processing, size)");
        return NULL;
    }
    return bundle_arrived(f, args[0], args[1], args[2]);
}

/* Sys._call_events(t): the tick's batch in order, late joiners included */
static PyObject *SysFast_call_events(SysFast *f, PyObject *t) {
    long long tick = PyLong_AsLongLong(t);
    if (tick == -1 && PyErr_Occurred()) return NULL;
    if (run_batch(f, tick) < 0) return NULL;
    Py_RETURN_NONE;
}

/* the batch's event in the C queue's calendar */
static int batch_native(PyObject *f, PyObject *Py_UNUSED(unused), long long tick) {
    return run_batch((SysFast *)f, tick);
}

/* Sys._call_events(tick): the entries registered for the tick, in order */
static int run_batch(SysFast *f, long long tick) {
    Batch *b = tick_find(f->ticks, tick);
    if (!b) {
        PyObject *t = PyLong_FromLongLong(tick);
        if (t) {
            PyErr_SetObject(PyExc_KeyError, t);
            Py_DECREF(t);
        }
        return -1;
    }
    for (Py_ssize_t i = 0; i < b->n; i++) { /* b->n re-read: late joiners run in this pass */
        Entry e = b->e[i]; /* a copy with its own references: the array may grow under the call */
        e.cb = Py_XNewRef(e.cb);
        for (int j = 0; j < 3; j++) e.a[j] = Py_XNewRef(e.a[j]);
        PyObject *r;
        if (!e.cb) {
            r = bundle_arrived(f, e.a[0], e.a[1], e.a[2]);
        } else if (e.cb == f->bundle_cb && PyTuple_GET_SIZE(e.a[0]) == 3) {
            r = bundle_arrived(f, PyTuple_GET_ITEM(e.a[0], 0), PyTuple_GET_ITEM(e.a[0], 1), PyTuple_GET_ITEM(e.a[0], 2));
        } else {
            r = PyObject_Call(e.cb, e.a[0], NULL);
        }
        entry_release(&e);
        if (!r) return -1;
        Py_DECREF(r);
    }
    lmap_del(&f->ticks->map, tick);
    batch_release(f->ticks, b);
    return 0;
}

/* the pending batches as Python's Sys._batches holds them: {tick: [(callback, args), ...]} (a snapshot) */
static PyObject *SysFast_get_batches(SysFast *f, void *Py_UNUSED(closure)) {
    PyObject *d = PyDict_New();
    struct Ticks *k = f->ticks;
    for (Py_ssize_t i = 0; d && k && i < k->map.cap; i++) {
        if (k->map.vals[i] == LMAP_EMPTY) continue;
        Batch *b = (Batch *)k->map.vals[i];
        PyObject *list = PyList_New(b->n), *t = PyLong_FromLongLong(k->map.keys[i]);
        for (Py_ssize_t j = 0; list && j < b->n; j++) {
            Entry *e = &b->e[j];
            PyObject *item = e->cb ? PyTuple_Pack(2, e->cb, e->a[0]) : Py_BuildValue("(O(OOO))", f->bundle_cb, e->a[0],
                                                                                      e->a[1], e->a[2]);
            if (!item) Py_CLEAR(list);
            else PyList_SET_ITEM(list, j, item);
        }
        if (!list || !t || PyDict_SetItem(d, t, list) < 0) Py_CLEAR(d);
        Py_XDECREF(list);
        Py_XDECREF(t);
    }
    return d;
}

/* algorithm.insert_packet() for one of ours() kinds */
static int insert_packet(SysFast *f, PyObject *a, int kind) {
    return kind == 1 ? ring_insert_packet(f, a) : kind == 2 ? direct_insert_packet(f, a) : hd_insert_packet(f, a);
}

/* the exchange's receive callback: PacketAlgorithm.on_packet_received */
static PyObject *SysFast_received(SysFast *f, PyObject *a) {
    int kind = ours(f, a);
    if (!kind) return PyObject_CallMethodNoArgs(a, str_on_packet_received);
    long long n;
    if (get_ll(a, A_RECEIVED, &n) < 0 || set_ll(a, A_RECEIVED, n + 1) < 0 || insert_packet(f, a, kind) < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* insert_packets(algorithm, count): PacketAlgorithm.run_stream_init's count insertions */
static PyObject *SysFast_insert_packets(SysFast *f, PyObject *const *args, Py_ssize_t n) {
    if (n != 2) {
        PyErr_SetString(PyExc_TypeError, "insert_packets(algorithm, count)");
        return NULL;
    }
    long long count = PyLong_AsLongLong(args[1]);
    if (count == -1 && PyErr_Occurred()) return NULL;
    int kind = ours(f, args[0]);
    for (long long i = 0; i < count; i++) {
        if (kind) {
            if (insert_packet(f, args[0], kind) < 0) return NULL;
        } else {
            PyObject *r = PyObject_CallMethod(args[0], "insert_packet", NULL);
            if (!r) return NULL;
            Py_DECREF(r);
        }
    }
    Py_RETURN_NONE;
}

static PyObject *SysFast_mem_bus_transfer(SysFast *f, PyObject *const *args, Py_ssize_t n) {
    if (n != 4) {
        PyErr_SetString(PyExc_TypeError, "mem_bus_transfer(stream, fast, needs_processing, size)");
        return NULL;
    }
    int fast = PyObject_IsTrue(args[1]);
    if (fast < 0 || mem_bus_transfer(f, args[0], fast, args[2], args[3]) < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *SysFast_collective_send_recv(SysFast *f, PyObject *const *args, Py_ssize_t n) {
    if (n != 4) {
        PyErr_SetString(PyExc_TypeError, "collective_send_recv(stream, dst, src, size)");
        return NULL;
    }
    if (collective_send_recv(f, args[0], args[1], args[2], args[3]) < 0) return NULL;
    Py_RETURN_NONE;
}

/* -- the scheduler: a stream's moves between phases and queues ---------------------------------------
 * Sys.proceed_to_next_vnet_baseline, Sys.schedule, Sys.insert_stream and insert_into_ready_list,
 * SchedulerUnit's notifications, StreamBaseline.init and DataSet.notify_stream_finished, step for
 * step as in Python (system/sys.py, scheduler_unit.py, stream.py): every value is read again after
 * anything that may run Python (a collective's notifier, an algorithm's run_stream_init). */

/* an int kept in the Sys's __dict__ (first_phase_streams, total_running_streams) */
static int sys_ll(SysFast *f, PyObject *name, long long *out) {
    PyObject *v = PyDict_GetItemWithError(f->sysdict, name);
    if (!v) {
        if (!PyErr_Occurred()) PyErr_SetObject(PyExc_AttributeError, name);
        return -1;
    }
    *out = PyLong_AsLongLong(v);
    return (*out == -1 && PyErr_Occurred()) ? -1 : 0;
}

static int sys_add(SysFast *f, PyObject *name, long long delta) {
    long long v;
    if (sys_ll(f, name, &v) < 0) return -1;
    PyObject *o = PyLong_FromLongLong(v + delta);
    if (!o) return -1;
    int r = PyDict_SetItem(f->sysdict, name, o);
    Py_DECREF(o);
    return r;
}

/* sys.<name>, a new reference (active_streams, ready_list) */
static PyObject *sys_obj(SysFast *f, PyObject *name) {
    PyObject *v = PyDict_GetItemWithError(f->sysdict, name);
    if (!v && !PyErr_Occurred()) PyErr_SetObject(PyExc_AttributeError, name);
    return Py_XNewRef(v);
}

/* running_streams[vnet] += delta; with delta 0 only its value */
static int running(SysFast *f, PyObject *vnet, long long delta, long long *out) {
    PyObject *d = get(f->su, su_off[SU_RUNNING], "running_streams");
    if (!d) return -1;
    PyObject *v = PyObject_GetItem(d, vnet);
    if (!v) return -1;
    long long n = PyLong_AsLongLong(v);
    Py_DECREF(v);
    if (n == -1 && PyErr_Occurred()) return -1;
    if (out) *out = n;
    if (!delta) return 0;
    PyObject *o = PyLong_FromLongLong(n + delta);
    if (!o) return -1;
    int r = PyObject_SetItem(d, vnet, o);
    Py_DECREF(o);
    return r;
}

/* an attribute of a stream or phase: its slot on the exact class, else getattr (a new reference) */
static PyObject *attr(PyObject *obj, PyTypeObject *tp, Py_ssize_t off, const char *name) {
    if (Py_IS_TYPE(obj, tp)) return Py_XNewRef(get(obj, off, name));
    return PyObject_GetAttrString(obj, name);
}

/* Sys.insert_stream: behind running streams and waiting ones of equal or higher priority */
static int insert_stream(PyObject *queue, PyObject *stream) {
    if (!PyList_Check(queue)) {
        PyErr_SetString(PyExc_TypeError, "a stream queue must be a list");
        return -1;
    }
    PyObject *prio = attr(stream, stream_type, ss_off[SS_PRIORITY], "priority");
    if (!prio) return -1;
    Py_ssize_t i = 0;
    for (; i < PyList_GET_SIZE(queue); i++) {
        PyObject *s = Py_NewRef(PyList_GET_ITEM(queue, i));
        PyObject *init = attr(s, stream_type, ss_off[SS_INIT], "initialized");
        int skip = init ? PyObject_IsTrue(init) : -1;
        Py_XDECREF(init);
        if (skip == 0) {
            PyObject *p = attr(s, stream_type, ss_off[SS_PRIORITY], "priority");
            skip = p ? PyObject_RichCompareBool(p, prio, Py_GE) : -1;
            Py_XDECREF(p);
        }
        Py_DECREF(s);
        if (skip < 0) {
            Py_DECREF(prio);
            return -1;
        }
        if (!skip) break;
    }
    Py_DECREF(prio);
    return PyList_Insert(queue, i, stream);
}

/* DataSet.notify_stream_finished(now) */
static int dataset_stream_finished(SysFast *f, PyObject *ds) {
    long long now;
    if (now_of(f, &now) < 0) return -1;
    if (!Py_IS_TYPE(ds, dataset_type)) {
        PyObject *t = PyLong_FromLongLong(now);
        PyObject *r = t ? PyObject_CallMethodOneArg(ds, str_notify_stream_finished, t) : NULL;
        Py_XDECREF(t);
        Py_XDECREF(r);
        return r ? 0 : -1;
    }
    long long done;
    if (read_ll(ds, ds_off[DS_FINISHED_STREAMS], "finished_streams", &done) < 0 ||
        write_ll(ds, ds_off[DS_FINISHED_STREAMS], done + 1) < 0)
        return -1;
    PyObject *total = get(ds, ds_off[DS_TOTAL], "total_streams"), *fin = NULL;
    if (!total || !(fin = PyLong_FromLongLong(done + 1))) return -1;
    int eq = PyObject_RichCompareBool(fin, total, Py_EQ);
    Py_DECREF(fin);
    if (eq <= 0) return eq;
    set_new(ds, ds_off[DS_FINISHED], Py_NewRef(Py_True));
    if (write_ll(ds, ds_off[DS_TICK], now) < 0) return -1;
    PyObject *notifier = get(ds, ds_off[DS_NOTIFIER], "notifier");
    if (!notifier) return -1;
    Py_INCREF(notifier);
    set_new(ds, ds_off[DS_NOTIFIER], Py_NewRef(Py_None));
    int r = 0;
    if (notifier != Py_None) {
        PyObject *res = PyObject_CallOneArg(notifier, ds);
        r = res ? 0 : -1;
        Py_XDECREF(res);
    }
    Py_DECREF(notifier);
    return r;
}

static int insert_packet(SysFast *f, PyObject *a, int kind);

/* a stream's dataset label, a new reference (NULL: not our classes' exact types, no error) */
static PyObject *label_of(PyObject *stream) {
    if (!stream || !Py_IS_TYPE(stream, stream_type)) return NULL;
    PyObject *ds = SLOT(stream, stream_off[S_DATASET]);
    if (!ds || !Py_IS_TYPE(ds, dataset_type)) return NULL;
    return Py_XNewRef(SLOT(ds, dataset_label_off));
}

static PyObject *bound(SysFast *f, const char *name);

/* PhaseBatcher.advance(key, entries) in Python: checks the phase and makes its shape's plan, or
 * raises BatchAbandoned where the phase cannot be proved (a rank twice, another collective's rank) */
static int batch_advance_py(SysFast *f, PyObject *key, PyObject *entries) {
    PyObject *res = PyObject_CallFunctionObjArgs(f->batch_advance, key, entries, NULL);
    Py_XDECREF(res);
    return res ? 0 : -1;
}

/* A full phase: each rank by its place in the ring, the recurrence (dtsim_partner_run) on its
 * shape's plan (made by PhaseBatcher.advance from the shape's first phase), the plan's use counted
 * (phase_batch.py books the traffic at the end), and each rank's hand-back (its SysFast's
 * finish_phase) at its last receive. */
static int phase_complete(SysFast *f, PyObject *key, PyObject *entries) {
    PyObject *shape = PyTuple_GetSlice(key, 1, PyTuple_GET_SIZE(key));
    if (!shape) return -1;
    PyObject *plan = PyDict_GetItemWithError(f->batch_plans, shape); /* borrowed */
    if (!plan && !PyErr_Occurred() && batch_advance_py(f, key, entries) == 0)
        plan = PyDict_GetItemWithError(f->batch_plans, shape);
    Py_ssize_t n = PyList_GET_SIZE(entries), steps = 0, rows = 0;
    int64_t *t = NULL;
    PyObject **algos = NULL;
    int r = -1;
    if (!plan || !PyTuple_CheckExact(plan) || PyTuple_GET_SIZE(plan) != 5) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_SystemError, "phase_batch.py made no plan of five for a phase");
        plan = NULL;
        goto done;
    }
    Py_INCREF(plan); /* held while the hand-backs are scheduled */
    PyObject *packed = PyTuple_GET_ITEM(plan, 0), *processed = PyTuple_GET_ITEM(plan, 1),
             *size = PyTuple_GET_ITEM(plan, 2), *steps_o = PyTuple_GET_ITEM(plan, 3);
    steps = PyLong_AsSsize_t(steps_o);
    if (steps == -1 && PyErr_Occurred()) goto done;
    rows = PyLong_AsSsize_t(PyTuple_GET_ITEM(plan, 4));
    if (rows == -1 && PyErr_Occurred()) goto done;
    if (!PyBytes_Check(packed) || (rows != 1 && rows != steps) ||
        PyBytes_GET_SIZE(packed) != (Py_ssize_t)sizeof(int64_t) * (2 * n * rows + steps + 1)) {
        PyErr_SetString(PyExc_SystemError, "a phase plan for another ring size or number of steps");
        goto done;
    }
    const int64_t *partners = (const int64_t *)PyBytes_AS_STRING(packed), *delays = partners + n * rows,
                  *extra = delays + n * rows;
    t = PyMem_Malloc(sizeof(int64_t) * 2 * (size_t)n);
    algos = PyMem_Calloc((size_t)n, sizeof(PyObject *));
    if (!t || !algos) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *entry = PyList_GET_ITEM(entries, k), *algo = PyTuple_GET_ITEM(entry, 1);
        PyObject *topo = SLOT(algo, packet_topology_off);
        long long index, start;
        if (!topo || topo_ll(topo, T_INDEX, &index) < 0) goto done;
        if (index < 0 || index >= n || algos[index]) { /* a rank twice: Python says why it cannot be batched */
            if (batch_advance_py(f, key, entries) == 0)
                PyErr_SetString(PyExc_SystemError, "phase_batch.py passed a phase with a rank twice");
            goto done;
        }
        start = PyLong_AsLongLong(PyTuple_GET_ITEM(entry, 0));
        if (start == -1 && PyErr_Occurred()) goto done;
        algos[index] = algo;
        t[index] = start;
    }
    int late = dtsim_partner_run(partners, delays, extra, n, steps, rows, t, t + n);
    for (Py_ssize_t i = 0; i < n && !late; i++) late = t[i] > f->batch_max_time;
    if (late) { /* the event path ends such a run by its clock */
        PyErr_SetString(f->batch_abandoned, "a time past the 64-bit clock");
        goto done;
    }
    PyObject *uses = PyDict_GetItemWithError(f->batch_uses, shape);
    long long u = 0;
    if (uses && (u = PyLong_AsLongLong(uses)) == -1 && PyErr_Occurred()) goto done;
    if (!uses && PyErr_Occurred()) goto done;
    PyObject *u1 = PyLong_FromLongLong(u + 1);
    if (!u1 || PyDict_SetItem(f->batch_uses, shape, u1) < 0) {
        Py_XDECREF(u1);
        goto done;
    }
    Py_DECREF(u1);
    long long now;
    if (now_of(f, &now) < 0) goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *owner = PyObject_GetAttr(SLOT(algos[i], algo_off[A_SYS]), str__fast);
        if (!owner) goto done;
        PyObject *cb = Py_TYPE(owner) == Py_TYPE(f) ? ((SysFast *)owner)->finish_phase_cb : NULL;
        if (!cb) {
            Py_DECREF(owner);
            PyErr_SetString(PyExc_TypeError, "a batched phase's rank without the C core's finish_phase");
            goto done;
        }
        Py_INCREF(cb);
        Py_DECREF(owner);
        PyObject *delay = PyLong_FromLongLong(t[i] - now);
        PyObject *args[7] = {NULL, delay, cb, algos[i], steps_o, processed, size};
        PyObject *res = delay ? PyObject_Vectorcall(f->schedule, args + 1, 6 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL)
                              : NULL;
        Py_XDECREF(delay);
        Py_DECREF(cb);
        if (!res) goto done;
        Py_DECREF(res);
    }
    r = 0;
done:
    PyMem_Free(t);
    PyMem_Free(algos);
    Py_XDECREF(plan);
    Py_DECREF(shape);
    return r;
}

/* Ring's or HalvingDoubling's run_stream_init where the batcher takes the phase
 * (system/shortcuts/phase_batch.py): the rank's (start, algorithm) joins its phase's entry list,
 * and the last rank to join runs the phase (phase_complete). 1 joined; 2 the event path's (a phase
 * of fewer than MIN_STEPS messages, which ring_batch.py's larger MIN_STEPS leaves to it too); 0 the
 * algorithm's own run_stream_init decides (a zero-byte message or a zero endpoint delay, which the
 * event path notes; other classes); -1 error. ``kind``: ours()'s, 1 or 3. */
static int phase_join(SysFast *f, PyObject *a, int kind) {
    long long steps, n, now;
    if (get_ll(a, A_STREAM_COUNT, &steps) < 0 || get_ll(a, A_NODES, &n) < 0) return -1;
    if (steps < f->batch_min_steps && steps >= 1 && n >= 2) return 2;
    if (steps < 1 || n < 2) return 0;
    PyObject *size = get(a, algo_off[A_MSG_SIZE], "msg_size"), *fast = get(a, algo_off[A_FAST], "fast"),
             *stream = get(a, algo_off[A_STREAM], "stream"), *ct = get(a, algo_off[A_COM_TYPE], "com_type"),
             *topo = get(a, packet_topology_off, "topology"),
             *dir = kind == 1 ? get(a, ring_direction_off, "direction") : Py_None;
    if (!size || !fast || !stream || !ct || !topo || !dir) return -1;
    int isfast = PyObject_IsTrue(fast), zero = PyObject_Not(size);
    if (isfast < 0 || zero < 0) return -1;
    if (zero || (!isfast && !f->endpoint_delay) || !Py_IS_TYPE(topo, topo_type)) return 0;
    PyObject *label = label_of(stream);
    if (!label) return PyErr_Occurred() ? -1 : 0;
    PyObject *tag = SLOT(stream, stream_off[S_STREAM_ID]);
    if (!tag) {
        Py_DECREF(label);
        return 0;
    }
    PyObject *ident = SLOT(topo, topo_off[T_IDENTITY]);
    ident = ident && ident != Py_None ? Py_NewRef(ident) : PyObject_GetAttr(topo, str_identity);
    /* (tag, ring, size, collective, group ring, direction): a ring phase and a halving-doubling one
     * of one collective never share a key (None is not a Direction) */
    PyObject *key = ident ? PyTuple_Pack(6, tag, ident, size, ct, fast, dir) : NULL;
    Py_XDECREF(ident);
    PyObject *entries = NULL, *entry = NULL;
    int r = -1;
    if (!key || now_of(f, &now) < 0) goto done;
    entries = PyDict_GetItemWithError(f->batch_open, key);
    if (entries) {
        Py_INCREF(entries);
    } else {
        if (PyErr_Occurred() || !(entries = PyList_New(0)) || PyDict_SetItem(f->batch_open, key, entries) < 0)
            goto done;
    }
    PyObject *t = PyLong_FromLongLong(now);
    entry = t ? PyTuple_Pack(2, t, a) : NULL;
    Py_XDECREF(t);
    if (!entry || PyList_Append(entries, entry) < 0) goto done;
    Py_ssize_t joined = PyList_GET_SIZE(entries);
    int same = 1;
    if (joined > 1) { /* another collective's phase under the same key: the batcher abandons it */
        PyObject *first = PyTuple_GET_ITEM(PyList_GET_ITEM(entries, 0), 1);
        PyObject *other = label_of(SLOT(first, algo_off[A_STREAM]));
        same = other ? PyObject_RichCompareBool(label, other, Py_EQ) : 0;
        Py_XDECREF(other);
        if (same < 0) goto done;
    }
    if (joined == n || !same) {
        if (PyDict_DelItem(f->batch_open, key) < 0) goto done;
        if (same ? phase_complete(f, key, entries) < 0 : batch_advance_py(f, key, entries) < 0) goto done;
        if (!same) { /* advance raises BatchAbandoned on ranks of two collectives */
            PyErr_SetString(PyExc_SystemError, "phase_batch.py passed ranks of two collectives under one key");
            goto done;
        }
    }
    r = 1;
done:
    Py_DECREF(label);
    Py_XDECREF(key);
    Py_XDECREF(entries);
    Py_XDECREF(entry);
    return r;
}

/* algorithm.run_stream_init(): for ours, PacketAlgorithm's parallel_reduce insertions, unless the C
 * core's batcher (phase_join) or a Ring's Python one (system/shortcuts/ring_batch.py) takes the phase */
static int run_stream_init(SysFast *f, PyObject *algo) {
    int kind = ours(f, algo);
    if (kind) {
        /* Ring.run_stream_init asks sys.ring_batcher first; AllToAll inherits it, but the batcher's join
         * refuses every algorithm but the exact Ring (ring_batch.py), so direct goes straight to its packets */
        int plain = 1, ask = kind == 1;
        if ((kind == 1 || kind == 3) && f->batch_open) {
            int joined = phase_join(f, algo, kind);
            if (joined < 0) return -1;
            if (joined == 1) return 0;
            if (joined == 2) ask = 0; /* too short for either batcher: the event path's */
        }
        if (ask) {
            PyObject *b = PyDict_GetItemWithError(f->sysdict, str_ring_batcher);
            if (!b && PyErr_Occurred()) return -1;
            plain = b == Py_None;
        }
        if (plain) {
            long long count;
            if (get_ll(algo, A_PARALLEL, &count) < 0) return -1;
            for (long long i = 0; i < count; i++)
                if (insert_packet(f, algo, kind) < 0) return -1;
            return 0;
        }
    }
    PyObject *r = PyObject_CallMethodNoArgs(algo, str_run_stream_init);
    Py_XDECREF(r);
    return r ? 0 : -1;
}

/* StreamBaseline.init: start the current phase's algorithm */
static int stream_init(SysFast *f, PyObject *stream) {
    if (!Py_IS_TYPE(stream, stream_type)) {
        PyObject *r = PyObject_CallMethodNoArgs(stream, str_init);
        Py_XDECREF(r);
        return r ? 0 : -1;
    }
    set_new(stream, ss_off[SS_INIT], Py_NewRef(Py_True));
    PyObject *phase = get(stream, stream_off[S_PHASE], "my_current_phase");
    if (!phase) return -1;
    Py_INCREF(phase);
    PyObject *en = attr(phase, phase_type, ph_off[PH_ENABLED], "enabled");
    int on = en ? PyObject_IsTrue(en) : -1;
    Py_XDECREF(en);
    PyObject *algo = on > 0 ? attr(phase, phase_type, phase_algorithm_off, "algorithm") : NULL;
    Py_DECREF(phase);
    if (on <= 0) return on;
    if (!algo) return -1;
    int r = run_stream_init(f, algo);
    Py_DECREF(algo);
    return r;
}

/* SchedulerUnit._start_waiting(vnet) */
static int start_waiting(SysFast *f, PyObject *vnet) {
    PyObject *active = sys_obj(f, str_active_streams);
    if (!active) return -1;
    PyObject *queue = PyObject_GetItem(active, vnet);
    Py_DECREF(active);
    if (!queue) return -1;
    long long i, n, qt;
    int r = -1;
    if (!PyList_Check(queue)) {
        PyErr_SetString(PyExc_TypeError, "a stream queue must be a list");
        goto done;
    }
    if (running(f, vnet, 0, &i) < 0 || read_ll(f->su, su_off[SU_QT], "queue_threshold", &qt) < 0) goto done;
    for (;;) {
        if (i >= PyList_GET_SIZE(queue)) break;
        if (running(f, vnet, 0, &n) < 0) goto done;
        if (n >= qt) break;
        PyObject *s = Py_NewRef(PyList_GET_ITEM(queue, i));
        int rc = stream_init(f, s);
        Py_DECREF(s);
        if (rc < 0 || running(f, vnet, 1, NULL) < 0) goto done;
        i++;
        if (read_ll(f->su, su_off[SU_QT], "queue_threshold", &qt) < 0) goto done;
    }
    r = 0;
done:
    Py_DECREF(queue);
    return r;
}

static int schedule(SysFast *f, long long num);

/* SchedulerUnit._schedule_ready */
static int schedule_ready(SysFast *f) {
    long long fps, trs, rlt, mrs;
    if (sys_ll(f, str_fps, &fps) < 0 || sys_ll(f, str_trs, &trs) < 0 ||
        read_ll(f->su, su_off[SU_RLT], "ready_list_threshold", &rlt) < 0 ||
        read_ll(f->su, su_off[SU_MAX], "max_running_streams", &mrs) < 0)
        return -1;
    if (fps < rlt && trs < mrs) {
        long long room = rlt - fps;
        return schedule(f, room < mrs - trs ? room : mrs - trs);
    }
    return 0;
}

/* SchedulerUnit.notify_stream_removed(vnet) */
static int stream_removed(SysFast *f, PyObject *vnet) {
    if (running(f, vnet, -1, NULL) < 0 || schedule_ready(f) < 0) return -1;
    return start_waiting(f, vnet);
}

/* Sys.schedule(num): start the first num streams of the ready list */
static int schedule(SysFast *f, long long num) {
    PyObject *ready = sys_obj(f, str_ready_list);
    if (!ready) return -1;
    int r = -1;
    if (!PyList_Check(ready)) {
        PyErr_SetString(PyExc_TypeError, "ready_list must be a list");
        goto done;
    }
    long long counter = num < PyList_GET_SIZE(ready) ? num : PyList_GET_SIZE(ready);
    while (counter > 0) {
        if (!PyList_GET_SIZE(ready)) {
            PyErr_SetString(PyExc_IndexError, "list index out of range");
            goto done;
        }
        PyObject *stream = Py_NewRef(PyList_GET_ITEM(ready, 0));
        int rc = proceed(f, stream);
        Py_ssize_t i = 0, n = rc < 0 ? 0 : PyList_GET_SIZE(ready);
        int found = 0;
        for (; rc == 0 && i < n; i++) { /* ready_list.remove(stream) */
            PyObject *x = Py_NewRef(PyList_GET_ITEM(ready, i));
            found = PyObject_RichCompareBool(x, stream, Py_EQ);
            Py_DECREF(x);
            if (found) break;
        }
        Py_DECREF(stream);
        if (rc < 0 || found < 0) goto done;
        if (!found) {
            PyErr_SetString(PyExc_ValueError, "list.remove(x): x not in list");
            goto done;
        }
        if (PyList_SetSlice(ready, i, i + 1, NULL) < 0) goto done;
        counter--;
        if (sys_add(f, str_fps, 1) < 0 || sys_add(f, str_trs, 1) < 0) goto done;
    }
    r = 0;
done:
    Py_DECREF(ready);
    return r;
}

/* Sys.proceed_to_next_vnet_baseline(stream): into the next phase's queue, or finished */
static int proceed(SysFast *f, PyObject *stream) {
    PyObject *phases = Py_IS_TYPE(stream, stream_type) ? SLOT(stream, ss_off[SS_PHASES]) : NULL;
    PyObject *cur = phases ? SLOT(stream, stream_off[S_PHASE]) : NULL;
    if (!phases || !PyList_CheckExact(phases) || !cur ||
        (PyList_GET_SIZE(phases) && !Py_IS_TYPE(PyList_GET_ITEM(phases, 0), phase_type))) {
        /* not the classes this code knows: the Python method (it needs no C state) */
        PyObject *r = PyObject_CallFunctionObjArgs(f->py_proceed, f->sys, stream, NULL);
        Py_XDECREF(r);
        return r ? 0 : -1;
    }
    long long prev, steps;
    if (read_ll(stream, ss_off[SS_QUEUE], "current_queue_id", &prev) < 0 ||
        read_ll(stream, ss_off[SS_STEPS], "steps_finished", &steps) < 0)
        return -1;
    PyObject *prev_vnet = Py_NewRef(SLOT(stream, ss_off[SS_QUEUE]));
    PyObject *phase = NULL, *nxt = NULL, *q = NULL;
    int r = -1, empty;
    if (steps == 1 && sys_add(f, str_fps, -1) < 0) goto done;
    phases = get(stream, ss_off[SS_PHASES], "phases_to_go");
    if (!phases || (empty = PyObject_Not(phases)) < 0) goto done;
    if (empty) {
        PyObject *ds = get(stream, stream_off[S_DATASET], "dataset");
        if (!ds) goto done;
        Py_INCREF(ds);
        int rc = dataset_stream_finished(f, ds);
        Py_DECREF(ds);
        if (rc < 0) goto done;
    }
    phase = Py_XNewRef(get(stream, stream_off[S_PHASE], "my_current_phase"));
    if (!phase) goto done;
    if (prev >= 0) {
        PyObject *en = attr(phase, phase_type, ph_off[PH_ENABLED], "enabled");
        int on = en ? PyObject_IsTrue(en) : -1;
        Py_XDECREF(en);
        if (on < 0) goto done;
        if (on) { /* out of the queue it ran on */
            PyObject *qid = attr(phase, phase_type, ph_off[PH_QUEUE], "queue_id"), *active = NULL, *target = NULL;
            if (qid && (active = sys_obj(f, str_active_streams))) target = PyObject_GetItem(active, qid);
            Py_XDECREF(qid);
            Py_XDECREF(active);
            if (!target) goto done;
            PyObject *sid = Py_XNewRef(get(stream, stream_off[S_STREAM_ID], "stream_id"));
            int rc = sid && PyList_Check(target) ? 0 : -1;
            if (sid && !PyList_Check(target)) PyErr_SetString(PyExc_TypeError, "a stream queue must be a list");
            for (Py_ssize_t i = 0; rc == 0 && i < PyList_GET_SIZE(target); i++) {
                PyObject *s = Py_NewRef(PyList_GET_ITEM(target, i));
                PyObject *other = attr(s, stream_type, stream_off[S_STREAM_ID], "stream_id");
                int eq = other ? PyObject_RichCompareBool(other, sid, Py_EQ) : -1;
                Py_XDECREF(other);
                Py_DECREF(s);
                if (eq < 0) rc = -1;
                else if (eq) {
                    rc = PyList_SetSlice(target, i, i + 1, NULL);
                    break;
                }
            }
            Py_XDECREF(sid);
            Py_DECREF(target);
            if (rc < 0) goto done;
        }
    }
    phases = get(stream, ss_off[SS_PHASES], "phases_to_go");
    if (!phases || (empty = PyObject_Not(phases)) < 0) goto done;
    if (empty) {
        if (sys_add(f, str_trs, -1) < 0) goto done;
        /* unlinked, so that a finished stream is freed by its reference count */
        set_new(stream, stream_off[S_PHASE], Py_NewRef(Py_None));
        r = prev >= 0 ? stream_removed(f, prev_vnet) : 0;
        goto done;
    }
    if (read_ll(stream, ss_off[SS_STEPS], "steps_finished", &steps) < 0 ||
        write_ll(stream, ss_off[SS_STEPS], steps + 1) < 0)
        goto done;
    if (!PyList_Check(phases)) {
        PyErr_SetString(PyExc_TypeError, "phases_to_go must be a list");
        goto done;
    }
    nxt = Py_NewRef(PyList_GET_ITEM(phases, 0)); /* phases_to_go.pop(0) */
    if (PyList_SetSlice(phases, 0, 1, NULL) < 0) goto done;
    q = attr(nxt, phase_type, ph_off[PH_QUEUE], "queue_id");
    if (!q) goto done;
    {
        PyObject *zero = PyLong_FromLong(0);
        int neg = zero ? PyObject_RichCompareBool(q, zero, Py_LT) : -1;
        Py_XDECREF(zero);
        if (neg < 0) goto done;
        if (neg) {
            PyObject *pos = PyNumber_Negative(q);
            if (!pos || PyObject_SetAttrString(nxt, "queue_id", pos) < 0) {
                Py_XDECREF(pos);
                goto done;
            }
            Py_SETREF(q, pos);
        }
    }
    {
        PyObject *ct = attr(nxt, phase_type, ph_off[PH_COMTYPE], "comm_type");
        if (!ct) goto done;
        set_new(stream, ss_off[SS_QUEUE], Py_NewRef(q));
        set_new(stream, ss_off[SS_COMTYPE], ct);
        set_new(stream, stream_off[S_PHASE], Py_NewRef(nxt));
        set_new(stream, ss_off[SS_INIT], Py_NewRef(Py_False));
    }
    {
        PyObject *en = attr(nxt, phase_type, ph_off[PH_ENABLED], "enabled");
        int on = en ? PyObject_IsTrue(en) : -1;
        Py_XDECREF(en);
        if (on < 0) goto done;
        if (on) {
            PyObject *active = sys_obj(f, str_active_streams), *queue = NULL;
            if (active) queue = PyObject_GetItem(active, q);
            Py_XDECREF(active);
            int rc = queue ? insert_stream(queue, stream) : -1;
            Py_XDECREF(queue);
            if (rc < 0) goto done;
        }
    }
    if (prev >= 0 && stream_removed(f, prev_vnet) < 0) goto done;
    r = start_waiting(f, q); /* SchedulerUnit.notify_stream_added */
done:
    Py_DECREF(prev_vnet);
    Py_XDECREF(phase);
    Py_XDECREF(nxt);
    Py_XDECREF(q);
    return r;
}

static PyObject *SysFast_proceed(SysFast *f, PyObject *stream) {
    if (!f->su) {
        PyErr_SetString(PyExc_RuntimeError, "enable_scheduling() was not called");
        return NULL;
    }
    if (proceed(f, stream) < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *SysFast_schedule(SysFast *f, PyObject *num) {
    long long n = PyLong_AsLongLong(num);
    if (n == -1 && PyErr_Occurred()) return NULL;
    if (!f->su) {
        PyErr_SetString(PyExc_RuntimeError, "enable_scheduling() was not called");
        return NULL;
    }
    if (schedule(f, n) < 0) return NULL;
    Py_RETURN_NONE;
}

/* Sys.insert_into_ready_list(stream) */
static PyObject *SysFast_insert_into_ready_list(SysFast *f, PyObject *stream) {
    if (!f->su) {
        PyErr_SetString(PyExc_RuntimeError, "enable_scheduling() was not called");
        return NULL;
    }
    PyObject *ready = sys_obj(f, str_ready_list);
    if (!ready) return NULL;
    int rc = insert_stream(ready, stream);
    Py_DECREF(ready);
    if (rc < 0 || schedule_ready(f) < 0) return NULL; /* SchedulerUnit.notify_stream_added_into_ready_list */
    Py_RETURN_NONE;
}

/* enable_scheduling(scheduler_unit, proceed): the Sys is exactly Sys and its unit exactly
 * SchedulerUnit (Sys.__init__ checks); proceed is the Python Sys.proceed_to_next_vnet_baseline */
static PyObject *SysFast_enable_scheduling(SysFast *f, PyObject *const *args, Py_ssize_t n) {
    if (n != 2 || !su_type || !Py_IS_TYPE(args[0], su_type) || !PyCallable_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "enable_scheduling(scheduler_unit: SchedulerUnit, proceed)");
        return NULL;
    }
    PyObject *d = PyObject_GenericGetDict(f->sys, NULL);
    if (!d) return NULL;
    Py_XSETREF(f->sysdict, d);
    Py_XSETREF(f->su, Py_NewRef(args[0]));
    Py_XSETREF(f->py_proceed, Py_NewRef(args[1]));
    Py_RETURN_NONE;
}

/* enable_phase_batch(open, advance, min_steps, plans, uses, max_time, abandoned): ring and
 * halving-doubling phases join the batcher's lists (system/shortcuts/phase_batch.py) */
static PyObject *SysFast_enable_phase_batch(SysFast *f, PyObject *const *args, Py_ssize_t n) {
    if (n != 7 || !PyDict_CheckExact(args[0]) || !PyCallable_Check(args[1]) || !PyDict_CheckExact(args[3]) ||
        !PyDict_CheckExact(args[4]) || !PyExceptionClass_Check(args[6])) {
        PyErr_SetString(PyExc_TypeError, "enable_phase_batch(open: dict, advance, min_steps: int, plans: dict, "
                                         "uses: dict, max_time: int, abandoned: exception class)");
        return NULL;
    }
    long long m = PyLong_AsLongLong(args[2]), top = PyLong_AsLongLong(args[5]);
    if ((m == -1 || top == -1) && PyErr_Occurred()) return NULL;
    PyObject *cb = bound(f, "finish_phase");
    if (!cb) return NULL;
    Py_XSETREF(f->finish_phase_cb, cb);
    Py_XSETREF(f->batch_open, Py_NewRef(args[0]));
    Py_XSETREF(f->batch_advance, Py_NewRef(args[1]));
    Py_XSETREF(f->batch_plans, Py_NewRef(args[3]));
    Py_XSETREF(f->batch_uses, Py_NewRef(args[4]));
    Py_XSETREF(f->batch_abandoned, Py_NewRef(args[6]));
    f->batch_min_steps = m;
    f->batch_max_time = top;
    Py_RETURN_NONE;
}

/* finish_phase(algorithm, messages, processed, size): a batched ring or halving-doubling phase's
 * hand-back at its last receive (Ring.finish_batched, for both). Every message is out and in, as on
 * the event path there; its last packet (``processed``, ``size``: what the event path's last
 * insertion carries) goes through the memory bus and ends the phase as there (run_general, then
 * the exit). */
static PyObject *SysFast_finish_phase(SysFast *f, PyObject *const *args, Py_ssize_t n) {
    int kind = n == 4 ? ours(f, args[0]) : 0;
    if (kind != 1 && kind != 3) {
        PyErr_SetString(PyExc_TypeError, "finish_phase(algorithm: this Sys's Ring or HalvingDoubling, messages, "
                                         "processed, size)");
        return NULL;
    }
    PyObject *a = args[0];
    long long messages = PyLong_AsLongLong(args[1]);
    if (messages == -1 && PyErr_Occurred()) return NULL;
    PyObject *fast = get(a, algo_off[A_FAST], "fast"), *stream = get(a, algo_off[A_STREAM], "stream");
    int isfast = fast ? PyObject_IsTrue(fast) : -1;
    if (!stream || isfast < 0 || set_ll(a, A_RECEIVED, messages) < 0 || set_ll(a, A_STREAM_COUNT, 0) < 0 ||
        set_ll(a, A_FREE_PACKETS, 0) < 0 || (kind == 1 && set_ll(a, A_PACKETS, 1) < 0))
        return NULL;
    Py_INCREF(stream);
    int r = mem_bus_transfer(f, stream, isfast, args[2], args[3]);
    Py_DECREF(stream);
    if (r < 0) return NULL;
    Py_RETURN_NONE;
}

static PyMethodDef SysFast_methods[] = {
    {"mem_bus_transfer", (PyCFunction)(void (*)(void))SysFast_mem_bus_transfer, METH_FASTCALL,
     "Sys.mem_bus_transfer(stream, fast, needs_processing, size)"},
    {"collective_send_recv", (PyCFunction)(void (*)(void))SysFast_collective_send_recv, METH_FASTCALL,
     "Sys.collective_send_recv(stream, dst, src, size)"},
    {"call_events", (PyCFunction)SysFast_call_events, METH_O, "Sys._call_events(t)"},
    {"register_event", (PyCFunction)(void (*)(void))SysFast_register_event, METH_FASTCALL,
     "Sys.register_event(delay_ns, callback, *args): callback(*args) in this Sys's batch for that tick"},
    {"bundle_arrived", (PyCFunction)(void (*)(void))SysFast_bundle_arrived, METH_FASTCALL,
     "Sys._bundle_arrived(stream, needs_processing, size)"},
    {"received", (PyCFunction)SysFast_received, METH_O, "algorithm.on_packet_received(), for the exchange"},
    {"insert_packets", (PyCFunction)(void (*)(void))SysFast_insert_packets, METH_FASTCALL,
     "insert_packets(algorithm, count): count x algorithm.insert_packet() (a stream's start)"},
    {"enable_scheduling", (PyCFunction)(void (*)(void))SysFast_enable_scheduling, METH_FASTCALL,
     "enable_scheduling(scheduler_unit, proceed): the streams' moves between queues in C too"},
    {"proceed", (PyCFunction)SysFast_proceed, METH_O, "Sys.proceed_to_next_vnet_baseline(stream)"},
    {"schedule", (PyCFunction)SysFast_schedule, METH_O, "Sys.schedule(num)"},
    {"insert_into_ready_list", (PyCFunction)SysFast_insert_into_ready_list, METH_O,
     "Sys.insert_into_ready_list(stream)"},
    {"enable_phase_batch", (PyCFunction)(void (*)(void))SysFast_enable_phase_batch, METH_FASTCALL,
     "enable_phase_batch(open, advance, min_steps, plans, uses, max_time, abandoned): ring and halving-doubling "
     "phases join the batcher (system/shortcuts/phase_batch.py)"},
    {"finish_phase", (PyCFunction)(void (*)(void))SysFast_finish_phase, METH_FASTCALL,
     "finish_phase(algorithm, messages, processed, size): a batched phase's hand-back at its last receive"},
    {NULL, NULL, 0, NULL},
};

static PyObject *bound(SysFast *f, const char *name) {
    return PyObject_GetAttrString((PyObject *)f, name);
}

static int SysFast_init(SysFast *f, PyObject *args, PyObject *kw) {
    static char *names[] = {"sys", "clock", "schedule", "exchange", "npu_id", "endpoint_delay_ns", "local_mem_bw",
                            NULL};
    PyObject *sys, *clock, *schedule, *exchange, *id, *bw;
    long long delay;
    if (!ring_type) {
        PyErr_SetString(PyExc_RuntimeError, "system._sys_core.configure() was not called");
        return -1;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OOOOOLO", names, &sys, &clock, &schedule, &exchange, &id, &delay,
                                     &bw))
        return -1;
    if (!f->ticks && !(f->ticks = PyMem_Calloc(1, sizeof(struct Ticks)))) {
        PyErr_NoMemory();
        return -1;
    }
    double b = PyFloat_AsDouble(bw);
    if (b == -1.0 && PyErr_Occurred()) return -1;
    int exact = PyFloat_Check(bw);
    if (!exact && PyLong_Check(bw)) {
        long long v = PyLong_AsLongLong(bw);
        if (v == -1 && PyErr_Occurred()) {
            PyErr_Clear();
        } else {
            exact = v <= (1LL << 53) && v >= -(1LL << 53);
        }
    }
    Py_XSETREF(f->sys, Py_NewRef(sys));
    Py_XSETREF(f->clock, Py_NewRef(clock));
    Py_XSETREF(f->schedule, Py_NewRef(schedule));
    Py_XSETREF(f->exchange, Py_NewRef(exchange));
    Py_XSETREF(f->id, Py_NewRef(id));
    f->endpoint_delay = delay;
    f->mem_bw = b;
    f->mem_bw_exact = exact;
    f->core = NULL;
    load_core_api();
    if (core_api && PyObject_TypeCheck(clock, core_api->core_type) && PyCFunction_Check(schedule) &&
        PyCFunction_GET_SELF(schedule) == clock)
        f->core = (Queue *)clock; /* held by f->clock */
    Py_XSETREF(f->call_events_cb, bound(f, "call_events"));
    Py_XSETREF(f->bundle_cb, bound(f, "bundle_arrived"));
    Py_XSETREF(f->received_cb, bound(f, "received"));
    return (f->call_events_cb && f->bundle_cb && f->received_cb) ? 0 : -1;
}

static int SysFast_traverse(SysFast *f, visitproc visit, void *arg) {
    Py_VISIT(f->sys);
    Py_VISIT(f->clock);
    struct Ticks *k = f->ticks;
    for (Py_ssize_t i = 0; k && i < k->map.cap; i++) {
        Batch *b = k->map.vals[i] == LMAP_EMPTY ? NULL : (Batch *)k->map.vals[i];
        for (Py_ssize_t j = 0; b && j < b->n; j++) {
            Py_VISIT(b->e[j].cb);
            Py_VISIT(b->e[j].a[0]);
            Py_VISIT(b->e[j].a[1]);
            Py_VISIT(b->e[j].a[2]);
        }
    }
    Py_VISIT(f->schedule);
    Py_VISIT(f->exchange);
    Py_VISIT(f->id);
    Py_VISIT(f->call_events_cb);
    Py_VISIT(f->bundle_cb);
    Py_VISIT(f->received_cb);
    Py_VISIT(f->su);
    Py_VISIT(f->sysdict);
    Py_VISIT(f->py_proceed);
    Py_VISIT(f->batch_open);
    Py_VISIT(f->batch_advance);
    Py_VISIT(f->batch_plans);
    Py_VISIT(f->batch_uses);
    Py_VISIT(f->batch_abandoned);
    Py_VISIT(f->finish_phase_cb);
    Py_VISIT(Py_TYPE(f));
    return 0;
}

static int SysFast_clear(SysFast *f) {
    Py_CLEAR(f->sys);
    Py_CLEAR(f->clock);
    ticks_clear(f->ticks);
    Py_CLEAR(f->schedule);
    Py_CLEAR(f->exchange);
    Py_CLEAR(f->id);
    Py_CLEAR(f->call_events_cb);
    Py_CLEAR(f->bundle_cb);
    Py_CLEAR(f->received_cb);
    Py_CLEAR(f->su);
    Py_CLEAR(f->sysdict);
    Py_CLEAR(f->py_proceed);
    Py_CLEAR(f->batch_open);
    Py_CLEAR(f->batch_advance);
    Py_CLEAR(f->batch_plans);
    Py_CLEAR(f->batch_uses);
    Py_CLEAR(f->batch_abandoned);
    Py_CLEAR(f->finish_phase_cb);
    return 0;
}

static void SysFast_dealloc(SysFast *f) {
    PyTypeObject *tp = Py_TYPE(f);
    PyObject_GC_UnTrack(f);
    SysFast_clear(f);
    ticks_free(f->ticks);
    f->ticks = NULL;
    tp->tp_free((PyObject *)f);
    Py_DECREF(tp);
}

static PyObject *SysFast_get_direct(SysFast *f, void *Py_UNUSED(closure)) {
    return PyBool_FromLong(f->core != NULL);
}

static PyGetSetDef SysFast_getset[] = {
    {"batches", (getter)SysFast_get_batches, NULL, "the pending batches, {tick: [(callback, args), ...]} (a snapshot)",
     NULL},
    {"direct", (getter)SysFast_get_direct, NULL,
     "whether events go straight into the C queue's calendar (else through the backend's schedule)", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot SysFast_slots[] = {
    {Py_tp_getset, SysFast_getset},
    {Py_tp_doc, "One Sys's per-message path in C (system/sys.py: Sys; Ring, AllToAll and HalvingDoubling)."},
    {Py_tp_new, PyType_GenericNew},
    {Py_tp_init, SysFast_init},
    {Py_tp_dealloc, SysFast_dealloc},
    {Py_tp_traverse, SysFast_traverse},
    {Py_tp_clear, SysFast_clear},
    {Py_tp_methods, SysFast_methods},
    {0, NULL},
};

static PyType_Spec SysFast_spec = {
    .name = "system._sys_core.SysFast",
    .basicsize = sizeof(SysFast),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .slots = SysFast_slots,
};

/* configure(Ring, StreamBaseline, CollectivePhase, DataSet, ComType.ALL_REDUCE, ComType.REDUCE_SCATTER,
 * AllToAll, RingTopology, HalvingDoubling, SchedulerUnit):
 * the classes whose slots this code reads, and where */
static PyObject *configure(PyObject *Py_UNUSED(m), PyObject *args) {
    PyObject *ring, *stream, *phase, *dataset, *ar, *rs, *direct, *topo, *hd, *su, *algorithm;
    if (!PyArg_ParseTuple(args, "O!O!O!O!OOO!O!O!O!O!", &PyType_Type, &ring, &PyType_Type, &stream, &PyType_Type,
                          &phase, &PyType_Type, &dataset, &ar, &rs, &PyType_Type, &direct, &PyType_Type, &topo,
                          &PyType_Type, &hd, &PyType_Type, &su, &PyType_Type, &algorithm))
        return NULL;
    /* what new_stream stands in for: StreamBaseline.__init__ and Algorithm.init, as configured */
    Py_ssize_t owner, algo_stream, algo_sys;
    PyObject *s_init = PyDict_GetItemString(((PyTypeObject *)stream)->tp_dict, "__init__"),
             *a_init = PyDict_GetItemString(((PyTypeObject *)algorithm)->tp_dict, "init");
    if (!s_init || !a_init || !PyType_IsSubtype((PyTypeObject *)ring, (PyTypeObject *)algorithm)) {
        PyErr_SetString(PyExc_TypeError, "configure: StreamBaseline.__init__ and Algorithm.init, Ring an Algorithm");
        return NULL;
    }
    if (slot_offset((PyTypeObject *)stream, "owner", &owner) < 0 ||
        slot_offset((PyTypeObject *)algorithm, "stream", &algo_stream) < 0 ||
        slot_offset((PyTypeObject *)algorithm, "sys", &algo_sys) < 0)
        return NULL;
    Py_ssize_t a[A_N], s[S_N], pa, dl, d[D_N], t[T_N], h[H_N], check, ss[SS_N], ph[PH_N], ds[DS_N], u[SU_N];
    for (int i = 0; i < SS_N; i++)
        if (slot_offset((PyTypeObject *)stream, sched_stream_slots[i], &ss[i]) < 0) return NULL;
    for (int i = 0; i < PH_N; i++)
        if (slot_offset((PyTypeObject *)phase, phase_slots[i], &ph[i]) < 0) return NULL;
    for (int i = 0; i < DS_N; i++)
        if (slot_offset((PyTypeObject *)dataset, ds_slots[i], &ds[i]) < 0) return NULL;
    for (int i = 0; i < SU_N; i++)
        if (slot_offset((PyTypeObject *)su, su_slots[i], &u[i]) < 0) return NULL;
    for (int i = 0; i < A_N; i++) {
        if (slot_offset((PyTypeObject *)ring, algo_slots[i], &a[i]) < 0 ||
            slot_offset((PyTypeObject *)direct, algo_slots[i], &check) < 0)
            return NULL;
        if (check != a[i]) {
            PyErr_Format(PyExc_TypeError, "%s.%s is not where the Ring's is", ((PyTypeObject *)direct)->tp_name,
                         algo_slots[i]);
            return NULL;
        }
    }
    for (int i = 0; i < A_N; i++) { /* HalvingDoubling: the PacketAlgorithm slots, where Ring has them */
        if (i == A_PACKETS) continue;
        if (slot_offset((PyTypeObject *)hd, algo_slots[i], &check) < 0) return NULL;
        if (check != a[i]) {
            PyErr_Format(PyExc_TypeError, "%s.%s is not where the Ring's is", ((PyTypeObject *)hd)->tp_name,
                         algo_slots[i]);
            return NULL;
        }
    }
    for (int i = 0; i < H_N; i++)
        if (slot_offset((PyTypeObject *)hd, hd_slots[i], &h[i]) < 0) return NULL;
    for (int i = 0; i < D_N; i++)
        if (slot_offset((PyTypeObject *)direct, direct_slots[i], &d[i]) < 0) return NULL;
    for (int i = 0; i < T_N; i++)
        if (slot_offset((PyTypeObject *)topo, topo_slots[i], &t[i]) < 0) return NULL;
    for (int i = 0; i < S_N; i++)
        if (slot_offset((PyTypeObject *)stream, stream_slots[i], &s[i]) < 0) return NULL;
    Py_ssize_t rt, rd;
    if (slot_offset((PyTypeObject *)phase, "algorithm", &pa) < 0 ||
        slot_offset((PyTypeObject *)dataset, "label", &dl) < 0 || slot_offset((PyTypeObject *)ring, "topology", &rt) < 0 ||
        slot_offset((PyTypeObject *)ring, "direction", &rd) < 0)
        return NULL;
    if (rt != h[H_TOPOLOGY]) {
        PyErr_Format(PyExc_TypeError, "%s.topology is not where the Ring's is", ((PyTypeObject *)hd)->tp_name);
        return NULL;
    }
    memcpy(ss_off, ss, sizeof ss);
    memcpy(ph_off, ph, sizeof ph);
    memcpy(ds_off, ds, sizeof ds);
    memcpy(su_off, u, sizeof u);
    Py_XSETREF(su_type, (PyTypeObject *)Py_NewRef(su));
    memcpy(algo_off, a, sizeof a);
    memcpy(direct_off, d, sizeof d);
    memcpy(hd_off, h, sizeof h);
    Py_XSETREF(hd_type, (PyTypeObject *)Py_NewRef(hd));
    memcpy(topo_off, t, sizeof t);
    Py_XSETREF(direct_type, (PyTypeObject *)Py_NewRef(direct));
    Py_XSETREF(topo_type, (PyTypeObject *)Py_NewRef(topo));
    memcpy(stream_off, s, sizeof s);
    phase_algorithm_off = pa;
    dataset_label_off = dl;
    packet_topology_off = rt;
    ring_direction_off = rd;
    Py_XSETREF(ring_type, (PyTypeObject *)Py_NewRef(ring));
    Py_XSETREF(stream_type, (PyTypeObject *)Py_NewRef(stream));
    Py_XSETREF(phase_type, (PyTypeObject *)Py_NewRef(phase));
    Py_XSETREF(dataset_type, (PyTypeObject *)Py_NewRef(dataset));
    Py_XSETREF(all_reduce, Py_NewRef(ar));
    Py_XSETREF(reduce_scatter, Py_NewRef(rs));
    Py_XSETREF(algorithm_type, (PyTypeObject *)Py_NewRef(algorithm));
    Py_XSETREF(stream_init_method, Py_NewRef(s_init));
    Py_XSETREF(algorithm_init_method, Py_NewRef(a_init));
    stream_owner_off = owner;
    algo_stream_off = algo_stream;
    algo_sys_off = algo_sys;
    Py_RETURN_NONE;
}

/* clone_slots(obj): a new object of obj's class with the same slot values (shallow). Only for a
 * class whose every level, up to object, is a Python class with __slots__ and nothing else (no
 * __dict__, no __weakref__, no C fields): generation copies a pristine algorithm per stream instead
 * of running its constructor chain again (system/generation.py). */
static int slots_only(PyTypeObject *tp) {
    for (PyTypeObject *t = tp; t != &PyBaseObject_Type; t = t->tp_base) {
        if (!t || !t->tp_base || !(t->tp_flags & Py_TPFLAGS_HEAPTYPE) || t->tp_dictoffset || t->tp_weaklistoffset ||
            t->tp_itemsize)
            return 0;
        Py_ssize_t n = 0;
        for (PyMemberDef *m = t->tp_members; m && m->name; m++, n++)
            if (m->type != T_OBJECT_EX || m->offset < t->tp_base->tp_basicsize || m->offset >= t->tp_basicsize)
                return 0;
        if (t->tp_basicsize - t->tp_base->tp_basicsize != n * (Py_ssize_t)sizeof(PyObject *)) return 0;
    }
    return 1;
}

static PyObject *clone_slots(PyObject *Py_UNUSED(module), PyObject *obj) {
    PyTypeObject *tp = Py_TYPE(obj);
    if (!slots_only(tp)) {
        PyErr_Format(PyExc_TypeError, "clone_slots: %.100s is not a class of slots only", tp->tp_name);
        return NULL;
    }
    PyObject *c = tp->tp_alloc(tp, 0);
    if (!c) return NULL;
    for (Py_ssize_t off = sizeof(PyObject); off < tp->tp_basicsize; off += sizeof(PyObject *))
        *(PyObject **)((char *)c + off) = Py_XNewRef(*(PyObject **)((char *)obj + off));
    return c;
}

/* clone_fresh((obj, names)): clone_slots(obj), each slot of ``names`` then a new empty container of
 * the type obj holds there (a deque of pending packets): PacketAlgorithm.fresh_copy's steps for
 * the classes that name such slots, without a Python call per stream. */
static PyObject *clone_fresh(PyObject *Py_UNUSED(module), PyObject *arg) {
    if (!PyTuple_CheckExact(arg) || PyTuple_GET_SIZE(arg) != 2 || !PyTuple_CheckExact(PyTuple_GET_ITEM(arg, 1))) {
        PyErr_SetString(PyExc_TypeError, "clone_fresh takes (obj, names), names a tuple");
        return NULL;
    }
    PyObject *obj = PyTuple_GET_ITEM(arg, 0), *names = PyTuple_GET_ITEM(arg, 1);
    PyObject *c = clone_slots(NULL, obj);
    for (Py_ssize_t i = 0; c && i < PyTuple_GET_SIZE(names); i++) {
        PyObject *name = PyTuple_GET_ITEM(names, i);
        PyObject *old = PyObject_GetAttr(obj, name);
        PyObject *fresh = old ? PyObject_CallNoArgs((PyObject *)Py_TYPE(old)) : NULL;
        Py_XDECREF(old);
        if (!fresh || PyObject_SetAttr(c, name, fresh) < 0) Py_CLEAR(c);
        Py_XDECREF(fresh);
    }
    return c;
}

/* generate_streams(sys, dataset, count, chunk, plan, pristine, group, priority, generate_phase, make_pristine):
 * the per-stream loop of system/generation.py's generate_collective (the reference, which runs where
 * this is not compiled): each of ``count`` streams gets one phase per plan entry, a copy of the
 * pristine phase and algorithm of its shape (phase index, size, direction) where there is one, else
 * generate_phase's, then its id, its StreamBaseline and its place in the ready list. */
static PyObject *str_final_data_size, *str_queue_id, *str_algorithm, *str_reserve_stream_ids,
    *str_insert_into_ready_list;

static PyObject *copy_with(PyObject *copier, PyObject *argument) {
    if (PyCFunction_Check(copier) && PyCFunction_GET_FUNCTION(copier) == (PyCFunction)clone_slots)
        return clone_slots(NULL, argument); /* a plain algorithm: the slot copy, no call */
    if (PyCFunction_Check(copier) && PyCFunction_GET_FUNCTION(copier) == (PyCFunction)clone_fresh)
        return clone_fresh(NULL, argument);
    return PyObject_CallOneArg(copier, argument);
}

static PyObject *one_phase(PyObject *entry, Py_ssize_t i, PyObject *remain, PyObject *pristine,
                           PyObject *generate_phase, PyObject *make_pristine) {
    PyObject *fixed = PyTuple_GET_ITEM(entry, 4), *qd;
    int has = fixed == Py_None ? 0 : PyObject_IsTrue(fixed);
    if (has < 0) return NULL;
    qd = has ? Py_NewRef(fixed) : PyObject_CallNoArgs(PyTuple_GET_ITEM(entry, 2)); /* fixed or next_queue() */
    if (!qd) return NULL;
    if (!PyTuple_Check(qd) || PyTuple_GET_SIZE(qd) != 2) {
        Py_DECREF(qd);
        PyErr_SetString(PyExc_TypeError, "generate_streams: a queue allocator gives (queue, direction)");
        return NULL;
    }
    PyObject *queue_id = PyTuple_GET_ITEM(qd, 0), *direction = PyTuple_GET_ITEM(qd, 1), *ph = NULL;
    PyObject *index = PyLong_FromSsize_t(i);
    PyObject *shape = index ? PyTuple_Pack(3, index, remain, direction) : NULL;
    Py_XDECREF(index);
    if (!shape) goto done;
    PyObject *proto = PyDict_GetItemWithError(pristine, shape); /* borrowed */
    if (!proto && PyErr_Occurred()) goto done;
    if (!proto || proto == Py_False) {
        PyObject *args[] = {PyTuple_GET_ITEM(entry, 0), PyTuple_GET_ITEM(entry, 1), remain, queue_id, direction,
                            PyTuple_GET_ITEM(entry, 3)};
        ph = PyObject_Vectorcall(generate_phase, args, 6, NULL);
        if (ph && !proto) {
            PyObject *made = PyObject_CallOneArg(make_pristine, ph);
            if (!made || PyDict_SetItem(pristine, shape, made) < 0) Py_CLEAR(ph);
            Py_XDECREF(made);
        }
    } else {
        if (!PyTuple_Check(proto) || PyTuple_GET_SIZE(proto) != 3) {
            PyErr_SetString(PyExc_TypeError, "generate_streams: a pristine entry is (phase, copier, argument)");
            goto done;
        }
        Py_INCREF(proto); /* the dict may change under the copier's call */
        ph = clone_slots(NULL, PyTuple_GET_ITEM(proto, 0));
        PyObject *algo = ph ? copy_with(PyTuple_GET_ITEM(proto, 1), PyTuple_GET_ITEM(proto, 2)) : NULL;
        Py_DECREF(proto);
        if (!algo || PyObject_SetAttr(ph, str_queue_id, queue_id) < 0 || PyObject_SetAttr(ph, str_algorithm, algo) < 0)
            Py_CLEAR(ph);
        Py_XDECREF(algo);
    }
done:
    Py_XDECREF(shape);
    Py_DECREF(qd);
    return ph;
}

/* StreamBaseline(sys, dataset, stream_id, phases, priority), system/stream.py, without a Python
 * frame where the class's __init__ and each phase's algorithm's init are the ones configure() saw:
 * the same slots in the same order, then each algorithm's stream and sys (Algorithm.init). */

static PyObject *new_stream(PyObject *sys, PyObject *dataset, PyObject *sid, PyObject *phases, PyObject *priority) {
    if (_PyType_Lookup(stream_type, str___init__) != stream_init_method || !PyList_CheckExact(phases)) {
        PyObject *sargs[] = {sys, dataset, sid, phases, priority};
        return PyObject_Vectorcall((PyObject *)stream_type, sargs, 5, NULL);
    }
    PyObject *s = stream_type->tp_alloc(stream_type, 0);
    PyObject *minus_one = s ? PyLong_FromLong(-1) : NULL, *zero = minus_one ? PyLong_FromLong(0) : NULL;
    if (!zero) {
        Py_XDECREF(minus_one);
        Py_XDECREF(s);
        return NULL;
    }
    set_new(s, stream_owner_off, Py_NewRef(sys));
    set_new(s, stream_off[S_DATASET], Py_NewRef(dataset));
    set_new(s, stream_off[S_STREAM_ID], Py_NewRef(sid));
    set_new(s, ss_off[SS_PHASES], Py_NewRef(phases));
    set_new(s, ss_off[SS_PRIORITY], Py_NewRef(priority));
    set_new(s, ss_off[SS_STEPS], zero);
    set_new(s, ss_off[SS_QUEUE], minus_one);
    set_new(s, ss_off[SS_COMTYPE], Py_NewRef(Py_None));
    set_new(s, stream_off[S_PHASE], Py_NewRef(Py_None));
    set_new(s, ss_off[SS_INIT], Py_NewRef(Py_False));
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(phases); i++) { /* for ph in phases: ph.algorithm.init(self) */
        PyObject *ph = PyList_GET_ITEM(phases, i);
        PyObject *algo = Py_IS_TYPE(ph, phase_type) ? Py_XNewRef(get(ph, phase_algorithm_off, "algorithm"))
                                                    : PyObject_GetAttr(ph, str_algorithm);
        if (!algo) goto fail;
        if (PyObject_TypeCheck(algo, algorithm_type) &&
            _PyType_Lookup(Py_TYPE(algo), str_init) == algorithm_init_method) {
            set_new(algo, algo_stream_off, Py_NewRef(s));
            set_new(algo, algo_sys_off, Py_NewRef(sys));
        } else {
            PyObject *r = PyObject_CallMethodOneArg(algo, str_init, s);
            if (!r) {
                Py_DECREF(algo);
                goto fail;
            }
            Py_DECREF(r);
        }
        Py_DECREF(algo);
    }
    return s;
fail:
    Py_DECREF(s);
    return NULL;
}

static PyObject *generate_streams(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 10) {
        PyErr_SetString(PyExc_TypeError, "generate_streams(sys, dataset, count, chunk, plan, pristine, group, "
                                         "priority, generate_phase, make_pristine)");
        return NULL;
    }
    if (!stream_type) {
        PyErr_SetString(PyExc_RuntimeError, "generate_streams: configure() first");
        return NULL;
    }
    PyObject *sys = args[0], *dataset = args[1], *chunk = args[3], *plan = args[4], *pristine = args[5],
             *group = args[6], *priority = args[7], *generate_phase = args[8], *make_pristine = args[9];
    Py_ssize_t count = PyLong_AsSsize_t(args[2]);
    if (count == -1 && PyErr_Occurred()) return NULL;
    if (!PyTuple_Check(plan) || !PyDict_Check(pristine)) {
        PyErr_SetString(PyExc_TypeError, "generate_streams: plan is a tuple, pristine a dict");
        return NULL;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(plan);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *e = PyTuple_GET_ITEM(plan, i);
        if (!PyTuple_Check(e) || PyTuple_GET_SIZE(e) != 5) {
            PyErr_SetString(PyExc_TypeError, "generate_streams: a plan entry is (type, topology, allocator, impl, fixed)");
            return NULL;
        }
    }
    /* the collective's stream ids, consecutive: one call, not one per stream */
    PyObject *count_obj = PyLong_FromSsize_t(count);
    PyObject *first_obj = count_obj ? PyObject_CallMethodObjArgs(sys, str_reserve_stream_ids, group, count_obj, NULL)
                                    : NULL;
    Py_XDECREF(count_obj);
    if (!first_obj) return NULL;
    long long first = PyLong_AsLongLong(first_obj);
    Py_DECREF(first_obj);
    if (first == -1 && PyErr_Occurred()) return NULL;
    PyObject *insert = PyObject_GetAttr(sys, str_insert_into_ready_list);
    if (!insert) return NULL;
    PyObject *result = NULL;
    for (Py_ssize_t k = 0; k < count; k++) {
        PyObject *phases = PyList_New(n), *remain = Py_NewRef(chunk);
        if (!phases) {
            Py_DECREF(remain);
            goto done;
        }
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *ph = one_phase(PyTuple_GET_ITEM(plan, i), i, remain, pristine, generate_phase, make_pristine);
            if (!ph) {
                Py_DECREF(remain);
                Py_DECREF(phases);
                goto done;
            }
            PyList_SET_ITEM(phases, i, ph);
            Py_SETREF(remain, PyObject_GetAttr(ph, str_final_data_size));
            if (!remain) {
                Py_DECREF(phases);
                goto done;
            }
        }
        Py_DECREF(remain);
        PyObject *sid = PyLong_FromLongLong(first + k);
        if (!sid) {
            Py_DECREF(phases);
            goto done;
        }
        PyObject *stream = new_stream(sys, dataset, sid, phases, priority);
        Py_DECREF(sid);
        Py_DECREF(phases);
        PyObject *r = stream ? PyObject_CallOneArg(insert, stream) : NULL;
        Py_XDECREF(stream);
        if (!r) goto done;
        Py_DECREF(r);
    }
    result = Py_NewRef(Py_None);
done:
    Py_DECREF(insert);
    return result;
}

/* union_length(intervals): the length of the union of a list of (start, end) pairs of integers
 * (system/report.py _covered, the reference: a sweep in start order); None where a pair is not two
 * integers in 0 .. 2^63 - 1, which the reference then takes. The report takes four unions per
 * rank, and sorting tuples in Python was most of a 64-rank run's breakdown. */
typedef struct {
    long long s, e;
} Span;

static int span_order(const void *a, const void *b) {
    long long x = ((const Span *)a)->s, y = ((const Span *)b)->s;
    return (x > y) - (x < y);
}

static PyObject *union_length(PyObject *Py_UNUSED(module), PyObject *arg) {
    if (!PyList_CheckExact(arg)) Py_RETURN_NONE;
    Py_ssize_t n = PyList_GET_SIZE(arg);
    Span local[128], *v = n <= 128 ? local : PyMem_Malloc(sizeof(Span) * (size_t)n);
    if (!v) return PyErr_NoMemory();
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *t = PyList_GET_ITEM(arg, i);
        int over_s = 0, over_e = 0;
        if (!PyTuple_CheckExact(t) || PyTuple_GET_SIZE(t) != 2 || !PyLong_CheckExact(PyTuple_GET_ITEM(t, 0)) ||
            !PyLong_CheckExact(PyTuple_GET_ITEM(t, 1)))
            goto decline;
        v[i].s = PyLong_AsLongLongAndOverflow(PyTuple_GET_ITEM(t, 0), &over_s);
        v[i].e = PyLong_AsLongLongAndOverflow(PyTuple_GET_ITEM(t, 1), &over_e);
        if (over_s || over_e || v[i].s < 0 || v[i].e < 0) goto decline;
    }
    if (v == local) { /* a rank's few intervals come nearly in order (completion order): inserted */
        for (Py_ssize_t i = 1; i < n; i++) {
            Span x = v[i];
            Py_ssize_t j = i;
            while (j > 0 && v[j - 1].s > x.s) {
                v[j] = v[j - 1];
                j--;
            }
            v[j] = x;
        }
    } else {
        qsort(v, (size_t)n, sizeof(Span), span_order);
    }
    long long total = 0, reach = -1; /* every start is >= 0: -1 is below them all, as -inf */
    for (Py_ssize_t i = 0; i < n; i++) {
        long long s = v[i].s < reach ? reach : v[i].s;
        if (v[i].e > s) {
            total += v[i].e - s; /* the union lies in 0 .. 2^63 - 1: no overflow */
            reach = v[i].e;
        }
    }
    if (v != local) PyMem_Free(v);
    return PyLong_FromLongLong(total);
decline:
    if (v != local) PyMem_Free(v);
    Py_RETURN_NONE;
}

static PyMethodDef module_methods[] = {
    {"union_length", union_length, METH_O,
     "union_length(intervals): the length of the union of a list of (start, end) integer pairs, None if one is "
     "not in 0 .. 2^63 - 1 (system/report.py _covered)"},
    {"ring_recurrence", (PyCFunction)(void (*)(void))dtsim_ring_recurrence, METH_FASTCALL,
     "ring_recurrence(starts, pred, delays, endpoint, extra, steps): a batched ring phase's last receive per rank "
     "on the congestion-unaware network (system/shortcuts/ring_batch.py), None past int64"},
    {"partner_recurrence", (PyCFunction)(void (*)(void))dtsim_partner_recurrence, METH_FASTCALL,
     "partner_recurrence(starts, partners, delays, extra, steps): a batched phase's last receive per rank, "
     "partners and delays one row per step or one for all (system/shortcuts/phase_batch.py)"},
    {"clone_slots", clone_slots, METH_O, "clone_slots(obj): a shallow copy of an object of slots only"},
    {"clone_fresh", clone_fresh, METH_O,
     "clone_fresh((obj, names)): clone_slots(obj) with a new empty container in each slot of names"},
    {"generate_streams", (PyCFunction)(void (*)(void))generate_streams, METH_FASTCALL,
     "generate_streams(sys, dataset, count, chunk, plan, pristine, group, priority, generate_phase, make_pristine): "
     "system/generation.py's per-stream loop"},
    {"configure", configure, METH_VARARGS,
     "configure(Ring, StreamBaseline, CollectivePhase, DataSet, ALL_REDUCE, REDUCE_SCATTER, AllToAll, RingTopology, "
     "HalvingDoubling, SchedulerUnit, Algorithm)"},
    {NULL, NULL, 0, NULL},
};

static int exec_module(PyObject *m) {
    if (!empty_tuple) {
        if (!(empty_tuple = PyTuple_New(0)) || !(str_now = PyUnicode_InternFromString("now")) ||
            !(str_exit = PyUnicode_InternFromString("exit")) ||
            !(str_fps = PyUnicode_InternFromString("first_phase_streams")) ||
            !(str_trs = PyUnicode_InternFromString("total_running_streams")) ||
            !(str_active_streams = PyUnicode_InternFromString("active_streams")) ||
            !(str_ready_list = PyUnicode_InternFromString("ready_list")) ||
            !(str_run_stream_init = PyUnicode_InternFromString("run_stream_init")) ||
            !(str_init = PyUnicode_InternFromString("init")) ||
            !(str_ring_batcher = PyUnicode_InternFromString("ring_batcher")) ||
            !(str_notify_stream_finished = PyUnicode_InternFromString("notify_stream_finished")) ||
            !(str_run_general = PyUnicode_InternFromString("run_general")) ||
            !(str_on_packet_received = PyUnicode_InternFromString("on_packet_received")) ||
            !(str_note_zero_delay = PyUnicode_InternFromString("note_zero_delay")) ||
            !(str_note_zero_message = PyUnicode_InternFromString("note_zero_message")) ||
            !(str_bundle_arrived_py = PyUnicode_InternFromString("_bundle_arrived")) ||
            !(str_register_event = PyUnicode_InternFromString("register_event")) ||
            !(str_identity = PyUnicode_InternFromString("identity")) ||
            !(str__fast = PyUnicode_InternFromString("_fast")) ||
            !(str_append = PyUnicode_InternFromString("append")) ||
            !(str_popleft = PyUnicode_InternFromString("popleft")) ||
            !(str_member_at = PyUnicode_InternFromString("member_at")) ||
            !(str_final_data_size = PyUnicode_InternFromString("final_data_size")) ||
            !(str_queue_id = PyUnicode_InternFromString("queue_id")) ||
            !(str_algorithm = PyUnicode_InternFromString("algorithm")) ||
            !(str_reserve_stream_ids = PyUnicode_InternFromString("_reserve_stream_ids")) ||
            !(str_insert_into_ready_list = PyUnicode_InternFromString("insert_into_ready_list")) ||
            !(str___init__ = PyUnicode_InternFromString("__init__")))
            return -1;
    }
    if (!deque_type) {
        PyObject *collections = PyImport_ImportModule("collections");
        PyObject *dq = collections ? PyObject_GetAttrString(collections, "deque") : NULL;
        Py_XDECREF(collections);
        if (!dq) return -1;
        if (!PyType_Check(dq) || !(deque_append = PyObject_GetAttr(dq, str_append)) ||
            !(deque_popleft = PyObject_GetAttr(dq, str_popleft))) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "collections.deque is not a type");
            Py_DECREF(dq);
            return -1;
        }
        deque_type = (PyTypeObject *)dq; /* kept for the module's life, as the strings above */
    }
    load_core_api();
    if (dtsim_add_feeder(m) < 0) return -1;
    PyObject *tp = PyType_FromModuleAndSpec(m, &SysFast_spec, NULL);
    if (!tp) return -1;
    sysfast_type = (PyTypeObject *)tp; /* the module holds it */
    if (PyModule_AddObject(m, "SysFast", tp) < 0) {
        Py_DECREF(tp);
        return -1;
    }
#ifndef DTSIM_SOURCE_CHECKSUM
#define DTSIM_SOURCE_CHECKSUM "unknown"
#endif
    return PyModule_AddStringConstant(m, "SOURCE_CHECKSUM", DTSIM_SOURCE_CHECKSUM);
}

static PyModuleDef_Slot module_slots[] = {
    {Py_mod_exec, exec_module},
    {0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_sys_core", "The system layer's per-message path in C (system/sys.py).", 0,
    module_methods, module_slots, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__sys_core(void) { return PyModuleDef_Init(&module); }
