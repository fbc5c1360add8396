"""Calibrating a network and system configuration against measured nccl-tests tables.

This package holds what needs no simulator: the nccl-tests reader (``nccl_tests``), the fitted
parameters and the files they become (``params``), the error measures (``metrics``) and the
closed-form starting point of a fit (``model``). The fit itself runs the simulator, so it lives
above the layers, in the top-level ``calibrate`` package; ``python -m network.calibrate`` hands
over to it (see ``__main__``).
"""
