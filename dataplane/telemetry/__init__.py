"""Client telemetry (KIP-714): clients push their own metrics to the broker.

Subscriptions are CLIENT_METRICS config resources (`catalog`), kept in the meta service's Raft
state like every config; `subscriptions.ClientMetricsManager` answers GetTelemetrySubscriptions
and PushTelemetry for each client instance; `otlp` decodes the pushed OpenTelemetry payloads and
`collector` exports the latest push of each client on the broker's Prometheus endpoint.
"""
