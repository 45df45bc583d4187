"""The inputs → documents: ``sources`` (files and folders, records, web pages, Git
repositories, each through its source type), read by ``parsing``, in ``isolation``'s
worker processes."""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import TypeVar

T = TypeVar("T", bound="str | os.PathLike[str]")


def named_inputs(value: T | Iterable[T]) -> list[T]:
    """Inputs as a list: one path or URL given alone is one input, not its characters."""
    if isinstance(value, str | os.PathLike):
        return [value]
    return list(value)
