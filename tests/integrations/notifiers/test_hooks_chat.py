"""Chat notifiers (Slack-compatible, Feishu/Lark, DingTalk, WeCom): each adapter against a local HTTP server that
checks what the real service checks (body shape, signature, freshness) and answers like it; the same contract
for each adapter's fake; and the ticket's team choosing the channel."""

from __future__ import annotations

import base64
import hashlib
import hmac
import socket
import time
import uuid

import pytest
from django.contrib.auth.models import Group

from integrations.exceptions import PermanentError, TransientError
from integrations.notifiers import Notification
from integrations.notifiers import registry as notifier_registry
from integrations.notifiers.dingtalk import DingTalkNotifier
from integrations.notifiers.fake import FakeChatNotifier
from integrations.notifiers.feishu import FeishuNotifier
from integrations.notifiers.slack import SlackNotifier
from integrations.notifiers.wecom import WeComNotifier
from tests.factories.cmdb import SiteFactory
from tests.integrations.notifiers.hooks_peer import Received, local_peer

SECRET = "SEC0123456789abcdef"
WECOM_KEY = "693a91f6-7xxx-4bc4-97a0-0ec2sifa5aaa"
DING_TOKEN = "ding-token-1"


def notification(**overrides) -> Notification:
    values = {
        "key": uuid.uuid4().hex,
        "event": "opened",
        "subject": "Repair: card GPU-7 on gpu-a01 failed (Xid 79)",
        "body": "Xid 79: fallen off the bus\n\nTKT-12: Repair gpu-a01",
        "url": "http://gpuops.example/tickets/12/",
        "ticket_ref": "TKT-12",
    }
    return Notification(**{**values, **overrides})


# --- what each real service checks ----------------------------------------------------------------------------


def slack_check(req: Received) -> tuple[int, object]:
    body = req.json()
    if not isinstance(body.get("text"), str) or not body["text"]:
        return 400, b"invalid_payload"
    if not req.path.startswith("/services/"):
        return 404, b"no_service"
    return 200, b"ok"


def feishu_check(req: Received) -> tuple[int, object]:
    body = req.json()
    ts = int(body.get("timestamp", "0"))
    expected = base64.b64encode(hmac.new(f"{ts}\n{SECRET}".encode(), b"", hashlib.sha256).digest()).decode()
    if body.get("sign") != expected or abs(time.time() - ts) > 3600:
        return 200, {"code": 19021, "msg": "sign match fail or timestamp is not within one hour from current time"}
    post = body.get("content", {}).get("post", {}).get("zh_cn", {})
    if body.get("msg_type") != "post" or not post.get("title") or not isinstance(post.get("content"), list):
        return 200, {"code": 9499, "msg": "Bad Request"}
    if not all(isinstance(line, list) and all("tag" in el for el in line) for line in post["content"]):
        return 200, {"code": 9499, "msg": "Bad Request"}
    return 200, {"code": 0, "msg": "success", "data": {}}


def dingtalk_check(req: Received) -> tuple[int, object]:
    if req.query.get("access_token") != DING_TOKEN:
        return 200, {"errcode": 300001, "errmsg": "token is not exist"}
    ts = int(req.query.get("timestamp", "0"))
    expected = base64.b64encode(hmac.new(SECRET.encode(), f"{ts}\n{SECRET}".encode(), hashlib.sha256).digest())
    if req.query.get("sign") != expected.decode() or abs(time.time() * 1000 - ts) > 3600_000:
        return 200, {"errcode": 310000, "errmsg": "sign not match"}
    body = req.json()
    md = body.get("markdown", {})
    if body.get("msgtype") != "markdown" or not md.get("title") or not md.get("text"):
        return 200, {"errcode": 40035, "errmsg": "missing parameter"}
    return 200, {"errcode": 0, "errmsg": "ok"}


