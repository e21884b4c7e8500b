"""Product files: the built-in ones load; every broken one gets its file, line, column, path and what is allowed;
loading keeps a version per change and never half-writes."""
import textwrap

import pytest

from apps.catalog.definitions import ProductInvalid, load_folder, load_product, seconds
from apps.catalog.services import BUILT_IN, field_units

GOOD = textwrap.dedent("""\
    name: demo-power
    title: GPU power
    version: 1.0.0
    status: active
    domain: system telemetry
    description: {purpose: Board power of every GPU}
    owner: {team: HPC operations, contact: hpc-ops@example.org}
    schema:
      - {name: ts, type: timestamp, unit: UTC}
      - {name: power, type: double, unit: W, field: 155}
    source: {kind: telemetry}
    sample_query: {api: "/api/v1/telemetry/series/?host=nid000001&field=155&start={now-1h}&end={now}"}
    slo:
      freshness: {warn: 2m, error: 10m}
      coverage: {target: 0.99, population: topology_gpus}
      sampling_period: 60s
    """)


def test_the_built_in_products_load():
    products, problems = load_folder(BUILT_IN, field_units=field_units())
    assert problems == []
    assert sorted(p["name"] for p in products) == ["dcgm-device", "dcgm-profiling", "gpu-error-counters", "rank-layouts",
                                                   "saturation-scores", "slingshot-nic-counters", "slurm-jobs", "topology",
                                                   "vetting-results"]
    device = next(p for p in products if p["name"] == "dcgm-device")
    assert device["slo"] == {"freshness": {"warn": 180, "error": 600}, "coverage": {"target": 0.995, "population": "topology_gpus",
                                                                                      "within": None},
                             "sampling_period": 60, "gap_after": 3}
    assert device["checks"] == {"every": 300, "window": 7200}
    profiling = next(p for p in products if p["name"] == "dcgm-profiling")
    assert profiling["slo"]["expected_while"] == "jobs" and "expected_while" not in device["slo"]
    assert [c["unit"] for c in device["schema"] if c.get("field")] == ["W", "°C"]


def test_a_good_file_loads_with_durations_in_seconds():
    product = load_product(GOOD, "demo-power.yaml", field_units=field_units())
    assert product["slo"]["freshness"] == {"warn": 120, "error": 600}
    assert product["checks"] == {"every": 300, "window": 21600}  # the defaults
    assert product["description"] == {"purpose": "Board power of every GPU", "limitations": "", "usage": ""}
    assert len(product["digest"]) == 64


def broken(old: str, new: str) -> str:
    assert old in GOOD, old
    return GOOD.replace(old, new)


@pytest.mark.parametrize("text, line, token, path, words", [  # token: where on the line the problem points
    (broken("name: demo-power", "name: Demo Power"), 1, "name:", "name", "lowercase letters, digits and '-'"),
    (broken("version: 1.0.0", "version: 1.0"), 3, "version:", "version", "is not MAJOR.MINOR.PATCH"),
    (broken("status: active", "status: live"), 4, "status:", "status", "one of proposed, active, deprecated, retired"),
    (broken("description: {purpose: Board power of every GPU}", "description: {usage: read it}"), 6, "description:", "description.purpose",
     "required"),
    (broken("contact: hpc-ops@example.org", "contact: the ops team"), 7, "contact:", "owner.contact", "an e-mail address"),
    (broken("{name: power, type: double, unit: W, field: 155}", "{name: power, type: double, field: 155}"), 10, "{name",
     "schema.1.unit", "required for numbers"),
    (broken("{name: power, type: double, unit: W, field: 155}", "{name: power, type: float, unit: W, field: 155}"), 10, "type:",
     "schema.1.type", "one of string, integer, double"),
    (broken("{name: power, type: double, unit: W, field: 155}", "{name: power, type: double, unit: mW, field: 155}"), 10, "unit:",
     "schema.1.unit", "'mW' for DCGM field 155, whose unit is 'W'"),
    (broken("{name: power, type: double, unit: W, field: 155}", "{name: power, type: double, unit: W, field: 99999}"), 10, "field:",
     "schema.1.field", "DCGM field 99999 is not in the registry"),
    (broken("{name: power, type: double, unit: W, field: 155}", "{name: power, type: double, unit: W}"), 10, "{name", "schema.1",
     "needs its DCGM field id"),
    (broken("source: {kind: telemetry}", "source: {kind: prometheus}"), 11, "kind:", "source.kind", "one of telemetry, elasticsearch"),
    (broken("source: {kind: telemetry}", "source: {kind: model, model: jobs}"), 11, "model: jobs", "source.model", "app_label.ModelName"),
    (broken('sample_query: {api: "/api/v1/telemetry', 'sample_query: {api: "https://evil.example/api/v1/telemetry'), 12, "api:",
     "sample_query.api", "starting with /api/v1/"),
    (broken("freshness: {warn: 2m, error: 10m}", "freshness: {warn: 10m, error: 2m}"), 14, "error:", "slo.freshness.error",
     "must be longer than warn"),
    (broken("freshness: {warn: 2m, error: 10m}", "freshness: {warn: soon, error: 10m}"), 14, "warn:", "slo.freshness.warn",
     "'soon' is not a duration"),
    (broken("coverage: {target: 0.99, population: topology_gpus}", "coverage: {target: 99, population: topology_gpus}"), 15, "target:",
     "slo.coverage.target", "a fraction above 0 and at most 1"),
    (broken("coverage: {target: 0.99, population: topology_gpus}", "coverage: {target: 0.99, population: everything}"), 15, "population:",
     "slo.coverage.population", "one of topology_gpus, topology_nodes"),
    (broken("sampling_period: 60s", "sampling_period: fast"), 16, "sampling_period:", "slo.sampling_period", "not a duration"),
    (broken("sampling_period: 60s", "sampling_period: 60s\n  expected_while: always"), 17, "expected_while:", "slo.expected_while",
     "only 'jobs'"),
    (GOOD + "colour: blue\n", 17, "colour:", "colour", "unknown key; allowed here"),
    (GOOD + "checks: {every: 5s}\n", 17, "every:", "checks.every", "at least 30s"),
    (GOOD + "explorer: {fields: [150]}\n", 17, "150", "explorer.fields.0", "150 is not a field of this product's schema"),
    (GOOD + "links: [{title: x, url: 'javascript:alert(1)'}]\n", 17, "url:", "links.0.url", "a path of this portal"),
])
def test_every_problem_says_where_and_what(text, line, token, path, words):
    column = text.splitlines()[line - 1].index(token) + 1
    with pytest.raises(ProductInvalid) as raised:
        load_product(text, "demo-power.yaml", field_units=field_units())
    found = {p.path: p for p in raised.value.problems}
    assert path in found, [str(p) for p in raised.value.problems]
    problem = found[path]
    assert words in problem.message
    assert (problem.file, problem.line, problem.column) == ("demo-power.yaml", line, column), str(problem)
    assert str(problem).startswith(f"demo-power.yaml:{line}:{column}: {path}: ")


