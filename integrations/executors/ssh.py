"""The SSH executor (paramiko): one connection per command, strict host keys, bounded output and time.

Only this module imports paramiko. Errors become ours:

- cannot connect (refused, timeout, no route, the banner never came)  -> TransientError (retried later);
- authentication failed, unknown or changed host key                   -> PermanentError (a person must fix it);
- the command outlived `timeout_s`                                    -> PermanentError: it may still be
  running on the host, so retrying automatically could run two installs at once.

A command that exits non-zero is a CommandResult with `ok == False`, not an error.
"""

from __future__ import annotations

import logging
import select
import shlex
import time
from pathlib import Path

import paramiko

from integrations.exceptions import PermanentError, TransientError

from .base import CommandResult, ExecTarget

logger = logging.getLogger(__name__)

OUTPUT_LIMIT = 64 * 1024  # bytes kept per stream (the tail: a failing installer prints its error last)
DEFAULT_REBOOT = "nohup sh -c 'sleep 2; systemctl reboot' >/dev/null 2>&1 &"


def _resolve_credential(ref: str) -> dict[str, str]:
    """A credential reference ({"username", "password", "key_file"}) resolved the way switch credentials are."""
    from integrations.switches.credentials import credential_lookup

    data = credential_lookup(ref)
    return {k: str(v) for k, v in data.items() if k in ("username", "password", "key_file")}


