"""The documentation is tested like code.

- ``mkdocs build --strict`` passes (broken links, bad anchors, missing API objects fail it).
- Every ```` ```python ```` block of every page runs: the blocks of one page in order, in one namespace,
  in a temporary working directory. Blocks that must not run are ```` ```bash ````, ```` ```console ````,
  ```` ```text ```` (or data: json, yaml); other fence languages are rejected so none is skipped silently.
  GPU code is guarded inside the block (``if cuda.device_count():``).
- The settings table of ``docs/settings.md`` matches ``gdsstore._config.DEFAULTS``.
- ``docs/cli.md`` names exactly the subcommands and options of the real ``gdsstore`` command.
- Every notebook in ``notebooks/`` executes (nbclient, this interpreter's ipykernel), has no committed
  outputs, and leaves no files behind.
"""

from __future__ import annotations

import copy
import importlib.util
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

# Loaded by path: the tests directory is not a package, whatever pytest's import mode.
_spec = importlib.util.spec_from_file_location(
    "gdsstore_docs_settings_table", Path(__file__).with_name("settings_table.py")
)
assert _spec is not None and _spec.loader is not None
settings_table = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(settings_table)

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
NOTEBOOKS = ROOT / "notebooks"
PAGES = sorted(DOCS.rglob("*.md"))
NOTEBOOK_FILES = sorted(NOTEBOOKS.glob("*.ipynb"))

RUN_LANGS = {"python"}
NO_RUN_LANGS = {"bash", "console", "text", "json", "yaml", ""}

# Modules other work is still writing. A page or notebook that needs one that is not in the tree yet is
# skipped (with the module named); once the file exists, any error in it fails the test.
PENDING_MODULES = ("gdsstore.adapters.zarr_store", "gdsstore.adapters.fsspec")

