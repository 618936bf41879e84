"""The running MCP servers: started on the first turn that needs their tools, stopped
with the workspace.

Each server is held by one task of its own (`_serve`), which enters the SDK's
`Client` and leaves it: the SDK's transports are anyio task groups, which
must be left by the task that entered them. A stdio server's process is
ended by that exit (stdin closed, then SIGTERM, then SIGKILL of its process
group, all bounded by the SDK). If slop-tui is killed before it can do that,
the server dies with it: bubblewrap's `--die-with-parent` in the sandbox,
util-linux's `setpriv --pdeathsig KILL` outside it (where setpriv exists).

A server that cannot start, crashes, or does not answer a call within its
`timeout` is marked `failed` with the reason (its stderr's last lines for a
stdio server) and is started again on the next turn that needs it, after a
back-off that doubles with each failure in a row (1 s to 60 s).

A server's tools, prompts and resources are listed when it starts and again
when it says one of those lists changed (`notifications/*/list_changed`, on a
`subscriptions/listen` stream for 2026-07-28 connections): the next request
declares the new tools, with a notice. Prompts without required arguments
become skills named `mcp__SERVER__PROMPT` (in the ledger, activated only by
the user); resources are read into the context by `/mcp resource add`.

The SDK (`mcp` on PyPI) takes seconds to import, so it is imported in a
thread (`sdk.preload_sdk`): by the app once its first screen is up, else when
the first server starts; never before the first frame.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import shutil
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from slop_tui import __version__
from slop_tui.context.prompt import ToolSpec
from slop_tui.mcpclient.content import block_text, result_text
from slop_tui.mcpclient.naming import (
    check_schema,
    definition_hash,
    description_for_model,
    exposed_name,
)
from slop_tui.mcpclient.sdk import sdk_ready
from slop_tui.mcpclient.settings import (
    APPROVE_ALL,
    APPROVE_READS,
    MissingVariable,
    ServerSettings,
    expand_all,
)
from slop_tui.safe_text import neutralise
from slop_tui.tools.base import ToolResult, cap_text, error_result, ok_result

if TYPE_CHECKING:
    from slop_tui.ledger import Ledger
    from slop_tui.tools.sandbox import Sandbox

log = logging.getLogger(__name__)

NOT_STARTED = "not started"
STARTING = "starting"
RUNNING = "running"
FAILED = "failed"
DISABLED = "disabled"
STOPPED = "stopped"

KEY_DISABLED = "mcp/disabled"  # app_state: servers switched off with /mcp disable
KEY_ACCEPTED = "mcp/accepted/"  # + SERVER/TOOL: the definition hash the user accepted
MAX_BACKOFF = 60.0
STOP_TIMEOUT = 10.0  # the SDK bounds its own shutdown to about 6 s
STDERR_TAIL = 400
MAX_PAGES = 100
MAX_RESULT_CHARS = 200_000
MAX_RESOURCE_CHARS = 200_000  # a resource's text in the context, like a /url add page
MAX_PROMPT_CHARS = 8_000  # a server prompt's text as a skill's patch
REFRESH_WAIT = 10.0  # how long a request waits for a changed list to be read again
# The notifications that say a list changed, and which list.
LIST_CHANGED = {
    "notifications/tools/list_changed": "tools",
    "notifications/prompts/list_changed": "prompts",
    "notifications/resources/list_changed": "resources",
}


@dataclass
class RemoteTool:
    server: str
    name: str  # the server's name for it
    exposed: str  # mcp__SERVER__TOOL
    description: str  # as declared to the model
    schema: dict[str, Any]
    read_only: bool
    digest: str
    held: bool = False  # changed since the user accepted it

    def spec(self) -> ToolSpec:
        return ToolSpec(self.exposed, self.description, self.schema)


@dataclass(frozen=True)
class RemotePrompt:
    """A server's prompt as a skill: its name, labelled description and text."""

    name: str  # the server's name for it
    skill: str  # mcp__SERVER__PROMPT
    description: str
    patch: str
    digest: str


@dataclass(frozen=True)
class Listing:
    """What a server offers: its tools, its prompts (None: it has none), resources."""

    tools: list[Any]
    prompts: list[tuple[Any, str]] | None  # (the prompt, its text or why it has none)
    resources: list[tuple[str, str, str]]  # (URI, name, MIME type)