class SshExecutor:
    """CommandExecutor over SSH.

    Args:
        username: remote user (a service account allowed to run the install scripts, via sudo if `sudo`).
        key_file: private key path. `password` is only for labs; production uses keys.
        known_hosts: known_hosts file the host keys are checked against. Unknown hosts are refused unless
            `accept_unknown_hosts` (then the key is accepted for this connection only and a warning is logged).
        credential_ref: a credential *name* resolved at connect time (env GPUOPS_CREDENTIAL_<NAME> or the
            credentials file); overrides username/password/key_file. Secrets never sit in settings.
        port, connect_timeout_s: connection parameters.
        sudo: prefix commands with `sudo -n` (never prompts: a missing sudo rule fails fast).
        reboot_command: how to reboot so that the command returns before the node goes down.
    """

    is_dry_run = False

    def __init__(
        self,
        *,
        username: str = "",
        key_file: str = "",
        password: str = "",
        known_hosts: str = "",
        accept_unknown_hosts: bool = False,
        credential_ref: str = "",
        port: int = 22,
        connect_timeout_s: float = 15.0,
        sudo: bool = False,
        reboot_command: str = DEFAULT_REBOOT,
    ) -> None:
        self.username, self.key_file, self.password = username, key_file, password
        self.known_hosts, self.accept_unknown_hosts = known_hosts, accept_unknown_hosts
        self.credential_ref = credential_ref
        self.port, self.connect_timeout_s = port, connect_timeout_s
        self.sudo, self.reboot_command = sudo, reboot_command

    def __repr__(self) -> str:
        return f"SshExecutor({self.username or '?'}@*:{self.port}, known_hosts={self.known_hosts or 'none'})"

    # --- connection ---------------------------------------------------------------------------------------------

    def _connect(self, target: ExecTarget) -> paramiko.SSHClient:
        creds = {"username": self.username, "password": self.password, "key_file": self.key_file}
        if self.credential_ref:
            creds.update(_resolve_credential(self.credential_ref))
        client = paramiko.SSHClient()
        if self.known_hosts:
            try:
                client.load_host_keys(self.known_hosts)
            except OSError as exc:
                raise PermanentError(f"cannot read known_hosts {self.known_hosts}: {exc}", peer=target.label) from exc
        if self.accept_unknown_hosts:
            logger.warning("ssh executor accepts unknown host keys (%s): do not use this in production", target.host)
            client.set_missing_host_key_policy(paramiko.AutoAddPolicy())
        else:
            client.set_missing_host_key_policy(paramiko.RejectPolicy())
        port = target.port or self.port
        try:
            client.connect(
                hostname=target.host,
                port=port,
                username=creds["username"] or None,
                password=creds["password"] or None,
                key_filename=creds["key_file"] or None,
                timeout=self.connect_timeout_s,
                banner_timeout=self.connect_timeout_s,
                auth_timeout=self.connect_timeout_s,
                allow_agent=False,
                look_for_keys=False,
            )
        except paramiko.BadHostKeyException as exc:
            client.close()
            raise PermanentError(f"host key of {target.host} changed: {exc}", peer=target.label) from exc
        except paramiko.AuthenticationException as exc:
            client.close()
            raise PermanentError(f"authentication failed as {creds['username']!r}: {exc}", peer=target.label) from exc
        except paramiko.SSHException as exc:
            client.close()
            if "not found in known_hosts" in str(exc):
                raise PermanentError(
                    f"unknown host key ({exc}); add it to {self.known_hosts or 'known_hosts'}", peer=target.label
                ) from exc
            raise TransientError(f"ssh handshake failed: {exc}", peer=target.label) from exc
        except (TimeoutError, OSError, EOFError) as exc:  # socket.timeout is TimeoutError; refused/no route: OSError
            client.close()
            raise TransientError(f"cannot connect to {target.host}:{port}: {exc}", peer=target.label) from exc
        return client

    # --- commands -----------------------------------------------------------------------------------------------

    def run(self, target: ExecTarget, command: str, *, timeout_s: float = 1800.0) -> CommandResult:
        """Run `command` and wait for its exit status, reading both streams as they come (a full pipe would
        otherwise block the remote process)."""
        full = f"sudo -n sh -c {shlex.quote(command)}" if self.sudo else command
        started = time.monotonic()
        client = self._connect(target)
        try:
            transport = client.get_transport()
            if transport is None:
                raise TransientError("ssh transport closed right after connecting", peer=target.label)
            try:
                chan = transport.open_session(timeout=self.connect_timeout_s)
                chan.exec_command(full)
            except paramiko.SSHException as exc:
                raise TransientError(f"cannot open a session: {exc}", peer=target.label) from exc
            out, err = bytearray(), bytearray()
            deadline = started + timeout_s
            while True:
                if time.monotonic() > deadline:
                    chan.close()
                    raise PermanentError(
                        f"command still running after {timeout_s:.0f} s (it may go on running on "
                        f"the host): {command[:200]}",
                        peer=target.label,
                    )
                select.select([chan], [], [], 0.5)
                while chan.recv_ready():
                    out += chan.recv(32768)
                while chan.recv_stderr_ready():
                    err += chan.recv_stderr(32768)
                del out[:-OUTPUT_LIMIT], err[:-OUTPUT_LIMIT]
                # The exit status can arrive while output is still on its way (sshd sends it when the command
                # exits, not when its output is flushed): done only at EOF (or close) with nothing left to read.
                finished = chan.exit_status_ready() and (chan.eof_received or chan.closed)
                if finished and not chan.recv_ready() and not chan.recv_stderr_ready():
                    break
            status = chan.recv_exit_status()
        except (OSError, EOFError) as exc:
            # The connection dropped mid-command: we do not know whether it finished.
            raise TransientError(f"connection lost while running the command: {exc}", peer=target.label) from exc
        finally:
            client.close()
        result = CommandResult(
            target=target.label,
            command=command,
            exit_status=status,
            stdout=out.decode("utf-8", "replace"),
            stderr=err.decode("utf-8", "replace"),
            duration_s=time.monotonic() - started,
        )
        logger.info("ssh %s: %s -> %s", target.label, command[:200], result.summary(200))
        return result

    def reboot(self, target: ExecTarget) -> CommandResult:
        """Schedule a reboot a moment ahead, so the command returns cleanly; a connection that drops at the very
        end is what a reboot looks like and counts as success."""
        try:
            return self.run(target, self.reboot_command, timeout_s=60)
        except TransientError as exc:
            if "connection lost" in str(exc):
                return CommandResult(target=target.label, command=self.reboot_command, exit_status=0, stderr=str(exc))
            raise


def public_key_line(key_file: str | Path) -> str:
    """The authorized_keys line of a private key file (used by the contract test and by ops documentation)."""
    key = paramiko.Ed25519Key.from_private_key_file(str(key_file))
    return f"{key.get_name()} {key.get_base64()}"


__all__ = ["SshExecutor", "public_key_line"]
