"""A ``cat`` of thousands of URLs strips and splits them as lists (``strip_paths``, ``split_paths``): the list
forms give what the rules of one path give. (That a ``cat`` of 1,024 URLs makes the Python calls of a ``cat`` of
64: tests/remote/test_wave_python.py.)"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gdsstore.adapters.fsspec.paths import split_path, split_paths, strip_path, strip_paths

_PART = st.text(st.sampled_from("ab/.:%"), max_size=6)
_URL = st.one_of(
    st.builds(lambda p, h, k: f"{p}://{h}/{k}", st.sampled_from(["http", "https", "s3", "s3a", "gds::s3"]), _PART, _PART),
    _PART,
)


def _verdict(fn: Any, *args: Any) -> Any:
    try:
        return fn(*args)
    except ValueError as exc:
        return type(exc)


@settings(max_examples=400, deadline=None)
@given(protocol=st.sampled_from(["http", "https", "s3", "s3a"]), paths=st.lists(_URL, max_size=8))
def test_a_list_strips_as_each_path_does(protocol: str, paths: list[str]) -> None:
    got = strip_paths(protocol, paths)
    assert got is None or got == [strip_path(protocol, p) for p in paths]


@settings(max_examples=400, deadline=None)
@given(protocol=st.sampled_from(["http", "https", "s3", "s3a"]), paths=st.lists(_URL, max_size=8))
def test_a_list_splits_as_each_path_does(protocol: str, paths: list[str]) -> None:
    stripped = [strip_path(protocol, p) for p in paths]
    got = split_paths(protocol, stripped)
    want = [_verdict(split_path, protocol, p, {}) for p in stripped]
    if got is None:
        return
    assert ValueError not in want  # a path the rule refuses is split one at a time, to be refused alone
    assert list(zip(*got)) == want


@pytest.mark.parametrize("urls", [["http://h/a", "http://h/b"], ["s3://b/x/", "s3://c/y"]])
def test_lists_of_one_spelling_take_the_list_form(urls: list[str]) -> None:
    protocol = urls[0].partition(":")[0]
    stripped = strip_paths(protocol, urls)
    assert stripped is not None and split_paths(protocol, stripped) is not None


@pytest.mark.parametrize(("protocol", "stripped"), [
    ("http", ["http://h:1/a/b", "http://h:1/c", "http://h:1/"]),
    ("https", ["https://h/x", "https://h/y/z"]),
    ("s3", ["bucket/a", "bucket/b/c", "bucket/"]),
    ("http", ["http://h/a", "http://h"]),  # one has no key: not one root, split each
    ("s3", ["b/a", "bb/a"]),
])
def test_paths_of_one_root_split_as_each_does(protocol: str, stripped: list[str]) -> None:
    got = split_paths(protocol, stripped)
    assert got is not None and list(zip(*got)) == [split_path(protocol, p, {}) for p in stripped]