@dataclass
class Server:
    settings: ServerSettings
    status: str = NOT_STARTED
    error: str = ""
    tools: dict[str, RemoteTool] = field(default_factory=dict)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    prompts: dict[str, RemotePrompt] = field(default_factory=dict)  # by the server's name
    skipped_prompts: list[tuple[str, str]] = field(default_factory=list)
    held_prompts: dict[str, RemotePrompt] = field(default_factory=dict)
    resources: list[tuple[str, str, str]] = field(default_factory=list)
    changes: set[str] = field(default_factory=set)  # lists it said changed, not read yet
    refresh: asyncio.Task | None = None
    failures: int = 0
    retry_at: float = 0.0
    sandboxed: bool = False
    client: Any = None
    task: asyncio.Task | None = None
    stop: asyncio.Event | None = None
    errlog: IO[bytes] | None = None
    err_mark: int = 0  # how much of errlog was there when the last call began

    @property
    def name(self) -> str:
        return self.settings.name


class ServerProblem(Exception):
    """Why a server cannot start, in one line."""


class ResourceProblem(Exception):
    """Why a resource cannot join the context, in one line."""


class McpManager:
    """The configured servers of one workspace, their state and their tools."""

    # How the client negotiates the protocol: "auto" (2026-07-28 where the server has
    # it, else the initialize handshake) or "legacy" (the handshake always).
    protocol_mode = "auto"

    def __init__(
        self,
        settings: Mapping[str, ServerSettings],
        *,
        ledger: Ledger,
        project_root: Path,
        env: Mapping[str, str],
        sandbox: Callable[[], Sandbox],
    ) -> None:
        self.servers = {name: Server(s) for name, s in settings.items()}
        self.ledger = ledger
        self.project_root = Path(project_root)
        self.env = env
        self._sandbox = sandbox
        self._lock = asyncio.Lock()
        self._loaded = False
        self._notices: list[str] = []
        self._stopping: set[asyncio.Task] = set()  # servers `update` took away
        for server in self.servers.values():
            if not server.settings.enabled:
                server.status = DISABLED

    def update(self, settings: Mapping[str, ServerSettings]) -> list[str]:
        """Take a reloaded `[mcp.servers]` (a project folder just trusted): new servers
        start with the next turn that needs them; a removed or changed one is stopped
        (in the background) and a changed one starts again with its new settings.
        Returns the names of the servers added or changed."""
        fresh = []
        for name, server in list(self.servers.items()):
            if settings.get(name) == server.settings:
                continue
            del self.servers[name]
            if server.task is None:  # never started (or already stopped): nothing runs
                if server.errlog is not None:
                    server.errlog.close()
                continue
            task = asyncio.get_running_loop().create_task(self._retire(server))
            self._stopping.add(task)
            task.add_done_callback(self._stopping.discard)
        for name, s in settings.items():
            if name not in self.servers:
                self.servers[name] = Server(s, status=NOT_STARTED if s.enabled else DISABLED)
                fresh.append(name)
        self._loaded = False  # /mcp disable's list is read again for the new ones
        return fresh

    # -- what is configured and known --------------------------------------

    @property
    def configured(self) -> bool:
        return bool(self.servers)

    def sandboxed(self, settings: ServerSettings) -> bool:
        """Whether this server runs in bubblewrap (HTTP servers run elsewhere)."""
        if settings.transport != "stdio" or settings.sandbox is False:
            return False
        return self._sandbox().available

    def outside_sandbox(self) -> list[str]:
        """Enabled stdio servers that run outside the sandbox (for the header)."""
        return [
            s.name
            for s in self.servers.values()
            if s.status != DISABLED and s.settings.transport == "stdio"
            and not self.sandboxed(s.settings)
        ]  # fmt: skip

    def tool_specs(self) -> list[ToolSpec]:
        """Declarations of the tools of running servers, except held ones."""
        return [
            t.spec()
            for s in self.servers.values()
            if s.status == RUNNING
            for t in s.tools.values()
            if not t.held
        ]

    def find(self, exposed: str) -> tuple[Server, RemoteTool] | None:
        for server in self.servers.values():
            tool = server.tools.get(exposed)
            if tool is not None:
                return server, tool
        return None

    def server_of(self, exposed: str) -> str:
        """The server a tool name belongs to ('' when none is known)."""
        found = self.find(exposed)
        if found is not None:
            return found[0].name
        for name in self.servers:
            if exposed.startswith(f"mcp__{name}__"):
                return name
        return ""

    def pop_notices(self) -> list[str]:
        out, self._notices = self._notices, []
        return out

    def describe_sandbox(self, server: Server) -> str:
        s = server.settings
        if s.transport == "http":
            return "remote (HTTP)"
        if self.sandboxed(s):
            return "bubblewrap, " + ("network" if s.network else "no network")
        if s.sandbox is True:
            return "bubblewrap required but unavailable"
        return "OUTSIDE the sandbox"

    def status_line(self, server: Server) -> str:
        if server.status == FAILED and server.retry_at:
            left = server.retry_at - asyncio.get_running_loop().time()
            if left > 0:
                return f"failed (retry in {left:.0f} s)"
        return server.status

    # -- starting and stopping -------------------------------------------

    async def _load_state(self) -> None:
        if self._loaded:
            return
        self._loaded = True
        raw = await self.ledger.get_setting(KEY_DISABLED)
        try:
            names = set(json.loads(raw)) if raw else set()
        except (ValueError, TypeError):
            names = set()
        for name in names:
            if name in self.servers:
                self.servers[name].status = DISABLED

    async def pending(self) -> list[str]:
        """Servers the next turn would start (not started yet, or failed and due again)."""
        await self._load_state()
        now = asyncio.get_running_loop().time()
        return [
            s.name
            for s in self.servers.values()
            if s.status == NOT_STARTED or (s.status == FAILED and now >= s.retry_at)
        ]

    async def ensure_started(self) -> None:
        """Start every server `pending` names, at once; each ends running or failed."""
        async with self._lock:
            names = await self.pending()
            if not names:
                return
            await sdk_ready()
            await asyncio.gather(*(self._start(self.servers[n]) for n in names))

    async def _start(self, server: Server) -> None:
        server.status, server.error = STARTING, ""
        loop = asyncio.get_running_loop()
        try:
            transport = await self._transport(server)
        except ServerProblem as exc:
            self._failed(server, str(exc))
            return
        ready: asyncio.Future = loop.create_future()
        server.stop = asyncio.Event()
        server.task = asyncio.create_task(self._serve(server, transport, ready))
        timeout = server.settings.start_timeout
        try:
            listing = await asyncio.wait_for(asyncio.shield(ready), timeout)
        except TimeoutError:
            await self._halt(server)
            self._failed(
                server, f"did not finish starting (initialize, tools/list) within {timeout:g} s"
            )
            return
        except asyncio.CancelledError:
            await asyncio.shield(self._halt(server))
            server.status = NOT_STARTED
            raise
        except Exception as exc:
            await self._halt(server)
            self._failed(server, f"could not start: {_why(exc)}")
            return
        await self._adopt(server, listing.tools)
        await self._adopt_prompts(server, listing.prompts)
        server.resources = listing.resources
        server.status = RUNNING
        server.failures, server.retry_at = 0, 0.0

    async def _serve(self, server: Server, transport: Any, ready: asyncio.Future) -> None:
        """Hold the connection open until `stop` is set (the task that enters leaves)."""
        from mcp.client.client import Client
        from mcp_types import Implementation

        async def on_message(message: Any) -> None:  # handshake-era change notifications
            kind = LIST_CHANGED.get(str(getattr(message, "method", "")))
            if kind:
                self._changed(server, kind)

        listener: asyncio.Task | None = None
        try:
            async with Client(
                transport,
                mode=self.protocol_mode,
                read_timeout_seconds=max(server.settings.timeout, server.settings.start_timeout),
                client_info=Implementation(name="slop-tui", version=__version__),
                message_handler=on_message,
            ) as client:
                listing = await _read_listing(client)
                server.client = client
                listener = asyncio.create_task(self._listen(server, client))
                if not ready.done():
                    ready.set_result(listing)
                assert server.stop is not None
                await server.stop.wait()
                listener.cancel()
                await asyncio.gather(listener, return_exceptions=True)
        except asyncio.CancelledError:
            if not ready.done():
                ready.cancel()
            raise
        except BaseException as exc:  # an ExceptionGroup from the transport's task group
            if not ready.done():
                ready.set_exception(exc if isinstance(exc, Exception) else RuntimeError(exc))
            elif server.status == RUNNING:
                self._failed(server, f"the connection ended: {_why(exc)}")
        finally:
            server.client = None
            if listener is not None and not listener.done():
                listener.cancel()

    async def _listen(self, server: Server, client: Any) -> None:
        """Follow the server's list changes on a `subscriptions/listen` stream (2026-07-28
        connections; older ones send plain notifications to `on_message`)."""
        caps = client.server_capabilities
        wanted = {
            "tools_list_changed": bool(caps.tools and caps.tools.list_changed),
            "prompts_list_changed": bool(caps.prompts and caps.prompts.list_changed),
            "resources_list_changed": bool(caps.resources and caps.resources.list_changed),
        }
        if not any(wanted.values()):
            return
        kinds = {"ToolsListChanged": "tools", "PromptsListChanged": "prompts"}
        kinds["ResourcesListChanged"] = "resources"
        try:
            async with client.listen(**wanted) as subscription:
                async for event in subscription:
                    kind = kinds.get(type(event).__name__)
                    if kind:
                        self._changed(server, kind)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a handshake-era server (no listen), or the stream ended
            log.debug("MCP server %s: no change stream (%s)", server.name, _why(exc))

    def _changed(self, server: Server, kind: str) -> None:
        """A server said a list changed: read it again (once for a burst of changes)."""
        if server.status != RUNNING:
            return  # starting: the lists are being read anyway
        server.changes.add(kind)
        if server.refresh is None or server.refresh.done():
            server.refresh = asyncio.create_task(self._refresh(server))

    async def _refresh(self, server: Server) -> None:
        await asyncio.sleep(0.05)  # the three notifications of one change come together
        while server.changes:
            kinds, server.changes = set(server.changes), set()
            client = server.client
            if client is None or server.status != RUNNING:
                return
            try:
                async with asyncio.timeout(server.settings.timeout):
                    if "tools" in kinds:
                        before = set(server.tools)
                        await self._adopt(server, await _read_tools(client))
                        added = sorted(set(server.tools) - before)
                        gone = sorted(before - set(server.tools))
                        if added or gone:
                            parts = [f"now offers {', '.join(added)}"] if added else []
                            parts += [f"no longer offers {', '.join(gone)}"] if gone else []
                            self._notices.append(
                                f"MCP server '{server.name}' changed its tools: "
                                f"{'; '.join(parts)}. The next request declares the new list."
                            )
                    if "prompts" in kinds:
                        await self._adopt_prompts(server, await _read_prompts(client))
                    if "resources" in kinds:
                        server.resources = await _read_resources(client)
                        self._notices.append(
                            f"MCP server '{server.name}' changed its resources: "
                            f"{len(server.resources)} offered (/mcp resource list)."
                        )
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self._notices.append(
                    f"MCP server '{server.name}' said its {', '.join(sorted(kinds))} changed, "
                    f"but reading them again failed: {neutralise(_why(exc))}"
                )

    async def settle(self) -> None:
        """Wait (bounded) until every list a server said changed has been read again, so
        the next request declares the current tools."""
        tasks = [s.refresh for s in self.servers.values() if s.refresh and not s.refresh.done()]
        if tasks:
            await asyncio.wait(tasks, timeout=REFRESH_WAIT)

    async def _transport(self, server: Server) -> Any:
        """The SDK transport for a server: a stdio process (in bwrap when sandboxed) or
        a streamable HTTP connection with its headers."""
        s = server.settings
        try:
            if s.transport == "http":
                return _http_transport(s.url, expand_all(s.headers, self.env), s.timeout)
            env = expand_all(s.env, self.env)
        except MissingVariable as exc:
            raise ServerProblem(str(exc)) from None
        from mcp.client.stdio import StdioServerParameters, stdio_client

        cwd = (self.project_root / s.cwd).resolve() if s.cwd else self.project_root
        argv = [s.command, *s.args]
        server.sandboxed = self.sandboxed(s)
        if s.sandbox is True and not server.sandboxed:
            raise ServerProblem(
                f"sandbox = true, but there is no sandbox here ({self._sandbox().reason}); "
                "set sandbox = false to run it outside"
            )
        if not server.sandboxed and (setpriv := shutil.which("setpriv")):
            # Killed with slop-tui even when slop-tui is killed with no time to stop it
            # (SIGKILL, or a SIGTERM to the full-screen app); bwrap does this in the sandbox.
            argv = [setpriv, "--pdeathsig", "KILL", "--", *argv]
        if server.sandboxed:
            box = replace(self._sandbox(), network=s.network)
            argv = await asyncio.to_thread(
                box.argv, argv, root=self.project_root, ledger=self.ledger.path
            )
            at = argv.index("--chdir")
            argv[at + 1] = str(cwd)
        if server.errlog is not None:
            server.errlog.close()
        server.errlog, server.err_mark = tempfile.TemporaryFile(mode="w+b"), 0
        params = StdioServerParameters(command=argv[0], args=argv[1:], env=env, cwd=str(cwd))
        return stdio_client(params, errlog=server.errlog)

    def _failed(self, server: Server, why: str) -> None:
        tail = _tail(server.errlog, server.err_mark)
        if tail:
            why = f"{why}; its stderr ends: {tail}"
        server.status, server.error = FAILED, neutralise(why)
        server.failures += 1
        delay = min(MAX_BACKOFF, 2.0 ** (server.failures - 1))
        server.retry_at = asyncio.get_running_loop().time() + delay
        server.tools.clear()
        self._notices.append(
            f"MCP server '{server.name}' {server.error}. It is started again on the next "
            f"turn after {delay:g} s (/mcp restart {server.name} tries now)."
        )

    async def _halt(self, server: Server) -> None:
        """End a server's connection and process; bounded, also when it hangs."""
        task, server.task = server.task, None
        if server.refresh is not None and not server.refresh.done():
            server.refresh.cancel()
        server.changes.clear()
        if server.stop is not None:
            server.stop.set()
        if task is None:
            return
        try:
            await asyncio.wait_for(asyncio.shield(task), STOP_TIMEOUT)
        except TimeoutError:
            task.cancel()
        except BaseException:  # its failure is already recorded; stopping is what matters
            pass
        with contextlib.suppress(BaseException):
            await asyncio.gather(task, return_exceptions=True)

    async def _retire(self, server: Server) -> None:
        """Stop a server that is no longer configured and let go of its stderr file."""
        await self._halt(server)
        server.status = STOPPED
        if server.errlog is not None:
            server.errlog.close()
            server.errlog = None

    async def aclose(self) -> None:
        """Stop every server (the workspace closes)."""
        await asyncio.gather(
            *(self._halt(s) for s in self.servers.values()),
            *self._stopping,
            return_exceptions=True,
        )
        for server in self.servers.values():
            if server.status in (RUNNING, STARTING):
                server.status = STOPPED
            if server.errlog is not None:
                server.errlog.close()
                server.errlog = None

    # -- the tools of a server ---------------------------------------------

    async def _adopt(self, server: Server, listed: list[Any]) -> None:
        """Take a server's tool list: checked, named, registered in the ledger; a
        first-seen tool's description told to the user; a changed one held."""
        tools: dict[str, RemoteTool] = {}  # built whole, then swapped in
        skipped: list[tuple[str, str]] = []
        rows, offered = [], []
        taken = {t for s in self.servers.values() if s is not server for t in s.tools}
        for item in listed:
            name = str(item.name)
            schema, why = check_schema(item.input_schema)
            exposed = exposed_name(server.name, name)
            if schema is None:
                skipped.append((name, why))
                continue
            if exposed in taken or exposed in tools:
                skipped.append((name, f"its name {exposed} is taken by another tool"))
                continue
            digest = definition_hash(item.description, item.input_schema)
            key = f"{KEY_ACCEPTED}{server.name}/{name}"
            accepted = await self.ledger.get_setting(key)
            annotations = getattr(item, "annotations", None)
            tool = RemoteTool(
                server=server.name,
                name=name,
                exposed=exposed,
                description=description_for_model(server.name, item.description),
                schema=schema,
                read_only=bool(getattr(annotations, "read_only_hint", False)),
                digest=digest,
            )
            if accepted is None:
                await self.ledger.set_setting(key, digest)
                offered.append(f"{exposed}: {tool.description}")
            elif accepted != digest:
                tool.held = True
                self._notices.append(
                    f"MCP server '{server.name}' changed the description or schema of "
                    f"{exposed}; it is not offered to the model until you accept it "
                    f"(/mcp accept {server.name} {name}). It now reads: {tool.description}"
                )
            tools[exposed] = tool
            rows.append((exposed, tool.description, json.dumps(schema)))
        server.tools, server.skipped = tools, skipped
        if offered:  # shown once: the first time the tool is offered to the model
            self._notices.append(
                f"MCP server '{server.name}' offers new tools: " + "; ".join(offered)
            )
        if rows:
            await self.ledger.register_tools(rows)

    async def _adopt_prompts(self, server: Server, listed: list[tuple[Any, str]] | None) -> None:
        """Take a server's prompts as skills `mcp__SERVER__PROMPT` in the ledger: a new one
        is added (and told to the user), a changed one is held until accepted, one the
        user deleted stays deleted. A prompt with required arguments cannot be a skill."""
        if listed is None:
            return
        prompts: dict[str, RemotePrompt] = {}
        skipped: list[tuple[str, str]] = []
        offered = []
        for item, text in listed:
            name = str(item.name)
            required = [a.name for a in (item.arguments or []) if a.required]
            if required:
                why = f"it needs arguments ({', '.join(required)}); a skill takes none"
                skipped.append((name, why))
                continue
            if not text.strip():
                skipped.append((name, "it has no text (or prompts/get failed)"))
                continue
            body = neutralise(text.strip())
            if len(body) > MAX_PROMPT_CHARS:
                body = body[: MAX_PROMPT_CHARS - 1] + "…"
            prompt = RemotePrompt(
                name=name,
                skill=exposed_name(server.name, name),
                description=description_for_model(server.name, item.description),
                patch=(
                    f"(A prompt of MCP server '{server.name}', as the user accepted it: "
                    f"text from that server.)\n{body}"
                ),
                digest=definition_hash(item.description, text),
            )
            key = f"{KEY_ACCEPTED}{server.name}/prompt/{name}"
            accepted = await self.ledger.get_setting(key)
            if accepted is None:
                if await self.ledger.get_skill(prompt.skill) is not None:
                    skipped.append((name, f"a skill named {prompt.skill} exists already"))
                    continue
                await self.ledger.add_skill(prompt.skill, prompt.description, prompt.patch)
                await self.ledger.set_setting(key, prompt.digest)
                offered.append(f"{prompt.skill}: {prompt.description}")
            elif accepted != prompt.digest and server.held_prompts.get(name) != prompt:
                server.held_prompts[name] = prompt
                self._notices.append(
                    f"MCP server '{server.name}' changed its prompt '{name}'; the skill "
                    f"{prompt.skill} keeps the text you accepted until you accept the new one "
                    f"(/mcp accept {server.name} {name}). It now reads: {body[:500]}"
                )
            prompts[name] = prompt
        server.prompts, server.skipped_prompts = prompts, skipped
        if offered:
            self._notices.append(
                f"MCP server '{server.name}' offers prompts as skills (/skill activate NAME): "
                + "; ".join(offered)
            )

    async def accept(self, server_name: str, tool_name: str = "") -> list[str]:
        """Accept held tools of a server (one, or all); returns the names accepted."""
        server = self.servers[server_name]
        done = []
        for tool in server.tools.values():
            if tool.held and (not tool_name or tool_name in (tool.name, tool.exposed)):
                await self.ledger.set_setting(
                    f"{KEY_ACCEPTED}{server.name}/{tool.name}", tool.digest
                )
                tool.held = False
                done.append(tool.exposed)
        for name, prompt in list(server.held_prompts.items()):
            if tool_name and tool_name not in (name, prompt.skill):
                continue
            skill = await self.ledger.get_skill(prompt.skill)
            if skill is None:
                await self.ledger.add_skill(prompt.skill, prompt.description, prompt.patch)
            else:
                await self.ledger.update_skill(
                    skill.id,
                    name=prompt.skill,
                    description=prompt.description,
                    prompt_patch=prompt.patch,
                )
            await self.ledger.set_setting(
                f"{KEY_ACCEPTED}{server.name}/prompt/{name}", prompt.digest
            )
            del server.held_prompts[name]
            done.append(prompt.skill)
        return done

    # -- commands ------------------------------------------------------------

    async def restart(self, name: str) -> Server:
        server = self.servers[name]
        async with self._lock:
            await self._halt(server)
            server.failures, server.retry_at = 0, 0.0
            await sdk_ready()
            await self._start(server)
        return server

    async def read_resource(self, name: str, uri: str) -> tuple[str, str, str]:
        """(name, MIME type, text) of a server's text resource, for the context; the server
        is started first if it has not been. Raises ResourceProblem (one line)."""
        await self._load_state()
        server = self.servers[name]
        if server.status == DISABLED:
            raise ResourceProblem(f"MCP server '{name}' is disabled; /mcp enable {name} first")
        if server.status != RUNNING:
            await self.ensure_started()
        client = server.client
        if server.status != RUNNING or client is None:
            why = f": {server.error}" if server.error else ""
            raise ResourceProblem(f"MCP server '{name}' is not running ({server.status}{why})")
        from mcp.shared.exceptions import MCPError

        timeout = server.settings.timeout
        try:
            async with asyncio.timeout(timeout):
                result = await client.read_resource(uri, cache_mode="bypass")
        except TimeoutError:
            raise ResourceProblem(
                f"MCP server '{name}' did not answer resources/read within {timeout:g} s"
            ) from None
        except MCPError as exc:
            raise ResourceProblem(
                f"MCP server '{name}' could not read {uri}: {neutralise(str(exc.message))[:300]}"
            ) from None
        except Exception as exc:  # a reply the SDK could not read
            raise ResourceProblem(
                f"MCP server '{name}' sent a reply that could not be read ({_why(exc)})"
            ) from None
        texts, binary = [], []
        for item in result.contents:
            text = getattr(item, "text", None)
            if isinstance(text, str):
                texts.append(text)
            else:
                binary.append(getattr(item, "mime_type", None) or "unknown type")
        if not texts:
            raise ResourceProblem(
                f"{uri} of MCP server '{name}' is binary ({', '.join(binary) or 'empty'}); "
                "only text resources can join the context"
            )
        text = cap_text(neutralise("\n\n".join(texts)), MAX_RESOURCE_CHARS, "resource text")
        known = {u: (n, m) for u, n, m in server.resources}
        title, mime = known.get(uri, ("", ""))
        mime = mime or str(getattr(result.contents[0], "mime_type", None) or "")
        return neutralise(title), neutralise(mime), text

    async def set_enabled(self, name: str, enabled: bool) -> Server:
        await self._load_state()
        server = self.servers[name]
        async with self._lock:
            if enabled:
                if server.status == DISABLED:
                    server.status, server.error, server.failures = NOT_STARTED, "", 0
            else:
                await self._halt(server)
                server.status, server.tools = DISABLED, {}
        raw = await self.ledger.get_setting(KEY_DISABLED)
        try:
            names = set(json.loads(raw)) if raw else set()
        except (ValueError, TypeError):
            names = set()
        names = (names - {name}) if enabled else (names | {name})
        await self.ledger.set_setting(KEY_DISABLED, json.dumps(sorted(names)))
        return server

    # -- calls ---------------------------------------------------------------

    def auto_approved(self, exposed: str) -> bool:
        """Whether the server's `approve` lets this call run without asking."""
        found = self.find(exposed)
        if found is None:
            return False
        server, tool = found
        policy = server.settings.approve
        return policy == APPROVE_ALL or (policy == APPROVE_READS and tool.read_only)

    async def call(self, exposed: str, arguments: dict[str, Any]) -> ToolResult:
        """Run one call; never raises but for cancellation (which the SDK passes on to
        the server as `notifications/cancelled`)."""
        found = self.find(exposed)
        if found is None:
            return error_result(exposed, f"no running MCP server offers '{exposed}'.")
        server, tool = found
        if tool.held:
            return error_result(
                exposed,
                f"'{exposed}' changed since the user accepted it and is held until they "
                "accept it again; it was not run.",
            )
        client = server.client
        if server.status != RUNNING or client is None:
            why = f": {server.error}" if server.error else ""
            return error_result(
                exposed, f"MCP server '{server.name}' is not running ({server.status}{why})."
            )
        from mcp.shared.exceptions import MCPError
        from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT

        timeout = server.settings.timeout
        server.err_mark = _size(server.errlog)
        try:
            result = await asyncio.wait_for(
                client.call_tool(tool.name, arguments, read_timeout_seconds=timeout),
                timeout + 1.0,
            )
        except (TimeoutError, MCPError) as exc:
            code = getattr(exc, "code", None)
            if isinstance(exc, MCPError) and code not in (CONNECTION_CLOSED, REQUEST_TIMEOUT):
                return error_result(
                    exposed,
                    f"MCP server '{server.name}' answered with an error: "
                    f"{neutralise(str(exc.message))[:500]}",
                )
            if isinstance(exc, TimeoutError) or code == REQUEST_TIMEOUT:
                why = f"did not answer {tool.name} within {timeout:g} s"
            else:
                why = f"closed the connection during {tool.name}"
            await self._halt(server)
            self._failed(server, why)
            return error_result(exposed, f"MCP server '{server.name}' {server.error}.")
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a result the SDK could not read, a broken transport
            await self._halt(server)
            self._failed(server, f"sent a reply that could not be read ({_why(exc)})")
            return error_result(exposed, f"MCP server '{server.name}' {server.error}.")
        text, is_error = result_text(result, server.name)
        text = cap_text(text, MAX_RESULT_CHARS)
        if is_error:
            return error_result(exposed, f"MCP server '{server.name}' reported an error", text)
        return ok_result(exposed, text)


