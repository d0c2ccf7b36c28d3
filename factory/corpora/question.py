"""A Question row (docs/design.md §8) assembled from a raw record's fields and its paragraphs' pool
entries."""

from __future__ import annotations

from factory.corpora.base import RecordRef
from factory.corpora.pool import PassagePool
from factory.utils.text import normalize_question

# What a question may have (the ingest gate asserts the same, validators.ingest): a record outside is
# quarantined where it is read.
MIN_HOPS, MAX_HOPS = 2, 10


def make_question(
    reader: RecordRef,
    *,
    question: str,
    answers: list[str],
    qtype: str,
    route: str,
    hops: int,
    pool: PassagePool,
    entries: list[int],
    supporting: list[tuple[str, int]] | None = None,
    supporting_idx: list[int] | None = None,
    level: str | None = None,
    evidences: list[dict] | None = None,
    decomposition: list[dict] | None = None,
    source_file: str,
    paragraph_field: str = "context[{}]",
    hops_field: str = "supporting_facts",
) -> dict:
    """Assemble a Question row whose ``passages`` are the ``entries`` of its paragraphs in ``pool``
    (``factory.corpora.table`` turns them into the contract's column); checks answers and
    supporting facts.

    ``supporting`` gives (title, sentence index) facts; ``supporting_idx`` gives supporting
    paragraph positions instead (MuSiQue, recorded with sent_idx = -1). ``paragraph_field`` (a format
    string of the paragraph's position) and ``hops_field`` name the fields in the record's own format.
    """
    dataset = reader.dataset
    if pool.blank and not pool.blank.isdisjoint(entries):
        i = next(i for i, e in enumerate(entries) if e in pool.blank)
        reader.fail(paragraph_field.format(i), f"paragraph {pool.titles[entries[i]]!r} has no text")
    if not MIN_HOPS <= hops <= MAX_HOPS:
        reader.fail(hops_field, f"{hops} hops: a question has between {MIN_HOPS} and {MAX_HOPS}")
    answers = [a for a in answers if isinstance(a, str)]
    if not answers or not answers[0].strip():
        reader.fail("answer", "empty answer")
    support_rows = []
    if supporting:
        titles = list(map(pool.titles.__getitem__, entries))
        for title, idx in supporting:
            try:
                entry = entries[titles.index(title)]  # the first paragraph of that title
            except ValueError:
                reader.fail("supporting_facts", f"title {title!r} is not in the record's context")
            n_sentences = len(pool.sentences[entry])
            if not 0 <= idx < n_sentences:
                reader.fail(
                    "supporting_facts",
                    f"sentence index {idx} is out of range for {title!r} ({n_sentences} sentences)",
                )
            support_rows.append({"title": title, "sent_idx": idx, "pid": pool.pids[entry]})
    for pos in supporting_idx or []:
        entry = entries[pos]
        support_rows.append({"title": pool.titles[entry], "sent_idx": -1, "pid": pool.pids[entry]})
    if not support_rows:
        reader.fail("supporting_facts", "no supporting facts")
    return {
        "question_id": f"{dataset}/{reader.id}",
        "dataset": dataset,
        "source_id": reader.id,
        "split": "",  # assigned from the official split when the row group is complete (factory.utils.splits)
        "official_split": "",  # the source's (factory.corpora.official), set by ingest
        "question": question,
        "question_norm": normalize_question(question),
        "answers": answers,
        "qtype": qtype,
        "level": level,
        "route": route,
        "hops": hops,
        "passages": entries,
        "supporting": support_rows,
        "evidences": evidences,
        "decomposition": decomposition,
        "source_file": source_file,
    }
