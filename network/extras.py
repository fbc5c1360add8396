"""Install hints for the optional extras, right both from a checkout and after ``pip install``.

``pip install 'dtsim[plot]'`` works only where pip can find dtsim, so a hint names the package
itself first (what any environment can install) and the extra as a checkout installs it.
"""
from __future__ import annotations


def install_hint(extra: str, packages: str) -> str:
    """E.g. ``pip install matplotlib (in a dtsim checkout: pip install -e '.[plot]')``."""
    return f"pip install {packages} (in a dtsim checkout: pip install -e '.[{extra}]')"
