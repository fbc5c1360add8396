/* The congestion-aware backend's links and chunks in C (network/analytical/aware.py: Link, Chunk
 * and CongestionAwareBackend._on_chunk_arrived), for the event queue in C (_event_core.c).
 *
 * The same model, line by line: a link serves one chunk at a time, first in first out; starting
 * a chunk queues its arrival at the next device at now + int(latency + size / bw), then the link
 * free again at now + int(size / bw), in that order. Only the calls are cheaper: a hop's two
 * events go straight into the calendar and run C functions, where in Python they were some eight
 * Python calls. aware.py's Python classes stay the reference and the fallback; tests run both.
 *
 * Link is subclassed in Python (PacketLink, a topology file's link), which overrides send and
 * _transmit: calls that may reach a subclass go through its methods.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <limits.h>
#include <stdint.h>

#include "_event_core.h"

/* -- Chunk -------------------------------------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    PyObject *full;  /* the message (base.py's list) */
    PyObject *route; /* a tuple of links */
    Py_ssize_t hop;
    long long size_bytes;
    long long tail;
    PyObject *ins; /* None or a tuple of input link ids */
} Chunk;

static PyTypeObject *chunk_type = NULL;
static PyTypeObject *link_type = NULL;
static PyTypeObject *arrival_type = NULL; /* ChunkArrival, below */
static int arrival_native(PyObject *arrival, PyObject *chunk, long long unused);

static int Chunk_init(Chunk *c, PyObject *args, PyObject *kw) {
    static char *names[] = {"full", "route", "size_bytes", "ins", NULL};
    PyObject *full, *route, *ins = Py_None;
    long long size;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO!L|O", names, &full, &PyTuple_Type, &route, &size, &ins))
        return -1;
    Py_XSETREF(c->full, Py_NewRef(full));
    Py_XSETREF(c->route, Py_NewRef(route));
    Py_XSETREF(c->ins, Py_NewRef(ins));
    c->hop = 0;
    c->size_bytes = size;
    c->tail = 0;
    return 0;
}

static int Chunk_traverse(Chunk *c, visitproc visit, void *arg) {
    Py_VISIT(c->full);
    Py_VISIT(c->route);
    Py_VISIT(c->ins);
    Py_VISIT(Py_TYPE(c));
    return 0;
}

static int Chunk_clear(Chunk *c) {
    Py_CLEAR(c->full);
    Py_CLEAR(c->route);
    Py_CLEAR(c->ins);
    return 0;
}

static void Chunk_dealloc(Chunk *c) {
    PyTypeObject *tp = Py_TYPE(c);
    PyObject_GC_UnTrack(c);
    Chunk_clear(c);
    tp->tp_free((PyObject *)c);
    Py_DECREF(tp);
}

