/* Send/receive pairing of the analytical backends in C (network/analytical/base.py: PyPairing,
 * the reference, which says what the rules are; tests hold the two to every cycle and byte).
 *
 * Pairing is the C base of AnalyticalBackend: its counters and the state the hot path reads are
 * C fields (Python reads and writes them as attributes), and ``exchange`` (one collective step)
 * and ``_on_arrival`` (a message delivered) run without a Python frame. ``_transfer`` stays a
 * method of each backend, called through the type, so a subclass's override runs.
 *
 * A message is base.py's list: [send callback, its args, receive callback, its args, arrived,
 * label, time sent, key, n-th of its key]. A channel (one key) counts its sends and receives and
 * keeps, first in first out, the messages still missing their other side.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include "_event_core.h"

enum { SEND_CB, SEND_ARGS, RECV_CB, RECV_ARGS, ARRIVED, LABEL, SENT_AT, KEY, NTH, MSG_LEN };

static PyObject *empty_tuple = NULL;
static PyObject *noop = NULL;            /* the "no send callback" marker, base.py's _noop */
static PyObject *mismatch_error = NULL;  /* network.errors.MessageMismatchError */
static PyObject *str_transfer = NULL, *str_schedule = NULL, *str_now = NULL, *str_topology = NULL,
                *str_dim_to_transfer = NULL;
static PyTypeObject *channel_type = NULL;

/* -- Channel ------------------------------------------------------------------------------------ */

typedef struct {
    PyObject_HEAD
    Py_ssize_t sends, recvs;
    PyObject **q; /* waiting messages, a ring buffer */
    Py_ssize_t head, n, cap;
} Channel;

