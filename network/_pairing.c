/* Send/receive pairing of the analytical backends in C (network/analytical/base.py: PyPairing,
 * the reference, which says what the rules are; tests hold the two to every cycle and byte).
 *
 * Pairing is the C base of AnalyticalBackend: its counters and the state the hot path reads are
 * C fields (Python reads and writes them as attributes), and ``exchange`` (one collective step),
 * ``_post_send`` and ``_post_recv`` (a point-to-point send or receive) and ``_on_arrival`` (a
 * message delivered) run without a Python frame. ``_transfer`` stays a method of each backend,
 * called through the type, so a subclass's override runs.
 *
 * A message is base.py's list: [send callback, its args, receive callback, its args, arrived,
 * label, time sent, key, n-th of its key]. A channel (one key) counts its sends and receives and
 * keeps, first in first out, the messages still missing their other side.
 *
 * The channels live in a C hash table keyed by the four integers (tag, src, dst, size): a Python
 * dict of tuples cost a tuple, a hash of four ints and a Channel object per message (about 8 %
 * of a 128-rank run). A key beyond 64 bits goes to a Python dict of Channel objects instead, so
 * every key Python accepts still pairs. ``_channels`` shows both as one dict (a snapshot).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stdint.h>

#include "_event_core.h"

enum { SEND_CB, SEND_ARGS, RECV_CB, RECV_ARGS, ARRIVED, LABEL, SENT_AT, KEY, NTH, MSG_LEN };

static PyObject *empty_tuple = NULL;
static PyObject *noop = NULL;            /* the "no send callback" marker, base.py's _noop */
static PyObject *mismatch_error = NULL;  /* network.errors.MessageMismatchError */
static PyTypeObject *pairing_type = NULL; /* Pairing, below: a FixedDelayTransfer's owner */
static PyObject *str_transfer = NULL, *str_schedule = NULL, *str_now = NULL, *str_topology = NULL,
                *str_dim_to_transfer = NULL;
static PyTypeObject *channel_type = NULL;

/* -- a channel's state ---------------------------------------------------------------------------- */

typedef struct {
    Py_ssize_t sends, recvs;
    PyObject **q; /* waiting messages, a ring buffer */
    Py_ssize_t head, n, cap;
} ChanState;

static int cs_push(ChanState *c, PyObject *msg) {
    if (c->n == c->cap) {
        Py_ssize_t cap = c->cap ? 2 * c->cap : 2;
        PyObject **q = PyMem_Malloc(cap * sizeof(PyObject *));
        if (!q) {
            PyErr_NoMemory();
            return -1;
        }
        for (Py_ssize_t i = 0; i < c->n; i++) q[i] = c->q[(c->head + i) % c->cap];
        PyMem_Free(c->q);
        c->q = q;
        c->cap = cap;
        c->head = 0;
    }
    c->q[(c->head + c->n) % c->cap] = Py_NewRef(msg);
    c->n++;
    return 0;
}

/* a new reference; the caller knows the channel is not empty */
static PyObject *cs_pop(ChanState *c) {
    PyObject *m = c->q[c->head];
    c->head = (c->head + 1) % c->cap;
    c->n--;
    return m;
}

static void cs_clear(ChanState *c) {
    while (c->n) {
        PyObject *m = cs_pop(c);
        Py_DECREF(m);
    }
}

static int cs_traverse(ChanState *c, visitproc visit, void *arg) {
    for (Py_ssize_t i = 0; i < c->n; i++) Py_VISIT(c->q[(c->head + i) % c->cap]);
    return 0;
}

static int cs_copy(ChanState *to, const ChanState *from) {
    to->sends = from->sends;
    to->recvs = from->recvs;
    for (Py_ssize_t i = 0; i < from->n; i++)
        if (cs_push(to, from->q[(from->head + i) % from->cap]) < 0) return -1;
    return 0;
}

/* -- Channel: a channel as a Python object (the reference's PyChannel; the overflow dict's values) -- */

typedef struct {
    PyObject_HEAD
    ChanState s;
} Channel;

