"""The o200k_base columns of the *Quality & cost* table (``specbench.measure.o200k``): lengths in one
tokenizer for every model, shown only where some row counted them (the o200k_base file was there)."""

from __future__ import annotations

from ..schemas.row import ResultRow
from .colspec import QUALITY, Column, measured, num


def _prompt(r: ResultRow) -> str:
    return f"{num(r.prompt_tokens_o200k_mean, 1)}/{num(r.prompt_tokens_o200k_p50, 1)}/{num(r.prompt_tokens_o200k_max, 0)}"


O200K_COLUMNS: list[Column] = [
    Column("o200k tok/s", lambda r: num(r.output_throughput_o200k_tps, 2),
           "Output tok/s counted in tiktoken's o200k_base tokens instead of the server's: Σ o200k tokens of the "
           "successful requests' answer text ÷ wall time of the timed pass, mean over repeats — one tokenizer for "
           "every model, as Artificial Analysis and specdec_bench normalise; counted after the run from a local "
           "o200k_base.tiktoken only (— = none: o200k_error says why)", QUALITY, "tokens/s",
           ("output_throughput_o200k_tps", "output_tokens_o200k", "o200k_error"),
           measured(lambda r: r.output_throughput_o200k_tps)),
    Column("o200k/tok", lambda r: num(r.o200k_per_output_token, 3),
           "o200k_base tokens ÷ the server's output tokens over the same successful requests: how much text one of "
           "this model's tokens carries (below 1: its tokenizer splits finer than o200k_base)", QUALITY, "×",
           ("o200k_per_output_token",), measured(lambda r: r.o200k_per_output_token)),
    Column("Prompt o200k mean/p50/max", _prompt,
           "per successful request: o200k_base tokens of the text it sent, each message's content counted on its own "
           "(no chat template; a later turn includes the earlier answers) — SPEED-Bench-style input length, the same "
           "for every model", QUALITY, "tokens",
           ("prompt_tokens_o200k_mean", "prompt_tokens_o200k_p50", "prompt_tokens_o200k_max"),
           measured(lambda r: r.prompt_tokens_o200k_mean)),
]
