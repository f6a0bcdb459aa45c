"""The progress bar of `manage.py backup` / `restore`: drawn from the first step on, so an error that stops the
command before any work (a refused file, a missing tool) prints only its message."""

from __future__ import annotations

from collections.abc import Callable

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn


class LazyProgress:
    """A rich progress bar started at the first update; use as a context manager and pass `update` on."""

    def __init__(self, description: str, unit: str, *, enabled: bool = True) -> None:
        self._bar = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn(unit),
            TimeElapsedColumn(),
            disable=not enabled,
        )
        self._description = description
        self._task: int | None = None

    def update(self, total: int | None, completed: int) -> None:
        if self._task is None:
            self._bar.start()
            self._task = self._bar.add_task(self._description, total=total)
        self._bar.update(self._task, total=total, completed=completed)

    def __enter__(self) -> Callable[[int | None, int], None]:
        return self.update

    def __exit__(self, *exc: object) -> None:
        if self._task is not None:
            self._bar.stop()
