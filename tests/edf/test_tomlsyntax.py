"""TOML syntax errors in an EDF: the message, line and column of each case (apps.edf.tomlsyntax through
apps.edf.validator.validate), and the other findings still shown, marked, when the rest can be read."""
from __future__ import annotations

import tomllib

import pytest

from apps.edf import tomlsyntax
from apps.edf.validator import validate

SYNTAX = {"toml-syntax", "toml-table-twice", "toml-key-twice"}


def syntax_findings(text):
    return [f for f in validate(text).findings if f.rule in SYNTAX]


def only(text):
    found = syntax_findings(text)
    assert len(found) == 1, found
    return found[0]


# --------------------------------------------------------------------------------------------
# Unterminated strings

def test_an_unterminated_string_names_where_it_opened_and_what_to_do():
    text = 'image = "ubuntu:24.04"\nworkdir = "/scratch\nentrypoint = false\n'
    with pytest.raises(tomllib.TOMLDecodeError, match=r"Illegal character '\\n'"):
        tomllib.loads(text)  # what tomllib says, for comparison
    finding = only(text)
    assert (finding.rule, finding.line, finding.column) == ("toml-syntax", 2, 11)
    assert finding.message == ('string opened at line 2 col 11 is not closed before the end of the line: '
                               'add the closing quote (")')
    assert finding.hint == 'e.g. workdir = "/scratch"'
    assert finding.path == "workdir"


def test_an_unterminated_literal_string_is_placed_on_its_line_not_at_the_end_of_the_document():
    text = "image = 'ubuntu:24.04\nentrypoint = false\n\n\n"
    with pytest.raises(tomllib.TOMLDecodeError, match="end of document"):
        tomllib.loads(text)
    finding = only(text)
    assert (finding.line, finding.column) == (1, 9)
    assert finding.message.startswith("string opened at line 1 col 9 is not closed before the end of the line")
    assert "(')" in finding.message


def test_the_closing_quote_goes_before_a_comment_and_inside_the_brackets():
    assert only('workdir = "/scratch   # my folder\n').hint == 'e.g. workdir = "/scratch"   # my folder'
    finding = only('mounts = ["/a:/a", "/b:/b]\nentrypoint = false\n')
    assert (finding.line, finding.column) == (1, 20)
    assert finding.hint == 'e.g. mounts = ["/a:/a", "/b:/b"]'


def test_an_unterminated_quoted_key():
    finding = only('image = "a:1"\n[annotations]\n"com.hooks.ssh.enabled = "true"\n')
    assert (finding.line, finding.column) == (3, 1)
    assert finding.message == "the quoted key opened at line 3 col 1 is not closed before the '=': add the closing quote (\")"
    assert finding.hint == 'e.g. "com.hooks.ssh.enabled" = ...'
    finding = only('image = "a:1"\n[annotations]\n"com.hooks.ssh.enabled\n')
    assert (finding.line, finding.column) == (3, 1)
    assert finding.message.startswith("key opened at line 3 col 1 is not closed before the end of the line")


def test_escaped_quotes_and_multiline_strings_are_not_mistaken_for_unterminated_ones():
    text = 'image = "a:1"\n[env]\nA = "say \\"hi\\""\nB = """one\n"two"\n"""\nC = \'it\'\nD = "x\n'
    finding = only(text)
    assert (finding.line, finding.column) == (8, 5)


def test_a_multiline_string_never_closed():
    text = 'image = "a:1"\n[env]\nA = """one\ntwo\nB = 1\n'
    finding = only(text)
    assert (finding.line, finding.column) == (3, 5)
    assert finding.message == 'the multi-line string opened at line 3 col 5 is never closed: add the closing """'
    # read on from the next statement
    assert ("env-value-type", 5) in [(f.rule, f.line) for f in validate(text).findings]


# --------------------------------------------------------------------------------------------
# Table headers

