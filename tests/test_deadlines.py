"""Deadlines for plug-in code: an answer in time comes back, a late one is ``Overdue``,
the code's own errors pass through, and a producer stops when its consumer does."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import pytest

from flexmatch import deadlines


def test_a_coroutine_answers_or_is_overdue() -> None:
    async def quick() -> int:
        return 7

    async def late() -> int:
        await asyncio.sleep(30)
        return 0

    async def own_timeout() -> int:
        raise TimeoutError("the plug-in's own")

    async def main() -> None:
        assert await deadlines.run_coroutine(quick, 5) == 7
        with pytest.raises(deadlines.Overdue):
            await deadlines.run_coroutine(late, 0.2)
        with pytest.raises(TimeoutError, match="the plug-in's own") as own:
            await deadlines.run_coroutine(own_timeout, 5)
        assert not isinstance(own.value, deadlines.Overdue)

    asyncio.run(main())


def test_iterate_bounds_the_wait_not_the_consumer() -> None:
    gate = threading.Event()
    made: list[int] = []

    def endless() -> Iterator[int]:
        index = 0
        while True:
            made.append(index)
            yield index
            index += 1

    def stuck() -> Iterator[int]:
        yield 1
        gate.wait(30)
        yield 2

    def broken() -> Iterator[int]:
        yield 1
        raise ValueError("bad item")

    items = deadlines.iterate(endless, 5)
    assert [next(items) for _ in range(3)] == [0, 1, 2]
    items.close()  # type: ignore[attr-defined]
    stopped = len(made)
    assert stopped <= 5
    got = []
    with pytest.raises(deadlines.Overdue):
        for item in deadlines.iterate(stuck, 0.3):
            got.append(item)
    gate.set()
    assert got == [1]
    with pytest.raises(ValueError, match="bad item"):
        list(deadlines.iterate(broken, 5))
    assert list(deadlines.iterate(lambda: [1, 2, 3], 5)) == [1, 2, 3]
    assert len(made) <= stopped + 1  # the endless producer stopped when asked
