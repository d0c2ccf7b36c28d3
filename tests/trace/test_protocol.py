"""The TRACE protocol text: passage numbering, gold reference, chain order of the target."""

from __future__ import annotations

from factory.trace.protocol import chain_order, gold_reference, numbered_passages


def test_gold_reference_and_numbering():
    q = {"supporting": [{"title": "A", "sent_idx": 0, "pid": "a"}, {"title": "B", "sent_idx": 1, "pid": "b"}]}
    assert gold_reference(q, ["x", "a", "b"]) == ([2, 3], "full")
    assert gold_reference(q, ["b", "x"]) == ([1], "partial")
    assert gold_reference(q, ["x"]) == ([], "none")
    t = {
        "steps": [
            {"index": 2, "retrieved": ["c", "a"]},
            {"index": 0, "retrieved": []},
            {"index": 1, "retrieved": ["a", "b"]},
        ]
    }
    assert numbered_passages(t, 8) == (["a", "b", "c"], 3)
    assert numbered_passages(t, 2) == (["a", "b"], 3)


def test_chain_order_follows_the_chain():
    def tr(i, s, o):
        return {"triplet_id": f"t{i}", "step_index": i, "subject": s, "relation": "r", "object": o}

    # created out of chain order: the chain is Van Hook -> Mountrail County -> Stanley
    triplets = [
        tr(0, "Mountrail County", "Stanley"),
        tr(1, "Unrelated Person", "Somewhere"),
        tr(2, "Van Hook Township", "Mountrail County"),
    ]
    ordered = chain_order(triplets, ["van hook township"])
    assert [t["triplet_id"] for t in ordered] == ["t2", "t0", "t1"]
    # no initial entities: subjects named in the question start the chain
    assert [
        t["triplet_id"]
        for t in chain_order(triplets, [], "Where is the capital of Van Hook Township's county?")
    ] == ["t2", "t0", "t1"]
    # a chain reached through an object (reverse direction) comes before unconnected facts
    back = [
        tr(0, "Somewhere", "Else"),
        tr(1, "Stanley", "Mountrail County"),
        tr(2, "Mountrail County", "North Dakota"),
    ]
    assert [t["triplet_id"] for t in chain_order(back, ["north dakota"])] == ["t2", "t1", "t0"]
