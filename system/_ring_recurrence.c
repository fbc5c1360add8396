/* ring_batch.py's _recurrence_np / _recurrence_py in C, on int64: a batched ring phase of n ranks
 * and ``steps`` messages on the congestion-unaware network, where rank i's k-th receive completes at
 * max(its predecessor's k-th send + the flow's delay, its own k-th send) and its next send follows
 * ``extra[k + 1]`` later. Each rank's last receive time, or None where some time would leave int64
 * (ring_batch.py then runs Python's integers, which end the run by the 64-bit clock as the event
 * path does). With one delay on every flow, once every receive of a step waits for its message
 * the rest is a rotation (ring_batch._rotate), taken here too. It answers what numpy answered
 * without importing it: numpy's import is 14 MB of a run's peak memory and 0.07-0.2 s. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_ring_recurrence.h"

/* a list of n int64s; 1 done, 0 a value outside int64 (decline), -1 error */
static int read_ints(PyObject *seq, Py_ssize_t n, int64_t *out, const char *what) {
    if (!PyList_Check(seq) || PyList_GET_SIZE(seq) != n) {
        PyErr_Format(PyExc_TypeError, "ring_recurrence: %s must be a list of %zd ints", what, n);
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        int overflow = 0;
        long long v = PyLong_AsLongLongAndOverflow(PyList_GET_ITEM(seq, i), &overflow);
        if (v == -1 && PyErr_Occurred()) return -1;
        if (overflow) return 0;
        out[i] = v;
    }
    return 1;
}

/* the n values as a list of Python ints (NULL with an exception) */
static PyObject *int_list(const int64_t *t, Py_ssize_t n) {
    PyObject *out = PyList_New(n);
    for (Py_ssize_t i = 0; out && i < n; i++) {
        PyObject *v = PyLong_FromLongLong(t[i]);
        if (!v) Py_CLEAR(out);
        else PyList_SET_ITEM(out, i, v);
    }
    return out;
}

