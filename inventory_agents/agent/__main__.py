"""Command line: `python -m inventory_agents.agent collect|report|enroll ...` (see docs/agent.md).

Exit codes: 0 done; 1 internal error; 2 bad arguments or unreadable token file; 3 server unreachable, report
spooled; 4 report rejected by the server (4xx), kept in <spool>/rejected/; 5 the report could not be spooled.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from typing import List, Optional

from . import AGENT_VERSION
from .collectors import xid
from .report import build_report, to_json
from .runner import DEFAULT_TIMEOUT_S, DirSource, LiveSource, Source
from .transport import (
    DEFAULT_SPOOL_DIR,
    RejectedError,
    TransientError,
    enroll,
    enroll_url,
    flush_spool,
    reports_url,
    send,
    spool,
)

EXIT_OK = 0
EXIT_INTERNAL = 1
EXIT_USAGE = 2
EXIT_SPOOLED = 3
EXIT_REJECTED = 4
EXIT_SPOOL_FAILED = 5
DEFAULT_STATE_DIR = "/var/lib/gpuops-agent"

log = logging.getLogger("gpuops-agent")


class UsageError(Exception):
    pass


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m inventory_agents.agent", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version="gpuops-agent " + AGENT_VERSION)
    sub = parser.add_subparsers(dest="command")
    sub.required = True  # Python 3.6-compatible spelling of add_subparsers(required=True)

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--from-dir", metavar="DIR", help="replay captured tool outputs instead of running tools")
        p.add_argument(
            "--timeout",
            type=float,
            default=DEFAULT_TIMEOUT_S,
            metavar="SECONDS",
            help="kill a tool that runs longer than this (default %(default)s)",
        )
        p.add_argument(
            "--state-dir",
            default=DEFAULT_STATE_DIR,
            metavar="DIR",
            help="where the Xid bookkeeping lives (default %(default)s)",
        )
        p.add_argument("-v", "--verbose", action="count", default=0, help="more logging on stderr")

    collect = sub.add_parser("collect", help="print the JSON report on stdout")
    common(collect)
    collect.add_argument("--compact", action="store_true", help="one-line JSON")

    report = sub.add_parser("report", help="send the report to the gpuops server")
    common(report)
    report.add_argument("--server", required=True, metavar="URL", help="e.g. https://gpuops.example.com")
    report.add_argument("--token-file", required=True, metavar="FILE", help="file holding the agent token")
    report.add_argument(
        "--spool-dir",
        default=DEFAULT_SPOOL_DIR,
        metavar="DIR",
        help="reports waiting for the server (default %(default)s)",
    )
    report.add_argument("--http-timeout", type=float, default=30.0, metavar="SECONDS")

    enrol = sub.add_parser("enroll", help="register this node with an enrollment token; write its agent token")
    common(enrol)
    enrol.add_argument("--server", required=True, metavar="URL", help="e.g. https://gpuops.example.com")
    enrol.add_argument(
        "--enrollment-token-file",
        required=True,
        metavar="FILE",
        help="file holding the site's enrollment token (gpe_...)",
    )
    enrol.add_argument(
        "--token-file",
        required=True,
        metavar="FILE",
        help="where to write this node's agent token (mode 600); `report` reads it",
    )
    enrol.add_argument("--force", action="store_true", help="replace an existing token file")
    enrol.add_argument("--http-timeout", type=float, default=30.0, metavar="SECONDS")
    return parser


def _source(args: argparse.Namespace) -> Source:
    if args.timeout <= 0:
        raise UsageError("--timeout must be positive")
    if args.from_dir is not None:
        if not os.path.isdir(args.from_dir):
            raise UsageError("--from-dir {}: not a directory".format(args.from_dir))
        return DirSource(args.from_dir)
    return LiveSource(timeout=args.timeout)


def _read_token(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as handle:
            token = handle.read().strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError("cannot read token file {}: {}".format(path, exc)) from exc
    try:
        if os.stat(path).st_mode & 0o004:
            log.warning("token file %s is readable by everyone; chmod 600 it", path)
    except OSError:
        pass
    if not token or any(ch.isspace() for ch in token):
        raise UsageError("token file {} must hold one token (it is empty or has several words)".format(path))
    return token


def _check_server(url: str) -> None:
    if not url.startswith(("http://", "https://")) or len(url.split("://", 1)[1].strip("/")) == 0:
        raise UsageError("--server must be an http:// or https:// URL, got {!r}".format(url))


def _save_xid_state(args: argparse.Namespace, state: Optional[dict]) -> None:
    if state is None:
        return
    try:
        xid.save_state(args.state_dir, state)
    except OSError as exc:
        # The next report repeats these events; the server de-duplicates them.
        log.warning("cannot save Xid state in %s: %s", args.state_dir, exc)


def cmd_collect(args: argparse.Namespace) -> int:
    source = _source(args)
    # collect never advances the Xid state: only a delivered (or spooled) report does.
    report, _ = build_report(source, state_dir=None if args.from_dir else args.state_dir)
    sys.stdout.write(to_json(report, indent=None if args.compact else 2) + "\n")
    return EXIT_OK


def cmd_report(args: argparse.Namespace) -> int:
    _check_server(args.server)
    token = _read_token(args.token_file)
    source = _source(args)
    url = reports_url(args.server)
    report, xid_state = build_report(source, state_dir=None if args.from_dir else args.state_dir)
    body = to_json(report, indent=None).encode("utf-8")

    if not flush_spool(url, token, args.spool_dir, args.http_timeout):
        return _spool_new(args, body, xid_state, "server unreachable")
    try:
        status = send(url, token, body, args.http_timeout)
    except TransientError as exc:
        return _spool_new(args, body, xid_state, str(exc))
    except RejectedError as exc:
        try:
            path = spool(args.spool_dir, body, subdir="rejected")
        except OSError as spool_exc:
            log.error("report rejected (%s) and could not be kept: %s", exc, spool_exc)
            return EXIT_REJECTED
        log.error("report rejected by %s (%s); kept in %s", url, exc, path)
        return EXIT_REJECTED
    _save_xid_state(args, xid_state)
    log.info("report delivered to %s (HTTP %s)", url, status)
    return EXIT_OK


def cmd_enroll(args: argparse.Namespace) -> int:
    _check_server(args.server)
    if os.path.exists(args.token_file) and not args.force:
        raise UsageError("{} exists: this node is enrolled already (--force to enroll again)".format(args.token_file))
    enrollment_token = _read_token(args.enrollment_token_file)
    source = _source(args)
    # The server needs the hostname and the system serial; the whole report is sent so it can check both.
    report, _ = build_report(source, state_dir=None)
    url = enroll_url(args.server)
    try:
        answer = enroll(url, enrollment_token, to_json(report, indent=None).encode("utf-8"), args.http_timeout)
    except TransientError as exc:
        log.error(
            "cannot enroll at %s (%s); run enroll again later (if the server registered the node before the "
            "answer was lost, enroll is refused: an administrator then issues its token with "
            "`manage.py agent_token_issue HOSTNAME`)",
            url,
            exc,
        )
        return EXIT_SPOOLED
    except RejectedError as exc:
        log.error("enrollment refused by %s (%s)", url, exc)
        return EXIT_REJECTED
    directory = os.path.dirname(os.path.abspath(args.token_file))
    try:
        os.makedirs(directory, exist_ok=True)
        fd = os.open(args.token_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.fchmod(fd, 0o600)  # an existing file (--force) keeps its old mode otherwise
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(answer["token"] + "\n")
    except OSError as exc:
        # The server issued the token once and will not show it again: print it so it is not lost.
        log.error("cannot write %s (%s); the agent token is: %s", args.token_file, exc, answer["token"])
        return EXIT_SPOOL_FAILED
    log.warning(
        "enrolled as %s (node %s, status %s); token written to %s",
        answer.get("hostname"),
        answer.get("node_id"),
        answer.get("status"),
        args.token_file,
    )
    return EXIT_OK


def _spool_new(args: argparse.Namespace, body: bytes, xid_state: Optional[dict], reason: str) -> int:
    try:
        path = spool(args.spool_dir, body)
    except OSError as exc:
        log.error("server unreachable (%s) and the report could not be spooled in %s: %s", reason, args.spool_dir, exc)
        return EXIT_SPOOL_FAILED
    _save_xid_state(args, xid_state)
    log.warning("server unreachable (%s); report spooled as %s", reason, path)
    return EXIT_SPOOLED


def main(argv: Optional[List[str]] = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    level = logging.WARNING - 10 * min(args.verbose, 2)
    logging.basicConfig(level=level, format="gpuops-agent: %(levelname)s: %(message)s", stream=sys.stderr)
    try:
        if args.command == "collect":
            return cmd_collect(args)
        if args.command == "enroll":
            return cmd_enroll(args)
        return cmd_report(args)
    except UsageError as exc:
        parser.print_usage(sys.stderr)
        sys.stderr.write("gpuops-agent: error: {}\n".format(exc))
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # last resort: one line on stderr, non-zero exit
        log.error("internal error: %s", exc, exc_info=args.verbose > 0)
        return EXIT_INTERNAL


if __name__ == "__main__":
    sys.exit(main())
