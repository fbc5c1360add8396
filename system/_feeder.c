/* The workload's feeder in C: which dependency-free node of a rank issues next, and what a finished
 * node frees (workload/workload.py: Workload is the reference, and runs wherever this is not
 * compiled; tests hold the two to the same issue order, start and end of every node).
 *
 * ASTRA-sim's rules (docs/astra-sim-semantics.md §10): nodes are tried in ascending id; a rank has
 * one slot per resource kind (CPU, GPU compute, GPU communication) and receives take none; a pass
 * issues what was free when it began, and what a node finishing inside the pass frees waits for
 * the next pass. Nodes are numbered here by their rank in ascending id, so every comparison of ids
 * is one of indices. The Python side keeps the dispatch (what starting a node means) and the
 * records: ``start(node)`` runs it, ``records`` and ``starts`` are the Workload's own.
 *
 * A pass calls back into Python (start), and Python may finish a node or run a whole nested
 * pass from there (a collective that is done at once): no array pointer is kept across a call,
 * and a pass compares against its own pass number, as the Python method does.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

#include "_feeder.h"

enum { KINDS = 4, K_NONE = 3 }; /* workload.py: _CPU, _GPU_COMP, _GPU_COMM, _NONE */

typedef struct {
    PyObject_HEAD
    PyObject *plan;  /* workload.py's _feeder_plan tuple: holds everything below that is borrowed */
    PyObject *nodes; /* borrowed from plan: list, Node by index */
    PyObject *ids;   /* borrowed: tuple, node id by index */
    PyObject *index; /* borrowed: dict, node id -> index */
    Py_buffer kinds_view, cstart_view, clist_view;
    const unsigned char *kind;
    const long long *cstart, *clist; /* children of i: clist[cstart[i] .. cstart[i + 1]] */
    Py_ssize_t n;
    long long *waiting; /* parents not finished yet */
    long long *fresh;   /* the pass in which the node was freed; 0: none since it was issued */
    unsigned char *ongoing;
    Py_ssize_t n_ongoing, done;
    long long *free[KINDS]; /* dependency-free nodes, ascending, per kind */
    Py_ssize_t flen[KINDS], fcap[KINDS];
    long long in_flight[KINDS];
    long long pass_no;
    int all_done;
    PyObject *start, *now, *starts, *records, *on_all_done;
    /* set by enable_replay: compute nodes replayed here, without start(node) (Workload._issue_replay) */
    PyObject *replay_sys;    /* the rank's SysFast */
    PyObject *node_done_cb;  /* this feeder's node_done, bound once */
    long long *replay_ns;    /* per node: its replay time (duration_ns or 1), or -1: start(node) runs it */
    unsigned char *replay_gpu; /* per node: its time counts as GPU compute (Workload.compute_ns) */
    long long replayed_ns;   /* the GPU compute replayed here */
} Feeder;

static int feeder_traverse(Feeder *f, visitproc visit, void *arg) {
    Py_VISIT(f->plan);
    Py_VISIT(f->start);
    Py_VISIT(f->now);
    Py_VISIT(f->starts);
    Py_VISIT(f->records);
    Py_VISIT(f->on_all_done);
    Py_VISIT(f->replay_sys);
    Py_VISIT(f->node_done_cb);
    Py_VISIT(Py_TYPE(f));
    return 0;
}

static int feeder_clear(Feeder *f) {
    Py_CLEAR(f->start);
    Py_CLEAR(f->now);
    Py_CLEAR(f->starts);
    Py_CLEAR(f->records);
    Py_CLEAR(f->on_all_done);
    Py_CLEAR(f->replay_sys);
    Py_CLEAR(f->node_done_cb);
    return 0;
}

