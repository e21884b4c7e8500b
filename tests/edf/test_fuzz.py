"""Robustness of apps.edf.validator under hypothesis: random text, random EDF documents with right and
wrong types, and mutations of the corpus. validate must never raise and its findings must always be
well formed; plus the rules of ${...} expansion, derived by hand from the documentation."""
from __future__ import annotations

import json
import os
import re
import tomllib
from pathlib import Path

import tomlkit
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from apps.edf import validator
from apps.edf.vocabulary import ANNOTATIONS, FIELDS, MOUNT_FLAGS

CORPUS = Path(__file__).parent / "corpus"
BASES = {path.stem: path.read_text() for path in sorted((CORPUS / "bases").glob("*.toml"))}
TEXTS = [path.read_text() for path in sorted(CORPUS.glob("*.toml"))] + list(BASES.values())

# EDF_FUZZ_EXAMPLES=5000 for a longer run; the default keeps tests/edf fast.
FUZZ = settings(max_examples=int(os.environ.get("EDF_FUZZ_EXAMPLES", "300")), deadline=None,
                suppress_health_check=[HealthCheck.too_slow])
SYNTAX_RULES = {"toml-syntax", "toml-table-twice", "toml-key-twice"}


def check(text: str, **kwargs) -> validator.Result:
    """validate() must not raise, and what it returns must be consistent."""
    result = validator.validate(text, **kwargs)
    last_line = text.count("\n") + 1  # the (possibly empty) line after the last newline: end of document
    for finding in result.findings:
        assert finding.severity in ("error", "warning", "info"), finding
        assert finding.rule in validator.RULES, finding
        assert type(finding.line) is int and 1 <= finding.line <= last_line, (finding, last_line)
        assert type(finding.column) is int and finding.column >= 1, finding
        assert isinstance(finding.message, str) and finding.message.strip(), finding
        assert isinstance(finding.path, str)
        assert finding.hint is None or isinstance(finding.hint, str)
        finding.as_dict()
    assert result.valid is (not any(finding.severity == "error" for finding in result.findings))
    try:
        tomllib.loads(text)
    except (tomllib.TOMLDecodeError, RecursionError):
        # Syntax errors first-hand; every other finding comes from the text read past them, and says so.
        assert any(finding.rule in SYNTAX_RULES for finding in result.findings), result.findings
        for finding in result.findings:
            assert (finding.rule in SYNTAX_RULES) is (not finding.recovered), finding
        assert result.valid is False and result.resolved is None
    else:
        assert not any(finding.rule in SYNTAX_RULES or finding.recovered for finding in result.findings), result.findings
        assert isinstance(result.resolved, dict)
    return result


environments = st.one_of(
    st.none(),
    st.dictionaries(st.sampled_from(["USER", "HOME", "SCRATCH", "DATA", "X", "A"]), st.text(max_size=8), max_size=4),
)

# ---------------------------------------------------------------------------------------------
# (a) random text

TOML_CHARS = list('[]{}"\'=#.,:+$@-_ \t\n\r\\/') + list("abcdeimnotuwxyz019") + ["\n", "\n", "=", '"']
toml_ish = st.text(alphabet=st.sampled_from(TOML_CHARS), max_size=120)


@FUZZ
@given(st.one_of(st.text(max_size=200), toml_ish), environments)
def test_random_text(text, env):
    check(text, env=env)


@FUZZ
@given(st.lists(st.sampled_from([
    "[env]", "[annotations]", "[annotations.com.hooks.ssh]", "[[mounts]]", "[mounts]", "image = ", "mounts = [",
    '"/a:/b"', "]", ",", "{", "}", 'enabled = "true"', "com.hooks.ssh.enabled = ", '"${SCRATCH}"', "'''", '"""',
    "# c", "=", "true", "1", "base_environment = ", '"ngc-pytorch"', '"cycle-a"', "\n", "\n", " ", "a.b", '"x.y"',
]), max_size=25))
def test_random_token_soup(tokens):
    check("".join(tokens), base_environments=BASES)
    check("\n".join(tokens), base_environments=BASES)


# ---------------------------------------------------------------------------------------------
# (b) random documents over the known keys, with values of right and wrong types

