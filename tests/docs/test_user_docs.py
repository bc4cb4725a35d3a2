"""What a new user reads first holds up: the README runs, the install page installs, the docs read as a
product, and their sample outputs look like what the code prints today.

- The README's Python blocks run in order in a temporary directory, in a fresh interpreter. A block whose first line is a comment
  starting ``# GPU`` runs only where a CUDA GPU is (``gpu`` marker); the others run everywhere.
- The Install page's extras table names exactly the extras of ``pyproject.toml``; no first-contact page
  tells the user to ``pip install gdsstore`` from an index that does not serve it.
- The user docs carry no lab-log notes (numbered runs, sessions, "Decision:", "Trade-off", "not
  measured yet").
- Sample outputs (trace tables, ``gdsstore bench`` tables, ``gdsstore demo`` and ``gdsstore doctor``
  reports) have the shape of what the code prints: the same table headers and the same summary lines.
"""

from __future__ import annotations

import os
import re
import tomllib
from pathlib import Path

import pytest
from markdown_blocks import code_blocks, run_python_blocks

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
README = ROOT / "README.md"
USER_PAGES = [README, *sorted(DOCS.rglob("*.md"))]

# A Python block whose first line is this comment needs a GPU (it tells the reader so, too).
GPU_BLOCK = re.compile(r"^#\s*GPU\b")


def test_code_blocks_parser_keeps_the_gpu_comment() -> None:
    text = "x\n```python\n# GPU: y\na = 1\n```\n  ```text\n  out\n  ```\n"
    assert code_blocks(text) == [("python", 3, "# GPU: y\na = 1\n"), ("text", 7, "out\n")]


# -- the README --------------------------------------------------------------------------------------


def test_readme_runs_without_a_gpu(tmp_path: Path) -> None:
    # In a fresh interpreter, as a user runs it (markdown_blocks.run_python_blocks).
    ran, skipped, _ = run_python_blocks(README, tmp_path, root=ROOT, skip=lambda code: bool(GPU_BLOCK.match(code)))
    assert ran >= 1, "the README's headline example must run on a machine without a GPU"
    assert skipped >= 1, "the README shows the GPU read as a block marked '# GPU'"


@pytest.mark.gpu
def test_readme_runs_on_the_gpu(tmp_path: Path) -> None:
    ran, skipped, _ = run_python_blocks(README, tmp_path, root=ROOT)
    assert skipped == 0 and ran >= 2


def test_readme_gpu_block_says_it_needs_a_gpu() -> None:
    """The marker is a comment the reader sees, on a block that really uses the GPU."""
    gpu_blocks = [
        c for lang, _, c in code_blocks(README.read_text()) if lang == "python" and GPU_BLOCK.match(c)
    ]
    assert gpu_blocks and all("enable_gpu" in c or "cupy" in c for c in gpu_blocks)


# -- installing --------------------------------------------------------------------------------------

FIRST_CONTACT = [README, DOCS / "install.md", DOCS / "index.md", DOCS / "quickstart.md"]
# `pip install gdsstore` or `pip install "gdsstore[gpu]"` with nothing after it: from an index (none serves
# gdsstore). `pip install "gdsstore[gpu] @ git+..."` and installs from a clone (`.[gpu]`) are fine.
_INDEX_INSTALL = re.compile(r"pip install\s+(-\S+\s+)*[\"']?gdsstore(\[[\w,]*\])?[\"']?(?!\s*@)(?=\s|$|`)")


def test_no_install_from_an_index_that_does_not_serve_gdsstore() -> None:
    assert _INDEX_INSTALL.search("pip install gdsstore")
    assert _INDEX_INSTALL.search('pip install "gdsstore[gpu]"   # comment')
    assert not _INDEX_INSTALL.search('pip install "gdsstore[gpu] @ git+https://example.org/g.git"')
    bad = [
        f"{page.relative_to(ROOT)}:{n}: {line.strip()}"
        for page in FIRST_CONTACT
        for n, line in enumerate(page.read_text().splitlines(), 1)
        # an error message quoted as it reads ("botocore is not installed; pip install 'gdsstore[s3]'")
        # adds an extra to the gdsstore already installed: not an install from an index
        if _INDEX_INSTALL.search(line) and "is not installed;" not in line
    ]
    assert not bad, "gdsstore is not on an index: install from a clone or the git URL\n" + "\n".join(bad)


