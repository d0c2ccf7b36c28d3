"""Entity linking: normalisation, variant merging, the linking tiers, mention extraction."""

from __future__ import annotations

import random
import re

import numpy as np
from rapidfuzz import fuzz

from factory.backtrace.linking import Linker, fair_subset, sentence_embedder
from factory.backtrace.nodes import contains_words, merge_variants, node_key, normalize_entity
from factory.params.label_sections import BacktraceParams
from factory.utils.text import normalize_answer


def test_normalize_entity_equals_official_normalisation(ingested):
    names = [p["title"] for p in ingested.passages[:3000]] + [
        "The  U.S.A.!",
        "an Apple a day",
        "Ünïcode—dash",
        "",
        "  A  ",
    ]
    for name in names:
        # a possessive "'s" goes first (test_possessives_match_their_name); the rest is the official rule
        assert normalize_entity(name) == normalize_answer(re.sub(r"['’]s\b", "", name)), name


def test_possessives_match_their_name():
    assert normalize_entity("Michael Douglas's") == normalize_entity("Michael Douglas’s") == "michael douglas"
    assert normalize_entity("SHAKESPEARE'S REPUTATION") == normalize_entity("Shakespeare's reputation")
    linker = Linker.from_names(["Michael Douglas", "Kent", "Tom Clancy's Net Force"])
    assert linker.mentions("Who is Michael Douglas's father?") == ["michael douglas"]
    assert linker.link("Kent’s") == ["kent"]
    assert linker.link("Tom Clancy’s Net Force") == ["tom clancy net force"]  # curly or straight


def test_node_key_keeps_names_that_normalise_to_nothing():
    assert node_key("The") == "the" and node_key("!!") == "!!"
    assert node_key("Sleep, My Love.") == node_key("sleep my love") == "sleep my love"


def test_contains_words_is_whole_word():
    assert contains_words("hiran region of somalia", "somalia")
    assert not contains_words("somaliland", "somalia")
    assert not contains_words("anything", "")


def test_merge_variants_containment_ambiguity_and_numbers():
    names = [
        "somalia",
        "hiran region of somalia",
        "american",
        "american football league",
        "american airlines",
        "charles howard",
        "charles howard 1st earl of carlisle",
        "8",
        "march 8 1975",
        "the",
    ]
    node = merge_variants(names)
    assert node["somalia"] == "hiran region of somalia"  # unambiguous containment: one node
    assert node["charles howard"] == "charles howard 1st earl of carlisle"
    assert node["american"] == "american"  # inside two different names: ambiguous, stays apart
    assert node["8"] == "8" and node["march 8 1975"] == "march 8 1975"  # numbers never merge by containment
    assert node["the"] == "the"
    assert merge_variants(names, BacktraceParams(containment=False)) == {n: n for n in names}


def test_merge_variants_chain_of_containment_and_order_independence():
    names = ["somalia", "region of somalia", "hiran region of somalia", "mogadishu"]
    node = merge_variants(names)
    assert {node[n] for n in names[:3]} == {"hiran region of somalia"} and node["mogadishu"] == "mogadishu"
    rng = random.Random(0)
    for _ in range(5):
        shuffled = names[:]
        rng.shuffle(shuffled)
        assert merge_variants(shuffled) == node


def test_merge_variants_respects_distinct_pairs():
    # (Lisburn Distillery FC ; nickname ; Distillery): subject and object are two entities
    names = ["lisburn distillery fc", "distillery"]
    assert merge_variants(names)["distillery"] == "lisburn distillery fc"
    assert (
        merge_variants(names, distinct=[("lisburn distillery fc", "distillery")])["distillery"]
        == "distillery"
    )


def linker(names: list[str], embedder=None, **fields) -> Linker:
    return Linker.from_names(names, BacktraceParams(**fields), embedder)


def test_link_tiers_in_order():
    lk = linker(["Scott Derrickson", "Hiran region of Somalia", "Ed Wood", "American"])
    assert lk.link_with_method("scott derrickson.") == (["scott derrickson"], "exact")
    assert lk.link_with_method("Somalia") == (["hiran region of somalia"], "containment")
    assert lk.link_with_method("Derrickson, Scott") == (["scott derrickson"], "fuzzy")  # token_set_ratio 100
    assert lk.link_with_method("Scot Derickson") == (["scott derrickson"], "fuzzy")  # typos
    assert lk.link_with_method("Scott Eastwood") == ([], "none")  # one shared token is not enough
    assert lk.link_with_method("") == ([], "none")
    assert lk.link("Orson Welles") == []


def test_link_fuzzy_threshold_and_containment_switch():
    lk = linker(["Sergei Aleksandrovich Tokarev"], fuzzy_threshold=80.0)
    assert lk.link_with_method("Sergei Aleksandrovich Tokarevv")[1] == "fuzzy"
    strict = linker(["Sergei Aleksandrovich Tokarev"], fuzzy_threshold=100.0, containment=False)
    assert strict.link("Sergei Aleksandrovich Tokarevv") == []
    # without the containment tier, a sub-name is still found by token_set_ratio (subset = 100)
    assert strict.link("Tokarev") == ["sergei aleksandrovich tokarev"]


def test_link_ties_are_deterministic():
    lk = linker(["Paris Texas", "Paris Maine", "Paris Hilton"])
    # "paris" is inside two names: both are equally close by character similarity -> both, sorted
    assert lk.link("Paris") == ["paris maine", "paris texas"]  # not the longer, less similar one


