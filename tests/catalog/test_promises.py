"""Every product's description against its schema: a measure its purpose or usage names must be a column
(issue 23: dcgm-device promised utilisation and memory while its schema had power and temperature)."""
from pathlib import Path

import pytest

from apps.catalog.definitions import load_product
from apps.catalog.promises import unkept_promises
from apps.catalog.services import BUILT_IN, field_units
from apps.telemetry.fields import FIELDS

FIELD_NAMES = {field_id: field.name for field_id, field in FIELDS.items()}
PRODUCT_FILES = sorted(BUILT_IN.glob("*.yaml"))


def test_there_are_products_to_check():
    assert len(PRODUCT_FILES) >= 9


@pytest.mark.parametrize("path", PRODUCT_FILES, ids=lambda path: path.stem)
def test_a_products_description_names_only_what_its_schema_holds(path: Path):
    product = load_product(path.read_text(), str(path), field_units=field_units())
    assert unkept_promises(product, FIELD_NAMES) == []


def test_the_check_finds_a_broken_promise():
    product = {"description": {"purpose": "Power, temperature, utilisation and memory of every GPU.",
                               "usage": "Plot the memory; there is no fan speed here, not clocks."},
               "schema": [{"name": "power", "field": 155}, {"name": "temperature", "field": 150}]}
    assert unkept_promises(product, FIELD_NAMES) == ["description.purpose names utilisation; the schema has no such column",
                                                     "description.purpose names memory; the schema has no such column",
                                                     "description.usage names memory; the schema has no such column"]
    # A column's DCGM field name or description keeps the promise as well as its name.
    product["schema"].append({"name": "busy", "field": 203})
    product["schema"].append({"name": "fb", "description": "Framebuffer memory used"})
    assert unkept_promises(product, FIELD_NAMES) == []