PyObject *dtsim_ring_recurrence(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 6 || !PyList_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "ring_recurrence(starts, pred, delays, endpoint, extra, steps)");
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(args[0]);
    Py_ssize_t steps = PyLong_AsSsize_t(args[5]);
    if (steps == -1 && PyErr_Occurred()) return NULL;
    if (n < 1 || steps < 0 || !PyList_Check(args[4]) || PyList_GET_SIZE(args[4]) < steps + 1) {
        PyErr_SetString(PyExc_ValueError, "ring_recurrence: no ranks, negative steps, or extra shorter than steps + 1");
        return NULL;
    }
    int overflow = 0;
    long long endpoint = PyLong_AsLongLongAndOverflow(args[3], &overflow);
    if (endpoint == -1 && PyErr_Occurred()) return NULL;
    if (overflow) Py_RETURN_NONE;
    Py_ssize_t n_extra = PyList_GET_SIZE(args[4]);
    int64_t *t = PyMem_Malloc(sizeof(int64_t) * (size_t)(3 * n + n_extra)), *a = t + n, *d = a + n, *extra = d + n;
    Py_ssize_t *pred = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)n);
    PyObject *result = NULL;
    if (!t || !pred) {
        PyErr_NoMemory();
        goto done;
    }
    int rc = read_ints(args[0], n, t, "starts");
    if (rc == 1) rc = read_ints(args[2], n, d, "delays");
    if (rc == 1) rc = read_ints(args[4], n_extra, extra, "extra");
    if (rc < 0) goto done;
    if (rc == 0) goto decline;
    if (!PyList_Check(args[1]) || PyList_GET_SIZE(args[1]) != n) {
        PyErr_Format(PyExc_TypeError, "ring_recurrence: pred must be a list of %zd ints", n);
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t p = PyLong_AsSsize_t(PyList_GET_ITEM(args[1], i));
        if (p == -1 && PyErr_Occurred()) goto done;
        if (p < 0 || p >= n) {
            PyErr_SetString(PyExc_ValueError, "ring_recurrence: a predecessor outside the ring");
            goto done;
        }
        pred[i] = p;
    }
    int uniform = 1; /* one delay on every flow, and the ring a rotation: _rotate applies */
    for (Py_ssize_t i = 0; i < n; i++) {
        if (__builtin_add_overflow(t[i], (int64_t)endpoint, &t[i])) goto decline;
        uniform &= d[i] == d[0] && pred[i] == (i + pred[0]) % n;
    }
    for (Py_ssize_t k = 1; k <= steps; k++) {
        int all_wait = uniform;
        for (Py_ssize_t i = 0; i < n; i++) {
            if (__builtin_add_overflow(t[pred[i]], d[i], &a[i])) goto decline;
            all_wait &= a[i] >= t[i];
        }
        if (all_wait) { /* ring_batch._rotate: each rank its (steps - k + 1)-th predecessor's time */
            int64_t hops = steps - k + 1, add, term;
            if (__builtin_mul_overflow(hops, d[0], &add)) goto decline;
            for (Py_ssize_t j = k + 1; j <= steps; j++)
                if (__builtin_add_overflow(add, extra[j], &add)) goto decline;
            Py_ssize_t shift = (Py_ssize_t)(((int64_t)pred[0] * (hops % n)) % n);
            result = PyList_New(n);
            if (!result) goto done;
            for (Py_ssize_t i = 0; i < n; i++) {
                if (__builtin_add_overflow(t[(i + shift) % n], add, &term)) {
                    Py_CLEAR(result);
                    goto decline;
                }
                PyObject *v = PyLong_FromLongLong(term);
                if (!v) {
                    Py_CLEAR(result);
                    goto done;
                }
                PyList_SET_ITEM(result, i, v);
            }
            goto done;
        }
        int64_t e = k < steps ? extra[k + 1] : 0;
        for (Py_ssize_t i = 0; i < n; i++) {
            int64_t m = a[i] > t[i] ? a[i] : t[i];
            if (__builtin_add_overflow(m, e, &t[i])) goto decline;
        }
    }
    result = int_list(t, n);
    goto done;
decline:
    result = Py_NewRef(Py_None);
done:
    PyMem_Free(t);
    PyMem_Free(pred);
    return result;
}

/* The partner recurrence on arrays: t holds each rank's start and gets its last receive; r is n
 * cells of scratch; partners and delays hold ``rows`` rows of n, one per step (rows == steps) or
 * one for every step (rows == 1, a ring). 0 done, 1 a time past int64. */
int dtsim_partner_run(const int64_t *partners, const int64_t *delays, const int64_t *extra, Py_ssize_t n,
                      Py_ssize_t steps, Py_ssize_t rows, int64_t *t, int64_t *r) {
    /* a ring (one row) whose predecessors are a rotation and whose flows share one delay: once every
     * receive of a step waits for its message, the rest is a rotation (ring_batch._rotate) */
    int rotation = rows == 1;
    for (Py_ssize_t i = 0; i < n && rotation; i++)
        rotation = delays[i] == delays[0] && partners[i] == (i + partners[0]) % n;
    for (Py_ssize_t i = 0; i < n; i++)
        if (__builtin_add_overflow(t[i], extra[0], &t[i])) return 1;
    for (Py_ssize_t j = 0; j < steps; j++) {
        Py_ssize_t row = rows == 1 ? 0 : j * n;
        const int64_t *pj = partners + row, *dj = delays + row;
        int all_wait = rotation;
        for (Py_ssize_t i = 0; i < n; i++) {
            int64_t a;
            if (__builtin_add_overflow(t[pj[i]], dj[i], &a)) return 1;
            all_wait &= a >= t[i];
            r[i] = a > t[i] ? a : t[i];
        }
        if (all_wait) { /* rank i's last receive: its (steps - j)-th predecessor's send j, plus the rest */
            int64_t hops = steps - j, add;
            if (__builtin_mul_overflow(hops, delays[0], &add)) return 1;
            for (Py_ssize_t k = j + 1; k < steps; k++)
                if (__builtin_add_overflow(add, extra[k], &add)) return 1;
            Py_ssize_t shift = (Py_ssize_t)(((int64_t)partners[0] * (hops % n)) % n);
            for (Py_ssize_t i = 0; i < n; i++)
                if (__builtin_add_overflow(t[(i + shift) % n], add, &r[i])) return 1;
            memcpy(t, r, sizeof(int64_t) * (size_t)n);
            return 0;
        }
        int64_t e = j + 1 < steps ? extra[j + 1] : 0;
        for (Py_ssize_t i = 0; i < n; i++)
            if (__builtin_add_overflow(r[i], e, &t[i])) return 1;
    }
    return 0;
}

