/* chakra_proto/wire.py's decoder in C: ``decode(data, cls)`` reads an ET message into the same
 * plain objects as wire._decode, or returns None for exactly what wire._decode declines
 * (wire.py says what and why; tests/chakra_proto/test_wire.py holds both to protobuf and to each
 * other on generated and mutated messages).
 *
 * A class's FIELDS and ONEOF are read once into a table indexed by field number. Every read is
 * bounded by the end of the message being read: wire._decode reads on to the end of the buffer
 * and then declines because the position passed the end, so both decline the same messages.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

enum { VARINT = 0, I64 = 1, LEN = 2, I32 = 5 };
enum { K_UINT64, K_INT64, K_INT32, K_UINT32, K_BOOL, K_SINT32, K_SINT64, K_FIXED64, K_SFIXED64, K_DOUBLE,
       K_FIXED32, K_SFIXED32, K_FLOAT, K_STRING, K_BYTES, K_MESSAGE, K_COUNT };
static const char *const kind_names[K_COUNT] = {
    "uint64", "int64", "int32", "uint32", "bool", "sint32", "sint64", "fixed64", "sfixed64", "double",
    "fixed32", "sfixed32", "float", "string", "bytes", "message"};

#define MAX_FIELD 64 /* et_def.proto's highest field number is 32 (AttributeProto.bytes_list) */

struct spec;
typedef struct {
    PyObject *name; /* NULL: no such field */
    int kind, repeated, oneof;
    struct spec *sub;
} field;

/* the fields node_fields reads, by name: their numbers are looked up once per class */
enum { N_ID, N_NAME, N_TYPE, N_CTRL_DEPS, N_DATA_DEPS, N_DURATION_MICROS, N_INPUTS, N_ATTR, N_NAMED };

typedef struct spec {
    PyObject *cls;
    field fields[MAX_FIELD + 1];
    int named[N_NAMED]; /* field numbers of node_fields' names (0: no such field) */
} spec;

static PyObject *specs = NULL;   /* class -> capsule of its spec */
static PyObject *str_oneof = NULL, *str_FIELDS = NULL, *str_ONEOF = NULL;
static PyObject *str_id, *str_name, *str_type, *str_ctrl_deps, *str_data_deps, *str_duration_micros, *str_inputs,
    *str_values, *str_attr, *str_empty, *zero;

static int wire_of(int kind) {
    if (kind <= K_SINT64) return VARINT;
    if (kind <= K_DOUBLE) return I64;
    if (kind <= K_FLOAT) return I32;
    return LEN;
}

static void spec_free(PyObject *capsule) {
    spec *s = PyCapsule_GetPointer(capsule, NULL);
    if (!s) return;
    for (int i = 0; i <= MAX_FIELD; i++) Py_XDECREF(s->fields[i].name);
    Py_XDECREF(s->cls);
    PyMem_Free(s);
}

static spec *get_spec(PyObject *cls);

