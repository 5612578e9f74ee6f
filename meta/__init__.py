"""The metadata service: Rafka's counterpart of Kafka's KRaft controller quorum.

One to three meta nodes replicate the cluster metadata with Raft (pysyncobj); brokers use them
over gRPC (proto/meta.proto) through ``meta.client.MetaClient``. Reading order:

- ``model``        brokers, topics, partitions (frozen dataclasses)
- ``topic_planning``   decisions on new topics and partitions: validation, placement (pure)
- ``partition_leadership``   decisions: leader election, ISR changes, reassignment (pure)
- ``features``     the feature levels Rafka supports and UpdateFeatures checks (pure)
- ``topic_config`` Kafka's topic config names and value checks
- ``commands``     the state machine's commands and their results
- ``state``        the replicated state machine: ``MetaState`` and ``apply`` (pure, deterministic)
- ``replication_control``, ``security_state``, ``cluster_admin``   ``apply``'s appliers by concern
- ``records``      the stored format (Raft log, dumps): versioned records of commands and state
- ``raft``         pysyncobj glue: replicate commands, retry until committed
- ``feed``         recent changes, so Watch streams resume without a snapshot
- ``leases``       broker heartbeat leases, kept by the Raft leader
- ``service``      the gRPC API and the leader's periodic duties
- ``entity_proto`` entities <-> the protobuf messages the gRPC API and the records share
- ``wire``         the gRPC API's own messages: watch events, requests, responses
- ``config``       ``MetaConfig`` (Kafka-style setting names)
- ``node``         ``run_meta_node``: wires it all together, runs until SIGTERM
- ``client``       the asyncio client brokers use
"""
