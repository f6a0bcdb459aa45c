"""A small OpenID Connect provider on loopback for the sign-on tests: discovery, authorize (the user is chosen by
the test), token (code + client secret + PKCE), userinfo and JWKS, with an RSA key made for the run. It signs
real RS256 ID tokens with PyJWT."""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa

CLIENT_ID = "gpuops"
CLIENT_SECRET = "client-secret"


@dataclass
class Provider:
    """The provider's state: who signs in next, their claims, and the key ID tokens are signed with."""

    base: str = ""
    user: dict[str, Any] = field(default_factory=dict)
    key: Any = field(default_factory=lambda: rsa.generate_private_key(public_exponent=65537, key_size=2048))
    signing_key: Any = None  # None: `key`; a test sets another key to forge a token
    audience: str = CLIENT_ID
    codes: dict[str, dict[str, Any]] = field(default_factory=dict)
    tokens: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def issuer(self) -> str:
        return self.base

    def env(self) -> dict[str, str]:
        return {
            "GPUOPS_OIDC_CLIENT_ID": CLIENT_ID,
            "GPUOPS_OIDC_CLIENT_SECRET": CLIENT_SECRET,
            "GPUOPS_OIDC_AUTHORIZATION_ENDPOINT": f"{self.base}/authorize",
            "GPUOPS_OIDC_TOKEN_ENDPOINT": f"{self.base}/token",
            "GPUOPS_OIDC_USERINFO_ENDPOINT": f"{self.base}/userinfo",
            "GPUOPS_OIDC_JWKS_ENDPOINT": f"{self.base}/jwks",
            "GPUOPS_OIDC_ISSUER": self.issuer,
        }

    def jwks(self) -> dict[str, Any]:
        jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self.key.public_key()))
        return {"keys": [{**jwk, "kid": "test-key", "alg": "RS256", "use": "sig"}]}

    def id_token(self, grant: dict[str, Any]) -> str:
        now = int(time.time())
        claims = {
            "iss": self.issuer,
            "sub": grant["claims"]["sub"],
            "aud": self.audience,
            "iat": now,
            "exp": now + 300,
            "nonce": grant["nonce"],
            **grant["claims"],
        }
        return jwt.encode(claims, self.signing_key or self.key, algorithm="RS256", headers={"kid": "test-key"})


def _handler(provider: Provider) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def _json(self, status: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            url = urlsplit(self.path)
            query = {k: v[0] for k, v in parse_qs(url.query).items()}
            if url.path == "/.well-known/openid-configuration":
                return self._json(
                    200,
                    {
                        "issuer": provider.issuer,
                        "authorization_endpoint": f"{provider.base}/authorize",
                        "token_endpoint": f"{provider.base}/token",
                        "userinfo_endpoint": f"{provider.base}/userinfo",
                        "jwks_uri": f"{provider.base}/jwks",
                        "id_token_signing_alg_values_supported": ["RS256"],
                    },
                )
            if url.path == "/jwks":
                return self._json(200, provider.jwks())
            if url.path == "/authorize":
                if query.get("client_id") != CLIENT_ID or query.get("response_type") != "code":
                    return self._json(400, {"error": "invalid_request"})
                code = secrets.token_urlsafe(16)
                provider.codes[code] = {
                    "claims": dict(provider.user),
                    "nonce": query.get("nonce"),
                    "redirect_uri": query["redirect_uri"],
                    "challenge": query.get("code_challenge"),
                }
                self.send_response(302)
                self.send_header(
                    "Location", f"{query['redirect_uri']}?{urlencode({'code': code, 'state': query['state']})}"
                )
                self.end_headers()
                return None
            if url.path == "/userinfo":
                token = self.headers.get("Authorization", "").removeprefix("Bearer ")
                if token not in provider.tokens:
                    return self._json(401, {"error": "invalid_token"})
                return self._json(200, provider.tokens[token])
            return self._json(404, {"error": "not_found"})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            form = {k: v[0] for k, v in parse_qs(self.rfile.read(length).decode()).items()}
            if urlsplit(self.path).path != "/token":
                return self._json(404, {"error": "not_found"})
            grant = provider.codes.pop(form.get("code", ""), None)
            if grant is None or form.get("client_secret") != CLIENT_SECRET or form.get("client_id") != CLIENT_ID:
                return self._json(400, {"error": "invalid_grant"})
            if form.get("redirect_uri") != grant["redirect_uri"]:
                return self._json(400, {"error": "invalid_grant"})
            if grant["challenge"]:
                digest = hashlib.sha256(form.get("code_verifier", "").encode()).digest()
                if base64.urlsafe_b64encode(digest).rstrip(b"=").decode() != grant["challenge"]:
                    return self._json(400, {"error": "invalid_grant", "error_description": "PKCE"})
            access = secrets.token_urlsafe(16)
            provider.tokens[access] = grant["claims"]
            return self._json(
                200,
                {
                    "access_token": access,
                    "token_type": "Bearer",
                    "expires_in": 300,
                    "id_token": provider.id_token(grant),
                },
            )

    return Handler


class ProviderServer:
    """Runs the provider on a free 127.0.0.1 port in a thread; `stop` ends it."""

    def __init__(self) -> None:
        self.provider = Provider()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self.provider))
        self.server.daemon_threads = True
        self.provider.base = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)

    def _serve(self) -> None:
        # A polling loop with a bounded join (no serve_forever/shutdown handshake to hang on).
        self.server.timeout = 0.1
        while not self._stop.is_set():
            self.server.handle_request()

    def start(self) -> Provider:
        self.thread.start()
        return self.provider

    def stop(self) -> None:
        self._stop.set()
        self.thread.join(timeout=5)
        self.server.server_close()
