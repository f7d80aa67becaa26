"""``specbench trace``: one prompt through a baseline and a speculative config, token by token.

Each decode chunk of n tokens is one target step: its first n−1 tokens were draft tokens the
target accepted, the last came from the target itself — the bonus token when all k drafts were
accepted, a correction otherwise. Steps with a single token are marked ``target`` when the engine
may skip drafting (n-gram without a match): the stream cannot tell a rejected draft from none.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..client import stream_request
from ..client.metrics import scrape
from ..errors import ServerError, SuiteError
from ..measure.engine_counters import read_acceptance
from ..schemas.acceptance import AcceptanceWindow
from ..schemas.request import RequestRecord
from ..suite import ServerConfig, Suite
from . import RunDir
from .servers import auth_headers, open_server, request_spec

ACCEPTED, CORRECTED, BONUS, TARGET, PREFILL = "draft-accepted", "target-corrected", "bonus", "target", "prefill"
STYLE = {ACCEPTED: "green", CORRECTED: "red", BONUS: "cyan", TARGET: "yellow", PREFILL: "dim"}
LABEL = {ACCEPTED: "Draft-Accepted", CORRECTED: "Target-Corrected", BONUS: "Bonus", TARGET: "Target", PREFILL: "Prefill"}


@dataclass
class TraceSide:
    config: str
    record: RequestRecord
    tokens: list[str] = field(default_factory=list)
    acceptance: AcceptanceWindow = field(default_factory=AcceptanceWindow)

    @property
    def tokens_per_s(self) -> float | None:
        r = self.record
        return r.output_tokens / r.latency if r.ok and r.latency and r.output_tokens is not None else None

    @property
    def steps(self) -> int:
        return len(self.record.chunk_times)


def annotate(chunk_tokens: list[int], k: int | None, every_step_drafts: bool) -> list[str]:
    """One kind per output token, from the tokens carried by each chunk (first chunk = prefill)."""
    kinds: list[str] = []
    for i, n in enumerate(chunk_tokens):
        if i == 0:
            kinds += [PREFILL] * n
            continue
        kinds += [ACCEPTED] * (n - 1)
        if k is not None and n == k + 1:
            kinds.append(BONUS)
        elif n > 1 or every_step_drafts:
            kinds.append(CORRECTED)
        else:
            kinds.append(TARGET)
    return kinds


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{x * 100:.1f}%"


def render_markdown(base: TraceSide, spec: TraceSide, prompt: str, model: str, k: int | None, method: str,
                    kinds: list[str]) -> str:
    drafted, accepted = spec.acceptance.spec_draft_tokens, spec.acceptance.spec_accepted_tokens
    b_tps, s_tps = base.tokens_per_s, spec.tokens_per_s
    speed = f"{s_tps / b_tps:.2f}x speedup" if b_tps and s_tps else "—"
    reduction = f"{(1 - spec.steps / base.steps) * 100:.1f}% reduction" if base.steps else "—"
    rate = f"{_pct(accepted / drafted)} ({accepted} accepted / {drafted} proposed)" if drafted and accepted is not None else "— (no counters)"
    lines = [
        "# Speculative decoding trace", "",
        f"Prompt: {prompt!r}", "",
        "| Metric | Baseline | Speculative | Acceleration / savings |",
        "| --- | --- | --- | --- |",
        f"| Target model | {model} | {model} | — |",
        f"| Drafter | — | {method} (k={k}) | — |",
        f"| Tokens / second | {b_tps:.1f} t/s | {s_tps:.1f} t/s | {speed} |" if b_tps and s_tps else "| Tokens / second | — | — | — |",
        f"| Target forward passes (steps) | {base.steps} | {spec.steps} | {reduction} |",
        f"| Generated tokens | {base.record.output_tokens} | {spec.record.output_tokens} | — |",
        f"| Draft acceptance rate | — | {rate} | — |",
        "",
        "Steps = streamed chunks (one per engine step, the first being prefill); acceptance = this request's "
        "delta of the server's spec-decode counters.",
        "", "## Baseline completion", "", "```", base.record.text, "```",
        "", "## Speculative completion, token by token", "",
        "Legend: " + ", ".join(f"[{LABEL[x]}]" for x in (ACCEPTED, CORRECTED, BONUS, TARGET, PREFILL)), "",
    ]
    if spec.tokens:
        lines.append("".join(f"[{LABEL[kd]}: {tok}]" for tok, kd in zip(spec.tokens, kinds)))
    else:
        lines.append("Per-token text not available from this server; tokens per step: "
                     + " ".join(str(n) for n in spec.record.chunk_tokens))
    identical = base.record.output_token_ids == spec.record.output_token_ids if base.record.output_token_ids else base.record.text == spec.record.text
    lines += ["", "## Verification log", "",
              f"- Draft lookahead k: {k}", f"- Target steps: {spec.steps}",
              f"- Average tokens per step: {spec.record.output_tokens / spec.steps:.2f}"
              if spec.steps and spec.record.output_tokens is not None else "- Average tokens per step: —",
              f"- Output identical to baseline: {'yes' if identical else 'NO'}"]
    return "\n".join(lines)


def render_terminal(console: Console, spec: TraceSide, kinds: list[str]) -> None:
    text = Text()
    if spec.tokens:
        for tok, kd in zip(spec.tokens, kinds):
            text.append(tok, style=STYLE[kd])
    console.print(text)
    legend = Table.grid(padding=(0, 2))
    legend.add_row(*[Text(LABEL[k], style=STYLE[k]) for k in (ACCEPTED, CORRECTED, BONUS, TARGET, PREFILL)])
    console.print(legend)


async def _one(session: aiohttp.ClientSession, suite: Suite, server, prompt: str) -> TraceSide:
    spec = request_spec(suite, server)
    before = await scrape(session, server.url)
    rec = RequestRecord(prompt_id="trace", dataset="trace", config=server.config.name)
    await stream_request(session, spec, [{"role": "user", "content": prompt}], rec)
    after = await scrape(session, server.url)
    if rec.error:
        raise ServerError(f"config {server.config.name!r}: trace request failed: {rec.error}")
    side = TraceSide(server.config.name, rec)
    side.acceptance = read_acceptance(server.engine, before, after, server.config.num_speculative_tokens)
    if rec.output_token_ids:
        side.tokens = await _token_texts(session, server.url, suite.model, rec.output_token_ids)
    return side


async def _token_texts(session: aiohttp.ClientSession, url: str, model: str, ids: list[int]) -> list[str]:
    """Per-token text via the server's /detokenize (vLLM); empty when the server has none."""
    out = []
    for tid in ids:
        try:
            async with session.post(url + "/detokenize", json={"model": model, "tokens": [tid]}) as r:
                if r.status != 200:
                    return []
                out.append((await r.json()).get("prompt", ""))
        except aiohttp.ClientError:
            return []
    return out


