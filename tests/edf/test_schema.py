"""/edf/schema.json agrees with the validator: same fields and types, same annotation values, and on
every corpus file and on generated documents it rejects exactly what the validator calls a type or
value error (the rules a JSON Schema can express)."""
import re
import tomllib
from pathlib import Path

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from apps.edf.schema import edf_json_schema
from apps.edf.validator import ERROR, path_text, validate
from apps.edf.vocabulary import ANNOTATIONS, FIELDS

CORPUS = Path(__file__).parent / "corpus"
SCHEMA_RULES = {"type", "env-value-type", "annotation-value-type", "annotation-value", "ssh-key-text"}
SCHEMA = edf_json_schema()
CHECKER = jsonschema.Draft202012Validator(SCHEMA)


def _normalise(path: str) -> str:
    return re.sub(r"(\[\d+\])+$", "", path)


def schema_error_paths(data: dict) -> set[str]:
    paths = set()
    for error in CHECKER.iter_errors(data):
        paths.add(_normalise(path_text(tuple(error.absolute_path))))
    return paths


def validator_error_paths(text: str) -> set[str]:
    return {_normalise(f.path) for f in validate(text).findings if f.severity == ERROR and f.rule in SCHEMA_RULES}


def _within(path: str, prefix: str) -> bool:
    return path == prefix or (path.startswith(prefix) and path[len(prefix)] in ".[")


def assert_agree(schema_paths: set[str], validator_paths: set[str]) -> None:
    """The schema may report a wrong value where its subtree starts (anyOf over nested tables); the
    validator reports the exact key. Each side's errors must be covered by the other's."""
    assert all(any(_within(v, s) for v in validator_paths) for s in schema_paths), (schema_paths, validator_paths)
    assert all(any(_within(v, s) for s in schema_paths) for v in validator_paths), (schema_paths, validator_paths)


def test_schema_is_a_valid_json_schema():
    jsonschema.Draft202012Validator.check_schema(SCHEMA)


def test_schema_has_every_field_with_the_validators_types():
    assert set(SCHEMA["properties"]) == set(FIELDS)
    for key, spec in FIELDS.items():
        prop = SCHEMA["properties"][key]
        kinds = {v["type"] for v in prop.get("anyOf", [prop])}
        assert kinds == {{"table": "object"}.get(kind, kind) for kind in spec.kinds}, key
        assert prop["description"] == spec.doc


def test_schema_has_every_annotation_with_its_values():
    for flat, spec in ANNOTATIONS.items():
        node = SCHEMA["properties"]["annotations"]
        for part in flat.split("."):
            node = node["properties"][part]
        assert node["type"] == "string"
        if spec.kind == "enum":
            assert set(node["enum"]) == set(spec.values) | set(spec.retired), flat


def _loads(path):
    try:
        return tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError:
        return None


def toml_corpus_files():
    """Corpus files that are TOML (the syntax-error cases are test_corpus's business)."""
    return [p for p in sorted(CORPUS.rglob("*.toml")) if _loads(p) is not None]


@pytest.mark.parametrize("path", toml_corpus_files(), ids=lambda p: str(p.relative_to(CORPUS)))
def test_schema_and_validator_agree_on_the_corpus(path):
    assert_agree(schema_error_paths(_loads(path)), validator_error_paths(path.read_text()))


def test_the_corpus_exercises_the_schema():
    """Guard against an agreement test that passes because nothing is ever rejected."""
    assert len(toml_corpus_files()) >= 30
    assert sum(bool(schema_error_paths(_loads(p))) for p in toml_corpus_files()) >= 5


scalars = st.one_of(st.booleans(), st.integers(-5, 70000), st.sampled_from(
    ["true", "false", "TRUE", "yes", "cuda12", "cuda11", "cuda-dl", "host", "artifact", "15263", "99999",
     "/users/a/.ssh/k.pub", "ssh-ed25519 AAAA", "k.pub", "", "${HOME}/k.pub", "x"]))
annotation_keys = st.sampled_from(sorted(ANNOTATIONS) + ["com.hooks.ssh.extra", "org.example.note"])


def _toml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


@st.composite
def documents(draw):
    lines = []
    for key in draw(st.lists(st.sampled_from(["image", "workdir", "entrypoint", "writable", "base_environment"]), unique=True)):
        lines.append(f"{key} = {_toml_value(draw(scalars))}")
    if draw(st.booleans()):
        items = draw(st.lists(st.one_of(scalars, st.just("/a:/b")), max_size=3))
        lines.append("mounts = [" + ", ".join(_toml_value(v) for v in items) + "]")
    env = draw(st.dictionaries(st.sampled_from(["A", "NCCL_DEBUG", "B"]), scalars, max_size=3))
    annotations = draw(st.dictionaries(annotation_keys, scalars, max_size=4))
    if env:
        lines.append("[env]")
        lines += [f"{k} = {_toml_value(v)}" for k, v in env.items()]
    if annotations:
        lines.append("[annotations]")
        # a key that is a prefix of another would redefine a table: keep the TOML valid
        keys = [k for k in annotations if not any(o != k and o.startswith(k + ".") for o in annotations)]
        lines += [f"{k} = {_toml_value(annotations[k])}" for k in keys]
    return "\n".join(lines) + "\n"


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(documents())
def test_schema_and_validator_agree_on_generated_documents(text):
    assert_agree(schema_error_paths(tomllib.loads(text)), validator_error_paths(text))
