"""`make bench --peers`: a peer that cannot be installed or started stays in
the comparison, as a column saying why and a MISS line, never dropped. The
start failure is a real process that exits at once (no peer is installed
here: CI does not install the peers)."""

from __future__ import annotations

import os
import stat

import pytest

from bench import compare, peers, report


def fail_install(name, minimum=(3, 11), log=None):
    raise peers.PeerError("pip could not resolve the pins")


def fake_venv(tmp_path, script: str):
    """A virtualenv stand-in whose `langgraph` is `script`."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(parents=True)
    exe = bin_dir / "langgraph"
    exe.write_text("#!/bin/sh\n" + script + "\n")
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    return tmp_path


@pytest.mark.parametrize("name", peers.PEERS)
def test_a_peer_that_cannot_be_installed_is_reported(tmp_path, monkeypatch, name):
    monkeypatch.setattr(peers, "install", fail_install)
    peer = peers.bring_up(name, "postgres://postgres@127.0.0.1:5432/postgres", "t", tmp_path)
    assert not peer.running
    assert peer.status == "install failed: pip could not resolve the pins"
    assert_reported(peer)


def test_a_peer_that_cannot_start_is_reported_and_stopped(tmp_path, monkeypatch):
    venv = fake_venv(tmp_path / "venv", "echo 'cannot bind: address in use' >&2; exit 3")
    monkeypatch.setattr(peers, "install", lambda name, minimum=(3, 11), log=None: venv)
    peer = peers.bring_up("lgapi", "postgres://postgres@127.0.0.1:5432/postgres", "t", tmp_path)
    assert peer.status.startswith("start failed: exited at start (code 3)"), peer.status
    assert "cannot bind: address in use" in peer.status
    assert all(p.poll() is not None for p in peer.processes)
    assert_reported(peer)


def test_a_peer_that_hangs_at_start_is_killed(tmp_path, monkeypatch):
    venv = fake_venv(tmp_path / "venv", "exec sleep 600")
    monkeypatch.setattr(peers, "install", lambda name, minimum=(3, 11), log=None: venv)
    monkeypatch.setattr(peers, "START_SECONDS", 1)
    peer = peers.bring_up("lgapi", "postgres://postgres@127.0.0.1:5432/postgres", "t", tmp_path)
    assert peer.status.startswith("start failed: no answer on /ok"), peer.status
    (process,) = peer.processes
    assert process.poll() is not None
    with pytest.raises(ProcessLookupError):
        os.kill(process.pid, 0)


def assert_reported(peer: peers.Peer) -> None:
    ours = compare.Target(compare.AGENTSITE, compare.AGENTSITE_LABEL, "http://127.0.0.1:1/langgraph")
    targets = [ours, compare.peer_target(peer)]
    columns = {compare.AGENTSITE: {"many.runs_per_s": 100.0, "wait.p50_ms": 20.0}}
    api = {"postgresql": {"fresh.p50_ms": 30.0}, "floor": {"fresh.p50_ms": 20.0}}
    table = report.render(api, columns, targets).splitlines()
    assert table[0] == (
        f"| scenario | agentsite /api/ | agentsite /langgraph/ | {peer.label} | floor (bare LangGraph) "
        "| /api/ ÷ floor | /langgraph/ ÷ better peer |"
    )
    assert table[2] == f"| server | running | running | **{peer.status}** | running | | |"
    # A scenario a column did not run is a "–" there, not a gap.
    assert "| new session / thread, one run: p50 ms | 30.00 | 20.00 | – | 20.00 | 1.50 | – |" in table
    verdicts = compare.checks(columns, targets)
    assert (f"{peer.label} measured (it is not: {peer.status})", False) in verdicts
