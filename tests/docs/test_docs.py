"""The documentation is tested like code.

- The Sphinx build passes with ``-W -n --keep-going``: any warning, broken link or unresolved
  cross-reference fails it, and it executes the notebooks (an error in a cell fails it too).
- The built site, opened from disk in headless Chromium, shows each checked page's heading and images
  (``site_check.py``), its search works, and every relative link opens from disk.
- Every ```` ```python ```` block of every page runs: the blocks of one page in order, in one namespace,
  in a temporary working directory. Blocks that must not run are ```` ```bash ````, ```` ```console ````,
  ```` ```text ```` (or data: json, yaml); other fence languages are rejected so none is skipped silently.
  GPU code is guarded inside the block (``if cuda.device_count():``).
- The settings table of ``docs/settings.md`` matches ``gdsstore._config.DEFAULTS``.
- ``docs/cli.md`` names exactly the subcommands and options of the real ``gdsstore`` command.
- Notebooks (``notebooks/``, linked into ``docs/notebooks/``) have no committed outputs, except GPU notebooks whose outputs were
  recorded on a GPU machine and say so; the build leaves no files behind in the tree.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from markdown_blocks import code_blocks, run_python_blocks

from gdsstore import _config


# Loaded by path: the tests directory is not a package, whatever pytest's import mode.
def _load(name: str, path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


HERE = Path(__file__).resolve().parent
SETTINGS_PAGE = HERE.parents[1] / "docs" / "settings.md"
site_check = _load("gdsstore_docs_site_check", HERE / "site_check.py")
record_notebook = _load("gdsstore_docs_record_notebook", HERE / "record_notebook.py")

ROOT = HERE.parents[1]
DOCS = ROOT / "docs"
NOTEBOOKS = ROOT / "notebooks"  # docs/notebooks/ links each of them into the docs
PAGES = sorted(p for p in DOCS.rglob("*.md") if "_build" not in p.relative_to(DOCS).parts)
NOTEBOOK_FILES = sorted(NOTEBOOKS.glob("*.ipynb"))
# README's Python blocks are run by tests/docs/test_user_docs.py (which knows its '# GPU' blocks); its fences are
# checked here like the pages'.
README = ROOT / "README.md"

RUN_LANGS = {"python"}
# "" also covers MyST directives (```{toctree}, ```{eval-rst}): markup, not code.
NO_RUN_LANGS = {"bash", "console", "text", "json", "yaml", ""}

# -- the Sphinx build ---------------------------------------------------------------------------------


def _snapshot(root: Path) -> set[str]:
    """Files of the docs tree (the build output excluded): the build must not add any."""
    skip = {"_build", "__pycache__"}  # Python's bytecode of conf.py and docs/_ext is no build output
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if not skip & set(p.parts)}


@pytest.fixture(scope="session")
def built_site(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """The docs built once for the session: ``python -m sphinx -W -n --keep-going -b html docs OUT``.

    Notebooks run on a kernel spec named ``python3`` for *this* interpreter, registered in a temporary
    prefix, so a fresh clone (or a machine with another ``python3`` kernel) builds the same way.
    """
    pytest.importorskip("sphinx", reason="the docs build needs the docs extra: pip install -e '.[docs]'")
    pytest.importorskip("myst_nb", reason="the docs build needs the docs extra: pip install -e '.[docs]'")
    pytest.importorskip("pydata_sphinx_theme", reason="pip install -e '.[docs]'")
    pytest.importorskip("ipykernel", reason="the notebooks need ipykernel: pip install -e '.[test]'")
    tmp = tmp_path_factory.mktemp("docs")
    subprocess.run(
        [sys.executable, "-m", "ipykernel", "install", "--prefix", str(tmp / "jupyter"), "--name", "python3"],
        check=True,
        capture_output=True,
        timeout=120,
    )
    kernels = tmp / "jupyter" / "share" / "jupyter" / "kernels"
    _log_kernels_to(kernels / "python3" / "kernel.json", tmp / "kernels.log")
    env = {**os.environ, "JUPYTER_PATH": str(tmp / "jupyter" / "share" / "jupyter"), "PYTHONPATH": str(ROOT)}
    before = _snapshot(DOCS)
    out = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "-n", "--keep-going", "-q", "-b", "html",
         str(DOCS), str(tmp / "html")],
        capture_output=True,
        text=True,
        timeout=580,
        cwd=tmp,
        env=env,
        check=False,
    )
    assert _snapshot(DOCS) == before, f"the docs build left files: {_snapshot(DOCS) ^ before}"
    if out.returncode == 0:
        _publish(tmp / "html", SITE)
    return tmp / "html", out


def _log_kernels_to(spec: Path, log: Path) -> None:
    """Make the kernel spec start its kernels through ``kernel_launcher.py``, their stderr into ``log``."""
    kernel = json.loads(spec.read_text())
    kernel["argv"] = [sys.executable, str(HERE / "kernel_launcher.py"), str(log), "-f", "{connection_file}"]
    spec.write_text(json.dumps(kernel))


def kernel_log(site: Path) -> str:
    """What the docs build's kernels wrote to their stderr (Jupyter's own messages among it)."""
    log = site.parent / "kernels.log"
    return log.read_text(errors="replace") if log.exists() else ""


# Where the README says to open the site after the test command.
SITE = DOCS / "_build" / "html"


def _publish(built: Path, site: Path) -> None:
    """Put the built site at ``site``, replacing the one there in one rename (another build may read it)."""
    site.parent.mkdir(parents=True, exist_ok=True)
    staging = site.with_name(f"{site.name}.new-{os.getpid()}")
    shutil.copytree(built, staging)
    old = site.with_name(f"{site.name}.old-{os.getpid()}")
    if site.exists():
        site.rename(old)
    staging.rename(site)
    shutil.rmtree(old, ignore_errors=True)


@pytest.mark.timeout(600)
def test_sphinx_build_has_no_warnings(built_site: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    site, out = built_site
    assert out.returncode == 0, f"sphinx-build -W -n failed:\n{out.stdout}\n{out.stderr}"
    # -W turns Sphinx's warnings into a failure; also fail on one printed without failing the build.
    warnings = [line for line in out.stderr.splitlines() if re.search(r"\b(WARNING|ERROR)\b:", line)]
    assert not warnings, "\n".join(warnings)
    # The kernels' own log (tests/docs/kernel_launcher.py) holds Jupyter's messages; an error raised
    # through gdsstore's code there is still a failure of the docs.
    log = kernel_log(site)
    assert not re.search(r'File "[^"]*gdsstore', log), log
    assert (site / "index.html").is_file()
    # ... and the test command leaves it where the README says to open it (issue 26)
    assert "docs/_build/html/index.html" in README.read_text()
    assert (SITE / "index.html").read_bytes() == (site / "index.html").read_bytes()


@pytest.mark.timeout(600)
def test_api_reference_is_generated(built_site: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    site, out = built_site
    assert out.returncode == 0
    pages = {p: p.read_text() for p in (site / "reference").glob("*.html")}
    engine = pages[site / "reference" / "engine.html"]
    assert "LocalFile" in engine and "pread" in engine and "backend_for" in engine
    assert "storage_options" in pages[site / "reference" / "gdsstore.html"]  # gdsstore.open's arguments
    # Cross-references rendered as links, not left as raw roles (":class:`~gdsstore...`").
    roles = r":(?:class|func|meth|mod|data|attr|exc|obj):`"
    raw = [f"{p.name}: {m}" for p, html in pages.items() for m in re.findall(roles, html)]
    assert not raw, f"raw Sphinx roles in the reference: {raw}"
    # GDSStore's docstring names :class:`~gdsstore.engine.backend.Backend`: a link to the engine page.
    store = pages[site / "reference" / "zarr-store.html"]
    assert 'href="engine.html#gdsstore.engine.backend.Backend"' in store
    # Every public name of the package has a reference entry (the id autodoc gives its object).
    import gdsstore

    anchors = set()
    for html in pages.values():
        anchors |= set(re.findall(r'id="(gdsstore[\w.]*)"', html))
    missing = []
    for name in gdsstore.__all__:
        if name == "__version__":
            continue
        obj = getattr(gdsstore, name)
        targets = {f"gdsstore.{name}"}
        if not isinstance(obj, type(gdsstore)) and hasattr(obj, "__qualname__"):
            targets.add(f"{obj.__module__}.{obj.__qualname__}")
        if name in ("trace", "doctor"):  # modules made callable: the function inside is the entry
            targets.add(f"gdsstore.{name}.{name}")
        if not targets & anchors:
            missing.append(f"gdsstore.{name} ({sorted(targets)})")
    assert not missing, f"no API reference entry for: {missing}"


@pytest.mark.timeout(600)
def test_notebooks_are_executed_by_the_build(built_site: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    site, out = built_site
    assert out.returncode == 0
    for nb in NOTEBOOK_FILES:
        html = (site / "notebooks" / f"{nb.stem}.html").read_text()
        assert "cell_output" in html, f"{nb.name}: no outputs in the built page"
    # The benchmarks notebook plots the committed results: the plot is an image of the page.
    assert "<img" in (site / "notebooks" / "benchmarks.html").read_text()


@pytest.mark.timeout(600)
def test_site_in_headless_chromium(
    built_site: tuple[Path, subprocess.CompletedProcess[str]], tmp_path: Path
) -> None:
    """Home, quickstart, performance, an API page and a notebook, opened from disk, as site_check.py does."""
    site, out = built_site
    assert out.returncode == 0
    chromium = site_check.find_binary("CHROMIUM", "chromium", "chromium-browser", "google-chrome")
    chromedriver = site_check.find_binary("CHROMEDRIVER", "chromedriver")
    if not chromium or not chromedriver:
        pytest.skip("needs chromium and chromedriver: apt-get install chromium chromium-driver (scripts/test.sh does)")
    pytest.importorskip("PIL", reason="the screenshot check needs Pillow (a matplotlib dependency)")
    problems = site_check.check_site(site, chromium, chromedriver, shots=tmp_path)
    assert not problems, "\n".join(problems)
    assert len(list(tmp_path.glob("*.png"))) == len(site_check.PAGES)


def test_site_check_finds_a_blank_screenshot() -> None:
    from io import BytesIO

    PIL = pytest.importorskip("PIL.Image")
    blank = BytesIO()
    PIL.new("RGB", (800, 600), "white").save(blank, format="PNG")
    assert site_check.blank_reason(blank.getvalue())


def test_site_check_finds_a_link_that_does_not_open_from_disk(tmp_path: Path) -> None:
    (tmp_path / "a.html").write_text('<a href="b.html">ok</a> <a href="sub/">folder</a> <a href="https://x">web</a>')
    (tmp_path / "b.html").write_text("")
    (tmp_path / "sub").mkdir()
    assert site_check.check_links(tmp_path) == ["a.html: link 'sub/' does not open from disk"]


# -- code blocks -------------------------------------------------------------------------------------


def test_fence_languages_are_known() -> None:
    bad = []
    for page in [README, *PAGES]:
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
# Pages whose Python guards GPU code (run everywhere; the guarded part only where CuPy sees a device).
_GPU_GUARD = re.compile(r"\bdevice_count\(\)|\bhave_gpu\b")
GPU_PAGES = [p for p in PY_PAGES
             if any(lang == "python" and _GPU_GUARD.search(code) for lang, _, code in code_blocks(p.read_text()))]
SKIPPED_GPU_BLOCK = "GPU block skipped"  # what a guarded block prints where there is no GPU


@pytest.mark.timeout(180)
@pytest.mark.parametrize("page", PY_PAGES, ids=[p.relative_to(ROOT).as_posix() for p in PY_PAGES])
def test_page_python_blocks_run(page: Path, tmp_path: Path) -> None:
    """Each page's blocks, in order, in a fresh interpreter: what a user who pastes them sees (issue 26:
    in this process, a module another test had imported hid a page's missing import, remote.md's
    `gdsstore.policy`)."""
    ran, _, _ = run_python_blocks(page, tmp_path, root=ROOT)
    assert ran > 0


def test_gpu_pages_are_the_ones_that_use_cupy() -> None:
    """Every page that shows CuPy code guards it, so the GPU run below covers it (dask, xarray included)."""
    def gpu_code(code: str) -> bool:
        code = re.sub(r"#.*", "", code)  # comments may name CuPy without running it
        return "cupy" in code or "enable_gpu" in code

    uses_cupy = [p for p in PY_PAGES
                 if any(lang == "python" and gpu_code(code) for lang, _, code in code_blocks(p.read_text()))]
    assert set(uses_cupy) <= set(GPU_PAGES), set(uses_cupy) - set(GPU_PAGES)
    assert {"dask.md", "xarray.md", "quickstart.md", "zarr.md"} <= {p.name for p in GPU_PAGES}


@pytest.mark.gpu
@pytest.mark.timeout(300)
@pytest.mark.parametrize("page", GPU_PAGES, ids=[p.relative_to(ROOT).as_posix() for p in GPU_PAGES])
def test_page_gpu_blocks_run_on_the_gpu(page: Path, tmp_path: Path) -> None:
    """``pytest -m gpu tests/docs`` on the GPU machine: the pages with GPU code run, their guarded parts too."""
    from gdsstore.engine import cuda

    assert cuda.device_count() > 0
    ran, _, out = run_python_blocks(page, tmp_path, root=ROOT, timeout=290)
    assert ran > 0
    assert SKIPPED_GPU_BLOCK not in out, out


# -- settings ----------------------------------------------------------------------------------------


def test_every_setting_is_named_in_settings_page() -> None:
    # The whole table equals gdsstore._config.settings_table() (tests/test_config.py); this checks the
    # page names every key and variable, wherever the table sits.
    text = SETTINGS_PAGE.read_text()
    for row in _config.ROWS:
        assert f"`{row.key}`" in text
        assert f"`{row.env}`" in text
        assert row.doc and row.doc != "TODO", f"{row.key}: describe it in gdsstore/_config.py"


def test_settings_env_var_spelling_is_donfigs(monkeypatch: pytest.MonkeyPatch) -> None:
    """The documented variables really set the keys (donfig's parsing, not just our spelling)."""
    from donfig import Config

    from gdsstore._config import DEFAULTS

    monkeypatch.setenv("GDSSTORE_REMOTE__MAX_ATTEMPTS", "9")
    monkeypatch.setenv(next(r.env for r in _config.ROWS if r.key == "gds_threshold"), "4096")
    cfg = Config("gdsstore", defaults=[DEFAULTS])
    assert cfg.get("remote.max_attempts") == 9
    assert cfg.get("gds_threshold") == 4096


def test_settings_yaml_example_sets_known_keys(tmp_path: Path) -> None:
    """The YAML example of docs/settings.md, read by donfig the way gdsstore's config reads it."""
    from donfig import Config

    from gdsstore._config import DEFAULTS

    yamls = [code for lang, _, code in code_blocks(SETTINGS_PAGE.read_text()) if lang == "yaml"]
    assert yamls
    known = {row.key for row in _config.ROWS}
    for i, code in enumerate(yamls):
        (tmp_path / f"{i}.yaml").write_text(code)
        cfg = Config("gdsstore", defaults=[DEFAULTS], paths=[str(tmp_path)], env={})
        flat = dict(_config._flat(cfg.config))
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


def _meta(path: Path) -> dict[str, Any]:
    meta: dict[str, Any] = json.loads(path.read_text()).get("metadata", {}).get("gdsstore", {})
    return meta


RECORDED = [p for p in NOTEBOOK_FILES if _meta(p).get(record_notebook.RECORDED_KEY)]


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

    nb = nbformat.read(path, as_version=4)
    record_notebook.clear(nb)
    before = sorted(p.name for p in path.parent.iterdir())
    client = NotebookClient(
        nb, timeout=120, kernel_name=kernel, resources={"metadata": {"path": str(path.parent)}}
    )
    client.execute()
    after = sorted(p.name for p in path.parent.iterdir())
    assert after == before, f"{path.name} left files in {path.parent}: {set(after) - set(before)}"
    return nb


def _outputs(nb: Any) -> str:
    return "\n".join(
        o.get("text", "") or json.dumps(o.get("data", {}).get("text/plain", ""))
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.outputs
    )


@pytest.mark.timeout(180)
@pytest.mark.parametrize("path", RECORDED or [None], ids=[p.stem for p in RECORDED] or ["none"])
def test_recorded_notebook_still_runs_here(path: Path | None, kernel_name: str) -> None:
    """The build does not run notebooks with recorded outputs; run them here (their CPU cells)."""
    if path is None:
        pytest.skip("no notebook carries outputs recorded on a GPU machine yet: the docs build runs them all")
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
def test_notebook_outputs_are_built_or_recorded(path: Path) -> None:
    """Outputs come from the docs build, or (GPU notebooks only) from a named GPU machine."""
    nb = json.loads(path.read_text())
    meta = _meta(path)
    recorded = meta.get(record_notebook.RECORDED_KEY)
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    if not recorded:
        for cell in code:
            assert cell.get("outputs") == [] and cell.get("execution_count") is None, (
                f"{path.name}: clear outputs before committing (the docs build executes it): "
                "python tests/docs/record_notebook.py --clear " + path.relative_to(ROOT).as_posix()
            )
        return
    assert meta.get("gpu") is True, f"{path.name}: only GPU notebooks carry recorded outputs"
    assert recorded.get("machine") and recorded.get("date"), f"{path.name}: say where and when"
    notes = [c for c in nb["cells"] if record_notebook.NOTE_TAG in c.get("metadata", {}).get("tags", [])]
    assert len(notes) == 1 and recorded["machine"] in "".join(notes[0]["source"]), (
        f"{path.name}: the note naming the machine is missing"
    )
    assert any(c.get("outputs") for c in code), f"{path.name}: recorded, but no outputs"


def test_conf_skips_execution_of_recorded_notebooks_only(tmp_path: Path) -> None:
    """docs/conf.py's exclusion list is exactly the notebooks labelled by record_notebook.py."""
    import nbformat

    conf = _load("gdsstore_docs_conf", DOCS / "conf.py")
    (tmp_path / "notebooks").mkdir()
    for name in ("plain", "gpu"):
        nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(f"# {name}")])
        nb.metadata["gdsstore"] = {"gpu": name == "gpu"}
        if name == "gpu":
            record_notebook.label(nb, {"machine": "one H200", "date": "2026-12-01", "gdsstore": "0"})
        nbformat.write(nb, tmp_path / "notebooks" / f"{name}.ipynb")
    assert conf.recorded_notebooks(tmp_path) == ["notebooks/gpu.ipynb"]
    assert conf.nb_execution_excludepatterns == [f"notebooks/{p.name}" for p in RECORDED]
    labelled = nbformat.read(tmp_path / "notebooks" / "gpu.ipynb", as_version=4)
    assert [c.cell_type for c in labelled.cells] == ["markdown", "markdown"]  # title, then the note
    assert "one H200" in labelled.cells[1].source
    record_notebook.clear(labelled)
    assert len(labelled.cells) == 1 and not labelled.metadata["gdsstore"].get(record_notebook.RECORDED_KEY)


