"""apex leaderboard: one agent's rows and standings, or a one-line error naming the agents there are."""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing

from apex_core.pipeline.leaderboard import Leaderboard


def _board(folder):
    board = Leaderboard(folder)
    rows = [(f"run-{agent}", "cpu-mini__rms_norm", "2026-12-04T00:00:00+00:00", "cpu-mini", "cpu", agent, "model-x", "dev",
             "ok", 60.0, score, 1.2, 1, 600.0, 610.0, 1.01, 0.5, 1, None, None)
            for agent, score in (("replay", 0.6), ("claude", 0.9))]
    with closing(sqlite3.connect(board.path)) as db, db:
        db.executemany(f"INSERT INTO entries VALUES ({', '.join('?' * 20)})", rows)
    return folder


def test_one_agents_leaderboard_shows_only_its_rows_and_its_standing(apex_cli, tmp_path):
    shown = apex_cli("leaderboard", "--results-dir", str(_board(tmp_path)), "--agent", "replay", "--json")
    assert shown.returncode == 0, shown.stderr
    board = json.loads(shown.stdout)
    assert {e["agent"] for e in board["entries"]} == {"replay"} and [s["agent"] for s in board["standings"]] == ["replay"]


def test_an_agent_the_board_never_saw_is_one_line_naming_those_it_did(apex_cli, tmp_path):
    refused = apex_cli("leaderboard", "--results-dir", str(_board(tmp_path)), "--agent", "nope")
    lines = refused.stderr.strip().splitlines()
    assert refused.returncode == 2 and len(lines) == 1 and "'nope'" in lines[0] and "claude, replay" in lines[0], refused.stderr


def test_a_leaderboard_file_that_is_not_a_database_is_one_line_with_the_way_out(apex_cli, tmp_path):
    (tmp_path / "leaderboard.sqlite").write_text("garbage, not SQLite")
    refused = apex_cli("leaderboard", "--results-dir", str(tmp_path))
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert refused.stderr.strip() == (f"apex: error: {tmp_path}/leaderboard.sqlite: not a leaderboard Apex can read (file is not a "
                                      f"database); move it aside (mv {tmp_path}/leaderboard.sqlite {tmp_path}/leaderboard.sqlite.bad) "
                                      "and the next scored run starts a new one")


def test_a_results_folder_whose_name_the_file_system_refuses_is_one_line(apex_cli, tmp_path):
    too_long = tmp_path / ("x" * 300)
    refused = apex_cli("run", "--workload", "cpu-mini", "--results-dir", str(too_long))
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert refused.stderr.startswith("apex: error: File name too long: ") and len(refused.stderr.strip().splitlines()) == 1
    assert list(tmp_path.iterdir()) == []  # no run folder, nothing half-made
