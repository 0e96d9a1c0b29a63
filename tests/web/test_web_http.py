"""The web app's server side without a browser: the login exchange (token → HttpOnly SameSite
cookie, out of the URL), the static app shell and its security headers, the cookie obeying the
same Host/Origin checks, the browser's endpoints, and `soulwire web` / `soulwire vis`."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from importlib import resources
from pathlib import Path

import httpx2
import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from soulwire.wire.environment import SERVER_TOKEN_ENV, SERVER_TOKEN_FILE
from tests.e2e.test_sandbox import needs_bwrap
from tests.server.serve_client import ServeProcess
from tests.wire_client import Sandbox

STATIC = resources.files("soulwire.server") / "static"


def login(server: ServeProcess) -> httpx2.Response:
    with httpx2.Client(base_url=server.base) as browser:  # its own cookie jar
        return browser.get(f"/web/login?token={server.token}&next=/web/%23/trace", follow_redirects=False)


def test_login_trades_the_token_for_an_httponly_samesite_cookie(serve):
    server = serve()
    response = login(server)
    assert response.status_code == 303
    assert response.headers["location"] == "/web/#/trace"  # the token is not carried on
    cookie = response.headers["set-cookie"]
    assert cookie.startswith(f"soulwire_token={server.token};")
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/" in cookie
    assert response.headers["referrer-policy"] == "no-referrer"
    # The cookie now authenticates the API (and the WebSocket, tested in the browser).
    jar = {"Cookie": f"soulwire_token={server.token}"}
    assert server.http.get("/api/sessions", headers=jar).status_code == 200
    assert server.http.get("/api/sessions").status_code == 401
    assert server.http.get("/api/sessions", headers={"Cookie": "soulwire_token=wrong"}).status_code == 401
    # …but not from another site, nor through another Host name (DNS rebinding).
    foreign = server.http.get("/api/sessions", headers={**jar, "Origin": "http://evil.example"})
    assert foreign.status_code == 403
    rebound = server.http.get("/api/sessions", headers={**jar, "Host": f"evil.example:{server.port}"})
    assert rebound.status_code == 403


def test_a_wrong_token_or_an_off_site_next_gets_nowhere(serve):
    server = serve()
    wrong = server.http.get("/web/login?token=nope", follow_redirects=False)
    assert wrong.status_code == 401 and "set-cookie" not in wrong.headers
    with httpx2.Client(base_url=server.base) as fresh:
        off_site = fresh.get(
            f"/web/login?token={server.token}&next=https://evil.example/", follow_redirects=False
        )
        assert off_site.headers["location"] == "/web/"
        # The URL `soulwire serve` prints (`/?token=…`) works in a browser too; API clients still get JSON.
        browser = fresh.get(
            f"/?token={server.token}", headers={"Accept": "text/html"}, follow_redirects=False
        )
    assert browser.status_code == 303 and browser.headers["location"] == "/web/"
    assert server.api("GET", "/").json()["name"] == "soulwire"


def test_the_app_shell_is_static_with_a_strict_csp_and_nothing_from_elsewhere(serve):
    server = serve()
    page = server.http.get("/web/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    csp = page.headers["content-security-policy"]
    assert "default-src 'none'" in csp and "script-src 'self'" in csp and "unsafe" not in csp
    assert "frame-ancestors 'none'" in csp and f"ws://127.0.0.1:{server.port}" in csp
    assert page.headers["x-content-type-options"] == "nosniff"
    script = server.http.get("/web/js/main.js")
    assert script.headers["content-type"].startswith("text/javascript")
    for path in ("/web/nope.js", "/web/../app.py", "/web/.hidden", "/web/js/%2e%2e/app.css"):
        assert server.http.get(path).status_code in (401, 404), path  # never the file
    assert server.http.get("/web/", headers={"Host": "evil.example"}).status_code == 403


def test_every_asset_is_packaged_and_every_import_resolves_offline():
    files = {p.name for p in STATIC.iterdir()} | {f"js/{p.name}" for p in (STATIC / "js").iterdir()}
    assert {"index.html", "app.css", "js/main.js"} <= files
    for name in files:
        if not name.endswith((".js", ".html", ".css")):
            continue
        text = (STATIC / name).read_text()
        assert not re.search(r"(src|href)=[\"']?https?:", text), f"{name} loads from the network"
        assert "innerHTML" not in text and "insertAdjacentHTML" not in text and "eval(" not in text, name
        for target in re.findall(r"from '\./([\w.]+)'", text):
            assert f"js/{target}" in files, f"{name} imports a missing {target}"


def test_records_search_work_dirs_config_uploads_and_diff(serve, sandbox):
    server = serve("text: the quick brown fox")
    session_id = server.create_session(title="First")
    ws = server.ws(session_id)
    ws.call("prompt", {"user_input": "tell me about foxes"})
    ws.close()
    records = server.api("GET", f"/api/sessions/{session_id}/records").json()
    assert records["total"] == len(records["records"]) > 3
    assert all(isinstance(r["timestamp"], float) for r in records["records"])
    assert records["records"][0]["message"]["type"] == "TurnBegin"
    assert (
        server.api("GET", f"/api/sessions/{session_id}/records?since=1&limit=1").json()["records"][0][
            "message"
        ]["type"]
        == "StepBegin"
    )
    hits = server.api("GET", "/api/web/search?q=BROWN").json()
    assert [(h["id"], h["match"]) for h in hits] == [(session_id, "text")]
    assert "quick brown fox" in hits[0]["snippet"]
    assert [h["match"] for h in server.api("GET", "/api/web/search?q=firs").json()] == ["title"]
    assert server.api("GET", "/api/web/search?q=").status_code == 422
    dirs = server.api("GET", "/api/web/work-dirs").json()
    assert dirs["default"] == str(sandbox.work) and str(sandbox.work) in dirs["recent"]

    config = server.api("GET", "/api/web/config").json()
    assert config["path"] == str(sandbox.config_path) and config["format"] == "json"
    bad = server.api("PUT", "/api/web/config", json={"text": '{"default_model": 5}'})
    assert bad.status_code == 422 and "default_model" in bad.json()["detail"]
    assert json.loads(sandbox.config_path.read_text())["default_model"] == "scripted"  # untouched
    changed = json.loads(config["text"]) | {"default_model": "scripted"}
    changed["loop_control"] = {"max_steps_per_turn": 7}
    saved = server.api("PUT", "/api/web/config", json={"text": json.dumps(changed)})
    assert saved.status_code == 200
    assert json.loads(sandbox.config_path.read_text())["loop_control"]["max_steps_per_turn"] == 7

    upload = server.api("POST", f"/api/sessions/{session_id}/uploads?name=../../notes.txt", content=b"hello")
    assert upload.status_code == 201
    path = Path(upload.json()["path"])
    assert path.name == "notes.txt" and path.parent.name == "uploads" and path.read_bytes() == b"hello"
    again = server.api("POST", f"/api/sessions/{session_id}/uploads?name=notes.txt", content=b"x").json()
    assert again["name"] == "notes-2.txt"
    assert server.api("POST", "/api/sessions/nope/uploads?name=a", content=b"x").status_code == 404

    assert server.api("GET", f"/api/sessions/{session_id}/git-diff").json() == {
        "repo": False,
        "status": "",
        "diff": "",
        "truncated": False,
    }
    git = ["git", "-C", str(sandbox.work), "-c", "user.name=t", "-c", "user.email=t@t"]
    (sandbox.work / "a.txt").write_text("one\n")
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "a.txt"], check=True)
    subprocess.run([*git, "commit", "-qm", "first"], check=True)
    (sandbox.work / "a.txt").write_text("two\n")
    diff = server.api("GET", f"/api/sessions/{session_id}/git-diff").json()
    assert diff["repo"] and " M a.txt" in diff["status"] and "-one\n+two" in diff["diff"]


@needs_bwrap
def test_the_git_diff_runs_nothing_the_work_dirs_git_config_names_outside_a_sandbox(serve, sandbox):
    """`.git/config` is in the workspace: a sandboxed agent may write it. The server's own
    git must not run the filters, hooks or monitors it names with the server's rights."""
    server = serve()
    session_id = server.create_session()
    git = ["git", "-C", str(sandbox.work), "-c", "user.name=t", "-c", "user.email=t@t"]
    (sandbox.work / "a.txt").write_text("one\n")
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "a.txt"], check=True)
    subprocess.run([*git, "commit", "-qm", "first"], check=True)
    marker = sandbox.root / "escaped"
    for key, value in (
        ("filter.evil.clean", f"sh -c 'echo filter >> {marker}; cat'"),
        ("diff.evil.textconv", f"sh -c 'echo textconv >> {marker}; cat \"$0\"'"),
        ("core.fsmonitor", f"sh -c 'echo fsmonitor >> {marker}'"),
    ):
        subprocess.run([*git, "config", key, value], check=True)
    (sandbox.work / ".gitattributes").write_text("*.txt filter=evil diff=evil\n")
    (sandbox.work / "a.txt").write_text("two\n")
    diff = server.api("GET", f"/api/sessions/{session_id}/git-diff").json()
    assert diff["repo"] and "-one\n+two" in diff["diff"]
    assert not marker.exists(), marker.read_text()


