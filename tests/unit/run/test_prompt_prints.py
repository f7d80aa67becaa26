"""The prompt hash ``--resume`` checks (issue 31, item 3): it covers what is sent and what pairs prompts."""

from specbench.run.prompt_prints import prompts_sha256
from specbench.schemas.request import Prompt


def prompt(pid: str, text: str, **kw) -> Prompt:
    return Prompt(id=pid, dataset="d", turns=(text,), **kw)


def test_the_hash_changes_with_text_id_order_turns_and_system_not_with_the_category():
    base = [prompt("a", "one"), prompt("b", "two")]
    same = prompts_sha256(base)
    assert prompts_sha256([prompt("a", "one", category="x"), prompt("b", "two", category="y")]) == same
    changed = [
        [prompt("a", "one!"), prompt("b", "two")],  # same ids, new text: the case of the issue
        [prompt("a", "one"), prompt("c", "two")],
        [prompt("b", "two"), prompt("a", "one")],
        [prompt("a", "one", system="be brief"), prompt("b", "two")],
        [Prompt(id="a", dataset="d", turns=("one", "more")), prompt("b", "two")],
        [prompt("a", "one")],
    ]
    assert len({prompts_sha256(c) for c in changed} | {same}) == len(changed) + 1
