"""PyTorch traces of N ranks (execution trace + Kineto trace per rank) → Chakra ETs.

``convert_pytorch`` is what ``python -m workload.convert pytorch`` runs; see docs/pytorch.md.
"""
from workload.pytorch.converter import PyTorchConversion, convert_pytorch

__all__ = ["PyTorchConversion", "convert_pytorch"]