def test_install_page_lists_the_extras_of_pyproject() -> None:
    extras = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"])
    text = (DOCS / "install.md").read_text()
    rows = re.findall(r"^\| (`[\w-]+`(?:, `[\w-]+`)*) \|", text, flags=re.M)
    documented = {name for row in rows for name in re.findall(r"`([\w-]+)`", row)}
    assert documented == extras, f"docs/install.md extras {sorted(documented)} != pyproject {sorted(extras)}"


# -- product docs, not a lab log ---------------------------------------------------------------------

LAB_LOG = [
    re.compile(p, flags=re.I)
    for p in (
        r"\bruns? \d+\b",  # "run 13", "runs 14 and 15"
        r"\bsession \d\b|\b(this|previous|last|next) session\b",
        r"\bDecision:",
        r"\bTrade-off\b",
        r"\bnot measured yet\b",
        r"\bTODO\b",
        r"\bNot done\.",
        r"\b(first|second|third|fourth|fifth) session\b",  # issue 26, the Performance page
        r"\b(in )?(one|another) run[:)]",
        r"\bwritten here\b",
    )
]


def test_user_docs_carry_no_lab_log_notes() -> None:
    hits = []
    for page in USER_PAGES:
        for n, line in enumerate(page.read_text().splitlines(), 1):
            for pattern in LAB_LOG:
                m = pattern.search(line)
                if m:
                    hits.append(f"{page.relative_to(ROOT)}:{n}: {m.group(0)!r} in: {line.strip()[:100]}")
    assert not hits, (
        "internal notes in the user docs (the run history goes to benchmarks/results/):\n" + "\n".join(hits)
    )


def test_lab_log_patterns() -> None:
    for text in ("Run 15 of 2026-11-29", "runs 14 and 15", "(session 3)", "this session", "Decision: x"):
        assert any(p.search(text) for p in LAB_LOG), text
    for text in ("2026-12-01, third session, one run:", "(another run)", "a libcurl driver written here"):
        assert any(p.search(text) for p in LAB_LOG), text
    for text in ("three runs read the same file", "a botocore Session", "each run of the pipeline",
                 "compare ratios from one run; absolute numbers"):
        assert not any(p.search(text) for p in LAB_LOG), text


# -- sample outputs ----------------------------------------------------------------------------------


def _shape(line: str) -> str:
    """A line with its numbers, sizes and paths abstracted: what stays when the machine changes."""
    line = re.sub(r"/\S+", "<path>", line.strip())
    line = re.sub(r"\d+(\.\d+)?( [KMGT]?i?B)?", "<n>", line)
    return re.sub(r"\s+", " ", line)


def _sample_blocks() -> list[tuple[str, list[str]]]:
    """Every ```text / ```console block of the user pages, as (where, lines)."""
    out = []
    for page in USER_PAGES:
        for lang, line, code in code_blocks(page.read_text()):
            if lang in ("text", "console"):
                out.append((f"{page.relative_to(ROOT)}:{line}", [ln.strip() for ln in code.splitlines()]))
    return out


def _real_trace_lines() -> dict[str, str]:
    """The header, wall and stats lines of a trace as ``str(Trace)`` prints them today."""
    from gdsstore.trace import Trace, TraceEvent

    t = Trace(
        events=[TraceEvent("read", "posix", "host buffer", 4 << 20, 0.002)],
        stats={"cufile": {"level": "3", "read_ops": 2}},
        wall_seconds=0.0123,
    )
    lines = str(t).splitlines()
    return {
        "header": lines[0],
        "wall": next(ln for ln in lines if ln.startswith("wall")),
        "stats": next(ln for ln in lines if " stats: " in ln),
    }