static int fill_spec(spec *s, PyObject *cls) {
    PyObject *fields = PyObject_GetAttr(cls, str_FIELDS), *oneof = NULL;
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    int rc = -1;
    if (!fields) return -1;
    if (!PyDict_Check(fields)) {
        PyErr_SetString(PyExc_TypeError, "FIELDS must be a dict");
        goto done;
    }
    oneof = PyObject_GetAttr(cls, str_ONEOF);
    if (!oneof) goto done;
    while (PyDict_Next(fields, &pos, &key, &value)) {
        long num = PyLong_AsLong(key);
        if (num == -1 && PyErr_Occurred()) goto done;
        if (num < 1 || num > MAX_FIELD || !PyTuple_Check(value) || PyTuple_GET_SIZE(value) != 4) {
            PyErr_Format(PyExc_ValueError, "field %ld: expected a number in 1..%d and (name, kind, repeated, class)",
                         num, MAX_FIELD);
            goto done;
        }
        field *f = &s->fields[num];
        PyObject *name = PyTuple_GET_ITEM(value, 0), *kind = PyTuple_GET_ITEM(value, 1);
        PyObject *sub = PyTuple_GET_ITEM(value, 3);
        if (!PyUnicode_Check(name) || !PyUnicode_Check(kind)) {
            PyErr_SetString(PyExc_TypeError, "field name and kind must be strings");
            goto done;
        }
        f->kind = -1;
        for (int k = 0; k < K_COUNT; k++)
            if (PyUnicode_CompareWithASCIIString(kind, kind_names[k]) == 0) f->kind = k;
        if (f->kind < 0) {
            PyErr_Format(PyExc_ValueError, "unknown field kind %R", kind);
            goto done;
        }
        int rep = PyObject_IsTrue(PyTuple_GET_ITEM(value, 2));
        int one = PySequence_Contains(oneof, key);
        if (rep < 0 || one < 0) goto done;
        f->repeated = rep;
        f->oneof = one;
        f->sub = NULL;
        if (f->kind == K_MESSAGE) {
            f->sub = get_spec(sub);
            if (!f->sub) goto done;
        }
        Py_INCREF(name);
        PyUnicode_InternInPlace(&name);
        f->name = name;
    }
    rc = 0;
done:
    Py_XDECREF(oneof);
    Py_DECREF(fields);
    return rc;
}

static spec *get_spec(PyObject *cls) {
    PyObject *capsule = PyDict_GetItemWithError(specs, cls);
    if (capsule) return PyCapsule_GetPointer(capsule, NULL);
    if (PyErr_Occurred()) return NULL;
    if (!PyType_Check(cls)) {
        PyErr_SetString(PyExc_TypeError, "expected a wire.Message class");
        return NULL;
    }
    spec *s = PyMem_Calloc(1, sizeof(spec));
    if (!s) {
        PyErr_NoMemory();
        return NULL;
    }
    s->cls = Py_NewRef(cls);
    capsule = PyCapsule_New(s, NULL, spec_free);
    if (!capsule) {
        Py_DECREF(s->cls);
        PyMem_Free(s);
        return NULL;
    }
    /* registered before its fields, so a message class that contains itself finds it */
    if (PyDict_SetItem(specs, cls, capsule) < 0 || fill_spec(s, cls) < 0) {
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        if (PyDict_DelItem(specs, cls) < 0) PyErr_Clear();
        PyErr_Restore(type, value, tb);
        Py_DECREF(capsule);
        return NULL;
    }
    Py_DECREF(capsule);
    PyObject *const names[N_NAMED] = {str_id, str_name, str_type, str_ctrl_deps, str_data_deps, str_duration_micros,
                                      str_inputs, str_attr};
    for (int k = 0; k < N_NAMED; k++)
        for (int i = 1; i <= MAX_FIELD; i++)
            if (s->fields[i].name == names[k]) s->named[k] = i; /* both interned */
    return s;
}

/* -- reading -------------------------------------------------------------------------------------- */

/* 1 read, 0 decline (wire._varint's rules: at most 10 bytes, at most 64 bits) */
static int read_varint(const uint8_t *buf, Py_ssize_t *pos, Py_ssize_t end, uint64_t *out) {
    uint64_t result = 0;
    int shift = 0;
    Py_ssize_t p = *pos;
    for (;;) {
        if (p >= end) return 0;
        uint8_t b = buf[p++];
        if (shift == 63) {
            if (b > 1) return 0; /* bits past 64, or an 11th byte */
            result |= (uint64_t)b << 63;
            break;
        }
        result |= (uint64_t)(b & 0x7F) << shift;
        if (b < 0x80) break;
        shift += 7;
    }
    *pos = p;
    *out = result;
    return 1;
}

#define DECLINE ((PyObject *)1) /* not an error, not a value: wire declines */

