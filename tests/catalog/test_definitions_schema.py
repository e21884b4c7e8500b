"""The shape of a product file (PRODUCT_SCHEMA, checked with jsonschema): unknown keys per source kind, closed
choices when missing, the explorer's keys only for telemetry; each problem at its line and dotted path."""
from apps.catalog.definitions import ProductInvalid, load_product
from apps.catalog.services import field_units
from tests.catalog.test_definitions import GOOD


def problems(text: str) -> dict[str, tuple[int, str]]:
    """path -> (line, message) of every problem; empty when the file loads."""
    try:
        load_product(text, "p.yaml", field_units=field_units())
    except ProductInvalid as exc:
        return {problem.path: (problem.line, problem.message) for problem in exc.problems}
    return {}


def test_source_keys_depend_on_its_kind():
    found = problems(GOOD.replace("source: {kind: telemetry}", "source: {kind: telemetry, index: slingshot-*}"))
    assert found == {"source.index": (11, "unknown key; allowed here: kind, store")}
    # the same key is right for an Elasticsearch source
    text = GOOD.replace("source: {kind: telemetry}", "source: {kind: elasticsearch, index: slingshot-*}")
    assert problems(text.replace(", field: 155", "").replace("  sampling_period: 60s\n", "")) == {}


def test_a_missing_closed_choice_lists_the_choices():
    found = problems(GOOD.replace("status: active\n", "").replace("{name: ts, type: timestamp, unit: UTC}", "{name: ts, unit: UTC}"))
    assert found["status"][1] == "one of proposed, active, deprecated, retired"
    assert found["schema.0.type"] == (8, "one of string, integer, double, timestamp, boolean, bitmask, code")
    assert problems(GOOD.replace("source: {kind: telemetry}", "source: {store: default}"))["source.kind"] == (
        11, "one of telemetry, elasticsearch, model, api")


def test_explorer_keys_are_checked_for_telemetry_and_other_sources_get_one_sentence():
    found = problems(GOOD + "explorer: {fields: [155], group_by: rack, colour: red}\n")
    assert found == {"explorer.group_by": (17, "one of host, gpu, field, none"),
                     "explorer.colour": (17, "unknown key; allowed here: fields, group_by, stat, step, window")}
    text = (GOOD.replace("source: {kind: telemetry}", "source: {kind: api, url: 'https://x.example/a', time_path: t}")
            .replace(", field: 155", "").replace("  sampling_period: 60s\n", "") + "explorer: {colour: red}\n")
    assert problems(text) == {"explorer": (16, "the explorer plots telemetry; other sources have their own pages")}
