"""The token log (``tokens`` level, accuracy runs only): one ``tokens`` row per guess the target verified.

Hooked at V1's ``RejectionSampler.forward`` (n-gram, draft-model and EAGLE on MoE targets run there): before
the sampler runs, the target's probability of each guess, its entropy and its top-1 − top-2 margin come from the
raw target logits at the guess's position (and the drafter's from its probabilities where it keeps them: n-gram
has none, so those are null); after it, which guesses were kept. Reading those values back to the host costs a
synchronisation every step: never time a run with this level on. The V2 runner (DSpark, EAGLE on dense targets)
is not hooked yet: its header says so.
"""

from __future__ import annotations

import sys
import time
from typing import Any

from .steplog_files import ACTIVE, LEVELS, LOG, MARK, guarded, vllm_version

#: the batch's requests, taken at ``_sample`` (the sampler itself sees tensors only)
_BATCH: dict[str, Any] = {}


def _stats(torch: Any, logits: Any, tokens: Any) -> tuple[list[float], list[float], list[float], list[int]]:
    """Probability of ``tokens``, entropy (nats) and top-1 − top-2 margin of each row of ``logits``; argmax."""
    logp = torch.log_softmax(logits.float(), dim=-1)
    p = logp.exp()
    prob = p.gather(1, tokens.long().unsqueeze(1)).squeeze(1)
    entropy = -(p * logp).sum(-1)
    top = p.topk(2, dim=-1)
    margin = top.values[:, 0] - top.values[:, 1]
    return prob.tolist(), entropy.tolist(), margin.tolist(), top.indices[:, 0].tolist()


def _before(sampler: Any, metadata: Any, draft_probs: Any, logits: Any, *_: Any) -> None:
    torch = sys.modules["torch"]
    draft = metadata.draft_token_ids
    target = logits[metadata.target_logits_indices]
    t = _stats(torch, target, draft)
    d = None
    if draft_probs is not None and getattr(draft_probs, "ndim", 0) == 2 and draft_probs.shape[0] == draft.shape[0]:
        d = _stats(torch, draft_probs.clamp_min(1e-30).log(), draft)
    _BATCH["pending"] = (draft.tolist(), list(metadata.num_draft_tokens), t, d)


def _after(sampler: Any, output: Any) -> None:
    pending = _BATCH.pop("pending", None)
    if pending is None or "req_ids" not in _BATCH:
        return
    drafts, per_req, t, d = pending
    sampled = output.sampled_token_ids.tolist()
    step, req_ids, computed, prompt = _BATCH["step"], _BATCH["req_ids"], _BATCH["computed"], _BATCH["prompt"]
    wall, i = time.time(), 0
    for b, n in enumerate(per_req):
        kept = max(sum(1 for x in sampled[b] if x >= 0) - 1, 0) if b < len(sampled) else 0
        for p in range(1, n + 1):
            ctx = int(computed[b]) + p if b < len(computed) else None
            LOG.write("tokens", {
                "step": step, "wall": wall, "req_id": req_ids[b] if b < len(req_ids) else None,
                "batch": len(per_req), "draft_pos": p, "ctx": ctx,
                "out_pos": ctx - int(prompt[b]) if ctx is not None and b < len(prompt) else None,
                "token": drafts[i], "target_top": t[3][i], "accepted": p <= kept,
                "t_prob": t[0][i], "t_entropy": t[1][i], "t_margin": t[2][i],
                "d_prob": d[0][i] if d else None, "d_entropy": d[1][i] if d else None, "d_margin": d[2][i] if d else None})
            i += 1
    LOG.flush("tokens")  # accuracy runs only: a step's guesses reach disk with the step, never lost at shutdown


def note_batch(runner: Any, step: dict[str, Any] | None) -> None:
    """V1 ``_sample`` (called by the runner hooks): the step, and which requests the sampler's rows belong to."""
    _BATCH.clear()
    if step is None or ACTIVE.rank < LEVELS.index("tokens"):
        return
    batch = getattr(runner, "input_batch", None)
    req_ids = list(getattr(batch, "req_ids", []) or [])
    _BATCH.update(step=step["step"], req_ids=req_ids,
                  computed=list(getattr(batch, "num_computed_tokens_cpu", [])[: len(req_ids)]),
                  prompt=list(getattr(batch, "num_prompt_tokens", [])[: len(req_ids)]))


def patch_rejection_sampler(module: Any) -> None:
    cls: Any = getattr(module, "RejectionSampler", None)
    if cls is None or not callable(getattr(cls, "forward", None)):
        LOG.hook("tokens.rejection_sampler", f"missing: {module.__name__}.RejectionSampler.forward (vLLM {vllm_version()})")
        return
    if getattr(cls.forward, MARK, False):
        return
    orig = cls.forward
    before, after = guarded("tokens.rejection_sampler", _before, "tokens"), guarded("tokens.rejection_sampler", _after, "tokens")

    def forward(self: Any, metadata: Any, draft_probs: Any, logits: Any, *args: Any, **kwargs: Any) -> Any:
        before(self, metadata, draft_probs, logits)
        out = orig(self, metadata, draft_probs, logits, *args, **kwargs)
        after(self, out)
        return out

    forward.__wrapped__ = orig  # type: ignore[attr-defined]
    setattr(forward, MARK, True)
    cls.forward = forward
    LOG.hook("tokens.rejection_sampler", "installed")