static void feeder_release(Feeder *f) {
    if (f->kind) PyBuffer_Release(&f->kinds_view);
    if (f->cstart) PyBuffer_Release(&f->cstart_view);
    if (f->clist) PyBuffer_Release(&f->clist_view);
    f->kind = NULL;
    f->cstart = f->clist = NULL;
    PyMem_Free(f->waiting);
    PyMem_Free(f->fresh);
    PyMem_Free(f->ongoing);
    f->waiting = f->fresh = NULL;
    f->ongoing = NULL;
    for (int k = 0; k < KINDS; k++) {
        PyMem_Free(f->free[k]);
        f->free[k] = NULL;
        f->flen[k] = f->fcap[k] = 0;
    }
    PyMem_Free(f->replay_ns);
    PyMem_Free(f->replay_gpu);
    f->replay_ns = NULL;
    f->replay_gpu = NULL;
    f->nodes = f->ids = f->index = NULL;
    Py_CLEAR(f->plan);
}

static void feeder_dealloc(Feeder *f) {
    PyTypeObject *tp = Py_TYPE(f);
    PyObject_GC_UnTrack(f);
    feeder_clear(f);
    feeder_release(f);
    tp->tp_free((PyObject *)f);
    Py_DECREF(tp);
}

/* a buffer of n items of `size` bytes (format q or B), or -1 with TypeError */
static int take_view(PyObject *obj, Py_buffer *view, Py_ssize_t n, Py_ssize_t size, const char *what) {
    if (PyObject_GetBuffer(obj, view, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0) return -1;
    if (view->itemsize != size || view->len != n * size || view->ndim != 1) {
        PyBuffer_Release(view);
        PyErr_Format(PyExc_TypeError, "Feeder: %s must hold %zd items of %zd bytes", what, n, size);
        return -1;
    }
    return 0;
}

/* insort: i into kind k's ascending list (a pass looks at the first ones) */
static int free_insert(Feeder *f, int k, long long i) {
    if (f->flen[k] == f->fcap[k]) {
        Py_ssize_t cap = f->fcap[k] ? 2 * f->fcap[k] : 8;
        long long *grown = PyMem_Realloc(f->free[k], (size_t)cap * sizeof(long long));
        if (!grown) {
            PyErr_NoMemory();
            return -1;
        }
        f->free[k] = grown;
        f->fcap[k] = cap;
    }
    long long *a = f->free[k];
    Py_ssize_t lo = 0, hi = f->flen[k];
    while (lo < hi) { /* bisect_right */
        Py_ssize_t mid = (lo + hi) / 2;
        if (i < a[mid]) hi = mid;
        else lo = mid + 1;
    }
    memmove(a + lo + 1, a + lo, (size_t)(f->flen[k] - lo) * sizeof(long long));
    a[lo] = i;
    f->flen[k]++;
    return 0;
}

static int free_remove(Feeder *f, int k, long long i) {
    long long *a = f->free[k];
    Py_ssize_t lo = 0, hi = f->flen[k];
    while (lo < hi) { /* bisect_left */
        Py_ssize_t mid = (lo + hi) / 2;
        if (a[mid] < i) lo = mid + 1;
        else hi = mid;
    }
    if (lo == f->flen[k] || a[lo] != i) {
        PyErr_Format(PyExc_SystemError, "Feeder: node #%lld is not dependency-free", i);
        return -1;
    }
    memmove(a + lo, a + lo + 1, (size_t)(f->flen[k] - lo - 1) * sizeof(long long));
    f->flen[k]--;
    return 0;
}

/* Feeder(plan, start, now, starts, records, on_all_done); plan: workload.py's _feeder_plan */
static int feeder_init(Feeder *f, PyObject *args, PyObject *kw) {
    PyObject *plan, *start, *now, *starts, *records, *on_all_done;
    if (kw && PyDict_GET_SIZE(kw)) {
        PyErr_SetString(PyExc_TypeError, "Feeder takes no keyword arguments");
        return -1;
    }
    if (!PyArg_ParseTuple(args, "O!OOO!O!O", &PyTuple_Type, &plan, &start, &now, &PyDict_Type, &starts,
                          &PyList_Type, &records, &on_all_done))
        return -1;
    if (f->plan) {
        PyErr_SetString(PyExc_RuntimeError, "Feeder is initialised once");
        return -1;
    }
    PyObject *nodes, *ids, *index, *kinds, *cstart, *clist, *waiting, *roots;
    if (!PyArg_ParseTuple(plan, "O!O!O!OOOOO", &PyList_Type, &nodes, &PyTuple_Type, &ids, &PyDict_Type, &index,
                          &kinds, &cstart, &clist, &waiting, &roots))
        return -1;
    Py_ssize_t n = PyList_GET_SIZE(nodes);
    if (PyTuple_GET_SIZE(ids) != n) {
        PyErr_SetString(PyExc_TypeError, "Feeder: nodes and ids differ in length");
        return -1;
    }
    f->plan = Py_NewRef(plan);
    f->nodes = nodes;
    f->ids = ids;
    f->index = index;
    f->n = n;
    Py_buffer wv, rv;
    if (take_view(kinds, &f->kinds_view, n, 1, "kinds") < 0) goto error;
    f->kind = f->kinds_view.buf;
    if (take_view(cstart, &f->cstart_view, n + 1, 8, "child starts") < 0) goto error;
    f->cstart = f->cstart_view.buf;
    Py_ssize_t m = f->cstart[n];
    if (m < 0 || take_view(clist, &f->clist_view, m, 8, "children") < 0) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "Feeder: a negative number of children");
        goto error;
    }
    f->clist = f->clist_view.buf;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (f->kind[i] >= KINDS || f->cstart[i] < 0 || f->cstart[i] > f->cstart[i + 1]) {
            PyErr_SetString(PyExc_ValueError, "Feeder: a kind or child range out of bounds");
            goto error;
        }
    }
    for (Py_ssize_t j = 0; j < m; j++) {
        if (f->clist[j] < 0 || f->clist[j] >= n) {
            PyErr_SetString(PyExc_ValueError, "Feeder: a child index out of bounds");
            goto error;
        }
    }
    f->waiting = PyMem_Calloc((size_t)n + 1, sizeof(long long));
    f->fresh = PyMem_Calloc((size_t)n + 1, sizeof(long long));
    f->ongoing = PyMem_Calloc((size_t)n + 1, 1);
    if (!f->waiting || !f->fresh || !f->ongoing) {
        PyErr_NoMemory();
        goto error;
    }
    if (take_view(waiting, &wv, n, 8, "waiting counts") < 0) goto error;
    memcpy(f->waiting, wv.buf, (size_t)n * sizeof(long long));
    PyBuffer_Release(&wv);
    if (PyObject_GetBuffer(roots, &rv, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0) goto error;
    if (rv.itemsize != 8 || rv.ndim != 1) {
        PyBuffer_Release(&rv);
        PyErr_SetString(PyExc_TypeError, "Feeder: roots must be 8-byte integers");
        goto error;
    }
    for (Py_ssize_t j = 0; j < rv.len / 8; j++) {
        long long r = ((const long long *)rv.buf)[j];
        if (r < 0 || r >= n || free_insert(f, f->kind[r], r) < 0) {
            PyBuffer_Release(&rv);
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "Feeder: a root index out of bounds");
            goto error;
        }
    }
    PyBuffer_Release(&rv);
    f->start = Py_NewRef(start);
    f->now = Py_NewRef(now);
    f->starts = Py_NewRef(starts);
    f->records = Py_NewRef(records);
    f->on_all_done = Py_NewRef(on_all_done);
    return 0;
