"""Start an IPython kernel whose own log goes to a file, not to the Sphinx build's stderr.

The docs build's kernels inherit the build's stderr, so Jupyter's own messages (ipykernel's TCP warning,
tornado's 'Uncaught exception in ZMQStream callback' when a kernel is shut down under load) were read as
Sphinx warnings. The test reads this log on its own: a traceback through gdsstore's code still fails it.

Usage (a kernel spec's argv): ``python kernel_launcher.py LOGFILE -f {connection_file}``.
"""

from __future__ import annotations

import os
import runpy
import sys

if __name__ == "__main__":
    log = sys.argv.pop(1)
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 2)  # the kernel's stderr, C-level writes included
    os.close(fd)
    sys.argv[0] = "ipykernel_launcher"
    runpy.run_module("ipykernel_launcher", run_name="__main__", alter_sys=True)