def test_trace_samples_match_the_trace() -> None:
    real = _real_trace_lines()
    header = real["header"].split()
    wall = _shape(real["wall"])
    stats_prefix = re.compile(r"^[\w-]+ stats: \w+=")
    assert stats_prefix.match(real["stats"]), real["stats"]
    found = 0
    for where, lines in _sample_blocks():
        if not any(ln.split()[:2] == header[:2] for ln in lines):
            continue
        found += 1
        for ln in lines:
            if ln.split()[:2] == header[:2]:
                assert ln.split() == header, (
                    f"{where}: trace header {ln!r}; the trace prints {real['header']!r}"
                )
            elif ln.startswith("wall"):
                assert _shape(ln) == wall, f"{where}: {ln!r}; the trace prints lines like {real['wall']!r}"
            elif " stats:" in ln:
                assert stats_prefix.match(ln), (
                    f"{where}: {ln!r}; the trace prints lines like {real['stats']!r}"
                )
    assert found >= 3  # index, path, cli (doctor's probe, demo)


def test_bench_samples_match_the_bench_table() -> None:
    from gdsstore.bench import BenchResult, format_table

    header = format_table([BenchResult("gdsstore (defaults)", 1 << 20, 0.001)], "t").splitlines()[1].split()
    found = 0
    for where, lines in _sample_blocks():
        for ln in lines:
            if ln.split()[:2] == header[:2]:
                found += 1
                assert ln.split() == header, f"{where}: bench header {ln!r}; gdsstore bench prints {header}"
    assert found >= 1


def test_demo_sample_matches_the_demo(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from gdsstore.cli import main
    from gdsstore.engine import cuda

    if cuda.device_count():
        pytest.skip("the docs' demo sample is from a machine without a GPU")
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    assert main(["demo", "--n", "256"]) == 0
    real = [_shape(ln) for ln in capsys.readouterr().out.splitlines()[:3]]
    samples = []  # the output that follows a `$ gdsstore demo` line (a list of commands shows none)
    for _, lines in _sample_blocks():
        for i, ln in enumerate(lines[:-1]):
            if ln.startswith("$ gdsstore demo") and not lines[i + 1].startswith("$"):
                samples.append(lines[i + 1 : i + 4])
    assert samples, "docs/cli.md shows the demo's output"
    for sample in samples:
        assert [_shape(ln) for ln in sample] == real, f"the demo prints {real}"


def _labels(lines: list[str]) -> list[str]:
    """What a doctor report line is about: the text before its first ':' (or the route name)."""
    out = []
    for ln in lines:
        if " -> " in ln:
            out.append(ln.split(" -> ")[0].strip())
        elif ":" in ln and not ln.startswith(("op ", "read ", "write ", "-")):
            out.append(ln.split(":")[0].strip())
    return out


def test_doctor_sample_matches_the_doctor() -> None:
    """docs/cli.md shows doctor on a machine without a GPU: the same lines as the doctor prints here."""
    from gdsstore.doctor import doctor, format_report
    from gdsstore.engine import cuda

    if cuda.device_count():
        pytest.skip("the docs' doctor sample is from a machine without a GPU")
    real = format_report(doctor(probe=True)).splitlines()
    samples = [lines for _, lines in _sample_blocks() if "$ gdsstore doctor" in lines]
    assert samples, "docs/cli.md shows doctor's report"
    for lines in samples:
        sample = lines[lines.index("$ gdsstore doctor") + 1 :]
        assert sample[:2] == real[:2]
        # cupy may or may not be installed where the tests run: the GPU line differs only in its reason.
        assert _labels(sample) == _labels(real), f"doctor prints {real}"


def test_samples_are_checked_somewhere() -> None:
    """Guard the guards: the pages above still contain samples for the tests to compare."""
    assert os.path.exists(DOCS / "cli.md") and len(_sample_blocks()) >= 5


def test_performance_page_shows_its_plot_and_says_what_the_dashed_line_is() -> None:
    """Issue 26: the plot had a group (the raw file) the table had not, and a dashed line nobody explained."""
    import json

    text = (DOCS / "performance.md").read_text()
    section = text.split("## Zarr arrays into GPU memory", 1)[1].split("\n## ", 1)[0]
    assert "bench/results.png" in section and "dashed line" in section.lower()
    table = [ln for ln in section.splitlines() if ln.startswith("| ")]
    for row in json.loads((DOCS / "bench" / "results.json").read_text())["rows"]:
        cells = [f"{v:.2f}" for v in row["gbps"].values() if v]
        assert any(all(c in ln for c in cells) for ln in table), f"no table row for {row['workload']}: {cells}"
        target = f"| {row['target']:g} |"
        assert any(target in ln and cells[-1] in ln for ln in table), f"{row['workload']}: its target {target}"