error:
    feeder_release(f);
    return -1;
}

static int ready(Feeder *f) {
    if (!f->start) {
        PyErr_SetString(PyExc_RuntimeError, "Feeder is not initialised");
        return -1;
    }
    return 0;
}

/* Workload._finish: the node's slot frees, its children count it done */
static int finish_index(Feeder *f, Py_ssize_t i) {
    int k = f->kind[i];
    if (k != K_NONE) f->in_flight[k]--;
    if (f->ongoing[i]) {
        f->ongoing[i] = 0;
        f->n_ongoing--;
    }
    f->done++;
    PyObject *nid = PyTuple_GET_ITEM(f->ids, i);
    PyObject *began = PyObject_GetItem(f->starts, nid);
    if (!began) return -1;
    PyObject *end = PyObject_CallNoArgs(f->now);
    if (!end) {
        Py_DECREF(began);
        return -1;
    }
    PyObject *rec = PyTuple_Pack(3, nid, began, end);
    Py_DECREF(began);
    Py_DECREF(end);
    if (!rec) return -1;
    int rc = PyList_Append(f->records, rec);
    Py_DECREF(rec);
    if (rc < 0) return -1;
    for (long long j = f->cstart[i]; j < f->cstart[i + 1]; j++) {
        long long c = f->clist[j];
        if (f->waiting[c] <= 0) {
            PyErr_Format(PyExc_SystemError, "Feeder: node #%lld is freed twice", c);
            return -1;
        }
        if (--f->waiting[c] == 0) {
            if (free_insert(f, f->kind[c], c) < 0) return -1;
            f->fresh[c] = f->pass_no;
        }
    }
    return 0;
}

