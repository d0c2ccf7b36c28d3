"""Decontamination of a training pool against evaluation sets, made for multi-hop QA.

A pool question is contaminated by an evaluation question when one of three rules (``params.rules``,
``DecontaminationParams`` in factory/config.py) holds:

1. ``exact``: equal normalised question text (``factory.utils.text.normalize_question``). Score 1.0.
2. ``near_duplicate``: surface edits (typos, punctuation, a dropped, added or changed word) or light
   rewording (question words swapped, clauses reordered, template words changed): the IDF-weighted word
   Dice with typos paired (``similarity.soft_dice``) reaches ``near_duplicate_threshold``. Template words
   weigh little, entity words a lot, so a 2WikiMultihopQA template about other entities is not a match.
3. ``same_chain``: the same reasoning chain asked in other words: the same normalised answer over the same
   set of supporting titles (``chain``), with a guard for yes/no and option answers, which many different
   questions over the same titles share.

``index.EvalIndex(eval_rows, params)`` indexes the evaluation side once; ``.match(pool_rows)`` gives each pool row
its strongest ``Match`` (exact > near_duplicate > same_chain, then the higher score, then (eval_set,
eval_id)) or None; ``.matches`` gives all of them. The caller streams the pool in batches. Rows are plain
dicts (``rows``): ``eval_row``/``pool_row`` make them from Question rows, ``read_eval_file`` from an
evaluation file in its dataset's official format. bench/decontamination_rules.py measures the rules
(recall per kind of built contamination, false positives among real questions) and chose the thresholds;
bench/decontamination.py measures the index at full size.

Modules: ``rows`` (evaluation and pool rows), ``similarity`` and ``typos`` (the near-duplicate score),
``chain`` (the same-chain keys), ``index`` (``EvalIndex``), ``eval_sets`` (the run's evaluation files),
``run`` (the stage's work), ``flagged`` (what the generation stages read). This file imports none of
them: ``flagged`` is imported by every stage that draws questions, which need nothing else here.
"""