static PyObject *Channel_push(Channel *c, PyObject *msg) {
    if (cs_push(&c->s, msg) < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *Channel_pop(Channel *c, PyObject *Py_UNUSED(ignored)) {
    if (!c->s.n) {
        PyErr_SetString(PyExc_IndexError, "pop from an empty channel");
        return NULL;
    }
    return cs_pop(&c->s);
}

static PyObject *Channel_get_waiting(Channel *c, void *Py_UNUSED(closure)) {
    PyObject *t = PyTuple_New(c->s.n);
    if (!t) return NULL;
    for (Py_ssize_t i = 0; i < c->s.n; i++) PyTuple_SET_ITEM(t, i, Py_NewRef(c->s.q[(c->s.head + i) % c->s.cap]));
    return t;
}

static int Channel_traverse(Channel *c, visitproc visit, void *arg) {
    Py_VISIT(Py_TYPE(c));
    return cs_traverse(&c->s, visit, arg);
}

static int Channel_clear(Channel *c) {
    cs_clear(&c->s);
    return 0;
}

static void Channel_dealloc(Channel *c) {
    PyTypeObject *tp = Py_TYPE(c);
    PyObject_GC_UnTrack(c);
    Channel_clear(c);
    PyMem_Free(c->s.q);
    tp->tp_free((PyObject *)c);
    Py_DECREF(tp);
}

static PyMethodDef Channel_methods[] = {
    {"push", (PyCFunction)Channel_push, METH_O, "queue a message still missing its other side"},
    {"pop", (PyCFunction)Channel_pop, METH_NOARGS, "the oldest such message"},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef Channel_members[] = {
    {"sends", T_PYSSIZET, offsetof(Channel, s.sends), 0, NULL},
    {"recvs", T_PYSSIZET, offsetof(Channel, s.recvs), 0, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyGetSetDef Channel_getset[] = {
    {"waiting", (getter)Channel_get_waiting, NULL, "the waiting messages, oldest first (a snapshot)", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot Channel_slots[] = {
    {Py_tp_doc, "One pairing key's sends, receives and unpaired messages (base.py: PyChannel)."},
    {Py_tp_new, PyType_GenericNew},
    {Py_tp_dealloc, Channel_dealloc},
    {Py_tp_traverse, Channel_traverse},
    {Py_tp_clear, Channel_clear},
    {Py_tp_methods, Channel_methods},
    {Py_tp_members, Channel_members},
    {Py_tp_getset, Channel_getset},
    {0, NULL},
};

static PyType_Spec Channel_spec = {
    .name = "network._event_core.Channel",
    .basicsize = sizeof(Channel),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .slots = Channel_slots,
};

/* -- the channel table: (tag, src, dst, size) -> ChanState, open addressing, linear probing ---------- */

typedef struct {
    long long k[4];
    uint64_t hash;
    ChanState *st; /* NULL: a free slot */
} Slot;

typedef struct {
    Slot *slots;
    size_t mask; /* capacity - 1; capacity a power of two, or 0 slots */
    size_t used;
    ChanState *spare[64]; /* freed states, their buffers kept: a key is often used once */
    int n_spare;
} ChanMap;

static inline uint64_t mix64(uint64_t h) {
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ULL;
    h ^= h >> 33;
    return h;
}

static inline uint64_t key_hash(const long long k[4]) {
    uint64_t h = mix64((uint64_t)k[0] + 0x9e3779b97f4a7c15ULL);
    h = mix64(h ^ (uint64_t)k[1]);
    h = mix64(h ^ (uint64_t)k[2]);
    return mix64(h ^ (uint64_t)k[3]);
}

static inline int key_eq(const long long a[4], const long long b[4]) {
    return a[0] == b[0] && a[1] == b[1] && a[2] == b[2] && a[3] == b[3];
}

/* the slot holding k, or the free slot where it would go */
static Slot *map_probe(ChanMap *m, const long long k[4], uint64_t h) {
    size_t i = (size_t)h & m->mask;
    for (;;) {
        Slot *s = &m->slots[i];
        if (!s->st || (s->hash == h && key_eq(s->k, k))) return s;
        i = (i + 1) & m->mask;
    }
}

static int map_grow(ChanMap *m) {
    size_t cap = m->slots ? 2 * (m->mask + 1) : 64;
    Slot *old = m->slots;
    size_t old_cap = old ? m->mask + 1 : 0;
    Slot *slots = PyMem_Calloc(cap, sizeof(Slot));
    if (!slots) {
        PyErr_NoMemory();
        return -1;
    }
    m->slots = slots;
    m->mask = cap - 1;
    for (size_t i = 0; i < old_cap; i++)
        if (old[i].st) *map_probe(m, old[i].k, old[i].hash) = old[i];
    PyMem_Free(old);
    return 0;
}

static ChanState *state_new(ChanMap *m) {
    if (m->n_spare) return m->spare[--m->n_spare];
    ChanState *st = PyMem_Calloc(1, sizeof(ChanState));
    if (!st) PyErr_NoMemory();
    return st;
}

static void state_free(ChanMap *m, ChanState *st) {
    cs_clear(st);
    st->sends = st->recvs = 0;
    st->head = 0;
    if (m->n_spare < (int)(sizeof m->spare / sizeof m->spare[0])) {
        m->spare[m->n_spare++] = st;
        return;
    }
    PyMem_Free(st->q);
    PyMem_Free(st);
}

/* k's state, created empty if new */
static ChanState *map_get(ChanMap *m, const long long k[4]) {
    if (2 * (m->used + 1) > (m->slots ? m->mask + 1 : 0) && map_grow(m) < 0) return NULL;
    uint64_t h = key_hash(k);
    Slot *s = map_probe(m, k, h);
    if (s->st) return s->st;
    ChanState *st = state_new(m);
    if (!st) return NULL;
    memcpy(s->k, k, sizeof s->k);
    s->hash = h;
    s->st = st;
    m->used++;
    return st;
}

/* k forgotten if every send met its receive (the reference's ``del channels[key]``); the slots
 * after it move back so that probing needs no tombstones */
static void map_forget_if_paired(ChanMap *m, const long long k[4]) {
    if (!m->slots) return;
    Slot *s = map_probe(m, k, key_hash(k));
    if (!s->st || s->st->sends != s->st->recvs || s->st->n) return;
    state_free(m, s->st);
    s->st = NULL;
    m->used--;
    size_t i = (size_t)(s - m->slots), j = i;
    for (;;) {
        j = (j + 1) & m->mask;
        Slot *t = &m->slots[j];
        if (!t->st) return;
        size_t home = (size_t)t->hash & m->mask;
        /* t stays if its home lies cyclically in (i, j] */
        int stays = i <= j ? (home > i && home <= j) : (home > i || home <= j);
        if (!stays) {
            m->slots[i] = *t;
            t->st = NULL;
            i = j;
        }
    }
}

static void map_clear(ChanMap *m) {
    for (size_t i = 0; m->slots && i <= m->mask; i++)
        if (m->slots[i].st) {
            ChanState *st = m->slots[i].st;
            m->slots[i].st = NULL;
            cs_clear(st);
            PyMem_Free(st->q);
            PyMem_Free(st);
        }
    m->used = 0;
}

static void map_free(ChanMap *m) {
    map_clear(m);
    PyMem_Free(m->slots);
    m->slots = NULL;
    m->mask = 0;
    while (m->n_spare) {
        ChanState *st = m->spare[--m->n_spare];
        PyMem_Free(st->q);
        PyMem_Free(st);
    }
}

/* -- Pairing ------------------------------------------------------------------------------------ */

typedef struct {
    PyObject_HEAD
    ChanMap map;
    PyObject *overflow;     /* dict: (tag, src, dst, size) -> Channel, for keys beyond 64 bits */
    PyObject *queue;        /* the event queue */
    PyObject *bytes_per_dim; /* list of ints */
    PyObject *dim_cache;    /* dict: (src, dst) -> dimension */
    char one_dim;
    long long messages;
    /* 128 bits: a message may be 2^63 - 1 bytes (an int64 attribute), and a total that no longer
     * fits 64 bits is still the total; Python sees an int either way (count_get/count_set) */
    __int128 bytes_sent, bytes_received;
} Pairing;

/* A channel found for one send or receive: a table state (k set) or an overflow Channel (key set). */
typedef struct {
    ChanState *st;
    long long k[4];
    PyObject *key; /* the overflow dict's key, a new reference; NULL for the table */
} ChanRef;

/* 1: all four fit in 64 bits (k set); 0: one does not; -1: error (not an integer). An integer of
 * another type (numpy's) is the int it stands for, as the tuple key it equals in the reference. */
static int key_ints(PyObject *const parts[4], long long k[4]) {
    for (int i = 0; i < 4; i++) {
        PyObject *v = PyLong_Check(parts[i]) ? Py_NewRef(parts[i]) : PyIndex_Check(parts[i]) ? PyNumber_Index(parts[i])
                                                                                            : NULL;
        if (!v) {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_TypeError, "a pairing key's tag, ranks and size are integers, not %.80s",
                             Py_TYPE(parts[i])->tp_name);
            return -1;
        }
        int overflow;
        k[i] = PyLong_AsLongLongAndOverflow(v, &overflow);
        Py_DECREF(v);
        if (overflow) return 0;
        if (k[i] == -1 && PyErr_Occurred()) return -1;
    }
    return 1;
}

static int chan_get(Pairing *p, PyObject *tag, PyObject *src, PyObject *dst, PyObject *size, ChanRef *r) {
    PyObject *parts[4] = {tag, src, dst, size};
    r->key = NULL;
    int fits = key_ints(parts, r->k);
    if (fits < 0) return -1;
    if (fits) {
        r->st = map_get(&p->map, r->k);
        return r->st ? 0 : -1;
    }
    if (!p->overflow && !(p->overflow = PyDict_New())) return -1;
    PyObject *key = PyTuple_Pack(4, tag, src, dst, size);
    if (!key) return -1;
    PyObject *ch = PyDict_GetItemWithError(p->overflow, key);
    if (!ch) {
        if (PyErr_Occurred() || !(ch = PyType_GenericNew(channel_type, NULL, NULL))) goto fail;
        int rc = PyDict_SetItem(p->overflow, key, ch);
        Py_DECREF(ch); /* the dict holds it */
        if (rc < 0) goto fail;
    }
    r->st = &((Channel *)ch)->s;
    r->key = key;
    return 0;
fail:
    Py_DECREF(key);
    return -1;
}

static int chan_forget_if_paired(Pairing *p, ChanRef *r) {
    if (!r->key) {
        map_forget_if_paired(&p->map, r->k);
        return 0;
    }
    PyObject *ch = PyDict_GetItemWithError(p->overflow, r->key);
    if (!ch) return PyErr_Occurred() ? -1 : 0;
    ChanState *st = &((Channel *)ch)->s;
    return (st->sends == st->recvs && !st->n) ? PyDict_DelItem(p->overflow, r->key) : 0;
}

static int queue_now(Pairing *p, long long *now) {
    if (p->queue && PyObject_TypeCheck(p->queue, dtsim_core_type)) {
        *now = ((Queue *)p->queue)->now;
        return 0;
    }
    if (!p->queue) {
        PyErr_SetString(PyExc_AttributeError, "the backend has no queue");
        return -1;
    }
    PyObject *v = PyObject_GetAttr(p->queue, str_now);
    if (!v) return -1;
    *now = PyLong_AsLongLong(v);
    Py_DECREF(v);
    return (*now == -1 && PyErr_Occurred()) ? -1 : 0;
}

/* queue.schedule(0, cb, *args) */
static int schedule_now(Pairing *p, PyObject *cb, PyObject *args) {
    if (PyObject_TypeCheck(p->queue, dtsim_core_type) &&
        Py_TYPE(p->queue)->tp_base == dtsim_core_type) /* EventQueue: Core's schedule, not overridden */
        return dtsim_push_event((Queue *)p->queue, 0, cb, args);
    Py_ssize_t n = PyTuple_GET_SIZE(args);
    PyObject *call = PyTuple_New(n + 2);
    if (!call) return -1;
    PyTuple_SET_ITEM(call, 0, PyLong_FromLong(0));
    PyTuple_SET_ITEM(call, 1, Py_NewRef(cb));
    for (Py_ssize_t i = 0; i < n; i++) PyTuple_SET_ITEM(call, i + 2, Py_NewRef(PyTuple_GET_ITEM(args, i)));
    PyObject *meth = PyTuple_GET_ITEM(call, 0) ? PyObject_GetAttr(p->queue, str_schedule) : NULL;
    PyObject *res = meth ? PyObject_Call(meth, call, NULL) : NULL;
    Py_XDECREF(meth);
    Py_DECREF(call);
    Py_XDECREF(res);
    return res ? 0 : -1;
}

static PyObject *new_message(PyObject *label, ChanRef *r, PyObject *const parts[4], Py_ssize_t nth) {
    PyObject *key = r->key ? Py_NewRef(r->key) : PyTuple_Pack(4, parts[0], parts[1], parts[2], parts[3]);
    if (!key) return NULL;
    PyObject *m = PyList_New(MSG_LEN);
    PyObject *n = m ? PyLong_FromSsize_t(nth) : NULL;
    if (!n) {
        Py_XDECREF(m);
        Py_DECREF(key);
        return NULL;
    }
    PyList_SET_ITEM(m, SEND_CB, Py_NewRef(noop));
    PyList_SET_ITEM(m, SEND_ARGS, Py_NewRef(empty_tuple));
    PyList_SET_ITEM(m, RECV_CB, Py_NewRef(Py_None));
    PyList_SET_ITEM(m, RECV_ARGS, Py_NewRef(empty_tuple));
    PyList_SET_ITEM(m, ARRIVED, Py_NewRef(Py_False));
    PyList_SET_ITEM(m, LABEL, Py_NewRef(label));
    PyList_SET_ITEM(m, SENT_AT, Py_NewRef(Py_None));
    PyList_SET_ITEM(m, KEY, key);
    PyList_SET_ITEM(m, NTH, n);
    return m;
}

/* label and the message's label both set and different: MessageMismatchError(src, dst, a, b) */
static int check_labels(PyObject *a, PyObject *b, PyObject *src, PyObject *dst) {
    if (a == Py_None || b == Py_None || a == b) return 0;
    int ne = PyObject_RichCompareBool(a, b, Py_NE);
    if (ne <= 0) return ne;
    PyObject *exc = PyObject_CallFunctionObjArgs(mismatch_error, src, dst, a, b, NULL);
    if (exc) {
        PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
        Py_DECREF(exc);
    }
    return -1;
}

static int add_bytes(PyObject *list, Py_ssize_t i, PyObject *size) {
    if (!PyList_Check(list) || i < 0 || i >= PyList_GET_SIZE(list)) {
        PyErr_SetString(PyExc_IndexError, "bytes_per_dim has no such dimension");
        return -1;
    }
    PyObject *sum = PyNumber_Add(PyList_GET_ITEM(list, i), size);
    if (!sum) return -1;
    return PyList_SetItem(list, i, sum); /* steals sum */
}

/* bytes_per_dim[dimension of me -> dst] += size */
static int count_dim(Pairing *p, PyObject *me, PyObject *dst, PyObject *size) {
    if (p->one_dim) return add_bytes(p->bytes_per_dim, 0, size);
    if (!p->dim_cache || !PyDict_Check(p->dim_cache)) {
        PyErr_SetString(PyExc_TypeError, "the backend's _dim_cache is not a dict");
        return -1;
    }
    PyObject *pair = PyTuple_Pack(2, me, dst);
    if (!pair) return -1;
    PyObject *dim = PyDict_GetItemWithError(p->dim_cache, pair);
    if (dim) {
        Py_INCREF(dim);
    } else {
        if (PyErr_Occurred()) goto fail;
        PyObject *topo = PyObject_GetAttr((PyObject *)p, str_topology);
        if (!topo) goto fail;
        dim = PyObject_CallMethodObjArgs(topo, str_dim_to_transfer, me, dst, NULL);
        Py_DECREF(topo);
        if (!dim || PyDict_SetItem(p->dim_cache, pair, dim) < 0) goto fail_dim;
    }
    Py_ssize_t i = PyLong_AsSsize_t(dim);
    Py_DECREF(dim);
    Py_DECREF(pair);
    if (i == -1 && PyErr_Occurred()) return -1;
    return add_bytes(p->bytes_per_dim, i, size);
fail_dim:
    Py_XDECREF(dim);
fail:
    Py_DECREF(pair);
    return -1;
}

/* The send half of a step (base.py PyPairing._post_send): the message, a new reference, with its
 * time sent and the counters booked. */
static PyObject *post_send(Pairing *p, PyObject *src, PyObject *dst, PyObject *size, PyObject *tag,
                           PyObject *label) {
    long long nbytes = PyLong_AsLongLong(size);
    if (nbytes == -1 && PyErr_Occurred()) return NULL;
    PyObject *parts[4] = {tag, src, dst, size}, *msg;
    ChanRef r;
    if (chan_get(p, tag, src, dst, size, &r) < 0) return NULL;
    ChanState *ch = r.st;
    ch->sends++;
    if (ch->recvs >= ch->sends) { /* its receive is waiting */
        msg = cs_pop(ch);
        if (check_labels(label, PyList_GET_ITEM(msg, LABEL), src, dst) < 0) goto fail;
        if (chan_forget_if_paired(p, &r) < 0) goto fail; /* all paired: tags are often used once */
    } else {
        if (!(msg = new_message(label, &r, parts, ch->sends))) goto fail_key;
        if (cs_push(ch, msg) < 0) goto fail;
    }
    Py_CLEAR(r.key);
    long long now;
    if (queue_now(p, &now) < 0) goto fail;
    PyObject *t = PyLong_FromLongLong(now);
    if (!t) goto fail;
    PyList_SetItem(msg, SENT_AT, t);
    p->messages++;
    p->bytes_sent += nbytes;
    if (count_dim(p, src, dst, size) < 0) goto fail;
    return msg;
fail:
    Py_DECREF(msg);
fail_key:
    Py_XDECREF(r.key);
    return NULL;
}

/* The receive half (base.py PyPairing._post_recv): callback(*args) when the message is in. */
static int post_recv(Pairing *p, PyObject *dst, PyObject *src, PyObject *size, PyObject *tag, PyObject *label,
                     PyObject *callback, PyObject *args) {
    PyObject *parts[4] = {tag, src, dst, size}, *msg;
    ChanRef r;
    if (chan_get(p, tag, src, dst, size, &r) < 0) return -1;
    ChanState *ch = r.st;
    ch->recvs++;
    if (ch->sends >= ch->recvs) { /* its send was issued */
        msg = cs_pop(ch);
        if (check_labels(PyList_GET_ITEM(msg, LABEL), label, src, dst) < 0) goto fail;
        if (chan_forget_if_paired(p, &r) < 0) goto fail;
        Py_CLEAR(r.key);
        int arrived = PyObject_IsTrue(PyList_GET_ITEM(msg, ARRIVED));
        if (arrived < 0) goto fail;
        if (arrived) {
            long long nbytes = PyLong_AsLongLong(size);
            if (nbytes == -1 && PyErr_Occurred()) goto fail;
            p->bytes_received += nbytes;
            int rc = schedule_now(p, callback, args);
            Py_DECREF(msg);
            return rc;
        }
    } else {
        if (!(msg = new_message(label, &r, parts, ch->recvs))) goto fail_key;
        Py_CLEAR(r.key);
        if (cs_push(ch, msg) < 0) goto fail;
    }
    PyList_SetItem(msg, RECV_CB, Py_NewRef(callback));
    PyList_SetItem(msg, RECV_ARGS, Py_NewRef(args));
    Py_DECREF(msg);
    return 0;
fail:
    Py_DECREF(msg);
fail_key:
    Py_XDECREF(r.key);
    return -1;
}

/* exchange(me, dst, src, size_bytes, tag, label, callback, arg): base.py PyPairing.exchange */
static PyObject *Pairing_exchange(Pairing *p, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 8) {
        PyErr_SetString(PyExc_TypeError, "exchange(me, dst, src, size_bytes, tag, label, callback, arg)");
        return NULL;
    }
    PyObject *me = args[0], *dst = args[1], *src = args[2], *size = args[3], *tag = args[4], *label = args[5],
             *callback = args[6], *arg = args[7];
    PyObject *msg = post_send(p, me, dst, size, tag, label);
    if (!msg) return NULL;
    PyObject *targs[] = {(PyObject *)p, me, dst, size, msg};
    PyObject *r = PyObject_VectorcallMethod(str_transfer, targs, 5 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
    Py_DECREF(msg);
    if (!r) return NULL;
    Py_DECREF(r);
    PyObject *rargs = PyTuple_Pack(1, arg);
    if (!rargs) return NULL;
    int rc = post_recv(p, me, src, size, tag, label, callback, rargs);
    Py_DECREF(rargs);
    if (rc < 0) return NULL;
    Py_RETURN_NONE;
}

/* _post_send(src, dst, size_bytes, tag, label) -> the message */
static PyObject *Pairing_post_send(Pairing *p, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "_post_send(src, dst, size_bytes, tag, label)");
        return NULL;
    }
    return post_send(p, args[0], args[1], args[2], args[3], args[4]);
}

/* _post_recv(dst, src, size_bytes, tag, label, callback, args) */
static PyObject *Pairing_post_recv(Pairing *p, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 7 || !PyTuple_Check(args[6])) {
        PyErr_SetString(PyExc_TypeError, "_post_recv(dst, src, size_bytes, tag, label, callback, args: tuple)");
        return NULL;
    }
    if (post_recv(p, args[0], args[1], args[2], args[3], args[4], args[5], args[6]) < 0) return NULL;
    Py_RETURN_NONE;
}

/* _on_arrival(msg): the sender's callback, then the receiver's if posted (base.py) */
static PyObject *Pairing_on_arrival(Pairing *p, PyObject *msg) {
    if (!PyList_CheckExact(msg) || PyList_GET_SIZE(msg) != MSG_LEN) {
        PyErr_SetString(PyExc_TypeError, "_on_arrival takes a message (a list of 9)");
        return NULL;
    }
    PyObject *recv_cb = Py_NewRef(PyList_GET_ITEM(msg, RECV_CB));
    PyObject *send_cb = PyList_GET_ITEM(msg, SEND_CB), *r;
    if (send_cb != noop) {
        PyObject *sargs = PyList_GET_ITEM(msg, SEND_ARGS);
        if (!PyTuple_Check(sargs)) {
            PyErr_SetString(PyExc_TypeError, "a message's send arguments are not a tuple");
            goto fail;
        }
        Py_INCREF(sargs);
        r = PyObject_Call(send_cb, sargs, NULL);
        Py_DECREF(sargs);
        if (!r) goto fail;
        Py_DECREF(r);
    }
    if (recv_cb != Py_None) {
        PyObject *key = PyList_GET_ITEM(msg, KEY);
        if (!PyTuple_Check(key) || PyTuple_GET_SIZE(key) != 4) {
            PyErr_SetString(PyExc_TypeError, "a message's key is not (tag, src, dst, size)");
            goto fail;
        }
        long long nbytes = PyLong_AsLongLong(PyTuple_GET_ITEM(key, 3));
        if (nbytes == -1 && PyErr_Occurred()) goto fail;
        p->bytes_received += nbytes;
        PyObject *rargs = PyList_GET_ITEM(msg, RECV_ARGS);
        if (PyTuple_Check(rargs) && PyTuple_GET_SIZE(rargs) == 1) {
            r = PyObject_CallOneArg(recv_cb, PyTuple_GET_ITEM(rargs, 0));
        } else if (PyTuple_Check(rargs)) {
            r = PyObject_Call(recv_cb, rargs, NULL);
        } else {
            PyErr_SetString(PyExc_TypeError, "a message's receive arguments are not a tuple");
            goto fail;
        }
        if (!r) goto fail;
        Py_DECREF(r);
    } else {
        PyList_SetItem(msg, ARRIVED, Py_NewRef(Py_True));
    }
    Py_DECREF(recv_cb);
    Py_RETURN_NONE;
fail:
    Py_DECREF(recv_cb);
    return NULL;
}

/* _channels: every channel with a send or receive still unpaired, as {(tag, src, dst, size): Channel}
 * (copies: the table is C's). Setting it replaces them all (a backend starts with {}). */
static PyObject *Pairing_get_channels(Pairing *p, void *Py_UNUSED(closure)) {
    PyObject *d = PyDict_New();
    if (!d) return NULL;
    for (size_t i = 0; p->map.slots && i <= p->map.mask; i++) {
        Slot *s = &p->map.slots[i];
        if (!s->st) continue;
        PyObject *key = Py_BuildValue("(LLLL)", s->k[0], s->k[1], s->k[2], s->k[3]);
        Channel *ch = key ? (Channel *)PyType_GenericNew(channel_type, NULL, NULL) : NULL;
        int rc = ch ? cs_copy(&ch->s, s->st) : -1;
        if (rc == 0) rc = PyDict_SetItem(d, key, (PyObject *)ch);
        Py_XDECREF(key);
        Py_XDECREF(ch);
        if (rc < 0) goto fail;
    }
    if (p->overflow && PyDict_Update(d, p->overflow) < 0) goto fail;
    return d;
fail:
    Py_DECREF(d);
    return NULL;
}

static int Pairing_set_channels(Pairing *p, PyObject *value, void *Py_UNUSED(closure)) {
    if (!value || !PyDict_Check(value)) {
        PyErr_SetString(PyExc_TypeError, "_channels is set to a dict {(tag, src, dst, size): Channel}");
        return -1;
    }
    map_clear(&p->map);
    Py_CLEAR(p->overflow);
    PyObject *key, *ch;
    Py_ssize_t pos = 0;
    while (PyDict_Next(value, &pos, &key, &ch)) {
        if (!PyTuple_Check(key) || PyTuple_GET_SIZE(key) != 4 || !Py_IS_TYPE(ch, channel_type)) {
            PyErr_SetString(PyExc_TypeError, "_channels maps (tag, src, dst, size) to Channel");
            return -1;
        }
        ChanRef r;
        PyObject **parts = &PyTuple_GET_ITEM(key, 0);
        if (chan_get(p, parts[0], parts[1], parts[2], parts[3], &r) < 0) return -1;
        Py_XDECREF(r.key);
        cs_clear(r.st);
        if (cs_copy(r.st, &((Channel *)ch)->s) < 0) return -1;
    }
    return 0;
}

static int Pairing_traverse(Pairing *p, visitproc visit, void *arg) {
    for (size_t i = 0; p->map.slots && i <= p->map.mask; i++)
        if (p->map.slots[i].st) {
            int r = cs_traverse(p->map.slots[i].st, visit, arg);
            if (r) return r;
        }
    Py_VISIT(p->overflow);
    Py_VISIT(p->queue);
    Py_VISIT(p->bytes_per_dim);
    Py_VISIT(p->dim_cache);
    Py_VISIT(Py_TYPE(p));
    return 0;
}

static int Pairing_clear(Pairing *p) {
    map_clear(&p->map);
    Py_CLEAR(p->overflow);
    Py_CLEAR(p->queue);
    Py_CLEAR(p->bytes_per_dim);
    Py_CLEAR(p->dim_cache);
    return 0;
}

static void Pairing_dealloc(Pairing *p) {
    PyTypeObject *tp = Py_TYPE(p);
    PyObject_GC_UnTrack(p);
    Pairing_clear(p);
    map_free(&p->map);
    tp->tp_free((PyObject *)p);
    Py_DECREF(tp);
}

static PyMethodDef Pairing_methods[] = {
    {"exchange", (PyCFunction)(void (*)(void))Pairing_exchange, METH_FASTCALL,
     "exchange(me, dst, src, size_bytes, tag, label, callback, arg): send to dst, then receive from src"},
    {"_post_send", (PyCFunction)(void (*)(void))Pairing_post_send, METH_FASTCALL,
     "_post_send(src, dst, size_bytes, tag, label): a send paired or queued; its message"},
    {"_post_recv", (PyCFunction)(void (*)(void))Pairing_post_recv, METH_FASTCALL,
     "_post_recv(dst, src, size_bytes, tag, label, callback, args): a receive paired or queued"},
    {"_on_arrival", (PyCFunction)Pairing_on_arrival, METH_O, "a message delivered: its callbacks"},
    {NULL, NULL, 0, NULL},
};

/* a byte count as a Python int, and back (as high * 2^64 + low 64 bits); past 128 bits is an
 * OverflowError (no run gets there) */
static PyObject *count_get(Pairing *p, void *offset) {
    __int128 v = *(__int128 *)((char *)p + (Py_ssize_t)offset);
    if (v >= LLONG_MIN && v <= LLONG_MAX) return PyLong_FromLongLong((long long)v);
    PyObject *hi = PyLong_FromLongLong((long long)(v >> 64)), *sixty_four = PyLong_FromLong(64);
    PyObject *lo = PyLong_FromUnsignedLongLong((unsigned long long)v);
    PyObject *shifted = hi && sixty_four ? PyNumber_Lshift(hi, sixty_four) : NULL;
    PyObject *r = shifted && lo ? PyNumber_Or(shifted, lo) : NULL;
    Py_XDECREF(hi);
    Py_XDECREF(sixty_four);
    Py_XDECREF(lo);
    Py_XDECREF(shifted);
    return r;
}

static int count_set(Pairing *p, PyObject *value, void *offset) {
    if (!value) {
        PyErr_SetString(PyExc_TypeError, "a byte count cannot be deleted");
        return -1;
    }
    PyObject *v = PyNumber_Index(value); /* an int, or one of another type (numpy's) */
    if (!v) return -1;
    __int128 *slot = (__int128 *)((char *)p + (Py_ssize_t)offset);
    int overflow;
    long long small = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (!overflow) {
        Py_DECREF(v);
        if (small == -1 && PyErr_Occurred()) return -1;
        *slot = small;
        return 0;
    }
    PyObject *sixty_four = PyLong_FromLong(64), *mask = PyLong_FromUnsignedLongLong(~0ULL);
    PyObject *hi = sixty_four ? PyNumber_Rshift(v, sixty_four) : NULL; /* floor: the sign stays in hi */
    PyObject *lo = mask ? PyNumber_And(v, mask) : NULL;
    long long h = hi ? PyLong_AsLongLong(hi) : -1; /* OverflowError past 128 bits */
    unsigned long long l = lo ? PyLong_AsUnsignedLongLong(lo) : 0;
    Py_XDECREF(sixty_four);
    Py_XDECREF(mask);
    Py_XDECREF(hi);
    Py_XDECREF(lo);
    Py_DECREF(v);
    if (PyErr_Occurred()) return -1;
    *slot = (__int128)(((unsigned __int128)(unsigned long long)h << 64) | l);
    return 0;
}

static PyGetSetDef Pairing_getset[] = {
    {"_channels", (getter)Pairing_get_channels, (setter)Pairing_set_channels,
     "the unpaired channels, {(tag, src, dst, size): Channel} (a snapshot)", NULL},
    {"bytes_sent", (getter)count_get, (setter)count_set, "bytes of the messages sent",
     (void *)offsetof(Pairing, bytes_sent)},
    {"bytes_received", (getter)count_get, (setter)count_set, "bytes of the messages received",
     (void *)offsetof(Pairing, bytes_received)},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMemberDef Pairing_members[] = {
    {"queue", T_OBJECT, offsetof(Pairing, queue), 0, NULL},
    {"bytes_per_dim", T_OBJECT, offsetof(Pairing, bytes_per_dim), 0, NULL},
    {"_dim_cache", T_OBJECT, offsetof(Pairing, dim_cache), 0, NULL},
    {"_one_dim", T_BOOL, offsetof(Pairing, one_dim), 0, NULL},
    {"messages", T_LONGLONG, offsetof(Pairing, messages), 0, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyType_Slot Pairing_slots[] = {
    {Py_tp_doc, "The analytical backends' send/receive pairing (network/analytical/base.py: PyPairing)."},
    {Py_tp_new, PyType_GenericNew},
    {Py_tp_dealloc, Pairing_dealloc},
    {Py_tp_traverse, Pairing_traverse},
    {Py_tp_clear, Pairing_clear},
    {Py_tp_methods, Pairing_methods},
    {Py_tp_members, Pairing_members},
    {Py_tp_getset, Pairing_getset},
    {0, NULL},
};

static PyType_Spec Pairing_spec = {
    .name = "network._event_core.Pairing",
    .basicsize = sizeof(Pairing),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .slots = Pairing_slots,
};

/* -- FixedDelayTransfer: CongestionUnawareBackend._transfer without a topology file ------------- */
/* A message's delay there depends on (src, dst, size) alone. On a built-in topology it is
 * computed here (unaware_delay: a few integer operations, where a dict lookup by a fresh tuple
 * key cost ~600 instructions a message) and the arrival is a native event at that delay
 * (Pairing._on_arrival's steps, no call), at the place in the calendar the method's
 * queue.schedule gives it; the backend's dict is neither read nor filled there, as the delay is
 * the topology's whichever way it is found (tests/network/test_unaware_transfer.py). Given no
 * topology (a subclass's), a delay cached in the dict is answered the same way. Anything else (a
 * delay past 64 bits or 2^63, equal ranks, a pair not cached) calls the method, which fills the
 * cache or names the error. */

/* One dimension of a plain topology (network/topology.py), what every delay is computed from */
typedef struct {
    long long stride, npus;
    int kind; /* UD_RING, UD_FULLY_CONNECTED, UD_SWITCH */
    double latency_ns, bytes_per_ns;
} UnawareDim;

enum { UD_RING = 0, UD_FULLY_CONNECTED = 1, UD_SWITCH = 2 };
#define UD_MAX_DIMS 16

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *owner;    /* the backend: a Pairing whose queue is the C one */
    PyObject *delays;   /* dict: (src, dst, size) -> delay in ns */
    PyObject *fallback; /* the method */
    int ndims;          /* 0: no table, the delays the method cached in `delays` only */
    UnawareDim dims[UD_MAX_DIMS];
} FixedDelay;

/* Topology.unaware_delay_ns in C: the lowest dimension where src and dst differ, hops there,
 * int(hops × latency + size / bytes_per_ns) in doubles as Python computes it. 0 with *out set;
 * 1 where it does not answer (no such dimension, a size past 2^53 or a delay past 2^63, not a
 * finite number): the method then computes, or words the error. */
static int unaware_delay(const FixedDelay *f, long long src, long long dst, long long size, long long *out) {
    if (src < 0 || dst < 0 || size < 0 || size > (1LL << 53)) return 1;
    for (int i = 0; i < f->ndims; i++) {
        const UnawareDim *d = &f->dims[i];
        long long a = (src / d->stride) % d->npus, b = (dst / d->stride) % d->npus;
        if (a == b) continue;
        long long hops;
        if (d->kind == UD_RING) {
            long long cw = ((b - a) % d->npus + d->npus) % d->npus; /* Python's modulo */
            hops = cw < d->npus - cw ? cw : d->npus - cw;
        } else {
            hops = d->kind == UD_SWITCH ? 2 : 1;
        }
        /* the product rounded on its own, as Python rounds it: never fused into a multiply-add */
        volatile double product = (double)hops * d->latency_ns;
        double x = product + (double)size / d->bytes_per_ns;
        if (!(x > -9.2e18 && x < 9.2e18)) return 1; /* NaN, infinite, or past a long long */
        *out = (long long)x; /* truncation toward zero, as int() */
        return 0;
    }
    return 1;
}

/* src, dst and size as C integers: 0, or 1 where one is not an exact int of 64 bits (the method's) */
static int exact_triple(PyObject *const *args, long long v[3]) {
    for (int i = 0; i < 3; i++) {
        if (!PyLong_CheckExact(args[i])) return 1;
        v[i] = PyLong_AsLongLong(args[i]);
        if (v[i] == -1 && PyErr_Occurred()) {
            PyErr_Clear();
            return 1;
        }
    }
    return 0;
}

static int arrival_event(PyObject *owner, PyObject *msg, long long Py_UNUSED(x)) {
    PyObject *r = Pairing_on_arrival((Pairing *)owner, msg);
    if (!r) return -1;
    Py_DECREF(r);
    return 0;
}

static PyObject *FixedDelay_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    FixedDelay *f = (FixedDelay *)self;
    Py_ssize_t n = PyVectorcall_NARGS(nargsf);
    PyObject *queue = ((Pairing *)f->owner)->queue;
    if (n == 4 && !kwnames && queue && PyObject_TypeCheck(queue, dtsim_core_type)) {
        if (f->ndims) {
            long long v[3], delay;
            if (!exact_triple(args, v) && !unaware_delay(f, v[0], v[1], v[2], &delay)) {
                if (dtsim_push_native((Queue *)queue, delay, arrival_event, f->owner, args[3], 0) < 0) return NULL;
                Py_RETURN_NONE;
            }
        } else {
            PyObject *key = PyTuple_Pack(3, args[0], args[1], args[2]);
            if (!key) return NULL;
            PyObject *d = PyDict_GetItemWithError(f->delays, key); /* borrowed */
            Py_DECREF(key);
            if (d && PyLong_CheckExact(d)) {
                int overflow;
                long long delay = PyLong_AsLongLongAndOverflow(d, &overflow);
                if (delay == -1 && PyErr_Occurred()) return NULL;
                if (!overflow) {
                    if (dtsim_push_native((Queue *)queue, delay, arrival_event, f->owner, args[3], 0) < 0) return NULL;
                    Py_RETURN_NONE;
                }
            } else if (!d && PyErr_Occurred()) {
                return NULL;
            }
        }
    }
    return PyObject_Vectorcall(f->fallback, args, n, kwnames);
}

/* dims: None, or per dimension (stride, npus, kind, latency_ns, bytes_per_ns), kind 0 Ring,
 * 1 FullyConnected, 2 Switch (network/analytical/unaware.py _unaware_table) */
static int read_dims(FixedDelay *f, PyObject *dims) {
    f->ndims = 0;
    if (dims == Py_None) return 0;
    if (!PyTuple_Check(dims) || PyTuple_GET_SIZE(dims) < 1 || PyTuple_GET_SIZE(dims) > UD_MAX_DIMS) {
        PyErr_Format(PyExc_ValueError, "FixedDelayTransfer: dims must be None or a tuple of 1 to %d dimensions",
                     UD_MAX_DIMS);
        return -1;
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(dims); i++) {
        UnawareDim *d = &f->dims[i];
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(dims, i), "LLidd", &d->stride, &d->npus, &d->kind, &d->latency_ns,
                              &d->bytes_per_ns))
            return -1;
        if (d->stride < 1 || d->npus < 1 || d->kind < UD_RING || d->kind > UD_SWITCH) {
            PyErr_SetString(PyExc_ValueError, "FixedDelayTransfer: a dimension needs stride >= 1, npus >= 1, kind 0-2");
            return -1;
        }
    }
    f->ndims = (int)PyTuple_GET_SIZE(dims);
    return 0;
}

static PyObject *FixedDelay_new(PyTypeObject *tp, PyObject *args, PyObject *kw) {
    static char *names[] = {"owner", "delays", "fallback", "dims", NULL};
    PyObject *owner, *delays, *fallback, *dims = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO!O|O", names, &owner, &PyDict_Type, &delays, &fallback, &dims))
        return NULL;
    if (!PyObject_TypeCheck(owner, pairing_type)) {
        PyErr_SetString(PyExc_TypeError, "FixedDelayTransfer: the owner must be a Pairing");
        return NULL;
    }
    FixedDelay *f = (FixedDelay *)tp->tp_alloc(tp, 0);
    if (!f) return NULL;
    if (read_dims(f, dims) < 0) {
        Py_DECREF(f);
        return NULL;
    }
    f->vectorcall = FixedDelay_vectorcall;
    f->owner = Py_NewRef(owner);
    f->delays = Py_NewRef(delays);
    f->fallback = Py_NewRef(fallback);
    return (PyObject *)f;
}

static int FixedDelay_traverse(FixedDelay *f, visitproc visit, void *arg) {
    Py_VISIT(Py_TYPE(f));
    Py_VISIT(f->owner);
    Py_VISIT(f->delays);
    Py_VISIT(f->fallback);
    return 0;
}

static int FixedDelay_clear(FixedDelay *f) {
    Py_CLEAR(f->owner);
    Py_CLEAR(f->delays);
    Py_CLEAR(f->fallback);
    return 0;
}

static void FixedDelay_dealloc(FixedDelay *f) {
    PyTypeObject *tp = Py_TYPE(f);
    PyObject_GC_UnTrack(f);
    FixedDelay_clear(f);
    tp->tp_free((PyObject *)f);
    Py_DECREF(tp);
}

/* delay(src, dst, size): the delay a message is given here, or None where the method computes it
 * (tests/network/test_unaware_transfer.py holds it to Topology.unaware_delay_ns) */
static PyObject *FixedDelay_delay(FixedDelay *f, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "delay(src, dst, size)");
        return NULL;
    }
    long long v[3], out;
    if (!f->ndims || exact_triple(args, v) || unaware_delay(f, v[0], v[1], v[2], &out)) Py_RETURN_NONE;
    return PyLong_FromLongLong(out);
}

