"""The token log (``tokens`` level, accuracy runs only): one ``tokens`` row per guess the target verified.

Hooked at both runners' rejection samplers: V1's ``RejectionSampler.forward`` (n-gram, draft-model, EAGLE on MoE
targets) and V2's ``RejectionSampler.__call__`` (``vllm.v1.worker.gpu.spec_decode.rejection_sampler``: DSpark,
EAGLE, MTP, DFlash on dense targets). Before the sampler runs, the target's probability of each guess, its entropy
and its top-1 − top-2 margin come from the raw target logits at the guess's position (and the drafter's from its
logits or probabilities where it keeps them — V2 with ``draft_sample_method: probabilistic``; n-gram and greedy
drafting have none, so those are null); after it, which guesses were kept. Reading those values back to the host
costs a synchronisation every step: never time a run with this level on.
"""

from __future__ import annotations

import sys
import time
from typing import Any

from .steplog_files import ACTIVE, IN_FLIGHT, LEVELS, LOG, MARK, guarded, vllm_version

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


def _before_v2(sampler: Any, logits: Any, batch: Any, draft_logits: Any = None, *_: Any) -> None:
    """V2: request r's logits rows are ``cu_num_logits[r]`` … ``cu_num_logits[r+1]-1`` over the inputs [last token,
    guess 1, …, guess k]; row j verifies guess j+1 (the input at the next row); its draft logits are
    ``draft_logits[idx_mapping[r], j]``."""
    _BATCH.pop("v2", None)
    torch = sys.modules["torch"]
    step = IN_FLIGHT[0]
    if step is None or (torch.cuda.is_available() and torch.cuda.is_current_stream_capturing()):
        return  # a dummy run, a capture or a profile run: not a step
    cu = [int(x) for x in batch.cu_num_logits_np]
    rows, guess_at, req_of, pos_of = [], [], [], []
    for r in range(len(cu) - 1):
        for p in range(1, cu[r + 1] - cu[r]):
            rows.append(cu[r] + p - 1)
            guess_at.append(cu[r] + p)
            req_of.append(r)
            pos_of.append(p)
    if not rows:
        return
    dev = logits.device
    guesses = batch.input_ids[batch.logits_indices][torch.tensor(guess_at, device=dev)]
    t = _stats(torch, logits[torch.tensor(rows, device=dev)], guesses)
    d = None
    if draft_logits is not None:
        states = batch.idx_mapping[torch.tensor(req_of, device=dev)].long()
        d = _stats(torch, draft_logits[states, torch.tensor([p - 1 for p in pos_of], device=dev)], guesses)
    _BATCH["v2"] = (step, guesses.tolist(), req_of, pos_of, t, d, list(batch.req_ids), len(cu) - 1,
                    [int(x) for x in batch.num_computed_tokens_np[: len(cu) - 1]],
                    [int(x) for x in batch.prefill_len_np[: len(cu) - 1]])


def _after_v2(sampler: Any, output: Any) -> None:
    pending = _BATCH.pop("v2", None)
    if pending is None:
        return
    step, guesses, req_of, pos_of, t, d, req_ids, n_reqs, computed, prompt = pending
    committed = output.num_sampled.tolist()  # accepted guesses + 1 per request (0: a prefill chunk)
    wall = time.time()
    for i, (r, p) in enumerate(zip(req_of, pos_of)):
        ctx = computed[r] + p if r < len(computed) else None
        LOG.write("tokens", {
            "step": step, "wall": wall, "req_id": req_ids[r] if r < len(req_ids) else None, "batch": n_reqs,
            "draft_pos": p, "ctx": ctx, "out_pos": ctx - prompt[r] if ctx is not None and r < len(prompt) else None,
            "token": guesses[i], "target_top": t[3][i], "accepted": p <= max(int(committed[r]) - 1, 0),
            "t_prob": t[0][i], "t_entropy": t[1][i], "t_margin": t[2][i],
            "d_prob": d[0][i] if d else None, "d_entropy": d[1][i] if d else None, "d_margin": d[2][i] if d else None})
    LOG.flush("tokens")


def patch_rejection_sampler_v2(module: Any) -> None:
    cls: Any = getattr(module, "RejectionSampler", None)
    if cls is None or "__call__" not in vars(cls):
        LOG.hook("tokens.rejection_sampler_v2", f"missing: {module.__name__}.RejectionSampler.__call__ (vLLM {vllm_version()})")
        return
    if getattr(cls.__call__, MARK, False):
        return
    orig = cls.__call__
    before = guarded("tokens.rejection_sampler_v2", _before_v2, "tokens")
    after = guarded("tokens.rejection_sampler_v2", _after_v2, "tokens")

    def call(self: Any, logits: Any, input_batch: Any, draft_logits: Any = None, *args: Any, **kwargs: Any) -> Any:
        before(self, logits, input_batch, draft_logits)
        out = orig(self, logits, input_batch, draft_logits, *args, **kwargs)
        after(self, out)
        return out

    call.__wrapped__ = orig  # type: ignore[attr-defined]
    setattr(call, MARK, True)
    cls.__call__ = call
    LOG.hook("tokens.rejection_sampler_v2", "installed")

