"""A scripted session with the reference "everything" server, run the same way direct and through the bridge.

``run_session(client, peer)`` drives an entered ``mcp.Client`` built with ``client_options(peer)`` through
``STEPS`` in order and returns one ``(step, summary)`` pair per step. A summary is plain JSON
data that is the same on every run against the same server (session ids, task ids and random
values are left out or replaced), so two runs compare step by step with ``==``. A step that
fails records ``{"error": ...}`` and the session goes on: the table then shows where a run
differed, not only that it did. Each step is bounded by ``STEP_TIMEOUT_SECONDS``.

What it covers (``@modelcontextprotocol/server-everything`` 2026.8.31, ``docs/features.md``):
every tool the server lists to this client (``EXPECTED_TOOLS``), including those that send
the client requests of its own (sampling, form and URL elicitation, roots, handled by
``Handlers``) and the task tool (SEP-1686: ``tools/call`` with ``task``, ``tasks/get``,
``tasks/result``); progress notifications and their count; ``logging/setLevel`` and the log
notifications it governs; resource list, templates, read, subscribe, the update
notifications and unsubscribe; prompts and completion; 12 concurrent calls; a cancelled call
followed by ``ping``.
"""

from __future__ import annotations

import base64
import gzip
import json
import re
import secrets
import warnings
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
from mcp import Client
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp.types import (
    CreateMessageResult,
    ElicitResult,
    ListRootsResult,
    LoggingMessageNotificationParams,
    PromptReference,
    ResourceUpdatedNotification,
    Root,
    TextContent,
)
from pydantic import FileUrl

STEP_TIMEOUT_SECONDS = 15.0
"""Bound on every step (the longest, the task tool, takes about 4 s of the server's own time)."""

ROOT_URI = "file:///interop/workspace"
SAMPLED_TEXT = "sampled through the client: Grüße 🌍"
GZIP_INPUT = "gzip me, bitte: Grüße aus der Interop-Suite\n" * 20
CONCURRENT_CALLS = 12

EXPECTED_TOOLS = (
    "echo", "get-annotated-message", "get-env", "get-resource-links", "get-resource-reference",
    "get-roots-list", "get-structured-content", "get-sum", "get-tiny-image", "gzip-file-as-resource",
    "simulate-research-query", "toggle-simulated-logging", "toggle-subscriber-updates",
    "trigger-elicitation-request", "trigger-long-running-operation", "trigger-sampling-request",
    "trigger-url-elicitation",
)
"""The tools the server lists to a client with sampling, elicitation (form and URL) and roots, but
no client-side tasks (its two ``*-async`` tools need those; the Python SDK does not offer them)."""

_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_CLOCK = re.compile(r"\b\d{1,2}:\d{2}:\d{2}(\s?[AP]M)?")


def scrub(text: str) -> str:
    """`text` with UUIDs (the server's session ids and task ids) and clock times replaced."""
    return _CLOCK.sub("<time>", _UUID.sub("<uuid>", text))


@dataclass
class Handlers:
    """The client's side of the server's requests and notifications, and what arrived."""

    roots_requests: int = 0
    sampling_requests: list[str] = field(default_factory=list)
    elicitations: list[str] = field(default_factory=list)
    logs: list[tuple[str, str]] = field(default_factory=list)
    """(level, scrubbed data) of every ``notifications/message``."""
    updated_uris: list[str] = field(default_factory=list)
    notification_methods: set[str] = field(default_factory=set)
    changed: anyio.Event = field(default_factory=anyio.Event)
    run_tag: str = field(default_factory=lambda: secrets.token_hex(6))
    """In the names of the resources this run creates: the server keeps session resources in one
    map for all sessions by URI, so two runs at once must not use the same names. Summaries show
    it as ``<run>``."""

    def _changed(self) -> None:
        self.changed.set()
        self.changed = anyio.Event()

    async def wait_until(self, condition: Callable[[], bool]) -> None:
        """Wait (unbounded here; every step is bounded) until `condition()` holds."""
        while not condition():
            await self.changed.wait()

    async def list_roots(self, context: Any) -> ListRootsResult:
        self.roots_requests += 1
        self._changed()
        return ListRootsResult(roots=[Root(uri=FileUrl(ROOT_URI), name="interop workspace")])

    async def sampling(self, context: Any, params: Any) -> CreateMessageResult:
        self.sampling_requests.append(scrub(json.dumps(params.model_dump(mode="json", exclude_none=True), sort_keys=True)))
        self._changed()
        return CreateMessageResult(role="assistant", content=TextContent(type="text", text=SAMPLED_TEXT), model="interop-model")

    async def elicitation(self, context: Any, params: Any) -> ElicitResult:
        mode = getattr(params, "mode", "form") or "form"
        self.elicitations.append(mode)
        self._changed()
        if mode == "url":
            return ElicitResult(action="accept")
        properties = (getattr(params, "requested_schema", None) or {}).get("properties", {})
        content = {name: spec["default"] for name, spec in properties.items() if "default" in spec}
        content["name"] = "Ada Lovelace"
        return ElicitResult(action="accept", content=content)

    async def logging(self, params: LoggingMessageNotificationParams) -> None:
        data = params.data if isinstance(params.data, str) else json.dumps(params.data, sort_keys=True)
        self.logs.append((params.level, scrub(data)))
        self._changed()

    async def message(self, message: Any) -> None:
        if isinstance(message, Exception):
            self.notification_methods.add(f"exception: {type(message).__name__}")
        else:
            self.notification_methods.add(getattr(message, "method", type(message).__name__))
            if isinstance(message, ResourceUpdatedNotification):
                self.updated_uris.append(str(message.params.uri))
        self._changed()


