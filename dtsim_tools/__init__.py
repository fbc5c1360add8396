"""Tools around the simulator, installed as console scripts: ``dtsim-sweep`` (sweep.py),
``dtsim-compare`` (compare_backends.py) and ``dtsim-bench`` (bench.py). The top layer: they may
import workload, system and network; nothing imports them (tests/test_layers.py)."""
