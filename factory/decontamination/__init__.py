"""Decontamination of a training pool against evaluation sets, made for multi-hop QA.

A pool question is contaminated by an evaluation question when one of three rules (``params.rules``,
``DecontaminationParams`` in factory/params/data_sections.py) holds:

1. ``exact``: equal normalised question text (``factory.utils.text.normalize_question``). Score 1.0.
2. ``near_duplicate``: surface edits (typos, punctuation, a dropped, added or changed word) or light
   rewording (question words swapped, clauses reordered, template words changed): the IDF-weighted word
   Dice with typos paired (``similarity.soft_dice``) reaches ``near_duplicate_same_titles`` for two
   questions over the same set of supporting titles, ``near_duplicate_threshold`` otherwise. Template words
   weigh little and entity words a lot, so a 2WikiMultihopQA template about other entities is no match.
3. ``same_chain``: the same reasoning chain asked in other words: the same normalised answer over the same
   set of supporting titles (``chain``), guarded for yes/no answers and answers among the question's own
   words, which many different questions over the same titles share (``same_chain_guard``).

``index.EvalIndex(eval_rows, params)`` indexes the evaluation side once; ``.match(pool_rows)`` gives
each pool row its strongest ``Match`` (exact > near_duplicate > same_chain, then the higher score, then
(eval_set, eval_id)) or None, and ``.matches`` all of them. The caller streams the pool in batches and
reports progress; memory follows the evaluation side and one batch. Rows are plain dicts (``rows``):
``eval_row`` / ``pool_row`` make them from Question rows, ``eval_sets.file_rows`` from an evaluation file in
its dataset's official format. bench/decontamination_rules.py measures the rules on real records and chose the
thresholds; bench/decontamination.py measures the index at full size (docs/benchmarks.md#decontamination).

Modules: ``rows`` (evaluation and pool rows), ``similarity`` and ``typos`` (the near-duplicate score),
``chain`` (the same-chain keys), ``index`` (``EvalIndex``), ``eval_sets`` (the run's evaluation files),
``run`` (the stage's work), ``flagged`` (what the generation stages read). This file imports none of them:
``flagged`` is imported by every stage that draws questions, which needs nothing else here.
"""
