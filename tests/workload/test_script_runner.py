"""workload.collect.script_runner runs a script as `python script.py` does, without the interpreter's teardown."""
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import atexit, os, sys, threading, time

class AbortsInTeardown:                        # what torch's gloo and profiler threads can do at exit
    def __del__(self):
        os.abort()

keep = AbortsInTeardown()
atexit.register(lambda: print("exit handler ran", flush=True))

def late():
    time.sleep(0.2)
    print("thread finished", flush=True)

threading.Thread(target=late).start()
print(__name__, sys.argv[1:], sys.path[0] == os.path.dirname(os.path.abspath(__file__)), flush=True)
arg = sys.argv[1] if len(sys.argv) > 1 else ""
if arg == "raise":
    raise ValueError("boom")
if arg == "message":
    sys.exit("a message")
if arg:
    sys.exit(int(arg))
"""


def _run(args: list[str], tmp_path: Path, runner: bool = True) -> subprocess.CompletedProcess:
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    prefix = [sys.executable, "-m", "workload.collect.script_runner"] if runner else [sys.executable]
    return subprocess.run([*prefix, str(script), *args], capture_output=True, text=True, cwd=ROOT, timeout=60)


def test_plain_python_aborts_in_teardown(tmp_path) -> None:
    # the premise: the script's teardown aborts a finished process when Python tears it down itself
    r = _run([], tmp_path, runner=False)
    assert r.returncode != 0 and "exit handler ran" in r.stdout


@pytest.mark.parametrize("arg, status", [("", 0), ("3", 3), ("raise", 1), ("message", 1), ("300", 300 & 0xFF)])
def test_status_threads_and_exit_handlers_as_python(tmp_path, arg, status) -> None:
    r = _run([arg] if arg else [], tmp_path)
    assert r.returncode == status, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == f"__main__ {[arg] if arg else []} True"
    # non-daemon threads are joined before the exit handlers run, as Python's shutdown does
    assert lines[1:] == ["thread finished", "exit handler ran"]
    if arg == "raise":
        assert r.stderr.startswith("Traceback (most recent call last):\n  File ") and "train.py" in r.stderr
        assert "script_runner" not in r.stderr and "runpy" not in r.stderr and "ValueError: boom" in r.stderr
    if arg == "message":
        assert r.stderr.strip() == "a message"


def test_missing_script_is_pythons_error(tmp_path) -> None:
    r = subprocess.run([sys.executable, "-m", "workload.collect.script_runner", str(tmp_path / "no.py")],
                       capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert r.returncode == 2 and "can't open file" in r.stderr and "Traceback" not in r.stderr