async def _pages(list_page: Callable[..., Any], field_name: str) -> list[Any]:
    """Every item of a paginated list (at most MAX_PAGES pages), read past the cache."""
    items: list[Any] = []
    cursor = None
    for _ in range(MAX_PAGES):
        page = await list_page(cursor=cursor, cache_mode="refresh")
        items.extend(getattr(page, field_name))
        cursor = page.next_cursor
        if not cursor:
            break
    return items


async def _read_tools(client: Any) -> list[Any]:
    return await _pages(client.list_tools, "tools")


async def _read_prompts(client: Any) -> list[tuple[Any, str]] | None:
    """The server's prompts, each with its text (prompts without required arguments);
    None when the server offers no prompts."""
    if client.server_capabilities.prompts is None:
        return None
    out = []
    for item in await _pages(client.list_prompts, "prompts"):
        text = ""
        if not any(a.required for a in (item.arguments or [])):
            try:
                got = await client.get_prompt(item.name)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # one broken prompt is no reason to refuse the server
                log.debug("MCP prompts/get %s failed: %s", item.name, _why(exc))
                got = None
            text = "\n\n".join(block_text(m.content, "") for m in got.messages) if got else ""
        out.append((item, text))
    return out


async def _read_resources(client: Any) -> list[tuple[str, str, str]]:
    if client.server_capabilities.resources is None:
        return []
    return [
        (str(r.uri), str(r.name or ""), str(r.mime_type or ""))
        for r in await _pages(client.list_resources, "resources")
    ]


