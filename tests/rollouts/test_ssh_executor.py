"""Contract test of the SSH executor against a real OpenSSH server on loopback (services tier).

The test starts `/usr/sbin/sshd -D` with its own config, host key and authorized_keys in a temporary folder,
as the current user (root in CI). It skips with a reason when sshd is not installed.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from integrations.exceptions import PermanentError, TransientError
from integrations.executors import ExecTarget, command_render
from integrations.executors.ssh import SshExecutor, public_key_line

pytestmark = pytest.mark.services

SSHD = "/usr/sbin/sshd"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _write_key(path: Path) -> Path:
    key = Ed25519PrivateKey.generate()
    path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption())
    )
    path.chmod(0o600)
    return path


@pytest.fixture(scope="module")
def sshd(tmp_path_factory):
    """A throwaway sshd on 127.0.0.1:<free port>. Yields (port, client key path, known_hosts path, user)."""
    if not os.path.exists(SSHD):
        pytest.skip(f"{SSHD} is absent (apt-get install openssh-server)")
    tmp = tmp_path_factory.mktemp("sshd")
    host_key = _write_key(tmp / "host_ed25519")
    client_key = _write_key(tmp / "client_ed25519")
    (tmp / "authorized_keys").write_text(public_key_line(client_key) + "\n")
    port = _free_port()
    if os.geteuid() == 0:
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # privilege separation directory sshd insists on
    config = tmp / "sshd_config"
    config.write_text(
        "\n".join(
            [
                "ListenAddress 127.0.0.1",
                f"HostKey {host_key}",
                f"AuthorizedKeysFile {tmp / 'authorized_keys'}",
                f"PidFile {tmp / 'sshd.pid'}",
                "StrictModes no",
                "UsePAM no",
                "PasswordAuthentication no",
                "KbdInteractiveAuthentication no",
                "PubkeyAuthentication yes",
                "PermitRootLogin prohibit-password",
                "LogLevel ERROR",
                "",
            ]
        )
    )
    proc = subprocess.Popen(
        [SSHD, "-D", "-e", "-f", str(config), "-p", str(port)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.skip(f"sshd did not start: {proc.stdout.read().decode()[-500:]}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            break
        except OSError:
            time.sleep(0.1)
    host_pub = public_key_line(host_key)
    known_hosts = tmp / "known_hosts"
    known_hosts.write_text(f"[127.0.0.1]:{port} {host_pub}\n")
    try:
        yield port, client_key, known_hosts, os.environ.get("USER") or _whoami(), tmp
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()


def _whoami() -> str:
    import pwd

    return pwd.getpwuid(os.geteuid()).pw_name


def _executor(sshd, **overrides) -> SshExecutor:
    port, key, known_hosts, user, _ = sshd
    options = {
        "username": user,
        "key_file": str(key),
        "known_hosts": str(known_hosts),
        "port": port,
        "connect_timeout_s": 5,
    }
    return SshExecutor(**{**options, **overrides})


TARGET = ExecTarget(host="127.0.0.1", name="node-under-test")


def test_runs_a_command_and_returns_exit_status_and_both_streams(sshd):
    result = _executor(sshd).run(TARGET, "echo installed; echo 'warning: x' >&2; exit 3", timeout_s=20)
    assert result.exit_status == 3 and not result.ok
    assert result.stdout.strip() == "installed"
    assert result.stderr.strip() == "warning: x"
    assert result.target == "node-under-test"


def test_rendered_install_command_runs_with_quoted_version(sshd):
    tmp = sshd[4]
    marker = tmp / "installed-version"
    template = f"printf %s {{version}} > {marker}"
    command = command_render(template, version="570.133.20; rm -rf /")
    result = _executor(sshd).run(TARGET, command, timeout_s=20)
    assert result.ok, result.summary()
    # The hostile "version" arrived as one literal argument: quoting held.
    assert marker.read_text() == "570.133.20; rm -rf /"


def test_large_output_is_read_while_the_command_runs(sshd):
    result = _executor(sshd).run(TARGET, "head -c 300000 /dev/zero | tr '\\0' x; echo; echo done", timeout_s=30)
    assert result.ok
    assert result.stdout.rstrip().endswith("done")
    assert len(result.stdout) <= 64 * 1024 + 10  # the tail is kept, not the whole flood


def test_unknown_host_key_is_refused(sshd, tmp_path):
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    with pytest.raises(PermanentError, match="unknown host key"):
        _executor(sshd, known_hosts=str(empty)).run(TARGET, "true")


def test_wrong_key_is_an_authentication_error(sshd, tmp_path):
    other = _write_key(tmp_path / "other")
    with pytest.raises(PermanentError, match="authentication failed"):
        _executor(sshd, key_file=str(other)).run(TARGET, "true")


def test_nobody_listening_is_transient():
    port = _free_port()
    with pytest.raises(TransientError, match="cannot connect"):
        SshExecutor(username="x", port=port, connect_timeout_s=2, accept_unknown_hosts=True).run(TARGET, "true")


def test_command_outliving_its_timeout_is_permanent(sshd):
    started = time.monotonic()
    with pytest.raises(PermanentError, match="still running"):
        _executor(sshd).run(TARGET, "sleep 30", timeout_s=1.5)
    assert time.monotonic() - started < 10


def test_reboot_command_returns_at_once(sshd):
    tmp = sshd[4]
    flag = tmp / "rebooted"
    executor = _executor(sshd, reboot_command=f"nohup sh -c 'sleep 0.2; touch {flag}' >/dev/null 2>&1 &")
    result = executor.reboot(TARGET)
    assert result.ok
    deadline = time.monotonic() + 5
    while not flag.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert flag.exists()


def test_sshd_binary_present_for_ci():
    """Documents what CI installs: openssh-server (for /usr/sbin/sshd)."""
    assert shutil.which("sshd") or os.path.exists(SSHD)