def handlers() -> Handlers:
    return Handlers()


def client_options(peer: Handlers) -> dict[str, Any]:
    """The ``mcp.Client`` keyword arguments that connect `peer`'s handlers."""
    return {
        "list_roots_callback": peer.list_roots,
        "sampling_callback": peer.sampling,
        "elicitation_callback": peer.elicitation,
        "logging_callback": peer.logging,
        "message_handler": peer.message,
        "read_timeout_seconds": STEP_TIMEOUT_SECONDS,
    }


def content_summary(result: Any) -> list[Any]:
    """Each content block as (type, text | mime type and size | resource uri), ids scrubbed."""
    summary: list[Any] = []
    for block in result.content:
        data = block.model_dump(mode="json", exclude_none=True)
        kind = data.get("type")
        if kind == "text":
            summary.append(["text", scrub(data["text"])])
        elif kind in ("image", "audio"):
            summary.append([kind, data.get("mimeType") or data.get("mime_type"), len(data["data"])])
        elif kind == "resource_link":
            summary.append(["resource_link", data["uri"], data.get("mimeType") or data.get("mime_type")])
        elif kind == "resource":
            resource = data["resource"]
            body = resource.get("text") or resource.get("blob") or ""
            summary.append(["resource", resource["uri"], resource.get("mimeType") or resource.get("mime_type"), len(body)])
        else:
            summary.append([kind])
        if data.get("annotations"):
            summary[-1].append(data["annotations"])
    return summary


def call_summary(result: Any) -> dict[str, Any]:
    summary: dict[str, Any] = {"is_error": bool(result.is_error), "content": content_summary(result)}
    if result.structured_content is not None:
        summary["structured"] = result.structured_content
    return summary


Step = Callable[[Client, Handlers], Awaitable[Any]]
STEPS: list[tuple[str, Step]] = []


def step(name: str) -> Callable[[Step], Step]:
    def register(function: Step) -> Step:
        STEPS.append((name, function))
        return function

    return register


@step("connect")
async def _connect(client: Client, peer: Handlers) -> Any:
    caps = client.server_capabilities.model_dump(mode="json", exclude_none=True)
    info = client.server_info
    return {"protocol": client.protocol_version, "server": info.name if info else None, "capabilities": sorted(caps)}


@step("roots/list from the server, answered")
async def _roots(client: Client, peer: Handlers) -> Any:
    # The server asks for the roots 350 ms after `notifications/initialized`, on the GET stream.
    # It drops that request if the GET stream is not open yet (a race on a loaded machine);
    # then a roots/list_changed notification makes it ask again, on the stream now open.
    with anyio.move_on_after(5):
        await peer.wait_until(lambda: peer.roots_requests >= 1)
    if peer.roots_requests == 0:
        await client.send_roots_list_changed()
        await peer.wait_until(lambda: peer.roots_requests >= 1)
    return "answered"


@step("tools/list")
async def _tools(client: Client, peer: Handlers) -> Any:
    names = sorted(tool.name for tool in (await client.list_tools()).tools)
    return {"names": names, "all expected": sorted(EXPECTED_TOOLS) == names}