async def _read_listing(client: Any) -> Listing:
    """The tools (a server that cannot list them fails to start), then its prompts and
    resources (a server that cannot list those still offers its tools)."""
    tools = await _read_tools(client)
    prompts: list[tuple[Any, str]] | None = None
    resources: list[tuple[str, str, str]] = []
    try:
        prompts = await _read_prompts(client)
        resources = await _read_resources(client)
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        log.debug("MCP prompts or resources could not be listed: %s", _why(exc))
    return Listing(tools=tools, prompts=prompts, resources=resources)


def _http_transport(url: str, headers: dict[str, str], timeout: float) -> Any:
    """A streamable HTTP transport whose HTTP client (headers, timeouts) closes with it."""
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    @contextlib.asynccontextmanager
    async def transport():
        read = max(timeout, 300.0)  # a server may hold a response stream open
        async with httpx2.AsyncClient(
            headers=headers, timeout=httpx2.Timeout(timeout, read=read)
        ) as http:
            async with streamable_http_client(url, http_client=http) as streams:
                yield streams

    return transport()


def _why(exc: BaseException) -> str:
    """One line for an exception, the first leaf of an exception group."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:300]}" if text else type(exc).__name__


def _size(errlog: IO[bytes] | None) -> int:
    if errlog is None:
        return 0
    try:
        return errlog.seek(0, 2)
    except (OSError, ValueError):
        return 0


def _tail(errlog: IO[bytes] | None, since: int = 0) -> str:
    """The last lines a stdio server wrote to its stderr after offset `since`."""
    if errlog is None:
        return ""
    try:
        errlog.seek(0, 2)
        errlog.seek(max(since, errlog.tell() - 4 * STDERR_TAIL))
        text = errlog.read().decode("utf-8", "replace")
        errlog.seek(0, 2)
    except (OSError, ValueError):
        return ""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return neutralise(" | ".join(lines[-3:])[-STDERR_TAIL:])