def wecom_check(req: Received) -> tuple[int, object]:
    if req.path != "/cgi-bin/webhook/send" or req.query.get("key") != WECOM_KEY:
        return 200, {"errcode": 93000, "errmsg": "invalid webhook url"}
    body = req.json()
    content = body.get("markdown", {}).get("content")
    if body.get("msgtype") != "markdown" or not content or len(content.encode()) > 4096:
        return 200, {"errcode": 40058, "errmsg": "markdown.content exceed max length 4096"}
    return 200, {"errcode": 0, "errmsg": "ok"}


ADAPTERS = {
    "slack": (slack_check, lambda url: SlackNotifier(url=f"{url}/services/T0/B0/x")),
    "feishu": (feishu_check, lambda url: FeishuNotifier(url=f"{url}/open-apis/bot/v2/hook/abc", secret=SECRET)),
    "dingtalk": (
        dingtalk_check,
        lambda url: DingTalkNotifier(url=f"{url}/robot/send?access_token={DING_TOKEN}", secret=SECRET),
    ),
    "wecom": (wecom_check, lambda url: WeComNotifier(url=f"{url}/cgi-bin/webhook/send?key={WECOM_KEY}")),
}


def text_of(received: Received) -> str:
    return received.body.decode()


# --- the real adapters against the local peers ----------------------------------------------------------------


@pytest.mark.parametrize("kind", list(ADAPTERS))
def test_the_adapter_sends_what_the_service_accepts(kind):
    check, make = ADAPTERS[kind]
    with local_peer(check) as peer:
        make(peer.url).send(notification())
    assert len(peer.received) == 1
    sent = peer.received[0]
    assert check(sent)[1] in (b"ok", {"code": 0, "msg": "success", "data": {}}, {"errcode": 0, "errmsg": "ok"})
    assert "Xid 79" in text_of(sent) and "http://gpuops.example/tickets/12/" in text_of(sent)
    assert sent.headers["content-type"] == "application/json"


@pytest.mark.parametrize("kind", ["feishu", "dingtalk"])
def test_a_wrong_signing_secret_is_refused_for_good(kind):
    check, _ = ADAPTERS[kind]
    with local_peer(check) as peer:
        cls = FeishuNotifier if kind == "feishu" else DingTalkNotifier
        url = (
            f"{peer.url}/open-apis/bot/v2/hook/abc"
            if kind == "feishu"
            else f"{peer.url}/robot/send?access_token={DING_TOKEN}"
        )
        with pytest.raises(PermanentError, match=r"19021|310000"):
            cls(url=url, secret="not-the-secret").send(notification())


def test_a_stale_timestamp_fails_the_feishu_check():
    adapter = FeishuNotifier(url="http://x", secret=SECRET)
    stale = adapter.build(notification(), now=time.time() - 7200)
    fresh = adapter.build(notification(), now=time.time())
    assert feishu_check(Received("POST", "/", {}, {}, _json(stale.json)))[1]["code"] == 19021
    assert feishu_check(Received("POST", "/", {}, {}, _json(fresh.json)))[1]["code"] == 0


def _json(value) -> bytes:
    import json

    return json.dumps(value).encode()


def test_a_long_wecom_message_is_cut_to_the_limit():
    long = notification(body="x" * 10_000)
    with local_peer(wecom_check) as peer:
        ADAPTERS["wecom"][1](peer.url).send(long)
    assert len(peer.received[0].json()["markdown"]["content"].encode()) <= 4096


@pytest.mark.parametrize(
    ("kind", "status", "answer", "error"),
    [
        ("slack", 503, b"service unavailable", TransientError),
        ("slack", 404, b"no_service", PermanentError),
        ("feishu", 200, {"code": 11232, "msg": "frequency limited"}, TransientError),
        ("dingtalk", 200, {"errcode": 410100, "errmsg": "send too fast"}, TransientError),
        ("wecom", 200, {"errcode": 45009, "errmsg": "api freq out of limit"}, TransientError),
        ("wecom", 200, {"errcode": 93000, "errmsg": "invalid webhook url"}, PermanentError),
        ("dingtalk", 429, b"", TransientError),
    ],
)
def test_refusals_are_classified_for_the_retry(kind, status, answer, error):
    _, make = ADAPTERS[kind]
    with local_peer(lambda req: (status, answer)) as peer, pytest.raises(error):
        make(peer.url).send(notification())


