"""Validate Environment Definition Files (EDF) before they meet srun.

``validate(text)`` parses the TOML strictly (``tomllib``; on a syntax error ``tomlsyntax`` says
exactly what and where, and the checks below run on the text read past it, their findings marked
``recovered``), finds where each value sits (``tomlpos``), checks every field, annotation and
variable against ``vocabulary``, resolves the ``base_environment`` chain from the EDFs it is given, and checks the merged result (hooks that
need a writable container, NCCL plugin variants, Alps Extended Images, ...). Every finding carries
a severity, a 1-based line and column, the TOML path, a message, a hint where one exists, and the
id of the rule that produced it (``RULES``). Plain Python: no Django.
"""
from __future__ import annotations

import difflib
import re
import tomllib
from dataclasses import dataclass, field, replace
from pathlib import PurePosixPath

from . import tomlpos, tomlsyntax
from .vocabulary import (
    ANNOTATIONS, ARRAY, BOOLEAN, FIELDS, JOB_VARIABLE_PREFIXES, JOB_VARIABLES, KNOWN_NAMESPACES, MAX_BASE_DEPTH,
    MAX_EDF_CHARS, MOUNT_FLAGS, STRING, TABLE,
)

ERROR, WARNING, INFO = "error", "warning", "info"
_SEVERITY_ORDER = {ERROR: 0, WARNING: 1, INFO: 2}

RULES: dict[str, str] = {
    "too-large": "The EDF is larger than the portal accepts.",
    "toml-syntax": "The text is not valid TOML 1.0.",
    "toml-table-twice": "A table is defined twice (often the two annotation spellings mixed).",
    "toml-key-twice": "A key is set twice in one table, or set as a value and defined as a table.",
    "unknown-key": "A top-level key the Container Engine does not know.",
    "type": "A field has the wrong TOML type.",
    "image-syntax": "The image is not a valid [USER@][REGISTRY#]IMAGE[:TAG] reference or image path.",
    "image-registry-slash": "The registry is written Docker-style (nvcr.io/...) instead of with '#'.",
    "image-digest": "The image is pinned by @sha256 digest, which enroot does not parse.",
    "image-local-path": "A local SquashFS image path that is relative without ./ or not a .sqsh file.",
    "image-local-location": "A local image outside the recommended scratch/capstor locations.",
    "image-no-tag": "The image has no tag, so it floats with 'latest'.",
    "image-missing": "No image after resolving base environments: no container.",
    "mount-syntax": "A mount is not SOURCE:DESTINATION[:FLAGS].",
    "mount-source-only": "A mount gives only the source (not portable to Sarus Suite).",
    "mount-path": "A mount source or destination is neither absolute nor ./relative.",
    "mount-flag": "An unknown mount flag, or flags separated by ',' instead of '+'.",
    "mount-sqsh": "The sqsh flag combined with other flags or on a source that is not a .sqsh file.",
    "mount-home": "A whole home directory (or /users) is mounted.",
    "mount-duplicate": "Two mounts to the same destination, or the same mount twice.",
    "workdir-path": "workdir is not an absolute path.",
    "env-value-type": "An [env] value is not a string.",
    "env-name": "An [env] name that is not a valid variable name.",
    "env-unset": "An [env] value is empty, which unsets the variable.",
    "env-reference": "An [env] value refers to another [env] entry, which expansion does not see.",
    "annotation-value-type": "An annotation value is not a string.",
    "annotation-unknown": "An annotation under com.hooks or com.pyxis that no hook reads.",
    "annotation-value": "An annotation value that its hook does not accept.",
    "annotation-sarus": "An annotation only Sarus Suite reads.",
    "ssh-key-text": "authorize_ssh_key holds key text or a relative path instead of an absolute file path.",
    "ssh-needs-pty": "The SSH hook needs srun --pty.",
    "hook-needs-writable": "The SSH or CUDA MPS hook with writable = false.",
    "variant-ignored": "aws_ofi_nccl.variant is set but ignored with netstack.source = \"artifact\".",
    "variant-cuda-mismatch": "A static aws_ofi_nccl variant for another CUDA major than the image's.",
    "variant-cuda-dl": "The cuda-dl variant needs libcudart.so in the image.",
    "nccl-hook": "An NGC deep-learning image without the AWS OFI NCCL hook.",
    "extended-image": "An Alps Extended Image without entrypoint = true or with the CXI hook on.",
    "alpine-image": "An Alpine image without the CXI and Slurm hooks switched off.",
    "opensuse-image": "An openSUSE image whose PATH differs without the entrypoint.",
    "entrypoint-implicit": "entrypoint is not set anywhere; its default changed in 2025.",
    "devices-sarus": "devices is read only by Sarus Suite.",
    "devices-syntax": "A device is neither a CDI name nor a /dev path.",
    "var-syntax": "A malformed ${...} reference.",
    "var-bare": "$VAR without braces is not expanded.",
    "var-undefined": "A variable that is not set when the job starts.",
    "base-name": "A base_environment entry that srun would read differently than intended.",
    "base-unresolved": "A base_environment the portal cannot find.",
    "base-cycle": "base_environment entries that inherit from each other.",
    "base-depth": "More than 10 levels of base_environment.",
    "base-invalid": "A base environment that has errors itself.",
}


@dataclass(frozen=True)
class Finding:
    severity: str
    line: int
    column: int
    path: str
    message: str
    hint: str | None
    rule: str
    recovered: bool = False  # found on the text read past a TOML syntax error (see ``tomlsyntax``)

    def as_dict(self) -> dict:
        return {"severity": self.severity, "line": self.line, "column": self.column, "path": self.path,
                "message": self.message, "hint": self.hint, "rule": self.rule, "recovered": self.recovered}


@dataclass
class Result:
    valid: bool
    findings: list[Finding]
    resolved: dict | None

    @property
    def errors(self) -> list[Finding]:
        return [finding for finding in self.findings if finding.severity == ERROR]


# ('annotations', 'com', 'hooks', 'ssh', 'enabled') -> 'annotations."com.hooks.ssh.enabled"': the pre-scan's, shared.
path_text = tomlsyntax.path_text


def kind_of(value) -> str:
    if isinstance(value, bool):
        return BOOLEAN
    if isinstance(value, str):
        return STRING
    if isinstance(value, list):
        return ARRAY
    if isinstance(value, dict):
        return TABLE
    if isinstance(value, (int, float)):
        return "number"
    return "date/time"


