"""The model gateway: an aiohttp server on a unix socket, on the event loop the attempts run on.

Each request names its attempt by the token it carries (``Authorization: Bearer`` or ``x-api-key``);
the token's Answer (the attempt's model under its limits) answers it. The order of the checks is the
order of their cost: the token (401), its rate (429), the body's size (413) and form (400), then the
Answer, one call of a token at a time. The socket is mode 0666 because the environment's unprivileged
user connects to it: the token is the guard. The directory's path must keep the socket's under the
kernel's 107 bytes.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
from pathlib import Path

from aiohttp import web

from agentcompass_dagster.contracts.model import LimitExceeded, ModelError
from agentcompass_dagster.gateway.admission import Admission, Admissions
from agentcompass_dagster.gateway.calls import Answer, Api
from agentcompass_dagster.gateway.refusals import refusal
from agentcompass_dagster.gateway.replies import reply_body, reply_stream
from agentcompass_dagster.gateway.translate import ReadRequest, read_request
from agentcompass_dagster.gateway.wire import RequestRefused

log = logging.getLogger(__name__)

SOCKET_NAME = "model.sock"
_CALLS: dict[str, Api] = {
    "chat/completions": "chat_completions",
    "responses": "responses",
    "messages": "anthropic_messages",
}
_STREAM_TYPE = "text/event-stream"
# Reading a body takes about 5 ms a MB (a 0.8 MB conversation of 400 messages: 4-8 ms on a loaded
# 2-core machine); above this size it goes to a worker thread so the other attempts' loop keeps turning.
_THREAD_ABOVE_BYTES = 1024 * 1024


class ModelGateway:
    """One gateway for the attempts of a run; ``admit`` gives an attempt its token."""

    def __init__(
        self, directory: Path, *, max_request_bytes: int = 16 * 1024 * 1024, max_calls_per_s: float = 10.0
    ) -> None:
        self.directory = directory
        self.socket_path = directory / SOCKET_NAME
        self.max_request_bytes = max_request_bytes
        self.max_calls_per_s = max_calls_per_s
        self._admissions = Admissions(max_calls_per_s)
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        """Serve on the running event loop; a second call does nothing."""
        if self._runner is not None:
            return
        app = web.Application(client_max_size=self.max_request_bytes)
        for prefix in ("/v1/", "/"):
            for route, api in _CALLS.items():
                app.router.add_post(prefix + route, self._call_handler(api))
            app.router.add_post(prefix + "messages/count_tokens", self._count_tokens)
            app.router.add_get(prefix + "models", self._models)
        runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await runner.setup()
        self.directory.mkdir(mode=0o755, parents=True, exist_ok=True)
        self.socket_path.unlink(missing_ok=True)  # a socket left by a gateway that did not close
        try:
            await web.UnixSite(runner, str(self.socket_path)).start()
            os.chmod(self.socket_path, 0o666)
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner

    async def close(self) -> None:
        """Stop serving and remove the socket; the tokens are forgotten. A second call does nothing."""
        runner, self._runner = self._runner, None
        if runner is None:
            return
        self._admissions.clear()
        await runner.cleanup()
        self.socket_path.unlink(missing_ok=True)

    def admit(self, answer: Answer, *, model: str = "agentcompass") -> str:
        """A fresh random token whose calls ``answer`` answers; ``model`` is what ``/v1/models`` lists."""
        return self._admissions.admit(answer, model)

    def forget(self, token: str) -> None:
        """Refuse ``token`` from now on (a call of it waiting for its turn is refused too)."""
        self._admissions.forget(token)

    def _call_handler(self, api: Api):  # noqa: ANN202  # aiohttp's handler type
        async def handle(request: web.Request) -> web.StreamResponse:
            return await self._call(request, api)

        return handle

    async def _call(self, request: web.Request, api: Api) -> web.StreamResponse:
        admission = self._admitted(request, api)
        if isinstance(admission, web.Response):
            return admission
        raw = await _body(request)
        if raw is None:
            return refusal(api, 413, f"the request body is over {self.max_request_bytes} bytes")
        try:
            read = (
                await asyncio.to_thread(read_request, api, raw)
                if len(raw) > _THREAD_ABOVE_BYTES
                else read_request(api, raw)
            )
        except RequestRefused as error:
            return refusal(api, 400, str(error))
        async with admission.turn:
            if self._admissions.find(admission.token) is not admission:
                return refusal(api, 401, "the token is no longer valid")
            return await self._answer(admission, read)

    async def _answer(self, admission: Admission, read: ReadRequest) -> web.StreamResponse:
        api = read.call.api
        try:
            turn = await admission.answer(read.call)
        except LimitExceeded as error:
            return refusal(api, 400, f"the attempt's {error.hit.message}", code="limit_exceeded")
        except ModelError as error:
            # The model layer's message can quote the endpoint's reply to the real key: only the status.
            status = f" (HTTP {error.status})" if error.status else ""
            return refusal(api, 502, f"the model call failed{status}")
        except Exception:  # noqa: BLE001  # the agent gets a 500, the framework's log the traceback
            log.exception("model gateway: the answer to a %s call failed", api)
            return refusal(api, 500, "the gateway could not answer; the framework's log says why")
        try:
            if read.call.stream:
                body = reply_stream(read, turn)
                return web.Response(body=body, content_type=_STREAM_TYPE, headers={"cache-control": "no-cache"})
            return web.Response(body=reply_body(read, turn), content_type="application/json")
        except Exception:  # noqa: BLE001  # a converter's bug: the agent gets a 500, the log the traceback
            log.exception("model gateway: a %s reply could not be translated", api)
            return refusal(api, 500, "the gateway could not translate the answer; the framework's log says why")

    def _admitted(self, request: web.Request, api: Api) -> Admission | web.Response:
        """The request's admission, or the 401 or 429 to send."""
        admission = self._admissions.find(_presented_token(request))
        if admission is None:
            return refusal(api, 401, "unknown or expired token")
        wait_s = admission.bucket.take()
        if wait_s:
            return refusal(
                api,
                429,
                f"over {self.max_calls_per_s:g} calls a second",
                headers={"retry-after": str(max(1, math.ceil(wait_s)))},
            )
        return admission

    async def _count_tokens(self, request: web.Request) -> web.StreamResponse:
        """Anthropic's count_tokens, answered here: about 4 bytes of JSON a token."""
        admission = self._admitted(request, "anthropic_messages")
        if isinstance(admission, web.Response):
            return admission
        raw = await _body(request)
        if raw is None:
            return refusal("anthropic_messages", 413, f"the request body is over {self.max_request_bytes} bytes")
        return web.json_response({"input_tokens": max(1, len(raw) // 4)})

    async def _models(self, request: web.Request) -> web.StreamResponse:
        """The one model the token's attempt answers with, in the family the client speaks."""
        anthropic = "anthropic-version" in request.headers
        api: Api = "anthropic_messages" if anthropic else "chat_completions"
        admission = self._admissions.find(_presented_token(request))
        if admission is None:
            return refusal(api, 401, "unknown or expired token")
        if anthropic:
            entry: dict[str, str | int] = {
                "type": "model",
                "id": admission.model,
                "display_name": admission.model,
                "created_at": "1970-01-01T00:00:00Z",
            }
            return web.json_response(
                {"data": [entry], "has_more": False, "first_id": admission.model, "last_id": admission.model}
            )
        entry = {"id": admission.model, "object": "model", "created": 0, "owned_by": "agentcompass"}
        return web.json_response({"object": "list", "data": [entry]})


def _presented_token(request: web.Request) -> str | None:
    key = request.headers.get("x-api-key")
    if key:
        return key
    scheme, _, value = request.headers.get("authorization", "").partition(" ")
    return value.strip() if scheme.lower() == "bearer" else None


async def _body(request: web.Request) -> bytes | None:
    """The raw body, None when it is over the gateway's bound (aiohttp counts as it reads)."""
    try:
        return await request.read()
    except web.HTTPRequestEntityTooLarge:
        return None