def test_an_unreachable_robot_is_transient():
    with socket.socket() as sock:  # a port that was free a moment ago: nothing listens there now
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    with pytest.raises(TransientError):
        SlackNotifier(url=f"{url}/services/T/B/x", timeout_s=1).send(notification())


# --- the contract, for the real adapter and its fake ------------------------------------------------------------


@pytest.mark.parametrize("kind", list(ADAPTERS))
@pytest.mark.parametrize("impl", ["real", "fake"])
def test_notifier_contract(kind, impl):
    """A notification sent is seen by the peer once, as the service's message, carrying subject and link; a
    peer that is down is a TransientError (the notify task retries), and the retry sends it."""
    check, make = ADAPTERS[kind]
    with local_peer(check) as peer:
        adapter = make(peer.url)
        if impl == "fake":
            fake = FakeChatNotifier(adapter=adapter, fail_next=1)
            notifier, seen = fake, lambda: [_json(r.json) for r in fake.requests]
        else:
            failures = [1]

            def flaky(req: Received) -> tuple[int, object]:
                if failures[0]:
                    failures[0] -= 1
                    return 503, b"busy"
                return check(req)

            peer.check = flaky
            notifier, seen = adapter, lambda: [r.body for r in peer.received[1:]]
        message = notification()
        with pytest.raises(TransientError):
            notifier.send(message)
        notifier.send(message)
    bodies = seen()
    assert len(bodies) == 1
    assert message.subject.split(":")[0] in bodies[0].decode() and message.url in bodies[0].decode()


# --- the ticket's team chooses the channel -------------------------------------------------------------------


@pytest.mark.django_db
def test_the_ticket_team_routes_its_notification_to_its_chat_channel(settings, django_capture_on_commit_callbacks):
    from workflows.engine import notify_on_commit
    from workflows.models import NotificationOutbox, Ticket

    settings.CELERY_TASK_ALWAYS_EAGER = True
    techs, network = Group.objects.create(name="dc-technicians"), Group.objects.create(name="network")
    with local_peer(feishu_check) as feishu, local_peer(wecom_check) as wecom:
        settings.GPUOPS_INTEGRATIONS = {
            "NOTIFIERS": [],
            "TICKET_WEBHOOKS": False,
            "CHAT_CHANNELS": {
                "dc-oncall": {
                    "adapter": "integrations.notifiers.feishu.FeishuNotifier",
                    "options": {"url": f"{feishu.url}/open-apis/bot/v2/hook/abc", "secret": SECRET},
                },
                "netops": {
                    "adapter": "integrations.notifiers.wecom.WeComNotifier",
                    "options": {"url": f"{wecom.url}/cgi-bin/webhook/send?key={WECOM_KEY}"},
                },
            },
            "TEAM_CHAT_CHANNELS": {"dc-technicians": ["dc-oncall"], "network": ["netops"]},
        }
        notifier_registry.cache_clear()
        site = SiteFactory(code="sh1")
        ticket = Ticket.objects.create(
            type="repair", title="Repair gpu-a01", state="new", site=site, assignee_group=techs, correlation_id="c1"
        )
        with django_capture_on_commit_callbacks(execute=True):
            notify_on_commit(ticket, "opened", "Card GPU-7 failed")
        assert [r.notifier_path for r in NotificationOutbox.objects.filter(ticket=ticket)] == ["chat:dc-oncall"]
        assert len(feishu.received) == 1 and not wecom.received
        assert "Card GPU-7 failed" in feishu.received[0].body.decode()

        ticket.assignee_group = network
        ticket.save()
        with django_capture_on_commit_callbacks(execute=True):
            notify_on_commit(ticket, "comment", "Cable swapped")
        assert len(wecom.received) == 1 and len(feishu.received) == 1
    notifier_registry.cache_clear()
