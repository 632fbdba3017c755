"""`--cluster ADDRESS` checked before anything starts, --dry-run included: a Ray head that
answers at that host and port within ANSWER_TIMEOUT_S (ray.init would retry an address nobody
answers for a minute, after the run directory was made). No Ray import here: a TCP connect to
the head's port is enough to tell a typo or a stopped head from a cluster.
"""

from __future__ import annotations

import concurrent.futures
import os
import socket
from pathlib import Path

from congestlab.errors import ClusterError

ANSWER_TIMEOUT_S = 3.0
# where `ray start --head` on this machine writes its address (what Ray's own "auto" reads first)
RAY_CURRENT_CLUSTER = Path("/tmp/ray/ray_current_cluster")


def host_port(address: str) -> tuple[str, int]:
    """(host, port) of HOST:PORT, [IPv6]:PORT or ray://HOST:PORT; ClusterError otherwise."""
    rest = address.split("://", 1)[-1].rstrip("/")
    if rest.startswith("["):
        host, _, port = rest[1:].partition("]:")
    else:
        host, _, port = rest.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ClusterError(f"--cluster {address!r}: give the Ray head as HOST:PORT (e.g. 10.0.0.1:6379) or auto "
                           "(docs/cluster.md)")
    return host, int(port)


def auto_address() -> str | None:
    """What `--cluster auto` joins, when this machine says (RAY_ADDRESS, or the address file
    of a head started here); None leaves the search to Ray."""
    if os.environ.get("RAY_ADDRESS") and os.environ["RAY_ADDRESS"] != "auto":
        return os.environ["RAY_ADDRESS"]
    try:
        return RAY_CURRENT_CLUSTER.read_text().strip() or None
    except OSError:
        return None


def check_answers(address: str, timeout_s: float = ANSWER_TIMEOUT_S) -> None:
    """ClusterError (exit 8) when nothing accepts a connection at the address's host and port."""
    target = auto_address() if address == "auto" else address
    if target is None:
        return
    host, port = host_port(target)
    # the name is looked up in a thread: a resolver without an answer would hold the caller for
    # its own timeouts (socket's timeout covers the connect only)
    lookup = concurrent.futures.ThreadPoolExecutor(max_workers=1)
    try:
        found = lookup.submit(socket.getaddrinfo, host, port, type=socket.SOCK_STREAM).result(timeout=timeout_s)
        with socket.create_connection(found[0][4][:2], timeout=timeout_s):
            pass
    except (OSError, concurrent.futures.TimeoutError) as err:
        timed_out = isinstance(err, (TimeoutError, concurrent.futures.TimeoutError))
        reason = "no answer" if timed_out else (err.strerror or str(err))
        shown = f"{address} ({target})" if address == "auto" else address
        where = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        raise ClusterError(f"--cluster {shown}: no Ray head answers at {where} within {timeout_s:g} s "
                           f"({reason}); start it (`ray start --head`, docs/cluster.md) or give its address") from None
    finally:
        lookup.shutdown(wait=False)
