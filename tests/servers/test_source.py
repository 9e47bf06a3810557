"""The source server goes on answering while a search that backtracks for ever runs, which ends
with one line saying what to do; and over stdio, as .mcp.json starts it, neither a linked file in an
indexed tree nor a linked checkout folder lets a tool read or grep what the link points at."""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path

import pytest
from fastmcp import Client
from fastmcp.client.transports import StdioTransport

import servers.source as source
from apex_core.sources import PackageSource, build_index
from apex_core.sources.explorer import SourceExplorer

REPO_ROOT = Path(__file__).resolve().parents[2]
CATASTROPHIC = r"(a+)+$"
LONG_AS = "a" * 27 + "!"
"""Python's re needs about a minute for (a+)+$ against this line, holding the GIL all along."""


@pytest.fixture
def long_line_tree(tmp_path: Path, monkeypatch) -> Path:
    """The server's explorer reads one package whose file has a long line of a's; a search gets 2 s."""
    root = tmp_path / "toystack"
    root.mkdir()
    (root / "long.py").write_text(f"x = '{LONG_AS}'\ny = 2\n")
    explorer = SourceExplorer(build_index([PackageSource(name="toystack", version="1", root=root)], cache_dir=tmp_path / "cache"),
                              grep_timeout_s=2.0)
    monkeypatch.setattr(source, "_explorer", (time.monotonic(), explorer))
    return root


def test_other_calls_are_answered_while_a_search_that_backtracks_for_ever_runs_and_it_ends_with_one_line(long_line_tree):
    async def session():
        async with Client(source.mcp) as client:
            search = asyncio.ensure_future(client.call_tool("grep_source", {"pattern": CATASTROPHIC}, raise_on_error=False))
            waits, texts = [], set()
            while not search.done():  # call after call, for as long as the search is in flight
                asked = time.monotonic()
                reply = await client.call_tool("read_source", {"location": f"{long_line_tree / 'long.py'}:2", "context": 0})
                waits.append(time.monotonic() - asked)
                texts.add(reply.structured_content["text"])
            return await search, waits, texts

    search, waits, texts = asyncio.run(session())
    # Without a child process the search holds the GIL for about a minute: one call waits for all of it.
    assert len(waits) >= 10 and max(waits) < 10, waits
    assert search.is_error
    assert search.content[0].text == ("the search did not finish in 2 s: simplify the pattern (avoid nested quantifiers such as "
                                      "(a+)+) or search fewer files (one package, a path glob)")
    assert texts == {"2 | y = 2"}


def test_over_stdio_neither_a_linked_file_nor_a_linked_checkout_folder_can_be_read_or_grepped(tmp_path):
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text("-----BEGIN PRIVATE KEY----- hunter2\n")
    (home / "notes.py").write_text("TOKEN = 'hunter2'\n")
    checkouts = tmp_path / "sources"
    examples = checkouts / "examples"
    examples.mkdir(parents=True)
    (examples / "scale.hip").write_text("__global__ void scale_kernel(float* x) { x[0] *= 2.0f; }\n")
    (examples / "notes.py").symlink_to(home / "notes.py")  # a linked file inside an indexed tree
    (checkouts / "evil").symlink_to(home, target_is_directory=True)  # a linked checkout folder
    entry = json.loads((REPO_ROOT / ".mcp.json").read_text())["mcpServers"]["apex-source"]
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "APEX_CACHE_DIR": str(tmp_path / "cache"),
           "APEX_SOURCE_CACHE_DIR": os.environ["APEX_SOURCE_CACHE_DIR"], "APEX_SOURCE_CHECKOUTS": str(checkouts), **entry["env"]}
    transport = StdioTransport(command=entry["command"], args=entry["args"], env=env, cwd=str(REPO_ROOT))
    locations = [examples / "notes.py", checkouts / "evil" / "notes.py", checkouts / "evil" / ".ssh" / "id_rsa", home / "notes.py"]

    async def session():
        async with Client(transport) as client:
            reads = [await client.call_tool("read_source", {"location": f"{path}:1"}, raise_on_error=False) for path in locations]
            in_tree = await client.call_tool("grep_source", {"pattern": "hunter2", "package": "checkout:examples"},
                                             raise_on_error=False)
            in_link = await client.call_tool("grep_source", {"pattern": "hunter2", "package": "checkout:evil"}, raise_on_error=False)
            kernel = await client.call_tool("read_source", {"location": f"{examples / 'scale.hip'}:1", "context": 0})
            return reads, in_tree, in_link, kernel

    reads, in_tree, in_link, kernel = asyncio.run(session())
    for path, reply in zip(locations, reads):
        assert reply.is_error and "outside the indexed sources" in reply.content[0].text, (path, reply.content)
        assert "hunter2" not in reply.content[0].text
    assert not in_tree.is_error and in_tree.structured_content["hits"] == []
    assert in_link.is_error and "'checkout:evil' is not indexed here" in in_link.content[0].text
    assert kernel.structured_content["package"] == "checkout:examples" and "scale_kernel" in kernel.structured_content["text"]
