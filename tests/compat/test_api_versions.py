"""ApiVersions: Rafka answers every API key Apache Kafka 4.4's broker answers, at Kafka's
versions or above (a client that negotiates then never meets an API or a version it would
have had with Kafka)."""

from __future__ import annotations

import json
import re
import zipfile
from functools import cache

from tests.compat.pair import Pair, record
from tests.peers.apache_kafka import PEERS, VERSION

API_VERSIONS = 18


@cache
def api_names() -> dict[int, str]:
    """Kafka 4.4's API names by key, from the message schemas inside its kafka-clients jar."""
    names = {}
    with zipfile.ZipFile(PEERS / "kafka" / f"kafka-clients-{VERSION}.jar") as jar:
        for member in jar.namelist():
            if re.fullmatch(r"common/message/\w+Request\.json", member):
                text = re.sub(r"^\s*//.*$", "", jar.read(member).decode(), flags=re.M)
                spec = json.loads(text)
                names[spec["apiKey"]] = spec["name"].removesuffix("Request")
    return names


def _versions(answer: object) -> dict[int, tuple[int, int]]:
    return {a.api_key: (a.min_version, a.max_version) for a in answer.api_keys}  # type: ignore[attr-defined]


def test_every_api_kafka_answers_at_its_versions_or_above(pair: Pair) -> None:
    kafka, rafka = pair.send(
        API_VERSIONS, 3, client_software_name="compat", client_software_version="1"
    )
    k, r = _versions(kafka), _versions(rafka)
    passed = True
    for key in sorted(k):
        kmin, kmax = k[key]
        case = f"ApiVersions: {api_names().get(key, '?')} ({key})"
        if key not in r:
            found = [f"not served; Kafka serves v{kmin}-{kmax}"]
            answer = "not served"
        else:
            rmin, rmax = r[key]
            answer = f"v{rmin}-{rmax}"
            covers = rmax >= kmax and rmin <= kmin
            found = [] if covers else [f"Kafka v{kmin}-{kmax}, Rafka {answer}"]
        passed &= record(case, f"v{kmin}-{kmax}", answer, found, fail=False)
    assert passed, "Rafka misses APIs or versions Kafka serves (the table says which)"
