"""A live bar of a long command's steps (``rig bisect``: each step a build and a cell's cycles, minutes
long) on a terminal; a line a step elsewhere (CI logs)."""

from __future__ import annotations


class StepBar:
    """A live bar of the steps on a terminal (each step's build and cycles take minutes); a line a
    step elsewhere."""

    def __init__(self, out):
        self.out = out
        self.total = 0
        self.n = 0
        self.live = out.isatty()
        self._bar = None
        self._task = None
        if self.live:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self._bar = Progress(
                TextColumn("[bold]bisect"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                TextColumn("{task.description}"),
            )
            self._bar.start()
            self._task = self._bar.add_task("", total=None)

    def start(self, what: str) -> None:
        self.what = what
        if self._bar is not None and self._task is not None:
            self._bar.update(self._task, description=what, total=max(self.total, self.n + 1), completed=self.n)
        else:
            print(f"step {self.n + 1}: {what} ...", file=self.out, flush=True)

    def finish(self, said: str) -> None:
        self.n += 1
        if self._bar is not None and self._task is not None:
            self._bar.console.print(f"step {self.n}: {self.what}: {said}")
            self._bar.update(self._task, completed=self.n)
        else:
            print(f"step {self.n}: {self.what}: {said}", file=self.out, flush=True)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None
