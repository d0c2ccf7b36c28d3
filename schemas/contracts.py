"""The data contracts of every artifact (docs/design.md §8): one pyarrow schema each, by artifact name.

Fields marked ``nullable=False`` are required. Contracts are shared across stages: extend them,
never rename a field. How a contract is checked is ``schemas.validate``; how artifacts are written
and read is ``schemas.write`` and ``schemas.read``.
"""

from __future__ import annotations

import pyarrow as pa

S, I32, I64, F64, B = pa.string(), pa.int32(), pa.int64(), pa.float64(), pa.bool_()


def _req(name: str, typ: pa.DataType) -> pa.Field:
    return pa.field(name, typ, nullable=False)


def _opt(name: str, typ: pa.DataType) -> pa.Field:
    return pa.field(name, typ, nullable=True)


MESSAGE = pa.struct([_req("role", S), _req("content", S)])
PASSAGE_REF = pa.struct([_req("pid", S), _req("title", S), _req("sentences", pa.list_(S))])
SUPPORT = pa.struct([_req("title", S), _req("sent_idx", I32), _req("pid", S)])  # pid: the resolved passage
TRIPLE = pa.struct([_req("subject", S), _req("relation", S), _req("object", S)])
DECOMPOSITION = pa.struct(
    [_req("id", S), _req("question", S), _req("answer", S), _opt("paragraph_support_idx", I32)]
)

QUESTION = pa.schema(
    [
        _req("question_id", S),  # "<dataset>/<source id>"
        _req("dataset", S),  # a name of factory.corpora's registry (CORPORA)
        _req("source_id", S),
        _req("split", S),  # train | heldout (official train) | test (official dev)
        _req("official_split", S),  # train | dev: the official split of the file it was read from
        _req("question", S),
        _req("question_norm", S),  # normalised text: the key of duplicate detection and leakage checks
        _req("answers", pa.list_(S)),  # gold answer first, then aliases
        _req("qtype", S),  # the corpus's own type (bridge, comparison, 2hop, ...)
        _opt("level", S),
        _req("route", S),  # chain | parallel (DTKG)
        _req("hops", I32),
        _req("passages", pa.list_(PASSAGE_REF)),  # the question's own context pool, in corpus order
        _req("supporting", pa.list_(SUPPORT)),  # MuSiQue: supporting paragraphs with sent_idx = -1
        _opt("evidences", pa.list_(TRIPLE)),  # 2Wiki
        _opt("decomposition", pa.list_(DECOMPOSITION)),  # MuSiQue
        _req("source_file", S),
    ]
)

PASSAGE = pa.schema(
    [_req("pid", S), _req("dataset", S), _req("title", S), _req("text", S), _req("sentences", pa.list_(S))]
)

PAIR = pa.struct([_req("pair_id", S), _req("entity", S), _req("relation", S)])
STEP = pa.struct(
    [
        _req("index", I32),
        _req("kind", S),  # explore | complete | final
        _req("messages", pa.list_(MESSAGE)),  # the prompt as sent (hint-free for rationalized trajectories)
        _req("output", S),  # raw model output of the accepted attempt (last attempt on failure)
        _req("status", S),  # ok | parse_error | llm_error
        _opt("error", S),
        _opt("sufficient", B),
        _opt("thought", S),
        _opt("answer", S),
        _req("pairs", pa.list_(PAIR)),  # explore: the pairs asked for
        _opt("pair_id", S),  # complete: the pair it answers
        _req("retrieved", pa.list_(S)),  # complete: pids shown
        _req("triplet_ids", pa.list_(S)),  # complete: new triplets it added to G
        _req("attempts", I32),  # 1 + repair re-asks
        _req("prompt_tokens", I32),
        _req("completion_tokens", I32),
        _req(
            "latency_s", F64
        ),  # as first measured (the response cache replays it): reruns stay byte-identical
    ]
)
TRIPLET = pa.struct(
    [
        _req("triplet_id", S),
        _req("step_index", I32),
        _opt("pair_id", S),
        _req("subject", S),
        _req("relation", S),
        _req("object", S),
        _opt("source_pid", S),  # grounding passage; null = ungrounded
        _opt("source_sentence", I32),
        _opt("grounding_score", F64),
    ]
)
TRAJECTORY = pa.schema(
    [
        _req("trajectory_id", S),
        _req("question_id", S),
        _req("dataset", S),
        _req("split", S),
        _req("qtype", S),
        _req("route", S),
        _req("policy", S),  # base | <variant>-r<round> | scripted | simulated
        _req("round", I32),
        _req("sample", I32),
        _req("seed", I64),
        _req("question", S),
        _req("answers", pa.list_(S)),
        _req("prompt_version", S),
        _req("model", S),  # model identity (name + adapter hash)
        _req("status", S),  # ok | max_iterations | parse_error | llm_error
        _opt("error", S),
        _opt("answer", S),
        _opt("final_thought", S),
        _req("em", F64),
        _req("f1", F64),
        _req("correct", B),
        _req("rationalized", B),
        _req("steps", pa.list_(STEP)),
        _req("triplets", pa.list_(TRIPLET)),
        _opt("stop_reason", S),  # sufficient | no_new_triplets | max_iterations | parse_error | llm_error
        _opt("llm_calls", I32),  # every call, repairs included
        _opt("prompt_tokens", I64),  # totals over every call, repairs included
        _opt("completion_tokens", I64),
        _opt("latency_s", F64),
    ]
)

