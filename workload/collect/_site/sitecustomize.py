"""Put on PYTHONPATH by ``python -m workload.collect run``: profile step K in every Python process."""
import os
import sys

if os.environ.get("DTSIM_COLLECT_STEP"):
    try:
        from workload.collect.step_hook import install_from_env

        install_from_env()
    except Exception as exc:  # never break the user's process; say why nothing is recorded
        print(f"workload.collect: step hooks not installed in {sys.argv[0] or 'python'}: {exc}", file=sys.stderr)