async def run_trace(suite: Suite, prompt: str, baseline: str | None, config: str | None, out_dir: Path) -> tuple[str, TraceSide, list[str]]:
    configs = {c.name: c for c in suite.configs}
    base_cfg = configs.get(baseline) if baseline else suite.baseline
    spec_cfg: ServerConfig | None = configs.get(config) if config else next((c for c in suite.configs if c.method), None)
    if base_cfg is None or spec_cfg is None:
        raise SuiteError(f"{suite.path}: trace needs a baseline and a speculative config "
                         f"(got {baseline!r}, {config!r}; configs: {', '.join(configs)})")
    run = RunDir(out_dir)
    run.create()
    sides = []
    async with aiohttp.ClientSession(headers=auth_headers(suite)) as session:
        for cfg in (base_cfg, spec_cfg):
            async with open_server(suite, cfg, run, session) as server:
                sides.append(await _one(session, suite, server, prompt))
    base, spec = sides
    kinds = annotate(spec.record.chunk_tokens, spec_cfg.num_speculative_tokens,
                     every_step_drafts=spec.acceptance.spec_drafts == spec.steps - 1)
    md = render_markdown(base, spec, prompt, suite.model, spec_cfg.num_speculative_tokens, spec_cfg.method or "", kinds)
    return md, spec, kinds


