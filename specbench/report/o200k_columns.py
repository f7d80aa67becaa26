"""The o200k_base columns of the *Quality & cost* table (``specbench.measure.o200k``): lengths in one
tokenizer for every model, shown only where some row counted them (the o200k_base file was there)."""

from __future__ import annotations

from ..schemas.row import ResultRow
from .colspec import QUALITY, Column, measured, num


def _prompt(r: ResultRow) -> str:
    return f"{num(r.prompt_tokens_o200k_mean, 1)}/{num(r.prompt_tokens_o200k_p50, 1)}/{num(r.prompt_tokens_o200k_max, 0)}"


O200K_COLUMNS: list[Column] = [
    Column("o200k tok/s", lambda r: num(r.output_throughput_o200k_tps, 2),
           ("output_throughput_o200k_tps", "output_tokens_o200k", "o200k_error"), QUALITY,
           shown=measured(lambda r: r.output_throughput_o200k_tps)),
    Column("o200k/tok", lambda r: num(r.o200k_per_output_token, 3), ("o200k_per_output_token",), QUALITY,
           shown=measured(lambda r: r.o200k_per_output_token)),
    Column("Prompt o200k mean/p50/max", _prompt,
           ("prompt_tokens_o200k_mean", "prompt_tokens_o200k_p50", "prompt_tokens_o200k_max"), QUALITY,
           shown=measured(lambda r: r.prompt_tokens_o200k_mean)),
]
