"""Live terminal progress for a run (rich): one bar per phase with tokens/s and running acceptance."""

from __future__ import annotations

from collections.abc import Callable

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.text import Text

from ..measure.acceptance import decode_steps
from ..schemas.notes import Note
from ..schemas.row import ResultRow


def plain(note: Note | str) -> str:
    """A notice as it is, before the report's wording is given (``RunProgress(word=)``): text, or a note's code."""
    return note if isinstance(note, str) else f"{note.code}: {note.values or {}}"


class RunProgress:
    """Callable progress sink the runner reports events to; quiet mode prints one line per cell. ``word`` writes a
    notice that is a note as its sentence (the report's ``notes.sentence``, which the run stage may not import)."""

    def __init__(self, console: Console, quiet: bool = False, word: Callable[[Note | str], str] = plain) -> None:
        self.console, self.quiet, self.word = console, quiet, word
        self.bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                            TextColumn("{task.fields[stats]}"), TimeElapsedColumn(), TimeRemainingColumn(),
                            console=console, disable=quiet, transient=False)
        self.task: TaskID | None = None
        self.tokens = self.steps = self.step_tokens = 0
        self.t0 = None

    def __enter__(self) -> RunProgress:
        self.bar.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self.bar.__exit__(*exc)

    def __call__(self, event: str, **kw) -> None:
        getattr(self, f"_on_{event}", lambda **_: None)(**kw)

    def _on_server(self, config: str, launching: bool) -> None:
        self.console.print(f"[bold]{config}[/]: {'starting server' if launching else 'using server at URL'}", highlight=False)

    def _on_phase(self, config, dataset, point, total, warmup) -> None:
        if self.task is not None:
            self.bar.remove_task(self.task)
        label = f"{config} · {dataset} · {point}" + (" (warm-up)" if warmup else "")
        self.tokens = self.steps = self.step_tokens = 0
        self.task = self.bar.add_task(label, total=total, stats="")

    def _on_request(self, record) -> None:
        if self.task is None:
            return
        self.tokens += record.output_tokens or 0
        steps = decode_steps(record)
        self.steps += len(steps)
        self.step_tokens += sum(steps)
        elapsed = self.bar.tasks[-1].elapsed or 0
        stats = f"{self.tokens / elapsed:7.1f} tok/s" if elapsed else ""
        if self.steps:
            stats += f"  accept len {self.step_tokens / self.steps:.2f}"
        self.bar.update(self.task, advance=1, stats=stats)

    def _on_cell_done(self, row: ResultRow | None) -> None:
        if self.task is not None:
            self.bar.remove_task(self.task)
            self.task = None
        if row is None:
            return
        tps, speed, length = row.output_throughput_tps, row.speedup_vs_baseline, row.mean_acceptance_length
        parts = [f"{row.run} · {row.dataset}", f"{row.requests} req",
                 f"{tps:.1f} tok/s" if tps is not None else "— tok/s",
                 f"{speed:.3f}x" if speed is not None else "speedup —",
                 f"accept len {length:.2f}" if length is not None else "accept len —"]
        if row.failed_requests:
            parts.append(f"[red]{row.failed_requests} failed[/]")
        line = "  ".join(parts)
        if self.quiet:
            print("done " + line.replace("[red]", "").replace("[/]", ""), flush=True)
        else:
            self.console.print("[green]✓[/] " + line, highlight=False)

    def _on_config_failed(self, config, error) -> None:
        self.console.print(f"[red]{config}: {error.splitlines()[0]}[/]", highlight=False)

    def _on_notice(self, message: Note | str) -> None:
        self.console.print(Text(self.word(message), style="yellow"), highlight=False)

    def _on_interrupt(self) -> None:
        self.console.print("[yellow]stopping: finishing requests in flight (Ctrl-C again to abort)[/]")