static PyObject *read_scalar(const uint8_t *buf, Py_ssize_t *pos, Py_ssize_t end, int kind) {
    Py_ssize_t p = *pos;
    if (kind >= K_FIXED64 && kind <= K_FLOAT) {
        int wide = kind <= K_DOUBLE;
        Py_ssize_t n = wide ? 8 : 4;
        if (end - p < n) return DECLINE;
        *pos = p + n;
        if (wide) {
            uint64_t u;
            memcpy(&u, buf + p, 8);  /* little-endian hosts (x86, arm64), as the queue's binaries assume */
            if (kind == K_FIXED64) return PyLong_FromUnsignedLongLong(u);
            if (kind == K_SFIXED64) return PyLong_FromLongLong((long long)(int64_t)u);
            double d;
            memcpy(&d, &u, 8);
            return PyFloat_FromDouble(d);
        }
        uint32_t u;
        memcpy(&u, buf + p, 4);
        if (kind == K_FIXED32) return PyLong_FromUnsignedLong(u);
        if (kind == K_SFIXED32) return PyLong_FromLong((long)(int32_t)u);
        float f;
        memcpy(&f, &u, 4);
        return PyFloat_FromDouble((double)f);
    }
    uint64_t v;
    if (!read_varint(buf, &p, end, &v)) return DECLINE;
    *pos = p;
    switch (kind) {
    case K_UINT64:
        return PyLong_FromUnsignedLongLong(v);
    case K_INT64:
        return PyLong_FromLongLong((long long)(int64_t)v);
    case K_INT32: /* also the enum Node.type; a negative int32 is sign-extended to 64 bits */
        if (v < (1ULL << 31) || v >= 0xFFFFFFFF80000000ULL) return PyLong_FromLongLong((long long)(int64_t)v);
        return DECLINE;
    case K_UINT32:
        return v < (1ULL << 32) ? PyLong_FromUnsignedLongLong(v) : DECLINE;
    case K_BOOL:
        return v < 2 ? PyBool_FromLong((long)v) : DECLINE;
    case K_SINT64:
        return PyLong_FromLongLong((long long)((v >> 1) ^ (~(v & 1) + 1)));
    case K_SINT32:
        return v < (1ULL << 32) ? PyLong_FromLongLong((long long)((v >> 1) ^ (~(v & 1) + 1))) : DECLINE;
    }
    return DECLINE;
}

/* A message's fields as read, by field number (new references; NULL: absent), and the number of
 * the oneof member set (0: none). Reading into an array, not a dict, is what makes node_fields
 * cheap: a dict per message and per attribute, and the hashing of every name, were most of its
 * ~20k instructions per node. */
typedef struct {
    PyObject *v[MAX_FIELD + 1]; /* read only where ``set`` has the field's bit */
    uint64_t set;               /* bit n-1: field n has a value */
    int oneof;
} slots_t;

#define SLOTS_INIT(sl) ((sl).set = 0, (sl).oneof = 0)
#define HAS(sl, n) (((sl)->set >> ((n) - 1)) & 1)
#define GOT(sl, n) ((n) && HAS(sl, n) ? (sl)->v[n] : NULL)

static void slots_clear(slots_t *sl) {
    for (uint64_t m = sl->set; m; m &= m - 1) Py_DECREF(sl->v[__builtin_ctzll(m) + 1]);
    sl->set = 0;
}

/* set field n to value (a new reference, replacing any before it) */
static void slot_set(slots_t *sl, int n, PyObject *value) {
    if (HAS(sl, n)) Py_DECREF(sl->v[n]);
    sl->v[n] = value;
    sl->set |= 1ULL << (n - 1);
}

static PyObject *decode_message(const uint8_t *buf, Py_ssize_t pos, Py_ssize_t end, spec *s, int light);
static PyObject *read_attr(const uint8_t *buf, Py_ssize_t pos, Py_ssize_t end, spec *s);

/* the list behind a repeated field, created on first use (a borrowed reference) */
static PyObject *slot_list(slots_t *sl, int num) {
    if (HAS(sl, num)) return sl->v[num];
    PyObject *lst = PyList_New(0);
    if (lst) slot_set(sl, num, lst);
    return lst;
}

/* 1 read, 0 decline, -1 error (the slots then hold what was read so far: the caller clears them).
 * A message field's value is decode_message's (light or an instance), except field ``attr_num``
 * (Node.attr in node_fields): read_attr's (name, (member, value)). */