static PyMemberDef Chunk_members[] = {
    {"full", T_OBJECT, offsetof(Chunk, full), 0, NULL},
    {"route", T_OBJECT, offsetof(Chunk, route), 0, NULL},
    {"hop", T_PYSSIZET, offsetof(Chunk, hop), 0, NULL},
    {"size_bytes", T_LONGLONG, offsetof(Chunk, size_bytes), 0, NULL},
    {"tail", T_LONGLONG, offsetof(Chunk, tail), 0, NULL},
    {"ins", T_OBJECT, offsetof(Chunk, ins), 0, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyType_Slot Chunk_slots[] = {
    {Py_tp_doc, "A message on its way (network/analytical/aware.py: Chunk)."},
    {Py_tp_new, PyType_GenericNew},
    {Py_tp_init, Chunk_init},
    {Py_tp_dealloc, Chunk_dealloc},
    {Py_tp_traverse, Chunk_traverse},
    {Py_tp_clear, Chunk_clear},
    {Py_tp_members, Chunk_members},
    {0, NULL},
};

static PyType_Spec Chunk_spec = {
    .name = "network._event_core.Chunk",
    .basicsize = sizeof(Chunk),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .slots = Chunk_slots,
};

/* -- Link --------------------------------------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    long long src, dst, dim;
    char busy;
    PyObject **pend; /* a ring buffer of chunks: ASTRA-sim's Link::pending_chunks */
    Py_ssize_t pend_head, pend_n, pend_cap;
    Py_ssize_t peak_pending;
    long long chunks;
    double latency_ns, bytes_per_ns;
    PyObject *delays;     /* dict: size -> (arrival, busy) ns, shared by a dimension's links */
    PyObject *schedule;   /* the queue's schedule */
    PyObject *on_arrived; /* called with the chunk at the next device */
    PyObject *queue;      /* the queue (a Core) */
    PyObject *free_cb;    /* self._on_free, bound once; NULL where link_transmit_c never calls it */
    long long last_start, free_at, claim_until, claim_last;
    PyObject *claim_recent;
    int is_core; /* queue is the C queue: events go straight into its calendar */
    /* the last size's (arrival, busy) from ``delays``, whose entries never change once set:
     * a link's chunks are mostly of one size, and this skips the dictionary for them */
    long long cached_size, cached_arrive, cached_busy;
} Link;

static PyObject *units_arrival = NULL, *units_serialization = NULL; /* network.units */
static PyObject *empty_tuple = NULL;

static int Link_init(Link *l, PyObject *args, PyObject *kw) {
    static char *names[] = {"src", "dst", "dim", "latency_ns", "bytes_per_ns", "delays", "schedule", "on_arrived",
                            NULL};
    long long src, dst, dim;
    double lat, bpn;
    PyObject *delays, *schedule, *on_arrived;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "LLLddO!OO", names, &src, &dst, &dim, &lat, &bpn, &PyDict_Type,
                                     &delays, &schedule, &on_arrived))
        return -1;
    /* the queue whose schedule this is: its clock, and with the C queue its calendar */
    PyObject *queue = PyObject_GetAttrString(schedule, "__self__");
    if (!queue) return -1;
    l->is_core = PyObject_TypeCheck(queue, dtsim_core_type);
    /* a plain link on the C queue frees itself as a native event and never calls its bound
     * _on_free: made only where it is called (a bound method per link was 72 bytes of each of
     * the N^2 links of a FullyConnected run) */
    PyObject *free_cb = NULL;
    if (!l->is_core || !Py_IS_TYPE(l, link_type)) {
        free_cb = PyObject_GetAttrString((PyObject *)l, "_on_free");
        if (!free_cb) {
            Py_DECREF(queue);
            return -1;
        }
    }
    l->src = src;
    l->dst = dst;
    l->dim = dim;
    l->busy = 0;
    l->peak_pending = 0;
    l->chunks = 0;
    l->latency_ns = lat;
    l->bytes_per_ns = bpn;
    Py_XSETREF(l->delays, Py_NewRef(delays));
    Py_XSETREF(l->schedule, Py_NewRef(schedule));
    Py_XSETREF(l->on_arrived, Py_NewRef(on_arrived));
    Py_XSETREF(l->queue, queue);
    Py_XSETREF(l->free_cb, free_cb);
    Py_XSETREF(l->claim_recent, Py_NewRef(Py_None));
    l->last_start = l->free_at = l->claim_until = l->claim_last = -1;
    l->cached_size = -1;
    return 0;
}

static int pend_push(Link *l, PyObject *c) {
    if (l->pend_n == l->pend_cap) {
        Py_ssize_t cap = l->pend_cap ? l->pend_cap * 2 : 8;
        PyObject **b = PyMem_Malloc(sizeof(PyObject *) * (size_t)cap);
        if (!b) { PyErr_NoMemory(); return -1; }
        for (Py_ssize_t i = 0; i < l->pend_n; i++) b[i] = l->pend[(l->pend_head + i) % l->pend_cap];
        PyMem_Free(l->pend);
        l->pend = b;
        l->pend_head = 0;
        l->pend_cap = cap;
    }
    l->pend[(l->pend_head + l->pend_n) % l->pend_cap] = Py_NewRef(c);
    l->pend_n++;
    if (l->pend_n > l->peak_pending) l->peak_pending = l->pend_n;
    return 0;
}

