"""Image references against the container image reference grammar (distribution/reference:
[registry[:port]/]path[:tag][@digest]), in the enroot/Pyxis spelling [USER@][REGISTRY#]IMAGE[:TAG] too:
the message names the fault and the finding sits on the exact column."""
from __future__ import annotations

import pytest

from apps.edf.validator import parse_image, validate


def image_finding(value: str, escaped: str | None = None):
    text = f'image = "{escaped if escaped is not None else value}"\nentrypoint = false\n'
    found = [f for f in validate(text).findings if f.rule == "image-syntax"]
    return found[0] if found else None


@pytest.mark.parametrize("value", [
    # the EDF reference's forms (docs/reference edf-vetnode-slurm.md §A.4)
    "library/ubuntu:24.04", "ubuntu:latest", "ubuntu", "docker.io#library/ubuntu:24.04",
    "nvcr.io#nvidia/pytorch:22.12-py3", "nvcr.io#nvidia/pytorch:24.01-py3", "quay.io#ethcscs/nvshmem:2.11",
    "nvcr.io/nvidia/pytorch:25.11-py3", "jfrog.svc.cscs.ch/docker-group-csstaff/alps-images/ngc-pytorch:26.02-py3-alps6",
    "ghcr.io/eth-cscs/alps-uenv:1", "alice@nvcr.io#nvidia/jax:25.04-py3", "localhost:5000/team/app:v1",
    "registry.example.org:5000#team/app:v1", "[::1]:5000/team/app:v1",
    # the grammar's separators and tag characters
    "a/b__c/d-e/f.g/h---i:Tag_1.0-rc", "x:_", "nvcr.io#nvidia/pytorch:" + "a" * 128,
    # digests: valid by the grammar (enroot's own limit is a separate warning)
    "ubuntu@sha256:" + "a" * 64, "docker.io#library/ubuntu:24.04@sha512:" + "0" * 128,
    # variables stand for something valid
    "nvcr.io#${TEAM:-nvidia}/pytorch:${TAG}",
])
def test_valid_references(value):
    ref, error, _ = parse_image(value)
    assert error is None and ref is not None and not ref.local, (value, error)
    assert image_finding(value) is None


def test_characters_outside_the_grammar_are_named_with_their_columns():
    finding = image_finding("‹img…>")
    assert (finding.line, finding.column) == (1, 10)
    assert finding.message == ("image: '‹' (U+2039) at column 10, '…' (U+2026) at column 14 and '>' at column 15 "
                               "are not allowed in an image reference")
    assert "[USER@][REGISTRY#]IMAGE[:TAG]" in finding.hint
    finding = image_finding("‹img from docs…>")
    assert finding.message == ("image: '‹' (U+2039) at column 10, spaces at columns 14 and 19, '…' (U+2026) at "
                               "column 24 and '>' at column 25 are not allowed in an image reference")


def test_columns_count_escapes_as_written():
    finding = image_finding("‹img", escaped="\\u2039img")
    assert finding.column == 10
    finding = image_finding("ab‹", escaped="a\\u0062\\u2039")
    assert finding.column == 10 + 1 + 6
    assert "column 17" in finding.message


@pytest.mark.parametrize("value, offset, words", [  # offset: of the character at fault in the value
    ("nvcr.io#NVIDIA/PyTorch:25.06-py3", 8, "the repository 'NVIDIA/PyTorch' has capital letters ('NVIDIA' at column 18)"),
    ("nvcr.io#nvidia#pytorch:25.06-py3", 14, "more than one '#' (the second at column 24)"),
    ("nvcr.io#nvidia/pytorch:25.06/py3", 28, "':25.06/py3' is not a valid tag: '/' at column 38"),
    ("nvcr.io#nvidia/pytorch:.hidden", 23, "':.hidden' is not a valid tag: it starts with '.'"),
    ("nvcr.io#nvidia/pytorch:", 22, "':' with no tag after it (at column 32)"),
    ("nvcr.io#nvidia/pytorch:" + "a" * 129, 23, "has 129 characters; at most 128"),
    ("nvcr.io#nvidia//pytorch:1", 15, "empty part between '/'s (at column 25)"),
    ("nvcr.io#nvidia/-pytorch:1", 15, "starts or ends with a separator (at column 25)"),
    ("nvcr.io#nvidia/py..torch:1", 17, "'..' at column 27"),
    ("nvcr_io#nvidia/pytorch:1", 0, "'nvcr_io' is not a registry host name"),
    ("#nvidia/pytorch:1", 0, "'' is not a registry host name"),
    ("ubuntu@sha256:abc", 6, "is not a digest (at column 16)"),
    ("ubuntu@sha256:" + "A" * 64, 6, "is not a digest"),
    ("a" * 256, 0, "the image name has 256 characters; at most 255"),
])
def test_each_fault_is_named_where_it_is(value, offset, words):
    finding = image_finding(value)
    assert finding is not None, value
    assert words in finding.message, finding.message
    assert finding.column == 10 + offset, (finding.column, finding.message)  # the value starts at column 10


def test_leading_spaces_and_local_paths():
    assert image_finding(" ubuntu:24.04").message == "image: the image has leading or trailing spaces"
    finding = image_finding("/capstor/my image.sqsh")
    assert finding.message == "image: the image path has a space at column 21" and finding.column == 21
    assert parse_image("${SCRATCH}/ce-images/x.sqsh")[0].local
