"""The README and docs/ against the checkout: a README that fits a screen, the two commands CI runs,
every page reachable from docs/index.md, every link to a repository file (and heading) live, and
the README's command table in step with ``specbench --help``.

A command another branch is adding is marked ``PENDING_MARK`` in the table; a test fails once it is
in ``--help``, so the mark is removed in the same merge and nothing stays exempt for long.
"""

from __future__ import annotations

import argparse
import re
import unicodedata
from pathlib import Path

import pytest

from specbench.cli import build_parser
from tests.support.paths import ROOT

README = ROOT / "README.md"
DOCS = ROOT / "docs"
INDEX = DOCS / "index.md"
PAGES = [README, *sorted(DOCS.glob("*.md"))]
MAX_LINES, MAX_BYTES = 200, 12_000

#: a command-table row marked this way is a command being added: it must not be in --help yet
PENDING_MARK = "*(being added)*"

FENCE = re.compile(r"^(```|~~~).*?^\1[ \t]*$", re.S | re.M)
CODE_SPAN = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"\[[^\]\n]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t]*#*[ \t]*$", re.M)


def prose(text: str) -> str:
    """The text outside fenced code blocks and inline code spans, where links are links."""
    return CODE_SPAN.sub("", FENCE.sub("", text))


def links(page: Path) -> list[str]:
    return LINK.findall(prose(page.read_text()))


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*]|\[([^\]]*)\]\([^)]*\)", r"\1", heading).strip().lower()
    kept = "".join(c for c in text if c in " -_" or unicodedata.category(c)[0] in "LN")
    return kept.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for _, title in HEADING.findall(FENCE.sub("", page.read_text())):
        base = slug(title)
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def repo_targets(page: Path) -> list[tuple[str, Path, str]]:
    """(link as written, the file it names, its #fragment) for every link into the repository."""
    out = []
    for target in links(page):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            continue
        path, _, fragment = target.partition("#")
        out.append((target, (page.parent / path).resolve() if path else page, fragment))
    return out


def rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else str(path)


# ---- the README fits a screen and carries CI's two commands ----

def test_readme_fits_a_screen() -> None:
    text = README.read_bytes()
    assert len(text.splitlines()) <= MAX_LINES, f"README.md: {len(text.splitlines())} lines, at most {MAX_LINES}"
    assert len(text) <= MAX_BYTES, f"README.md: {len(text)} bytes, at most {MAX_BYTES}"


def ci_commands() -> list[str]:
    """The lines .ci/run runs under its "README: command N" markers."""
    lines = (ROOT / ".ci" / "run").read_text().splitlines()
    found = [lines[i + 1] for i, line in enumerate(lines) if re.match(r"# --- README: command \d", line)]
    assert len(found) == 2, f".ci/run: expected two '# --- README: command N' markers, found {len(found)}"
    return found


def test_readme_shows_the_two_commands_ci_runs_byte_for_byte() -> None:
    blocks = [m.group(0).splitlines()[1:-1] for m in FENCE.finditer(README.read_text())]
    for command in ci_commands():
        assert [command] in blocks, f"README.md: no code block holding exactly this line of .ci/run:\n{command}"


# ---- every page is reachable, every link lands ----

def test_every_docs_page_is_listed_in_the_index() -> None:
    listed = {target for target, _, _ in repo_targets(INDEX)}
    pages = {p.name for p in DOCS.glob("*.md") if p != INDEX}
    assert sorted(pages - listed) == [], "docs/index.md does not link these pages"


@pytest.mark.parametrize("page", PAGES, ids=rel)
def test_every_link_to_a_repository_file_resolves(page: Path) -> None:
    broken = []
    for target, path, fragment in repo_targets(page):
        if not path.exists():
            broken.append(f"{target}: no such file")
        elif fragment and path.suffix == ".md" and fragment not in anchors(path):
            broken.append(f"{target}: no heading #{fragment} in {rel(path)}")
    assert broken == [], f"{rel(page)}: broken links"


# ---- the command table and specbench --help ----

def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def options(parser: argparse.ArgumentParser) -> set[str]:
    return {flag for action in parser._actions for flag in action.option_strings}


