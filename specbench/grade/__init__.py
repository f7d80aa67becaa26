"""Task accuracy, graded only when the suite asks (``load.grade``), paired with the baseline.

The grading of answers (``grading``: gold answers, per-request grades, accuracy and its paired
comparison with the baseline), final-answer extraction (``answers``) and fenced pass@1 (``programs``).
"""

from .grading import (
    CODE_TIMEOUT_S,
    DIFF_METHOD,
    Gold,
    accuracy_pairs,
    accuracy_summary,
    gold_from_row,
    golds,
    grade_answer,
    grade_phase,
    grade_records,
    mcnemar_exact,
    paired_accuracy,
)

__all__ = ["CODE_TIMEOUT_S", "DIFF_METHOD", "Gold", "accuracy_pairs", "accuracy_summary", "gold_from_row", "golds",
           "grade_answer", "grade_phase", "grade_records", "mcnemar_exact", "paired_accuracy"]
