"""A session closes its providers' HTTP connections when it ends: its own model's, a
sub-agent's and one it switched to, each kept alive by the SDK's pool until then (a host of
many sessions, such as `soulwire acp`, would otherwise keep a socket per ended session)."""

from __future__ import annotations

from pathlib import Path

import anyio
from tests.fake_llm_server import FakeLLMServer
from tests.provider_streams import Answer, stream_reply

from soulwire.llm.message import Message
from soulwire.llm.provider import ChatRequest, StreamResult
from soulwire.llm.registry import ResolvedModel
from soulwire.runtime.builder import build_runtime
from soulwire.runtime.model_switch import switch_model
from soulwire.runtime.options import SessionOptions


def test_a_session_end_closes_every_provider_connection(tmp_path: Path) -> None:
    with FakeLLMServer() as server:
        provider = {"type": "openai_legacy", "base_url": server.url + "/v1", "api_key": "k"}
        raw = {
            "default_model": "main",
            "models": {"main": {"provider": "p", "model": "m1"}, "helper": {"provider": "p", "model": "m2"}},
            "providers": {"p": provider},
        }
        work = tmp_path / "work"
        work.mkdir()
        runtime = build_runtime(SessionOptions(work, tmp_path / "share", raw))
        assert runtime.models is not None and runtime.soul.model is not None
        used = [runtime.soul.model, runtime.models("helper")]  # its own, a sub-agent's
        switch_model(runtime, model="helper")  # a client's switch (Wire `set_model`, ACP's option)
        assert runtime.soul.model is not None and runtime.soul.model not in used
        used.append(runtime.soul.model)

        async def stream(model: ResolvedModel) -> None:
            server.queue(stream_reply("openai_legacy", Answer(message_id="m", text=["hi"])))
            request = ChatRequest("sys", [Message(role="user", content="hi")])
            assert [part async for part in model.provider.stream(request, StreamResult())]

        async def session() -> None:
            async with runtime.running():
                for model in used:
                    await stream(model)
                clients = {request.client for request in server.requests}
                assert len(clients) == len(used)  # one connection per provider, kept alive
                assert not any(server.wait_closed(client, timeout=0) for client in clients)

        try:
            anyio.run(session)
            for request in server.requests:  # (the runtime is still referenced: no finalizer ran)
                assert server.wait_closed(request.client), request
        finally:
            runtime.close()
