"""An HTTP endpoint speaking Anthropic's Messages API and OpenAI's Responses API that replays a
script and records every request.

Point a host at it and the host runs as usual: Claude Code (``ANTHROPIC_BASE_URL=http://HOST:PORT``)
sends ``POST /v1/messages``, Codex (a model provider whose ``base_url`` is ``http://HOST:PORT/v1``,
``wire_api = "responses"``) sends ``POST /v1/responses``, each with its system prompt, tools and
conversation; the endpoint answers with the script's next turn in that API's shape (the dialects
``messages_api`` and ``responses_api``), streamed as server-sent events as the API streams them,
or as one JSON body when the request did not ask for a stream. Tool calls the script makes are real
to the host: it runs them (MCP tools included) and sends the results back in the next request,
which the script can match and quote. Everything received is kept in ``requests`` (and appended
to a JSON-lines file when asked), so tests can assert on what the host actually sent.

Only the standard library serves HTTP here: the endpoint runs wherever Apex's core runs, with no
MCP or web-framework import.
"""

from __future__ import annotations

import json
import socket
import threading
import time
import uuid
from collections.abc import Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from scripted_model.dialect import Dialect, Event, Reply, estimate_tokens
from scripted_model.messages_api import MessagesApi
from scripted_model.responses_api import ResponsesApi
from scripted_model.script import Conversation, Script, TemplateError, Turn, render_blocks

API_VERSION = "2023-06-01"
MESSAGES, RESPONSES = MessagesApi(), ResponsesApi()
DIALECTS: dict[str, Dialect] = {"/v1/messages": MESSAGES, "/v1/responses": RESPONSES, "/responses": RESPONSES}
"""Which API a path speaks (``/responses`` too: a provider's base URL may leave out ``/v1``)."""


class RecordedRequest(BaseModel):
    index: int
    received_at: float
    method: str
    path: str
    headers: dict[str, str]
    """As received, with credentials redacted."""
    body: Any = None
    answered_by: str | None = None
    """'turn N: name', 'side: name', or None when the request got an error."""
    status: int = 200
    error: str | None = None