LABELS = pa.schema(
    [
        _req("trajectory_id", S),
        _req("question_id", S),
        _req("mode", S),
        _req("target_mode", S),
        _req("correct", B),
        _req("initial_entities", pa.list_(S)),
        _req("target_entities", pa.list_(S)),
        _req("kept_triplet_ids", pa.list_(S)),
        _req("kept_pair_ids", pa.list_(S)),
        _req("kept_step_indices", pa.list_(I32)),
        _req("path_found", B),
        _req("admin_dropped", I32),
        _req("filtered_tokens", I64),
        _req("total_tokens", I64),
        _req("fa_ratio", F64),
        _req("tokenizer", S),
    ]
)

COUNTERFACTUAL = pa.schema(
    [
        _req("record_id", S),  # "<trajectory_id>/<condition>" (+ "/seed_<k>" for without_random)
        _req("trajectory_id", S),
        _req("question_id", S),
        _req("dataset", S),
        _req("qtype", S),
        _req("route", S),
        _req("variant", S),
        _req("round", I32),
        _req("protocol_seed", I64),
        _req("policy", S),  # the policy re-asked: the one that generated the round
        _req("model", S),  # its backend identity (model + adapter hash)
        _req("prompt_version", S),  # the trajectory's: its forced-final prompt is re-asked
        _req("mode", S),  # the backtrace mode x target mode whose S_q is tested
        _req("target_mode", S),
        _req("condition", S),  # full | without_sq | only_sq | without_random | closed_book
        _opt("random_seed", I64),  # without_random: the draw's seed (recorded); null otherwise
        _req("graph_size", I32),  # |G|
        _req("sq_size", I32),  # |S_q|
        _req("shown_triplet_ids", pa.list_(S)),  # the graph of this condition, in G's order
        _req("output", S),  # raw reply of the accepted (or last) attempt
        _req("status", S),  # ok | parse_error | llm_error
        _opt("error", S),
        _opt("answer", S),
        _req("em", F64),
        _req("f1", F64),
        _req("correct", B),
        _opt("parametric", B),  # the trajectory's closed_book answer is correct (null: not asked closed-book)
        _req("attempts", I32),  # 1 + repair re-asks
        _req("prompt_tokens", I32),
        _req("completion_tokens", I32),
    ]
)

SUPERVISION = pa.schema(
    [
        _req("example_id", S),
        _req("variant", S),
        _req("round", I32),  # the round whose trajectories produced it
        _req("trajectory_id", S),
        _req("question_id", S),
        _req("dataset", S),
        _req("question_norm", S),
        _req("step_index", I32),
        _req("step_kind", S),
        _req("messages", pa.list_(MESSAGE)),  # system/user prompt, then the (re-rendered) assistant output
        _req("units_total", I32),  # pairs (explore) or triplets (complete) the step generated
        _req("units_kept", I32),
        _req("seed", I64),  # random control seed (recorded for every variant)
        _req("policy", S),
    ]
)

# What a variant kept of each correct trajectory of its round (the variants stage's kept.parquet, the
# set's own draw: the TRACE export reads it instead of drawing again). A correct trajectory without a row
# is not in the set (e.g. left out as parametric).
KEPT = pa.schema(
    [
        _req("trajectory_id", S),
        _req("variant", S),
        _req("kept_triplet_ids", pa.list_(S)),  # in trajectory order
        _req("kept_pair_ids", pa.list_(S)),
        _req("kept_step_indices", pa.list_(I32)),
        _req("removed_pairs", I32),
        _req("removed_triplets", I32),
    ]
)