def command_rows() -> list[tuple[list[str], bool, str]]:
    """(command words, pending?, the row) for each row of the README's "## Commands" table."""
    text = README.read_text()
    section = text.split("\n## Commands\n", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        m = re.match(r"\| `specbench ([^`]+)`", line)
        if m:
            words = re.match(r"(?:[a-z][a-z-]*(?: |$))+", m.group(1) + " ")
            assert words, f"README.md: no command in {line}"
            rows.append((words.group(0).split(), PENDING_MARK in line, line))
    assert rows, "README.md: no command table under '## Commands'"
    return rows


def resolve(words: list[str]) -> argparse.ArgumentParser | None:
    """The parser of ``specbench WORDS...``, or None when --help does not offer it."""
    parser = build_parser()
    for word in words:
        sub = subcommands(parser)
        if not sub:
            break
        if word not in sub:
            return None
        parser = sub[word]
    return parser


def test_every_command_in_the_readme_table_is_in_help() -> None:
    missing = [" ".join(w) for w, pending, _ in command_rows() if not pending and resolve(w) is None]
    assert missing == [], "README.md lists commands that `specbench --help` does not offer"


def test_commands_being_added_are_not_in_help_yet() -> None:
    landed = [" ".join(w) for w, pending, _ in command_rows() if pending and resolve(w) is not None]
    assert landed == [], f"in `specbench --help` now: drop {PENDING_MARK} from their README rows"


def test_the_readme_table_lists_every_command_of_help() -> None:
    listed = {tuple(w) for w, _, _ in command_rows()}
    top = subcommands(build_parser())
    every = [(name,) if not subcommands(p) else (name, sub) for name, p in top.items()
             for sub in (subcommands(p) or [None])]
    assert [" ".join(c) for c in every if c not in listed] == [], "README.md's command table misses these"


def test_flags_in_the_readme_table_exist() -> None:
    bad = []
    for words, pending, line in command_rows():
        parser = resolve(words)
        if pending or parser is None:
            continue
        spans = " ".join(CODE_SPAN.findall(line))
        bad += [f"specbench {' '.join(words)} {flag}" for flag in re.findall(r"(?<![\w-])(--?[a-z][\w-]*)", spans)
                if flag not in options(parser)]
    assert bad == [], "README.md names flags that --help does not have"


def md_table_headers(text: str, first: str) -> list[list[str]]:
    """The header cells of every markdown table in ``text`` whose first header is ``first``."""
    rows = [line.strip().strip("|").split("|") for line in text.splitlines() if line.startswith(f"| {first} |")]
    return [[cell.strip() for cell in row] for row in rows]


def test_the_readme_says_how_many_of_the_demo_tables_columns_it_shows() -> None:
    """"N of the first table's M columns and two of the *Why* table's": N and the two counted in the
    README's excerpt, M in the demo's whole output (docs/developing.md), against report/columns.py."""
    from specbench.report.colspec import MAIN, WHY
    from specbench.report.columns import all_columns

    said = re.search(r"(\d+) of the first table's (\d+) columns and\s+(\w+) of the \*Why\* table's", README.read_text())
    assert said, "README: the sentence introducing the demo's table"
    shown = md_table_headers(README.read_text(), "Run")[0]
    main = {c.header for c in all_columns() if c.group is MAIN}
    why = {c.header for c in all_columns() if c.group is WHY}
    demo_main = md_table_headers((DOCS / "developing.md").read_text(), "Dataset")[0]
    assert set(demo_main) <= main
    assert int(said[1]) == sum(h in main for h in shown) and int(said[2]) == len(demo_main)
    assert said[3] == {1: "one", 2: "two", 3: "three"}[sum(h in why for h in shown)]


def test_the_records_page_is_what_the_declarations_say():
    """docs/records.md comes from the record declarations (reader, writer, version and docs from one
    place): a field added, retyped or re-documented without the page fails here. To rewrite the page:
    ``SPECBENCH_WRITE_RECORDS=1 pytest tests/unit/test_docs.py -k records``."""
    import os

    from specbench.schemas.docs import records_markdown

    page = DOCS / "records.md"
    if os.environ.get("SPECBENCH_WRITE_RECORDS"):
        page.write_text(records_markdown())
    assert page.read_text() == records_markdown()
