"""``python -m workload.collect.script_runner train.py ARGS``: run a script as ``python train.py ARGS`` does,
then leave without the interpreter's teardown.

``workload.collect run`` starts a ``.py`` command through this module. Once the script has returned and its
exit handlers have run, every trace is written and closed; what is left is the teardown of torch's C++ state,
where gloo's and the profiler's threads can abort a finished process (``terminate called without an active
exception``, a failed ``pthread_mutex_lock`` assertion) and turn a complete collection into a failed one.
The exit status is the script's own: 0, its ``sys.exit`` code, or 1 after an uncaught exception.
"""
from __future__ import annotations

import atexit
import os
import runpy
import sys
import threading


def _exit_status(exc: SystemExit) -> int:
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)               # sys.exit("message"): Python prints it and exits 1
    return 1


def _report(exc: BaseException) -> None:
    """The traceback Python would print: the script's frames, not this module's or runpy's."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename in (__file__, "<frozen runpy>", runpy.__file__):
        tb = tb.tb_next
    sys.excepthook(type(exc), exc.with_traceback(tb), tb)


def run(argv: list[str]) -> int:
    if not argv:
        print("usage: python -m workload.collect.script_runner SCRIPT [ARGS...]", file=sys.stderr)
        return 2
    script = argv[0]
    if not os.path.isfile(script):             # Python's own words and status for a missing script
        print(f"{sys.executable}: can't open file {os.path.abspath(script)!r}: [Errno 2] No such file or "
              "directory", file=sys.stderr)
        return 2
    sys.argv = list(argv)
    sys.path[0] = os.path.dirname(os.path.abspath(script))     # as `python script.py` puts it
    try:
        runpy.run_path(script, run_name="__main__")
        status = 0
    except SystemExit as exc:
        status = _exit_status(exc)
    except KeyboardInterrupt as exc:
        _report(exc)
        status = 130
    except BaseException as exc:               # the script's error: reported as Python would, exit 1
        _report(exc)
        status = 1
    # what Python's own shutdown does before it tears modules down: join non-daemon threads, run exit handlers
    shutdown = getattr(threading, "_shutdown", None)
    if shutdown is not None:
        shutdown()
    atexit._run_exitfuncs()
    return status


def main() -> None:
    status = run(sys.argv[1:])
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:                      # a closed or broken pipe: nothing more can be said on it
            pass
    os._exit(status)


if __name__ == "__main__":
    main()
