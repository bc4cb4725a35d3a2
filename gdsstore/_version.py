"""The package version (one place; `gdsstore.__version__` and the doctor read it)."""

__version__ = "0.1.0"
