"""Edge cases of the validator found by review and fuzzing, each with its reason."""
from apps.edf.validator import expand, validate


def rules(text, **kwargs):
    return [(f.severity, f.rule, f.line) for f in validate(text, **kwargs).findings]


def test_default_applies_to_unset_and_empty_variables_as_in_the_shell():
    assert expand("${X:-d}/${Y:-e}/${Z}", {"X": "", "Z": ""}) == ("d/e/", [])
    assert expand("${X:-d}", {"X": "x"}) == ("x", [])
    assert expand("$${X} costs $$5 ${NOPE}", {}) == ("${X} costs $5 ${NOPE}", ["NOPE"])


def test_table_defined_twice_keeps_a_quoted_name():
    findings = validate('image = "a:1"\n["it\'s"]\nx = "1"\n["it\'s"]\ny = "2"\n').findings
    finding = next(f for f in findings if f.rule == "toml-table-twice")
    assert finding.rule == "toml-table-twice" and finding.line == 4
    assert finding.message == '["it\'s"] is defined twice (first at line 2)'


def test_a_known_annotation_holding_a_table_is_a_type_error_and_empty_tables_are_nothing():
    text = 'image = "a:1"\nentrypoint = false\n[annotations.com.hooks.ssh.enabled]\nvalue = "true"\n[annotations.com.hooks.cxi]\n'
    assert ("error", "annotation-value-type", 3) in rules(text)
    assert [r for r in rules(text) if r[1].startswith("annotation")] == [("error", "annotation-value-type", 3)]


def test_boolean_fields_get_a_hint_for_yes_and_no():
    finding = next(f for f in validate('image = "a:1"\nentrypoint = "yes"\n').findings if f.rule == "type")
    assert finding.hint == "Write entrypoint = true (no quotes): TOML booleans are true and false."
    finding = next(f for f in validate('image = "a:1"\nwritable = "maybe"\n').findings if f.rule == "type")
    assert finding.hint == "Write writable = true or writable = false, without quotes."


def test_ssh_key_path_with_a_tab_is_key_text():
    text = 'image = "a:1"\nentrypoint = false\n[annotations]\ncom.hooks.ssh.authorize_ssh_key = "/k.pub\\tx"\n'
    assert ("error", "ssh-key-text", 4) in rules(text)


def test_a_port_in_other_digits_is_a_finding_not_a_crash():
    """Issue 16 item 6: "²".isdigit() is True and int("²") raised, so validating this EDF answered 500."""
    for port in ("²", "١٥٢٦٣", "99999999999999999999", "0"):
        text = f'image = "a:1"\nentrypoint = false\n[annotations]\n"com.hooks.ssh.port" = "{port}"\n'
        assert ("error", "annotation-value", 4) in rules(text), port
    assert not [r for r in rules('image = "a:1"\nentrypoint = false\n[annotations]\n"com.hooks.ssh.port" = "15263"\n')
                if r[1] == "annotation-value"]
