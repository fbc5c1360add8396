"""system.main.exit_process: the CLI's exit skips the interpreter's teardown, and nothing a user
can see changes: the exit code, what was printed, atexit handlers. Where something expects the
teardown (a profiler, a tracer, a running thread) it is sys.exit."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# an object whose __del__ runs only in the teardown: it shows which exit ran
_PROGRAM = """
import atexit, os, sys, system.main as m
class Witness:
    def __del__(self, write=os.write):  # the fd itself: sys.stdout may be gone by then
        write(1, b" teardown")
witness = Witness()
atexit.register(lambda: sys.stdout.write(" atexit"))
{setup}
sys.stdout.write("printed")
sys.stderr.write("warned")
m.exit_process(3)
"""


def _run(setup: str = "") -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", _PROGRAM.format(setup=setup)], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)


def test_the_fast_exit_keeps_code_output_and_atexit_and_skips_the_teardown() -> None:
    r = _run()
    assert (r.returncode, r.stdout, r.stderr) == (3, "printed atexit", "warned")


def test_a_profiler_or_tracer_gets_the_whole_teardown() -> None:
    for setup in ("sys.setprofile(lambda *a: None)", "sys.settrace(lambda *a: None)"):
        r = _run(setup)
        assert (r.returncode, r.stdout, r.stderr) == (3, "printed atexit teardown", "warned"), setup


def test_a_running_thread_is_waited_for() -> None:
    setup = ("import threading, time\n"
             "threading.Thread(target=lambda: (time.sleep(0.3), sys.stdout.write(' thread'))).start()")
    r = _run(setup)
    assert r.returncode == 3
    assert r.stdout.startswith("printed thread atexit"), r.stdout


def test_the_cli_exits_with_its_code_and_whole_output(tmp_path: Path) -> None:
    ex = ROOT / "examples"
    report = tmp_path / "r.json"
    files = ["--network", str(ex / "network/Ring_8npus.yml"), "--system", str(ex / "system/Ring_4chunks.json")]
    r = subprocess.run([sys.executable, "-m", "system.main", "--workload",
                        str(ex / "workload/all_reduce_8npus_1MB/all_reduce"), *files, "--report", str(report)],
                       cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("finished, 64440 cycles") == 8 and r.stdout.rstrip().endswith("wall")
    assert '"end_cycles": 64440' in report.read_text()
    bad = subprocess.run([sys.executable, "-m", "system.main", "--workload", "nowhere", *files],
                         cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and bad.stderr.startswith("error: ")


def test_the_command_line_process_runs_without_the_cyclic_collector_and_importers_keep_it() -> None:
    """The CLI ends with os._exit, so its collector stays off from the first line (a collection
    after the run would traverse the whole heap); a program that imports system.main keeps its own."""
    example = ROOT / "examples"
    watch = ("import atexit, gc, runpy, sys\n"
             "atexit.register(lambda: sys.stderr.write(f'collector on: {{gc.isenabled()}}'))\n"
             "sys.argv = ['dtsim'] + sys.argv[1:]\n{how}\n")
    args = ["--workload", str(example / "workload/all_reduce_8npus_1MB/all_reduce"),
            "--network", str(example / "network/Ring_8npus.yml"),
            "--system", str(example / "system/Ring_4chunks.json"), "-q"]
    for how in ("runpy.run_module('system.main', run_name='__main__')",
                "import system.main as m; m.console_main()"):
        r = subprocess.run([sys.executable, "-c", watch.format(how=how), *args], cwd=ROOT, capture_output=True,
                           text=True, timeout=60)
        assert (r.returncode, r.stderr) == (0, "collector on: False"), (how, r.stderr)
    r = subprocess.run([sys.executable, "-c", "import gc, system.main; print(gc.isenabled())"], cwd=ROOT,
                       capture_output=True, text=True, timeout=60)
    assert r.stdout.strip() == "True", r.stderr