static Py_ssize_t index_of(Feeder *f, PyObject *nid) {
    PyObject *i = PyDict_GetItemWithError(f->index, nid);
    if (!i) {
        if (!PyErr_Occurred()) PyErr_SetObject(PyExc_KeyError, nid);
        return -1;
    }
    return PyLong_AsSsize_t(i);
}

/* Workload.issue's bookkeeping, then start(node): 1 if the node finished at once */
static int issue(Feeder *f, long long i) {
    int k = f->kind[i];
    if (free_remove(f, k, i) < 0) return -1;
    f->fresh[i] = 0;
    if (!f->ongoing[i]) {
        f->ongoing[i] = 1;
        f->n_ongoing++;
    }
    if (k != K_NONE) f->in_flight[k]++;
    if (f->replay_sys && f->replay_ns[i] >= 0) { /* Workload._start of a replayed compute node */
        PyObject *nid = PyTuple_GET_ITEM(f->ids, i), *now = PyObject_CallNoArgs(f->now);
        int rc = now ? PyDict_SetItem(f->starts, nid, now) : -1;
        Py_XDECREF(now);
        if (rc < 0) return -1;
        if (f->replay_gpu[i]) f->replayed_ns += f->replay_ns[i];
        return dtsim_sys_register1(f->replay_sys, f->replay_ns[i], f->node_done_cb, nid) < 0 ? -1 : 0;
    }
    PyObject *r = PyObject_CallOneArg(f->start, PyList_GET_ITEM(f->nodes, i));
    if (!r) return -1;
    int at_once = PyObject_IsTrue(r);
    Py_DECREF(r);
    return at_once;
}

/* Workload._issue_pass */
static int issue_pass(Feeder *f) {
    long long pass_no = f->pass_no, cur = -1;
    int finished_at_once = 0;
    for (;;) {
        long long best = -1;
        for (int k = 0; k < KINDS; k++) {
            Py_ssize_t n = f->flen[k];
            if (!n || (k != K_NONE && f->in_flight[k])) continue;
            const long long *a = f->free[k];
            Py_ssize_t i = 0;
            if (cur >= 0) { /* bisect_right */
                Py_ssize_t hi = n;
                while (i < hi) {
                    Py_ssize_t mid = (i + hi) / 2;
                    if (cur < a[mid]) hi = mid;
                    else i = mid + 1;
                }
            }
            while (i < n && f->fresh[a[i]] == pass_no) i++; /* freed during this pass: not in its snapshot */
            if (i < n && (best < 0 || a[i] < best)) best = a[i];
        }
        if (best < 0) return finished_at_once;
        cur = best;
        int r = issue(f, best);
        if (r < 0) return -1;
        if (r) finished_at_once = 1;
    }
}