def test_a_second_annotations_header_without_its_bracket_is_a_missing_bracket_first():
    text = ('image = "ubuntu:24.04"\nentrypoint = false\n[annotations]\ncom.hooks.ssh.enabled = "true"\n'
            '[annotations\ncom.hooks.cxi.enabled = "false"\n')
    with pytest.raises(tomllib.TOMLDecodeError, match=r"Cannot declare \('annotations',\) twice"):
        tomllib.loads(text)  # tomllib's diagnosis: the wrong one
    missing, twice = syntax_findings(text)
    assert (missing.rule, missing.line, missing.column) == ("toml-syntax", 5, 1)
    assert missing.message == "[annotations is missing its closing ]"
    assert missing.hint == "Write [annotations]: add ] after 'annotations' on line 5."
    # and once the ] is there, it would still be the same table twice: said so, without the spelling hint
    assert (twice.rule, twice.line, twice.column) == ("toml-table-twice", 5, 1)
    assert twice.message == "[annotations] is defined twice (first at line 3)"
    assert "spelling" not in twice.hint and "line 3" in twice.hint


def test_an_unclosed_header_alone():
    finding = only('image = "a:1"\n[env   # the variables\nA = "1"\n')
    assert (finding.rule, finding.line, finding.column) == ("toml-syntax", 2, 1)
    assert finding.message == "[env is missing its closing ]"
    finding = only('image = "a:1"\n[[things]\nA = "1"\n')
    assert (finding.line, finding.column, finding.message) == (
        2, 1, "[[things] is missing a ]: an array-of-tables header ends with ]]")


# --------------------------------------------------------------------------------------------
# Keys and tables defined twice, told apart

def test_a_key_set_twice_is_not_a_table_defined_twice():
    finding = only('image = "a:1"\n[env]\nA = "1"\nB = "2"\nA = "3"\n')
    assert (finding.rule, finding.line, finding.column) == ("toml-key-twice", 5, 1)
    assert finding.message == "key A is set twice in [env] (first at line 3)"


def test_a_table_defined_twice_by_two_headers():
    finding = only('image = "a:1"\n[env]\nA = "1"\n[env]\nB = "2"\n')
    assert (finding.rule, finding.line, finding.column) == ("toml-table-twice", 4, 1)
    assert finding.message == "[env] is defined twice (first at line 2)"
    assert "Merge them" in finding.hint


def test_the_two_annotation_spellings_mixed_either_way_round():
    finding = only('image = "a:1"\n[annotations]\ncom.hooks.ssh.enabled = "true"\n[annotations.com.hooks.ssh]\nport = "1"\n')
    assert (finding.rule, finding.line, finding.column) == ("toml-table-twice", 4, 1)
    assert finding.message == ("[annotations.com.hooks.ssh] is defined twice "
                               "(first by the dotted key com.hooks.ssh.enabled at line 3)")
    assert "annotation spellings" in finding.hint
    finding = only('image = "a:1"\n[annotations.com.hooks.ssh]\nport = "1"\n[annotations]\n  com.hooks.ssh.enabled = "true"\n')
    assert (finding.rule, finding.line, finding.column) == ("toml-table-twice", 5, 3)
    assert "first as a table at line 2" in finding.message and "annotation spellings" in finding.hint


def test_a_value_then_a_table_of_the_same_name():
    finding = only('image = "a:1"\nenv = "x"\n[env]\nA = "1"\n')
    assert (finding.rule, finding.line, finding.column) == ("toml-key-twice", 3, 1)
    assert finding.message == "env is set to a value at line 2; [env] cannot make it a table as well"


def test_a_duplicate_key_in_an_inline_table():
    finding = only('image = "a:1"\nenv = {A = "1", A = "2"}\n')
    assert (finding.rule, finding.line) == ("toml-key-twice", 2)
    assert finding.message == "key 'A' is set twice in the same inline table"


# --------------------------------------------------------------------------------------------
# Brackets

def test_an_unclosed_array_is_reported_where_it_opens_with_where_its_bracket_belongs():
    finding = only('image = "a:1"\nmounts = [\n  "/a:/a",\n  "/b:/b"\nentrypoint = false\n')
    assert (finding.line, finding.column) == (2, 10)
    assert finding.message == "the array opened at line 2 col 10 is not closed: add ] after its last element (line 4)"


