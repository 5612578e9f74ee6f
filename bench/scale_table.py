"""The scale bench's table: each figure beside issue 16's bound and whether it is within it.

A bound set at a step the run did not reach (5,000 partitions in --quick) is judged at the
largest step that ran, and the row says so; a figure that could not be measured reads n/a.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bench.scale import Plan, Run

Row = tuple[str, str, str, str, str, str]
HEADER: Row = ("axis", "step", "measured", "figure", "bound", "within")
FIGURE_WIDTH = 64


def _verdict(ok: bool | None) -> str:
    return "n/a" if ok is None else ("yes" if ok else "NO")


def _num(x: object, fmt: str = ".1f") -> str:
    return format(x, fmt) if isinstance(x, float | int) else "n/a"


def _below(value: object, limit: float, strict: bool = False) -> bool | None:
    """Whether a measured figure is within ``limit`` (None when it was not measured)."""
    if not isinstance(value, float | int):
        return None
    return value < limit if strict else value <= limit


def _judged(steps: list[int], target: int) -> tuple[int, str]:
    """The step a bound "at ``target``" is judged at, and a note when it is not the target."""
    at = target if target in steps else max(steps)
    return at, "" if at == target else f" (judged at {at:,}: --quick)"


class Table:
    def __init__(self, plan: Plan, skip: set[str]) -> None:
        self.plan, self.skip = plan, skip
        self.rows: list[Row] = []
        self.notes: list[str] = []  # whole texts of figures too long for the table

    def _missing(self, section: str) -> str:
        return "skipped" if section in self.skip else "n/a"

    def add(
        self, axis: str, step: str, what: str, figure: str, bound: str, ok: bool | None
    ) -> None:
        if len(figure) > FIGURE_WIDTH:  # why a figure is n/a can be long: below the table
            self.notes.append(f"[{len(self.notes) + 1}] {axis} {step}, {what}: {figure}")
            figure = f"{figure[: FIGURE_WIDTH - 8].rstrip()}... [{len(self.notes)}]"
        self.rows.append((axis, step, what, figure, bound, _verdict(ok) if bound else ""))

    def print(self, run: Run) -> None:
        self._partitions(run)
        self._failover(run)
        self._connections(run)
        self._groups(run)
        self._fetch(run)
        self._log(run)
        widths = [max(len(r[i]) for r in [HEADER, *self.rows]) for i in range(len(HEADER))]
        print("\nscale curves (issue 16), 1 KiB records, librdkafka and raw Kafka requests")
        for row in [HEADER, tuple("-" * w for w in widths), *self.rows]:
            print("  " + " | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)))
        for note in self.notes:
            print(f"  {note}")
        misses = [r for r in self.rows if r[5] == "NO"]
        print(f"\n{len(misses)} bound(s) missed" + (":" if misses else ""))
        for r in misses:
            print(f"  {r[0]} {r[1]}: {r[2]} {r[3]} (bound {r[4]})")

    def _partitions(self, run: Run) -> None:
        steps = sorted(run.partitions)
        if not steps:
            self.add("partitions/broker", "-", "all", self._missing("partitions"), "", None)
            return
        base = run.partitions.get(6, {})
        idle_at, idle_note = _judged(steps, 5000)
        meta_at, meta_note = _judged(steps, 5000)
        for n in steps:
            f = run.partitions[n]
            step = f"{n:,}"
            for key, what in (
                ("produce", "acks=all produce MB/s"),
                ("produce_sticky", "  same, sticky partitioner"),
                ("consume", "consume MB/s"),
            ):
                value, ref = f.get(key), base.get(key)
                ratio = value / ref if isinstance(value, float) and isinstance(ref, float) else None
                shown = _num(value) + (f" ({ratio:.0%} of 6)" if ratio is not None else "")
                if isinstance(value, str):
                    shown = value
                if runs := f.get(f"{key}_runs"):
                    shown += f", runs {runs}"
                self.add(
                    "partitions/broker",
                    step,
                    what,
                    shown,
                    ">= 70% of 6-partition" if n == 1000 else "",
                    None if ratio is None else ratio >= 0.7,
                )
            rss = f.get("rss_kb")
            self.add(
                "partitions/broker",
                step,
                "RSS KB per partition",
                _num(rss),
                "<= 100 KB" if n >= 100 else "",
                _below(rss, 100),
            )
            cpu = f.get("idle_cpu")
            self.add(
                "partitions/broker",
                step,
                "idle CPU % (busiest broker)",
                _num(cpu, ".2f"),
                f"< 2% at 5,000{idle_note}" if n == idle_at else "",
                _below(cpu, 2, strict=True),
            )
            meta = f.get("metadata_p99")
            self.add(
                "partitions/broker",
                step,
                "Metadata (all topics) p99 ms",
                f"{_num(meta)} (p50 {_num(f.get('metadata_p50'))}, broker CPU "
                f"{_num(f.get('metadata_cpu_ms'))} ms each)",
                f"<= 50 ms at 5,000{meta_note}" if n == meta_at else "",
                _below(meta, 50),
            )

    def _failover(self, run: Run) -> None:
        fo = run.failover
        top = max(run.partitions, default=0)
        if not fo:
            missing = self._missing("partitions" if "partitions" in self.skip else "failover")
            self.add("failover", "-", "kill -9 -> all partitions acks=all", missing, "<= 5 s", None)
            return
        step = f"{int(fo['led']):,} of {top:,} led"
        self.add(
            "failover",
            step,
            "kill -9 -> every partition takes acks=all, s",
            f"{fo['all_s']:.2f} (its own: {fo['led_s']:.2f})",
            "<= 5 s" + ("" if top == 5000 else f" (at {top:,} partitions)"),
            float(fo["all_s"]) <= 5,
        )

    def _connections(self, run: Run) -> None:
        steps = sorted(run.connections)
        if not steps:
            self.add("idle connections", "-", "all", self._missing("connections"), "", None)
            return
        base = run.connections[steps[0]]["p99"]
        for n in steps:
            f = run.connections[n]
            step = f"{n:,}"
            self.add("idle connections", step, "broker CPU %", f"{f['cpu']:.2f}", "", None)
            self.add("idle connections", step, "broker RSS MB", f"{f['rss_mb']:.0f}", "", None)
            self.add(
                "idle connections",
                step,
                "produce p99 ms (1 active client)",
                f"{f['p99']:.1f} ({f['p99'] / base:.1f}x of {steps[0]:,})",
                f"<= 2x the {steps[0]:,}-connection p99" if n != steps[0] else "",
                f["p99"] <= 2 * base,
            )

    def _groups(self, run: Run) -> None:
        steps = sorted(run.groups)
        if not steps:
            self.add("consumer groups", "-", "all", self._missing("groups"), "", None)
            return
        at, note = _judged(steps, 500)
        for n in steps:
            f = run.groups[n]
            step = f"{n:,}"
            errors = (
                f" ({f['heartbeat_errors']:.0f} heartbeat errors)" if f["heartbeat_errors"] else ""
            )
            self.add(
                "consumer groups", step, "coordinator CPU %", f"{f['cpu']:.2f}{errors}", "", None
            )
            self.add(
                "consumer groups",
                step,
                "OffsetCommit p99 ms",
                f"{f['p99']:.1f}",
                f"<= 50 ms at 500{note}" if n == at else "",
                f["p99"] <= 50,
            )

    def _fetch(self, run: Run) -> None:
        f = run.fetch
        step = f"{self.plan.fetch_partitions:,} partitions"
        if not f:
            missing = self._missing("fetch")
            self.add("fetch sessions", step, "broker CPU per fetch", missing, ">= 5x cut", None)
            return
        for mode in ("without", "with"):
            value = f.get(mode)
            shown = (
                f"{value:.2f} ({f[f'{mode}_fetches']:.0f} fetches, "
                f"{f[f'{mode}_listed']:.0f} partitions listed each)"
                if isinstance(value, float)
                else str(value or "n/a")
            )
            self.add("fetch sessions", step, f"broker CPU ms/fetch {mode} session", shown, "", None)
        without, with_ = f.get("without"), f.get("with")
        cut = (
            without / with_
            if isinstance(without, float) and isinstance(with_, float) and with_ > 0
            else None
        )
        self.add(
            "fetch sessions",
            step,
            "cut by sessions",
            "n/a" if cut is None else f"{cut:.1f}x",
            ">= 5x",
            None if cut is None else cut >= 5,
        )

    def _log(self, run: Run) -> None:
        steps = sorted(run.log)
        if not steps:
            self.add("log size", "-", "kill -9 -> serving", self._missing("log"), "<= 10 s", None)
            return
        first = run.log[steps[0]]["serving_s"]
        for gb in steps:
            f = run.log[gb]
            self.add(
                "log size",
                f"{f['bytes'] / 1e9:.1f} GB",
                "kill -9, restart -> produce+fetch, s",
                f"{f['serving_s']:.2f} (listening after {f['listening_s']:.2f})",
                "<= 10 s" + ("" if gb == steps[0] else f", <= 2x the {steps[0]} GB figure"),
                f["serving_s"] <= 10 and f["serving_s"] <= max(2 * first, first + 1),
            )
