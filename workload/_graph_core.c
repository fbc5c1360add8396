/* The workload layer's loading steps in C, each for the common case, each declining the rest to the
 * Python it stands in for (which names errors and proves the rest):
 *
 * ``parse_node`` (below) is workload/graph.py's _parse_node for a node without errors that is not a
 * host-side launcher; tests/workload/test_parse_node.py holds the two to each other.
 *
 * ``link_ascending`` is workload/shared_nodes.py's link_shared for the files converters write: each
 * dependency on a node of a lower id, or a control dependency on no node or on itself, which is
 * dropped and listed in ``missing`` for link_shared to say. It returns None for any other file
 * before it has changed anything (a data dependency on no node or on itself, a dependency on a
 * higher id), and link_shared then links it in Python. Otherwise it returns what link_shared
 * returns, by the same steps in the same order: the nodes by id, each a shared Node where one with
 * the same bytes, entry, parents and children exists, else a clone of its template that joins the
 * shared ones where ``may_share`` says it may. tests/workload/test_shared_nodes.py holds the two to
 * each other. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

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

/* Node.clone and graph.py's _may_share without a Python call, below configure_parse (which
 * knows Node's slots): clone_fast's NULL without an error, and may_share_fast's -2, decline */
static PyObject *clone_fast(PyObject *t, PyObject *index);
static int may_share_fast(PyObject *may_share, PyObject *n);

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
        PyObject *c = index ? clone_fast(t, index) : NULL;
        if (index && !c && !PyErr_Occurred()) c = PyObject_CallMethodOneArg(t, s_clone, index);
        Py_XDECREF(index);
        if (!c) goto done;
        if (PyObject_SetAttr(c, s_parents, parents[i]) < 0 || PyObject_SetAttr(c, s_children, kids[i]) < 0 ||
            PyObject_SetAttr(c, s_data_deps, Py_None) < 0) { /* only needed while linking */
            Py_DECREF(c);
            goto done;
        }
        int share = may_share_fast(may_share, c);
        if (share == -2) {
            PyObject *ok = PyObject_CallOneArg(may_share, c);
            share = ok ? PyObject_IsTrue(ok) : -1;
            Py_XDECREF(ok);
        }
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


/* -- parse_node: graph.py's _parse_node for the common node --------------------------------------
 * configure_parse(Node, constants) once; parse_node(fields, index) then returns the Node that
 * _parse_node(path, fields, index) returns, or None where that would raise or take a rare branch
 * (a host-side launcher, an attribute of the wrong kind, a value out of range, an unknown type):
 * graph.py then runs _parse_node, which names the error. tests/workload/test_parse_node.py holds
 * the two to each other on generated fields. */

enum {
    F_ID, F_NAME, F_TYPE, F_PARENTS, F_CHILDREN, F_IS_CPU_OP, F_DURATION_NS, F_COMM_TYPE, F_COMM_SIZE,
    F_COMM_PRIORITY, F_COMM_SRC, F_COMM_DST, F_COMM_TAG, F_PG_NAME, F_INVOLVED_DIM, F_NUM_OPS, F_TENSOR_SIZE,
    F_INPUTS_VALUES, F_INDEX, F_DATA_DEPS, F_HOST_LAUNCHER, F_COUNT
};
static const char *slot_names[F_COUNT] = {
    "id", "name", "type", "parents", "children", "is_cpu_op", "duration_ns", "comm_type", "comm_size",
    "comm_priority", "comm_src", "comm_dst", "comm_tag", "pg_name", "involved_dim", "num_ops", "tensor_size",
    "inputs_values", "index", "data_deps", "host_launcher"};
static Py_ssize_t slot_offset[F_COUNT];
static PyTypeObject *node_type = NULL;
/* NODE_TYPES (dict), INTEGER_MEMBERS (frozenset), COLL_TYPES (dict), SUPPORTED_COLLECTIVES (set) */
static PyObject *node_types, *integer_members, *coll_types, *supported;
static long type_coll, type_send, type_recv, type_mem_load, type_mem_store, type_comp;
static PyObject *s_duration_ns, *s_is_cpu_op, *s_comm_size, *s_comm_priority, *s_pg_name, *s_comm_type,
    *s_involved_dim, *s_comm_src, *s_comm_dst, *s_comm_tag, *s_tensor_size, *s_num_ops, *s_zero,
    *s_thousand, *s_empty;

