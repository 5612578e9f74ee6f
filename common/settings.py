"""Configuration with Kafka's own property names.

Every setting has a dotted Kafka-style name (``num.partitions``); the Python field is the same
name with dots replaced by underscores. Values come from, highest priority first: explicit
overrides (command-line flags, ``--override key=value``), ``RAFKA_*`` environment variables
(``RAFKA_NUM_PARTITIONS``), a Java-style ``.properties`` file, then the defaults.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict


def parse_properties(text: str) -> dict[str, str]:
    """Parse a Java ``.properties`` file: ``key=value`` or ``key: value``, ``#``/``!`` comments."""
    out: dict[str, str] = {}
    pending = ""
    for raw in text.splitlines():
        line = pending + raw.strip()
        pending = ""
        if not line or line[0] in "#!":
            continue
        if line.endswith("\\"):
            pending = line[:-1]
            continue
        sep = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
        if sep < 0:
            out[line] = ""
        else:
            out[line[:sep].strip()] = line[sep + 1 :].strip()
    return out


def field_name(kafka_name: str) -> str:
    """``log.segment.bytes`` -> ``log_segment_bytes``."""
    return kafka_name.replace(".", "_").replace("-", "_")


def kafka_name(field: str) -> str:
    """``log_segment_bytes`` -> ``log.segment.bytes``."""
    return field.replace("_", ".")


class _PropertiesSource(PydanticBaseSettingsSource):
    """Reads the properties file named by the ``properties_file`` init argument."""

    def __init__(self, settings_cls: type[BaseSettings], path: Path | None) -> None:
        super().__init__(settings_cls)
        self._values: dict[str, str] = {}
        self._raw: dict[str, str] = {}
        if path is not None:
            self._raw = parse_properties(Path(path).read_text())
            self._values = {field_name(k): v for k, v in self._raw.items()}

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return self._values.get(field_name), field_name, False

    def __call__(self) -> dict[str, Any]:
        known = set(self.settings_cls.model_fields)
        values: dict[str, Any] = {k: v for k, v in self._values.items() if k in known}
        prefixed = _prefixed(self.settings_cls, self._raw)
        if prefixed:
            values["prefixed"] = prefixed
        return values


def _prefixed(settings_cls: type[BaseSettings], values: dict[str, Any]) -> dict[str, str]:
    """The settings of ``values`` (Kafka names) under one of the class's ``PREFIXES``."""
    prefixes: tuple[str, ...] = getattr(settings_cls, "PREFIXES", ())
    return {k: str(v) for k, v in values.items() if k.startswith(prefixes) and v is not None}


class KafkaSettings(BaseSettings):
    """Base for broker and meta settings; see the module docstring for precedence."""

    model_config = SettingsConfigDict(env_prefix="RAFKA_", extra="ignore", frozen=True)
    _properties_path: ClassVar[Path | None] = None
    # Families of settings named by a prefix plus free parts, kept as given in ``prefixed``
    # (Kafka's ``listener.name.<listener>.<setting>``); a subclass lists the prefixes it takes.
    PREFIXES: ClassVar[tuple[str, ...]] = ()
    prefixed: dict[str, str] = {}

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings, env_settings, _PropertiesSource(settings_cls, cls._properties_path))

    @classmethod
    def load(cls, properties_file: Path | None = None, overrides: dict[str, Any] | None = None):
        """Build settings from a properties file, the environment and Kafka-named overrides."""
        overrides = overrides or {}
        prefixed = _prefixed(cls, overrides)
        unknown = [
            k for k in overrides if field_name(k) not in cls.model_fields and k not in prefixed
        ]
        if unknown:
            raise ValueError(f"unknown setting(s): {', '.join(sorted(unknown))}")
        kwargs = {
            field_name(k): v for k, v in overrides.items() if v is not None and k not in prefixed
        }
        holder = type(cls.__name__, (cls,), {"_properties_path": properties_file})
        loaded = holder(**kwargs)
        if prefixed:  # overrides win over the properties file, key by key
            loaded = loaded.model_copy(update={"prefixed": loaded.prefixed | prefixed})
            loaded.model_fields_set.add("prefixed")
        # Keep model_fields_set: it tells a value someone set from a default (config_source).
        return cls.model_validate(loaded.model_dump(include=loaded.model_fields_set))

    def as_properties(self) -> dict[str, str]:
        """The effective settings under their Kafka names (for logs and DescribeConfigs)."""
        values = self.model_dump(exclude={"prefixed"})
        return {kafka_name(k): "" if v is None else str(v) for k, v in values.items()} | dict(
            self.prefixed
        )
