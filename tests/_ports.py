"""A TCP port on 127.0.0.1 for a server a test starts (``dagster dev``, a Spark service, an API).

Free when it is picked, and BELOW the kernel's ephemeral range
(``/proc/sys/net/ipv4/ip_local_port_range``, 32768-60999 by default): between the pick and the
server's bind (``dagster dev`` binds after loading the code location, ~30 s on a busy machine)
no other process takes it by binding port 0 or connecting out, which every JVM, py4j gateway and
client of the parallel suite does many times a second. A port from ``bind(("127.0.0.1", 0))``
is in that range, and once in CI one was taken before ``dagster dev`` bound it (Errno 98).
Only ports picked here live below the range; two picks collide with odds of 1 in ~12,000.
"""

from __future__ import annotations

import random
import socket
from pathlib import Path

#: How many ports below the ephemeral range the picks come from.
SPAN = 12_000


def _ephemeral_start() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port() -> int:
    """A port free on 127.0.0.1 now, below the ephemeral range (module docstring)."""
    high = _ephemeral_start()
    low = max(1024, high - SPAN)
    picks = random.Random()  # seeded from the OS: each worker process picks its own
    for _ in range(200):
        port = picks.randrange(low, high) if high > low else 0
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:  # taken (another service, another test's server)
                continue
            return int(probe.getsockname()[1])
    raise RuntimeError(f"no free TCP port on 127.0.0.1 in {low}-{high - 1} after 200 tries")
