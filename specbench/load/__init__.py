"""Load generation: a pass of prompts sent to a server under a load shape (closed-loop streams from one
process or several, or open-loop arrivals on a schedule computed up front: ``schedule``, with a trace's
lines as prompts: ``trace``) → its request records and its window."""

from .generate import LoadPass, LoadResult, generate_load, generate_load_processes, phase_window, run_loop

__all__ = ["LoadPass", "LoadResult", "generate_load", "generate_load_processes", "phase_window", "run_loop"]