_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>[^\n`]*)$")


def code_blocks(text: str) -> list[tuple[str, int, str]]:
    """``(language, first line number (1-based) of the code, code)`` for every fenced block."""
    blocks: list[tuple[str, int, str]] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence = m.group("indent"), m.group("fence")
        lang = m.group("info").strip().split(" ")[0].lstrip(".").split("{")[0].lower()
        body: list[str] = []
        j = i + 1
        while j < len(lines) and not (
            lines[j].strip().startswith(fence) and lines[j].strip().strip(fence[0]) == ""
        ):
            body.append(lines[j][len(indent) :] if lines[j].startswith(indent) else lines[j].lstrip())
            j += 1
        if j == len(lines):
            raise AssertionError(f"unclosed code fence at line {i + 1}")
        blocks.append((lang, i + 2, "\n".join(body) + "\n"))
        i = j + 1
    return blocks


def _module_in_tree(mod: str) -> bool:
    base = ROOT.joinpath(*mod.split("."))
    return base.with_suffix(".py").exists() or (base / "__init__.py").exists()


def _pending_skip(exc: BaseException) -> str | None:
    """A skip reason when ``exc`` is the import of a pending module that is not in the tree yet."""
    name = getattr(exc, "name", None)
    if not isinstance(exc, ModuleNotFoundError) or not name:
        return None
    for mod in PENDING_MODULES:
        if (mod == name or mod.startswith(name + ".")) and not _module_in_tree(mod):
            return f"needs {mod}, which is not written yet"
    return None


@pytest.fixture
def restore_config() -> Iterator[None]:
    """Pages may change gdsstore's and zarr's configuration; put both back afterwards."""
    import zarr

    import gdsstore

    saved = copy.deepcopy(gdsstore.config.config)
    saved_zarr = copy.deepcopy(zarr.config.config)
    try:
        yield
    finally:
        gdsstore.config.config = saved
        zarr.config.config = saved_zarr


# -- mkdocs ------------------------------------------------------------------------------------------


@pytest.mark.timeout(300)
def test_mkdocs_build_strict(tmp_path: Path) -> None:
    pytest.importorskip("mkdocs", reason="the docs build needs the docs extra: pip install -e '.[docs]'")
    pytest.importorskip("mkdocstrings_handlers.python", reason="pip install -e '.[docs]'")
    site = tmp_path / "site"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "mkdocs",
            "build",
            "--strict",
            "-f",
            str(ROOT / "mkdocs.yml"),
            "-d",
            str(site),
        ],
        capture_output=True,
        text=True,
        timeout=280,
        cwd=tmp_path,
        env=env,
        check=False,
    )
    assert out.returncode == 0, f"mkdocs build --strict failed:\n{out.stdout}\n{out.stderr}"
    # The API reference was generated from the docstrings, not left empty.
    engine = (site / "reference" / "engine" / "index.html").read_text()
    assert "LocalFile" in engine and "pread" in engine and "backend_for" in engine
    top = (site / "reference" / "gdsstore" / "index.html").read_text()
    assert "storage_options" in top  # gdsstore.open's documented arguments
    # Every public name of the package has a reference entry (the anchor mkdocstrings gives its object).
    import gdsstore

    anchors = set()
    for page in (site / "reference").rglob("*.html"):
        anchors |= set(re.findall(r'id="(gdsstore[\w.]*)"', page.read_text()))
    missing = []
    for name in gdsstore.__all__:
        obj = getattr(gdsstore, name)
        if name == "__version__":
            continue
        if name == "config":
            target = "gdsstore._config"
        elif isinstance(obj, type(gdsstore)):
            target = obj.__name__
        else:
            target = f"{obj.__module__}.{obj.__qualname__}"
        if target not in anchors:
            missing.append(f"gdsstore.{name} ({target})")
    assert not missing, f"no API reference entry for: {missing}"


def test_every_page_is_in_the_nav() -> None:
    yml = (ROOT / "mkdocs.yml").read_text()
    nav = set(re.findall(r":\s*([\w/.-]+\.md)\s*$", yml, flags=re.M))
    pages = {p.relative_to(DOCS).as_posix() for p in PAGES}
    assert pages - nav == set(), "pages missing from the nav in mkdocs.yml"
    assert nav - pages == set(), "nav entries without a page"


# -- code blocks -------------------------------------------------------------------------------------


def test_fence_languages_are_known() -> None:
    bad = []
    for page in PAGES:
        for lang, line, _ in code_blocks(page.read_text()):
            if lang not in RUN_LANGS | NO_RUN_LANGS:
                bad.append(f"{page.relative_to(ROOT)}:{line}: ```{lang}")
    assert not bad, "use ```python (runs) or ```bash/```console/```text (does not):\n" + "\n".join(bad)


def test_json_and_yaml_blocks_parse() -> None:
    import yaml

    for page in PAGES:
        for lang, line, code in code_blocks(page.read_text()):
            where = f"{page.relative_to(ROOT)}:{line}"
            if lang == "json":
                try:
                    json.loads(code)
                except ValueError as exc:
                    raise AssertionError(f"{where}: not valid JSON: {exc}") from None
            elif lang == "yaml":
                assert yaml.safe_load(code) is not None, where


def test_code_block_parser() -> None:
    text = "x\n```python\na = 1\n```\n\n    ```bash\n    ls\n    ```\n```text\nout\n```\n"
    assert code_blocks(text) == [("python", 3, "a = 1\n"), ("bash", 7, "ls\n"), ("text", 10, "out\n")]


PY_PAGES = [p for p in PAGES if any(lang == "python" for lang, _, _ in code_blocks(p.read_text()))]


@pytest.mark.timeout(180)
@pytest.mark.parametrize("page", PY_PAGES, ids=[p.relative_to(DOCS).as_posix() for p in PY_PAGES])
@pytest.mark.usefixtures("restore_config")
def test_page_python_blocks_run(page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    rel = page.relative_to(ROOT).as_posix()
    ns: dict[str, Any] = {"__name__": "__main__"}
    ran = 0
    for lang, line, code in code_blocks(page.read_text()):
        if lang != "python":
            continue
        # Pad so tracebacks point at the line in the .md file.
        compiled = compile("\n" * (line - 1) + code, rel, "exec")
        try:
            exec(compiled, ns)
        except Exception as exc:
            reason = _pending_skip(exc)
            if reason:
                pytest.skip(f"{rel} from line {line} on: {reason} ({ran} block(s) before it ran)")
            raise
        ran += 1
    assert ran > 0


# -- settings ----------------------------------------------------------------------------------------


def test_settings_table_matches_defaults() -> None:
    text = settings_table.PAGE.read_text()
    rows = settings_table.parse_table(text)
    expected = settings_table.expected_rows()
    hint = "regenerate with: .venv/bin/python tests/docs/settings_table.py"
    assert list(rows) == list(expected), f"keys differ from gdsstore._config.DEFAULTS; {hint}"
    for key, (env, default) in expected.items():
        got_env, got_default, description = rows[key]
        assert got_env == env, f"{key}: environment variable {got_env} != {env}; {hint}"
        assert got_default == default, f"{key}: default {got_default} != {default}; {hint}"
        assert description and description != "TODO", f"{key}: describe it in docs/settings.md"
    assert settings_table.regenerate() == text


def test_every_setting_is_named_in_settings_page() -> None:
    text = settings_table.PAGE.read_text()
    for key in settings_table.flatten(settings_table.DEFAULTS):
        assert f"`{key}`" in text
        assert f"`{settings_table.env_var(key)}`" in text


def test_settings_env_var_spelling_is_donfigs(monkeypatch: pytest.MonkeyPatch) -> None:
    """The documented variables really set the keys (donfig's parsing, not just our spelling)."""
    from donfig import Config

    from gdsstore._config import DEFAULTS

    monkeypatch.setenv("GDSSTORE_REMOTE__MAX_ATTEMPTS", "9")
    monkeypatch.setenv(settings_table.env_var("gds_threshold"), "4096")
    cfg = Config("gdsstore", defaults=[DEFAULTS])
    assert cfg.get("remote.max_attempts") == 9
    assert cfg.get("gds_threshold") == 4096


def test_settings_yaml_example_sets_known_keys(tmp_path: Path) -> None:
    """The YAML example of docs/settings.md, read by donfig the way gdsstore's config reads it."""
    from donfig import Config

    from gdsstore._config import DEFAULTS

    yamls = [code for lang, _, code in code_blocks(settings_table.PAGE.read_text()) if lang == "yaml"]
    assert yamls
    known = set(settings_table.flatten(DEFAULTS))
    for i, code in enumerate(yamls):
        (tmp_path / f"{i}.yaml").write_text(code)
        cfg = Config("gdsstore", defaults=[DEFAULTS], paths=[str(tmp_path)], env={})
        flat = settings_table.flatten(cfg.config)
        assert set(flat) == known, f"unknown keys in the YAML example: {set(flat) - known}"
        (tmp_path / f"{i}.yaml").unlink()


# -- the command line --------------------------------------------------------------------------------


def _help(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    from gdsstore.cli import main

    with pytest.raises(SystemExit) as exc:
        main([*argv, "--help"])
    assert exc.value.code == 0
    return capsys.readouterr().out


def test_cli_page_matches_the_command(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("gdsstore.cli")
    text = (DOCS / "cli.md").read_text()
    sections = dict(re.findall(r"^## `gdsstore (\w+)`\n(.*?)(?=^## |\Z)", text, flags=re.M | re.S))
    top = _help([], capsys)
    commands = set(re.search(r"\{([\w,]+)\}", top).group(1).split(","))  # type: ignore[union-attr]
    assert set(sections) == commands
    for cmd, body in sections.items():
        real = set(re.findall(r"(--[a-z][\w-]*)", _help([cmd], capsys))) - {"--help"}
        documented = set(re.findall(r"^\| `(--[a-z][\w-]*)", body, flags=re.M))
        assert documented == real, f"gdsstore {cmd}: documented {sorted(documented)} != real {sorted(real)}"


# -- notebooks ---------------------------------------------------------------------------------------

KERNEL = "gdsstore-docs"


@pytest.fixture(scope="session")
def kernel_name(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A kernel spec for *this* interpreter, registered in a temporary prefix (works on a fresh clone)."""
    pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel", reason="the notebook tests need ipykernel: pip install ipykernel")
    prefix = tmp_path_factory.mktemp("jupyter")
    subprocess.run(
        [sys.executable, "-m", "ipykernel", "install", "--prefix", str(prefix), "--name", KERNEL],
        check=True,
        capture_output=True,
        timeout=120,
    )
    old = os.environ.get("JUPYTER_PATH")
    os.environ["JUPYTER_PATH"] = os.pathsep.join(filter(None, [str(prefix / "share" / "jupyter"), old]))
    try:
        yield KERNEL
    finally:
        if old is None:
            os.environ.pop("JUPYTER_PATH", None)
        else:
            os.environ["JUPYTER_PATH"] = old


def run_notebook(path: Path, kernel: str) -> Any:
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    nb = nbformat.read(path, as_version=4)
    before = sorted(p.name for p in NOTEBOOKS.iterdir())
    client = NotebookClient(
        nb, timeout=120, kernel_name=kernel, resources={"metadata": {"path": str(NOTEBOOKS)}}
    )
    try:
        client.execute()
    except CellExecutionError as exc:
        if exc.ename == "ModuleNotFoundError":
            name = re.search(r"No module named '([\w.]+)'", exc.evalue or "")
            err = ModuleNotFoundError(exc.evalue, name=name.group(1) if name else None)
            reason = _pending_skip(err)
            if reason:
                pytest.skip(f"{path.name}: {reason}")
        raise
    after = sorted(p.name for p in NOTEBOOKS.iterdir())
    assert after == before, f"{path.name} left files in notebooks/: {set(after) - set(before)}"
    return nb


def _outputs(nb: Any) -> str:
    return "\n".join(
        o.get("text", "") or json.dumps(o.get("data", {}).get("text/plain", ""))
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.outputs
    )


@pytest.mark.timeout(180)
@pytest.mark.parametrize("path", NOTEBOOK_FILES, ids=[p.stem for p in NOTEBOOK_FILES])
def test_notebook_runs(path: Path, kernel_name: str) -> None:
    nb = run_notebook(path, kernel_name)
    assert any(c.cell_type == "code" and c.outputs for c in nb.cells), f"{path.name} printed nothing"


@pytest.mark.timeout(180)
def test_benchmarks_notebook_plots_results(
    tmp_path: Path, kernel_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a results file present the notebook plots it (test data, written here, not committed)."""
    results = tmp_path / "results.json"
    # The shape benchmarks/zarr_bench.py writes.
    results.write_text(
        json.dumps(
            {
                "machine": "test",
                "device": False,
                "notes": ["a note"],
                "rows": [
                    {"workload": "raw file", "gbps": {"kvikio": 1.0, "gdsstore": 2.0}, "target": 45.0},
                    {"workload": "chunks 256", "gbps": {"kvikio": None, "gdsstore": 0.5}, "target": 5.0},
                    {"workload": "chunks 1024", "gbps": {"zarr": 0.7, "gdsstore": 1.5}, "target": 25.0},
                ],
            }
        )
    )
    monkeypatch.setenv("BENCH_RESULTS_JSON", str(results))
    nb = run_notebook(NOTEBOOKS / "benchmarks.ipynb", kernel_name)
    out = _outputs(nb)
    assert "3 results" in out and "results.json" in out and "a note" in out
    assert any("image/png" in o.get("data", {}) for c in nb.cells if c.cell_type == "code" for o in c.outputs)


@pytest.mark.parametrize("path", NOTEBOOK_FILES, ids=[p.stem for p in NOTEBOOK_FILES])
def test_notebook_has_no_committed_outputs(path: Path) -> None:
    nb = json.loads(path.read_text())
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            assert cell.get("outputs") == [] and cell.get("execution_count") is None, (
                f"{path.name}: clear outputs before committing (jupyter nbconvert --clear-output --inplace)"
            )


def test_expected_notebooks_exist() -> None:
    names = {p.stem for p in NOTEBOOK_FILES}
    assert {
        "quickstart",
        "verify-the-path",
        "xarray-on-gpu",
        "dataframes-with-fsspec-urls",
        "benchmarks",
    } <= names
