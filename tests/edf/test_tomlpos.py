"""apps.edf.tomlpos: positions of keys and values on tricky TOML, computed by hand (1-based line, column)."""
from __future__ import annotations

import tomllib

import pytest

from apps.edf import tomlpos


def scan(text: str) -> tomlpos.Positions:
    tomllib.loads(text)  # every document here is valid TOML unless the test says otherwise
    return tomlpos.scan(text)


def test_multiline_strings():
    text = (
        'a = """\n'                      # 1
        'line "one"\n'                   # 2
        '  # not a comment\n'            # 3
        '"""\n'                          # 4
        "b = 'x'\n"                      # 5
        "c = '''it's\n"                  # 6
        "b = 'not a key'\n"              # 7 (inside the literal string)
        "'''\n"                          # 8
        'd = """ends in quotes"""""\n'   # 9: the content ends in two quotes
        'e = """esc \\""" inside"""\n'   # 10: an escaped quote run
        'f = 1\n'                        # 11
    )
    positions = scan(text)
    assert tomllib.loads(text)["d"] == 'ends in quotes""'
    assert positions.keys[("a",)] == (1, 1) and positions.values[("a",)] == (1, 5)
    assert positions.keys[("b",)] == (5, 1) and positions.values[("b",)] == (5, 5)
    assert positions.keys[("c",)] == (6, 1) and positions.values[("c",)] == (6, 5)
    assert positions.keys[("d",)] == (9, 1) and positions.values[("d",)] == (9, 5)
    assert positions.keys[("e",)] == (10, 1) and positions.values[("e",)] == (10, 5)
    assert positions.keys[("f",)] == (11, 1) and positions.values[("f",)] == (11, 5)
    assert set(positions.keys) == {("a",), ("b",), ("c",), ("d",), ("e",), ("f",)}


def test_array_over_several_lines_with_comments():
    text = (
        'mounts = [  # first comment, with a ] and a "\n'           # 1
        '    "/a:/a",   # after the first element\n'                # 2
        '    # only a comment, with "quotes", [brackets] and , \n'  # 3
        "    '/b:/b',\n"                                            # 4
        '    [1, [2, 3]],\n'                                        # 5
        '\n'                                                        # 6
        ']\n'                                                       # 7
        'image = "x"  # trailing\n'                                 # 8
    )
    positions = scan(text)
    assert positions.keys[("mounts",)] == (1, 1)
    assert positions.values[("mounts",)] == (1, 10)
    assert positions.values[("mounts", 0)] == (2, 5)
    assert positions.values[("mounts", 1)] == (4, 5)
    assert positions.values[("mounts", 2)] == (5, 5)
    assert positions.values[("mounts", 2, 0)] == (5, 6)
    assert positions.values[("mounts", 2, 1)] == (5, 9)
    assert positions.values[("mounts", 2, 1, 1)] == (5, 13)
    assert ("mounts", 3) not in positions.values
    assert positions.keys[("image",)] == (8, 1) and positions.values[("image",)] == (8, 9)


def test_inline_tables():
    #       1234567890123456789012345678901234567890123
    text = 'env = { A = "1", "B.C" = "2", d.e = "3" }\nx = {}\n'
    positions = scan(text)
    assert positions.keys[("env",)] == (1, 1) and positions.values[("env",)] == (1, 7)
    assert positions.keys[("env", "A")] == (1, 9) and positions.values[("env", "A")] == (1, 13)
    assert positions.keys[("env", "B.C")] == (1, 18) and positions.values[("env", "B.C")] == (1, 26)
    assert positions.keys[("env", "d")] == (1, 31)
    assert positions.keys[("env", "d", "e")] == (1, 31) and positions.values[("env", "d", "e")] == (1, 37)
    assert positions.keys[("x",)] == (2, 1) and positions.values[("x",)] == (2, 5)


