"""Record a GPU notebook's outputs on the machine that has the GPU, labelled with where they came from.

The docs build executes every notebook, except the ones that carry recorded outputs: those are
rendered as committed. Run this on the GPU machine for each notebook marked ``"gdsstore": {"gpu": true}``:

    python tests/docs/record_notebook.py notebooks/xarray-on-gpu.ipynb --machine "one NVIDIA H200, ..."

It executes the notebook (in its own directory, on this interpreter's kernel; ``--in-process`` where no
Jupyter kernel is installed: the code cells run in this interpreter, in order, with their printed
output, last-expression values and matplotlib figures kept), keeps the outputs, writes
``metadata.gdsstore.outputs_recorded_on`` (machine, date, gdsstore version) and puts a note saying so
after the notebook's title. ``--clear`` undoes it (outputs, note and metadata), after which the docs
build executes the notebook again.
"""

from __future__ import annotations

import argparse
import datetime
import sys
from pathlib import Path
from typing import Any

RECORDED_KEY = "outputs_recorded_on"  # the key docs/conf.py reads
NOTE_TAG = "gdsstore-recorded-outputs"


def note_text(record: dict[str, str]) -> str:
    """The Markdown note at the top of a notebook with recorded outputs."""
    return (
        f"> **Outputs recorded on {record['machine']}**, {record['date']} (gdsstore {record['gdsstore']}). "
        "The docs build shows them as recorded and does not re-run this notebook, which needs a GPU to "
        "show what it is about."
    )


def clear(nb: Any) -> None:
    """Remove outputs, the recorded-outputs note and the metadata key."""
    nb.cells = [c for c in nb.cells if NOTE_TAG not in c.get("metadata", {}).get("tags", [])]
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
    nb.metadata.get("gdsstore", {}).pop(RECORDED_KEY, None)


def label(nb: Any, record: dict[str, str]) -> None:
    """Add the note (after the title cell) and the metadata that mark the outputs as recorded."""
    import nbformat

    note = nbformat.v4.new_markdown_cell(note_text(record), metadata={"tags": [NOTE_TAG]})
    title_first = bool(nb.cells) and nb.cells[0].cell_type == "markdown"
    nb.cells.insert(1 if title_first else 0, note)
    nb.metadata.setdefault("gdsstore", {})[RECORDED_KEY] = record


def record(path: Path, machine: str, kernel: str = "python3", timeout: int = 600) -> None:
    """Execute ``path`` here and write it back with its outputs, labelled with ``machine``."""
    import nbformat
    from nbclient import NotebookClient

    import gdsstore

    nb = nbformat.read(path, as_version=4)
    clear(nb)
    NotebookClient(
        nb, timeout=timeout, kernel_name=kernel, resources={"metadata": {"path": str(path.parent)}}
    ).execute()
    date = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d")
    label(nb, {"machine": machine, "date": date, "gdsstore": gdsstore.__version__})
    nbformat.write(nb, path)


def _run_cell(source: str, ns: dict[str, Any], where: str) -> list[dict[str, Any]]:
    """Run one code cell in ``ns``; its outputs as nbformat v4 dicts (stream, result, figures)."""
    import ast
    import base64
    import contextlib
    import io

    tree = ast.parse(source, where)
    last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    out, outputs = io.StringIO(), []
    with contextlib.redirect_stdout(out):
        exec(compile(tree, where, "exec"), ns)
        value = eval(compile(ast.Expression(last.value), where, "eval"), ns) if last else None
    if out.getvalue():
        outputs.append({"output_type": "stream", "name": "stdout", "text": out.getvalue()})
    if value is not None:
        outputs.append({"output_type": "execute_result", "data": {"text/plain": repr(value)}, "metadata": {}})
    plt = sys.modules.get("matplotlib.pyplot")
    for num in plt.get_fignums() if plt else []:
        png = io.BytesIO()
        plt.figure(num).savefig(png, format="png", bbox_inches="tight")
        data = {"image/png": base64.b64encode(png.getvalue()).decode(), "text/plain": "<Figure>"}
        outputs.append({"output_type": "display_data", "data": data, "metadata": {}})
    if plt:
        plt.close("all")
    return outputs


def record_in_process(path: Path, machine: str) -> None:
    """:func:`record` without Jupyter: the code cells run in this interpreter, in order (a cell that
    raises stops the recording); the notebook is read and written as plain JSON."""
    import json
    import os
    import uuid

    import gdsstore

    nb = json.loads(path.read_text())
    nb["cells"] = [c for c in nb["cells"] if NOTE_TAG not in c.get("metadata", {}).get("tags", [])]
    ns: dict[str, Any] = {"__name__": "__main__"}
    here = os.getcwd()
    os.chdir(path.parent)
    try:
        count = 0
        for i, cell in enumerate(nb["cells"]):
            if cell["cell_type"] != "code":
                continue
            count += 1
            source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
            cell["outputs"] = _run_cell(source, ns, f"{path.name}[{i}]")
            cell["execution_count"] = count
            for out in cell["outputs"]:
                if out["output_type"] == "execute_result":
                    out["execution_count"] = count
    finally:
        os.chdir(here)
    date = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d")
    rec = {"machine": machine, "date": date, "gdsstore": gdsstore.__version__}
    note: dict[str, Any] = {"cell_type": "markdown", "metadata": {"tags": [NOTE_TAG]}, "source": note_text(rec)}
    if nb.get("nbformat_minor", 0) >= 5:
        note["id"] = uuid.uuid4().hex[:8]
    title_first = bool(nb["cells"]) and nb["cells"][0]["cell_type"] == "markdown"
    nb["cells"].insert(1 if title_first else 0, note)
    nb.setdefault("metadata", {}).setdefault("gdsstore", {})[RECORDED_KEY] = rec
    path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebooks", nargs="+", type=Path)
    parser.add_argument("--machine", help="where the outputs come from, e.g. 'one NVIDIA H200, 16 cores'")
    parser.add_argument("--kernel", default="python3")
    parser.add_argument("--clear", action="store_true", help="remove recorded outputs and the label")
    parser.add_argument("--in-process", action="store_true", help="run the cells here, without Jupyter")
    args = parser.parse_args(argv)
    if not args.clear and not args.machine:
        parser.error("--machine is required to record outputs (or pass --clear)")
    if args.in_process and not args.clear:
        for path in args.notebooks:
            record_in_process(path, args.machine)
            print(f"{path}: recorded on {args.machine} (in process)")
        return 0
    import nbformat

    for path in args.notebooks:
        if args.clear:
            nb = nbformat.read(path, as_version=4)
            clear(nb)
            nbformat.write(nb, path)
        else:
            record(path, args.machine, kernel=args.kernel)
        print(f"{path}: {'cleared' if args.clear else 'recorded on ' + args.machine}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
