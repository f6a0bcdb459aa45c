"""Files that hold a secret (generated passwords, the embedded default's SECRET_KEY)."""

from __future__ import annotations

import os
from pathlib import Path


def private_file_write(path: Path, secret: str) -> None:
    """Write `secret` to `path`, readable by its owner only from the first byte (no window at the umask's mode)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        os.fchmod(handle.fileno(), 0o600)  # a file that already existed keeps its old mode through O_CREAT
        handle.write(secret + "\n")
