"""The network as the representatives of an orbit run see it (system/shortcuts/orbits.py).

Only one rank per orbit is simulated. A message that a representative sends to a simulated rank
goes as usual. One meant for x = σ^j(ρ), which is not simulated, is sent as its image under σ^-j:
from σ^-j(sender) to ρ, with its communicator group mapped the same way. In the real run that
image is a message ρ receives, at the same time and after the same delay (σ keeps delays), so
ρ's receive pairs with it as it would with the real one. Each simulated message stands for one
per orbit member: ``stats`` scales the traffic counters.
"""
from __future__ import annotations

from typing import Any, Callable

from system.shortcuts.orbits import Orbits
from system.sys import COLLECTIVE_TAG_OFFSET, NATIVE_TAG_OFFSET

_SPAN = COLLECTIVE_TAG_OFFSET - NATIVE_TAG_OFFSET
_GROUP_STRIDE = 1_000_000  # a group's stream ids start at id × 10^6 (comm_group.py)


def _noop(*_: object) -> None:
    pass


class OrbitNetwork:
    """A backend proxy for the simulated ranks of an orbit run."""

    def __init__(self, inner: Any, orbits: Orbits) -> None:
        self.inner = inner
        self.orbits = orbits
        self.topology = inner.topology
        self.queue = inner.queue
        self.now = inner.now
        self.schedule = inner.schedule
        self.run = inner.run
        self.unmatched = inner.unmatched
        self._recv = inner.recv
        self._send = inner.send
        self._simulated = [r == o for r, o in enumerate(orbits.rep_of)]
        # for system/shortcuts/ring_batch.py: delays depend on (src, dst, size) only, as on the inner backend
        self.rep_of = orbits.rep_of
        self.fixed_delay_ns = getattr(inner, "fixed_delay_ns", None)
        self.account_flows = inner.account_flows

    def _image(self, src: int, dst: int, tag: int, label: Any) -> tuple[int, int, int, Any]:
        """The message src → dst (dst not simulated) as the one its representative receives."""
        o = self.orbits
        back = o.inverse(o.power[dst])  # g_back = g_j^-1
        if label is not None and label.group is not None:
            g = label.group
            h = o.group_image(back, g)
            if h != g:
                sid = (tag - COLLECTIVE_TAG_OFFSET - g * _GROUP_STRIDE) % _SPAN
                tag = (h * _GROUP_STRIDE + sid) % _SPAN + COLLECTIVE_TAG_OFFSET
                label = label._replace(group=h)
        return o.rank(back, src), o.rep_of[dst], tag, label

    def send(self, src: int, dst: int, size_bytes: int, tag: int, callback: Callable[..., None], *args: object,
             label: object = None) -> None:
        if not self._simulated[dst]:
            src, dst, tag, label = self._image(src, dst, tag, label)
        self._send(src, dst, size_bytes, tag, callback, *args, label=label)

    def recv(self, dst: int, src: int, size_bytes: int, tag: int, callback: Callable[..., None], *args: object,
             label: object = None) -> None:
        self._recv(dst, src, size_bytes, tag, callback, *args, label=label)

    def exchange(self, me: int, dst: int, src: int, size_bytes: int, tag: int, label: object,
                 callback: Callable[..., None], arg: object) -> None:
        if self._simulated[dst]:
            self.inner.exchange(me, dst, src, size_bytes, tag, label, callback, arg)
            return
        s, d, t, lab = self._image(me, dst, tag, label)
        self._send(s, d, size_bytes, t, _noop, label=lab)
        self._recv(me, src, size_bytes, tag, callback, arg, label=label)

    def stats(self) -> dict[str, object]:
        out = self.inner.stats()
        k = self.orbits.size
        for key in ("messages", "bytes_sent", "bytes_received"):
            if key in out:
                out[key] = out[key] * k
        if "bytes_per_dim" in out:
            out["bytes_per_dim"] = [b * k for b in out["bytes_per_dim"]]
        out["simulated_ranks"] = len(self.orbits.reps)
        return out
