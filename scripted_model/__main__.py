"""``python -m scripted_model --script FILE [--listen HOST:PORT] [--record FILE]``.

Prints two lines, ``ANTHROPIC_BASE_URL=http://HOST:PORT`` (for Claude Code) and
``OPENAI_BASE_URL=http://HOST:PORT/v1`` (a Responses API base URL, for Codex), then serves until
interrupted (or, with ``--exit-when-done``, until every scripted turn has been answered), so a
shell can do:

    python -m scripted_model --script grade-cpu-mini-rms-norm --record requests.jsonl &
    ANTHROPIC_BASE_URL=http://127.0.0.1:8765 ANTHROPIC_API_KEY=scripted claude -p "..."
    SCRIPTED_KEY=scripted codex exec -c model_provider=scripted \
        -c 'model_providers.scripted={name="scripted", base_url="http://127.0.0.1:8765/v1", env_key="SCRIPTED_KEY", wire_api="responses"}' "..."
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from pathlib import Path

from apex_core.errors import ApexUserError
from apex_core.hosting.net import parse_host_port
from scripted_model.script import load_script
from scripted_model.server import ScriptedModelServer


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scripted_model", description=__doc__.splitlines()[0])
    parser.add_argument("--script", required=True, help="script file (YAML or JSON), or the name of a shipped script")
    parser.add_argument("--listen", default="127.0.0.1:8765", help="HOST:PORT to serve on (port 0: any free port)")
    parser.add_argument("--record", type=Path, help="append every request received to this JSON-lines file")
    parser.add_argument("--exit-when-done", action="store_true", help="stop once every scripted turn has been answered")
    args = parser.parse_args(argv)
    try:
        script = load_script(args.script)
        address = parse_host_port(args.listen)
        server = ScriptedModelServer(script, address.host, address.port, args.record)
    except (ApexUserError, OSError) as error:
        sys.stderr.write(f"scripted model: error: {error}\n")
        return 2
    sys.stdout.write(f"ANTHROPIC_BASE_URL={server.url}\nOPENAI_BASE_URL={server.url}/v1\n")
    sys.stdout.flush()
    if args.exit_when_done:
        server.start()
        try:
            while not server.finished:
                time.sleep(0.2)
            time.sleep(0.5)  # let the last stream drain
        finally:
            server.stop()
        return 0
    try:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        return 0


if __name__ == "__main__":
    raise SystemExit(main())
