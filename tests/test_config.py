import re
from pathlib import Path

import pytest
import yaml

from factory.cli import main
from factory.names import check_names
from factory.params.config import Params, load_params, validate_params
from factory.params.profiles import profile_params, render_current, render_profile
from factory.utils.errors import FactoryError

ROOT = Path(__file__).resolve().parents[1]


def _fields(model, prefix=""):
    from pydantic import BaseModel

    for name, field in type(model).model_fields.items():
        value = getattr(model, name)
        yield prefix + name, field
        if isinstance(value, BaseModel):
            yield from _fields(value, prefix + name + ".")


def test_every_param_is_documented():
    missing = [name for name, field in _fields(Params()) if not field.description]
    assert not missing


def test_params_yaml_is_the_demo_profile_and_shows_every_key():
    text = (ROOT / "params.yaml").read_text()
    # the committed file is exactly what `factory params --profile demo` renders: values and comments current
    assert text == render_profile("demo", profile_params("demo"))
    assert load_params(ROOT / "params.yaml") == profile_params("demo")
    # every key of the typed config appears in it, set or commented at its default, under its description
    lines = text.splitlines()
    for name, _ in _fields(Params()):
        key = name.split(".")[-1] + ":"
        idx = [i for i, line in enumerate(lines) if line.strip().removeprefix("# ").startswith(key)]
        assert idx, f"{name} missing from params.yaml"
        assert lines[idx[0] - 1].strip().startswith("#"), f"{name} has no comment"


def test_a_params_file_sets_the_protocol_and_what_differs_and_comments_the_rest():
    params = load_params(None, ["llm.timeout_s=30", "grounding.llm.model=judge"])
    text = render_current(params)
    data = yaml.safe_load(text)
    assert data["llm"]["timeout_s"] == 30 and data["grounding"]["llm"] == {"model": "judge"}
    assert "  # max_retries: 5" in text and "max_retries" not in data["llm"]  # a default: commented
    assert data["trajectories"]["n_questions"] == 24  # a protocol key: written at its default too
    assert data["ingest"] == {} and "  # on_bad_record: quarantine" in text  # nothing set: an empty section
    assert load_params_text(text) == params  # the file reads back as the same params
    # a key set by hand under an empty section, its {} deleted as the header says
    edited = text.replace("ingest: {}", "ingest:").replace(
        "  # on_bad_record: quarantine", "  on_bad_record: fail"
    )
    assert load_params_text(edited).ingest.on_bad_record == "fail"


def load_params_text(text: str) -> Params:
    return validate_params(yaml.safe_load(text))


def test_set_overrides_are_yaml_parsed_and_validated():
    p = load_params(
        None,
        ["trajectories.n_questions=8", "bootstrap.variants=[backtrace]", "llm.base_urls=[http://a:8000/v1]"],
    )
    assert (
        p.trajectories.n_questions == 8
        and p.bootstrap.variants == ["backtrace"]
        and p.llm.base_urls == ["http://a:8000/v1"]
    )
    with pytest.raises(FactoryError, match="trajectories.n_questions"):
        load_params(None, ["trajectories.n_questions=zero"])
    with pytest.raises(FactoryError, match="bootstrap"):
        check_names(load_params(None, ["bootstrap.variants=[backtrack]"]))


def test_round_slots_must_match_their_index():
    with pytest.raises(FactoryError, match=r"rounds\[1\] must be"):
        load_params(None, ["bootstrap.rounds=[{round: 0, after: init}, {round: 2, after: round_0}]"])