safe_text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=20)
words = st.sampled_from(["", "a", "/capstor/data", "./rel", "rel/dir", "~/x", "${SCRATCH}", "${HOME}", "$HOME", "${X:-}",
                         "${1BAD}", "${OPEN", "$$", "/users", "tmpfs", "x.sqsh", "/dev/gdrdrv", ":", "+", " ", "é"])
piece = st.one_of(words, safe_text)
paths = st.lists(piece, min_size=1, max_size=4).map("".join)

images = st.one_of(
    st.sampled_from([
        "nvcr.io#nvidia/pytorch:25.06-py3", "nvcr.io/nvidia/pytorch:25.11-py3", "ubuntu", "alpine:3.20",
        "jfrog.svc.cscs.ch/docker-group-csstaff/alps-images/ngc-pytorch:26.02-py3-alps6", "opensuse/leap:15.6",
        "${SCRATCH}/img.sqsh", "img.sqsh", "/tmp/x", "ubuntu@sha256:" + "a" * 64, "a#b#c", "UPPER:1", "", " x",
        "user@nvcr.io#nvidia/cuda:12.4.1-devel", "nvcr.io#nvidia/cuda:13.0.0-base", "localhost:5000/x:1",
    ]),
    st.builds(lambda user, registry, repository, tag: user + registry + repository + tag,
              st.sampled_from(["", "alice@", "@"]), st.sampled_from(["", "nvcr.io#", "docker.io/", "quay.io#", "#"]),
              st.one_of(st.sampled_from(["nvidia/pytorch", "library/ubuntu", "x", "a/b/c", "eth-cscs/Img"]), safe_text),
              st.sampled_from(["", ":25.06-py3", ":latest", ":", ":cuda12-alps1", "@sha256:abc", ":a/b"])),
    safe_text,
)
mounts = st.one_of(
    st.builds(lambda source, destination, flags: ":".join([source, destination] + ([flags] if flags is not None else [])),
              paths, paths,
              st.one_of(st.none(), st.lists(st.sampled_from(list(MOUNT_FLAGS) + ["bogus", "", "ro,private"]),
                                            min_size=1, max_size=3).map("+".join))),
    paths,
)
annotation_names = st.one_of(
    st.sampled_from(list(ANNOTATIONS) + ["com.hooks.ssh.enable", "com.pyxis.x", "com.sarus.seccomp", "org.example.x",
                                         "com.hooks", "com.hooks.ssh", "plain"]),
    st.lists(st.sampled_from(["com", "hooks", "ssh", "enabled", "x", "a-b", "q.q", ""]), min_size=1, max_size=5).map(".".join),
)
annotation_values = st.one_of(
    st.sampled_from(["true", "false", "yes", "cuda12", "cuda13", "cuda-dl", "cuda11", "rocm6", "host", "artifact",
                     "latest", "26.05.1", "15263", "0", "99999", "/k.pub", "${HOME}/.ssh/k.pub", "ssh-ed25519 AAAA x",
                     "k.pub", ""]),
    safe_text,
)
env_names = st.one_of(st.sampled_from(["NCCL_DEBUG", "A", "B", "MY-VAR", "1X", "ENROOT_SLURM_HOOK", "ENROOT_LOGIN_SHELL",
                                       "x.y", ""]), st.from_regex(r"[A-Z_][A-Z0-9_]{0,6}", fullmatch=True))
base_names = st.one_of(st.sampled_from(sorted(BASES) + ["missing", "", "x.toml", "a/b", "./c.toml", "/abs/d"]), safe_text)

scalars = st.one_of(st.booleans(), st.integers(-(2**63), 2**63 - 1),
                    st.floats(allow_nan=False, allow_infinity=False), safe_text)
anything = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                          st.dictionaries(st.sampled_from(["a", "b", "c.d"]), inner, max_size=3)),
                        max_leaves=8)

RIGHT = {
    "base_environment": st.one_of(base_names, st.lists(base_names, max_size=3)),
    "image": images,
    "workdir": st.one_of(paths, st.sampled_from(["/w", "${SCRATCH}", "rel", "~/x", ""])),
    "entrypoint": st.booleans(),
    "writable": st.booleans(),
    "mounts": st.lists(mounts, max_size=4),
    "devices": st.lists(st.one_of(st.sampled_from(["nvidia.com/gpu=all", "/dev/gdrdrv", "gpu0"]), safe_text), max_size=3),
    "env": st.dictionaries(env_names, st.one_of(paths, anything), max_size=4),
    "annotations": st.dictionaries(annotation_names, st.one_of(annotation_values, annotation_values, anything), max_size=4),
}