def test_quoted_keys_with_dots():
    text = (
        '[annotations]\n'                        # 1
        '"com.hooks.ssh.enabled" = "true"\n'     # 2
        'com."hooks.x".y = "1"\n'                # 3
        "'literal.key' = 'v'\n"                  # 4
        'a . b = "spaced dots"\n'                # 5
        '"esc\\"aped" = "q"\n'                   # 6
    )
    positions = scan(text)
    assert positions.keys[("annotations",)] == (1, 1)
    assert positions.keys[("annotations", "com.hooks.ssh.enabled")] == (2, 1)
    assert positions.values[("annotations", "com.hooks.ssh.enabled")] == (2, 27)
    assert ("annotations", "com", "hooks", "ssh", "enabled") not in positions.keys
    assert positions.keys[("annotations", "com")] == (3, 1)
    assert positions.keys[("annotations", "com", "hooks.x")] == (3, 1)
    assert positions.keys[("annotations", "com", "hooks.x", "y")] == (3, 1)
    assert positions.values[("annotations", "com", "hooks.x", "y")] == (3, 19)
    assert positions.keys[("annotations", "literal.key")] == (4, 1)
    assert positions.values[("annotations", "literal.key")] == (4, 17)
    assert positions.keys[("annotations", "a", "b")] == (5, 1)
    assert positions.values[("annotations", "a", "b")] == (5, 9)
    assert positions.keys[("annotations", 'esc"aped')] == (6, 1)
    assert positions.values[("annotations", 'esc"aped')] == (6, 15)


def test_array_of_tables():
    text = (
        '[[mounts]]\n'               # 1
        'source = "/a"\n'            # 2
        '\n'                         # 3
        '[[mounts]]  # second\n'     # 4
        'source = "/b"\n'            # 5
        '  target = "/c"\n'          # 6
        '[[other.list]]\n'           # 7
        'k = 1\n'                    # 8
    )
    positions = scan(text)
    assert positions.keys[("mounts", 0)] == (1, 1)
    assert positions.keys[("mounts", 0, "source")] == (2, 1)
    assert positions.values[("mounts", 0, "source")] == (2, 10)
    assert positions.keys[("mounts", 1)] == (4, 1)
    assert positions.keys[("mounts", 1, "source")] == (5, 1)
    assert positions.keys[("mounts", 1, "target")] == (6, 3)
    assert positions.values[("mounts", 1, "target")] == (6, 12)
    assert positions.keys[("other",)] == (7, 1)
    assert positions.keys[("other", "list", 0)] == (7, 1)
    assert positions.values[("other", "list", 0, "k")] == (8, 5)
    # the best position of the array itself is its first element's header
    assert positions.of(("mounts", 1, "missing")) == (4, 1)


def test_sub_table_of_an_array_of_tables_element():
    text = (
        '[[mounts]]\n'        # 1
        'source = "/a"\n'     # 2
        '[[mounts]]\n'        # 3
        '[mounts.options]\n'  # 4: belongs to mounts[1]
        'ro = true\n'         # 5
    )
    assert tomllib.loads(text)["mounts"][1]["options"]["ro"] is True
    positions = scan(text)
    assert positions.keys[("mounts", 1, "options")] == (4, 1)
    assert positions.values[("mounts", 1, "options", "ro")] == (5, 6)