/* partner_recurrence(starts, partners, delays, extra, steps): system/shortcuts/phase_batch.py's
 * phase, the ring recurrence above with a partner per rank and step: rank i's j-th receive
 * completes at max(its partner's j-th send + the flow's delay, its own j-th send), its first send
 * is ``extra[0]`` after its start and its next one ``extra[j + 1]`` after its j-th receive.
 * ``partners`` and ``delays`` hold one row of n per step, or one row for every step. Each rank's
 * last receive time, or None where some time would leave int64. The batcher runs
 * dtsim_partner_run on its plans directly; this is its form for Python (the tests hold it to the
 * step-by-step recurrence). */
PyObject *dtsim_partner_recurrence(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 5 || !PyList_Check(args[0]) || !PyList_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "partner_recurrence(starts, partners, delays, extra, steps)");
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(args[0]);
    Py_ssize_t steps = PyLong_AsSsize_t(args[4]);
    if (steps == -1 && PyErr_Occurred()) return NULL;
    if (n < 1 || steps < 0 || steps > PY_SSIZE_T_MAX / n / 4) {
        PyErr_SetString(PyExc_ValueError, "partner_recurrence: no ranks, or a negative or huge number of steps");
        return NULL;
    }
    Py_ssize_t cells = PyList_GET_SIZE(args[1]), rows = cells / n;
    if (cells % n || (rows != 1 && rows != steps)) {
        PyErr_Format(PyExc_TypeError, "partner_recurrence: partners must hold 1 or %zd rows of %zd", steps, n);
        return NULL;
    }
    int64_t *t = PyMem_Malloc(sizeof(int64_t) * (size_t)(2 * n + 2 * cells + steps + 1));
    int64_t *r = t ? t + n : NULL, *d = t ? r + n : NULL, *p = t ? d + cells : NULL, *extra = t ? p + cells : NULL;
    PyObject *result = NULL;
    if (!t) {
        PyErr_NoMemory();
        goto done;
    }
    int rc = read_ints(args[0], n, t, "starts");
    if (rc == 1) rc = read_ints(args[2], cells, d, "delays");
    if (rc == 1) rc = read_ints(args[3], steps + 1, extra, "extra");
    if (rc < 0) goto done;
    if (rc == 0) goto decline;
    for (Py_ssize_t c = 0; c < cells; c++) {
        Py_ssize_t q = PyLong_AsSsize_t(PyList_GET_ITEM(args[1], c));
        if (q == -1 && PyErr_Occurred()) goto done;
        if (q < 0 || q >= n) {
            PyErr_SetString(PyExc_ValueError, "partner_recurrence: a partner outside the ring");
            goto done;
        }
        p[c] = q;
    }
    if (dtsim_partner_run(p, d, extra, n, steps, rows, t, r)) goto decline;
    result = int_list(t, n);
    goto done;
decline:
    result = Py_NewRef(Py_None);
done:
    PyMem_Free(t);
    return result;
}
