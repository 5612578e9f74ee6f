"""What the meta service, the brokers and the CLI all use, below all three: the internal
credentials (``internal_security``, with the development CA ``dev_ca``), settings under Kafka's
property names (``settings``) and grpc.aio calls inside anyio cancel scopes
(``grpc_cancellation``). It imports none of ``meta``, ``dataplane`` or ``cluster``.
"""
