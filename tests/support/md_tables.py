"""Reading a markdown report back in the tests: each table under the title line above it."""

from __future__ import annotations


def tables_of(md: str) -> dict[str, list[list[str]]]:
    """Each table by the title line above it ("" for the first, the comparison table): its header, then
    its rows, each a list of stripped cells (the ``| --- |`` line left out)."""
    out: dict[str, list[list[str]]] = {}
    title = ""
    for block in md.split("\n\n"):
        lines = block.split("\n")
        if lines[0].startswith("| "):
            out[title] = [[c.strip() for c in line.strip("|").split("|")] for line in lines if not line.startswith("| ---")]
        elif len(lines) == 1 and not lines[0].startswith("- "):
            title = lines[0]
    return out
