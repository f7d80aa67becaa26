"""Ctrl-C and SIGTERM of one run, at any moment: the first stops new requests (those in flight get
the grace), a second kills the servers now and cuts what is in flight; neither is ever raised into
the code that runs (a KeyboardInterrupt inside the event loop leaves it half torn down)."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager

from ..launch import kill_all


class Interrupts:
    """The stop of one run. ``body`` is the task a second signal cancels."""

    def __init__(self, progress: Callable[..., None]) -> None:
        self.progress = progress
        self.stop = asyncio.Event()
        self.body: asyncio.Future[None] | None = None
        self.aborted = False  # a second signal cut the run short
        self.seen = 0  # signals received, whether or not the loop got to handle them

    @property
    def interrupted(self) -> bool:
        return self.stop.is_set() or self.seen > 0

    def interrupt(self) -> None:
        """What a signal does, on the loop; never raises."""
        if self.stop.is_set():
            if not self.aborted:
                self.progress("notice", message="stopping now: servers killed, requests in flight cut")
            self.aborted = True
            kill_all()
            if self.body is not None and not self.body.done():
                self.body.cancel()
            return
        self.stop.set()
        self.progress("interrupt")

    def forwarded(self) -> AbstractContextManager[None]:
        """SIGINT/SIGTERM → ``interrupt`` on the running loop while the block runs (``forward_signals``)."""

        def arrived() -> None:
            self.seen += 1

        return forward_signals(self.interrupt, arrived)


@contextmanager
def forward_signals(on_loop: Callable[[], None], on_arrival: Callable[[], None] | None = None) -> Iterator[None]:
    """SIGINT/SIGTERM → ``on_loop`` on the running loop while the block runs; ``on_arrival`` at once,
    in the signal handler (keep it to setting a flag). A Python-level handler, not
    ``loop.add_signal_handler``: a signal is seen even while the loop is busy writing (one during the
    final write still makes the run "interrupted"), nothing is raised into the code that runs, and
    the handlers that were there before come back afterwards (asyncio would leave SIGTERM at its
    default: death). Outside the main thread the caller owns signals and this does nothing."""
    loop = asyncio.get_running_loop()

    def on_signal(signum: int, frame: object) -> None:
        if on_arrival is not None:
            on_arrival()
        try:
            loop.call_soon_threadsafe(on_loop)
        except RuntimeError:  # the loop is closing: on_arrival was enough
            pass

    previous = {}
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            previous[sig] = signal.signal(sig, on_signal)
        except ValueError:  # not the main thread
            pass
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
