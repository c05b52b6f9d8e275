"""The descriptor limit (issue 20): the server raises its soft RLIMIT_NOFILE
to the hard limit at start (as nginx's worker_rlimit_nofile), so a worker can
hold as many connections as --max-connections allows without the operator's
ulimit -n, and says in one line when even the hard limit is short of it."""

import re
import resource

import pytest


def limits_of(pid):
    """(soft, hard) Max open files of a process, from /proc/PID/limits."""
    with open("/proc/%d/limits" % pid) as f:
        for line in f:
            if line.startswith("Max open files"):
                soft, hard = line.split()[3:5]
                return int(soft), int(hard)
    raise AssertionError("no Max open files line for pid %d" % pid)


@pytest.fixture
def low_soft_limit():
    """Our soft limit lowered to 256 (the server inherits it); restored after."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard <= 256:
        pytest.skip("the hard limit (%d) leaves nothing to raise" % hard)
    resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))
    yield hard
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_issue20_the_soft_descriptor_limit_is_raised_to_the_hard_limit(start_server, low_soft_limit):
    server = start_server("realtime_app:application", "--max-connections", "64", workers=1)
    (worker,) = server.wait_workers(lambda pids: len(pids) == 1)
    soft, hard = limits_of(worker)
    assert soft == hard, "the worker runs with a soft limit of %d under a hard limit of %d" % (soft, hard)
    assert soft > 256
    assert "descriptor limit" not in server.stderr.text()


def test_issue20_a_hard_limit_below_max_connections_is_said_in_one_line(start_server, low_soft_limit):
    hard = low_soft_limit
    if hard == resource.RLIM_INFINITY or hard > 999_000:
        pytest.skip("the hard limit is above what --max-connections accepts")
    wanted = min(hard + 1000, 1_000_000)
    server = start_server("realtime_app:application", "--max-connections", str(wanted), workers=1)
    server.wait_workers(lambda pids: len(pids) == 1)
    lines = [line for line in server.stderr.text().splitlines() if "descriptor limit" in line]
    assert len(lines) == 1, lines
    assert re.search(r"descriptor limit %d \(hard\) is below the %d that --max-connections %d needs"
                     % (hard, wanted + 512, wanted), lines[0]), lines[0]