static int chan_push(Channel *c, PyObject *msg) {
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
static PyObject *chan_pop(Channel *c) {
    PyObject *m = c->q[c->head];
    c->head = (c->head + 1) % c->cap;
    c->n--;
    return m;
}

static PyObject *Channel_push(Channel *c, PyObject *msg) {
    if (chan_push(c, msg) < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *Channel_pop(Channel *c, PyObject *Py_UNUSED(ignored)) {
    if (!c->n) {
        PyErr_SetString(PyExc_IndexError, "pop from an empty channel");
        return NULL;
    }
    return chan_pop(c);
}

static PyObject *Channel_get_waiting(Channel *c, void *Py_UNUSED(closure)) {
    PyObject *t = PyTuple_New(c->n);
    if (!t) return NULL;
    for (Py_ssize_t i = 0; i < c->n; i++) PyTuple_SET_ITEM(t, i, Py_NewRef(c->q[(c->head + i) % c->cap]));
    return t;
}

static int Channel_traverse(Channel *c, visitproc visit, void *arg) {
    for (Py_ssize_t i = 0; i < c->n; i++) Py_VISIT(c->q[(c->head + i) % c->cap]);
    Py_VISIT(Py_TYPE(c));
    return 0;
}

static int Channel_clear(Channel *c) {
    while (c->n) {
        PyObject *m = chan_pop(c);
        Py_DECREF(m);
    }
    return 0;
}

static void Channel_dealloc(Channel *c) {
    PyTypeObject *tp = Py_TYPE(c);
    PyObject_GC_UnTrack(c);
    Channel_clear(c);
    PyMem_Free(c->q);
    tp->tp_free((PyObject *)c);
    Py_DECREF(tp);
}

static PyMethodDef Channel_methods[] = {
    {"push", (PyCFunction)Channel_push, METH_O, "queue a message still missing its other side"},
    {"pop", (PyCFunction)Channel_pop, METH_NOARGS, "the oldest such message"},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef Channel_members[] = {
    {"sends", T_PYSSIZET, offsetof(Channel, sends), 0, NULL},
    {"recvs", T_PYSSIZET, offsetof(Channel, recvs), 0, NULL},
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

/* -- Pairing ------------------------------------------------------------------------------------ */

typedef struct {
    PyObject_HEAD
    PyObject *channels;     /* dict: (tag, src, dst, size) -> Channel */
    PyObject *queue;        /* the event queue */
    PyObject *bytes_per_dim; /* list of ints */
    PyObject *dim_cache;    /* dict: (src, dst) -> dimension */
    char one_dim;
    long long messages, bytes_sent, bytes_received;
} Pairing;

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

/* queue.schedule(0, cb, arg) */
static int schedule_now(Pairing *p, PyObject *cb, PyObject *arg) {
    PyObject *args = PyTuple_Pack(1, arg);
    if (!args) return -1;
    int r;
    if (PyObject_TypeCheck(p->queue, dtsim_core_type) &&
        Py_TYPE(p->queue)->tp_base == dtsim_core_type) { /* EventQueue: Core's schedule, not overridden */
        r = dtsim_push_event((Queue *)p->queue, 0, cb, args);
    } else {
        PyObject *zero = PyLong_FromLong(0);
        PyObject *res = zero ? PyObject_CallMethodObjArgs(p->queue, str_schedule, zero, cb, arg, NULL) : NULL;
        Py_XDECREF(zero);
        r = res ? 0 : -1;
        Py_XDECREF(res);
    }
    Py_DECREF(args);
    return r;
}

static PyObject *new_message(PyObject *label, PyObject *key, Py_ssize_t nth) {
    PyObject *m = PyList_New(MSG_LEN);
    if (!m) return NULL;
    PyObject *n = PyLong_FromSsize_t(nth);
    if (!n) {
        Py_DECREF(m);
        return NULL;
    }
    PyList_SET_ITEM(m, SEND_CB, Py_NewRef(noop));
    PyList_SET_ITEM(m, SEND_ARGS, Py_NewRef(empty_tuple));
    PyList_SET_ITEM(m, RECV_CB, Py_NewRef(Py_None));
    PyList_SET_ITEM(m, RECV_ARGS, Py_NewRef(empty_tuple));
    PyList_SET_ITEM(m, ARRIVED, Py_NewRef(Py_False));
    PyList_SET_ITEM(m, LABEL, Py_NewRef(label));
    PyList_SET_ITEM(m, SENT_AT, Py_NewRef(Py_None));
    PyList_SET_ITEM(m, KEY, Py_NewRef(key));
    PyList_SET_ITEM(m, NTH, n);
    return m;
}

/* the key's channel (created if new), borrowed from the dict */
static Channel *channel_for(Pairing *p, PyObject *key) {
    PyObject *ch = PyDict_GetItemWithError(p->channels, key);
    if (ch) {
        if (!Py_IS_TYPE(ch, channel_type)) {
            PyErr_SetString(PyExc_TypeError, "a pairing channel is not a Channel");
            return NULL;
        }
        return (Channel *)ch;
    }
    if (PyErr_Occurred()) return NULL;
    ch = PyType_GenericNew(channel_type, NULL, NULL);
    if (!ch) return NULL;
    int r = PyDict_SetItem(p->channels, key, ch);
    Py_DECREF(ch); /* the dict holds it */
    return r < 0 ? NULL : (Channel *)ch;
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

/* exchange(me, dst, src, size_bytes, tag, label, callback, arg): base.py PyPairing.exchange */
static PyObject *Pairing_exchange(Pairing *p, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 8) {
        PyErr_SetString(PyExc_TypeError, "exchange(me, dst, src, size_bytes, tag, label, callback, arg)");
        return NULL;
    }
    PyObject *me = args[0], *dst = args[1], *src = args[2], *size = args[3], *tag = args[4], *label = args[5],
             *callback = args[6], *arg = args[7];
    long long nbytes = PyLong_AsLongLong(size);
    if (nbytes == -1 && PyErr_Occurred()) return NULL;
    if (!p->channels || !PyDict_Check(p->channels)) {
        PyErr_SetString(PyExc_TypeError, "the backend's _channels is not a dict");
        return NULL;
    }
    PyObject *msg = NULL, *key = NULL, *r;

    /* the send */
    key = PyTuple_Pack(4, tag, me, dst, size);
    if (!key) return NULL;
    Channel *ch = channel_for(p, key);
    if (!ch) goto fail;
    ch->sends++;
    if (ch->recvs >= ch->sends) { /* its receive is waiting */
        msg = chan_pop(ch);
        if (check_labels(label, PyList_GET_ITEM(msg, LABEL), me, dst) < 0) goto fail;
        if (ch->recvs == ch->sends && PyDict_DelItem(p->channels, key) < 0) goto fail; /* all paired */
    } else {
        if (!(msg = new_message(label, key, ch->sends)) || chan_push(ch, msg) < 0) goto fail;
    }
    long long now;
    if (queue_now(p, &now) < 0) goto fail;
    PyObject *t = PyLong_FromLongLong(now);
    if (!t) goto fail;
    PyList_SetItem(msg, SENT_AT, t);
    p->messages++;
    p->bytes_sent += nbytes;
    if (count_dim(p, me, dst, size) < 0) goto fail;
    {
        PyObject *targs[] = {(PyObject *)p, me, dst, size, msg};
        r = PyObject_VectorcallMethod(str_transfer, targs, 5 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
    }
    if (!r) goto fail;
    Py_DECREF(r);
    Py_CLEAR(msg);
    Py_CLEAR(key);

    /* the receive */
    key = PyTuple_Pack(4, tag, src, me, size);
    if (!key) return NULL;
    if (!(ch = channel_for(p, key))) goto fail;
    ch->recvs++;
    if (ch->sends >= ch->recvs) { /* its send was issued */
        msg = chan_pop(ch);
        if (check_labels(PyList_GET_ITEM(msg, LABEL), label, src, me) < 0) goto fail;
        if (ch->recvs == ch->sends && PyDict_DelItem(p->channels, key) < 0) goto fail;
        int arrived = PyObject_IsTrue(PyList_GET_ITEM(msg, ARRIVED));
        if (arrived < 0) goto fail;
        if (arrived) {
            p->bytes_received += nbytes;
            if (schedule_now(p, callback, arg) < 0) goto fail;
            Py_DECREF(msg);
            Py_DECREF(key);
            Py_RETURN_NONE;
        }
    } else {
        if (!(msg = new_message(label, key, ch->recvs)) || chan_push(ch, msg) < 0) goto fail;
    }
    PyObject *rargs = PyTuple_Pack(1, arg);
    if (!rargs) goto fail;
    PyList_SetItem(msg, RECV_CB, Py_NewRef(callback));
    PyList_SetItem(msg, RECV_ARGS, rargs);
    Py_DECREF(msg);
    Py_DECREF(key);
    Py_RETURN_NONE;
fail:
    Py_XDECREF(msg);
    Py_XDECREF(key);
    return NULL;
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

static int Pairing_traverse(Pairing *p, visitproc visit, void *arg) {
    Py_VISIT(p->channels);
    Py_VISIT(p->queue);
    Py_VISIT(p->bytes_per_dim);
    Py_VISIT(p->dim_cache);
    Py_VISIT(Py_TYPE(p));
    return 0;
}

static int Pairing_clear(Pairing *p) {
    Py_CLEAR(p->channels);
    Py_CLEAR(p->queue);
    Py_CLEAR(p->bytes_per_dim);
    Py_CLEAR(p->dim_cache);
    return 0;
}

static void Pairing_dealloc(Pairing *p) {
    PyTypeObject *tp = Py_TYPE(p);
    PyObject_GC_UnTrack(p);
    Pairing_clear(p);
    tp->tp_free((PyObject *)p);
    Py_DECREF(tp);
}

static PyMethodDef Pairing_methods[] = {
    {"exchange", (PyCFunction)(void (*)(void))Pairing_exchange, METH_FASTCALL,
     "exchange(me, dst, src, size_bytes, tag, label, callback, arg): send to dst, then receive from src"},
    {"_on_arrival", (PyCFunction)Pairing_on_arrival, METH_O, "a message delivered: its callbacks"},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef Pairing_members[] = {
    {"_channels", T_OBJECT, offsetof(Pairing, channels), 0, NULL},
    {"queue", T_OBJECT, offsetof(Pairing, queue), 0, NULL},
    {"bytes_per_dim", T_OBJECT, offsetof(Pairing, bytes_per_dim), 0, NULL},
    {"_dim_cache", T_OBJECT, offsetof(Pairing, dim_cache), 0, NULL},
    {"_one_dim", T_BOOL, offsetof(Pairing, one_dim), 0, NULL},
    {"messages", T_LONGLONG, offsetof(Pairing, messages), 0, NULL},
    {"bytes_sent", T_LONGLONG, offsetof(Pairing, bytes_sent), 0, NULL},
    {"bytes_received", T_LONGLONG, offsetof(Pairing, bytes_received), 0, NULL},
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
    {0, NULL},
};

static PyType_Spec Pairing_spec = {
    .name = "network._event_core.Pairing",
    .basicsize = sizeof(Pairing),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .slots = Pairing_slots,
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
    if (PyModule_AddObject(m, "Pairing", tp) < 0) {
        Py_DECREF(tp);
        return -1;
    }
    return 0;
}