static int read_slots(const uint8_t *buf, Py_ssize_t pos, Py_ssize_t end, spec *s, int light, slots_t *sl,
                      int attr_num) {
    while (pos < end) {
        uint64_t tag;
        if (buf[pos] < 0x80) {
            tag = buf[pos++];
        } else if (!read_varint(buf, &pos, end, &tag)) {
            return 0;
        }
        uint64_t num = tag >> 3;
        if (num > MAX_FIELD || !s->fields[num].name) return 0; /* unknown to et_def.proto */
        field *f = &s->fields[num];
        int wire = (int)(tag & 7);
        PyObject *value;
        if (wire == LEN) {
            uint64_t size;
            if (!read_varint(buf, &pos, end, &size) || size > (uint64_t)(end - pos)) return 0;
            Py_ssize_t stop = pos + (Py_ssize_t)size;
            if (f->kind == K_STRING) {
                value = PyUnicode_DecodeUTF8((const char *)buf + pos, stop - pos, NULL); /* strict */
                if (!value) {
                    if (!PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) return -1;
                    PyErr_Clear();
                    return 0;
                }
            } else if (f->kind == K_BYTES) {
                value = PyBytes_FromStringAndSize((const char *)buf + pos, stop - pos);
                if (!value) return -1;
            } else if (f->kind == K_MESSAGE) {
                value = (int)num == attr_num ? read_attr(buf, pos, stop, f->sub)
                                             : decode_message(buf, pos, stop, f->sub, light);
                if (!value) return -1;
                if (value == Py_None) {
                    Py_DECREF(value);
                    return 0;
                }
            } else if (f->repeated) { /* packed scalars */
                PyObject *lst = slot_list(sl, (int)num);
                if (!lst) return -1;
                while (pos < stop) {
                    PyObject *v = read_scalar(buf, &pos, stop, f->kind);
                    if (v == DECLINE) return 0;
                    if (!v) return -1;
                    int rc = PyList_Append(lst, v);
                    Py_DECREF(v);
                    if (rc < 0) return -1;
                }
                continue;
            } else {
                return 0;
            }
            pos = stop;
        } else if (f->kind != K_MESSAGE && f->kind != K_STRING && f->kind != K_BYTES && wire == wire_of(f->kind)) {
            value = read_scalar(buf, &pos, end, f->kind);
            if (value == DECLINE) return 0;
            if (!value) return -1;
        } else {
            return 0;
        }
        if (f->repeated) {
            PyObject *lst = slot_list(sl, (int)num);
            int rc = lst ? PyList_Append(lst, value) : -1;
            Py_DECREF(value);
            if (rc < 0) return -1;
            continue;
        }
        if (f->kind == K_MESSAGE && HAS(sl, num)) { /* protobuf merges the two (or an error) */
            Py_DECREF(value);
            return 0;
        }
        if (f->oneof) {
            if (sl->oneof && sl->oneof != (int)num) { /* protobuf keeps the last member */
                Py_DECREF(value);
                return 0;
            }
            sl->oneof = (int)num;
        }
        slot_set(sl, (int)num, value);
    }
    return 1;
}

/* light: each message a plain dict of what the class's instance would hold in its __dict__ (no
 * instance); the same reads and the same declines */
static PyObject *decode_message(const uint8_t *buf, Py_ssize_t pos, Py_ssize_t end, spec *s, int light) {
    slots_t sl;
    SLOTS_INIT(sl);
    int rc = read_slots(buf, pos, end, s, light, &sl, -1);
    if (rc <= 0) {
        slots_clear(&sl);
        if (rc < 0) return NULL;
        Py_RETURN_NONE;
    }
    PyObject *msg = light ? PyDict_New() : PyObject_CallNoArgs(s->cls);
    PyObject *d = !msg ? NULL : light ? Py_NewRef(msg) : PyObject_GenericGetDict(msg, NULL);
    if (!d) goto error;
    if (sl.oneof && PyDict_SetItem(d, str_oneof, s->fields[sl.oneof].name) < 0) goto error;
    for (int i = 1; i <= MAX_FIELD; i++)
        if (HAS(&sl, i) && PyDict_SetItem(d, s->fields[i].name, sl.v[i]) < 0) goto error;
    slots_clear(&sl);
    Py_DECREF(d);
    return msg;
error:
    slots_clear(&sl);
    Py_XDECREF(d);
    Py_XDECREF(msg);
    return NULL;
}