def test_mentions_longest_first_and_spans_consumed():
    lk = linker(["Hiran region of Somalia", "Somalia", "Mogadishu", "Kenya", "Hiran"], containment=False)
    text = "He was born in the Hiran region of Somalia, not in Mogadishu."
    assert lk.mentions(text) == ["hiran region of somalia", "mogadishu"]  # 'somalia' and 'hiran' consumed
    assert lk.mentions("Somalia borders Kenya; Hiran region of Somalia too") == [
        "hiran region of somalia",
        "somalia",
        "kenya",
    ]
    assert lk.mentions("") == [] and lk.mentions("nothing here") == []


def test_containing_includes_numbers():
    lk = linker(["founded in 1755", "Moscow State University", "1755 Hall"])
    assert lk.containing("1755") == ["1755 hall", "founded in 1755"]
    assert lk.containing("") == []


def test_embedding_tier_with_an_injected_embedder():
    vocab = {"new york city": [1.0, 0.0], "big apple": [0.98, 0.2], "london": [0.0, 1.0]}

    def embed(texts):
        vecs = np.array([vocab.get(t, [0.5, 0.5]) for t in texts], dtype=np.float32)
        return vecs / np.linalg.norm(vecs, axis=1, keepdims=True)

    lk = linker(["New York City", "London"], embedder=embed, embedding_threshold=0.9)
    assert lk.link_with_method("Big Apple") == (["new york city"], "embedding")
    assert linker(["New York City", "London"]).link("Big Apple") == []  # off by default


def test_mentioned_and_containing_equals_the_two_passes():
    lk = linker(["Hiran region of Somalia", "Somalia", "founded in 1755", "1755 Hall", "Kenya"])
    for text in ("Somalia", "1755", "Hiran region of Somalia and Kenya", "", "nothing"):
        found, containing = lk.mentioned_and_containing(text)
        assert found == lk.mentions(text) and containing == set(lk.containing(text)), text


def test_numbers_years_letters_short_tokens_and_common_words_never_link_by_subset():
    lk = linker(["March 8, 1975", "B movie", "US Route 167", "Red (film series)", "Mexico City", "Kansas"])
    # rapidfuzz's token_set_ratio scores a token subset as 100: these were all links before the guard
    assert fuzz.token_set_ratio("8", "march 8 1975") == 100
    assert lk.link_with_method("8") == ([], "none")
    assert lk.link_with_method("1975") == ([], "none")  # a year
    assert lk.link_with_method("B") == ([], "none")  # a single letter
    assert lk.link_with_method("US") == ([], "none")  # a short token
    assert lk.link_with_method("film") == ([], "none")  # common words
    assert lk.link_with_method("city") == ([], "none")
    # exact matches and specific subsets still link
    assert lk.link_with_method("kansas") == (["kansas"], "exact")
    assert lk.link_with_method("Mexico") == (["mexico city"], "containment")


def test_fair_subset_needs_a_shared_strong_token():
    assert not fair_subset("8", "march 8 1975") and not fair_subset("city", "mexico city")
    assert fair_subset("jonathan reid", "jonathan douglass reid")  # a subset through strong tokens
    assert fair_subset("scot derickson", "scott derrickson")  # no subset at all (typos): not affected


def test_fuzzy_subset_links_a_shortened_name():
    lk = linker(["Jonathan Douglass Reid", "Nashville"], containment=False)
    assert lk.link_with_method("Jonathan Reid") == (["jonathan douglass reid"], "fuzzy")


def test_merges_need_a_strong_token():
    node = merge_variants(
        ["author", "american author", "12th", "12th most populous city", "uk", "uk singles"]
    )
    assert node["author"] == "author" and node["12th"] == "12th" and node["uk"] == "uk"


def test_candidates_report_ambiguous_mentions():
    lk = linker(["1906 Summer Olympics", "2018 Winter Olympics", "Kansas"])
    nodes, tier = lk.candidates("Olympics")
    assert tier == "containment" and nodes == ["1906 summer olympics", "2018 winter olympics"]
    assert lk.candidates("Kansas") == (["kansas"], "exact")


def test_embedding_tier_is_for_specific_names_only():
    # numbers embed close to each other: "1995" must not link to "1994"
    def embed(texts):
        vecs = np.array([[1.0, 0.0] if t[:1].isdigit() else [0.0, 1.0] for t in texts], dtype=np.float32)
        return vecs

    lk = linker(["1994", "Norwegian government"], embedder=embed, embedding_threshold=0.5)
    assert lk.link_with_method("1995") == ([], "none")
    assert lk.link_with_method("Norway") == (["norwegian government"], "embedding")


def test_sentence_embedder_memoises_names(monkeypatch):
    import factory.retrieval.dense as dense

    calls = []

    class Model:
        def encode(self, texts, **kw):
            calls.append(list(texts))
            return np.eye(len(texts), 3, dtype=np.float32)

    monkeypatch.setattr(dense, "encoder", lambda name: Model())
    embed = sentence_embedder("any")
    first = embed(["a", "b"])
    again = embed(["b", "a", "c"])
    assert calls == [["a", "b"], ["c"]]  # each text encoded once
    assert np.array_equal(again[0], first[1]) and np.array_equal(again[1], first[0])
