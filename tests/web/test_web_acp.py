"""ACP over WebSocket from a real browser page: headless Chromium on the server's own origin
opens `/acp` with the token as a query parameter (a browser cannot set headers on a
WebSocket), runs a turn and gets the streamed answer; without the token it is refused."""

from __future__ import annotations

from typing import Any

import pytest

from tests.web.browser import open_page
from tests.wire_client import add_echo_models

pytestmark = pytest.mark.browser

ACP_TURN = """async ([url, cwd]) => {
  const ws = new WebSocket(url);
  const texts = [];
  const waiting = new Map();
  let next = 0;
  ws.onmessage = (frame) => {
    const message = JSON.parse(frame.data);
    if (message.method === "session/update") {
      const update = message.params.update;
      if (update.sessionUpdate === "agent_message_chunk") texts.push(update.content.text);
    } else if (waiting.has(message.id)) {
      waiting.get(message.id)(message);
    }
  };
  const call = (method, params) => new Promise((resolve) => {
    const id = ++next;
    waiting.set(id, resolve);
    ws.send(JSON.stringify({jsonrpc: "2.0", id, method, params}));
  });
  await new Promise((resolve, reject) => { ws.onopen = resolve; ws.onerror = reject; });
  const init = await call("initialize", {protocolVersion: 1, clientCapabilities: {}});
  const created = await call("session/new", {cwd, mcpServers: []});
  const sessionId = created.result.sessionId;
  const reply = await call("session/prompt", {sessionId, prompt: [{type: "text", text: "hi"}]});
  ws.close();
  return {version: init.result.protocolVersion, stop: reply.result.stopReason, text: texts.join("")};
}"""

REFUSED = """async (url) => await new Promise((resolve) => {
  const ws = new WebSocket(url);
  ws.onopen = () => resolve("opened");
  ws.onerror = () => resolve("refused");
})"""


def test_a_browser_page_speaks_acp_with_the_token(chromium: Any, serve: Any) -> None:
    server = serve("text: hello, browser")
    web = open_page(chromium, server)
    url = f"ws://127.0.0.1:{server.port}/acp"
    result = web.page.evaluate(ACP_TURN, [f"{url}?token={server.token}", str(server.sandbox.work)])
    assert result == {"version": 1, "stop": "end_turn", "text": "hello, browser"}
    stranger = open_page(chromium, server, login=False)  # no login cookie: the token decides
    stranger.page.goto(f"{server.base}/web/login")
    assert stranger.page.evaluate(REFUSED, f"{url}?token=wrong") == "refused"
    assert stranger.page.evaluate(REFUSED, url) == "refused"
    assert stranger.page.evaluate(REFUSED, f"{url}?token={server.token}") == "opened"


def test_the_session_page_shows_a_model_another_client_switched(
    chromium: Any, serve: Any, sandbox: Any
) -> None:
    add_echo_models(sandbox)
    server = serve("text: unused")
    session_id = server.create_session()
    wire = server.ws(session_id)  # an editor's or the SDK's side: it controls the session
    wire.initialize(capabilities={"supports_model_switch": True})
    web = open_page(chromium, server)
    web.open_session(session_id)
    assert web.page.locator(".session-model").inner_text() == " · scripted"
    _, switched = wire.call("set_model", {"model": "echo"})
    assert switched["result"]["model"] == "echo"
    web.page.wait_for_function("() => document.querySelector('.session-model').textContent === ' · echo'")
    assert web.errors == []