def test_both_annotation_spellings():
    text = (
        'image = "ubuntu:24.04"\n'               # 1
        '\n'                                     # 2
        '[annotations]\n'                        # 3
        'com.hooks.cxi.enabled = "false"\n'      # 4
        '\n'                                     # 5
        '[annotations.com.hooks.ssh]\n'          # 6
        'enabled = "true"\n'                     # 7
        '  authorize_ssh_key = "/k.pub"\n'       # 8
    )
    positions = scan(text)
    assert positions.keys[("annotations",)] == (3, 1)
    assert positions.tables[("annotations",)] == [(3, 1)]
    assert positions.keys[("annotations", "com")] == (4, 1)
    assert positions.keys[("annotations", "com", "hooks")] == (4, 1)
    assert positions.keys[("annotations", "com", "hooks", "cxi", "enabled")] == (4, 1)
    assert positions.values[("annotations", "com", "hooks", "cxi", "enabled")] == (4, 25)
    assert positions.keys[("annotations", "com", "hooks", "ssh")] == (6, 1)
    assert positions.tables[("annotations", "com", "hooks", "ssh")] == [(6, 1)]
    assert positions.keys[("annotations", "com", "hooks", "ssh", "enabled")] == (7, 1)
    assert positions.values[("annotations", "com", "hooks", "ssh", "enabled")] == (7, 11)
    assert positions.keys[("annotations", "com", "hooks", "ssh", "authorize_ssh_key")] == (8, 3)
    assert positions.values[("annotations", "com", "hooks", "ssh", "authorize_ssh_key")] == (8, 23)


def test_top_level_dotted_annotations():
    text = 'annotations.com.hooks.ssh.enabled = "true"\n'
    positions = scan(text)
    assert positions.keys[("annotations",)] == (1, 1)
    assert positions.values[("annotations", "com", "hooks", "ssh", "enabled")] == (1, 37)


def test_table_defined_twice_records_both_headers():
    text = '[env]\nA = "1"\n[env]\nB = "2"\n'
    with pytest.raises(tomllib.TOMLDecodeError):
        tomllib.loads(text)
    positions = tomlpos.scan(text)
    assert positions.tables[("env",)] == [(1, 1), (3, 1)]
    assert positions.keys[("env",)] == (1, 1)
    assert positions.values[("env", "B")] == (4, 5)


def test_crlf_and_unicode_columns_count_characters():
    text = 'a = "é"\r\n"äöü" = "x"\r\n[t]\r\nk = "ü" # ç\r\nz = 1\r\n'
    positions = scan(text)
    assert positions.values[("a",)] == (1, 5)
    assert positions.keys[("äöü",)] == (2, 1) and positions.values[("äöü",)] == (2, 9)
    assert positions.keys[("t",)] == (3, 1)
    assert positions.values[("t", "k")] == (4, 5)
    assert positions.values[("t", "z")] == (5, 5)


def test_scalars_of_every_kind():
    text = 'a = true\nb = -1_000\nc = 1979-05-27T07:32:00Z\nd = [inf, nan, 0x1F]\ne = 1.5e3 # c\n'
    positions = scan(text)
    assert [positions.values[(k,)] for k in "abcde"] == [(1, 5), (2, 5), (3, 5), (4, 5), (5, 5)]
    assert positions.values[("d", 2)] == (4, 16)


def test_lenient_on_broken_text():
    text = 'image = "ok"\nmounts = ["/a:/a",\n  "/b:/b"\nworkdir = "/w"\n'
    with pytest.raises(tomllib.TOMLDecodeError):
        tomllib.loads(text)
    positions = tomlpos.scan(text)
    assert positions.values[("image",)] == (1, 9)
    assert positions.values[("mounts", 0)] == (2, 11)
    assert positions.values[("mounts", 1)] == (3, 3)
    for broken in ['a = "unterminated\n', "[table\n", "= 1\n", 'k = """x', "x = [1,", "[[a]\n", "k =", '"q', "a.=1"]:
        tomlpos.scan(broken)  # never raises


def test_of_falls_back_to_ancestors_and_prefers_key_or_value():
    text = '[env]\nA = "1"\n'
    positions = scan(text)
    assert positions.of(("env", "A")) == (2, 5)
    assert positions.of(("env", "A"), key=True) == (2, 1)
    assert positions.of(("env", "MISSING")) == (1, 1)
    assert positions.of(("nothing", "here")) == (1, 1)
    assert positions.of(()) == (1, 1)
    assert tomlpos.scan("").of(("x",)) == (1, 1)
