"""Sphinx configuration: the PyData theme, MyST Markdown pages, executed notebooks, autodoc reference.

Build (fails on any warning and on any unresolved cross-reference):

    python -m sphinx -W -n --keep-going -b html docs docs/_build/html

The site is static: open ``docs/_build/html/index.html`` from disk (file://), search included.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
sys.path.insert(0, str(ROOT))  # document this checkout's gdsstore, not an installed one
sys.path.insert(0, str(DOCS / "_ext"))

import gdsstore  # noqa: E402

project = "gdsstore"
author = "the gdsstore authors"
copyright = "the gdsstore authors"
release = version = gdsstore.__version__

extensions = [
    "myst_nb",  # MyST Markdown (.md) and notebooks (.ipynb); includes myst_parser
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",  # Google-style Args/Returns/Raises/Examples
]

exclude_patterns = ["_build", "**.ipynb_checkpoints"]
source_suffix = {".md": "myst-nb", ".ipynb": "myst-nb"}
root_doc = "index"

# -- MyST ----------------------------------------------------------------------------------------------
myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3  # `[text](page.md#a-heading)` links resolve
# Anchors spelled as Python-Markdown (and so GitHub, and the old site) spells them: links into the pages
# keep working ("### 5. libcufile ≥ 1.16" -> "5-libcufile-116-...").
myst_heading_slug_func = "gdsstore_docs_slug.slugify"

# -- notebooks -----------------------------------------------------------------------------------------
# Every notebook executes when the docs build, and an error in a cell fails the build. A notebook that
# carries outputs recorded elsewhere (the GPU notebooks: outputs from a GPU machine, labelled in the
# notebook's first cell and in its metadata "gdsstore.outputs_recorded_on") is rendered as committed.
# tests/docs/record_notebook.py records them.
RECORDED_KEY = "outputs_recorded_on"


def recorded_notebooks(docs: Path = DOCS) -> list[str]:
    """Notebooks (paths relative to ``docs``) whose committed outputs come from another machine.

    The notebooks live in the repository's ``notebooks/``; ``docs/notebooks/`` holds a relative link to
    each (and the section's index page), so the build reads them from there under ``notebooks/``."""
    out = []
    for path in sorted((docs / "notebooks").glob("*.ipynb")):
        meta = json.loads(path.read_text()).get("metadata", {}).get("gdsstore", {})
        if meta.get(RECORDED_KEY):
            out.append(path.relative_to(docs).as_posix())
    return out


nb_execution_mode = "force"
nb_execution_excludepatterns = recorded_notebooks()
nb_execution_raise_on_error = True
nb_execution_timeout = 180
nb_merge_streams = True

# -- API reference -------------------------------------------------------------------------------------
autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_typehints_format = "short"
autodoc_class_signature = "mixed"
autodoc_inherit_docstrings = True
napoleon_google_docstring = True
napoleon_numpy_docstring = True  # docstrings inherited from zarr and fsspec
napoleon_use_rtype = False
napoleon_preprocess_types = False

# Nitpicky: every cross-reference must resolve. Names of other projects do not: this build runs offline,
# without intersphinx inventories, so names outside gdsstore are ignored by pattern. gdsstore's own names
# are never ignored.
nitpicky = True
nitpick_ignore_regex = [
    (r"py:.*", r"(?!gdsstore)[A-Za-z_][\w]*(\.[\w]+)+"),  # dotted names of other packages: zarr.*, numpy.*
    (r"py:.*", r"(int|float|str|bytes|bool|object|dict|list|tuple|set|type|None|Any|Self|Callable|Iterator"
     r"|Iterable|Sequence|Mapping|AsyncIterator|Awaitable|Generator|Literal|TypeAlias|TypeVar|ParamSpec"
     r"|memoryview|bytearray|Exception|BaseException|OSError|ValueError|TypeError|RuntimeError)"),
    # zarr's names, in the docstrings GDSStore inherits from zarr.abc.store.Store (numpydoc "x : T, optional")
    (r"py:.*", r"(Buffer|BufferPrototype|ByteRequest|AccessModeLiteral|optional)"),
    # donfig's ConfigSet: what zarr.config.set (and so gdsstore.enable_gpu) returns
    (r"py:.*", r"ConfigSet"),
]

# -- HTML ----------------------------------------------------------------------------------------------
html_theme = "pydata_sphinx_theme"
html_title = "gdsstore"
html_static_path = ["_static"]
html_css_files = ["gdsstore.css"]


def pages_without_section_nav(docs: Path = DOCS) -> list[str]:
    """The root page and the top-level pages without a toctree of their own: the theme's left navigation
    has nothing to show there but still takes ~220 px (it cut the Performance table's last column)."""
    toctree = re.search(r"```\{toctree\}\n(.*?)```", (docs / "index.md").read_text(), flags=re.S)
    assert toctree, "docs/index.md has the root toctree"
    names = [ln.strip() for ln in toctree.group(1).splitlines() if ln.strip() and not ln.startswith(":")]
    return ["index", *(n for n in names if "{toctree}" not in (docs / f"{n}.md").read_text())]


html_sidebars: dict[str, list[str]] = {name: [] for name in pages_without_section_nav()}
html_show_sourcelink = False
html_copy_source = False
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "navbar_align": "left",
    "header_links_before_dropdown": 7,  # every top-level section in the bar, none under "More"
    "footer_start": ["copyright"],
    "footer_end": ["sphinx-version", "theme-version"],
    "secondary_sidebar_items": ["page-toc"],
}