/* Node.clone as configure_parse found it and graph.py's _may_share (NULL where not given);
 * clone_slots_known: Node's slots are exactly slot_names (a slot added to Node later would not be
 * copied here, so the method runs then) */
static PyObject *clone_method, *may_share_fn;
static int clone_slots_known;

/* configure_parse(Node, NODE_TYPES, INTEGER_MEMBERS, COLL_TYPES, SUPPORTED_COLLECTIVES,
 *                 (COMM_COLL, COMM_SEND, COMM_RECV, MEM_LOAD, MEM_STORE, COMP)[, may_share]) */
static PyObject *configure_parse(PyObject *Py_UNUSED(m), PyObject *args) {
    PyObject *cls, *nt, *im, *ct, *sup, *types, *share = NULL;
    if (!PyArg_ParseTuple(args, "O!O!O!O!OO!|O", &PyType_Type, &cls, &PyDict_Type, &nt, &PyFrozenSet_Type, &im,
                          &PyDict_Type, &ct, &sup, &PyTuple_Type, &types, &share))
        return NULL;
    if (!PyAnySet_Check(sup) ||
        !PyArg_ParseTuple(types, "llllll", &type_coll, &type_send, &type_recv, &type_mem_load, &type_mem_store,
                          &type_comp))
        return PyErr_Format(PyExc_TypeError, "configure_parse: bad constants");
    for (int i = 0; i < F_COUNT; i++) {
        PyObject *d = PyObject_GetAttrString(cls, slot_names[i]);
        if (!d) return NULL;
        if (!Py_IS_TYPE(d, &PyMemberDescr_Type) || ((PyMemberDescrObject *)d)->d_member->type != T_OBJECT_EX) {
            Py_DECREF(d);
            return PyErr_Format(PyExc_TypeError, "configure_parse: Node.%s is not a slot", slot_names[i]);
        }
        slot_offset[i] = ((PyMemberDescrObject *)d)->d_member->offset;
        Py_DECREF(d);
    }
    PyObject *slots = PyObject_GetAttrString(cls, "__slots__");
    if (!slots) return NULL;
    clone_slots_known = PyTuple_Check(slots) && PyTuple_GET_SIZE(slots) == F_COUNT;
    Py_DECREF(slots);
    PyObject *method = _PyType_Lookup((PyTypeObject *)cls, s_clone); /* borrowed */
    Py_XSETREF(clone_method, Py_XNewRef(method));
    Py_XSETREF(may_share_fn, Py_XNewRef(share));
    Py_XSETREF(node_type, (PyTypeObject *)Py_NewRef(cls));
    Py_XSETREF(node_types, Py_NewRef(nt));
    Py_XSETREF(integer_members, Py_NewRef(im));
    Py_XSETREF(coll_types, Py_NewRef(ct));
    Py_XSETREF(supported, Py_NewRef(sup));
    Py_RETURN_NONE;
}

static inline void set_slot(PyObject *n, int f, PyObject *v) { /* steals v */
    PyObject **slot = (PyObject **)((char *)n + slot_offset[f]);
    Py_XSETREF(*slot, v);
}

static inline PyObject *slot_of(PyObject *n, int f) { /* borrowed; NULL: unset */
    return *(PyObject **)((char *)n + slot_offset[f]);
}

/* 1 with *out where ``o`` is an int that fits a long (a node type); 0 otherwise, no error set. Only
 * exact bools and ints are read here: nothing that could run Python code mid-iteration */
