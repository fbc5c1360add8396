/* system/_ring_recurrence.c: the batched phases' recurrences on the congestion-unaware network
 * (system/shortcuts/ring_batch.py, system/shortcuts/phase_batch.py), functions of system._sys_core */
#ifndef DTSIM_RING_RECURRENCE_H
#define DTSIM_RING_RECURRENCE_H
#include <Python.h>
#include <stdint.h>

/* ring_recurrence(starts, pred, delays, endpoint, extra, steps) -> list[int] | None */
PyObject *dtsim_ring_recurrence(PyObject *module, PyObject *const *args, Py_ssize_t nargs);

/* partner_recurrence(starts, partners, delays, extra, steps) -> list[int] | None (phase_batch.py),
 * and its arrays' form: t holds the starts and gets the last receives, r is scratch; 1: past int64 */
int dtsim_partner_run(const int64_t *partners, const int64_t *delays, const int64_t *extra, Py_ssize_t n,
                      Py_ssize_t steps, Py_ssize_t rows, int64_t *t, int64_t *r);
PyObject *dtsim_partner_recurrence(PyObject *module, PyObject *const *args, Py_ssize_t nargs);

#endif
