"""`soulwire login` / `soulwire logout`.

Without `--provider`, login is the reference platform's OAuth device flow (Kimi Code): the
user opens a verification URL, the token lands in `<share>/credentials/kimi-code.json` (0600),
and the default config gets the managed provider, its models and the search/fetch services,
all naming the token by `oauth = {storage = "file", key = "oauth/kimi-code"}` (the token itself
is never written to the config). With `--provider` it is a guided setup for an API-key
provider: provider, key and model are asked for (or given as flags), the key is checked with
one cheap call (the provider's model list), and a working config is written.

Endpoints: the OAuth host is `SOULWIRE_OAUTH_HOST` (config/credentials.py); the platform's API
is `SOULWIRE_CODE_BASE_URL` (or the reference's `KIMI_CODE_BASE_URL`)."""

from __future__ import annotations

import argparse
import getpass
import json
import os
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from soulwire import __version__
from soulwire.cli.config_edit import default_config_path, load_document, save_document, table
from soulwire.config import credentials
from soulwire.config.loader import share_dir
from soulwire.usage import CommandFailed, CommandParser

PLATFORM_ID = "kimi-code"
MANAGED_PROVIDER = f"managed:{PLATFORM_ID}"
DEFAULT_CODE_BASE_URL = "https://api.kimi.com/coding/v1"
DEVICE_GRANT = "urn:ietf:params:oauth:grant-type:device_code"
HTTP_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class KeyProvider:
    """A provider of the guided setup: its config `type`, default base URL and key check."""

    type: str
    base_url: str
    models_path: str = "/models"
    anthropic_auth: bool = False


PROVIDERS: dict[str, KeyProvider] = {
    "moonshot-ai": KeyProvider("kimi", "https://api.moonshot.ai/v1"),
    "moonshot-cn": KeyProvider("kimi", "https://api.moonshot.cn/v1"),
    "openai": KeyProvider("openai_legacy", "https://api.openai.com/v1"),
    "anthropic": KeyProvider("anthropic", "https://api.anthropic.com", "/v1/models", anthropic_auth=True),
    "gemini": KeyProvider("gemini", "https://generativelanguage.googleapis.com/v1beta/openai"),
    "openai-compatible": KeyProvider("openai_legacy", ""),
}


class LoginFailed(CommandFailed):
    """One line for the user; the command exits 1."""


_Parser = CommandParser  # one-line usage errors (exit 2) and examples in --help, as every command


