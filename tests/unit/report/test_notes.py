"""The notes under the tables: every code worded once, in report/notes.py, from its declared values; the sentences
the stored texts said before notes were codes; what an earlier or a newer specbench stored still prints."""

import pytest

from specbench.report.markdown import markdown
from specbench.report.notes import WORDING, lines, sentence
from specbench.schemas.meta import RunMeta
from specbench.schemas.notes import KINDS, Note, NoteCode
from specbench.schemas.row_read import rows_from

SAMPLE = {int: 3, float: 1.5, str: "x", bool: True, list: ["x"]}


def sample(code: NoteCode, *, optional: bool) -> dict:
    """Values of ``code``'s declared types: every one, or only those it cannot do without."""
    out = {}
    for name, types in KINDS[code].values.items():
        if type(None) in types and not optional:
            continue
        kind = float if float in types else next(t for t in types if t is not type(None))
        out[name] = SAMPLE[kind]
    return out


def test_every_code_has_its_kind_and_its_wording_and_every_wording_a_code():
    assert set(KINDS) == set(NoteCode)
    assert set(WORDING) == set(NoteCode)


@pytest.mark.parametrize("code", list(NoteCode))
def test_every_code_is_worded_from_its_declared_values_with_or_without_the_optional_ones(code):
    for optional in (True, False):
        note = Note.of(code, **sample(code, optional=optional))
        text = WORDING[code](note.values or {})  # a value the wording reads but the code does not declare: KeyError
        assert text and sentence(note) == ("⚠ " if KINDS[code].warning else "") + text
        assert not sentence(note).startswith(str(code))  # not the fallback


#: sentences the measure and run stages stored as text before notes were codes (the same inputs through the
#: code of the commit before: /tmp compare script of the change, every stored note of its 60 lines identical)
BEFORE = [
    (Note.of(NoteCode.SPEEDUP_VARIES, fresh=True, low=1.0, high=2.0, repeats=3, p=0.0),
     "⚠ speedup varies between servers: 1.00–2.00× (Cochran's Q over 3 server starts, p = 0); the CI is the "
     "between-repeat t-interval"),
    (Note.of(NoteCode.REPEATS_TARGET, repeats=2, fresh=True, target=0.05, half_width=40.865),
     "2 repeats on server starts; target ±5.0%: not met (±4086.5%)"),
    (Note.of(NoteCode.REPEATS_TARGET, repeats=4, fresh=False, target=0.05),
     "4 repeats on passes on one server; target ±5.0%: unknown"),
    (Note.of(NoteCode.TOKEN_COUNTS_DOUBTED, requests=1, reason="usage missing"),
     "⚠ 1 request: usage missing (requests.jsonl token_warning and token_count_source say which count was used)"),
    (Note.of(NoteCode.REQUEST_LENGTHS_MERGED, merged_chunks=3, fewer_steps=40.0, steps=1000),
     "⚠ Req accept len: from chunk sizes while the engine merged steps into one chunk: 3 chunks carried more than k+1 "
     "tokens; the stream saw at least 40 fewer steps than the server's counters imply (4.0 % of its 1000 steps); a "
     "merged chunk counts as one step, so these lengths are too high"),
    (Note.of(NoteCode.GRADED_TRUNCATED, answers=2),
     "2 graded answers were cut by max_tokens (graded as they are; usually wrong)"),
    (Note.of(NoteCode.SYNTHETIC_ACCEPTANCE),
     "synthetic acceptance: drafts are committed whether or not they match the target's tokens, so Same output and "
     "accuracy do not apply (—)"),
    (Note.of(NoteCode.DUMMY_WEIGHTS, configs=["a"], every=False),
     "⚠ dummy weights (a: load_format dummy, the target's weights at random from its config.json): speed is the model "
     "shape's; acceptance is set (synthetic) or meaningless, not measured; same output and accuracy do not apply (—)."),
    (Note.of(NoteCode.ITL_DEFINED, clocks=["client monotonic", "kernel SO_TIMESTAMPNS"]),
     "ITL is per token (a chunk of n tokens after a gap g gives n samples of g/n); TPOT = (latency − TTFT)/(output "
     "tokens − 1). Chunk times: client monotonic / kernel SO_TIMESTAMPNS; TTFT counts from just before the request is "
     "written to the socket."),
    (Note.of(NoteCode.SAMPLING, temperature=0.7, max_tokens=128, warmup="pass"),
     "temperature 0.7, max_tokens 128, warm-up a full matching pass before each timed pass."),
    (Note.of(NoteCode.ARRIVALS_RAMP, shape="exponential", start=1, end=16, duration_s=30, burstiness=2),
     "Arrivals: exponential ramp from 1 to 16 req/s over 30 s, then 16, burstiness 2 (load.seed + the repeat number); "
     "a cell's Rate/s is the ramp's end rate"),
    (Note.of(NoteCode.SLO_DEFINED, ttft_ms=200, latency_ms=1500.5),
     "SLO: TTFT ≤ 200 ms, latency ≤ 1500.5 ms; SLO met = share of requests (failed ones count as misses) within every "
     "bound; goodput = those per second of the timed pass."),
    (Note.of(NoteCode.CONFIG_FAILED, config="gone", error="could not start: connection refused"),
     "⚠ config gone failed: could not start: connection refused"),
    (Note.of(NoteCode.LINES_QUARANTINED, file="phases.jsonl", lines=1, target="phases.quarantine.jsonl",
             line_numbers=[2], reasons=["not JSON (Expecting value at column 1)"]),
     "phases.jsonl: 1 unreadable line(s) moved to phases.quarantine.jsonl: line 2 (not JSON (Expecting value at "
     "column 1))"),
    (Note.of(NoteCode.PHASE_REMEASURED, cell="c / p / C=1", repeat=0, unreadable=9, requests=12),
     "c / p / C=1 (repeat 0): 9 of its 12 measured request records are unreadable; measured again"),
]


@pytest.mark.parametrize(("note", "text"), BEFORE, ids=[n.code for n, _ in BEFORE])
def test_a_note_reads_as_the_sentence_it_was_stored_as_before(note, text):
    assert sentence(note) == text


def test_a_note_an_earlier_specbench_stored_as_its_sentence_prints_as_given_beside_the_codes():
    meta = RunMeta.from_dict({"notes": ["⚠ an old warning", {"code": "sampling", "values": {
        "temperature": 0, "max_tokens": 8, "warmup": 1}}]})
    rows = rows_from([{"dataset": "d", "run": "spec", "concurrency": 2, "notes": [
        "an old cell note", {"code": "graded_truncated", "values": {"answers": 1}}]}])
    assert lines(rows, meta) == ["⚠ an old warning", "temperature 0, max_tokens 8, warm-up 1 request(s) before each timed pass.",
                                 "spec / d / C=2: an old cell note",
                                 "spec / d / C=2: 1 graded answers were cut by max_tokens (graded as they are; usually wrong)"]
    assert markdown(rows, meta).endswith("\n- spec / d / C=2: 1 graded answers were cut by max_tokens (graded as they "
                                         "are; usually wrong)")


def test_a_code_this_version_does_not_know_or_values_that_are_not_its_print_as_code_and_values():
    """A results file is input: a newer specbench's code, or a value of the wrong type, is shown, never raised."""
    assert sentence(Note("brand_new", {"n": 2})) == 'brand_new: {"n": 2}'
    assert sentence(Note("speedup_varies", {"low": "x"})) == 'speedup_varies: {"low": "x"}'
    assert sentence(Note(None, None)) == "note: {}"
