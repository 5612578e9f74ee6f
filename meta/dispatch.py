"""The dispatch of meta's Raft commands: ``apply`` hands each command kind to its applier and
remembers the result by request id, so a client's retry of an applied write is answered, not
applied again.

The appliers live with their concern (``meta.replication_control``, ``meta.security_state``,
``meta.cluster_admin``, ``meta.resource_configs``, ``meta.quotas``) and change a
``meta.state.MetaState``. This module sits above them and the state below: the state imports no
applier and no applier imports this module (import-linter contracts keep it so), where the
dispatch table in ``meta.state`` had the state and its appliers import each other in a circle.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from meta import cluster_admin, replication_control, security_state
from meta.commands import Applied, Command
from meta.quotas import AlterClientQuotas
from meta.quotas import alter as _alter_client_quotas
from meta.resource_configs import AlterResourceConfigs
from meta.resource_configs import alter as _alter_resource_configs
from meta.state import Changes, MetaState, Remembered

# How long a request id is remembered, so a client retry of an applied write is not re-applied.
REQUEST_MEMORY_MS = 5 * 60 * 1000


def apply(state: MetaState, command: Command) -> Applied:
    """Apply one command to ``state``; return its result and the changes it made."""
    _forget_requests_before(state, command.now_ms - REQUEST_MEMORY_MS)
    remembered = state.applied_requests.get(command.request_id)
    if remembered is not None:
        return Applied(remembered.result, [])
    changes = Changes(state)
    kind = type(command.body)
    result = _APPLIERS[kind](state, command.body, changes)
    state.applied_requests[command.request_id] = Remembered(command.now_ms, kind, result)
    return Applied(result, changes.recorded)


def _forget_requests_before(state: MetaState, cutoff_ms: int) -> None:
    requests = state.applied_requests
    while requests:
        oldest = next(iter(requests))
        if requests[oldest].now_ms >= cutoff_ms:
            return
        del requests[oldest]


_APPLIERS: dict[type, Callable[[MetaState, Any, Changes], Any]] = {
    **replication_control.APPLIERS,
    **security_state.APPLIERS,
    **cluster_admin.APPLIERS,
    AlterResourceConfigs: _alter_resource_configs,
    AlterClientQuotas: _alter_client_quotas,
}