static int small_long(PyObject *o, long *out) {
    int over = 0;
    if (!PyLong_CheckExact(o)) return 0;
    *out = PyLong_AsLongAndOverflow(o, &over);
    if (*out == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    return !over;
}

/* graph.py's Node.clone(index) where Node and its method are the configured ones and every slot of
 * ``t`` is set (the method raises AttributeError otherwise: it runs then): every slot copied,
 * children a new list, index ``index`` */
static PyObject *clone_fast(PyObject *t, PyObject *index) {
    if (!node_type || !clone_slots_known || !Py_IS_TYPE(t, node_type) ||
        _PyType_Lookup(node_type, s_clone) != clone_method)
        return NULL;
    for (int f = 0; f < F_COUNT; f++)
        if (f != F_CHILDREN && f != F_INDEX && !slot_of(t, f)) return NULL;
    PyObject *n = node_type->tp_alloc(node_type, 0), *kids = n ? PyList_New(0) : NULL;
    if (!kids) {
        Py_XDECREF(n);
        return NULL;
    }
    for (int f = 0; f < F_COUNT; f++)
        if (f != F_CHILDREN && f != F_INDEX) set_slot(n, f, Py_NewRef(slot_of(t, f)));
    set_slot(n, F_CHILDREN, kids);
    set_slot(n, F_INDEX, Py_NewRef(index));
    return n;
}

/* graph.py's _may_share(n), where ``may_share`` is it: not a CPU operator, not a send or receive.
 * 1 or 0; -2 to call ``may_share`` instead; -1 error */
static int may_share_fast(PyObject *may_share, PyObject *n) {
    if (!may_share_fn || may_share != may_share_fn || !Py_IS_TYPE(n, node_type)) return -2;
    PyObject *cpu = slot_of(n, F_IS_CPU_OP), *type = slot_of(n, F_TYPE);
    long t;
    if (!cpu || !PyBool_Check(cpu) || !type || !small_long(type, &t)) return -2; /* parse_node's fields only */
    return cpu == Py_False && t != type_send && t != type_recv;
}

/* any(map(_host_comms_may_change, nodes.values())) for a dict of configured Nodes: True, False, or
 * None where graph.py must ask it (another node class, an unset field) */
static PyObject *host_comms_any(PyObject *Py_UNUSED(m), PyObject *nodes) {
    if (!node_type || !PyDict_Check(nodes)) Py_RETURN_NONE;
    Py_ssize_t pos = 0;
    PyObject *key, *n;
    while (PyDict_Next(nodes, &pos, &key, &n)) {
        if (!Py_IS_TYPE(n, node_type)) Py_RETURN_NONE;
        PyObject *cpu = slot_of(n, F_IS_CPU_OP), *type = slot_of(n, F_TYPE);
        long t;
        if (!cpu || !PyBool_Check(cpu) || !type || !small_long(type, &t)) Py_RETURN_NONE;
        if (cpu == Py_True) Py_RETURN_TRUE;
        if (t == type_send || t == type_recv) {
            PyObject *peer = slot_of(n, t == type_send ? F_COMM_DST : F_COMM_SRC);
            if (!peer) Py_RETURN_NONE;
            if (peer == Py_None) Py_RETURN_TRUE;
        }
    }
    Py_RETURN_FALSE;
}

/* clone_node(node, index): clone_fast's copy, or None where it declines (tests hold it to Node.clone) */
static PyObject *clone_node(PyObject *Py_UNUSED(m), PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "clone_node(node, index)");
        return NULL;
    }
    PyObject *c = clone_fast(args[0], args[1]);
    return c ? c : PyErr_Occurred() ? NULL : Py_NewRef(Py_None);
}

/* _get_int's value of attrs[key]: 1 with *out (a new reference, or NULL where absent), 0 to
 * decline (wrong kind, below minimum, absent but required), -1 error */
static int get_int(PyObject *attrs, PyObject *key, int required, int nonnegative, PyObject **out) {
    *out = NULL;
    PyObject *a = PyDict_GetItemWithError(attrs, key);
    if (!a) return PyErr_Occurred() ? -1 : !required;
    if (!PyTuple_Check(a) || PyTuple_GET_SIZE(a) != 2) return 0;
    int ok = PySet_Contains(integer_members, PyTuple_GET_ITEM(a, 0));
    if (ok <= 0) {
        if (ok < 0) PyErr_Clear(); /* an unhashable kind: _parse_node says what */
        return 0;
    }
    PyObject *v = PyTuple_GET_ITEM(a, 1);
    PyObject *iv = PyLong_CheckExact(v) ? Py_NewRef(v) : PyNumber_Long(v);
    if (!iv) {
        PyErr_Clear();
        return 0;
    }
    if (nonnegative) {
        int neg = PyObject_RichCompareBool(iv, s_zero, Py_LT);
        if (neg != 0) {
            Py_DECREF(iv);
            if (neg < 0) return -1;
            return 0;
        }
    }
    *out = iv;
    return 1;
}

