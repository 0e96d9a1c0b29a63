"""An MCP server on 127.0.0.1 that is also its own OAuth authorization server (the official
SDK's server auth: metadata, dynamic client registration, /authorize, /token), for the tests of
`soulwire mcp auth` and of sessions using the tokens.

Run as `python oauth_server.py PORT LOGFILE`. The user "approves" at once: /authorize redirects
straight back to the client's redirect URI with a code. Access tokens live `TOKEN_SECONDS`; every
token endpoint call is appended to LOGFILE (`code` or `refresh`) so a test can see refreshes."""

from __future__ import annotations

import secrets
import sys
import time
from pathlib import Path

from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    RefreshToken,
    construct_redirect_uri,
)
from mcp.server.auth.settings import AuthSettings, ClientRegistrationOptions
from mcp.server.mcpserver import MCPServer
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

PORT = int(sys.argv[1])
LOG = sys.argv[2]
BASE = f"http://127.0.0.1:{PORT}"
TOKEN_SECONDS = 3600


def log(event: str) -> None:
    with Path(LOG).open("a", encoding="utf-8") as handle:
        handle.write(event + "\n")


class InstantApproval:
    """In-memory clients, codes and tokens; every authorization request is approved."""

    def __init__(self) -> None:
        self.clients: dict[str, OAuthClientInformationFull] = {}
        self.codes: dict[str, AuthorizationCode] = {}
        self.refresh: dict[str, RefreshToken] = {}
        self.access: dict[str, AccessToken] = {}

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        return self.clients.get(client_id)

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        assert client_info.client_id is not None
        self.clients[client_info.client_id] = client_info

    async def authorize(self, client: OAuthClientInformationFull, params: AuthorizationParams) -> str:
        code = secrets.token_hex(8)
        self.codes[code] = AuthorizationCode(
            code=code,
            scopes=params.scopes or [],
            expires_at=time.time() + 300,
            client_id=str(client.client_id),
            code_challenge=params.code_challenge,
            redirect_uri=params.redirect_uri,
            redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly,
            resource=params.resource,
        )
        return construct_redirect_uri(str(params.redirect_uri), code=code, state=params.state)

    async def load_authorization_code(self, client: OAuthClientInformationFull, authorization_code: str):
        return self.codes.get(authorization_code)

    def _issue(self, client_id: str, scopes: list[str]) -> OAuthToken:
        access, refresh = secrets.token_hex(8), secrets.token_hex(8)
        self.access[access] = AccessToken(
            token=access, client_id=client_id, scopes=scopes, expires_at=int(time.time()) + TOKEN_SECONDS
        )
        self.refresh[refresh] = RefreshToken(token=refresh, client_id=client_id, scopes=scopes)
        return OAuthToken(
            access_token=access,
            token_type="Bearer",
            expires_in=TOKEN_SECONDS,
            refresh_token=refresh,
            scope=" ".join(scopes) or None,
        )

    async def exchange_authorization_code(self, client: OAuthClientInformationFull, authorization_code):
        self.codes.pop(authorization_code.code, None)
        log("code")
        return self._issue(str(client.client_id), authorization_code.scopes)

    async def load_refresh_token(self, client: OAuthClientInformationFull, refresh_token: str):
        return self.refresh.get(refresh_token)

    async def exchange_refresh_token(self, client: OAuthClientInformationFull, refresh_token, scopes):
        self.refresh.pop(refresh_token.token, None)
        log("refresh")
        return self._issue(str(client.client_id), scopes or refresh_token.scopes)

    async def load_access_token(self, token: str) -> AccessToken | None:
        found = self.access.get(token)
        if found is None or (found.expires_at and found.expires_at < time.time()):
            return None
        return found

    async def revoke_token(self, token) -> None:
        self.access.pop(getattr(token, "token", ""), None)


server = MCPServer(
    "guarded",
    auth_server_provider=InstantApproval(),
    auth=AuthSettings(
        issuer_url=BASE,
        resource_server_url=f"{BASE}/mcp",
        validate_token_resource=False,
        client_registration_options=ClientRegistrationOptions(enabled=True),
    ),
)


@server.tool(description="Say who is allowed in.")
def whoami() -> str:
    return "an authorized client"


if __name__ == "__main__":
    server.run("streamable-http", host="127.0.0.1", port=PORT)