def _toml_literal(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return str(value)


# --------------------------------------------------------------------------------------------
# Variable references: ${NAME}, ${NAME:-default}, $$ (a literal $), and the mistakes around them.

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class Reference:
    kind: str  # "ref" (${NAME}), "bare" ($NAME), "bad" (malformed)
    name: str
    offset: int  # character offset of the $ in the string
    has_default: bool = False
    default: str = ""
    text: str = ""


def references(value: str) -> list[Reference]:
    out, i, n = [], 0, len(value)
    while i < n:
        if value[i] != "$":
            i += 1
            continue
        if value.startswith("$$", i):
            i += 2
            continue
        if value.startswith("${", i):
            end = value.find("}", i + 2)
            if end < 0:
                out.append(Reference("bad", "", i, text=value[i:i + 20]))
                return out
            body = value[i + 2:end]
            name, sep, default = body.partition(":-")
            if not _NAME.fullmatch(name) or (":" in body and not sep):
                out.append(Reference("bad", name, i, text=value[i:end + 1]))
            else:
                out.append(Reference("ref", name, i, bool(sep), default, value[i:end + 1]))
            i = end + 1
            continue
        match = _NAME.match(value, i + 1)
        if match:
            out.append(Reference("bare", match.group(), i, text=value[i:match.end()]))
            i = match.end()
        else:
            i += 1
    return out


def expand(value: str, env: dict[str, str]) -> tuple[str, list[str]]:
    """Expand ${NAME} and ${NAME:-default} from ``env``; ``$$`` gives ``$``. Returns the text and the
    names that were missing (left as written)."""
    out, missing, i, n = [], [], 0, len(value)
    while i < n:
        if value.startswith("$$", i):
            out.append("$")
            i += 2
            continue
        if value.startswith("${", i):
            end = value.find("}", i + 2)
            if end > 0:
                name, sep, default = value[i + 2:end].partition(":-")
                if _NAME.fullmatch(name):
                    if sep and not env.get(name):
                        out.append(default)  # as in the shell: unset or empty takes the default
                    elif name in env:
                        out.append(env[name])
                    else:
                        missing.append(name)
                        out.append(value[i:end + 1])
                    i = end + 1
                    continue
        out.append(value[i])
        i += 1
    return "".join(out), missing


def _split_mount(value: str) -> list[str]:
    """Split on ':' outside ${...} (so ${VAR:-x} stays whole)."""
    parts, depth, current = [], 0, []
    for index, char in enumerate(value):
        if char == "{" and index and value[index - 1] == "$":
            depth += 1
        elif char == "}" and depth:
            depth -= 1
        if char == ":" and not depth:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return parts


def _is_pathlike(value: str) -> bool:
    return value.startswith(("/", "./", "../", "${", "$")) or value in (".", "..")


# --------------------------------------------------------------------------------------------
# Images: the container image reference grammar (github.com/distribution/reference), written the
# enroot/Pyxis way as [USER@][REGISTRY#]IMAGE[:TAG][@DIGEST] or the Docker way as [REGISTRY/]IMAGE...

_HOST_COMPONENT = r"(?:[A-Za-z0-9]|[A-Za-z0-9][A-Za-z0-9-]*[A-Za-z0-9])"
_REGISTRY = re.compile(rf"(?:{_HOST_COMPONENT}(?:\.{_HOST_COMPONENT})*|\[[0-9A-Fa-f:]+\])(?::[0-9]+)?")
_COMPONENT = re.compile(r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*")
_TAG = re.compile(r"\w[\w.-]{0,127}", re.ASCII)
_DIGEST_ALGORITHM = re.compile(r"[A-Za-z][A-Za-z0-9]*(?:[+._-][A-Za-z][A-Za-z0-9]*)*")
_DIGEST_LENGTHS = {"sha256": 64, "sha384": 96, "sha512": 128}
_NAME_MAX = 255
_IMAGE_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-/:@#+[]")
_USER_CHARS = _IMAGE_CHARS | frozenset("$!~*'()%;&=,")
_IMAGE_FORM = "[USER@][REGISTRY#]IMAGE[:TAG], e.g. nvcr.io#nvidia/pytorch:25.06-py3"


@dataclass(frozen=True)
class ImageRef:
    user: str | None
    registry: str | None
    repository: str
    tag: str | None
    digest: str | None
    slash_registry: bool
    local: bool


def _char_name(char: str) -> str:
    if char == " ":
        return "a space"
    if char == "\t":
        return "a tab"
    if char.isascii() and char.isprintable():
        return f"'{char}'"
    return f"'{char}' (U+{ord(char):04X})" if char.isprintable() else f"U+{ord(char):04X}"


def _at(offset: int) -> str:
    return f"character {offset + 1}"


def parse_image(value: str, locate=None) -> tuple[ImageRef | None, str | None, str | None]:
    """(reference, error message, hint). Local paths come back with ``local=True``. ``locate(offset)``
    words a position in the value (default "character N")."""
    ref, error, hint, _ = image_problem(value, locate)
    return ref, error, hint


def image_problem(value: str, locate=None) -> tuple[ImageRef | None, str | None, str | None, int]:
    """As ``parse_image``, plus the offset in ``value`` of the first character at fault."""
    locate = locate or _at
    if value != value.strip():
        offset = 0 if value[:1].isspace() else len(value.rstrip())
        return None, "the image has leading or trailing spaces", "Remove the spaces inside the quotes.", offset
    if _is_pathlike(value) or value.endswith((".sqsh", ".squashfs")):
        space = next((index for index, char in enumerate(value) if char.isspace()), None)
        if space is not None:
            return None, f"the image path has {_char_name(value[space])} at {locate(space)}", \
                "enroot splits image paths at spaces: rename the file.", space
        return ImageRef(None, None, value, None, None, False, True), None, None, 0
    # ${VAR} stands for something valid; $$ is a literal $, which no reference has.
    text = re.sub(r"\$\{[^}]*\}", lambda match: "x" * len(match.group()), value)
    hash_at = text.find("#")
    user_end = text.find("@", 0, hash_at) if hash_at > 0 else -1
    bad = [(index, char) for index, char in enumerate(text)
           if char not in (_USER_CHARS if index < user_end else _IMAGE_CHARS)]
    if bad:
        where: dict[str, list[str]] = {}
        for index, char in bad:
            where.setdefault(char, []).append(locate(index))
        shown = []
        for char, places in list(where.items())[:6]:
            name = _char_name(char)
            if len(places) > 1:
                name = {"a space": "spaces", "a tab": "tabs"}.get(name, name)
                unit = places[0].split()[0]
                numbers = [place.split()[-1] for place in places]
                places = [f"{unit}s " + ", ".join(numbers[:-1]) + " and " + numbers[-1]]
            shown.append(f"{name} at {places[0]}")
        more = f" and {len(where) - 6} more characters" if len(where) > 6 else ""
        listing = (", ".join(shown[:-1]) + " and " + shown[-1]) if len(shown) > 1 and not more else ", ".join(shown) + more
        return None, f"{listing} {'is' if len(bad) == 1 else 'are'} not allowed in an image reference", (
            f"An image reference is {_IMAGE_FORM}: letters, digits and . _ - / : @ # only "
            "(or an absolute path to a .sqsh file)."), bad[0][0]
    user, registry, slash, start = None, None, False, 0
    if hash_at >= 0:
        second = text.find("#", hash_at + 1)
        if second >= 0:
            return None, f"the image has more than one '#' (the second at {locate(second)})", \
                "Only one '#' separates the registry from the image.", second
        if user_end >= 0:
            user = value[:user_end]
            if not user:
                return None, "'@' with no user name before it", "Write USER@REGISTRY#IMAGE, or leave out the '@'.", 0
        registry_start = user_end + 1
        registry = value[registry_start:hash_at]
        if not _REGISTRY.fullmatch(text[registry_start:hash_at]):
            return None, f"'{registry}' is not a registry host name", \
                "Write REGISTRY#IMAGE, e.g. nvcr.io#nvidia/pytorch:25.06-py3.", registry_start
        start = hash_at + 1
    else:
        first, sep, _ = text.partition("/")
        if sep and ("." in first or ":" in first or first == "localhost"):
            registry, slash, start = value[:len(first)], True, len(first) + 1
            if not _REGISTRY.fullmatch(first):
                return None, f"'{registry}' is not a registry host name", \
                    "A registry is a host name with an optional :PORT, e.g. nvcr.io or registry.example.org:5000.", 0
    # IMAGE[:TAG][@DIGEST]: a path has no ':' or '@', so the first of each starts the tag or the digest
    at_digest = text.find("@", start)
    end = at_digest if at_digest >= 0 else len(text)
    digest = value[at_digest + 1:] if at_digest >= 0 else None
    colon = text.find(":", start, end)
    path_end = colon if colon >= 0 else end
    repository = value[start:path_end]
    offset = start
    for component in text[start:path_end].split("/"):
        if not _COMPONENT.fullmatch(component):
            lower = component.lower()
            if not component:
                message = "the image name has an empty part between '/'s" if repository else "the image has no name"
                return None, f"{message} (at {locate(offset)})", f"Use {_IMAGE_FORM}.", offset
            if component != lower and _COMPONENT.fullmatch(lower):
                fixed = value[start:path_end].lower()
                return None, f"the repository '{repository}' has capital letters ('{component}' at {locate(offset)})", \
                    f"Image repositories are lower case: {fixed}.", offset
            if not component[0].isalnum() or not component[-1].isalnum():
                where = offset if not component[0].isalnum() else offset + len(component) - 1
                return None, f"'{component}' in the image name starts or ends with a separator (at {locate(where)})", \
                    "Each '/'-separated part starts and ends with a letter or digit.", where
            separator = re.search(r"[._-]{2,}", component)
            where = offset + (separator.start() if separator else 0)
            return None, f"'{component}' is not a valid part of an image name" + (
                f": '{separator.group()}' at {locate(where)}" if separator else ""), \
                "Parts are lower-case letters and digits joined by '.', '_', '__' or dashes.", where
        offset += len(component) + 1
    registry_length = len(registry) + 1 if registry else 0
    if registry_length + len(repository) > _NAME_MAX:
        return None, f"the image name has {registry_length + len(repository)} characters; at most {_NAME_MAX} are allowed", \
            None, start
    tag = None
    if colon >= 0:
        tag = value[colon + 1:end]
        checked = text[colon + 1:end]
        if not _TAG.fullmatch(checked):
            if not checked:
                return None, f"':' with no tag after it (at {locate(colon)})", "Write :TAG, or leave out the ':'.", colon
            if len(checked) > 128:
                return None, f"the tag ':{tag[:20]}…' has {len(checked)} characters; at most 128 are allowed", None, colon + 1
            wrong = next((index for index, char in enumerate(checked) if not re.fullmatch(r"[\w.-]", char, re.ASCII)), 0)
            char = checked[wrong]
            why = f"{_char_name(char)} at {locate(colon + 1 + wrong)}" if wrong or char not in ".-" else \
                f"it starts with {_char_name(char)}"
            return None, f"':{tag}' is not a valid tag: {why}", \
                "Tags are letters, digits, '_', '.' and '-' (not first), up to 128 characters.", colon + 1 + wrong
    if digest is not None:
        algorithm, sep, hex_part = digest.partition(":")
        length = _DIGEST_LENGTHS.get(algorithm)
        ok = (sep and _DIGEST_ALGORITHM.fullmatch(algorithm) and re.fullmatch(r"[0-9a-fA-F]{32,}", hex_part)
              and (length is None or (len(hex_part) == length and hex_part == hex_part.lower())))
        if not ok:
            return None, f"'@{digest}' is not a digest (at {locate(at_digest)})", \
                "A digest is ALGORITHM:HEX, e.g. @sha256: followed by 64 lower-case hex digits.", at_digest
    return ImageRef(user, registry, repository, tag, digest, slash, False), None, None, 0


_CUDA_IN_TAG = re.compile(r"(?:^|[^a-z])(?:cuda|cu)[-_]?(\d{2})(?:[.\d]*)", re.IGNORECASE)


def image_cuda_major(ref: ImageRef) -> int | None:
    """The CUDA major an image was built for, when its name says so (nvidia/cuda:12.4.1-..., ...-cuda13...)."""
    if ref.local:
        return None
    if ref.repository.endswith("nvidia/cuda") or ref.repository == "cuda":
        match = re.match(r"(\d+)\.", ref.tag or "")
        return int(match.group(1)) if match else None
    match = _CUDA_IN_TAG.search(f"{ref.repository}:{ref.tag or ''}")
    return int(match.group(1)) if match else None


def is_extended_image(ref: ImageRef) -> bool:
    return "alps-images" in ref.repository or bool(re.search(r"-alps\d*$", ref.tag or ""))


def is_ngc_dl_image(ref: ImageRef) -> bool:
    return bool(re.search(r"(?:^|/)nvidia/(?:pytorch|jax|tensorflow|nemo)$|ngc-(?:pytorch|jax)", ref.repository))


# --------------------------------------------------------------------------------------------
# The checker: one instance per file.

def _string_column(line_text: str, column: int, offset: int) -> int:
    """The column of character ``offset`` of the string value whose opening quote is at ``column``:
    escapes (\\t, \\u00e9, ...) count as the characters they take in the text."""
    quote_at = column - 1
    if line_text[quote_at:quote_at + 1] != '"' or line_text.startswith('"""', quote_at):
        return column + offset + 1
    index, decoded = quote_at + 1, 0
    while decoded < offset and index < len(line_text):
        if line_text[index] == "\\":
            following = line_text[index + 1:index + 2]
            index += 6 if following == "u" else 10 if following == "U" else 2
        else:
            index += 1
        decoded += 1
    return index + 1 + (offset - decoded)


class _Checker:
    def __init__(self, positions: tomlpos.Positions, text: str | None = None):
        self.positions = positions
        self.findings: list[Finding] = []
        self._lines = text.split("\n") if text is not None else None

    def column_at(self, path, offset: int) -> int | None:
        """The column of character ``offset`` of the string at ``path``, when its position is known."""
        if tuple(path) not in self.positions.values:
            return None
        line, column = self.positions.values[tuple(path)]
        if self._lines is None or line > len(self._lines):
            return column + offset + 1
        return _string_column(self._lines[line - 1], column, offset)

    def add(self, rule: str, severity: str, path, message: str, hint: str | None = None, *, key: bool = False,
            offset: int | None = None) -> None:
        assert rule in RULES, rule
        line, column = self.positions.of(path, key=key)
        if offset is not None and tuple(path) in self.positions.values:
            column = self.column_at(path, offset)
        self.findings.append(Finding(severity, line, column, path_text(path), message, hint, rule))

    # -- fields -------------------------------------------------------------------------------

    def document(self, data: dict) -> None:
        for key, value in data.items():
            spec = FIELDS.get(key)
            if spec is None:
                self.unknown_key(key)
                continue
            kind = kind_of(value)
            if kind not in spec.kinds:
                self.wrong_type(key, value, spec.kinds)
                continue
            if kind == ARRAY:
                for index, item in enumerate(value):
                    if kind_of(item) != spec.items:
                        self.add("type", ERROR, (key, index),
                                 f"{key}[{index}] must be a {spec.items}, not a {kind_of(item)}",
                                 f"Quote it: {_toml_literal(str(item))}" if spec.items == STRING and kind_of(item) not in (ARRAY, TABLE) else None)
            getattr(self, f"field_{key}")(value)

    def unknown_key(self, key: str) -> None:
        guess = difflib.get_close_matches(key, FIELDS, n=1, cutoff=0.6)
        aliases = {"mount": "mounts", "environment": "env", "working_dir": "workdir", "cwd": "workdir",
                   "read_only": "writable", "readonly": "writable", "base": "base_environment",
                   "annotation": "annotations", "device": "devices"}
        guess = [aliases[key]] if key in aliases else guess
        self.add("unknown-key", WARNING, (key,), f"unknown key '{key}': the Container Engine ignores it",
                 f"Did you mean '{guess[0]}'?" if guess else "Known keys: " + ", ".join(FIELDS), key=True)

    def wrong_type(self, key: str, value, kinds) -> None:
        wanted = " or ".join(f"a {kind}" if kind != ARRAY else "an array" for kind in kinds)
        hint = None
        if BOOLEAN in kinds and isinstance(value, str) and value.strip().lower() in ("true", "false"):
            hint = f"Write {key} = {value.strip().lower()} without quotes: it is a boolean."
        elif BOOLEAN in kinds and isinstance(value, str) and value.strip().lower() in ("yes", "on", "1", "y", "enabled"):
            hint = f"Write {key} = true (no quotes): TOML booleans are true and false."
        elif BOOLEAN in kinds and isinstance(value, str) and value.strip().lower() in ("no", "off", "0", "n", "disabled"):
            hint = f"Write {key} = false (no quotes): TOML booleans are true and false."
        elif BOOLEAN in kinds:
            hint = f"Write {key} = true or {key} = false, without quotes."
        elif STRING in kinds and kind_of(value) in (BOOLEAN, "number"):
            hint = f"Quote it: {key} = {_toml_literal(_toml_literal(value) if isinstance(value, bool) else str(value))}"
        elif key == "mounts" and isinstance(value, str):
            hint = f"mounts is a list: mounts = [{_toml_literal(value)}]"
        elif key == "mounts" and isinstance(value, dict):
            hint = 'There is no table form of mounts: write mounts = ["SOURCE:DESTINATION[:FLAGS]", ...].'
        elif key in ("env", "annotations") and not isinstance(value, dict):
            hint = f"Write it as a table: [{key}] on its own line, then KEY = \"value\" lines."
        self.add("type", ERROR, (key,), f"{key} must be {wanted}, not a{'n' if kind_of(value)[0] in 'aeiou' else ''} {kind_of(value)}", hint)

    def field_base_environment(self, value) -> None:
        entries = [value] if isinstance(value, str) else value
        for index, entry in enumerate(entries):
            path = ("base_environment",) if isinstance(value, str) else ("base_environment", index)
            if not isinstance(entry, str):
                continue
            if not entry.strip():
                self.add("base-name", ERROR if isinstance(value, list) else INFO, path,
                         "empty base_environment entry" if isinstance(value, list) else "base_environment is empty: nothing is inherited",
                         "Remove it." if isinstance(value, list) else None)
                continue
            if not _is_pathlike(entry) and entry.endswith(".toml"):
                self.add("base-name", ERROR, path,
                         f"'{entry}' ends in .toml, so srun reads it as a path relative to the directory srun runs in, "
                         "not as a name in the EDF search path",
                         f"Write the bare name '{entry[:-5]}' to use ${{HOME}}/.edf or EDF_PATH, or './{entry}' for a file here.")
            elif not _is_pathlike(entry) and "/" in entry:
                self.add("base-name", WARNING, path,
                         f"'{entry}' is neither a bare name nor an absolute or ./relative path",
                         f"Write '/{entry}' or './{entry}' if it is a path.")

    def field_image(self, value: str) -> None:
        path = ("image",)
        if not value:
            return
        if value.startswith("~"):
            self.add("image-local-path", ERROR, path, "'~' is not expanded in an EDF", "Write ${HOME} instead of ~.")
            return
        def locate(offset):
            column = self.column_at(path, offset)
            return f"column {column}" if column is not None else f"character {offset + 1}"

        ref, error, hint, offset = image_problem(value, locate)
        if error:
            self.add("image-syntax", ERROR, path, f"image: {error}", hint, offset=offset)
            return
        if ref.local:
            if not value.endswith((".sqsh", ".squashfs")):
                self.add("image-local-path", WARNING, path,
                         f"'{value}' is read as a local image path, but it is not a .sqsh SquashFS file",
                         "A registry image needs no leading / or ./; a local image is the .sqsh file `enroot import` makes.")
            elif not _is_pathlike(value):
                self.add("image-local-path", ERROR, path, f"relative image path '{value}' needs a leading ./",
                         f"Write './{value}' (relative to where srun runs) or an absolute path.")
            elif not re.match(r"(\$\{SCRATCH\}|/capstor/|/iopsstor/)", value):
                self.add("image-local-location", INFO, path, "local images are best kept on scratch or capstor",
                         "e.g. ${SCRATCH}/ce-images/pytorch.sqsh: fast to read from every node.")
            return
        if ref.slash_registry:
            suggestion = f"{(ref.user + '@') if ref.user else ''}{ref.registry}#{ref.repository}" + (f":{ref.tag}" if ref.tag else "")
            self.add("image-registry-slash", INFO, path,
                     f"registry '{ref.registry}' written with '/': current vClusters accept it, plain enroot reads it as a Docker Hub path",
                     f"'{suggestion}' works everywhere.")
        if ref.digest:
            self.add("image-digest", WARNING, path, "enroot does not parse @sha256 digests in image references",
                     "Pin a tag instead, or import the image to a .sqsh file with enroot import and use its path.")
        elif ref.tag is None:
            self.add("image-no-tag", INFO, path, f"no tag: '{value}' means '{value}:latest', which changes over time",
                     "Pin a tag, e.g. :25.06-py3, so reruns use the same image.")

    def field_workdir(self, value: str) -> None:
        if value.startswith("~"):
            self.add("workdir-path", ERROR, ("workdir",), "'~' is not expanded in an EDF", "Write ${HOME} instead of ~.")
        elif value and not value.startswith(("/", "${", "$")):
            self.add("workdir-path", ERROR, ("workdir",), f"workdir '{value}' must be an absolute path inside the container",
                     f"Write '/{value}' or start it with a variable such as ${{SCRATCH}}.")

    def field_entrypoint(self, value: bool) -> None:
        pass  # type checked; combined checks in ``_merged_checks``

    def field_writable(self, value: bool) -> None:
        pass

    def field_mounts(self, value: list) -> None:
        seen: dict[str, int] = {}
        destinations: dict[str, tuple[int, str]] = {}
        for index, mount in enumerate(value):
            if not isinstance(mount, str):
                continue
            path = ("mounts", index)
            if mount in seen:
                self.add("mount-duplicate", INFO, path, f"the same mount as mounts[{seen[mount]}]: it is used once",
                         "Remove the repetition.")
                continue
            seen[mount] = index
            destination = self.mount(path, mount)
            if destination is None:
                continue
            if destination in destinations:
                earlier, source = destinations[destination]
                self.add("mount-duplicate", WARNING, path,
                         f"destination {destination} is already mounted by mounts[{earlier}] (from {source}): the later one hides it",
                         "Give each mount its own destination.")
            else:
                destinations[destination] = (index, mount.split(":")[0])

    def mount(self, path, mount: str) -> str | None:
        """Check one mount; returns its destination when the mount can be read."""
        if not mount.strip():
            self.add("mount-syntax", ERROR, path, "empty mount", "Remove it or write SOURCE:DESTINATION.")
            return None
        parts = _split_mount(mount)
        if len(parts) > 3:
            self.add("mount-syntax", ERROR, path,
                     f"'{mount}' has {len(parts)} ':'-separated fields; a mount is SOURCE:DESTINATION[:FLAGS]",
                     "Paths containing ':' cannot be mounted; flags are joined with '+', e.g. /data:/data:ro+private.")
            return None
        if any(not part for part in parts):
            self.add("mount-syntax", ERROR, path, f"'{mount}' has an empty field", "Write SOURCE:DESTINATION[:FLAGS].")
            return None
        source = parts[0]
        destination = parts[1] if len(parts) > 1 else source
        flags = parts[2].split("+") if len(parts) > 2 else []
        if len(parts) == 1:
            self.add("mount-source-only", WARNING, path,
                     f"'{mount}' gives no destination: the Container Engine mounts it at the same path, Sarus Suite refuses it",
                     f"Write '{mount}:{mount}'.")
        for role, value in (("source", source), ("destination", destination)):
            if value.startswith("~"):
                self.add("mount-path", ERROR, path, f"mount {role} '{value}': '~' is not expanded", "Write ${HOME} instead of ~.")
                return None
            if role == "source" and value in ("tmpfs", "umount"):
                self.add("mount-path", INFO, path, f"'{value}' as a source is an upstream Pyxis feature",
                         "Check that your vCluster supports it.")
                continue
            if not _is_pathlike(value):
                self.add("mount-path", ERROR, path,
                         f"mount {role} '{value}' must be an absolute path or start with ./",
                         f"Write './{value}' (relative to where srun runs) or an absolute path." if role == "source"
                         else f"Write '/{value}'.")
                return None
        if re.fullmatch(r"(/users/?|/users/[^/]+/?|\$\{HOME\}/?|\$HOME/?|/users/\$\{USER\}/?)", source):
            self.add("mount-home", WARNING, path,
                     f"mounting {source} whole brings your shell start-up files and caches (~/.triton, ~/.cache) into the "
                     "container and hides the SSH hook's ~/.ssh",
                     "Mount the sub-directories you need, e.g. ${HOME}/project:${HOME}/project.")
        if "," in (parts[2] if len(parts) > 2 else ""):
            self.add("mount-flag", ERROR, path, f"mount flags '{parts[2]}' are separated by ','", f"Join them with '+': {parts[2].replace(',', '+')}.")
            return destination
        if "sqsh" in flags:
            if len(flags) > 1:
                self.add("mount-sqsh", ERROR, path, "the sqsh flag must be the only flag of its mount",
                         f"Write '{source}:{destination}:sqsh'; SquashFS mounts are read-only anyway.")
            if not source.endswith((".sqsh", ".squashfs")):
                self.add("mount-sqsh", WARNING, path, f"sqsh mounts a SquashFS file, but '{source}' does not look like one",
                         "The source must be a regular .sqsh file made with mksquashfs.")
        for flag in flags:
            if flag not in MOUNT_FLAGS:
                guess = difflib.get_close_matches(flag, MOUNT_FLAGS, n=1, cutoff=0.5)
                self.add("mount-flag", WARNING, path, f"unknown mount flag '{flag}': it is passed to mount(8) as is",
                         f"Did you mean '{guess[0]}'?" if guess else "Known flags: " + ", ".join(MOUNT_FLAGS))
        return destination

    def field_devices(self, value: list) -> None:
        self.add("devices-sarus", WARNING, ("devices",), "devices is read only by Sarus Suite; the Container Engine ignores it",
                 "GPUs are mounted automatically by the Container Engine.", key=True)
        for index, device in enumerate(value):
            if isinstance(device, str) and not (re.fullmatch(r"[a-z0-9.-]+/[a-z0-9_.-]+=[A-Za-z0-9_.:-]+", device)
                                                or re.fullmatch(r"/dev/\S+", device)):
                self.add("devices-syntax", ERROR, ("devices", index),
                         f"device '{device}' is neither a CDI name (vendor.com/class=name) nor a /dev path",
                         "e.g. nvidia.com/gpu=all or /dev/gdrdrv")

    def field_env(self, value: dict) -> None:
        for name, item in value.items():
            path = ("env", name)
            if not isinstance(item, str):
                if isinstance(item, dict):
                    self.add("env-value-type", ERROR, path,
                             f"[env] {name} is a table: a dotted name (A.B = ...) in [env] makes a nested table",
                             f'Quote the name: "{name}.…" = "value", or use a name without dots.', key=True)
                else:
                    self.add("env-value-type", ERROR, path, f"[env] {name} must be a string, not a {kind_of(item)}",
                             f"Quote it: {name} = {_toml_literal(_toml_literal(item) if isinstance(item, bool) else str(item))}")
                continue
            if not _NAME.fullmatch(name):
                self.add("env-name", WARNING, path, f"'{name}' is not a valid environment variable name",
                         "Use letters, digits and '_', not starting with a digit.", key=True)
            if item == "":
                self.add("env-unset", INFO, path, f"{name} = \"\" unsets {name} in the container")

    def field_annotations(self, value: dict) -> None:
        for flat, (path, item) in _flatten_annotations(value).items():
            if not isinstance(item, str):
                hint = None
                if isinstance(item, bool):
                    hint = f'Quote it: "{_toml_literal(item)}"'
                elif isinstance(item, (int, float)):
                    hint = f'Quote it: "{item}"'
                self.add("annotation-value-type", ERROR, path, f"annotation {flat} must be a string, not a {kind_of(item)}", hint)
                continue
            spec = ANNOTATIONS.get(flat)
            if spec is None:
                if flat.startswith(KNOWN_NAMESPACES):
                    guess = difflib.get_close_matches(flat, ANNOTATIONS, n=1, cutoff=0.75)
                    self.add("annotation-unknown", WARNING, path, f"no hook reads the annotation {flat}",
                             f"Did you mean {guess[0]}?" if guess else "Known: " + ", ".join(a for a in ANNOTATIONS if a.startswith(flat.rsplit(".", 1)[0])) or None,
                             key=True)
                elif flat.startswith("com.sarus."):
                    self.add("annotation-sarus", INFO, path, f"{flat} is read only by Sarus Suite", key=True)
                continue
            if spec.sarus_only:
                self.add("annotation-sarus", INFO, path, f"{flat} is read only by Sarus Suite", key=True)
            self.annotation_value(flat, path, item, spec)

    def annotation_value(self, flat: str, path, item: str, spec) -> None:
        if spec.kind == "enum" and item not in spec.values:
            if item in spec.retired:
                self.add("annotation-value", WARNING, path, f"{flat} = \"{item}\" was retired in 2026-06",
                         "Use " + " or ".join(f'"{v}"' for v in spec.values if v.startswith("cuda")) + ".")
                return
            lowered = item.strip().lower()
            hint = f'Write "{lowered}".' if lowered in spec.values else "Allowed: " + ", ".join(f'"{v}"' for v in spec.values)
            if spec.values == ("true", "false") and lowered in ("yes", "on", "1", "enabled"):
                hint = 'Write "true".'
            elif spec.values == ("true", "false") and lowered in ("no", "off", "0", "disabled"):
                hint = 'Write "false".'
            self.add("annotation-value", ERROR, path, f"{flat} does not accept \"{item}\"", hint)
        elif spec.kind == "port":
            if not (re.fullmatch(r"[0-9]{1,5}", item) and 1 <= int(item) <= 65535):  # ASCII digits: "²".isdigit() is True
                self.add("annotation-value", ERROR, path, f"{flat} = \"{item}\" is not a port number", 'e.g. "15263"')
        elif spec.kind == "version":
            if not re.fullmatch(r"latest|\d+(\.\d+){1,3}", item):
                self.add("annotation-value", WARNING, path, f"{flat} = \"{item}\" does not look like a release",
                         'Use "latest" or a release such as "26.05.1".')
        elif spec.kind == "path":
            if re.match(r"(ssh-(rsa|ed25519|dss)|ecdsa-sha2-|sk-(ssh|ecdsa))", item) or re.search(r"\s", item.strip()):
                self.add("ssh-key-text", ERROR, path, f"{flat} holds key text; it takes the path of the public-key file",
                         'Write the path, e.g. "${HOME}/.ssh/container_key.pub".')
            elif not item.startswith(("/", "${", "$")):
                self.add("ssh-key-text", ERROR, path, f"{flat} = \"{item}\" must be an absolute path",
                         'e.g. "${HOME}/.ssh/container_key.pub"')

    # -- variables in every string of the file ------------------------------------------------

    def variables(self, data: dict, env: dict | None, env_names: set[str]) -> None:
        for path, value in _strings(data):
            if path[0] not in FIELDS:
                continue
            for ref in references(value):
                if ref.kind == "bad":
                    self.add("var-syntax", ERROR, path, f"'{ref.text}' is not a variable reference",
                             "Write ${NAME} or ${NAME:-default}; a literal $ is written $$.", offset=ref.offset)
                elif ref.kind == "bare":
                    self.add("var-bare", WARNING, path, f"'{ref.text}' has no braces, so it is not expanded",
                             f"Write ${{{ref.name}}}; for a literal $, write $$.", offset=ref.offset)
                elif path[0] == "env" and ref.name in env_names and ref.name != path[1]:
                    self.add("env-reference", WARNING, path,
                             f"${{{ref.name}}} takes {ref.name} from the host, not from the [env] entry of that name",
                             f"Repeat the value here, or set {ref.name} before srun.", offset=ref.offset)
                elif not ref.has_default:
                    known = env is not None and ref.name in env
                    if env is not None and not known:
                        self.add("var-undefined", ERROR, path, f"${{{ref.name}}} is not set in the chosen environment: srun would fail",
                                 f"Set {ref.name} before srun, or write ${{{ref.name}:-}} for an empty default.", offset=ref.offset)
                    elif env is None and ref.name not in JOB_VARIABLES and not ref.name.startswith(JOB_VARIABLE_PREFIXES):
                        self.add("var-undefined", INFO, path, f"${{{ref.name}}} must be set when srun runs, or the launch fails",
                                 f"Write ${{{ref.name}:-}} if it may be unset.", offset=ref.offset)


def _flatten_annotations(value: dict, prefix=("annotations",)) -> dict:
    """{'com': {'hooks': {'ssh': {'enabled': 'true'}}}} -> {'com.hooks.ssh.enabled': (path, 'true')}."""
    out = {}
    for key, item in value.items():
        path = prefix + (key,)
        flat = ".".join(path[1:])
        if isinstance(item, dict) and not item:
            continue  # an empty table sets nothing
        if isinstance(item, dict) and flat not in ANNOTATIONS:
            out.update(_flatten_annotations(item, path))
        else:
            out[flat] = (path, item)
    return out


def _strings(data, path=()):
    if isinstance(data, str):
        yield path, data
    elif isinstance(data, dict):
        for key, value in data.items():
            yield from _strings(value, path + (key,))
    elif isinstance(data, list):
        for index, value in enumerate(data):
            yield from _strings(value, path + (index,))


# --------------------------------------------------------------------------------------------
# Parsing

def _parse(text: str) -> tuple[dict | None, Finding | None]:
    """The document, or None and its first syntax error (base environments: no recovery)."""
    try:
        return tomllib.loads(text), None
    except (tomllib.TOMLDecodeError, RecursionError):
        issues = tomlsyntax.diagnose(text).issues
        return None, _syntax_finding(min(issues, key=lambda issue: (issue.line, issue.column)))


def _syntax_finding(issue: tomlsyntax.Issue) -> Finding:
    return Finding(ERROR, issue.line, max(issue.column, 1), path_text(issue.path), issue.message, issue.hint, issue.rule)


# --------------------------------------------------------------------------------------------
# Inheritance

@dataclass
class _File:
    label: str
    data: dict
    positions: tomlpos.Positions


@dataclass
class _Chain:
    files: list[_File] = field(default_factory=list)  # bases first, the checked file last
    findings: list[Finding] = field(default_factory=list)


def _lookup(name: str, base_environments: dict[str, str]) -> str | None:
    if name in base_environments:
        return base_environments[name]
    stem = PurePosixPath(name).name.removesuffix(".toml")
    if stem in base_environments:
        return base_environments[stem]
    return None


def _base_entries(data: dict) -> list[tuple[int | None, str]]:
    value = data.get("base_environment")
    if isinstance(value, str):
        return [(None, value)] if value.strip() else []
    if isinstance(value, list):
        return [(index, item) for index, item in enumerate(value) if isinstance(item, str) and item.strip()]
    return []


def _resolve_chain(top: _File, base_environments: dict[str, str], self_name: str | None) -> _Chain:
    chain = _Chain()
    checker = _Checker(top.positions)
    parsed: dict[str, _File | None] = {}

    def report_path(index):
        return ("base_environment",) if index is None else ("base_environment", index)

    def visit(file: _File, depth: int, stack: tuple[str, ...], via) -> None:
        for index, name in _base_entries(file.data):
            entry_path = report_path(index) if via is None else via
            trail = " → ".join(stack[1:] + (name,))
            if name in stack:
                checker.add("base-cycle", ERROR, entry_path, f"base_environment cycle: {' → '.join(stack + (name,))}",
                            "Remove one of the references so the chain ends.")
                continue
            if depth + 1 > MAX_BASE_DEPTH:
                checker.add("base-depth", ERROR, entry_path,
                            f"more than {MAX_BASE_DEPTH} levels of base_environment ({trail})",
                            "Flatten the chain: srun stops at 10 levels.")
                return
            if name not in parsed:
                text = _lookup(name, base_environments)
                if text is None:
                    parsed[name] = None
                else:
                    data, syntax = _parse(text)
                    if syntax:
                        checker.add("base-invalid", ERROR, entry_path,
                                    f"base environment '{trail}' is not valid TOML (its line {syntax.line}: {syntax.message})",
                                    f"Fix '{name}' first.")
                        parsed[name] = None
                        continue
                    positions = tomlpos.scan(text)
                    base_checker = _Checker(positions)
                    base_checker.document(data)
                    errors = [f for f in base_checker.findings if f.severity == ERROR]
                    if errors:
                        first = errors[0]
                        checker.add("base-invalid", ERROR, entry_path,
                                    f"base environment '{trail}' has {len(errors)} error{'s' * (len(errors) > 1)} "
                                    f"(its line {first.line}: {first.message})", f"Fix '{name}' first.")
                    parsed[name] = _File(name, data, positions)
                if parsed[name] is None and text is None:
                    where = "the saved EDFs" if base_environments else "the EDFs given to the validator"
                    checker.add("base-unresolved", WARNING, entry_path,
                                f"base environment '{trail}' is not among {where}; it is not checked",
                                "srun looks bare names up in ${HOME}/.edf and EDF_PATH; paths must exist on the cluster.")
                    continue
            base = parsed[name]
            if base is None:
                continue
            visit(base, depth + 1, stack + (name,), entry_path)
            chain.files.append(base)

    visit(top, 0, (self_name or "this file",), None)
    chain.files.append(top)
    chain.findings = checker.findings
    return chain


def merge(files: list[_File]) -> tuple[dict, dict]:
    """Merge base environments left to right, then the file itself (the Container Engine's rules):
    scalars — later wins; mounts — appended; env and annotations — key by key, later wins; devices —
    appended without repeats. Returns the merged EDF and where each value came from."""
    merged = {"image": "", "workdir": None, "entrypoint": None, "writable": None, "mounts": [], "devices": [],
              "env": {}, "annotations": {}}
    origin: dict[str, str] = {}
    for file in files:
        data = file.data
        for key in ("image", "workdir"):
            if isinstance(data.get(key), str):
                merged[key], origin[key] = data[key], file.label
        for key in ("entrypoint", "writable"):
            if isinstance(data.get(key), bool):
                merged[key], origin[key] = data[key], file.label
        if isinstance(data.get("mounts"), list):
            for mount in data["mounts"]:
                if isinstance(mount, str) and mount not in merged["mounts"]:
                    origin[f"mounts[{len(merged['mounts'])}]"] = file.label
                    merged["mounts"].append(mount)
        if isinstance(data.get("devices"), list):
            for device in data["devices"]:
                if isinstance(device, str) and device not in merged["devices"]:
                    merged["devices"].append(device)
        if isinstance(data.get("env"), dict):
            for name, value in data["env"].items():
                if isinstance(value, str):
                    merged["env"][name], origin[f"env.{name}"] = value, file.label
        if isinstance(data.get("annotations"), dict):
            for flat, (_, value) in _flatten_annotations(data["annotations"]).items():
                if isinstance(value, str):
                    merged["annotations"][flat], origin[f"annotations.{flat}"] = value, file.label
    return merged, origin


def _merged_checks(checker: _Checker, top: _File, merged: dict, origin: dict, has_bases: bool) -> None:
    """Rules about the environment as srun will build it, reported where this file can act on them."""
    own = top.data

    def where(*candidates):
        """The first of the candidate paths that this file defines, else its base_environment, else the top."""
        for candidate in candidates:
            if candidate and _defines(own, candidate):
                return candidate
        return ("base_environment",) if has_bases else ()

    def advise(rule, path, message, hint):
        """Advice (info) about values this file only inherits belongs to the base that sets them."""
        if not (has_bases and path == ("base_environment",)):
            checker.add(rule, INFO, path, message, hint)

    annotations = merged["annotations"]
    image_ref = None
    if merged["image"]:
        ref, error, _ = parse_image(merged["image"])
        image_ref = None if error else ref
    elif not any(f.rule in ("image-syntax", "base-cycle", "base-depth", "base-invalid") for f in checker.findings):
        checker.add("image-missing", WARNING, where(("image",)),
                    "no image: srun --environment will run the job outside any container",
                    'Set image = "REGISTRY#IMAGE:TAG" (or inherit one with base_environment).')

    for hook in ("ssh", "nvidia_cuda_mps"):
        flag = f"com.hooks.{hook}.enabled"
        if annotations.get(flag) == "true" and merged["writable"] is False:
            checker.add("hook-needs-writable", ERROR, where(("writable",), _annotation_path(own, flag)),
                        f"the {'SSH' if hook == 'ssh' else 'CUDA MPS'} hook needs a writable container, but writable = false",
                        "Set writable = true (the default) or switch the hook off.")
    if annotations.get("com.hooks.ssh.enabled") == "true":
        advise("ssh-needs-pty", where(_annotation_path(own, "com.hooks.ssh.enabled")),
                    "the SSH hook serves only while the step runs: start it with srun --pty",
                    "e.g. srun --environment=NAME --pty bash, then ssh -p 15263 from a login node.")

    variant = annotations.get("com.hooks.aws_ofi_nccl.variant")
    variant_path = _annotation_path(own, "com.hooks.aws_ofi_nccl.variant")
    if variant and annotations.get("com.hooks.netstack.source") == "artifact":
        checker.add("variant-ignored", WARNING, where(variant_path, _annotation_path(own, "com.hooks.netstack.source")),
                    'aws_ofi_nccl.variant is ignored when netstack.source = "artifact"',
                    "Remove the variant, or choose the library with com.hooks.netstack.name.")
    elif variant in ("cuda12", "cuda13") and image_ref is not None:
        major = image_cuda_major(image_ref)
        if major is not None and major != int(variant[4:]):
            checker.add("variant-cuda-mismatch", WARNING, where(variant_path, ("image",)),
                        f'aws_ofi_nccl.variant = "{variant}" but the image is built for CUDA {major}',
                        f'Use "cuda{major}" if the plugin offers it, or the dynamically linked "cuda-dl".')
    elif variant == "cuda-dl":
        advise("variant-cuda-dl", where(variant_path),
                    "the cuda-dl plugin loads libcudart.so from the image",
                    "NGC images have it; minimal images may need a libcudart.so symlink.")

    if (image_ref is not None and is_ngc_dl_image(image_ref) and not is_extended_image(image_ref)
            and "com.hooks.aws_ofi_nccl.enabled" not in annotations):
        advise("nccl-hook", where(("image",)),
                    "NCCL in this image talks over Slingshot at full speed only with the AWS OFI NCCL hook",
                    'Add com.hooks.aws_ofi_nccl.enabled = "true" and variant = "cuda-dl" under [annotations].')
    if image_ref is not None and is_extended_image(image_ref):
        if merged["entrypoint"] is not True:
            checker.add("extended-image", WARNING, where(("entrypoint",), ("image",)),
                        "Alps Extended Images set up their environment in the entrypoint", "Set entrypoint = true.")
        if annotations.get("com.hooks.cxi.enabled") != "false":
            checker.add("extended-image", WARNING, where(_annotation_path(own, "com.hooks.cxi.enabled"), ("image",)),
                        "Alps Extended Images bring their own network stack; the CXI hook must be off",
                        'Add com.hooks.cxi.enabled = "false" under [annotations].')
    if image_ref is not None and re.search(r"(^|/)alpine$", image_ref.repository):
        if annotations.get("com.hooks.cxi.enabled") != "false" or merged["env"].get("ENROOT_SLURM_HOOK") != "0":
            checker.add("alpine-image", WARNING, where(("image",)), "Alpine images start only with the CXI and Slurm hooks off",
                        'Add com.hooks.cxi.enabled = "false" under [annotations] and ENROOT_SLURM_HOOK = "0" under [env].')
    if image_ref is not None and re.search(r"opensuse|(^|/)sles|suse/", image_ref.repository):
        if merged["entrypoint"] is not True and merged["env"].get("ENROOT_LOGIN_SHELL") != "no":
            advise("opensuse-image", where(("image",)),
                        "in openSUSE images PATH differs unless the entrypoint or login shell sets it up",
                        'Set entrypoint = true, or ENROOT_LOGIN_SHELL = "no" under [env].')
    if merged["entrypoint"] is None and image_ref is not None:
        advise("entrypoint-implicit", where(("image",)),
                    "entrypoint is not set: it defaults to false (the documentation said true until 2025-09)",
                    "Write entrypoint = false (or true) so the file means the same everywhere.")


def _defines(data: dict, path) -> bool:
    node = data
    for part in path:
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and isinstance(part, int) and part < len(node):
            node = node[part]
        else:
            return False
    return True


def _annotation_path(data: dict, flat: str):
    annotations = data.get("annotations")
    if isinstance(annotations, dict):
        for candidate, (path, _) in _flatten_annotations(annotations).items():
            if candidate == flat:
                return path
    return None


# --------------------------------------------------------------------------------------------

def validate(text: str, *, base_environments: dict[str, str] | None = None, env: dict[str, str] | None = None,
             name: str | None = None) -> Result:
    """Check one EDF. ``base_environments`` maps names (or paths) to EDF texts for inheritance;
    ``env`` is the environment srun would see, for ${VAR} expansion (None: not known)."""
    base_environments = base_environments or {}
    if len(text) > MAX_EDF_CHARS:
        finding = Finding(ERROR, 1, 1, "", f"the EDF has {len(text):,} characters; the portal accepts at most {MAX_EDF_CHARS:,}",
                          "EDFs are a few dozen lines; check that this is the right file.", "too-large")
        return Result(False, [finding], None)
    recovery = None
    try:
        data = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, RecursionError):
        # Say exactly what is wrong, then check the rest as far as the text can be read past it.
        recovery = tomlsyntax.diagnose(text)
        syntax = [_syntax_finding(issue) for issue in recovery.issues]
        if recovery.data is None:
            return Result(False, _ordered(syntax), None)
        data, text = recovery.data, recovery.text
    positions = tomlpos.scan(text)
    top = _File(name or "this file", data, positions)
    checker = _Checker(positions, text)
    checker.document(data)

    chain = _resolve_chain(top, base_environments, name)
    checker.findings.extend(chain.findings)
    merged, origin = merge(chain.files)
    checker.variables(data, env, set(merged["env"]))
    _merged_checks(checker, top, merged, origin, bool(_base_entries(data)))

    if recovery is not None:
        # Found on the recovered text: marked so. Advice that something is missing is left out where
        # a statement was dropped to read on (it may be the one that sets it).
        kept = [replace(f, recovered=True) for f in checker.findings
                if not (recovery.dropped and f.rule in _ABSENCE_RULES)]
        return Result(False, _ordered(syntax + kept), None)
    findings = _ordered(checker.findings)
    resolved = _resolved(chain, merged, origin, env)
    return Result(not any(f.severity == ERROR for f in findings), findings, resolved)


# Rules that report that something is not set: on a recovered text, the dropped lines may set it.
_ABSENCE_RULES = frozenset({"image-missing", "entrypoint-implicit", "nccl-hook", "extended-image", "alpine-image",
                            "opensuse-image"})


def _ordered(findings: list[Finding]) -> list[Finding]:
    return sorted(findings, key=lambda f: (f.line, f.column, _SEVERITY_ORDER[f.severity], f.rule))


def _resolved(chain: _Chain, merged: dict, origin: dict, env: dict | None) -> dict:
    effective = dict(merged)
    defaults = []
    for key in ("entrypoint", "writable"):
        if effective[key] is None:
            effective[key] = FIELDS[key].default
            defaults.append(key)
    out = {"chain": [file.label for file in chain.files], **effective, "defaults": defaults, "origin": origin,
           "expanded": None, "missing_variables": []}
    if env is not None:
        missing: set[str] = set()

        def ex(value):
            text, absent = expand(value, env)
            missing.update(absent)
            return text

        out["expanded"] = {
            "image": ex(effective["image"]),
            "workdir": ex(effective["workdir"]) if effective["workdir"] else effective["workdir"],
            "mounts": [ex(mount) for mount in effective["mounts"]],
            "env": {key: ex(value) for key, value in effective["env"].items()},
            "annotations": {key: ex(value) for key, value in effective["annotations"].items()},
        }
        out["missing_variables"] = sorted(missing)
    return out