static PyMethodDef FixedDelay_methods[] = {
    {"delay", (PyCFunction)(void (*)(void))FixedDelay_delay, METH_FASTCALL,
     "delay(src, dst, size): the delay a message is given here, or None where the method computes it"},
    {NULL},
};

static PyMemberDef FixedDelay_members[] = {
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(FixedDelay, vectorcall), READONLY},
    {NULL},
};

static PyType_Slot FixedDelay_slots[] = {
    {Py_tp_new, FixedDelay_new},
    {Py_tp_dealloc, FixedDelay_dealloc},
    {Py_tp_traverse, FixedDelay_traverse},
    {Py_tp_clear, FixedDelay_clear},
    {Py_tp_call, PyVectorcall_Call},
    {Py_tp_members, FixedDelay_members},
    {Py_tp_methods, FixedDelay_methods},
    {0, NULL},
};

static PyType_Spec FixedDelay_spec = {
    .name = "network._event_core.FixedDelayTransfer",
    .basicsize = sizeof(FixedDelay),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .slots = FixedDelay_slots,
};

/* -- the module --------------------------------------------------------------------------------- */

static PyObject *noop_call(PyObject *Py_UNUSED(self), PyObject *const *Py_UNUSED(args), Py_ssize_t Py_UNUSED(n)) {
    Py_RETURN_NONE;
}