async def _call(client: Client, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return call_summary(await client.call_tool(name, arguments))


@step("echo")
async def _echo(client: Client, peer: Handlers) -> Any:
    return await _call(client, "echo", {"message": "héllo, 世界 🌍"})


@step("get-sum")
async def _sum(client: Client, peer: Handlers) -> Any:
    return await _call(client, "get-sum", {"a": 40, "b": 2.5})


@step("get-annotated-message")
async def _annotated(client: Client, peer: Handlers) -> Any:
    return await _call(client, "get-annotated-message", {"messageType": "error", "includeImage": True})


@step("get-env")
async def _env(client: Client, peer: Handlers) -> Any:
    result = await client.call_tool("get-env", {})
    text = "".join(block.text for block in result.content if isinstance(block, TextContent))
    return {"is_error": bool(result.is_error), "json object with PATH": "PATH" in json.loads(text)}


@step("get-resource-links")
async def _links(client: Client, peer: Handlers) -> Any:
    return await _call(client, "get-resource-links", {"count": 4})


@step("get-resource-reference")
async def _reference(client: Client, peer: Handlers) -> Any:
    return await _call(client, "get-resource-reference", {"resourceType": "Blob", "resourceId": 2})


@step("get-structured-content")
async def _structured(client: Client, peer: Handlers) -> Any:
    return await _call(client, "get-structured-content", {"location": "Chicago"})


@step("get-tiny-image")
async def _image(client: Client, peer: Handlers) -> Any:
    return await _call(client, "get-tiny-image", {})


def _data_uri() -> str:
    return "data:text/plain;base64," + base64.b64encode(GZIP_INPUT.encode()).decode()


@step("gzip-file-as-resource, inline")
async def _gzip_inline(client: Client, peer: Handlers) -> Any:
    name = f"inline-{peer.run_tag}.txt.gz"
    result = await client.call_tool("gzip-file-as-resource", {"name": name, "data": _data_uri(), "outputType": "resource"})
    blob = result.content[0].resource.blob  # type: ignore[union-attr]
    return {"summary": call_summary(result), "round trip": gzip.decompress(base64.b64decode(blob)).decode() == GZIP_INPUT}


@step("gzip-file-as-resource, link, then resources/read")
async def _gzip_link(client: Client, peer: Handlers) -> Any:
    result = await client.call_tool("gzip-file-as-resource", {"name": f"linked-{peer.run_tag}.txt.gz", "data": _data_uri()})
    uri = result.content[0].uri  # type: ignore[union-attr]
    read = await client.read_resource(str(uri))
    blob = read.contents[0].blob  # type: ignore[union-attr]
    return {"summary": call_summary(result), "round trip": gzip.decompress(base64.b64decode(blob)).decode() == GZIP_INPUT}


@step("get-roots-list")
async def _roots_list(client: Client, peer: Handlers) -> Any:
    return await _call(client, "get-roots-list", {})


@step("trigger-sampling-request (server -> client sampling/createMessage)")
async def _sampling(client: Client, peer: Handlers) -> Any:
    before = len(peer.sampling_requests)
    summary = await _call(client, "trigger-sampling-request", {"prompt": "Say hello through the bridge", "maxTokens": 20})
    return {"result": summary, "requests": peer.sampling_requests[before:]}


@step("trigger-elicitation-request (form)")
async def _elicitation(client: Client, peer: Handlers) -> Any:
    before = len(peer.elicitations)
    summary = await _call(client, "trigger-elicitation-request", {})
    return {"result": summary, "requests": peer.elicitations[before:]}


@step("trigger-url-elicitation (URL mode)")
async def _url_elicitation(client: Client, peer: Handlers) -> Any:
    before = len(peer.elicitations)
    summary = await _call(client, "trigger-url-elicitation", {"url": "https://example.com/interop", "elicitationId": "interop-1"})
    return {"result": summary, "requests": peer.elicitations[before:]}


@step("trigger-long-running-operation with progress")
async def _progress(client: Client, peer: Handlers) -> Any:
    seen: list[tuple[float, float | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total))

    result = await client.call_tool("trigger-long-running-operation", {"duration": 0.4, "steps": 4}, progress_callback=on_progress)
    return {"result": call_summary(result), "progress before the result": seen}


@step("logging/setLevel debug")
async def _set_level(client: Client, peer: Handlers) -> Any:
    return (await client.session.set_logging_level("debug")).model_dump(mode="json", exclude_none=True)


@step("toggle-simulated-logging on: a log notification arrives")
async def _logging_on(client: Client, peer: Handlers) -> Any:
    before = len(peer.logs)
    summary = await _call(client, "toggle-simulated-logging", {})
    await peer.wait_until(lambda: len(peer.logs) > before)
    # The level is random (the server picks one); the text names it, so compare the shape only.
    level, data = peer.logs[before]
    return {"result": summary, "log": re.sub(r"^\w+[- ]level[- ]message", "<level> message", data, flags=re.I)}


@step("toggle-simulated-logging off")
async def _logging_off(client: Client, peer: Handlers) -> Any:
    return await _call(client, "toggle-simulated-logging", {})


@step("logging/setLevel emergency")
async def _set_level_high(client: Client, peer: Handlers) -> Any:
    return (await client.session.set_logging_level("emergency")).model_dump(mode="json", exclude_none=True)


@step("resources/list")
async def _resources(client: Client, peer: Handlers) -> Any:
    return sorted(str(resource.uri) for resource in (await client.list_resources()).resources)


@step("resources/templates/list")
async def _templates(client: Client, peer: Handlers) -> Any:
    return sorted(template.uri_template for template in (await client.list_resource_templates()).resource_templates)


@step("resources/read text and blob")
async def _read(client: Client, peer: Handlers) -> Any:
    text = (await client.read_resource("demo://resource/dynamic/text/3")).contents[0]
    blob = (await client.read_resource("demo://resource/dynamic/blob/3")).contents[0]
    doc = (await client.read_resource("demo://resource/static/document/features.md")).contents[0]
    return {
        "text": scrub(text.text),  # type: ignore[union-attr]
        "blob bytes": len(base64.b64decode(blob.blob)),  # type: ignore[union-attr]
        "document starts": doc.text.splitlines()[0],  # type: ignore[union-attr]
    }


SUBSCRIBED_URI = "demo://resource/dynamic/text/1"


@step("resources/subscribe")
async def _subscribe(client: Client, peer: Handlers) -> Any:
    peer.logs.clear()
    await client.session.set_logging_level("info")
    result = await client.subscribe_resource(SUBSCRIBED_URI)
    # The server acknowledges with an info log on the session's stream.
    await peer.wait_until(lambda: any("Subscribe" in data for _, data in peer.logs))
    return {"result": result.model_dump(mode="json", exclude_none=True), "log": [entry for entry in peer.logs if "Subscribe" in entry[1]][0]}


@step("toggle-subscriber-updates on: notifications/resources/updated arrives")
async def _updates_on(client: Client, peer: Handlers) -> Any:
    before = len(peer.updated_uris)
    summary = await _call(client, "toggle-subscriber-updates", {})
    await peer.wait_until(lambda: len(peer.updated_uris) > before)
    return {"result": summary, "updated": peer.updated_uris[before]}


@step("toggle-subscriber-updates off, resources/unsubscribe")
async def _updates_off(client: Client, peer: Handlers) -> Any:
    summary = await _call(client, "toggle-subscriber-updates", {})
    result = await client.unsubscribe_resource(SUBSCRIBED_URI)
    return {"result": summary, "unsubscribe": result.model_dump(mode="json", exclude_none=True)}


@step("prompts/list")
async def _prompts(client: Client, peer: Handlers) -> Any:
    return sorted(prompt.name for prompt in (await client.list_prompts()).prompts)


def _prompt_summary(result: Any) -> list[Any]:
    out: list[Any] = []
    for message in result.messages:
        data = message.content.model_dump(mode="json", exclude_none=True)
        out.append([message.role, data.get("type"), scrub(data.get("text", "")) or data.get("resource", {}).get("uri")])
    return out


@step("prompts/get simple, args, resource")
async def _prompt_get(client: Client, peer: Handlers) -> Any:
    simple = await client.get_prompt("simple-prompt")
    args = await client.get_prompt("args-prompt", {"city": "Zürich", "state": "ZH"})
    resource = await client.get_prompt("resource-prompt", {"resourceType": "Text", "resourceId": "2"})
    return {"simple": _prompt_summary(simple), "args": _prompt_summary(args), "resource": _prompt_summary(resource)}


@step("completion/complete")
async def _complete(client: Client, peer: Handlers) -> Any:
    ref = PromptReference(type="ref/prompt", name="completable-prompt")
    department = await client.complete(ref, {"name": "department", "value": "E"})
    names = await client.complete(ref, {"name": "name", "value": ""}, context_arguments={"department": "Engineering"})
    return {"department": department.completion.values, "name": names.completion.values}


async def raw_request(client: Client, method: str, params: dict[str, Any]) -> dict[str, Any]:
    """Send one request through the client's session and return the raw result, unchecked.

    For the task-augmented ``tools/call`` (SEP-1686), whose ``CreateTaskResult`` the SDK's
    public ``send_request`` refuses (it checks every ``tools/call`` result as a
    ``CallToolResult``): this uses the session's private ``_stamp`` (the negotiated
    protocol-version header) and ``_dispatcher`` of ``mcp`` 2.3.
    """
    session = client.session
    data: dict[str, Any] = {"method": method, "params": params}
    opts: Any = {"timeout": STEP_TIMEOUT_SECONDS}
    session._stamp(data, opts)  # noqa: SLF001
    return await session._dispatcher.send_raw_request(method, data["params"], opts)  # noqa: SLF001


@step("simulate-research-query as a task (tasks/get, tasks/result)")
async def _task(client: Client, peer: Handlers) -> Any:
    created = await raw_request(
        client, "tools/call", {"name": "simulate-research-query", "arguments": {"topic": "bridges"}, "task": {"ttl": 60000}}
    )
    task_id = created["task"]["taskId"]
    statuses = [created["task"]["status"]]
    while statuses[-1] not in ("completed", "failed", "cancelled"):
        await anyio.sleep(0.25)
        status = (await raw_request(client, "tasks/get", {"taskId": task_id}))["status"]
        if status != statuses[-1]:
            statuses.append(status)
    payload = await raw_request(client, "tasks/result", {"taskId": task_id})
    text = "".join(block.get("text", "") for block in payload.get("content", []))
    return {"statuses": statuses, "report names the topic": "Research Report: bridges" in text}


@step(f"{CONCURRENT_CALLS} concurrent calls")
async def _concurrent(client: Client, peer: Handlers) -> Any:
    results: dict[int, Any] = {}
    progress_counts: dict[int, int] = {}

    async def one(index: int) -> None:
        if index % 3 == 0:
            progress_counts[index] = 0

            async def on_progress(progress: float, total: float | None, message: str | None) -> None:
                progress_counts[index] += 1

            result = await client.call_tool("trigger-long-running-operation", {"duration": 0.3, "steps": 3}, progress_callback=on_progress)
        elif index % 3 == 1:
            result = await client.call_tool("get-sum", {"a": index, "b": 1000})
        else:
            result = await client.call_tool("echo", {"message": f"call {index}: ünïcode"})
        results[index] = content_summary(result)

    async with anyio.create_task_group() as group:
        for index in range(CONCURRENT_CALLS):
            group.start_soon(one, index)
    return {"results": [results[index] for index in range(CONCURRENT_CALLS)], "progress per call": progress_counts}


@step("cancel a call, then ping")
async def _cancel(client: Client, peer: Handlers) -> Any:
    started = anyio.Event()
    outcome: list[str] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        started.set()

    async def long_call() -> None:
        await client.call_tool("trigger-long-running-operation", {"duration": 20, "steps": 40}, progress_callback=on_progress)
        outcome.append("finished (not cancelled)")

    async with anyio.create_task_group() as group:
        group.start_soon(long_call)
        await started.wait()
        group.cancel_scope.cancel()  # the SDK sends notifications/cancelled for the abandoned request
    pong = await client.session.send_ping()
    return {"call": outcome or ["cancelled after its first progress"], "ping": pong.model_dump(mode="json", exclude_none=True)}


@step("notifications seen in the session")
async def _notifications(client: Client, peer: Handlers) -> Any:
    return sorted(peer.notification_methods)


async def run_session(client: Client, peer: Handlers) -> list[tuple[str, Any]]:
    """Run every step of ``STEPS`` in order on the entered `client`; see the module docstring."""
    record: list[tuple[str, Any]] = []
    # The session is a 2025-11-25 one (the server predates 2026-07-28), where logging/setLevel,
    # resources/subscribe and ping are current, not deprecated.
    warnings.filterwarnings("ignore", category=MCPDeprecationWarning)
    for name, function in STEPS:
        try:
            with anyio.fail_after(STEP_TIMEOUT_SECONDS):
                summary = await function(client, peer)
        except Exception as exc:  # recorded, so that the table shows the step that differed
            summary = {"error": f"{type(exc).__name__}: {scrub(str(exc))}"}
        record.append((name, json.loads(json.dumps(summary, ensure_ascii=False).replace(peer.run_tag, "<run>"))))
    return record