/* the node's parents: its data dependencies, then its control ones, each once, in that order */
static PyObject *union_deps(PyObject *data, PyObject *ctrl) {
    Py_ssize_t nd = PyTuple_GET_SIZE(data), nc = PyTuple_GET_SIZE(ctrl);
    if (nc == 0 && nd < 2) return Py_NewRef(data);
    PyObject *seen = PySet_New(NULL), *out = PyList_New(0);
    if (!seen || !out) goto fail;
    for (Py_ssize_t k = 0; k < nd + nc; k++) {
        PyObject *d = k < nd ? PyTuple_GET_ITEM(data, k) : PyTuple_GET_ITEM(ctrl, k - nd);
        int has = PySet_Contains(seen, d);
        if (has < 0) goto fail;
        if (!has && (PySet_Add(seen, d) < 0 || PyList_Append(out, d) < 0)) goto fail;
    }
    Py_DECREF(seen);
    if (nc == 0 && PyList_GET_SIZE(out) == nd) { /* no duplicates: the tuple itself, as _parse_node */
        Py_DECREF(out);
        return Py_NewRef(data);
    }
    PyObject *t = PyList_AsTuple(out);
    Py_DECREF(out);
    return t;
fail:
    Py_XDECREF(seen);
    Py_XDECREF(out);
    return NULL;
}

#define GET_INT(key, req, nonneg, out)                          \
    do {                                                        \
        int _r = get_int(attrs, key, req, nonneg, out);         \
        if (_r < 0) goto error;                                 \
        if (_r == 0) goto decline;                              \
    } while (0)

