"""fsspec's shared filesystem suites (copy/get/put/pipe/open) for ``gds`` over local files."""

from __future__ import annotations

from typing import Any

import fsspec
import fsspec.tests.abstract as abstract
import pytest

from gdsstore.adapters.fsspec import GDSLocalFileSystem


class GDSLocalFixtures(abstract.AbstractFixtures):  # type: ignore[misc]
    @pytest.fixture
    def fs(self) -> Any:
        fs = fsspec.filesystem("gds")
        assert isinstance(fs, GDSLocalFileSystem)
        return fs

    @pytest.fixture
    def fs_path(self, tmp_path: Any) -> str:
        return str(tmp_path / "gds")


class TestGDSLocalCopy(abstract.AbstractCopyTests, GDSLocalFixtures):  # type: ignore[misc]
    pass


class TestGDSLocalGet(abstract.AbstractGetTests, GDSLocalFixtures):  # type: ignore[misc]
    pass


class TestGDSLocalPut(abstract.AbstractPutTests, GDSLocalFixtures):  # type: ignore[misc]
    pass


class TestGDSLocalPipe(abstract.AbstractPipeTests, GDSLocalFixtures):  # type: ignore[misc]
    pass


class TestGDSLocalOpen(abstract.AbstractOpenTests, GDSLocalFixtures):  # type: ignore[misc]
    pass