/* (data, cls) read as decode_message reads it; `call` names the caller in the error */
static PyObject *decode_args(PyObject *const *args, Py_ssize_t nargs, int light, const char *call) {
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "%s takes 2 arguments", call);
        return NULL;
    }
    spec *s = get_spec(args[1]);
    if (!s) return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) return NULL;
    PyObject *r = decode_message(view.buf, 0, view.len, s, light);
    PyBuffer_Release(&view);
    return r;
}

static PyObject *wire_decode(PyObject *Py_UNUSED(self), PyObject *const *args, Py_ssize_t nargs) {
    return decode_args(args, nargs, 0, "decode(data, cls)");
}


/* d[key] as a new reference, else dflt */
static PyObject *get_or(PyObject *d, PyObject *key, PyObject *dflt) {
    PyObject *v = PyDict_GetItemWithError(d, key);
    if (v) return Py_NewRef(v);
    return PyErr_Occurred() ? NULL : Py_NewRef(dflt);
}

/* a repeated field's values as a tuple (absent: empty) */
static PyObject *get_tuple(PyObject *d, PyObject *key) {
    PyObject *v = PyDict_GetItemWithError(d, key);
    if (!v) return PyErr_Occurred() ? NULL : PyTuple_New(0);
    return PyList_AsTuple(v);
}

/* An attribute's name as the str already made for that name, where one was: a workload repeats
 * a dozen names (comm_size, is_cpu_op, ...) on every node, and a str kept keeps its hash, so the
 * attributes' dict need not hash each name again. Borrowed: the new one is released by its slot. */
#define KNOWN_NAMES 32
static PyObject *known_names[KNOWN_NAMES];
static int known_count = 0;

static PyObject *known_name(PyObject *name) {
    Py_ssize_t len;
    const char *text = PyUnicode_AsUTF8AndSize(name, &len);
    if (!text) {
        PyErr_Clear();
        return name;
    }
    for (int i = 0; i < known_count; i++) {
        Py_ssize_t klen;
        const char *ktext = PyUnicode_AsUTF8AndSize(known_names[i], &klen);
        if (klen == len && memcmp(ktext, text, (size_t)len) == 0) return known_names[i];
    }
    if (known_count < KNOWN_NAMES) known_names[known_count++] = Py_NewRef(name);
    return name;
}

/* one AttributeProto as node_fields reads it: (name, (oneof member or None, value)), a list
 * member's value the tuple of its values; None where wire declines */
static PyObject *read_attr(const uint8_t *buf, Py_ssize_t pos, Py_ssize_t end, spec *s) {
    slots_t sl;
    SLOTS_INIT(sl);
    int rc = read_slots(buf, pos, end, s, 1, &sl, -1);
    PyObject *out = NULL;
    if (rc <= 0) {
        slots_clear(&sl);
        if (rc < 0) return NULL;
        Py_RETURN_NONE;
    }
    PyObject *name = GOT(&sl, s->named[N_NAME]), *pair;
    name = name ? known_name(name) : str_empty;
    if (!sl.oneof) {
        pair = PyTuple_Pack(2, Py_None, Py_None);
    } else {
        field *f = &s->fields[sl.oneof];
        PyObject *v = sl.v[sl.oneof];
        if (f->kind == K_MESSAGE) { /* a list member: its message's values */
            PyObject *t = get_tuple(v, str_values);
            pair = t ? PyTuple_Pack(2, f->name, t) : NULL;
            Py_XDECREF(t);
        } else {
            pair = PyTuple_Pack(2, f->name, v);
        }
    }
    if (pair) {
        out = PyTuple_Pack(2, name, pair);
        Py_DECREF(pair);
    }
    slots_clear(&sl);
    return out;
}