class ScriptedModel:
    """The script's state: which turn answers next, and every request seen so far."""

    def __init__(self, script: Script, record_path: Path | None = None) -> None:
        self.script = script
        self.record_path = record_path
        self.next_turn = 0
        self.requests: list[RecordedRequest] = []
        self._lock = threading.Lock()

    @property
    def finished(self) -> bool:
        return self.next_turn >= len(self.script.turns)

    def record(self, entry: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(entry)
            if self.record_path is not None:
                self.record_path.parent.mkdir(parents=True, exist_ok=True)
                with self.record_path.open("a", encoding="utf-8") as stream:
                    stream.write(entry.model_dump_json() + "\n")

    def choose(self, conversation: Conversation) -> tuple[int, Turn, str]:
        """The turn that answers this request (consumed) or a side reply; ValueError says why none does."""
        with self._lock:
            reason = "every scripted turn has been used"
            if not self.finished:
                turn = self.script.turns[self.next_turn]
                why = conversation.mismatch(turn.match)
                if why is None:
                    self.next_turn += 1
                    return self.next_turn - 1, turn, f"turn {self.next_turn}: {turn.name}".rstrip(": ")
                reason = f"turn {self.next_turn + 1} ({turn.name or 'unnamed'}) does not apply: {why}"
            for side in self.script.side_replies:
                if conversation.mismatch(side.match) is None:
                    return -1, side, f"side: {side.name}".rstrip(": ")
        raise ValueError(f"scripted model {self.script.name!r}: {reason}")


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        return  # the recording is the log; stderr stays quiet for the host's sake

    # --- plumbing ----------------------------------------------------------------------------

    def _headers_for_record(self) -> dict[str, str]:
        redacted = {"x-api-key", "authorization", "cookie"}
        return {k: ("<redacted>" if k.lower() in redacted else v) for k, v in self.headers.items()}

    def _read_body(self) -> bytes:
        length = int(self.headers.get("content-length") or 0)
        return self.rfile.read(length) if length > 0 else b""

    def _send_json(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.send_header("request-id", f"req_scripted_{uuid.uuid4().hex[:20]}")
        self.send_header("anthropic-version", API_VERSION)
        self.end_headers()
        self.wfile.write(data)

    def _send_error(self, dialect: Dialect, status: int, kind: str, message: str) -> None:
        self._send_json(status, dialect.error(status, kind, message))

    def _send_events(self, events: Iterable[Event]) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream; charset=utf-8")
        self.send_header("cache-control", "no-cache")
        self.send_header("transfer-encoding", "chunked")
        self.send_header("request-id", f"req_scripted_{uuid.uuid4().hex[:20]}")
        self.end_headers()
        for kind, data in events:
            payload = f"event: {kind}\ndata: {json.dumps(data)}\n\n".encode()
            self.wfile.write(b"%x\r\n%s\r\n" % (len(payload), payload))
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _record(self, body: Any, status: int, answered_by: str | None = None, error: str | None = None) -> None:
        model = self.server.model
        model.record(RecordedRequest(index=len(model.requests), received_at=time.time(), method=self.command,
                                     path=self.path, headers=self._headers_for_record(), body=body,
                                     answered_by=answered_by, status=status, error=error))

    # --- routes ---------------------------------------------------------------------------------

    def do_HEAD(self) -> None:
        self.send_response(200)
        self.send_header("content-length", "0")
        self.end_headers()

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        if path in ("/", ""):
            self._send_json(200, {"service": "apex scripted model", "script": self.server.model.script.name})
        elif path == "/v1/models":
            name = self.server.model.script.model or "scripted-model"
            self._send_json(200, {"data": [{"type": "model", "id": name, "display_name": name}], "has_more": False})
        elif path == "/_scripted/state":
            model = self.server.model
            self._send_json(200, {"script": model.script.name, "next_turn": model.next_turn, "turns": len(model.script.turns),
                                  "finished": model.finished, "requests": len(model.requests)})
        else:
            self._send_error(MESSAGES, 404, "not_found_error", f"{path} is not served by the scripted model")

    def do_POST(self) -> None:
        path = self.path.split("?", 1)[0]
        dialect = DIALECTS.get(path, MESSAGES)
        raw = self._read_body()
        try:
            body = json.loads(raw or b"null")
        except json.JSONDecodeError:
            self._record(raw.decode(errors="replace"), 400, error="body is not JSON")
            self._send_error(dialect, 400, "invalid_request_error", "the request body is not JSON")
            return
        if not (self.headers.get("x-api-key") or self.headers.get("authorization")):
            self._record(body, 401, error="no credentials")
            self._send_error(dialect, 401, "authentication_error", "x-api-key or authorization header required")
            return
        if path == "/v1/messages/count_tokens":
            self._record(body, 200, answered_by="count_tokens")
            self._send_json(200, {"input_tokens": estimate_tokens(json.dumps(body))})
            return
        if path not in DIALECTS:
            self._record(body, 404, error="unknown path")
            self._send_error(dialect, 404, "not_found_error", f"{path} is not served by the scripted model")
            return
        problem = dialect.problem(body)
        if problem is not None:
            self._record(body, 400, error=problem)
            self._send_error(dialect, 400, "invalid_request_error", problem)
            return
        self._answer(dialect, body)

    def _answer(self, dialect: Dialect, body: dict[str, Any]) -> None:
        model = self.server.model
        try:
            conversation: Conversation = dialect.read(body, model.script)
            index, turn, label = model.choose(conversation)
            blocks = render_blocks(model.script, index, turn, conversation.context()) if turn.reply else []
        except (ValueError, TemplateError) as error:
            self._record(body, 400, error=str(error))
            self._send_error(dialect, 400, "invalid_request_error", str(error))
            return
        if turn.delay_s:
            time.sleep(turn.delay_s)
        if turn.error is not None:
            self._record(body, turn.error.status, answered_by=label, error=turn.error.message)
            self._send_error(dialect, turn.error.status, turn.error.type, turn.error.message)
            return
        self._record(body, 200, answered_by=label)
        reply = Reply(blocks=blocks, stop_reason=turn.effective_stop_reason, model=model.script.model or str(body["model"]),
                      input_tokens=estimate_tokens(json.dumps(body)), output_tokens=estimate_tokens(json.dumps(blocks)),
                      request=body)
        try:
            if body.get("stream"):
                self._send_events(dialect.events(reply))
            else:
                self._send_json(200, dialect.whole(reply))
        except (BrokenPipeError, ConnectionResetError):
            return  # the host hung up mid-stream; nothing left to tell it


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    model: ScriptedModel


class _Server6(_Server):
    address_family = socket.AF_INET6


class ScriptedModelServer:
    """Serve a script on ``host:port`` (port 0: any free one) in a background thread.

    ``with ScriptedModelServer(script) as endpoint:`` then ``endpoint.url`` for
    ``ANTHROPIC_BASE_URL`` (``endpoint.url + "/v1"`` for a Codex provider's ``base_url``), and
    ``endpoint.requests`` / ``endpoint.finished`` afterwards.
    """

    def __init__(self, script: Script, host: str = "127.0.0.1", port: int = 0, record_path: Path | None = None) -> None:
        self.model = ScriptedModel(script, record_path)
        server_class = _Server6 if ":" in host else _Server
        self._server = server_class((host, port), _Handler)
        self._server.model = self.model
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        host = f"[{host}]" if ":" in str(host) else host
        return f"http://{host}:{port}"

    @property
    def requests(self) -> list[RecordedRequest]:
        return list(self.model.requests)

    @property
    def finished(self) -> bool:
        return self.model.finished

    def start(self) -> ScriptedModelServer:
        self._thread = threading.Thread(target=self._server.serve_forever, name="scripted-model", daemon=True)
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        self._server.serve_forever()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def __enter__(self) -> ScriptedModelServer:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()