static PyObject *parse_node(PyObject *Py_UNUSED(m), PyObject *const *args, Py_ssize_t nargs) {
    if (!node_type) {
        PyErr_SetString(PyExc_RuntimeError, "parse_node: configure_parse first");
        return NULL;
    }
    if (nargs != 2 || !PyTuple_Check(args[0]) || PyTuple_GET_SIZE(args[0]) != 8) {
        PyErr_SetString(PyExc_TypeError, "parse_node(fields: tuple of 8, index)");
        return NULL;
    }
    PyObject *f = args[0];
    PyObject *nid = PyTuple_GET_ITEM(f, 0), *name = PyTuple_GET_ITEM(f, 1), *t = PyTuple_GET_ITEM(f, 2),
             *ctrl = PyTuple_GET_ITEM(f, 3), *data = PyTuple_GET_ITEM(f, 4), *micros = PyTuple_GET_ITEM(f, 5),
             *inputs = PyTuple_GET_ITEM(f, 6), *attrs = PyTuple_GET_ITEM(f, 7);
    if (!PyLong_CheckExact(t) || !PyTuple_Check(ctrl) || !PyTuple_Check(data) || !PyDict_CheckExact(attrs) ||
        !PyLong_CheckExact(micros))
        Py_RETURN_NONE;
    int known = PyDict_Contains(node_types, t);
    if (known <= 0) return known < 0 ? NULL : Py_NewRef(Py_None);
    long type = PyLong_AsLong(t);
    if (type == -1 && PyErr_Occurred()) return NULL;
    PyObject *v = NULL;

    /* is_cpu_op: an integer member that is not 0 */
    int cpu = 0;
    PyObject *a = PyDict_GetItemWithError(attrs, s_is_cpu_op);
    if (!a && PyErr_Occurred()) return NULL;
    if (a) {
        if (!PyTuple_Check(a) || PyTuple_GET_SIZE(a) != 2) Py_RETURN_NONE;
        int is_int = PySet_Contains(integer_members, PyTuple_GET_ITEM(a, 0));
        if (is_int < 0) {
            PyErr_Clear();
            Py_RETURN_NONE;
        }
        if (is_int) {
            PyObject *iv = PyNumber_Long(PyTuple_GET_ITEM(a, 1));
            if (!iv) {
                PyErr_Clear();
                Py_RETURN_NONE;
            }
            cpu = PyObject_IsTrue(iv);
            Py_DECREF(iv);
            if (cpu < 0) return NULL;
        }
    }
    int comm = type == type_coll || type == type_send || type == type_recv;
    if (comm && cpu) Py_RETURN_NONE; /* a host-side launcher, or an error: _parse_node */

    PyObject *n = node_type->tp_alloc(node_type, 0);
    if (!n) return NULL;
    PyObject *parents = union_deps(data, ctrl);
    if (!parents) { /* an unhashable dependency: _parse_node raises what it raises */
        PyErr_Clear();
        goto decline;
    }
    PyObject *children = PyList_New(0);
    PyObject *index = PyNumber_Index(args[1]);
    if (!children || !index) {
        Py_DECREF(parents);
        Py_XDECREF(children);
        Py_XDECREF(index);
        goto error;
    }
    set_slot(n, F_CHILDREN, children);
    set_slot(n, F_INDEX, index);
    set_slot(n, F_ID, Py_NewRef(nid));
    set_slot(n, F_NAME, Py_NewRef(name));
    set_slot(n, F_TYPE, Py_NewRef(t));
    set_slot(n, F_DATA_DEPS, Py_NewRef(data));
    set_slot(n, F_PARENTS, parents);
    set_slot(n, F_HOST_LAUNCHER, Py_NewRef(Py_None));
    set_slot(n, F_IS_CPU_OP, PyBool_FromLong(cpu));
    if (PyDict_Contains(attrs, s_duration_ns)) {
        GET_INT(s_duration_ns, 1, 1, &v);
        set_slot(n, F_DURATION_NS, v);
    } else {
        v = PyNumber_Multiply(micros, s_thousand);
        if (!v) goto error;
        set_slot(n, F_DURATION_NS, v);
    }
    set_slot(n, F_COMM_TYPE, Py_NewRef(Py_None));
    set_slot(n, F_COMM_SIZE, Py_NewRef(Py_None));
    set_slot(n, F_COMM_SRC, Py_NewRef(Py_None));
    set_slot(n, F_COMM_DST, Py_NewRef(Py_None));
    set_slot(n, F_COMM_TAG, Py_NewRef(Py_None));
    set_slot(n, F_COMM_PRIORITY, Py_NewRef(s_zero));
    set_slot(n, F_PG_NAME, Py_NewRef(s_empty));
    set_slot(n, F_INVOLVED_DIM, Py_NewRef(Py_None));
    set_slot(n, F_NUM_OPS, Py_NewRef(Py_None));
    set_slot(n, F_TENSOR_SIZE, Py_NewRef(Py_None));
    set_slot(n, F_INPUTS_VALUES, Py_NewRef(inputs == Py_None ? s_empty : inputs));
    if (comm) {
        GET_INT(s_comm_size, 1, 1, &v);
        set_slot(n, F_COMM_SIZE, v);
        if (PyDict_Contains(attrs, s_comm_priority)) {
            GET_INT(s_comm_priority, 0, 0, &v);
            set_slot(n, F_COMM_PRIORITY, v);
        }
        PyObject *pg = PyDict_GetItemWithError(attrs, s_pg_name);
        if (!pg && PyErr_Occurred()) goto error;
        if (pg) {
            if (!PyTuple_Check(pg) || PyTuple_GET_SIZE(pg) != 2) goto decline;
            PyObject *kind = PyTuple_GET_ITEM(pg, 0), *val = PyTuple_GET_ITEM(pg, 1), *name_str;
            int is_str = PyUnicode_Check(kind) && PyUnicode_CompareWithASCIIString(kind, "string_val") == 0;
            if (is_str) {
                name_str = Py_NewRef(val);
            } else {
                int is_int = PySet_Contains(integer_members, kind);
                if (is_int <= 0) {
                    if (is_int < 0) PyErr_Clear();
                    goto decline;
                }
                PyObject *iv = PyNumber_Long(val);
                if (!iv) {
                    PyErr_Clear();
                    goto decline;
                }
                name_str = PyObject_Str(iv);
                Py_DECREF(iv);
                if (!name_str) goto error;
            }
            set_slot(n, F_PG_NAME, name_str);
            /* a group other than the world names a group id: an integer >= 0, as int() reads it */
            if (!PyUnicode_Check(name_str)) goto decline;
            if (PyUnicode_GET_LENGTH(name_str) && PyUnicode_CompareWithASCIIString(name_str, "0") != 0) {
                PyObject *id = PyLong_FromUnicodeObject(name_str, 10);
                if (!id) {
                    PyErr_Clear();
                    goto decline;
                }
                int neg = PyObject_RichCompareBool(id, s_zero, Py_LT);
                Py_DECREF(id);
                if (neg < 0) goto error;
                if (neg) goto decline;
            }
        }
    }
    if (type == type_coll) {
        GET_INT(s_comm_type, 1, 0, &v);
        set_slot(n, F_COMM_TYPE, v);
        int in = PyDict_Contains(coll_types, v), ok = in > 0 ? PySet_Contains(supported, v) : in;
        if (ok < 0) goto error;
        if (!ok) goto decline;
        PyObject *inv = PyDict_GetItemWithError(attrs, s_involved_dim);
        if (!inv && PyErr_Occurred()) goto error;
        if (inv) {
            if (!PyTuple_Check(inv) || PyTuple_GET_SIZE(inv) != 2) goto decline;
            PyObject *kind = PyTuple_GET_ITEM(inv, 0);
            if (!PyUnicode_Check(kind) || PyUnicode_CompareWithASCIIString(kind, "bool_list") != 0) goto decline;
            PyObject *lst = PySequence_List(PyTuple_GET_ITEM(inv, 1));
            if (!lst) {
                PyErr_Clear();
                goto decline;
            }
            set_slot(n, F_INVOLVED_DIM, lst);
        }
    } else if (type == type_send || type == type_recv) {
        int send = type == type_send;
        PyObject *peer_key = send ? s_comm_dst : s_comm_src, *other_key = send ? s_comm_src : s_comm_dst;
        GET_INT(peer_key, 0, 0, &v);
        int has_peer = v != NULL;
        set_slot(n, send ? F_COMM_DST : F_COMM_SRC, v ? v : Py_NewRef(Py_None));
        GET_INT(s_comm_tag, has_peer, 0, &v);
        set_slot(n, F_COMM_TAG, v ? v : Py_NewRef(Py_None));
        GET_INT(other_key, 0, 0, &v);
        set_slot(n, send ? F_COMM_SRC : F_COMM_DST, v ? v : Py_NewRef(Py_None));
    } else if (type == type_mem_load || type == type_mem_store) {
        GET_INT(s_tensor_size, 1, 1, &v);
        set_slot(n, F_TENSOR_SIZE, v);
    } else if (type == type_comp) {
        if (PyDict_Contains(attrs, s_num_ops)) {
            GET_INT(s_num_ops, 0, 1, &v);
            set_slot(n, F_NUM_OPS, v);
        }
        if (PyDict_Contains(attrs, s_tensor_size)) {
            GET_INT(s_tensor_size, 0, 1, &v);
            set_slot(n, F_TENSOR_SIZE, v);
        }
    }
    return n;
decline:
    Py_DECREF(n);
    Py_RETURN_NONE;
error:
    Py_XDECREF(n);
    return NULL;
}