/* Workload.issue_dep_free_nodes */
static int issue_dep_free_nodes(Feeder *f) {
    for (;;) {
        f->pass_no++;
        int r = issue_pass(f);
        if (r < 0) return -1;
        /* children of a node that finished at once wait for the rank's next completion, as in
         * ASTRA-sim; with nothing in flight there would be none: issue them now instead */
        if (!r || f->n_ongoing) return 0;
    }
}

static int check_finished(Feeder *f) {
    if (f->done == f->n && !f->all_done) {
        f->all_done = 1;
        PyObject *r = PyObject_CallNoArgs(f->on_all_done);
        if (!r) return -1;
        Py_DECREF(r);
    }
    return 0;
}

static PyObject *Feeder_node_done(Feeder *f, PyObject *nid) {
    if (ready(f) < 0) return NULL;
    Py_ssize_t i = index_of(f, nid);
    if (i < 0 || finish_index(f, i) < 0 || issue_dep_free_nodes(f) < 0 || check_finished(f) < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *Feeder_finish(Feeder *f, PyObject *nid) {
    if (ready(f) < 0) return NULL;
    Py_ssize_t i = index_of(f, nid);
    if (i < 0 || finish_index(f, i) < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *Feeder_issue_dep_free_nodes(Feeder *f, PyObject *Py_UNUSED(ignored)) {
    if (ready(f) < 0 || issue_dep_free_nodes(f) < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *Feeder_check_finished(Feeder *f, PyObject *Py_UNUSED(ignored)) {
    if (ready(f) < 0 || check_finished(f) < 0) return NULL;
    Py_RETURN_NONE;
}

/* (ongoing ids, dependency-free ids, {id: parents not finished}), ascending: for the stuck report */
static PyObject *Feeder_state(Feeder *f, PyObject *Py_UNUSED(ignored)) {
    if (ready(f) < 0) return NULL;
    PyObject *ongoing = PyList_New(0), *free = PyList_New(0), *waiting = PyDict_New();
    if (!ongoing || !free || !waiting) goto error;
    for (Py_ssize_t i = 0; i < f->n; i++) {
        PyObject *nid = PyTuple_GET_ITEM(f->ids, i);
        if (f->ongoing[i] && PyList_Append(ongoing, nid) < 0) goto error;
        if (f->waiting[i] > 0) {
            PyObject *w = PyLong_FromLongLong(f->waiting[i]);
            int rc = w ? PyDict_SetItem(waiting, nid, w) : -1;
            Py_XDECREF(w);
            if (rc < 0) goto error;
        }
    }
    Py_ssize_t total = 0;
    for (int k = 0; k < KINDS; k++) total += f->flen[k];
    /* the kinds' lists merged: indices ascending are ids ascending */
    Py_ssize_t at[KINDS] = {0};
    for (Py_ssize_t t = 0; t < total; t++) {
        int best = -1;
        for (int k = 0; k < KINDS; k++)
            if (at[k] < f->flen[k] && (best < 0 || f->free[k][at[k]] < f->free[best][at[best]])) best = k;
        if (PyList_Append(free, PyTuple_GET_ITEM(f->ids, f->free[best][at[best]++])) < 0) goto error;
    }
    return Py_BuildValue("(NNN)", ongoing, free, waiting);
error:
    Py_XDECREF(ongoing);
    Py_XDECREF(free);
    Py_XDECREF(waiting);
    return NULL;
}

static PyObject *Feeder_get_done(Feeder *f, void *Py_UNUSED(closure)) { return PyLong_FromSsize_t(f->done); }

static PyObject *Feeder_get_replayed_ns(Feeder *f, void *Py_UNUSED(closure)) {
    return PyLong_FromLongLong(f->replayed_ns);
}

/* enable_replay(sysfast, replay_ns, gpu): the compute nodes whose replay_ns[i] >= 0 are started here
 * as Workload._start would (their start time, their GPU time, sys.register_event(replay_ns,
 * node_done, id)) without a call into Python; replay_ns: n 8-byte ints, gpu: n bytes */
static PyObject *Feeder_enable_replay(Feeder *f, PyObject *const *args, Py_ssize_t nargs) {
    if (ready(f) < 0) return NULL;
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "enable_replay(sysfast, replay_ns, gpu)");
        return NULL;
    }
    Py_buffer rv, gv;
    if (take_view(args[1], &rv, f->n, 8, "replay times") < 0) return NULL;
    if (take_view(args[2], &gv, f->n, 1, "GPU flags") < 0) {
        PyBuffer_Release(&rv);
        return NULL;
    }
    long long *ns = PyMem_Malloc(sizeof(long long) * ((size_t)f->n + 1));
    unsigned char *gpu = PyMem_Malloc((size_t)f->n + 1);
    PyObject *cb = PyObject_GetAttrString((PyObject *)f, "node_done");
    if (!ns || !gpu || !cb) {
        PyMem_Free(ns);
        PyMem_Free(gpu);
        Py_XDECREF(cb);
        PyBuffer_Release(&rv);
        PyBuffer_Release(&gv);
        return PyErr_Occurred() ? NULL : PyErr_NoMemory();
    }
    memcpy(ns, rv.buf, sizeof(long long) * (size_t)f->n);
    memcpy(gpu, gv.buf, (size_t)f->n);
    PyBuffer_Release(&rv);
    PyBuffer_Release(&gv);
    PyMem_Free(f->replay_ns);
    PyMem_Free(f->replay_gpu);
    f->replay_ns = ns;
    f->replay_gpu = gpu;
    Py_XSETREF(f->node_done_cb, cb);
    Py_XSETREF(f->replay_sys, Py_NewRef(args[0]));
    Py_RETURN_NONE;
}

static PyMethodDef Feeder_methods[] = {
    {"node_done", (PyCFunction)Feeder_node_done, METH_O,
     "node_done(node_id): the node finished; issue what that frees (Workload._node_done)"},
    {"finish", (PyCFunction)Feeder_finish, METH_O, "finish(node_id): Workload._finish"},
    {"issue_dep_free_nodes", (PyCFunction)Feeder_issue_dep_free_nodes, METH_NOARGS,
     "Workload.issue_dep_free_nodes"},
    {"check_finished", (PyCFunction)Feeder_check_finished, METH_NOARGS,
     "on_all_done() once every node has finished"},
    {"state", (PyCFunction)Feeder_state, METH_NOARGS,
     "(ongoing ids, dependency-free ids, {id: parents not finished}) for the stuck report"},
    {"enable_replay", (PyCFunction)(void (*)(void))Feeder_enable_replay, METH_FASTCALL,
     "enable_replay(sysfast, replay_ns, gpu): replayed compute nodes started in C (Workload._issue_replay)"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Feeder_getset[] = {
    {"done", (getter)Feeder_get_done, NULL, "nodes finished", NULL},
    {"replayed_ns", (getter)Feeder_get_replayed_ns, NULL, "GPU compute replayed by enable_replay's path", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot Feeder_slots[] = {
    {Py_tp_doc, "A rank's feeder in C (workload/workload.py: Workload)."},
    {Py_tp_new, PyType_GenericNew},
    {Py_tp_init, feeder_init},
    {Py_tp_dealloc, feeder_dealloc},
    {Py_tp_traverse, feeder_traverse},
    {Py_tp_clear, feeder_clear},
    {Py_tp_methods, Feeder_methods},
    {Py_tp_getset, Feeder_getset},
    {0, NULL},
};

static PyType_Spec Feeder_spec = {
    .name = "system._sys_core.Feeder",
    .basicsize = sizeof(Feeder),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .slots = Feeder_slots,
};

int dtsim_add_feeder(PyObject *module) {
    PyObject *tp = PyType_FromModuleAndSpec(module, &Feeder_spec, NULL);
    if (!tp) return -1;
    if (PyModule_AddObject(module, "Feeder", tp) < 0) {
        Py_DECREF(tp);
        return -1;
    }
    return 0;
}