def _login_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="soulwire login",
        description=(
            "Log in. Without --provider: the Kimi Code OAuth device flow (open the URL shown, "
            "confirm, done). With --provider: set up an API-key provider; what is not given as a "
            "flag is asked for, and the key is checked with one call before the config is written."
        ),
        epilog=(
            "examples:\n  soulwire login\n"
            "  soulwire login --provider openai --api-key sk-... --model gpt-4.1\n"
            "  soulwire login --provider openai-compatible --base-url http://127.0.0.1:8000/v1 "
            "--api-key x --model m"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--json", action="store_true", help="emit events as JSON lines")
    parser.add_argument("--provider", choices=sorted(PROVIDERS), help="set up this API-key provider")
    parser.add_argument("--api-key", help="the provider's API key (else asked, or $SOULWIRE_LOGIN_API_KEY)")
    parser.add_argument("--model", help="the model id to use by default (else asked)")
    parser.add_argument("--base-url", help="the provider's API base URL (needed for openai-compatible)")
    parser.add_argument("--no-browser", action="store_true", help="do not open the verification URL")
    return parser


class _Events:
    """Progress as text lines, or as the reference's JSON events (`{type, message, data?}`)."""

    def __init__(self, as_json: bool) -> None:
        self.as_json = as_json

    def __call__(self, kind: str, message: str, data: dict[str, Any] | None = None) -> None:
        if self.as_json:
            payload: dict[str, Any] = {"type": kind, "message": message}
            if data is not None:
                payload["data"] = data
            print(json.dumps(payload, ensure_ascii=False), flush=True)
        else:
            stream = sys.stderr if kind == "error" else sys.stdout
            print(message, file=stream, flush=True)


def run_login(argv: list[str]) -> int:
    args = _login_parser().parse_args(argv)
    emit = _Events(args.json)
    share = share_dir()
    try:
        if args.provider is None and not args.json and sys.stdin.isatty() and sys.stdout.isatty():
            args.provider = _choose_provider()
        if args.provider is None:
            _device_login(share, emit, open_browser=not args.no_browser)
        else:
            _key_login(share, emit, args)
    except LoginFailed as exc:
        emit("error", f"Login failed: {exc}")
        return 1
    except KeyboardInterrupt:
        emit("error", "Login cancelled.")
        return 130
    return 0


def run_logout(argv: list[str]) -> int:
    parser = _Parser(
        prog="soulwire logout",
        description="Log out of Kimi Code: forget the token and the managed config.",
        examples=["soulwire logout", "soulwire logout --json"],
    )
    parser.add_argument("--json", action="store_true", help="emit events as JSON lines")
    args = parser.parse_args(argv)
    emit = _Events(args.json)
    share = share_dir()
    credentials.delete_token(credentials.PLATFORM_KEY, share)
    path = default_config_path(share)
    if path.is_file():
        document = load_document(path)
        _remove_managed(document)
        save_document(path, document)
    emit("success", "Logged out successfully.")
    return 0


# ------------------------------------------------------------------ device flow


def _device_login(share: Path, emit: _Events, *, open_browser: bool) -> None:
    import httpx2

    host = credentials.oauth_host()
    headers = _platform_headers(share)
    with httpx2.Client(timeout=HTTP_TIMEOUT_S, headers=headers) as client:
        grant = _post_form(
            client, f"{host}/api/oauth/device_authorization", {"client_id": credentials.CLIENT_ID}
        )
        if "device_code" not in grant or "verification_uri_complete" not in grant:
            raise LoginFailed(f"unexpected device authorization answer: {grant}")
        url = str(grant["verification_uri_complete"])
        emit("info", "Please visit the following URL to finish authorization.")
        emit(
            "verification_url",
            f"Verification URL: {url}",
            {"verification_url": url, "user_code": str(grant.get("user_code", ""))},
        )
        if open_browser:
            _open_browser(url)
        token = _poll_token(client, host, grant, emit)
        credentials.save_token(credentials.PLATFORM_KEY, token, share)
        base_url = _code_base_url()
        models = _list_models(client, base_url, {"Authorization": f"Bearer {token.access_token}"})
    if not models:
        raise LoginFailed("no models are available for this account")
    path = default_config_path(share)
    document = load_document(path)
    _apply_managed(document, base_url, models)
    save_document(path, document)
    emit(
        "success",
        "Logged in successfully.",
        {"config": str(path), "default_model": document["default_model"]},
    )


def _poll_token(client: Any, host: str, grant: dict[str, Any], emit: _Events) -> credentials.Token:
    interval = max(int(grant.get("interval") or 5), 1)
    deadline = time.monotonic() + int(grant.get("expires_in") or 900)
    told = False
    form = {
        "client_id": credentials.CLIENT_ID,
        "device_code": str(grant["device_code"]),
        "grant_type": DEVICE_GRANT,
    }
    while time.monotonic() < deadline:
        response = client.post(f"{host}/api/oauth/token", data=form)
        data = _json(response)
        if response.status_code == 200 and "access_token" in data:
            try:
                return credentials.Token.from_response(data)
            except credentials.CredentialsError as exc:
                raise LoginFailed(str(exc)) from None
        error = str(data.get("error") or f"HTTP {response.status_code}")
        if error == "slow_down":
            interval += 5
        elif error != "authorization_pending":
            raise LoginFailed(str(data.get("error_description") or error))
        if not told:
            why = str(data.get("error_description") or "")
            emit("waiting", f"Waiting for user authorization...: {why}".rstrip(": "), {"error": error})
            told = True
        time.sleep(interval)
    raise LoginFailed("the device code expired before it was confirmed; run `soulwire login` again")


def _apply_managed(document: Any, base_url: str, models: list[dict[str, Any]]) -> None:
    oauth = {"storage": "file", "key": credentials.PLATFORM_KEY}
    _remove_managed(document, keep_services=True)
    table(document, "providers")[MANAGED_PROVIDER] = {
        "type": "kimi",
        "base_url": base_url,
        "api_key": "",
        "oauth": oauth,
    }
    aliases = table(document, "models")
    for info in models:
        entry: dict[str, Any] = {
            "provider": MANAGED_PROVIDER,
            "model": str(info["id"]),
            "max_context_size": int(info.get("context_length") or 262_144),
        }
        capabilities = _capabilities(info)
        if capabilities:
            entry["capabilities"] = capabilities
        if info.get("display_name"):
            entry["display_name"] = str(info["display_name"])
        aliases[f"{PLATFORM_ID}/{info['id']}"] = entry
    first = models[0]
    document["default_model"] = f"{PLATFORM_ID}/{first['id']}"
    document["default_thinking"] = "thinking" in _capabilities(first)
    services = table(document, "services")
    services["moonshot_search"] = {"base_url": f"{base_url}/search", "api_key": "", "oauth": oauth}
    services["moonshot_fetch"] = {"base_url": f"{base_url}/fetch", "api_key": "", "oauth": oauth}


def _remove_managed(document: Any, *, keep_services: bool = False) -> None:
    providers = document.get("providers") or {}
    providers.pop(MANAGED_PROVIDER, None)
    models = document.get("models") or {}
    for alias in [
        a for a, m in models.items() if isinstance(m, dict) and m.get("provider") == MANAGED_PROVIDER
    ]:
        del models[alias]
        if document.get("default_model") == alias:
            document["default_model"] = ""
    if not keep_services:
        services = document.get("services") or {}
        for name in ("moonshot_search", "moonshot_fetch"):
            entry = services.get(name)
            if isinstance(entry, dict) and entry.get("oauth"):
                del services[name]


def _capabilities(info: dict[str, Any]) -> list[str]:
    """The reference's reading of the model list: reasoning → thinking, `thinking` in the name
    → always thinking, image and video input flags."""
    caps: list[str] = []
    model_id = str(info.get("id", "")).lower()
    if info.get("supports_reasoning") or "thinking" in model_id or model_id.startswith("kimi-k2"):
        caps.append("thinking")
    if "thinking" in model_id:
        caps.append("always_thinking")
    if info.get("supports_image_in") or model_id.startswith("kimi-k2"):
        caps.append("image_in")
    if info.get("supports_video_in") or model_id.startswith("kimi-k2"):
        caps.append("video_in")
    return caps


def _code_base_url() -> str:
    for name in ("SOULWIRE_CODE_BASE_URL", "KIMI_CODE_BASE_URL"):
        if os.environ.get(name):
            return os.environ[name].rstrip("/")
    return DEFAULT_CODE_BASE_URL


def _platform_headers(share: Path) -> dict[str, str]:
    return {
        "X-Msh-Platform": "soulwire",
        "X-Msh-Version": __version__,
        "X-Msh-Device-Id": _device_id(share),
        "User-Agent": f"soulwire/{__version__}",
    }


def _device_id(share: Path) -> str:
    path = share / "device_id"
    try:
        return path.read_text(encoding="utf-8").strip()
    except OSError:
        device = uuid.uuid4().hex
        share.mkdir(parents=True, exist_ok=True)
        path.write_text(device, encoding="utf-8")
        os.chmod(path, 0o600)
        return device


def _open_browser(url: str) -> None:
    import webbrowser

    try:
        webbrowser.open(url)
    except Exception:  # no browser here: the URL was printed
        pass


# ------------------------------------------------------------------ API-key providers


def _key_login(share: Path, emit: _Events, args: argparse.Namespace) -> None:
    import httpx2

    name: str = args.provider
    provider = PROVIDERS[name]
    base_url = (args.base_url or provider.base_url or _ask("Base URL of the API: ")).rstrip("/")
    key = (
        args.api_key or os.environ.get("SOULWIRE_LOGIN_API_KEY") or _ask(f"API key for {name}: ", secret=True)
    )
    headers = (
        {"x-api-key": key, "anthropic-version": "2023-06-01"}
        if provider.anthropic_auth
        else {"Authorization": f"Bearer {key}"}
    )
    emit("info", f"Checking the key with {base_url}{provider.models_path} ...")
    with httpx2.Client(timeout=HTTP_TIMEOUT_S) as client:
        models = _list_models(client, base_url, headers, path=provider.models_path)
    model = args.model or _choose_model([str(m["id"]) for m in models if m.get("id")])
    info = next((m for m in models if m.get("id") == model), {})
    path = default_config_path(share)
    document = load_document(path)
    entry: dict[str, Any] = {"type": provider.type, "api_key": key}
    if base_url != provider.base_url or name == "openai-compatible":
        entry["base_url"] = base_url
    else:
        entry["base_url"] = provider.base_url
    table(document, "providers")[name] = entry
    model_entry: dict[str, Any] = {"provider": name, "model": model}
    if info.get("context_length"):
        model_entry["max_context_size"] = int(info["context_length"])
    table(document, "models")[f"{name}/{model}"] = model_entry
    document["default_model"] = f"{name}/{model}"
    save_document(path, document)
    emit("success", f"Saved {name}/{model} as the default model in {path}.", {"config": str(path)})


def _list_models(
    client: Any, base_url: str, headers: dict[str, str], *, path: str = "/models"
) -> list[dict[str, Any]]:
    """The provider's model list: the one cheap call that proves the key works."""
    import httpx2

    url = f"{base_url.rstrip('/')}{path}"
    try:
        response = client.get(url, headers=headers)
    except httpx2.HTTPError as exc:
        raise LoginFailed(f"cannot reach {url}: {exc}") from None
    if response.status_code in (401, 403):
        raise LoginFailed(f"the key was refused by {url} (HTTP {response.status_code})")
    if response.status_code != 200:
        raise LoginFailed(f"{url} answered HTTP {response.status_code}")
    data = _json(response).get("data")
    if not isinstance(data, list):
        raise LoginFailed(f"unexpected model list from {url}")
    return [m for m in data if isinstance(m, dict)]


MENU = ("moonshot-ai", "moonshot-cn", "openai", "anthropic", "gemini", "openai-compatible")


def _choose_provider() -> str | None:
    """In a terminal without --provider: which provider to set up (None: Kimi Code's login)."""
    print("Which provider?")
    print("  1. Kimi Code (log in with the browser)")
    for number, name in enumerate(MENU, 2):
        print(f"  {number}. {name} (API key)")
    answer = _ask("Provider [1]: ", allow_empty=True) or "1"
    if answer.isdigit() and 1 <= int(answer) <= len(MENU) + 1:
        return None if answer == "1" else MENU[int(answer) - 2]
    if answer in PROVIDERS:
        return answer
    raise LoginFailed(f"unknown provider {answer!r}")


def _choose_model(ids: list[str]) -> str:
    if not sys.stdin.isatty():
        raise LoginFailed("--model is needed when not run in a terminal")
    for number, model in enumerate(ids[:30], 1):
        print(f"  {number}. {model}")
    answer = _ask("Model (number or id): ")
    if answer.isdigit() and 1 <= int(answer) <= min(len(ids), 30):
        return ids[int(answer) - 1]
    return answer


def _ask(prompt: str, *, secret: bool = False, allow_empty: bool = False) -> str:
    if not sys.stdin.isatty():
        raise LoginFailed(
            f"{prompt.strip().rstrip(':')} is needed (give it as a flag when not in a terminal)"
        )
    value = (getpass.getpass(prompt) if secret else input(prompt)).strip()
    if not value and not allow_empty:
        raise LoginFailed(f"{prompt.strip().rstrip(':')} is empty")
    return value


def _post_form(client: Any, url: str, form: dict[str, str]) -> dict[str, Any]:
    import httpx2

    try:
        response = client.post(url, data=form)
    except httpx2.HTTPError as exc:
        raise LoginFailed(f"cannot reach {url}: {exc}") from None
    data = _json(response)
    if response.status_code != 200:
        raise LoginFailed(str(data.get("error_description") or f"{url} answered HTTP {response.status_code}"))
    return data


def _json(response: Any) -> dict[str, Any]:
    try:
        data = response.json()
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}
