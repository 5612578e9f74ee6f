"""The Kafka client inside the connector: librdkafka through confluent-kafka.

The options a pipeline passes are the Java client's (`kafka.bootstrap.servers`,
`kafka.security.protocol`, `kafka.sasl.jaas.config`, `kafka.ssl.truststore.location`, ...), since
they must work unchanged with Spark's official connector. `librdkafka_config` maps them onto
librdkafka's names; a setting that librdkafka cannot honour is an error naming the option rather
than a silently different client.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from .options import EARLIEST, LATEST, IllegalArgumentException, OffsetSpec, Strategy

log = logging.getLogger("rafka.spark")

T = TypeVar("T")

# Java client settings with another name in librdkafka.
_RENAMED = {
    "fetch.max.wait.ms": "fetch.wait.max.ms",
    "receive.buffer.bytes": "socket.receive.buffer.bytes",
    "send.buffer.bytes": "socket.send.buffer.bytes",
    "ssl.keystore.certificate.chain": "ssl.certificate.pem",
    "ssl.keystore.key": "ssl.key.pem",
    "ssl.truststore.certificates": "ssl.ca.pem",
    "delivery.timeout.ms": "message.timeout.ms",
}

# Java client settings that only tune the Java client itself (its threads, buffers, JMX...):
# librdkafka has no equivalent and the read or write means the same without them.
_JAVA_ONLY = {
    "max.poll.records",
    "max.poll.interval.ms",
    "default.api.timeout.ms",
    "client.dns.lookup",
    "exclude.internal.topics",
    "buffer.memory",
    "max.block.ms",
    "metric.reporters",
    "metrics.num.samples",
    "metrics.sample.window.ms",
    "metrics.recording.level",
    "auto.include.jmx.reporter",
    "ssl.protocol",
    "ssl.enabled.protocols",
    "ssl.keystore.type",
    "ssl.truststore.type",
    "ssl.truststore.password",
    "ssl.keymanager.algorithm",
    "ssl.trustmanager.algorithm",
    "ssl.secure.random.implementation",
    "security.providers",
    "sasl.login.class",
    "sasl.login.refresh.window.factor",
    "sasl.login.refresh.window.jitter",
    "sasl.login.refresh.min.period.seconds",
    "sasl.login.refresh.buffer.seconds",
    "retry.backoff.max.ms",
    "reconnect.backoff.max.ms",
    "socket.connection.setup.timeout.ms",
    "socket.connection.setup.timeout.max.ms",
    "partitioner.class",
    "partitioner.ignore.keys",
    "partitioner.adaptive.partitioning.enable",
    "partitioner.availability.timeout.ms",
    "metadata.max.idle.ms",
    "check.crcs",
}

# Settings the connector owns (the official connector overrides them too).
_OWNED = {
    "group.id",
    "enable.auto.commit",
    "auto.offset.reset",
    "key.deserializer",
    "value.deserializer",
    "key.serializer",
    "value.serializer",
    "interceptor.classes",
}

_JAAS = re.compile(
    r"^\s*(?P<module>[\w.$]+)\s+(?P<flag>required|requisite|sufficient|optional)"
    r"(?P<opts>.*?);?\s*$",
    re.S,
)
_JAAS_OPT = re.compile(r'([\w.\-]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|(\S+))')


def parse_jaas(text: str) -> tuple[str, dict[str, str]]:
    """`org.apache.kafka.common.security.plain.PlainLoginModule required username="u"
    password="p";` -> ("...PlainLoginModule", {"username": "u", "password": "p"})."""
    m = _JAAS.match(text)
    if m is None:
        raise IllegalArgumentException(
            f"Kafka option 'sasl.jaas.config' is not a JAAS login module configuration: '{text}'"
        )
    opts = {
        k: (q.replace('\\"', '"').replace("\\\\", "\\") if q is not None else u)
        for k, q, u in _JAAS_OPT.findall(m.group("opts").rstrip(";"))
    }
    return m.group("module"), opts


def librdkafka_config(params: Mapping[str, str], role: str) -> dict[str, Any]:
    """The kafka.* options (prefix removed) as a librdkafka configuration for `role`
    ("consumer", "producer" or "admin")."""
    params = {k.lower(): str(v) for k, v in params.items()}
    conf: dict[str, Any] = {}
    truststore_type = params.get("ssl.truststore.type", "JKS").upper()
    keystore_type = params.get("ssl.keystore.type", "JKS").upper()
    for key, value in params.items():
        if key in _OWNED or key in _JAVA_ONLY:
            continue
        if key == "sasl.jaas.config":
            module, opts = parse_jaas(value)
            if module.endswith(("PlainLoginModule", "ScramLoginModule")):
                conf["sasl.username"] = opts.get("username", "")
                conf["sasl.password"] = opts.get("password", "")
            elif module.endswith("OAuthBearerLoginModule"):
                conf.setdefault(
                    "sasl.oauthbearer.config", " ".join(f"{k}={v}" for k, v in opts.items())
                )
            elif module.endswith("Krb5LoginModule"):
                if "keytab" in opts:
                    conf["sasl.kerberos.keytab"] = opts["keytab"]
                if "principal" in opts:
                    conf["sasl.kerberos.principal"] = opts["principal"]
            else:
                raise IllegalArgumentException(
                    f"Kafka option 'sasl.jaas.config' uses login module {module}, which this "
                    "connector's client (librdkafka) does not support"
                )
            continue
        if key == "ssl.truststore.location":
            if truststore_type != "PEM":
                raise IllegalArgumentException(
                    f"Kafka option 'ssl.truststore.location' with ssl.truststore.type="
                    f"{truststore_type} is not supported by this connector's client (librdkafka): "
                    "use a PEM truststore (ssl.truststore.type=PEM)"
                )
            conf["ssl.ca.location"] = value
            continue
        if key == "ssl.keystore.location":
            if keystore_type == "JKS" and "ssl.keystore.type" in params:
                raise IllegalArgumentException(
                    "Kafka option 'ssl.keystore.location' with ssl.keystore.type=JKS is not "
                    "supported by this connector's client (librdkafka): use PKCS12 or PEM"
                )
            if keystore_type == "PEM":
                conf["ssl.certificate.location"] = value
                conf["ssl.key.location"] = value
            else:
                conf["ssl.keystore.location"] = value
            continue
        if key == "ssl.endpoint.identification.algorithm":
            conf[key] = value.lower() if value else "none"
            continue
        if key == "partition.assignment.strategy" and "." in value:
            continue  # Java class names; the connector assigns partitions itself
        if key == "sasl.mechanism":
            conf["sasl.mechanism"] = value
            continue
        conf[_RENAMED.get(key, key)] = value
    return conf


# The Java producer's defaults that librdkafka does not share: keys are partitioned with murmur2,
# so records land where the official connector would put them, and acks=all.
_PRODUCER_DEFAULTS = {"partitioner": "murmur2_random", "acks": "all"}

# Settings the idempotent producer cannot work with: (setting, conflicts(value), the Java
# producer's ConfigException message when idempotence was asked for explicitly).
_IDEMPOTENCE_CONFLICTS: tuple[tuple[str, Callable[[int], bool], str], ...] = (
    (
        "retries",
        lambda n: n == 0,
        "Must set retries to non-zero when using the idempotent producer.",
    ),
    (
        "acks",
        lambda n: n != -1,
        "Must set acks to all in order to use the idempotent producer. Otherwise we cannot "
        "guarantee idempotence.",
    ),
    (
        "max.in.flight.requests.per.connection",
        lambda n: n > 5,
        "Must set max.in.flight.requests.per.connection to at most 5 to use the idempotent "
        "producer.",
    ),
)


def _setting_int(key: str, raw: str) -> int:
    text = raw.strip()
    if key == "acks" and text.lower() == "all":
        return -1
    try:
        return int(text)
    except ValueError:
        raise IllegalArgumentException(
            f"Kafka option 'kafka.{key}' is not valid: Invalid configuration value for "
            f"'{key}': {raw}"
        ) from None


def producer_config(params: Mapping[str, str]) -> dict[str, Any]:
    """The sink's librdkafka configuration: the kafka.* options over the Java producer's
    defaults, with idempotence decided as the Java producer of Spark's connector (Kafka 3.x)
    decides it. It is on unless `enable.idempotence=false`; a conflicting `acks`, `retries`
    or `max.in.flight.requests.per.connection` turns it off quietly when idempotence was not
    asked for, and is an error naming the setting when `enable.idempotence=true` was."""
    lowered = {k.lower(): str(v) for k, v in params.items()}
    asked = lowered.get("enable.idempotence")
    if asked is not None and asked.strip().lower() not in ("true", "false"):
        raise IllegalArgumentException(
            f"Kafka option 'kafka.enable.idempotence' is not valid: Invalid value {asked} for "
            "configuration enable.idempotence: Expected value to be either true or false"
        )
    idempotent = asked is None or asked.strip().lower() == "true"
    if idempotent:
        for key, conflicts, message in _IDEMPOTENCE_CONFLICTS:
            raw = lowered.get(key)
            if raw is None or not conflicts(_setting_int(key, raw)):
                continue
            if asked is not None:
                raise IllegalArgumentException(
                    f"Kafka option 'kafka.{key}' is not valid with kafka.enable.idempotence="
                    f"true: {message}"
                )
            log.info("Idempotence will be disabled because %s is set to %s.", key, raw.strip())
            idempotent = False
    return {
        **_PRODUCER_DEFAULTS,
        **librdkafka_config(params, "producer"),
        "enable.idempotence": idempotent,
    }


def _role_config(params: Mapping[str, str], role: str) -> dict[str, Any]:
    return producer_config(params) if role == "producer" else librdkafka_config(params, role)


def _client_error(conf: Mapping[str, Any], role: str) -> str | None:
    """Why librdkafka refuses `conf` for `role`, or None. The client is made without
    bootstrap.servers, so it never connects, and silent (log_level 0: no warning about that)."""
    from confluent_kafka import Consumer, KafkaException, Producer

    conf = {k: v for k, v in conf.items() if k != "bootstrap.servers"} | {"log_level": 0}
    try:
        if role == "producer":
            Producer(conf)
        else:
            Consumer({"group.id": "rafka-spark-config-check", **conf}).close()
    except (KafkaException, ValueError, TypeError) as e:
        err = e.args[0] if e.args else e
        return str(err.str() if hasattr(err, "str") else err).strip()
    return None


def _fixed_without(params: Mapping[str, str], key: str, role: str) -> bool:
    rest = {k: v for k, v in params.items() if k != key}
    try:
        return _client_error(_role_config(rest, role), role) is None
    except IllegalArgumentException:
        return False


def client_config(params: Mapping[str, str], role: str) -> dict[str, Any]:
    """The librdkafka configuration of `role` for the kafka.* options (prefix removed),
    checked by making (and dropping) a client, so that a bad setting fails where the DataFrame
    is defined rather than inside a task. The error names the options at fault as the user
    wrote them (librdkafka names its own, renamed or aliased, properties): those whose removal
    makes the configuration valid."""
    conf = _role_config(params, role)
    error = _client_error(conf, role)
    if error is None:
        return conf
    culprits = [f"'kafka.{k}'" for k in sorted(params) if _fixed_without(params, k, role)]
    if len(culprits) == 1:
        raise IllegalArgumentException(f"Kafka option {culprits[0]} is not valid: {error}")
    if culprits:
        raise IllegalArgumentException(
            f"Kafka options {', '.join(culprits)} are not valid together: {error}"
        )
    raise IllegalArgumentException(f"The kafka.* options are not valid: {error}")


def retry(fn: Callable[[], T], retries: int, interval_ms: int, what: str) -> T:
    """Call fn, retrying on Kafka errors (leader moves, a broker dying) `retries` times."""
    from confluent_kafka import KafkaException

    attempt = 0
    while True:
        try:
            return fn()
        except KafkaException as e:
            attempt += 1
            if attempt > retries:
                raise
            log.warning("%s failed (%s); retry %d/%d", what, e, attempt, retries)
            time.sleep(interval_ms / 1000)


class OffsetReader:
    """The driver's view of the cluster: which partitions a strategy covers, and their offsets
    (ListOffsets). One AdminClient, made on first use and never pickled."""

    def __init__(
        self,
        params: Mapping[str, str],
        retries: int = 3,
        retry_interval_ms: int = 1000,
        timeout_s: float = 30.0,
    ) -> None:
        self.conf = librdkafka_config(params, "admin")
        self.retries = retries
        self.retry_interval_ms = retry_interval_ms
        self.timeout_s = timeout_s
        self._admin: Any = None
        self._retrying = False

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_admin": None}

    @property
    def admin(self) -> Any:
        if self._admin is None:
            from confluent_kafka.admin import AdminClient

            self._admin = AdminClient(dict(self.conf))
        return self._admin

    def close(self) -> None:
        self._admin = None

    def _retry(self, fn: Callable[[], T], what: str) -> T:
        """retry(), once: a call made inside an `assigned` body fails to the outer retry."""
        if self._retrying:
            return fn()
        self._retrying = True
        try:
            return retry(fn, self.retries, self.retry_interval_ms, what)
        finally:
            self._retrying = False

    def assigned(self, strategy: Strategy, body: Callable[[list[tuple[str, int]]], T]) -> T:
        """body(the partitions `strategy` covers), both retried together, as Spark's
        partitionsAssignedToAdmin does: a topic deleted after its partitions were listed fails
        ListOffsets on every retry of the same list, and is gone from the next listing."""
        return self._retry(lambda: body(self.topic_partitions(strategy)), "offsets")

    def topic_partitions(self, strategy: Strategy) -> list[tuple[str, int]]:
        if strategy.kind == "assign":
            return sorted(set(strategy.partitions))

        def fetch() -> list[tuple[str, int]]:
            md = self.admin.list_topics(timeout=self.timeout_s)
            out: list[tuple[str, int]] = []
            for name, topic in md.topics.items():
                if topic.error is not None or not strategy.matches(name):
                    continue
                out.extend((name, p) for p in topic.partitions)
            return sorted(out)

        return self._retry(fetch, "metadata")

    def _list(self, specs: Mapping[tuple[str, int], Any]) -> dict[tuple[str, int], Any]:
        if not specs:
            return {}
        from confluent_kafka import TopicPartition

        def fetch() -> dict[tuple[str, int], Any]:
            futures = self.admin.list_offsets(
                {TopicPartition(t, p): s for (t, p), s in specs.items()},
                request_timeout=self.timeout_s,
            )
            return {(tp.topic, tp.partition): f.result() for tp, f in futures.items()}

        return self._retry(fetch, "ListOffsets")

    def earliest(self, tps: Iterable[tuple[str, int]]) -> dict[tuple[str, int], int]:
        from confluent_kafka.admin import OffsetSpec as Spec

        res = self._list({tp: Spec.earliest() for tp in tps})
        return {tp: r.offset for tp, r in res.items()}

    def latest(self, tps: Iterable[tuple[str, int]]) -> dict[tuple[str, int], int]:
        from confluent_kafka.admin import OffsetSpec as Spec

        res = self._list({tp: Spec.latest() for tp in tps})
        return {tp: r.offset for tp, r in res.items()}

    def for_timestamps(self, stamps: Mapping[tuple[str, int], int]) -> dict[tuple[str, int], int]:
        """The first offset whose timestamp is >= the given one, or -1 when there is none."""
        from confluent_kafka.admin import OffsetSpec as Spec

        res = self._list({tp: Spec.for_timestamp(ts) for tp, ts in stamps.items()})
        return {tp: r.offset for tp, r in res.items()}

    @staticmethod
    def check_all_specified(spec: OffsetSpec, tps: list[tuple[str, int]], what: str) -> None:
        if set(spec.offsets) != set(tps):
            raise IllegalArgumentException(
                f"If {what} contains specific offsets, you must specify all TopicPartitions.\n"
                "Use -1 for latest, -2 for earliest.\n"
                f"Specified: {_fmt(spec.offsets)} Assigned: {_fmt(tps)}"
            )

    def resolve(
        self,
        spec: OffsetSpec,
        tps: list[tuple[str, int]],
        starting: bool,
        what: str,
        markers: bool = False,
    ) -> dict[tuple[str, int], int]:
        """Offsets for `tps` from an OffsetSpec (KafkaOffsetReaderAdmin.fetch*). Where the spec
        means the earliest or the latest offset ("earliest", "latest", -2 or -1 in offsets
        JSON, a timestamp without a match under strategy latest), they are fetched, or with
        `markers` left as -2 / -1 for the caller to pin (`pin`)."""
        if spec.kind in ("earliest", "latest"):
            marked = dict.fromkeys(tps, EARLIEST if spec.kind == "earliest" else LATEST)
        elif spec.kind == "offsets":
            self.check_all_specified(spec, tps, what)
            marked = dict(spec.offsets)
        else:
            marked = self._timestamp_offsets(spec, tps, starting)
        return marked if markers else self.pin(marked)

    def pin(self, offsets: Mapping[tuple[str, int], int]) -> dict[tuple[str, int], int]:
        """`offsets` with -2 (earliest) and -1 (latest) replaced by the offsets they are now."""
        out = dict(offsets)
        out.update(self.earliest([tp for tp, off in offsets.items() if off == EARLIEST]))
        out.update(self.latest([tp for tp, off in offsets.items() if off == LATEST]))
        return out

    def _timestamp_offsets(
        self, spec: OffsetSpec, tps: list[tuple[str, int]], starting: bool
    ) -> dict[tuple[str, int], int]:
        if spec.kind == "timestamps":
            if set(spec.offsets) != set(tps):
                position = "starting" if starting else "ending"
                raise IllegalArgumentException(
                    f"[KAFKA_TIMESTAMP_OFFSET_DOES_NOT_MATCH_ASSIGNED] Partitions specified for "
                    f"Kafka timestamp based {position} offsets don't match what are assigned. "
                    "Maybe topic partitions are created or deleted while the query is running, "
                    "or you didn't specify all the partitions. "
                    f"Specified: {_fmt(spec.offsets)} Assigned: {_fmt(tps)}"
                )
            stamps = dict(spec.offsets)
        else:  # one timestamp for all
            assert spec.timestamp is not None
            stamps = {tp: spec.timestamp for tp in tps}
        found = self.for_timestamps(stamps)
        missing = [tp for tp, off in found.items() if off < 0]
        if missing and starting and spec.no_match == "error":
            tp = missing[0]
            raise IllegalArgumentException(
                f"No offset matched from request of topic-partition {tp[0]}-{tp[1]} and "
                f"timestamp {stamps[tp]}."
            )
        found.update(dict.fromkeys(missing, LATEST))
        return found


def _fmt(tps: Iterable[tuple[str, int]]) -> str:
    return "Set(" + ", ".join(f"{t}-{p}" for t, p in sorted(tps)) + ")"
