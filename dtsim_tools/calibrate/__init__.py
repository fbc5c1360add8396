"""The calibrator's driver: it fits a network and system configuration to measured nccl-tests tables
by running the simulator itself (``system.simulation.run_simulation``) on workloads written with our
own Chakra writer. Like system/main.py it sits above the layers and may import all of them; the pure
parts (reader, parameters, metrics, closed forms) are in ``network.calibrate``.
"""
