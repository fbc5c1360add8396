/* workload/shared_nodes.py's link_shared in C, for the files converters write: each dependency
 * on a node of a lower id, or a control dependency on no node or on itself, which is dropped and
 * listed in ``missing`` for link_shared to say. ``link_ascending`` returns None for any other file
 * before it has changed anything (a data dependency on no node or on itself, a dependency on a
 * higher id), and link_shared then links it in Python, which names errors and proves the rest.
 * Otherwise it returns what link_shared returns, by the same steps in the same order: the nodes
 * by id, each a shared Node where one with the same bytes, entry, parents and children exists,
 * else a clone of its template that joins the shared ones where ``may_share`` says it may.
 * tests/workload/test_shared_nodes.py holds the two to each other. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#ifndef DTSIM_SOURCE_CHECKSUM
#define DTSIM_SOURCE_CHECKSUM "unknown"
#endif

static PyObject *s_id, *s_parents, *s_children, *s_index, *s_data_deps, *s_clone;

/* free an array of n references, any of them NULL */
static void free_refs(PyObject **refs, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++) Py_XDECREF(refs[i]);
    PyMem_Free(refs);
}

/* a tuple of the dependencies of ``deps`` on other nodes that exist; each other one appended to
 * ``missing`` as (id, dep), unless it is a data dependency: then 1 (declined), as link_shared
 * names that error. 0 done, -1 error. */
static int keep_existing(PyObject *t, PyObject *id, PyObject *pos, PyObject **deps, PyObject *missing) {
    PyObject *data = PyObject_GetAttr(t, s_data_deps), *kept = data ? PyList_New(0) : NULL;
    int rc = kept ? 0 : -1;
    for (Py_ssize_t k = 0; rc == 0 && k < PyTuple_GET_SIZE(*deps); k++) {
        PyObject *dep = PyTuple_GET_ITEM(*deps, k);
        int self = PyObject_RichCompareBool(dep, id, Py_EQ), there = self ? 0 : PyDict_Contains(pos, dep);
        if (self < 0 || there < 0) {
            rc = -1;
        } else if (!self && there) {
            rc = PyList_Append(kept, dep);
        } else {
            int data_dep = PySequence_Contains(data, dep);
            PyObject *pair = data_dep == 0 ? PyTuple_Pack(2, id, dep) : NULL;
            rc = data_dep < 0 ? -1 : data_dep ? 1 : !pair || PyList_Append(missing, pair) < 0 ? -1 : 0;
            Py_XDECREF(pair);
        }
    }
    if (rc == 0) {
        PyObject *tuple = PyList_AsTuple(kept);
        if (tuple)
            Py_SETREF(*deps, tuple);
        else
            rc = -1;
    }
    Py_XDECREF(kept);
    Py_XDECREF(data);
    return rc;
}

