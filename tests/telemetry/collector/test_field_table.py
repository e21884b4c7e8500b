"""The collector runs on compute nodes without the portal's code, so it embeds its own table of DCGM
field ids, their NVML GPM equivalents and conversions. It must agree with the portal's registry,
apps/telemetry/fields.py, field for field: this test is what stops the two from drifting apart."""
import ast

from apps.telemetry import fields as registry

from .recording import PROBE, SCRIPT, load

collector = load()


def test_gpm_table_is_the_registrys():
    expected = {field.id: (field.gpm, field.gpm_scale) for field in registry.FIELDS.values() if field.gpm is not None}
    assert collector.GPM_FIELDS == expected
    assert set(collector.GPM_FIELDS.values()) == {(f.gpm, f.gpm_scale) for f in registry.BY_GPM.values()}


def test_gpm_scales_give_the_registrys_units():
    for field_id, (_, scale) in collector.GPM_FIELDS.items():
        unit = registry.FIELDS[field_id].unit
        assert (unit, scale) in ((registry.RATIO, 0.01), (registry.BYTES_PER_S, 1024 * 1024)), field_id


def test_default_fields_are_the_registrys():
    assert collector.DEFAULT_PROFILING == registry.DEFAULT_PROFILING
    assert collector.DEFAULT_DEVICE == registry.DEFAULT_DEVICE
    assert collector.DEFAULT_FIELDS == registry.DEFAULT_FIELDS


def test_nvml_device_fields_convert_to_the_registrys_units():
    assert set(collector.NVML_DEVICE_FIELDS) <= set(registry.FIELDS)
    for field_id, (_, _, unit) in collector.NVML_DEVICE_FIELDS.items():
        assert registry.FIELDS[field_id].unit == unit, field_id
        assert registry.FIELDS[field_id].group == "device"
    # The conversions themselves: NVML mW -> W, bytes -> MiB.
    assert collector.scaled(215500, collector.NVML_DEVICE_FIELDS[155][1]) == 215.5
    assert collector.scaled(3 * 1024 * 1024, collector.NVML_DEVICE_FIELDS[252][1]) == 3.0
    assert collector.scaled(37, 0.01) == 0.37


def test_profiling_ids_are_recognised():
    for field in registry.FIELDS.values():
        assert collector.is_profiling(field.id) == (field.group == "profiling"), field.id


def test_the_node_scripts_stay_python_3_8():
    """Compute nodes and containers may have an old python3: no syntax newer than 3.8 (stdlib only)."""
    for path in (SCRIPT, PROBE):
        tree = ast.parse(path.read_text(), feature_version=(3, 8))
        imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
                    for alias in node.names}
        imported |= {node.module.split(".")[0] for node in ast.walk(tree)
                     if isinstance(node, ast.ImportFrom) and node.module and not node.level}
        third_party = imported - {"__future__", "argparse", "collections", "datetime", "gzip", "importlib", "json",
                                  "math", "os", "platform", "re", "signal", "socket", "subprocess", "sys",
                                  "threading", "time", "urllib", "ctypes"}
        # Only the optional libraries, imported inside the adapters (or the probe's metadata).
        assert third_party <= {"pynvml", "pydcgm", "dcgm_structs"}, (path.name, third_party)