/* a repeated field's values as a tuple (absent: empty), from its slot */
static PyObject *slot_tuple(PyObject *lst) {
    return lst ? PyList_AsTuple(lst) : PyTuple_New(0);
}

/* node_fields(data, Node): wire.node_fields in C, read into slots (no dict per message) */
static PyObject *wire_node_fields(PyObject *Py_UNUSED(self), PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "node_fields(data, Node) takes 2 arguments");
        return NULL;
    }
    spec *s = get_spec(args[1]);
    if (!s) return NULL;
    int attr_num = s->named[N_ATTR];
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) return NULL;
    slots_t sl;
    SLOTS_INIT(sl);
    int rc = read_slots(view.buf, 0, view.len, s, 1, &sl, attr_num ? attr_num : -1);
    PyBuffer_Release(&view);
    PyObject *out = NULL, *attrs;
    if (rc <= 0) {
        slots_clear(&sl);
        if (rc < 0) return NULL;
        Py_RETURN_NONE;
    }
    out = PyTuple_New(8);
    if (!out) goto error;
    for (int i = 0; i < 7; i++) { /* N_ID .. N_INPUTS */
        PyObject *got = GOT(&sl, s->named[i]), *v;
        switch (i) {
        case 1: v = Py_NewRef(got ? got : str_empty); break;
        case 3: case 4: v = slot_tuple(got); break;
        case 6: v = got ? get_or(got, str_values, str_empty) : Py_NewRef(Py_None); break;
        default: v = Py_NewRef(got ? got : zero);
        }
        if (!v) goto error;
        PyTuple_SET_ITEM(out, i, v);
    }
    attrs = PyDict_New();
    if (!attrs) goto error;
    PyObject *lst = GOT(&sl, attr_num);
    for (Py_ssize_t i = 0; lst && i < PyList_GET_SIZE(lst); i++) {
        PyObject *a = PyList_GET_ITEM(lst, i); /* (name, pair) */
        if (PyDict_SetDefault(attrs, PyTuple_GET_ITEM(a, 0), PyTuple_GET_ITEM(a, 1)) == NULL) {
            Py_DECREF(attrs);
            goto error;
        }
    }
    PyTuple_SET_ITEM(out, 7, attrs);
    slots_clear(&sl);
    return out;
error:
    slots_clear(&sl);
    Py_XDECREF(out);
    return NULL;
}

/* split_frames(raw[, like]): ET framing (each message after a varint of its length, as
 * io.split_et_bytes reads it) as ([message bytes], [offset of its length prefix]); None where the
 * framing is not well formed (a length past the end, a prefix over 5 bytes), for split_et_bytes
 * to name. ``like``: another file's node messages (its list without the metadata); where node k
 * of this file has the same bytes as its node k, the list holds that very object: the ranks of a
 * layout repeat most nodes in place, and an object already hashed costs its readers no hash. */
