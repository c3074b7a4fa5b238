"""A second real MCP server for the gateway's tests (issue #19), on the official Python SDK's `MCPServer`: tools
that ask the client (sampling, elicitation), a slow tool to cancel, and a tool with a `number` parameter.

- `summarize_note` asks the client's model (`sampling/createMessage`) and returns what it said.
- `choose_subject` asks the client's person (`elicitation/create`) for a subject and returns it.
- `slow_count` appends `started` to `$NOTES_DIR/calls.log`, sleeps `seconds`, then appends `finished`; a
  cancelled call appends `cancelled` instead.
- `tip` appends `tip AMOUNT` to `$NOTES_DIR/calls.log`.
- `charge_then_fail` appends `charged` to `$NOTES_DIR/calls.log`, then answers a JSON-RPC error (`-32000`, a
  server error): it acted, and its answer says it failed. An `amount` below 1 is refused first, with invalid
  params (`-32602`), and nothing is charged.
- `--http` serves streamable HTTP as `notes_server.py --http` does.
"""

from __future__ import annotations

import os
import sys
import warnings
from pathlib import Path

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import MCPError
from mcp.types import SamplingMessage, TextContent
from pydantic import BaseModel

from notes_server import serve_http

NOTES = Path(os.environ.get("NOTES_DIR", "."))

server = MCPServer("ask", version="1.0.0")

# Sampling is deprecated in the protocol's 2026 revision; the gateway speaks 2025-06-18, where it is not.
warnings.filterwarnings("ignore", category=DeprecationWarning)


def count(line: str) -> None:
    with open(NOTES / "calls.log", "a", encoding="utf-8") as f:
        f.write(line + "\n")


@server.tool()
async def summarize_note(title: str, ctx: Context) -> str:
    """Summarize a note with the client's model."""
    count("summarize_note")
    message = SamplingMessage(role="user", content=TextContent(type="text", text=f"Summarize the note `{title}`."))
    result = await ctx.session.create_message([message], max_tokens=50, related_request_id=ctx.request_id)
    said = getattr(result.content, "text", "")
    return f"summary of {title}: {said} (by {result.model})"


class Subject(BaseModel):
    subject: str


@server.tool()
async def choose_subject(to: str, ctx: Context) -> str:
    """Ask the person for a mail's subject."""
    count("choose_subject")
    answer = await ctx.elicit(f"What subject for the mail to {to}?", Subject)
    if answer.action == "accept":
        return f"subject for {to}: {answer.data.subject}"
    return f"no subject for {to}: {answer.action}"


@server.tool()
async def slow_count(seconds: float) -> str:
    """Count slowly."""
    count("started")
    try:
        await anyio.sleep(seconds)
    except anyio.get_cancelled_exc_class():
        count("cancelled")
        raise
    count("finished")
    return f"counted for {seconds} s"


@server.tool()
def charge_then_fail(amount: int) -> str:
    """Charge, then fail."""
    if amount < 1:
        raise MCPError(code=-32602, message="the amount must be at least 1")
    count("charged")
    raise MCPError(code=-32000, message="the payment provider timed out after the charge")


@server.tool()
def tip(amount: float, to: str) -> str:
    """Send a tip."""
    count(f"tip {amount}")
    return f"tipped {to} {amount}"


def main() -> None:
    (NOTES / "server.pid").write_text(str(os.getpid()), encoding="utf-8")
    if "--http" in sys.argv:
        serve_http(server, NOTES, json_response="--json" in sys.argv)
    else:
        server.run("stdio")


if __name__ == "__main__":
    main()
