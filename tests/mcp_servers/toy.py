"""A small MCP server written with the SDK's MCPServer (FastMCP in SDK 1.x), for the tests.

Run: `python -m tests.mcp_servers.toy [stdio | http PORT] [MARKER]`. The marker is
only there so a test can find the process in /proc. `TOY_DESC` replaces the
description of `echo` (a server that changes a tool's description).
"""

from __future__ import annotations

import os
import sys
import time

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.utilities.types import Image
from mcp_types import ResourceLink, TextContent, ToolAnnotations

server = MCPServer("toy")


@server.tool(
    description=os.environ.get("TOY_DESC", "Echo the text back."),
    annotations=ToolAnnotations(read_only_hint=True),
)
def echo(text: str) -> str:
    return f"echo: {text}"


@server.tool(description="Return `size` characters of text.")
def big(size: int) -> str:
    return ("0123456789abcdef" * (size // 16 + 1))[:size]


@server.tool(description="Sleep, then answer.")
def nap(seconds: float) -> str:
    time.sleep(seconds)
    return "awake"


@server.tool(description="Exit the server process in the middle of the call.")
def crash() -> str:
    sys.stderr.write("toy: crashing on purpose\n")
    sys.stderr.flush()
    os._exit(3)


@server.tool(description="Answer with a line that is not JSON, then nothing.")
def garbage() -> str:
    sys.stdout.write("this is {not json\n")
    sys.stdout.flush()
    time.sleep(3600)
    return "never"


@server.tool(description="An image, a resource link and text.")
def mixed() -> list:
    png = bytes.fromhex("89504e470d0a1a0a") + b"\0" * 32
    return [
        TextContent(type="text", text="three blocks"),
        Image(data=png, format="png").to_image_content(),
        ResourceLink(type="resource_link", name="notes", uri="file:///notes.txt"),
    ]


@server.tool(description="Read a file (what the sandbox lets the server see).")
def read(path: str) -> str:
    with open(path, "rb") as fh:
        return f"{len(fh.read())} bytes"


@server.tool(description="Fail with a tool error.")
def fail() -> str:
    raise ValueError("this tool always fails")


if __name__ == "__main__":
    mode = sys.argv[1] if len(sys.argv) > 1 else "stdio"
    if mode == "http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run()