def test_an_inline_table_is_closed_on_its_line():
    finding = only('image = "a:1"\nenv = {A = "1"\nentrypoint = false\n')
    assert (finding.line, finding.column) == (2, 7)
    assert "not closed before the end of the line: add the closing }" in finding.message


def test_other_errors_keep_tomllibs_words_and_position_with_a_hint():
    finding = only('image = nvcr.io#nvidia/pytorch:25.06-py3\nentrypoint = false\n')
    assert (finding.rule, finding.line, finding.column, finding.message) == ("toml-syntax", 1, 9, "TOML: Invalid value")
    assert finding.hint == 'Strings need quotes: image = "nvcr.io#nvidia/pytorch:25.06-py3"'


# --------------------------------------------------------------------------------------------
# Reading past syntax errors

def test_other_findings_remain_after_a_syntax_error_marked_as_recovered():
    text = ('workdir = "/scratch\n'          # 1: unterminated string
            'image = "ubuntu:24.04"\n'       # 2
            'writable = "yes"\n'             # 3: a type error
            'mounts = ["data:/data"]\n'      # 4: a mount error
            '[env]\nA = "1"\n[env]\n'        # 5-7: [env] twice
            'B = 2\n')                       # 8: not a string
    result = validate(text)
    assert result.valid is False and result.resolved is None
    got = [(f.rule, f.line, f.recovered) for f in result.findings if f.severity == "error"]
    assert ("toml-syntax", 1, False) in got and ("toml-table-twice", 7, False) in got
    assert ("type", 3, True) in got and ("mount-path", 4, True) in got
    # [env] at line 7 directly follows [env]: its keys are read as part of the first one
    assert ("env-value-type", 8, True) in got
    assert all(f.recovered is (f.rule not in SYNTAX) for f in result.findings)
    assert {"recovered": True}.items() <= next(f for f in result.findings if f.rule == "type").as_dict().items()


def test_advice_about_something_missing_is_left_out_when_a_line_was_dropped():
    # the image line has a value that is not TOML: it is dropped to read on, so "no image" would be wrong
    result = validate('image = nvcr.io#nvidia/pytorch:25.06-py3\nworkdir = "rel"\n')
    rules = {f.rule for f in result.findings}
    assert "image-missing" not in rules and "entrypoint-implicit" not in rules
    assert "workdir-path" in rules


def test_repairs_keep_line_numbers():
    text = 'a = "x\n[b\nc = [\n 1,\nd = {e = 1\n'
    diagnosis = tomlsyntax.diagnose(text)
    assert diagnosis.data == {"a": "x", "b": {"c": [1], "d": {"e": 1}}}
    assert diagnosis.text.count("\n") == text.count("\n")
    assert [(issue.line, issue.column) for issue in diagnosis.issues] == [(1, 5), (2, 1), (3, 5), (5, 5)]


def test_the_pre_scan_alone_reports_nothing_on_valid_toml():
    for text in ('a = "x # y"\nb = \'\'\'\nc = "\n\'\'\'\n[t]\n"k.k" = [\n  1, # c\n  2,\n]\n[[u]]\n[[u]]\nv = {w = [1,\n2]}\n',):
        tomllib.loads(text)
        assert tomlsyntax.scan(text).issues == []


def test_a_megabyte_of_errors_is_answered_in_a_few_whole_parses(monkeypatch):
    """Reading past errors re-parses the text once per error: on a large text only a few times, so the validate
    API stays fast on hostile input (25 rounds over 1 MB took 44 s before the cap). Counted, not timed: the
    whole-text parses (tomllib, the standard library's parser) that validating a megabyte of errors makes."""
    from apps.edf.vocabulary import MAX_EDF_CHARS
    text = "".join(f"k{i} = not toml\n" for i in range(100_000))[:MAX_EDF_CHARS]
    parses = []
    loads = tomllib.loads

    def counted(source, **kwargs):
        if len(source) > 100_000:
            parses.append(len(source))
        return loads(source, **kwargs)

    monkeypatch.setattr(tomllib, "loads", counted)
    result = validate(text)
    assert 1 <= len(parses) <= 6, parses  # a few rounds over the whole text, not one per error line
    assert 1 <= len([f for f in result.findings if f.rule in SYNTAX]) <= 3
