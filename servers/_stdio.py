"""The stdio transport of every Apex MCP server: newline-delimited JSON-RPC on stdin and stdout, each
line read with a bound and screened by ``servers._guard`` before the server sees it.

Why not the SDK's ``stdio_server``: it reads a whole line into memory whatever its length, and
hands the server what the SDK's parser makes of it (a request with an object id becomes a
notification nobody answers). Here the reader stops keeping a line once it passes the limit,
answers it at once and skips to the next newline, and every line the guard refuses gets its error
reply on stdout; the server only ever receives messages that parsed.

As with the SDK's transport, while serving fd 0 reads /dev/null and fd 1 writes to stderr, so
neither the tools nor the processes they start can eat a request or print into the protocol;
the wire is served from private duplicates and both descriptors are put back at the end.
"""

from __future__ import annotations

import fcntl
import logging
import os
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager

import anyio
import anyio.to_thread
from anyio.abc import ObjectReceiveStream, ObjectSendStream
from mcp.shared.message import SessionMessage

from servers._guard import Rejection, screen, too_large

CHUNK = 64 * 1024
log = logging.getLogger("servers")


@contextmanager
def _claimed_stdio() -> Iterator[tuple[int, int]]:
    """Private descriptors of the wire (stdin, stdout); meanwhile fd 0 is /dev/null and fd 1 stderr."""
    wire_in = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
    wire_out = fcntl.fcntl(1, fcntl.F_DUPFD_CLOEXEC, 3)
    silent = os.open(os.devnull, os.O_RDONLY)
    os.dup2(silent, 0)
    os.close(silent)
    sys.stdout.flush()
    os.dup2(2, 1)
    try:
        yield wire_in, wire_out
    finally:
        sys.stdout.flush()
        os.dup2(wire_in, 0)
        os.dup2(wire_out, 1)
        os.close(wire_out)
        # wire_in stays open: an abandoned read may still block on it, and a closed number could be
        # handed to another file under that read. It is close-on-exec and goes with the process.


class _Oversized:
    """A line that passed the limit: its start was dropped, the rest is skipped up to its newline."""


async def lines(fd: int, limit: int) -> AsyncIterator[bytes | _Oversized]:
    """The lines read from ``fd`` without their line ending, each as soon as it is complete; a line
    longer than ``limit`` bytes is reported (once, when it passes the limit) instead of kept."""
    line = bytearray()
    skipping = False
    while True:
        chunk = await anyio.to_thread.run_sync(os.read, fd, CHUNK, abandon_on_cancel=True)
        if not chunk:
            break
        start = 0
        while start <= len(chunk):
            end = chunk.find(b"\n", start)
            piece = chunk[start:] if end < 0 else chunk[start:end]
            if not skipping:
                line += piece
                if len(line) > limit:
                    skipping = True
                    line.clear()
                    yield _Oversized()
            if end < 0:
                break
            if not skipping:
                yield bytes(line.removesuffix(b"\r"))
            line.clear()
            skipping = False
            start = end + 1
    if line and not skipping:
        yield bytes(line)


@asynccontextmanager
async def guarded_stdio(limit: int) -> AsyncIterator[tuple[ObjectReceiveStream[SessionMessage | Exception],
                                                            ObjectSendStream[SessionMessage]]]:
    """The (read, write) streams a server runs on, served over the process's stdin and stdout. On
    the way out the reader stops and every reply already sent is written before this returns."""
    with _claimed_stdio() as (wire_in, wire_out):
        to_server, from_wire = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        to_wire, from_server = anyio.create_memory_object_stream[SessionMessage](0)
        replies = to_wire.clone()  # the reader's own: the server closing its stream must not end the guard's replies
        reading = anyio.CancelScope()

        async def read() -> None:
            with reading:
                async with to_server:
                    async for line in lines(wire_in, limit):
                        if isinstance(line, _Oversized):
                            await replies.send(SessionMessage(too_large(limit).error))
                            continue
                        if not line.strip():
                            continue  # a blank line is no message at all
                        screened = screen(line)
                        if isinstance(screened, Rejection):
                            await replies.send(SessionMessage(screened.error))
                        else:
                            await to_server.send(SessionMessage(screened))

        async def write() -> None:
            broken = False
            async with from_server:
                async for message in from_server:
                    if broken:
                        continue  # the client has gone: its stdin ends too, and the server with it
                    data = message.message.model_dump_json(by_alias=True, exclude_unset=True).encode() + b"\n"
                    try:
                        await anyio.to_thread.run_sync(_write_all, wire_out, data)
                    except OSError as error:
                        log.warning("stdout is closed (%s): replies from now on are dropped", error)
                        broken = True

        async with anyio.create_task_group() as group:
            group.start_soon(read)
            group.start_soon(write)
            try:
                yield from_wire, to_wire
            finally:
                reading.cancel()
                await replies.aclose()
                await to_wire.aclose()  # the writer ends once both senders are closed and it has written all


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