def test_open_in_editor_runs_the_configured_command_inside_the_work_dir_only(serve, sandbox, monkeypatch):
    marker = sandbox.root / "opened.txt"
    command = f"sh -c 'echo \"$0\" > {marker}' {{location}}"
    plain_env = sandbox.env
    monkeypatch.setattr(sandbox, "env", lambda: {**plain_env(), "SOULWIRE_OPEN_COMMAND": command})
    server = serve()
    session_id = server.create_session()
    (sandbox.work / "main.py").write_text("print(1)\n")
    assert (
        server.api(
            "POST", f"/api/sessions/{session_id}/open", json={"path": "main.py", "line": 3}
        ).status_code
        == 204
    )
    # the shell creates the file before `echo` writes its line: wait for the whole line
    deadline = time.monotonic() + 30
    while not (marker.exists() and marker.read_text().endswith("\n")):
        assert time.monotonic() < deadline, "the open command did not run"
        time.sleep(0.05)
    assert marker.read_text().strip() == f"{sandbox.work / 'main.py'}:3"
    for outside in ("../config.json", "/etc/passwd", "missing.py"):
        assert (
            server.api("POST", f"/api/sessions/{session_id}/open", json={"path": outside}).status_code == 404
        )


def test_soulwire_web_reuses_a_running_server_and_vis_checks_the_session(serve, sandbox):
    server = serve()
    session_id = server.create_session()
    base = [sys.executable, "-m", "soulwire"]
    listen = ("--listen", f"127.0.0.1:{server.port}", "--no-browser")
    web = subprocess.run(
        [*base, "web", *listen], env=sandbox.env(), capture_output=True, text=True, timeout=30
    )
    assert web.returncode == 0, web.stderr
    url = re.search(r"open (http://\S+)", web.stderr).group(1)
    assert url.startswith(f"{server.base}/web/login?token=")
    assert httpx2.get(url, follow_redirects=False).headers["location"] == "/web/"
    vis = subprocess.run(
        [*base, "vis", session_id, *listen], env=sandbox.env(), capture_output=True, text=True, timeout=30
    )
    assert vis.returncode == 0, vis.stderr
    vis_url = re.search(r"open (http://\S+)", vis.stderr).group(1)
    assert httpx2.get(vis_url, follow_redirects=False).headers["location"] == f"/web/#/trace/{session_id}"
    missing = subprocess.run(
        [*base, "vis", "no-such-session", *listen],
        env=sandbox.env(),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert missing.returncode == 2 and "no session 'no-such-session'" in missing.stderr
    bad = subprocess.run(
        [*base, "vis", "../x", *listen], env=sandbox.env(), capture_output=True, text=True, timeout=30
    )
    assert bad.returncode == 2 and "Traceback" not in bad.stderr


def test_soulwire_web_starts_a_server_when_none_runs(sandbox):
    sandbox.write()
    argv = [sys.executable, "-m", "soulwire", "web", "--listen", "127.0.0.1:0", "--no-browser",
            "--config-file", str(sandbox.config_path), "--work-dir", str(sandbox.work)]  # fmt: skip
    proc = subprocess.Popen(
        argv, env=sandbox.env(), stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True
    )
    try:
        assert proc.stderr is not None
        url = None
        for line in proc.stderr:
            found = re.search(r"open (http://\S+)", line)
            if found:
                url = found.group(1)
                break
        assert url is not None
        response = httpx2.get(url, follow_redirects=False, timeout=10)
        assert response.status_code == 303 and "soulwire_token=" in response.headers["set-cookie"]
        assert response.headers["location"].startswith("/web/#/new?work_dir=")
    finally:
        proc.send_signal(2)
        assert proc.wait(timeout=20) == 0


def test_soulwire_web_moves_to_a_free_port_when_the_address_is_taken(serve, sandbox):
    other = serve()  # a server whose token this share dir does not have
    (sandbox.share / SERVER_TOKEN_FILE).write_text("a-different-token-than-the-servers\n")
    argv = [sys.executable, "-m", "soulwire", "web", "--listen", f"127.0.0.1:{other.port}", "--no-browser",
            "--config-file", str(sandbox.config_path), "--work-dir", str(sandbox.work)]  # fmt: skip
    env = {**sandbox.env(), SERVER_TOKEN_ENV: "another-token-of-16+chars"}
    proc = subprocess.Popen(argv, env=env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    try:
        assert proc.stderr is not None
        lines = []
        for line in proc.stderr:
            lines.append(line)
            if "open http" in line:
                break
        assert any("is taken; starting on a free port" in line for line in lines), lines
        url = re.search(r"open (http://\S+)", lines[-1]).group(1)
        assert f":{other.port}/" not in url
        assert httpx2.get(url, follow_redirects=False, timeout=10).status_code == 303
    finally:
        proc.send_signal(2)
        assert proc.wait(timeout=20) == 0


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_soulwire_web_stops_with_its_server_also_when_started_with_sigint_ignored(sandbox: Sandbox, sig: int):
    # As a background job of a non-interactive shell (`pytest &` in a script) is: Python then
    # raised no KeyboardInterrupt, and `web` and its `serve` ran on; SIGTERM orphaned `serve`.
    sandbox.write()
    argv = ["sh", "-c", 'trap "" INT; exec "$0" "$@"', sys.executable, "-m", "soulwire", "web",
            "--listen", "127.0.0.1:0", "--no-browser", "--config-file", str(sandbox.config_path),
            "--work-dir", str(sandbox.work)]  # fmt: skip
    proc = subprocess.Popen(
        argv, env=sandbox.env(), stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True
    )
    serve = []
    try:
        assert proc.stderr is not None
        url = next(found.group(1) for line in proc.stderr if (found := re.search(r"open (http://\S+)", line)))
        assert httpx2.get(url, follow_redirects=False, timeout=10).status_code == 303  # serving
        serve = [int(pid) for pid in Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()]
        assert len(serve) == 1
        proc.send_signal(sig)
        assert proc.wait(timeout=20) == 0
        assert not Path(f"/proc/{serve[0]}").exists()  # ended, and reaped by `web`
        assert "Traceback" not in proc.stderr.read()
    finally:
        for pid in [*serve, proc.pid]:
            if Path(f"/proc/{pid}").exists():
                os.kill(pid, signal.SIGKILL)
        proc.wait()


def test_a_killed_soulwire_web_leaves_no_server_behind(sandbox: Sandbox):
    # Its server runs in a session of its own (a terminal's Ctrl-C reaches `web` only, which
    # passes it on once) and holds a pipe from `web`: SIGKILL, which `web` cannot pass on,
    # still ends it.
    sandbox.write()
    argv = [sys.executable, "-m", "soulwire", "web", "--listen", "127.0.0.1:0", "--no-browser",
            "--config-file", str(sandbox.config_path), "--work-dir", str(sandbox.work)]  # fmt: skip
    proc = subprocess.Popen(
        argv, env=sandbox.env(), stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True
    )
    serve: list[int] = []
    try:
        assert proc.stderr is not None
        next(line for line in proc.stderr if "open http" in line)
        serve = [int(pid) for pid in Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()]
        assert len(serve) == 1 and os.getsid(serve[0]) != os.getsid(proc.pid)
        proc.kill()
        proc.wait()
        deadline = time.monotonic() + 15
        while Path(f"/proc/{serve[0]}").exists() and b"zombie" not in _state(serve[0]):
            assert time.monotonic() < deadline, "the server outlived `soulwire web`"
            time.sleep(0.05)
    finally:
        for pid in [*serve, proc.pid]:
            if Path(f"/proc/{pid}").exists():
                os.kill(pid, signal.SIGKILL)
        proc.wait()


def _state(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/status").read_bytes().lower()
    except OSError:
        return b"zombie"


def test_the_cookie_opens_the_websocket_from_this_origin_only(serve):
    server = serve()
    session = server.create_session()
    url = f"ws://127.0.0.1:{server.port}/ws/sessions/{session}"
    cookie = {"Cookie": f"soulwire_token={server.token}"}
    with connect(url, origin=f"http://127.0.0.1:{server.port}", additional_headers=cookie) as ws:  # type: ignore[arg-type]
        ws.send(json.dumps({"jsonrpc": "2.0", "id": "r1", "method": "approvals/rules/list"}))
        assert json.loads(ws.recv(timeout=10)) == {"jsonrpc": "2.0", "id": "r1", "result": {"rules": []}}
    with pytest.raises(InvalidStatus) as cross:  # cross-site WebSocket hijacking
        connect(url, origin="http://evil.example", additional_headers=cookie)  # type: ignore[arg-type]
    assert cross.value.response.status_code == 403
    with pytest.raises(InvalidStatus) as wrong:
        connect(url, additional_headers={"Cookie": "soulwire_token=nope"})
    assert wrong.value.response.status_code == 401
