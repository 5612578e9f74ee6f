"""The open-files limit of a node process.

A broker holds a descriptor per segment file it has open and per connection; a meta node one per
connection and journal file. Linux's default soft limit (often 1024) is far below what a broker
with thousands of partitions needs, while the hard limit (what an unprivileged process may raise
itself to) is usually much higher: each node raises its soft limit to the hard limit at start,
as Kafka's packaging asks operators to (``ulimit -n``), and logs the value it runs with.
"""

from __future__ import annotations

import logging
import resource

log = logging.getLogger("rafka.resources")

# Below this many descriptors a broker cannot host many partitions or clients: say so at start.
_LOW = 8192


def raise_open_files_limit(node: str) -> int:
    """Raise RLIMIT_NOFILE's soft limit to the hard limit; the soft limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != soft:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError) as e:  # an infinite hard limit above the kernel's nr_open
            log.warning(
                "%s: cannot raise the open-files limit from %d to %d: %s", node, soft, hard, e
            )
    shown = "unlimited" if soft == resource.RLIM_INFINITY else str(soft)
    if soft != resource.RLIM_INFINITY and soft < _LOW:
        log.warning(
            "%s runs with an open-files limit of %s (the hard limit): each partition segment "
            "and each connection takes one; raise it (ulimit -Hn, LimitNOFILE= under systemd) "
            "to host many partitions or clients",
            node,
            shown,
        )
    else:
        log.info("%s runs with an open-files limit of %s", node, shown)
    return soft
