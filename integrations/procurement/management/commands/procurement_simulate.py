"""Play the procurement system against a running gpuops: signed events over HTTP, or a fake REST server.

    manage.py procurement_simulate --url http://127.0.0.1:8000 --scenario full --request 12 --missing 1 --unexpected 1
    manage.py procurement_simulate send po.approved --data '{"po_number": "PO-5001"}'
    manage.py procurement_simulate serve --port 8099 [--token T] [--fail timeout --fail 500]

The signing secret is --secret, else the first secret of --source in GPUOPS_PROCUREMENT["WEBHOOK_SOURCES"].
Exits non-zero with a clear message when gpuops is unreachable or refuses an event.
"""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from ...conf import procurement_setting, webhook_secrets
from ...fake_server import FakeProcurementServer
from ...models import ProcurementRequest
from ...schemas import PROCUREMENT_DATA_SCHEMAS
from ...simulator import EventSender, SimulationError, scenario_full


class Command(BaseCommand):
    help = "Play the procurement system: send signed events to gpuops, run a scenario, or serve a fake REST API."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--url", default=None, help="gpuops base URL (default: SIMULATE_URL setting).")
        parser.add_argument("--secret", default=None, help="Signing secret (default: from WEBHOOK_SOURCES).")
        parser.add_argument("--source", default=None, help="X-Gpuops-Source (default: SIMULATE_SOURCE setting).")
        parser.add_argument("--timeout", type=float, default=10.0, help="HTTP timeout in seconds.")
        parser.add_argument("--scenario", choices=["full"], help="Run a whole scenario (needs --request).")
        parser.add_argument("--request", type=str, help="The request to play along with: id or PR-<id>.")
        parser.add_argument("--missing", type=int, default=0, help="Serials dispatched but not delivered.")
        parser.add_argument("--unexpected", type=int, default=0, help="Serials delivered but never dispatched.")
        parser.add_argument(
            "--out-of-order", action="store_true", help="Deliver before the dispatch notice; approve the PO last."
        )
        parser.add_argument(
            "--wait", type=float, default=0.0, help="Seconds to wait for the request's approval and PO number."
        )
        parser.add_argument("--delay", type=float, default=0.0, help="Seconds between events.")
        sub = parser.add_subparsers(dest="action", required=False)
        send = sub.add_parser("send", help="Send one event.")
        send.add_argument("type", choices=sorted(PROCUREMENT_DATA_SCHEMAS))
        send.add_argument("--data", required=True, help="The event's data object, as JSON.")
        send.add_argument("--event-id", default=None)
        serve = sub.add_parser("serve", help="Serve a fake procurement REST API (what HttpProcurementClient calls).")
        serve.add_argument("--host", default="127.0.0.1")
        serve.add_argument("--port", type=int, default=8099)
        serve.add_argument("--token", default="", help="Require this bearer token.")
        serve.add_argument(
            "--fail",
            action="append",
            default=[],
            choices=["timeout", "500", "502", "429", "reset"],
            help="Fail the next purchase-order request this way (repeatable, in order).",
        )

    def _sender(self, options: dict[str, Any]) -> EventSender:
        source = options["source"] or procurement_setting("SIMULATE_SOURCE")
        secret = options["secret"]
        if not secret:
            found = webhook_secrets(procurement_setting("WEBHOOK_SOURCES"), source)
            if not found:
                raise CommandError(
                    f"No secret for source {source!r}: pass --secret or configure "
                    "GPUOPS_PROCUREMENT['WEBHOOK_SOURCES']."
                )
            secret = found[0]
        return EventSender(
            url=options["url"] or procurement_setting("SIMULATE_URL"),
            secret=secret,
            source=source,
            timeout_s=options["timeout"],
            say=lambda line: self.stdout.write(line),
        )

    def handle(self, *args: Any, **options: Any) -> None:
        action = options.get("action")
        if action == "serve":
            return self._serve(options)
        if action == "send":
            return self._send(options)
        if options["scenario"] == "full":
            return self._scenario(options)
        raise CommandError("Say what to do: --scenario full --request <id>, `send <type> --data ...`, or `serve`.")

    def _send(self, options: dict[str, Any]) -> None:
        try:
            data = json.loads(options["data"])
        except ValueError as exc:
            raise CommandError(f"--data is not JSON: {exc}") from exc
        try:
            self._sender(options).send(options["type"], data, event_id=options["event_id"])
        except SimulationError as exc:
            raise CommandError(str(exc)) from exc

    def _scenario(self, options: dict[str, Any]) -> None:
        ref = (options["request"] or "").removeprefix("PR-")
        if not ref.isdigit():
            raise CommandError("--scenario full needs --request <id> (or PR-<id>).")
        request = ProcurementRequest.objects.filter(pk=int(ref)).first()
        if request is None:
            raise CommandError(f"No procurement request PR-{ref}.")
        sender = self._sender(options)
        self.stdout.write(f"Playing procurement for {request.reference} against {sender.url} (source {sender.source})")
        try:
            result = scenario_full(
                sender,
                request,
                missing=options["missing"],
                unexpected=options["unexpected"],
                out_of_order=options["out_of_order"],
                wait_s=options["wait"],
                delay_s=options["delay"],
            )
        except SimulationError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(
            self.style.SUCCESS(
                f"Done: PO {result.po_number}, {len(result.delivered)} serial(s) delivered in {len(result.shipments)} "
                f"shipment(s); missing {len(result.missing)}, unexpected {len(result.unexpected)}."
            )
        )

    def _serve(self, options: dict[str, Any]) -> None:
        server = FakeProcurementServer(
            host=options["host"], port=options["port"], token=options["token"], verbose=options["verbosity"] > 1
        )
        server.state.faults.extend(options["fail"])
        self.stdout.write(
            f"Fake procurement API on {server.url} (POST/GET /api/v1/purchase-orders; "
            f"/_control/faults, /_control/orders). Ctrl-C stops."
        )
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            self.stdout.write("stopped")
        finally:
            server.httpd.server_close()