static PyObject *wire_split_frames(PyObject *Py_UNUSED(self), PyObject *const *args, Py_ssize_t nargs) {
    PyObject *raw = nargs >= 1 ? args[0] : NULL, *like = nargs == 2 && args[1] != Py_None ? args[1] : NULL;
    if (nargs < 1 || nargs > 2 || !PyBytes_Check(raw) || (like && !PyList_Check(like))) {
        PyErr_SetString(PyExc_TypeError, "split_frames(raw: bytes, like: list | None = None)");
        return NULL;
    }
    const uint8_t *buf = (const uint8_t *)PyBytes_AS_STRING(raw);
    Py_ssize_t n = PyBytes_GET_SIZE(raw), pos = 0;
    PyObject *frames = PyList_New(0), *starts = PyList_New(0);
    if (!frames || !starts) goto error;
    while (pos < n) {
        Py_ssize_t start = pos;
        uint64_t size = 0;
        int shift = 0;
        for (;;) {
            if (pos >= n) goto decline;
            uint8_t b = buf[pos++];
            size |= (uint64_t)(b & 0x7F) << shift;
            if (!(b & 0x80)) break;
            shift += 7;
            if (pos - start >= 5) goto decline; /* longer than a 32-bit varint */
        }
        if (size > (uint64_t)(n - pos)) goto decline;
        Py_ssize_t k = PyList_GET_SIZE(frames) - 1; /* this node's place in like: frame 0 is the metadata */
        PyObject *same = like && k >= 0 && k < PyList_GET_SIZE(like) ? PyList_GET_ITEM(like, k) : NULL;
        PyObject *f = same && PyBytes_CheckExact(same) && PyBytes_GET_SIZE(same) == (Py_ssize_t)size &&
                              !memcmp(PyBytes_AS_STRING(same), buf + pos, (size_t)size)
                          ? Py_NewRef(same)
                          : PyBytes_FromStringAndSize((const char *)buf + pos, (Py_ssize_t)size);
        if (!f) goto error;
        int rc = PyList_Append(frames, f);
        Py_DECREF(f);
        if (rc < 0) goto error;
        PyObject *at = PyLong_FromSsize_t(start);
        if (!at) goto error;
        rc = PyList_Append(starts, at);
        Py_DECREF(at);
        if (rc < 0) goto error;
        pos += (Py_ssize_t)size;
    }
    PyObject *out = PyTuple_Pack(2, frames, starts);
    Py_DECREF(frames);
    Py_DECREF(starts);
    return out;
decline:
    Py_DECREF(frames);
    Py_DECREF(starts);
    Py_RETURN_NONE;
error:
    Py_XDECREF(frames);
    Py_XDECREF(starts);
    return NULL;
}

static PyMethodDef methods[] = {
    {"decode", (PyCFunction)(void (*)(void))wire_decode, METH_FASTCALL,
     "decode(data, cls): cls read from data as wire.decode reads it, or None where wire declines"},
    {"split_frames", (PyCFunction)(void (*)(void))wire_split_frames, METH_FASTCALL,
     "split_frames(raw, like=None): ([message], [offset]) of ET framing, or None where it is not well formed; "
     "a message equal to like's at its place is like's object"},
    {"node_fields", (PyCFunction)(void (*)(void))wire_node_fields, METH_FASTCALL,
     "node_fields(data, Node): wire.node_fields_python(data), or None where wire declines (chakra_proto.io.read_node_fields)"},
    {NULL, NULL, 0, NULL},
};

#ifndef DTSIM_SOURCE_CHECKSUM
#define DTSIM_SOURCE_CHECKSUM "unknown"
#endif

static int exec_module(PyObject *m) {
    specs = PyDict_New();
    str_oneof = PyUnicode_InternFromString("_oneof");
    str_FIELDS = PyUnicode_InternFromString("FIELDS");
    str_ONEOF = PyUnicode_InternFromString("ONEOF");
    if (!specs || !str_oneof || !str_FIELDS || !str_ONEOF) return -1;
    if (!(str_id = PyUnicode_InternFromString("id")) || !(str_name = PyUnicode_InternFromString("name")) ||
        !(str_type = PyUnicode_InternFromString("type")) || !(str_ctrl_deps = PyUnicode_InternFromString("ctrl_deps")) ||
        !(str_data_deps = PyUnicode_InternFromString("data_deps")) ||
        !(str_duration_micros = PyUnicode_InternFromString("duration_micros")) ||
        !(str_inputs = PyUnicode_InternFromString("inputs")) || !(str_values = PyUnicode_InternFromString("values")) ||
        !(str_attr = PyUnicode_InternFromString("attr")) || !(str_empty = PyUnicode_InternFromString("")) ||
        !(zero = PyLong_FromLong(0)))
        return -1;
    if (PyModule_AddObjectRef(m, "_specs", specs) < 0) return -1;
    return PyModule_AddStringConstant(m, "SOURCE_CHECKSUM", DTSIM_SOURCE_CHECKSUM);
}

static PyModuleDef_Slot slots[] = {{Py_mod_exec, exec_module}, {0, NULL}};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_wire_core", "chakra_proto/wire.py's decoder in C", 0, methods, slots,
};

PyMODINIT_FUNC PyInit__wire_core(void) { return PyModuleDef_Init(&module); }
