/* system/_feeder.c: the workload's feeder in C, a type of system._sys_core */
#ifndef DTSIM_FEEDER_H
#define DTSIM_FEEDER_H
#include <Python.h>

/* adds the Feeder type to the module; -1 with an exception set */
int dtsim_add_feeder(PyObject *module);

/* system/_sys_core.c: Sys.register_event(delay, cb, arg) on a SysFast (the feeder's compute
 * replay); -1 with an exception, also where ``sysfast`` is not one */
int dtsim_sys_register1(PyObject *sysfast, long long delay, PyObject *cb, PyObject *arg);

#endif
