"""The dcgm-exporter importer's line parser (apps/telemetry/importers.py) against the reference parser of
the Prometheus text format, prometheus_client's ``text_string_to_metric_families``.

Belvedere keeps its own line parser because it must say what is wrong and where (column, label) for a
pasted scrape, and be strict where the library is lenient (it accepts any ``\\x`` escape and metric names
that start with a digit, and its errors carry no position). What both accept they must read the same:
the same metric names, labels (escapes included) and values, on the recorded exporter scrapes and on
generated lines.
"""
import math
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from apps.telemetry.importers import _parse_sample, _sample_value

DATA = Path(__file__).parent / "data" / "importers"
VALID_SCRAPES = ["exporter_h100_Hostname.prom", "exporter_gh200_hostname_dcgm46.prom",
                 "exporter_federate_both_hostname_labels.prom"]


def reference(text: str) -> list[tuple[str, dict, float]]:
    """The library's samples, with one of its normalisations undone: a counter's samples are named
    ``<name>_total`` whatever the line said (dcgm-exporter's counters have no such suffix)."""
    samples = []
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            name = sample.name
            if family.type == "counter" and name == family.name + "_total" and f"{name}" not in text:
                name = family.name
            samples.append((name, dict(sample.labels), sample.value))
    return samples


def ours(text: str) -> list[tuple[str, dict, float]]:
    samples = []
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        name, labels, value, _ = _parse_sample(line)
        samples.append((name, labels, _sample_value(value)))
    return samples


def same(left, right) -> bool:
    return len(left) == len(right) and all(
        a[0] == b[0] and a[1] == b[1] and (a[2] == float(b[2]) or (math.isnan(a[2]) and math.isnan(b[2])))
        for a, b in zip(left, right))


def test_the_recorded_scrapes_read_the_same_as_the_reference_parser():
    for name in VALID_SCRAPES:
        text = (DATA / name).read_text()
        expected = reference(text)
        assert expected, name
        assert same(ours(text), expected), name


names = st.from_regex(r"[a-zA-Z_:][a-zA-Z0-9_:]{0,20}", fullmatch=True)
label_names = st.from_regex(r"[a-zA-Z][a-zA-Z0-9_]{0,10}", fullmatch=True)
label_values = st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")) | st.sampled_from(['"', "\\", "\n"]),
                       max_size=12)
values = st.floats(allow_nan=False, width=64) | st.integers(-2**63, 2**63 - 1)


def escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


@settings(max_examples=300, deadline=None)
@given(name=names, labels=st.dictionaries(label_names, label_values, max_size=4), value=values,
       timestamp=st.none() | st.integers(0, 2**41))
def test_generated_lines_read_the_same_as_the_reference_parser(name, labels, value, timestamp):
    body = ",".join(f'{key}="{escape(text)}"' for key, text in labels.items())
    line = f"{name}{{{body}}} {value!r}" + (f" {timestamp}" if timestamp is not None else "")
    expected = reference(line + "\n")
    assert same(ours(line), expected), line