def test_one_more_round_than_slots_says_the_slots_to_give():
    """The demo has a slot per round it runs: asking for a third round says how to give its slot, in a form
    `dvc exp run -S` reads (Hydra's override grammar) and that loads."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    two = "bootstrap.rounds=[{round: 0, after: init}, {round: 1, after: round_0}]"
    with pytest.raises(FactoryError, match="needs at least that many entries") as error:
        load_params(None, [two, "bootstrap.max_rounds=3"])
    given = str(error.value).split("-S '")[1].split("'")[0]
    (override,) = OverridesParser.create().parse_overrides([given])
    assert [slot.round for slot in load_params(None, [given, "bootstrap.max_rounds=3"]).bootstrap.rounds] == [
        0,
        1,
        2,
    ]
    assert override.value() == [
        {"round": r, "after": "init" if r == 0 else f"round_{r - 1}"} for r in range(3)
    ]


@pytest.mark.parametrize(
    "setting, key",
    [
        ("backtrace.modes=[undirected_shortest, sideways]", "backtrace.modes.1"),
        ("backtrace.target_modes=[oracle]", "backtrace.target_modes.0"),
        ("backtrace.mode=sideways", "backtrace.mode"),
    ],
)
def test_a_value_outside_a_vocabulary_fails_when_params_load_naming_the_key(setting, key):
    with pytest.raises(FactoryError, match=re.escape(key) + r": Input should be"):
        load_params(None, [setting])


def test_a_variant_without_a_registered_object_fails_when_a_command_loads_its_params(capsys):
    # the params room checks no registry name (it imports none): the CLI does, before any work
    assert main(["params", "--set", "bootstrap.variants=[backtrace, backtrack]"]) == 1
    message = capsys.readouterr().err
    assert "bootstrap.variants.1: unknown supervision variant 'backtrack'" in message
    assert "backtrace, random, unfiltered, authors_rule" in message and "#adding-a-variant" in message
    assert "Value error" not in message
    params = check_names(load_params(None, ["bootstrap.variants=[authors_rule]"]))
    assert params.bootstrap.variants == ["authors_rule"]


def test_a_variant_name_is_checked_again_where_it_is_looked_up():
    from factory.variants import registry

    with pytest.raises(FactoryError, match="unknown supervision variant 'backtrack'.*#adding-a-variant"):
        registry.variant(load_params(None, ["bootstrap.variants=[backtrack]"]).bootstrap.variants[0])


@pytest.mark.parametrize(
    "setting, key",
    [
        ("trajectories.datasets=[hotpotqa, hotpot]", "trajectories.datasets.1"),
        ("corpora={hotpot: [a.json]}", "corpora.hotpot"),
        ("ingest.hf=[{dataset: hotpot, path: x}]", "ingest.hf.0.dataset"),
    ],
)
def test_a_dataset_the_registry_lacks_fails_naming_the_key_and_the_known_datasets(setting, key):
    with pytest.raises(FactoryError) as err:
        check_names(load_params(None, [setting]))
    message = str(err.value)
    assert f"{key}: unknown dataset 'hotpot': the corpora are hotpotqa, 2wikimultihopqa, musique" in message
    assert "docs/development.md#adding-a-corpus" in message and "Value error" not in message


def test_the_default_names_and_every_profiles_names_are_registered():
    from factory.corpora import names
    from factory.params.profiles import PROFILES
    from factory.variants.registry import NAMES

    defaults = Params()
    assert list(defaults.trajectories.datasets) == list(defaults.corpora)
    assert set(defaults.corpora) <= set(names())  # a new corpus may be set in params.yaml instead
    assert set(defaults.bootstrap.variants) <= set(NAMES)
    for name in PROFILES:
        check_names(profile_params(name))  # raises on a name no registry holds


@pytest.mark.parametrize(
    "key", ["backtrace.modes", "backtrace.target_modes", "trajectories.datasets", "bootstrap.variants"]
)
def test_an_empty_vocabulary_list_is_refused(key):
    with pytest.raises(FactoryError, match=re.escape(key)):
        load_params(None, [f"{key}=[]"])


def test_the_allowed_tuples_are_the_literals():
    from typing import get_args

    from factory.params import vocab

    assert vocab.BACKTRACE_MODES == get_args(vocab.BacktraceMode)
    assert vocab.TARGET_MODES == get_args(vocab.TargetMode)


@pytest.mark.parametrize(
    "setting, message",
    [
        ("ingest.max_per_dataset=-1", "ingest.max_per_dataset: Input should be greater than or equal to 1"),
        ("index.recall_at=[-2, 5]", "index.recall_at.0: Input should be greater than or equal to 1"),
        ("index.recall_at=[0]", "index.recall_at.0: Input should be greater than or equal to 1"),
        ("index.recall_at=[]", "index.recall_at: List should have at least 1 item"),
        ("splits.heldout=1", "splits.heldout: Input should be less than 1"),
        ("splits.official={a.json: test}", "splits.official.a.json: Input should be 'train' or 'dev'"),
        ("splits.heldout=-0.1", "splits.heldout: Input should be greater than or equal to 0"),
        ("bootstrap.seeds=[0, -1]", "bootstrap.seeds.1: Input should be greater than or equal to 0"),
        ("trajectories.seed=-3", "trajectories.seed: Input should be greater than or equal to 0"),
        ("simulate.noise_levels=[0.5, 2]", "simulate.noise_levels.1: Input should be less than or equal"),
        ("relevance.bar=1.5", "relevance.bar: Input should be less than or equal to 1"),
        ("trace.reward_weights={format: -1}", "trace.reward_weights.format: Input should be greater than"),
    ],
)
def test_a_value_out_of_range_fails_when_params_load_naming_the_key(setting, message):
    with pytest.raises(FactoryError, match=re.escape(message)):
        load_params(None, [setting])


def test_an_empty_corpus_list_leaves_the_dataset_out():
    params = load_params(None, ["corpora.musique=[]"])
    assert list(params.corpora) == ["hotpotqa", "2wikimultihopqa"]
    assert "musique" not in yaml.safe_load(render_current(params))["corpora"]


def test_on_and_off_mean_what_they_say_although_yaml_reads_them_as_booleans():
    assert load_params(None, ["llm.constrained=on"]).llm.constrained == "on"
    assert validate_params(yaml.safe_load("llm: {constrained: off}")).llm.constrained == "off"


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("llm.base_url=http://gpu1:8000/v1", "unknown key llm.base_url: did you mean llm.base_urls?"),
        (
            "trajectories.n_question=8",
            "unknown key trajectories.n_question: did you mean trajectories.n_questions?",
        ),
        (
            "evaluate.samples=4",
            "unknown key evaluate.samples: did you mean trajectories.samples?",
        ),  # other section
        ("llm.xyz=1", "unknown key llm.xyz: the keys of llm are backend, model, base_urls,"),
    ],
)
def test_an_unknown_key_suggests_the_closest_known_one(setting, message):
    with pytest.raises(FactoryError) as exc:
        load_params(None, [setting])
    assert f"--set {setting}: {message}" in str(exc.value)


def test_an_unknown_key_in_the_params_file_names_the_file(tmp_path):
    path = tmp_path / "mine.yaml"
    path.write_text("llm:\n  base_url: [http://gpu1:8000/v1]\n")
    with pytest.raises(FactoryError) as exc:
        load_params(path)
    assert f"{path}: unknown key llm.base_url: did you mean llm.base_urls?" in str(exc.value)


def test_a_list_given_one_value_says_how_to_write_the_list(tmp_path):
    with pytest.raises(FactoryError) as exc:
        load_params(None, ["llm.base_urls=http://gpu1:8000/v1"])
    assert "llm.base_urls is a list: write --set 'llm.base_urls=[http://gpu1:8000/v1]'" in str(exc.value)
    written = "corpora.hotpotqa=[/data/hotpot_train_v1.1.json]"  # the way the message says
    assert load_params(None, [written]).corpora["hotpotqa"] == ["/data/hotpot_train_v1.1.json"]
    path = tmp_path / "params.yaml"
    path.write_text("corpora:\n  hotpotqa: /data/hotpot_train_v1.1.json\n")
    with pytest.raises(FactoryError) as exc:
        load_params(path)
    assert f"corpora.hotpotqa is a list: write hotpotqa: [/data/hotpot_train_v1.1.json] in {path}" in str(
        exc.value
    )
