#!/usr/bin/env python3
"""Client-side CPU of one streamed model call, per adapter: the adapter's request, the SDK's
HTTP, the stream's parse and the parts it makes, measured on the calling thread (the fake
provider runs on its own thread and is not counted). Each call streams `--deltas` text deltas
and one tool call from `tests/fake_llm_server.py` over real HTTP on 127.0.0.1.

    .venv/bin/python bench/provider_cpu_bench.py --kind openai_responses --calls 200
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import anyio
from tests.fake_llm_server import FakeLLMServer
from tests.provider_streams import Answer, Call, stream_reply

from soulwire.config.model import Config
from soulwire.llm.message import Message
from soulwire.llm.provider import ChatRequest, StreamResult
from soulwire.llm.registry import resolve_model


def main() -> None:
    parser = argparse.ArgumentParser(description="Client-side CPU of one streamed model call, per adapter.")
    kinds = ("openai_responses", "openai_legacy", "kimi", "anthropic")
    parser.add_argument("--kind", default="openai_responses", choices=kinds)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--deltas", type=int, default=200)
    args = parser.parse_args()
    answer = Answer(
        "r",
        text=[f"w{i} " for i in range(args.deltas)],
        calls=[Call(id="c1", name="Shell", args=['{"command":', ' "ls"}'])],
    )
    with FakeLLMServer() as server:
        base_url = server.url if args.kind == "anthropic" else server.url + "/v1"
        config = Config.model_validate(
            {
                "default_model": "m",
                "models": {"m": {"provider": "p", "model": "test-model"}},
                "providers": {"p": {"type": args.kind, "base_url": base_url, "api_key": "k"}},
            }
        )
        model = resolve_model(config, model_alias=None, thinking=None, env={})
        assert model is not None
        request = ChatRequest("sys", [Message(role="user", content="hi")])

        async def one() -> None:
            server.queue(stream_reply(args.kind, answer))
            async for _ in model.provider.stream(request, StreamResult()):
                pass

        async def run() -> float:
            for _ in range(20):  # warm: the SDK's imports, the client, the connection
                await one()
            started = time.thread_time()
            for _ in range(args.calls):
                await one()
            return (time.thread_time() - started) / args.calls * 1000

        per_call = anyio.run(run)
    print(f"{args.kind}: {per_call:.2f} ms of CPU per call ({args.deltas} text deltas and a tool call)")


if __name__ == "__main__":
    main()
