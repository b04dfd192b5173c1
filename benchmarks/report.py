"""Run every benchmark suite in one pytest-benchmark session and print throughput and ratios.

Each benchmark tags itself with ``extra_info`` (``items``, ``unit``, ``role``) and a
``group``; within a group every ``ours`` row is divided by each ``peer``/``baseline`` row,
so the printed ratios come from one run on one machine.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
UNIT_SCALE = {"records": (1e6, "M rec/s"), "bytes": (2**20, "MiB/s"), "partitions": (1, "partitions/s")}


def run_benchmarks(pytest_args: list[str]) -> dict:
    """Run pytest-benchmark over benchmarks/ and return its JSON report."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "bench.json"
        cmd = [
            sys.executable, "-m", "pytest", str(BENCH_DIR), "-p", "no:cacheprovider",
            "-o", "python_files=bench_*.py", "--benchmark-only",
            f"--benchmark-json={out}", "--benchmark-columns=median,iqr,rounds",
            "--benchmark-sort=name", "-q", *pytest_args,
        ]
        completed = subprocess.run(cmd, check=False)
        if not out.exists():
            raise SystemExit(completed.returncode or 1)
        return json.loads(out.read_text())


def throughput(bench: dict) -> tuple[float, str] | None:
    """Items per second for one benchmark row, scaled for printing; None when untagged."""
    info = bench.get("extra_info", {})
    items, unit = info.get("items"), info.get("unit")
    if not items or unit not in UNIT_SCALE:
        return None
    scale, label = UNIT_SCALE[unit]
    return items / bench["stats"]["median"] / scale, label


def format_table(report: dict) -> str:
    """Markdown table: group, benchmark, role, throughput, and ratio to each peer/baseline."""
    groups: dict[str, list[dict]] = defaultdict(list)
    for bench in report["benchmarks"]:
        groups[bench.get("group") or bench["name"]].append(bench)
    lines = [
        "| group | benchmark | role | median | throughput | ratio vs peers/baselines |",
        "|---|---|---|---|---|---|",
    ]
    for group in sorted(groups):
        rows = groups[group]
        others = [b for b in rows if b.get("extra_info", {}).get("role") in ("peer", "baseline")]
        for bench in rows:
            role = bench.get("extra_info", {}).get("role", "ours")
            tp = throughput(bench)
            tp_text = f"{tp[0]:.2f} {tp[1]}" if tp else "-"
            ratios = []
            if role == "ours":
                for other in others:
                    ratios.append(
                        f"{bench_short(other)}: {other['stats']['median'] / bench['stats']['median']:.2f}x"
                    )
            median_ms = bench["stats"]["median"] * 1e3
            lines.append(
                f"| {group} | {bench_short(bench)} | {role} | {median_ms:.3f} ms | {tp_text} | "
                f"{', '.join(ratios) or '-'} |"
            )
    return "\n".join(lines)


def bench_short(bench: dict) -> str:
    """The benchmark's name without the ``test_`` prefix."""
    return bench["name"].removeprefix("test_")


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``make bench``: extra arguments go to pytest (e.g. ``-k records``)."""
    report = run_benchmarks(list(sys.argv[1:] if argv is None else argv))
    machine = report.get("machine_info", {})
    print()
    print(f"# logstore benchmarks — {machine.get('cpu', {}).get('brand_raw', '?')}, "
          f"{machine.get('python_implementation', '')} {machine.get('python_version', '')}")
    print(format_table(report))
    for bench in report["benchmarks"]:
        info = bench.get("extra_info", {})
        if "p99_ms" in info:
            print(f"latency {bench_short(bench)}: p50 {info['p50_ms']} ms, p99 {info['p99_ms']} ms")
        if "ms_per_partition" in info:
            footprint = "" if "fds_after_reopen" not in info else (
                f"; descriptors {info['fds_after_reopen']} after the reopen, {info['fds_peak_after_reads']} at "
                f"most after reading every partition; {info['rss_kib_per_partition']} KiB resident per partition")
            print(f"scale {bench_short(bench)}: {info['ms_per_partition']} ms per partition "
                  f"({info['cpu_ms_per_partition']} ms of CPU){footprint}")
        if "first_metadata_s" in info:
            print(f"{bench_short(bench)}: first Metadata answered after {info['first_metadata_s']} s "
                  f"({info.get('first_metadata_cpu_s')} s of the server's CPU)")
        if "cpu_s" in info:
            print(f"cpu {bench_short(bench)}: {info['cpu_s']} s (all its processes, per round)")
        if "interleaved" in info:
            ratios = info["interleaved"]
            cpu = f", {ratios['cpu']:.2f}x by CPU time" if "cpu" in ratios else ""
            print(f"{bench_short(bench)} vs {ratios['baseline']} in interleaved rounds: "
                  f"{ratios['wall']:.2f}x by wall time{cpu}")
        if "interleaved_median_ms" in info:
            medians = info["interleaved_median_ms"]
            print(f"{bench_short(bench)} median round: ours {medians['ours']} ms, the mock's {medians['baseline']} ms; "
                  f"write() of its bytes into a new file {medians['write']} ms (new page-cache pages)")
        if "server_cpu_s_per_gib_produced" in info:
            print(f"server CPU {bench_short(bench)}: {info['server_cpu_s_per_gib_produced']} s per GiB of values "
                  f"produced (its interleaved rounds)")
        if "server_cpu_s_per_gib" in info:
            print(f"server CPU {bench_short(bench)}: {info['server_cpu_s_per_gib']} s per GiB served "
                  f"(rounds {info['server_cpu_s_per_gib_rounds']})")
        if "failover_s" in info:
            print(f"failover {bench_short(bench)}: {info['failover_s']} s from the leader's SIGKILL to the next "
                  f"acknowledged produce (rounds {info['failover_s_rounds']})")
        if "cpu_ms_per_round" in info:
            print(f"CPU {bench_short(bench)}: {info['cpu_ms_per_round']} ms per round "
                  f"(rounds {info['cpu_ms_rounds']})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
