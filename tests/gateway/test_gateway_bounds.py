"""What the gateway refuses, and how (issue 38): tokens it never gave or has forgotten, bodies over its
bound, calls over its rate, and the Answer's failures, each in the error shape of the API family so the
SDK raises its own exception; the digest replay matches on."""

from __future__ import annotations

import asyncio
import logging
import stat
from typing import Any

import anthropic
import httpx2
import openai
import pytest

from agentcompass_dagster.contracts.model import LimitExceeded, ModelError
from agentcompass_dagster.contracts.records import LimitHit
from agentcompass_dagster.gateway.calls import GatewayCall
from scripted_gateway import Script, anthropic_client, openai_client, running_gateway, turn

USER: Any = [{"role": "user", "content": "hello"}]
CANARY = "sk-canary-0123456789"


def test_unknown_and_forgotten_tokens_get_401_in_each_family() -> None:
    """Issue 38: a token the gateway never gave, and one it forgot when its attempt ended, get 401: the
    openai SDK raises AuthenticationError, the anthropic SDK too (it parsed the Anthropic error shape);
    another attempt's token still works, and the Answer never saw the refused calls."""

    async def scenario() -> None:
        script, other = Script([turn("hi")]), Script([turn("other")])
        async with running_gateway() as gateway:
            token, other_token = gateway.admit(script), gateway.admit(other)
            assert token != other_token and len(token) >= 43
            gateway.forget(token)
            for refused in (token, "not-a-token", token + "x"):
                with pytest.raises(openai.AuthenticationError):
                    await openai_client(gateway, refused).chat.completions.create(model="m", messages=USER)
                with pytest.raises(anthropic.AuthenticationError) as raised:
                    await anthropic_client(gateway, refused).messages.create(model="m", max_tokens=5, messages=USER)
                assert raised.value.body == {
                    "type": "error",
                    "error": {"type": "authentication_error", "message": "unknown or expired token"},
                }
            reply = await openai_client(gateway, other_token).chat.completions.create(model="m", messages=USER)
            assert reply.choices[0].message.content == "other"
        assert script.calls == [] and len(other.calls) == 1

    asyncio.run(scenario())


def test_an_oversized_body_gets_413_and_a_fast_caller_429() -> None:
    """Issue 38: a body over ``max_request_bytes`` gets 413 without reaching the Answer; a token that
    calls faster than ``max_calls_per_s`` gets 429 with a retry-after header."""

    async def scenario() -> None:
        script = Script([turn("hi")])
        async with running_gateway(max_request_bytes=4096) as gateway:
            client = openai_client(gateway, gateway.admit(script))
            with pytest.raises(openai.APIStatusError) as raised:
                await client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x" * 5000}])
            assert raised.value.status_code == 413
        assert script.calls == []
        async with running_gateway(max_calls_per_s=0.01) as gateway:
            client = openai_client(gateway, gateway.admit(script))
            await client.chat.completions.create(model="m", messages=USER)
            with pytest.raises(openai.RateLimitError) as limited:
                await client.chat.completions.create(model="m", messages=USER)
            assert int(limited.value.response.headers["retry-after"]) >= 1
        assert len(script.calls) == 1

    asyncio.run(scenario())


def test_answer_failures_become_the_families_errors(caplog: pytest.LogCaptureFixture) -> None:
    """Issue 38: the Answer raising LimitExceeded is a 400 whose message names the limit (the SDKs raise
    BadRequestError and do not retry it); ModelError a 502 that does not pass the model layer's message
    on (it may quote the provider's reply to the real key); anything else a 500 with the traceback in the
    framework's log, never in the body."""
    hit = LimitHit(limit="max_turns", allowance=2, used=2)
    failures = {
        "limit": LimitExceeded(hit),
        "model": ModelError(f"bad key {CANARY}", status=401),
        "bug": KeyError(CANARY),
    }

    async def scenario() -> None:
        script = Script([turn("never")], fail=lambda call: failures[call.messages[-1]["content"]])
        async with running_gateway() as gateway:
            token = gateway.admit(script)
            ask = [{"role": "user", "content": "limit"}]
            with pytest.raises(openai.BadRequestError, match="max_turns=2 reached"):
                await openai_client(gateway, token).chat.completions.create(model="m", messages=ask)
            with pytest.raises(openai.BadRequestError, match="max_turns=2 reached"):
                await openai_client(gateway, token).responses.create(model="m", input="limit", stream=True)
            with pytest.raises(anthropic.BadRequestError, match="max_turns=2 reached"):
                await anthropic_client(gateway, token).messages.create(model="m", max_tokens=5, messages=ask)
            for cause, status in (("model", 502), ("bug", 500)):
                with pytest.raises(anthropic.APIStatusError) as raised:
                    await anthropic_client(gateway, token).messages.create(
                        model="m", max_tokens=5, messages=[{"role": "user", "content": cause}]
                    )
                assert raised.value.status_code == status and CANARY not in raised.value.response.text
        assert len(script.calls) == 5

    with caplog.at_level(logging.ERROR, logger="agentcompass_dagster.gateway"):
        asyncio.run(scenario())
    (record,) = caplog.records
    assert record.exc_info and isinstance(record.exc_info[1], KeyError)


