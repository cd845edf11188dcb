"""Ctrl-C and SIGTERM during an operation (issue 37 §1): the Pulumi process the Automation API
starts gets each signal once, as Pulumi's cancel expects (first: cancel cleanly, second: stop;
pulumi v3.274.0 pkg/backend/cancellation_scope.go), and its output pipe stays open while it
cancels. A stand-in child that behaves as that code does shows both."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

from pulumi.automation import _cmd

from deepseek_eks.automation.interrupts import graceful_interrupts

# Cancels on its first SIGINT/SIGTERM and keeps writing until done; terminates on a second one.
STAND_IN = textwrap.dedent(
    """
    import signal, sys, time
    received = []
    def handle(signum, frame):
        received.append(signum)
        if len(received) == 1:
            print("cancelling", flush=True)
        else:
            print("terminating", flush=True)
            sys.exit(255)
    signal.signal(signal.SIGINT, handle)
    signal.signal(signal.SIGTERM, handle)
    print("ready", flush=True)
    deadline = time.time() + 20
    while not received and time.time() < deadline:
        time.sleep(0.05)
    for step in range(5):  # the steps in flight finish
        print(f"step {step} finished", flush=True)
        time.sleep(0.1)
    print(f"cancelled after {len(received)} signal(s)", flush=True)
    """
)


def test_the_first_signal_cancels_cleanly_with_the_pipe_open() -> None:
    said: list[str] = []
    # What it must restore: Python's default, or SIG_IGN where the suite was started in the
    # background by a non-interactive shell (which ignores SIGINT in its background jobs).
    before = signal.getsignal(signal.SIGINT)
    with graceful_interrupts(said.append) as groups:
        child = _cmd.subprocess.Popen([sys.executable, "-c", STAND_IN], stdout=subprocess.PIPE, text=True)
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        assert os.getpgid(child.pid) == child.pid  # its own group: the terminal's ^C reaches us alone
        os.kill(os.getpid(), signal.SIGINT)  # as a ^C; no KeyboardInterrupt here
        rest = child.stdout.read()
        assert child.wait(timeout=20) == 0
    assert "cancelling" in rest and "step 4 finished" in rest and "cancelled after 1 signal(s)" in rest
    assert groups.signals == [signal.SIGINT] and "cancelling the operation cleanly" in said[0]
    assert _cmd.subprocess is subprocess  # restored
    assert signal.getsignal(signal.SIGINT) is before


def test_a_second_signal_stops_it_at_once() -> None:
    said: list[str] = []
    with graceful_interrupts(said.append):
        child = _cmd.subprocess.Popen([sys.executable, "-c", STAND_IN], stdout=subprocess.PIPE, text=True)
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        os.kill(os.getpid(), signal.SIGTERM)
        assert child.stdout.readline().strip() == "cancelling"
        os.kill(os.getpid(), signal.SIGTERM)
        rest = child.stdout.read()
        assert child.wait(timeout=20) == 255
    assert "terminating" in rest and "cancelled after" not in rest
    assert len(said) == 2 and "again" in said[1]