@st.composite
def documents(draw):
    doc = {}
    for key in draw(st.lists(st.sampled_from(list(FIELDS) + ["mount", "gpus", "Image"]), unique=True, max_size=9)):
        wrong = key not in RIGHT or draw(st.integers(0, 9)) == 7
        doc[key] = draw(anything if wrong else RIGHT[key])
    return doc


def literal(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False).replace("\x7f", "\\u007f")
    if isinstance(value, list):
        return "[" + ", ".join(literal(item) for item in value) + "]"
    return "{" + ", ".join(f"{key_text(key)} = {literal(item)}" for key, item in value.items()) + "}"


def key_text(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else literal(key)


def dotted(key: str) -> str:
    return ".".join(key_text(part) for part in key.split("."))


def render(doc: dict, style: int) -> str:
    """Text for ``doc``: 0 tomlkit, 1 tables with dotted annotation keys, 2 tables with quoted keys, 3 inline."""
    if style == 0:
        return tomlkit.dumps(doc)
    top, tables = [], []
    for key, value in doc.items():
        if isinstance(value, dict) and style != 3:
            tables.append(f"\n[{key_text(key)}]")
            for name, item in value.items():
                name_text = dotted(name) if style == 1 and key == "annotations" else key_text(name)
                tables.append(f"{name_text} = {literal(item)}")
        else:
            top.append(f"{key_text(key)} = {literal(value)}")
    return "\n".join(top + tables) + "\n"


@FUZZ
@given(documents(), st.integers(0, 3), environments)
def test_random_documents(doc, style, env):
    text = render(doc, style)
    check(text, env=env, base_environments=BASES)
    if style in (0, 2, 3):  # these spellings always give back the same document
        assert tomllib.loads(text) == doc


@FUZZ
@given(st.lists(documents(), min_size=1, max_size=3), st.integers(0, 3))
def test_random_inheritance(docs, style):
    names = [f"gen{index}" for index in range(len(docs))]
    texts = {}
    for index, doc in enumerate(docs):
        doc = dict(doc)
        if index + 1 < len(docs):  # gen0 -> gen1 -> ... and sometimes back to the start
            doc["base_environment"] = [names[index + 1]] + (["gen0"] if index == 2 else [])
        texts[names[index]] = render(doc, style)
    result = check(texts["gen0"], base_environments={**BASES, **texts}, name="gen0")
    if result.resolved is not None:
        assert result.resolved["chain"][-1] == "gen0"


# ---------------------------------------------------------------------------------------------
# (c) mutations of the corpus

@st.composite
def mutated(draw):
    text = draw(st.sampled_from(TEXTS))
    for _ in range(draw(st.integers(1, 5))):
        lines = text.split("\n")
        operation = draw(st.sampled_from(["delete-char", "insert-char", "duplicate-char", "delete-line", "duplicate-line",
                                          "insert-line", "swap-lines", "swap-quote", "strip-quotes"]))
        position = draw(st.integers(0, len(text)))
        row = draw(st.integers(0, len(lines) - 1))
        if operation == "delete-char":
            text = text[:position] + text[position + 1:]
        elif operation == "insert-char":
            text = text[:position] + draw(st.sampled_from(TOML_CHARS + ["é", "\x00", "\x7f", "\ufeff"])) + text[position:]
        elif operation == "duplicate-char":
            text = text[:position] + text[position:position + 1] + text[position:]
        elif operation == "delete-line":
            text = "\n".join(lines[:row] + lines[row + 1:])
        elif operation == "duplicate-line":
            text = "\n".join(lines[:row + 1] + lines[row:])
        elif operation == "insert-line":
            other = draw(st.sampled_from(TEXTS)).split("\n")
            text = "\n".join(lines[:row] + [draw(st.sampled_from(other))] + lines[row:])
        elif operation == "swap-lines":
            other = draw(st.integers(0, len(lines) - 1))
            lines[row], lines[other] = lines[other], lines[row]
            text = "\n".join(lines)
        elif operation == "swap-quote":
            quotes = [index for index, char in enumerate(text) if char in "\"'"]
            if quotes:
                index = draw(st.sampled_from(quotes))
                text = text[:index] + ("'" if text[index] == '"' else '"') + text[index + 1:]
        else:
            lines[row] = lines[row].replace('"', "")
            text = "\n".join(lines)
    return text


@FUZZ
@given(mutated(), environments)
def test_mutated_corpus(text, env):
    check(text, env=env, base_environments=BASES)


@FUZZ
@given(st.sampled_from(TEXTS), st.sampled_from(sorted(BASES)), mutated())
def test_mutated_bases(text, name, base):
    check(text, base_environments={**BASES, name: base})


def test_deeply_nested_values_do_not_crash():
    for depth in (50, 400, 3000):
        check("a = " + "[" * depth + "]" * depth + "\n")
        check("a = " + "{b = " * depth + "1" + "}" * depth + "\n")
        check('base_environment = "deep"\n', base_environments={"deep": "a = " + "[" * depth + "]" * depth})


# ---------------------------------------------------------------------------------------------
# ${...} expansion: each piece expands on its own (hand-derived rules), so a string expands to the
# concatenation of its pieces' expansions.

NAMES = ["X", "Y", "HOME", "_v1"]
plain = st.text(alphabet=st.characters(blacklist_characters="${}", blacklist_categories=("Cs",)), min_size=1, max_size=6)
defaults = st.text(alphabet=st.characters(blacklist_characters="${}", blacklist_categories=("Cs",)), max_size=6)


@st.composite
def pieces(draw):
    """(text, expansion given env, missing names) for one piece; env is fixed per example."""
    kind = draw(st.sampled_from(["plain", "dollar", "ref", "default", "bare", "bad"]))
    name = draw(st.sampled_from(NAMES))
    if kind == "plain":
        text = draw(plain)
        return text, lambda env: (text, [])
    if kind == "dollar":  # $$ is a literal $, and what follows is not a reference
        return "$$", lambda env: ("$", [])
    if kind == "ref":  # ${NAME}: the value, inserted as is (never expanded again); unset: left as written
        text = "${" + name + "}"
        return text, lambda env: (env[name], []) if name in env else (text, [name])
    if kind == "default":  # ${NAME:-default}: the value when set, else everything after the first ':-'
        default = draw(defaults)
        return "${" + name + ":-" + default + "}", lambda env: (env[name] if name in env else default, [])
    if kind == "bare":  # $NAME without braces is not expanded
        text = "$" + name
        return text, lambda env: (text, [])
    text = "${" + draw(st.sampled_from(["1X", "", "a b", "X:y", "-"])) + "}"  # not a reference: kept as written
    return text, lambda env: (text, [])


env_values = st.one_of(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=6),
                       st.sampled_from(["${X}", "$$", "${Y:-z}", "$HOME"]))