@pytest.mark.parametrize("text, words", [
    ("name: [unclosed\n", "not valid YAML"),
    ("- a list\n- not a mapping\n", "a product is a mapping"),
    ("", "a product is a mapping"),
    ("x" * 300_000, "a product is at most 262,144"),
    ("name: a\nname: b\n", None),  # PyYAML keeps the last duplicate key; the other problems still show
])
def test_files_that_are_not_products(text, words):
    with pytest.raises(ProductInvalid) as raised:
        load_product(text, "bad.yaml")
    if words:
        assert words in str(raised.value)
    assert all(p.file == "bad.yaml" for p in raised.value.problems)


def test_syntax_errors_point_at_their_line():
    with pytest.raises(ProductInvalid) as raised:
        load_product(GOOD.replace("status: active", "status: [active"), "x.yaml")
    problem = raised.value.problems[0]
    assert problem.line == 5 and "not valid YAML" in problem.message


def test_a_name_used_twice_is_a_problem_of_the_second_file(tmp_path):
    (tmp_path / "a.yaml").write_text(GOOD)
    (tmp_path / "b.yaml").write_text(GOOD)
    (tmp_path / "c.yaml").write_text("name: [\n")
    products, problems = load_folder(tmp_path, field_units=field_units())
    assert [p["file"] for p in products] == [str(tmp_path / "a.yaml")]
    assert [(p.file.rsplit("/", 1)[-1], p.path) for p in problems] == [("b.yaml", "name"), ("c.yaml", "")]
    assert "already declared in" in problems[0].message


@pytest.mark.parametrize("text, value", [("90s", 90), ("5m", 300), ("1.5h", 5400), ("7d", 604800), ("2w", 1209600), (45, 45)])
def test_durations(text, value):
    assert seconds(text) == value


# ---------------------------------------------------------------------------------------------
# Loading into the database


@pytest.fixture
def folder(tmp_path):
    (tmp_path / "demo-power.yaml").write_text(GOOD)
    return tmp_path


def test_loading_keeps_a_version_per_change(db, folder):
    from apps.catalog.models import DataProduct, ProductVersion
    from apps.catalog.services import load_catalog

    first = load_catalog([folder])
    assert (first.created, first.updated, first.problems) == (["demo-power"], [], [])
    assert load_catalog([folder]).unchanged == ["demo-power"]
    (folder / "demo-power.yaml").write_text(GOOD.replace("version: 1.0.0", "version: 1.1.0").replace("warn: 2m", "warn: 3m"))
    second = load_catalog([folder])
    assert second.updated == ["demo-power"]
    product = DataProduct.objects.get(name="demo-power")
    assert product.version == "1.1.0" and product.definition["slo"]["freshness"]["warn"] == 180
    versions = list(ProductVersion.objects.filter(product=product).order_by("loaded", "id").values_list("version", "changes"))
    assert versions == [("1.0.0", ["created"]), ("1.1.0", ["slo", "version"])]


def test_a_broken_file_changes_nothing_stored(db, folder):
    from apps.catalog.models import DataProduct, ProductVersion
    from apps.catalog.services import load_catalog

    load_catalog([folder])
    before = DataProduct.objects.get(name="demo-power").digest
    (folder / "demo-power.yaml").write_text(GOOD.replace("status: active", "status: sometimes"))
    report = load_catalog([folder])
    assert [p.path for p in report.problems] == ["status"]
    assert DataProduct.objects.get(name="demo-power").digest == before and ProductVersion.objects.count() == 1


def test_the_command_prints_problems_and_fails(db, folder, capsys):
    from django.core.management import CommandError, call_command

    (folder / "broken.yaml").write_text(GOOD.replace("name: demo-power", "name: other").replace("domain: system telemetry", "domain: 7"))
    with pytest.raises(CommandError, match="1 problem"):
        call_command("load_catalog", str(folder))
    captured = capsys.readouterr()
    assert f"{folder}/broken.yaml:5:1: domain: must be text, not int" in captured.err
    assert "created 1, updated 0, unchanged 0; 1 problem(s), those files were not loaded" in captured.out
    call_command("load_catalog", "--check", str(BUILT_IN))
    assert "9 product file(s) valid, 0 problem(s)" in capsys.readouterr().out