def test_the_digest_is_the_api_and_the_exact_body() -> None:
    """Issue 38: byte-identical requests get one digest (with or without the /v1 prefix), a body that
    differs only in whitespace another, the same bytes to another API another."""

    async def scenario() -> list[GatewayCall]:
        script = Script([turn("hi")])
        async with running_gateway() as gateway:
            headers = {"x-api-key": gateway.admit(script), "content-type": "application/json"}
            body = b'{"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}'
            async with httpx2.AsyncClient(
                transport=httpx2.AsyncHTTPTransport(uds=str(gateway.socket_path)),
                base_url="http://gateway",
                headers=headers,
            ) as http:
                for path, sent in (
                    ("/v1/messages", body),
                    ("/messages", body),
                    ("/v1/messages", body.replace(b", ", b",")),
                    ("/v1/chat/completions", body),
                ):
                    assert (await http.post(path, content=sent)).status_code == 200
        return script.calls

    first, again, spaced, chat = asyncio.run(scenario())
    assert len(first.digest) == 64 and first.digest == again.digest
    assert len({first.digest, spaced.digest, chat.digest}) == 3


def test_the_socket_the_models_and_count_tokens() -> None:
    """Issue 38: the socket is mode 0666 in the gateway's directory and gone after close (start and close
    twice do no harm); /v1/models lists the admitted model in each family's shape; Anthropic's
    count_tokens is answered without the Answer."""

    async def scenario() -> None:
        script = Script([turn("hi")])
        async with running_gateway() as gateway:
            await gateway.start()
            assert stat.S_IMODE(gateway.socket_path.stat().st_mode) == 0o666
            assert stat.S_ISSOCK(gateway.socket_path.stat().st_mode)
            token = gateway.admit(script, model="scripted-model")
            listed = await openai_client(gateway, token).models.list()
            assert [m.id for m in listed.data] == ["scripted-model"]
            anthropic_listed = await anthropic_client(gateway, token).models.list()
            assert [m.id for m in anthropic_listed.data] == ["scripted-model"]
            counted = await anthropic_client(gateway, token).messages.count_tokens(model="m", messages=USER)
            assert counted.input_tokens > 0
            await gateway.close()
            assert not gateway.socket_path.exists()
        assert script.calls == []

    asyncio.run(scenario())


def test_one_tokens_calls_reach_the_answer_one_at_a_time() -> None:
    """Issue 38: two calls of one token sent together reach the Answer one after the other (an attempt's
    turns never overlap), while another token's call is not held up by them."""

    async def scenario() -> None:
        release, entered = asyncio.Event(), asyncio.Event()
        in_answer: list[str] = []
        overlap: list[int] = []

        async def slow(call: GatewayCall) -> Any:
            in_answer.append(call.messages[-1]["content"])
            overlap.append(len(in_answer))
            entered.set()
            if call.messages[-1]["content"] != "other":
                await release.wait()
            in_answer.remove(call.messages[-1]["content"])
            return turn("done")

        async with running_gateway() as gateway:
            token, other = gateway.admit(slow), gateway.admit(slow)
            client = openai_client(gateway, token)
            pending = [
                asyncio.create_task(
                    client.chat.completions.create(model="m", messages=[{"role": "user", "content": name}])
                )
                for name in ("a", "b")
            ]
            await entered.wait()
            await openai_client(gateway, other).chat.completions.create(
                model="m", messages=[{"role": "user", "content": "other"}]
            )
            release.set()
            await asyncio.gather(*pending)
        assert overlap == [1, 2, 1]

    asyncio.run(scenario())
