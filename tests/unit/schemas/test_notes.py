"""A note is its code and values: written only from its code's declaration, read back as it was, and read leniently
where a results file (input from other tools and versions) holds something else."""

import json

import pytest

from specbench.schemas.meta import RunMeta
from specbench.schemas.notes import Note, NoteCode
from specbench.schemas.row_read import read_row


def test_a_note_takes_only_its_codes_values_of_their_types():
    note = Note.of(NoteCode.REPEATS_TARGET, repeats=3, fresh=True, target=0.05, half_width=None)
    assert note.to_dict() == {"code": "repeats_target", "values": {"repeats": 3, "fresh": True, "target": 0.05}}
    assert Note.of(NoteCode.SPEEDUP_DEFINED).to_dict() == {"code": "speedup_defined"}  # no values: no key
    for bad, why in ((dict(repeats=3, fresh=True, target=0.05, extra=1), "unknown value 'extra'"),
                     (dict(repeats=3, fresh=True), "missing target"),
                     (dict(repeats=True, fresh=True, target=0.05), "repeats: True is not int")):
        with pytest.raises(ValueError, match=why):
            Note.of(NoteCode.REPEATS_TARGET, **bad)


def test_notes_and_the_sentences_an_earlier_specbench_stored_are_read_and_written_back_as_they_were():
    data = {"notes": ["⚠ config x failed: boom", {"code": "config_failed", "values": {"config": "y", "error": "e"}}],
            "run_dir_notes": [{"code": "prompts_unchecked"}]}
    meta = RunMeta.from_dict(data, "meta.json")
    assert meta.notes == ["⚠ config x failed: boom", Note.of(NoteCode.CONFIG_FAILED, config="y", error="e")]
    assert meta.to_dict() == data


def test_a_results_row_whose_notes_are_not_notes_keeps_the_rest_and_says_each_in_one_line():
    problems: list[str] = []
    row = read_row({"run": "spec", "dataset": "d", "notes": ["kept", {"code": 3}, 5,
                                                             {"code": "graded_truncated", "values": {"answers": 2}}]},
                   "results.json", 0, problems)
    assert row.notes == ["kept", Note(None, None), Note.of(NoteCode.GRADED_TRUNCATED, answers=2)]
    assert problems == ["results.json: record 0 (spec / d): notes[1]: code: expected text, got 3; ignored",
                        "results.json: record 0 (spec / d): notes[2]: expected text or an object, got 5; shown as —"]
    assert json.loads(json.dumps(row.to_dict()))["notes"][2] == {"code": "graded_truncated", "values": {"answers": 2}}
