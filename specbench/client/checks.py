"""Server values checked where they enter: the types and ranges a chunk's fields may have, and
per-request spec stats that must fit the stream they came with."""

from __future__ import annotations

from ..schemas.request import RequestRecord

#: a bound on a count when the request set no max_tokens (no server streams this many in one answer)
TOKEN_CAP = 10_000_000
#: per-request stats keys (vLLM's metrics.speculative_decoding) that must be non-negative numbers
STATS_KEYS = ("num_spec_steps", "num_accepted_draft_tokens", "num_draft_tokens", "num_spec_tokens",
              "mean_acceptance_length")


class BadValue(Exception):
    """A server value of the wrong type or out of range: fails the request that carried it."""


def checked_stats(stats: object, where: str) -> dict[str, object]:
    """A server's per-request spec stats, as it sent them, once their counts are checked."""
    if not isinstance(stats, dict):
        raise BadValue(f"{where} = {stats!r:.60} is not an object")
    for key in STATS_KEYS:
        value = stats.get(key)
        if value is not None and (type(value) not in (int, float) or value < 0):
            raise BadValue(f"{where}.{key} = {value!r:.60} is not a non-negative number")
    accepted, drafted = stats.get("num_accepted_draft_tokens"), stats.get("num_draft_tokens")
    if accepted is not None and drafted is not None and accepted > drafted:  # an acceptance rate above 100 %
        raise BadValue(f"{where}.num_accepted_draft_tokens = {accepted!r} exceeds num_draft_tokens = {drafted!r}")
    return stats


def stats_fit_the_stream(record: RequestRecord) -> None:
    """Each drafted step yields its accepted tokens plus one, so steps + accepted cannot exceed the
    answer's tokens by more than one step's k (max_tokens may cut the last step short); per-request
    stats that claim more are not this answer's and are set aside."""
    stats, tokens = record.spec_stats, record.output_tokens
    if not stats or tokens is None or record.error:
        return
    steps, accepted = stats.get("num_spec_steps"), stats.get("num_accepted_draft_tokens")
    drafted = stats.get("num_draft_tokens")
    if not (isinstance(steps, (int, float)) and isinstance(accepted, (int, float))):
        return
    k = drafted / steps if isinstance(drafted, (int, float)) and steps > 0 else 0
    if steps + accepted > tokens + k:
        record.spec_stats = None
        note = (f"per-request spec stats contradict the stream: {steps:g} steps + {accepted:g} accepted tokens "
                f"> {tokens} output tokens; not used")
        record.token_warning = f"{record.token_warning}; {note}" if record.token_warning else note


class ServerSaid(Exception):
    """The stream carried an error object instead of choices: fails the request, with its message."""
