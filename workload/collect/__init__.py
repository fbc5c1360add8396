"""The collector: PyTorch profiler output -> TrioSim ``tensor.csv`` / ``trace.csv``.

``convert_pair`` turns an execution trace and a Kineto trace of one training step
into TrioSim's CSVs and needs no torch. ``collect`` (in ``profile_step``, imported
on demand) profiles a model first and needs the ``collect`` extra (torch).
See docs/collect.md.
"""
from workload.collect.convert import ConvertResult, convert_pair
from workload.collect.errors import ModelSpecError, ProfilerTraceError
from workload.collect.spec import ModelSpec

__all__ = ["ConvertResult", "ModelSpec", "ModelSpecError", "ProfilerTraceError", "convert_pair"]