/* link_ascending(frames, entries, shared, may_share, max_variants, missing) -> dict | None */
static PyObject *link_ascending(PyObject *Py_UNUSED(m), PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 6 || !PyList_Check(args[0]) || !PyList_Check(args[1]) || !PyDict_Check(args[2]) ||
        !PyList_Check(args[5])) {
        PyErr_SetString(PyExc_TypeError, "link_ascending(frames: list, entries: list, shared: dict, may_share, "
                                         "max_variants, missing: list)");
        return NULL;
    }
    PyObject *frames = args[0], *entries = args[1], *shared = args[2], *may_share = args[3], *missing = args[5];
    Py_ssize_t max_variants = PyLong_AsSsize_t(args[4]);
    if (max_variants == -1 && PyErr_Occurred()) return NULL;
    Py_ssize_t n = PyList_GET_SIZE(entries);
    if (PyList_GET_SIZE(frames) != n) {
        PyErr_SetString(PyExc_ValueError, "link_ascending: one frame per entry");
        return NULL;
    }
    PyObject *pos = PyDict_New(); /* id -> entry index */
    PyObject **ids = PyMem_Calloc(n ? n : 1, sizeof *ids), **parents = PyMem_Calloc(n ? n : 1, sizeof *parents);
    PyObject **kids = PyMem_Calloc(n ? n : 1, sizeof *kids);
    PyObject *nodes = NULL, *result = NULL;
    if (!pos || !ids || !parents || !kids) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *t = PyList_GET_ITEM(entries, i);
        if (!(ids[i] = PyObject_GetAttr(t, s_id)) || !(parents[i] = PyObject_GetAttr(t, s_parents))) goto done;
        if (!PyLong_CheckExact(ids[i]) || !PyTuple_CheckExact(parents[i])) goto decline;
        PyObject *at = PyLong_FromSsize_t(i);
        if (!at || PyDict_SetItem(pos, ids[i], at) < 0) {
            Py_XDECREF(at);
            goto done;
        }
        Py_DECREF(at);
    }
    if (PyDict_GET_SIZE(pos) != n) goto decline; /* a repeated id: _parse_nodes refuses it first */
    for (Py_ssize_t i = 0; i < n; i++) {
        /* a dependency on itself or on no node is dropped (and said) where it is a control one */
        for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(parents[i]); k++) {
            PyObject *dep = PyTuple_GET_ITEM(parents[i], k);
            int self = PyObject_RichCompareBool(dep, ids[i], Py_EQ), there = self ? 0 : PyDict_Contains(pos, dep);
            if (self < 0 || there < 0) goto done;
            if (self || !there) {
                int kept = keep_existing(PyList_GET_ITEM(entries, i), ids[i], pos, &parents[i], missing);
                if (kept < 0) goto done;
                if (kept) goto decline;
                break;
            }
        }
        PyObject *deps = parents[i];
        for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(deps); k++) {
            PyObject *dep = PyTuple_GET_ITEM(deps, k);
            int lower = PyObject_RichCompareBool(dep, ids[i], Py_LT);
            if (lower < 0) goto done;
            if (!lower) goto decline; /* on a higher id: the Python path proves the rest acyclic */
            PyObject *at = PyDict_GetItemWithError(pos, dep); /* borrowed */
            if (!at) {
                if (!PyErr_Occurred()) PyErr_SetString(PyExc_RuntimeError, "link_ascending: a kept dependency is gone");
                goto done;
            }
            Py_ssize_t j = PyLong_AsSsize_t(at);
            if (!kids[j] && !(kids[j] = PyList_New(0))) goto done;
            if (PyList_Append(kids[j], ids[i]) < 0) goto done;
        }
    }
    /* from here on the answer is ours: no decline below, as link_shared changes ``shared`` too */
    if (!(nodes = PyDict_New())) goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *t = PyList_GET_ITEM(entries, i), *f = PyList_GET_ITEM(frames, i);
        if (!kids[i] && !(kids[i] = PyList_New(0))) goto done;
        if (PyList_Sort(kids[i]) < 0) goto done;
        PyObject *variants = PyDict_GetItemWithError(shared, f); /* borrowed */
        if (!variants && PyErr_Occurred()) goto done;
        if (variants) {
            if (!PyList_Check(variants)) {
                PyErr_SetString(PyExc_TypeError, "link_ascending: shared maps bytes to lists of nodes");
                goto done;
            }
            PyObject *found = NULL;
            for (Py_ssize_t v = 0; v < PyList_GET_SIZE(variants) && !found; v++) {
                PyObject *s = PyList_GET_ITEM(variants, v);
                PyObject *index = PyObject_GetAttr(s, s_index);
                if (!index) goto done;
                Py_ssize_t si = PyLong_AsSsize_t(index);
                Py_DECREF(index);
                if (si == -1 && PyErr_Occurred()) goto done;
                if (si != i) continue;
                PyObject *sp = PyObject_GetAttr(s, s_parents);
                int eq = sp ? PyObject_RichCompareBool(sp, parents[i], Py_EQ) : -1;
                Py_XDECREF(sp);
                if (eq < 0) goto done;
                if (!eq) continue;
                PyObject *sc = PyObject_GetAttr(s, s_children);
                eq = sc ? PyObject_RichCompareBool(sc, kids[i], Py_EQ) : -1;
                Py_XDECREF(sc);
                if (eq < 0) goto done;
                if (eq) found = s;
            }
            if (found) {
                if (PyDict_SetItem(nodes, ids[i], found) < 0) goto done;
                continue;
            }
        }
        PyObject *index = PyLong_FromSsize_t(i);
        PyObject *c = index ? PyObject_CallMethodOneArg(t, s_clone, index) : NULL;
        Py_XDECREF(index);
        if (!c) goto done;
        if (PyObject_SetAttr(c, s_parents, parents[i]) < 0 || PyObject_SetAttr(c, s_children, kids[i]) < 0 ||
            PyObject_SetAttr(c, s_data_deps, Py_None) < 0) { /* only needed while linking */
            Py_DECREF(c);
            goto done;
        }
        PyObject *ok = PyObject_CallOneArg(may_share, c);
        int share = ok ? PyObject_IsTrue(ok) : -1;
        Py_XDECREF(ok);
        if (share < 0) {
            Py_DECREF(c);
            goto done;
        }
        if (share) {
            int r = 0;
            if (!variants) {
                PyObject *one = PyList_New(1);
                if (one) {
                    PyList_SET_ITEM(one, 0, Py_NewRef(c));
                    r = PyDict_SetItem(shared, f, one);
                    Py_DECREF(one);
                } else {
                    r = -1;
                }
            } else if (PyList_GET_SIZE(variants) < max_variants) {
                r = PyList_Append(variants, c);
            }
            if (r < 0) {
                Py_DECREF(c);
                goto done;
            }
        }
        int r = PyDict_SetItem(nodes, ids[i], c);
        Py_DECREF(c);
        if (r < 0) goto done;
    }
    result = Py_NewRef(nodes);
    goto done;