static PyMethodDef noop_def = {"noop", (PyCFunction)(void (*)(void))noop_call, METH_FASTCALL,
                               "takes anything, does nothing: a message sent without a callback"};

int dtsim_add_pairing(PyObject *m) {
    if (!empty_tuple && !(empty_tuple = PyTuple_New(0))) return -1;
    if (!str_transfer) {
        if (!(str_transfer = PyUnicode_InternFromString("_transfer")) ||
            !(str_schedule = PyUnicode_InternFromString("schedule")) ||
            !(str_now = PyUnicode_InternFromString("now")) ||
            !(str_topology = PyUnicode_InternFromString("topology")) ||
            !(str_dim_to_transfer = PyUnicode_InternFromString("dim_to_transfer")))
            return -1;
    }
    if (!mismatch_error) {
        PyObject *errors = PyImport_ImportModule("network.errors");
        if (!errors) return -1;
        mismatch_error = PyObject_GetAttrString(errors, "MessageMismatchError");
        Py_DECREF(errors);
        if (!mismatch_error) return -1;
    }
    if (!noop && !(noop = PyCFunction_NewEx(&noop_def, NULL, NULL))) return -1;
    if (PyModule_AddObject(m, "noop", Py_NewRef(noop)) < 0) {
        Py_DECREF(noop);
        return -1;
    }
    PyObject *tp = PyType_FromModuleAndSpec(m, &Channel_spec, NULL);
    if (!tp) return -1;
    channel_type = (PyTypeObject *)Py_NewRef(tp);
    if (PyModule_AddObject(m, "Channel", tp) < 0) {
        Py_DECREF(tp);
        return -1;
    }
    tp = PyType_FromModuleAndSpec(m, &Pairing_spec, NULL);
    if (!tp) return -1;
    pairing_type = (PyTypeObject *)Py_NewRef(tp);
    if (PyModule_AddObject(m, "Pairing", tp) < 0) {
        Py_DECREF(tp);
        return -1;
    }
    tp = PyType_FromModuleAndSpec(m, &FixedDelay_spec, NULL);
    if (!tp) return -1;
    if (PyModule_AddObject(m, "FixedDelayTransfer", tp) < 0) {
        Py_DECREF(tp);
        return -1;
    }
    return 0;
}