static PyObject *pend_pop(Link *l) { /* a new reference */
    PyObject *c = l->pend[l->pend_head];
    l->pend_head = (l->pend_head + 1) % l->pend_cap;
    l->pend_n--;
    return c;
}

/* (arrival, busy) ns for a chunk of size bytes: the dimension's cache, else network.units */
static int link_delays(Link *l, long long size, long long *arrive, long long *busy) {
    if (size == l->cached_size) {
        *arrive = l->cached_arrive;
        *busy = l->cached_busy;
        return 0;
    }
    PyObject *key = PyLong_FromLongLong(size);
    if (!key) return -1;
    PyObject *d = PyDict_GetItemWithError(l->delays, key); /* borrowed */
    if (!d) {
        if (PyErr_Occurred()) { Py_DECREF(key); return -1; }
        PyObject *a = PyObject_CallFunction(units_arrival, "Ldd", size, l->latency_ns, l->bytes_per_ns);
        PyObject *b = a ? PyObject_CallFunction(units_serialization, "Ld", size, l->bytes_per_ns) : NULL;
        d = b ? PyTuple_Pack(2, a, b) : NULL;
        Py_XDECREF(a);
        Py_XDECREF(b);
        if (!d || PyDict_SetItem(l->delays, key, d) < 0) { Py_XDECREF(d); Py_DECREF(key); return -1; }
        Py_DECREF(d); /* the dict holds it */
    }
    Py_DECREF(key);
    if (!PyTuple_Check(d) || PyTuple_GET_SIZE(d) < 2) {
        PyErr_SetString(PyExc_TypeError, "a link's delays hold (arrival, busy) tuples");
        return -1;
    }
    *arrive = PyLong_AsLongLong(PyTuple_GET_ITEM(d, 0));
    *busy = PyLong_AsLongLong(PyTuple_GET_ITEM(d, 1));
    if (PyErr_Occurred()) return -1;
    if (size >= 0) {
        l->cached_size = size;
        l->cached_arrive = *arrive;
        l->cached_busy = *busy;
    }
    return 0;
}

/* the link's queue's clock */
static int link_now(Link *l, long long *now) {
    if (l->is_core) {
        *now = ((Queue *)l->queue)->now;
        return 0;
    }
    PyObject *t = PyObject_GetAttrString(l->queue, "now");
    if (!t) return -1;
    *now = PyLong_AsLongLong(t);
    Py_DECREF(t);
    return PyErr_Occurred() ? -1 : 0;
}

static int link_free_native(PyObject *link, PyObject *unused, long long unused_x);

/* Link._transmit of the plain link */
static int link_transmit_c(Link *l, PyObject *chunk) {
    if (!Py_IS_TYPE(chunk, chunk_type)) {
        PyErr_SetString(PyExc_TypeError, "a C link carries Chunk objects (network._event_core.Chunk)");
        return -1;
    }
    long long arrive, busy;
    if (link_delays(l, ((Chunk *)chunk)->size_bytes, &arrive, &busy) < 0) return -1;
    long long now;
    if (link_now(l, &now) < 0) return -1;
    if (busy > 0 && now > LLONG_MAX - busy) { /* the arrival's schedule below says why */
        busy = 0;
        arrive = LLONG_MAX;
    }
    l->busy = 1;
    l->chunks++;
    l->last_start = now;
    l->free_at = now + busy;
    /* arrival first, then link-free: ASTRA-sim inserts them in this order */
    if (!l->is_core) { /* another queue (a test's reference queue): through its schedule */
        PyObject *r = PyObject_CallFunction(l->schedule, "LOO", arrive, l->on_arrived, chunk);
        if (!r) return -1;
        Py_DECREF(r);
        r = PyObject_CallFunction(l->schedule, "LO", busy, l->free_cb);
        if (!r) return -1;
        Py_DECREF(r);
        return 0;
    }
    Queue *q = (Queue *)l->queue;
    /* native events where the callee is ours: ChunkArrival, and the free of a plain link (a
     * subclass's _on_free may differ, so it gets its bound method) */
    int r = Py_IS_TYPE(l->on_arrived, arrival_type) ? dtsim_push_native(q, arrive, arrival_native, l->on_arrived, chunk, 0)
                                                     : dtsim_push_event1(q, arrive, l->on_arrived, chunk);
    if (r < 0) return -1;
    if (Py_IS_TYPE(l, link_type)) return dtsim_push_native(q, busy, link_free_native, (PyObject *)l, NULL, 0);
    return dtsim_push_event(q, busy, l->free_cb, empty_tuple);
}

