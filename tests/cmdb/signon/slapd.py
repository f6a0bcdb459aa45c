"""A real OpenLDAP server (Debian's slapd) for the sign-on tests: a temporary slapd.conf and MDB database, the
test directory loaded with slapadd, slapd listening on a free 127.0.0.1 port as a child process."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

SLAPD = shutil.which("slapd") or "/usr/sbin/slapd"
SLAPADD = shutil.which("slapadd") or "/usr/sbin/slapadd"
LDAPMODIFY = shutil.which("ldapmodify") or "/usr/bin/ldapmodify"
SCHEMA_DIR = Path("/etc/ldap/schema")
MODULE_DIR = Path("/usr/lib/ldap")

SUFFIX = "dc=gpuops,dc=test"
ROOT_DN = f"cn=admin,{SUFFIX}"
ROOT_PASSWORD = "root-secret"


def missing() -> str | None:
    """Why a real slapd cannot run here, or None."""
    for tool in (SLAPD, SLAPADD, LDAPMODIFY):
        if not os.access(tool, os.X_OK):
            return f"{tool} is absent (apt-get install slapd ldap-utils)"
    if not (SCHEMA_DIR / "inetorgperson.schema").exists() or not (MODULE_DIR / "back_mdb.so").exists():
        return "slapd's schema or back_mdb module is absent (apt-get install slapd)"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Slapd:
    uri: str
    folder: Path

    def modify(self, ldif: str) -> None:
        """Change the directory over the wire, as its administrator would (ldapmodify)."""
        subprocess.run(
            [LDAPMODIFY, "-x", "-H", self.uri, "-D", ROOT_DN, "-w", ROOT_PASSWORD],
            input=ldif.encode(),
            check=True,
            capture_output=True,
            timeout=30,
        )


@contextmanager
def slapd_running(folder: Path, directory_ldif: str) -> Iterator[Slapd]:
    """Start slapd with `directory_ldif` loaded under SUFFIX; stop it (and only it) afterwards."""
    db = folder / "db"
    db.mkdir()
    conf = folder / "slapd.conf"
    conf.write_text(
        "\n".join(
            [
                *(f"include {SCHEMA_DIR / name}.schema" for name in ("core", "cosine", "nis", "inetorgperson")),
                f"pidfile {folder / 'slapd.pid'}",
                f"modulepath {MODULE_DIR}",
                "moduleload back_mdb",
                "database mdb",
                "maxsize 10485760",
                f'suffix "{SUFFIX}"',
                f'rootdn "{ROOT_DN}"',
                f"rootpw {ROOT_PASSWORD}",
                f"directory {db}",
                "access to attrs=userPassword by anonymous auth by * none",
                "access to * by * read",
                "",
            ]
        )
    )
    data = folder / "directory.ldif"
    data.write_text(directory_ldif)
    subprocess.run([SLAPADD, "-f", str(conf), "-l", str(data)], check=True, capture_output=True, timeout=60)
    port = _free_port()
    uri = f"ldap://127.0.0.1:{port}"
    log = open(folder / "slapd.log", "wb")  # noqa: SIM115  (closed below)
    # -d keeps slapd in the foreground as our child, so the test owns and ends exactly this process.
    proc = subprocess.Popen([SLAPD, "-f", str(conf), "-h", f"{uri}/", "-d", "256"], stdout=log, stderr=log)
    try:
        deadline = time.monotonic() + 30
        while True:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"slapd did not start: {(folder / 'slapd.log').read_text()[-2000:]}")
            time.sleep(0.1)
        yield Slapd(uri=uri, folder=folder)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
        log.close()