@FUZZ
@given(st.lists(pieces(), max_size=8), st.dictionaries(st.sampled_from(NAMES), env_values, max_size=4))
def test_expand_follows_the_rules(parts, env):
    text = "".join(piece_text for piece_text, _ in parts)
    expected_text, expected_missing = "", []
    for _, expected in parts:
        piece_text, piece_missing = expected(env)
        expected_text += piece_text
        expected_missing += piece_missing
    assert validator.expand(text, env) == (expected_text, expected_missing)


@FUZZ
@given(st.sampled_from(NAMES), defaults, env_values)
def test_expand_examples(name, default, value):
    assert validator.expand("$$", {}) == ("$", [])
    assert validator.expand("$${" + name + "}", {name: value}) == ("${" + name + "}", [])
    assert validator.expand("$$$${" + name + "}", {name: value}) == ("$${" + name + "}", [])
    assert validator.expand("${" + name + ":-" + default + "}", {}) == (default, [])
    assert validator.expand("${" + name + ":-" + default + "}", {name: value}) == (value, [])
    assert validator.expand("${" + name + ":-}", {}) == ("", [])
    assert validator.expand("${" + name + "}", {}) == ("${" + name + "}", [name])
    assert validator.expand("/a/${" + name + "}/b", {name: value}) == (f"/a/{value}/b", [])
    assert validator.expand("${" + name, {name: value}) == ("${" + name, [])  # never closed: as written
    assert validator.expand("$", {}) == ("$", [])