/* self._transmit(chunk): C for a plain link, the override for a subclass */
static int link_transmit(Link *l, PyObject *chunk) {
    if (Py_IS_TYPE(l, link_type)) return link_transmit_c(l, chunk);
    PyObject *r = PyObject_CallMethod((PyObject *)l, "_transmit", "O", chunk);
    if (!r) return -1;
    Py_DECREF(r);
    return 0;
}

static PyObject *Link_send(Link *l, PyObject *chunk) {
    if (l->busy) {
        if (pend_push(l, chunk) < 0) return NULL;
    } else if (link_transmit(l, chunk) < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *Link_transmit(Link *l, PyObject *chunk) {
    if (link_transmit_c(l, chunk) < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *Link_on_free(Link *l, PyObject *Py_UNUSED(ignored)) {
    l->busy = 0;
    if (l->pend_n) {
        PyObject *c = pend_pop(l);
        int r = link_transmit(l, c);
        Py_DECREF(c);
        if (r < 0) return NULL;
    }
    Py_RETURN_NONE;
}

/* the link-free event of a plain link: Link_on_free without the call of its bound method */
static int link_free_native(PyObject *link, PyObject *Py_UNUSED(unused), long long Py_UNUSED(unused_x)) {
    PyObject *r = Link_on_free((Link *)link, NULL);
    if (!r) return -1;
    Py_DECREF(r);
    return 0;
}

static PyObject *Link_get_pending(Link *l, void *Py_UNUSED(closure)) {
    PyObject *t = PyTuple_New(l->pend_n);
    if (!t) return NULL;
    for (Py_ssize_t i = 0; i < l->pend_n; i++)
        PyTuple_SET_ITEM(t, i, Py_NewRef(l->pend[(l->pend_head + i) % l->pend_cap]));
    return t;
}

static int Link_traverse(Link *l, visitproc visit, void *arg) {
    for (Py_ssize_t i = 0; i < l->pend_n; i++) Py_VISIT(l->pend[(l->pend_head + i) % l->pend_cap]);
    Py_VISIT(l->delays);
    Py_VISIT(l->schedule);
    Py_VISIT(l->on_arrived);
    Py_VISIT(l->queue);
    Py_VISIT(l->free_cb);
    Py_VISIT(l->claim_recent);
    Py_VISIT(Py_TYPE(l));
    return 0;
}

static int Link_clear(Link *l) {
    while (l->pend_n) {
        PyObject *c = pend_pop(l);
        Py_DECREF(c);
    }
    Py_CLEAR(l->delays);
    Py_CLEAR(l->schedule);
    Py_CLEAR(l->on_arrived);
    Py_CLEAR(l->queue);
    Py_CLEAR(l->free_cb);
    Py_CLEAR(l->claim_recent);
    return 0;
}

static void Link_dealloc(Link *l) {
    PyTypeObject *tp = Py_TYPE(l);
    PyObject_GC_UnTrack(l);
    Link_clear(l);
    PyMem_Free(l->pend);
    tp->tp_free((PyObject *)l);
    Py_DECREF(tp);
}

static PyMethodDef Link_methods[] = {
    {"send", (PyCFunction)Link_send, METH_O, "queue the chunk, or start it on a free link"},
    {"_transmit", (PyCFunction)Link_transmit, METH_O, "start the chunk: its arrival, then the link free"},
    {"_on_free", (PyCFunction)Link_on_free, METH_NOARGS, "ASTRA-sim: Link::link_become_free"},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef Link_members[] = {
    {"src", T_LONGLONG, offsetof(Link, src), 0, NULL},
    {"dst", T_LONGLONG, offsetof(Link, dst), 0, NULL},
    {"dim", T_LONGLONG, offsetof(Link, dim), 0, NULL},
    {"busy", T_BOOL, offsetof(Link, busy), 0, NULL},
    {"peak_pending", T_PYSSIZET, offsetof(Link, peak_pending), 0, NULL},
    {"chunks", T_LONGLONG, offsetof(Link, chunks), 0, NULL},
    {"latency_ns", T_DOUBLE, offsetof(Link, latency_ns), 0, NULL},
    {"bytes_per_ns", T_DOUBLE, offsetof(Link, bytes_per_ns), 0, NULL},
    {"delays", T_OBJECT, offsetof(Link, delays), READONLY, NULL},
    {"_schedule", T_OBJECT, offsetof(Link, schedule), READONLY, NULL},
    {"_on_arrived", T_OBJECT, offsetof(Link, on_arrived), READONLY, NULL},
    {"_queue", T_OBJECT, offsetof(Link, queue), READONLY, NULL},
    {"last_start", T_LONGLONG, offsetof(Link, last_start), 0, NULL},
    {"free_at", T_LONGLONG, offsetof(Link, free_at), 0, NULL},
    {"claim_until", T_LONGLONG, offsetof(Link, claim_until), 0, NULL},
    {"claim_last", T_LONGLONG, offsetof(Link, claim_last), 0, NULL},
    {"claim_recent", T_OBJECT, offsetof(Link, claim_recent), 0, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyGetSetDef Link_getset[] = {
    {"pending", (getter)Link_get_pending, NULL, "the queued chunks, oldest first (a snapshot)", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot Link_slots[] = {
    {Py_tp_doc, "A directed link, one chunk at a time, first in first out (network/analytical/aware.py: Link)."},
    {Py_tp_new, PyType_GenericNew},
    {Py_tp_init, Link_init},
    {Py_tp_dealloc, Link_dealloc},
    {Py_tp_traverse, Link_traverse},
    {Py_tp_clear, Link_clear},
    {Py_tp_methods, Link_methods},
    {Py_tp_members, Link_members},
    {Py_tp_getset, Link_getset},
    {0, NULL},
};

static PyType_Spec Link_spec = {
    .name = "network._event_core.Link",
    .basicsize = sizeof(Link),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .slots = Link_slots,
};

/* -- ChunkArrival: CongestionAwareBackend._on_chunk_arrived ------------------------------------- */

typedef struct {
    PyObject_HEAD
    PyObject *on_arrival; /* the backend's _on_arrival(message) */
    PyObject *conflict;   /* conflict(link): raises FastPathConflict */
    vectorcallfunc vectorcall;
} Arrival;

static int Arrival_init(Arrival *a, PyObject *args, PyObject *kw) {
    static char *names[] = {"on_arrival", "conflict", NULL};
    PyObject *on_arrival, *conflict;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO", names, &on_arrival, &conflict)) return -1;
    Py_XSETREF(a->on_arrival, Py_NewRef(on_arrival));
    Py_XSETREF(a->conflict, Py_NewRef(conflict));
    return 0;
}

/* ASTRA-sim: Chunk::chunk_arrived_next_device */
static PyObject *arrival_call(Arrival *a, PyObject *chunk_obj) {
    if (!Py_IS_TYPE(chunk_obj, chunk_type)) {
        PyErr_SetString(PyExc_TypeError, "ChunkArrival takes a Chunk");
        return NULL;
    }
    Chunk *c = (Chunk *)chunk_obj;
    Py_ssize_t hop = c->hop + 1;
    if (hop == PyTuple_GET_SIZE(c->route)) return PyObject_CallOneArg(a->on_arrival, c->full);
    c->hop = hop;
    PyObject *link_obj = PyTuple_GET_ITEM(c->route, hop);
    if (!PyObject_TypeCheck(link_obj, link_type)) {
        PyErr_SetString(PyExc_TypeError, "a route holds links");
        return NULL;
    }
    Link *link = (Link *)link_obj;
    long long now;
    if (link_now(link, &now) < 0) return NULL;
    if (link->claim_until > now) return PyObject_CallOneArg(a->conflict, link_obj); /* raises */
    if (Py_IS_TYPE(link, link_type)) {
        if (link->busy) {
            if (pend_push(link, chunk_obj) < 0) return NULL;
        } else if (link_transmit_c(link, chunk_obj) < 0) {
            return NULL;
        }
        Py_RETURN_NONE;
    }
    return PyObject_CallMethod(link_obj, "send", "O", chunk_obj);
}

/* a hop's arrival event: arrival_call without a vectorcall */
static int arrival_native(PyObject *arrival, PyObject *chunk, long long Py_UNUSED(unused)) {
    PyObject *r = arrival_call((Arrival *)arrival, chunk);
    if (!r) return -1;
    Py_DECREF(r);
    return 0;
}

static PyObject *Arrival_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    if (PyVectorcall_NARGS(nargsf) != 1 || kwnames) {
        PyErr_SetString(PyExc_TypeError, "ChunkArrival(chunk)");
        return NULL;
    }
    return arrival_call((Arrival *)self, args[0]);
}

static PyObject *Arrival_new(PyTypeObject *tp, PyObject *args, PyObject *kw) {
    Arrival *a = (Arrival *)PyType_GenericNew(tp, args, kw);
    if (a) a->vectorcall = Arrival_vectorcall;
    return (PyObject *)a;
}

static int Arrival_traverse(Arrival *a, visitproc visit, void *arg) {
    Py_VISIT(a->on_arrival);
    Py_VISIT(a->conflict);
    Py_VISIT(Py_TYPE(a));
    return 0;
}

static int Arrival_clear(Arrival *a) {
    Py_CLEAR(a->on_arrival);
    Py_CLEAR(a->conflict);
    return 0;
}

static void Arrival_dealloc(Arrival *a) {
    PyTypeObject *tp = Py_TYPE(a);
    PyObject_GC_UnTrack(a);
    Arrival_clear(a);
    tp->tp_free((PyObject *)a);
    Py_DECREF(tp);
}

static PyMemberDef Arrival_members[] = {
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(Arrival, vectorcall), READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyType_Slot Arrival_slots[] = {
    {Py_tp_doc, "A chunk at the next device: deliver it, or send it on its route's next link."},
    {Py_tp_new, Arrival_new},
    {Py_tp_init, Arrival_init},
    {Py_tp_dealloc, Arrival_dealloc},
    {Py_tp_traverse, Arrival_traverse},
    {Py_tp_clear, Arrival_clear},
    {Py_tp_call, PyVectorcall_Call},
    {Py_tp_members, Arrival_members},
    {0, NULL},
};

static PyType_Spec Arrival_spec = {
    .name = "network._event_core.ChunkArrival",
    .basicsize = sizeof(Arrival),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .slots = Arrival_slots,
};

/* -- PlainTransfer: CongestionAwareBackend._transfer without a topology file --------------------- */

/* The common case of aware.py's _transfer in C: the clock is past 0, the route is cached, its
 * first link is a plain C link on the C queue and no batched ring phase claims it. Then the
 * message starts on that link as a Chunk, as there. Everything else (time 0, whose check is
 * aware.py's; a route not yet built; a rank outside 0 .. npus - 1; a claimed link, which raises
 * there) calls the Python method. */
typedef struct {
    PyObject_HEAD
    PyObject *routes;   /* dict: src * npus + dst -> tuple of links, aware.py's _routes */
    PyObject *fallback; /* the backend's Python _transfer */
    long long npus;
    vectorcallfunc vectorcall;
    /* routes already looked up, by (src, dst) as C integers: aware.py only ever adds to _routes,
     * so a route once found stays the route (a tuple, a hash and a dict lookup less a message) */
    struct RouteSlot *cache;
    size_t cmask, cused;
} Transfer;

struct RouteSlot {
    long long src, dst;
    PyObject *route; /* NULL: free */
};

static inline size_t route_home(const Transfer *t, long long src, long long dst) {
    uint64_t h = ((uint64_t)src * 0x9e3779b97f4a7c15ULL) ^ ((uint64_t)dst + 0x632be59bd9b4e019ULL);
    h ^= h >> 31;
    h *= 0xbf58476d1ce4e5b9ULL;
    return (size_t)(h ^ (h >> 29)) & t->cmask;
}

static struct RouteSlot *route_probe(Transfer *t, long long src, long long dst) {
    for (size_t i = route_home(t, src, dst);; i = (i + 1) & t->cmask) {
        struct RouteSlot *r = &t->cache[i];
        if (!r->route || (r->src == src && r->dst == dst)) return r;
    }
}

/* remember route for (src, dst); a failure to grow only costs the next lookup */
static void route_remember(Transfer *t, long long src, long long dst, PyObject *route) {
    if (2 * (t->cused + 1) > (t->cache ? t->cmask + 1 : 0)) {
        size_t cap = t->cache ? 2 * (t->cmask + 1) : 256, old_cap = t->cache ? t->cmask + 1 : 0;
        struct RouteSlot *old = t->cache, *fresh = PyMem_Calloc(cap, sizeof *fresh);
        if (!fresh) return;
        t->cache = fresh;
        t->cmask = cap - 1;
        for (size_t i = 0; i < old_cap; i++)
            if (old[i].route) *route_probe(t, old[i].src, old[i].dst) = old[i];
        PyMem_Free(old);
    }
    struct RouteSlot *r = route_probe(t, src, dst);
    if (r->route) return;
    r->src = src;
    r->dst = dst;
    r->route = Py_NewRef(route);
    t->cused++;
}

static void routes_forget(Transfer *t) {
    for (size_t i = 0; t->cache && i <= t->cmask; i++) Py_CLEAR(t->cache[i].route);
    t->cused = 0;
}

static int Transfer_init(Transfer *t, PyObject *args, PyObject *kw) {
    static char *names[] = {"routes", "fallback", "npus", NULL};
    PyObject *routes, *fallback;
    long long npus;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O!OL", names, &PyDict_Type, &routes, &fallback, &npus)) return -1;
    if (npus < 1 || npus > (1LL << 31)) {
        PyErr_SetString(PyExc_ValueError, "npus must be 1 .. 2^31");
        return -1;
    }
    t->npus = npus;
    routes_forget(t); /* a new dict: what the old one said no longer holds */
    Py_XSETREF(t->routes, Py_NewRef(routes));
    Py_XSETREF(t->fallback, Py_NewRef(fallback));
    return 0;
}

/* 1: sent; 0: not the fast case (the caller falls back); -1: error */
static int transfer_fast(Transfer *t, PyObject *const *args) {
    long long src = PyLong_CheckExact(args[0]) ? PyLong_AsLongLong(args[0]) : -1;
    long long dst = PyLong_CheckExact(args[1]) ? PyLong_AsLongLong(args[1]) : -1;
    PyErr_Clear(); /* beyond 64 bits: outside the ranks too */
    if (src < 0 || dst < 0 || src >= t->npus || dst >= t->npus) return 0; /* the method says what is wrong */
    PyObject *route = t->cache ? route_probe(t, src, dst)->route : NULL; /* borrowed */
    if (!route) {
        PyObject *key = PyLong_FromLongLong(src * t->npus + dst);
        if (!key) return -1;
        route = PyDict_GetItemWithError(t->routes, key); /* borrowed */
        Py_DECREF(key);
        if (!route) return PyErr_Occurred() ? -1 : 0;
        route_remember(t, src, dst, route);
    }
    if (!PyTuple_CheckExact(route) || PyTuple_GET_SIZE(route) == 0) return 0;
    PyObject *first = PyTuple_GET_ITEM(route, 0);
    if (!Py_IS_TYPE(first, link_type)) return 0;
    Link *l = (Link *)first;
    if (!l->is_core) return 0;
    long long now = ((Queue *)l->queue)->now;
    if (now <= 0 || l->claim_until > now) return 0;
    long long size = PyLong_AsLongLong(args[2]);
    if (size == -1 && PyErr_Occurred()) return -1;
    Chunk *c = (Chunk *)PyType_GenericAlloc(chunk_type, 0);
    if (!c) return -1;
    c->full = Py_NewRef(args[3]);
    c->route = Py_NewRef(route);
    c->ins = Py_NewRef(Py_None);
    c->hop = 0;
    c->size_bytes = size;
    c->tail = 0;
    int r = l->busy ? pend_push(l, (PyObject *)c) : link_transmit_c(l, (PyObject *)c);
    Py_DECREF(c);
    return r < 0 ? -1 : 1;
}

static PyObject *Transfer_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    Transfer *t = (Transfer *)self;
    Py_ssize_t n = PyVectorcall_NARGS(nargsf);
    if (n == 4 && !kwnames) {
        int r = transfer_fast(t, args);
        if (r < 0) return NULL;
        if (r) Py_RETURN_NONE;
    }
    return PyObject_Vectorcall(t->fallback, args, n, kwnames);
}

static PyObject *Transfer_new(PyTypeObject *tp, PyObject *args, PyObject *kw) {
    Transfer *t = (Transfer *)PyType_GenericNew(tp, args, kw);
    if (t) t->vectorcall = Transfer_vectorcall;
    return (PyObject *)t;
}

static int Transfer_traverse(Transfer *t, visitproc visit, void *arg) {
    for (size_t i = 0; t->cache && i <= t->cmask; i++) Py_VISIT(t->cache[i].route);
    Py_VISIT(t->routes);
    Py_VISIT(t->fallback);
    Py_VISIT(Py_TYPE(t));
    return 0;
}

static int Transfer_clear(Transfer *t) {
    routes_forget(t);
    Py_CLEAR(t->routes);
    Py_CLEAR(t->fallback);
    return 0;
}

static void Transfer_dealloc(Transfer *t) {
    PyTypeObject *tp = Py_TYPE(t);
    PyObject_GC_UnTrack(t);
    Transfer_clear(t);
    PyMem_Free(t->cache);
    tp->tp_free((PyObject *)t);
    Py_DECREF(tp);
}

static PyMemberDef Transfer_members[] = {
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(Transfer, vectorcall), READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyType_Slot Transfer_slots[] = {
    {Py_tp_doc, "transfer(src, dst, size_bytes, message): aware.py's _transfer, its common case in C."},
    {Py_tp_new, Transfer_new},
    {Py_tp_init, Transfer_init},
    {Py_tp_dealloc, Transfer_dealloc},
    {Py_tp_traverse, Transfer_traverse},
    {Py_tp_clear, Transfer_clear},
    {Py_tp_call, PyVectorcall_Call},
    {Py_tp_members, Transfer_members},
    {0, NULL},
};

static PyType_Spec Transfer_spec = {
    .name = "network._event_core.PlainTransfer",
    .basicsize = sizeof(Transfer),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .slots = Transfer_slots,
};

/* -- the module --------------------------------------------------------------------------------- */

static int add_type(PyObject *m, PyType_Spec *spec, PyObject *base, PyTypeObject **out) {
    PyObject *tp = PyType_FromModuleAndSpec(m, spec, base);
    if (!tp) return -1;
    *out = (PyTypeObject *)Py_NewRef(tp); /* kept for the lifetime of the process */
    const char *name = strrchr(spec->name, '.') + 1;
    if (PyModule_AddObject(m, name, tp) < 0) {
        Py_DECREF(tp);
        return -1;
    }
    return 0;
}

int dtsim_add_aware_links(PyObject *m) {
    PyTypeObject *transfer_type;
    if (!empty_tuple && !(empty_tuple = PyTuple_New(0))) return -1;
    if (!units_arrival) {
        PyObject *units = PyImport_ImportModule("network.units");
        if (!units) return -1;
        units_arrival = PyObject_GetAttrString(units, "link_arrival_ns");
        units_serialization = PyObject_GetAttrString(units, "link_serialization_ns");
        Py_DECREF(units);
        if (!units_arrival || !units_serialization) return -1;
    }
    if (add_type(m, &Chunk_spec, NULL, &chunk_type) < 0 || add_type(m, &Link_spec, NULL, &link_type) < 0 ||
        add_type(m, &Arrival_spec, NULL, &arrival_type) < 0 || add_type(m, &Transfer_spec, NULL, &transfer_type) < 0)
        return -1;
    return 0;
}