@pytest.mark.timeout(180)
def test_record_notebook_executes_and_labels(tmp_path: Path, kernel_name: str) -> None:
    import nbformat

    path = tmp_path / "n.ipynb"
    nb = nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_markdown_cell("# N"), nbformat.v4.new_code_cell("print(6 * 7)")]
    )
    nbformat.write(nb, path)
    assert record_notebook.main([str(path), "--machine", "test box", "--kernel", kernel_name]) == 0
    done = nbformat.read(path, as_version=4)
    assert done.metadata["gdsstore"][record_notebook.RECORDED_KEY]["machine"] == "test box"
    assert "42" in _outputs(done)
    assert record_notebook.main([str(path), "--clear"]) == 0
    assert _outputs(nbformat.read(path, as_version=4)) == ""


def test_gpu_notebooks_are_marked() -> None:
    gpu = {p.stem for p in NOTEBOOK_FILES if _meta(p).get("gpu")}
    assert gpu == {"xarray-on-gpu", "verify-the-path"}


def test_notebooks_live_at_the_root_and_the_docs_link_them() -> None:
    """Issue 26: the layout the project was specified with; the docs build reads them through links."""
    top = {p.name for p in ROOT.iterdir() if not p.name.startswith(".")}
    assert {"pyproject.toml", "gdsstore", "tests", "notebooks", "docs"} <= top, sorted(top)
    assert NOTEBOOK_FILES and all(not p.is_symlink() for p in NOTEBOOK_FILES)
    linked = sorted(p for p in (DOCS / "notebooks").iterdir() if p.suffix == ".ipynb")
    assert [p.name for p in linked] == [p.name for p in NOTEBOOK_FILES]
    for link in linked:
        assert link.is_symlink() and os.readlink(link) == f"../../notebooks/{link.name}", link
    toctree = (DOCS / "notebooks" / "index.md").read_text()
    assert all(f"\n{p.stem}\n" in toctree for p in NOTEBOOK_FILES), "each notebook is in the toctree"


def test_expected_notebooks_exist() -> None:
    names = {p.stem for p in NOTEBOOK_FILES}
    assert {
        "quickstart",
        "verify-the-path",
        "xarray-on-gpu",
        "dataframes-with-fsspec-urls",
        "benchmarks",
    } <= names


def test_run_history_is_not_in_the_docs() -> None:
    """Raw run logs and the run-history pages live in benchmarks/results/, outside the navigation."""
    # the zarr table's data and plot, and the memory budget's sweep plot (its data: benchmarks/results/)
    assert sorted(p.name for p in (DOCS / "bench").iterdir()) == ["memory_sweep.png", "results.json", "results.png"]
    assert not list(DOCS.rglob("*.log"))
    assert (ROOT / "benchmarks" / "results").is_dir()