static PyMethodDef methods[] = {
    {"configure_parse", (PyCFunction)configure_parse, METH_VARARGS,
     "configure_parse(Node, NODE_TYPES, INTEGER_MEMBERS, COLL_TYPES, SUPPORTED_COLLECTIVES, node type numbers)"},
    {"parse_node", (PyCFunction)(void (*)(void))parse_node, METH_FASTCALL,
     "parse_node(fields, index): graph._parse_node's Node, or None where _parse_node must decide"},
    {"clone_node", (PyCFunction)(void (*)(void))clone_node, METH_FASTCALL,
     "clone_node(node, index): Node.clone(index) copied slot for slot, or None where the method must run"},
    {"host_comms_may_change", (PyCFunction)host_comms_any, METH_O,
     "host_comms_may_change(nodes): any(map(graph._host_comms_may_change, nodes.values())), or None where "
     "graph.py must ask"},
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
    if (!s_duration_ns &&
        (!(s_duration_ns = PyUnicode_InternFromString("duration_ns")) ||
         !(s_is_cpu_op = PyUnicode_InternFromString("is_cpu_op")) ||
         !(s_comm_size = PyUnicode_InternFromString("comm_size")) ||
         !(s_comm_priority = PyUnicode_InternFromString("comm_priority")) ||
         !(s_pg_name = PyUnicode_InternFromString("pg_name")) ||
         !(s_comm_type = PyUnicode_InternFromString("comm_type")) ||
         !(s_involved_dim = PyUnicode_InternFromString("involved_dim")) ||
         !(s_comm_src = PyUnicode_InternFromString("comm_src")) ||
         !(s_comm_dst = PyUnicode_InternFromString("comm_dst")) ||
         !(s_comm_tag = PyUnicode_InternFromString("comm_tag")) ||
         !(s_tensor_size = PyUnicode_InternFromString("tensor_size")) ||
         !(s_num_ops = PyUnicode_InternFromString("num_ops")) ||
         !(s_zero = PyLong_FromLong(0)) ||
         !(s_thousand = PyLong_FromLong(1000)) ||
         !(s_empty = PyUnicode_InternFromString(""))))
        return -1;
    return PyModule_AddStringConstant(m, "SOURCE_CHECKSUM", DTSIM_SOURCE_CHECKSUM);
}

static PyModuleDef_Slot slots[] = {{Py_mod_exec, exec_module}, {0, NULL}};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_graph_core", "graph.py's _parse_node and shared_nodes.py's link_shared, in C", 0, methods, slots,
};

PyMODINIT_FUNC PyInit__graph_core(void) { return PyModuleDef_Init(&module); }