ROUND_METRICS = pa.schema(
    [
        _req("variant", S),
        _req("round", I32),
        _req("seed", I64),
        _req("status", S),  # trained | empty | skipped | base
        _opt("heldout_em", F64),
        _opt("heldout_f1", F64),
        _opt("best_round", I32),
        _opt("best_em", F64),
        _req("examples", I64),
        _opt("fa_ratio", F64),
        _opt("reason", S),
    ]
)

_TRACE_IDS = [
    _req("record_id", S),  # "<variant>/seed_<s>/round_<r>/<trajectory_id>"
    _req("variant", S),
    _req("round", I32),
    _req("seed", I64),  # protocol seed of the chain
    _req("trajectory_id", S),
    _req("question_id", S),
    _req("dataset", S),
    _req("qtype", S),
    _req("route", S),
    _req("policy", S),
]
_TRACE_GOLD = [
    _req("passage_ids", pa.list_(S)),  # the numbered passages [1]..[n], in order
    _req("gold_answers", pa.list_(S)),  # gold answer first, then aliases
    _req("gold_relevant_indices", pa.list_(I32)),  # numbered passages that are gold supporting paragraphs
    _req("gold_coverage", S),  # full | partial | none: share of gold paragraphs among the numbered passages
]
TRACE_SFT = pa.schema(
    _TRACE_IDS
    + [
        _req(
            "messages", pa.list_(MESSAGE)
        ),  # system (protocol), user (question + passages), assistant (target)
        _req("relevance", pa.list_(I32)),  # the target's <relevance> indices
        _req("triplet_ids", pa.list_(S)),  # kept triplets stated in the analysis, in chain order
        _req("answer", S),
    ]
    + _TRACE_GOLD
    + [
        _req(f"reward_{c}", F64) for c in ("format", "accuracy", "relevance", "bonus")
    ]  # what the target earns
)
TRACE_RL = pa.schema(
    _TRACE_IDS
    + [_req("prompt", pa.list_(MESSAGE))]
    + _TRACE_GOLD  # prompt: system + user (TRL conversational)
)

ROUTE_PREDICTIONS = pa.schema(
    [
        _req("question_id", S),
        _req("dataset", S),
        _req("qtype", S),
        _req("gold", S),  # the corpus-derived route
        _req("predicted", S),  # parallel | chain | unknown
        _req("raw", S),  # the model's reply
        _opt("error", S),  # the LLM error when the call failed
        _req("prompt_version", S),
    ]
)

# validate-labels with grounding.judge=llm: one row per lexically grounded triplet of a scored trajectory
ENTAILMENT = pa.schema(
    [
        _req("trajectory_id", S),
        _req("triplet_id", S),
        _req("question_id", S),
        _req("pid", S),  # the passage lexical grounding attributes the triplet to
        _opt("sentence", I32),  # the grounding sentence within it
        _req("subject", S),
        _req("relation", S),
        _req("object", S),
        _opt("entailed", B),  # the judge's verdict: does the passage state the triplet? null: no verdict
        _req("reason", S),  # the judge's reason, or why there is no verdict
        _req("judge", S),  # the judge's model identity
        _req("prompt_version", S),
    ]
)

# decontaminate: one row per question of every evaluation set the training pool was checked against
EVAL_QUESTION = pa.schema(
    [
        _req("eval_set", S),  # "<dataset>/<file name>": a dev file of the run or of decontamination.eval_sets
        _req("dataset", S),
        _req("eval_id", S),  # the record's id in its own file
        _req("question", S),
        _req("question_norm", S),
        _req("answers", pa.list_(S)),
        _req("titles", pa.list_(S)),  # its supporting titles (the reasoning chain's pages)
    ]
)

ARTIFACTS: dict[str, pa.Schema] = {
    "question": QUESTION,
    "passage": PASSAGE,
    "trajectory": TRAJECTORY,
    "labels": LABELS,
    "counterfactual": COUNTERFACTUAL,
    "supervision": SUPERVISION,
    "kept": KEPT,
    "round_metrics": ROUND_METRICS,
    "trace_sft": TRACE_SFT,
    "trace_rl": TRACE_RL,
    "route_predictions": ROUTE_PREDICTIONS,
    "entailment": ENTAILMENT,
    "eval_question": EVAL_QUESTION,
}