decline:
    result = Py_NewRef(Py_None);
    if (PyList_SetSlice(missing, 0, PyList_GET_SIZE(missing), NULL) < 0) Py_CLEAR(result); /* untouched */
done:
    Py_XDECREF(nodes);
    Py_XDECREF(pos);
    if (ids) free_refs(ids, n);
    if (parents) free_refs(parents, n);
    if (kids) free_refs(kids, n);
    return result;
}

static PyMethodDef methods[] = {
    {"link_ascending", (PyCFunction)(void (*)(void))link_ascending, METH_FASTCALL,
     "link_ascending(frames, entries, shared, may_share, max_variants, missing): link_shared for files whose "
     "every kept dependency is on a node of a lower id; None for any other file, untouched"},
    {NULL, NULL, 0, NULL},
};

static int exec_module(PyObject *m) {
    if (!s_id && (!(s_id = PyUnicode_InternFromString("id")) || !(s_parents = PyUnicode_InternFromString("parents")) ||
                  !(s_children = PyUnicode_InternFromString("children")) ||
                  !(s_index = PyUnicode_InternFromString("index")) ||
                  !(s_data_deps = PyUnicode_InternFromString("data_deps")) ||
                  !(s_clone = PyUnicode_InternFromString("clone"))))
        return -1;
    return PyModule_AddStringConstant(m, "SOURCE_CHECKSUM", DTSIM_SOURCE_CHECKSUM);
}

static PyModuleDef_Slot slots[] = {{Py_mod_exec, exec_module}, {0, NULL}};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_graph_core", "workload/shared_nodes.py's link_shared in C", 0, methods, slots,
};

PyMODINIT_FUNC PyInit__graph_core(void) { return PyModuleDef_Init(&module); }
