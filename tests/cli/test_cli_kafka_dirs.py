"""The operator tools on directories as Kafka leaves them: follower-written legacy data,
compacted topics, damaged copies and whole broker directories. Each test builds its situation
from data we write or from copies of Kafka's sample, runs the command as a user would, and
checks what an operator sees (exit code, problem lines with file and position, the summary)."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from tests.cli.test_cli_dump import run
from tests.support.files import directory_digest
from tests.support.kafka_dirs import (
    SAMPLE_DAMAGE,
    SAMPLES,
    compacted_partition,
    damaged_kafka_sample,
    follower_partition,
    kafka_sample,
)

SAMPLE_PARTITION = SAMPLES / "logdir" / "plain-0"


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    """A data directory holding follower-written legacy data and a compacted topic."""
    root = tmp_path / "data"
    root.mkdir()
    follower_partition(root / "replicated-0")
    compacted_partition(root / "users-0")
    return root


def index_entries(path: Path) -> list[tuple[int, int]]:
    """(absolute offset, position) of each entry of an offset index."""
    base = int(path.name.split(".")[0])
    data = path.read_bytes()
    return [(base + r, p) for r, p in struct.iter_unpack(">ii", data)]


def test_legacy_entries_verify_clean(data_dir: Path):
    index = data_dir / "replicated-0" / "00000000000000000000.index"
    # the premise: Kafka's follower entries name an append's last offset at its first batch
    assert (11, 0) not in index_entries(index) or (23, 663) in index_entries(index)
    dumped = run("dump", str(index), cwd=data_dir)  # Kafka's tool notes such entries
    assert dumped.stderr.startswith(f"Mismatches in :{index}\n")
    before = directory_digest(data_dir)
    result = run("verify", "--deep", str(data_dir), cwd=data_dir)
    assert result.returncode == 0, result.stdout
    assert result.stdout.endswith("in 2 partition(s): OK\n")
    assert directory_digest(data_dir) == before


def test_kafkas_sample_and_its_data_dir_verify_clean(tmp_path: Path):
    partition = kafka_sample(tmp_path / "logdir")
    result = run("verify", str(partition.parent), cwd=tmp_path)
    assert result.returncode == 0, result.stdout
    assert result.stdout == "verified 33 files (240 batches) in 1 partition(s): OK\n"


def _entry_problem(result, name: str) -> list[tuple[str, int, str]]:
    objects = [json.loads(line) for line in result.stdout.splitlines()]
    return [(Path(o["file"]).name, o["position"], o["message"]) for o in objects
            if o["type"] == "problem" and Path(o["file"]).name == name]


def test_offset_entries_that_could_miss_are_problems(data_dir: Path):
    partition = data_dir / "replicated-0"
    index = partition / "00000000000000000000.index"
    entries = index_entries(index)
    data = bytearray(index.read_bytes())
    # entry 2 now points one byte into a batch; entry 4 names an offset held by an earlier batch
    struct.pack_into(">i", data, 2 * 8 + 4, entries[2][1] + 1)
    struct.pack_into(">i", data, 4 * 8, entries[3][0] - 2)
    index.write_bytes(bytes(data))
    result = run("verify", "--json", str(partition), cwd=data_dir)
    assert result.returncode == 1
    problems = _entry_problem(result, index.name)
    assert [(p[1], p[2].split(",")[0]) for p in problems] == [
        (16, f"entry 2 points at log position {entries[2][1] + 1}"),
        (32, f"entry 4 (offset {entries[3][0] - 2}"),
        (32, f"entry 4 says offset {entries[3][0] - 2} is at or after log position {entries[4][1]}"),
    ]
    assert "a lookup would miss it" in problems[2][2]


def test_time_entry_below_an_earlier_batch_timestamp_is_a_problem(data_dir: Path):
    partition = data_dir / "replicated-0"
    index = partition / "00000000000000000000.timeindex"
    data = bytearray(index.read_bytes())
    (timestamp, offset) = struct.unpack_from(">qi", data, 5 * 12)
    (previous, _) = struct.unpack_from(">qi", data, 4 * 12)
    struct.pack_into(">qi", data, 5 * 12, previous + 1, offset + 24)  # skips past bigger timestamps
    index.write_bytes(bytes(data))
    result = run("verify", "--json", str(partition), cwd=data_dir)
    assert result.returncode == 1
    [(_, position, message)] = _entry_problem(result, index.name)
    assert position == 60
    assert message.startswith(f"entry 5 (timestamp {previous + 1}, offset {offset + 24}): the batch at log position")
    assert "would miss it" in message


@pytest.fixture
def damaged(tmp_path: Path) -> Path:
    """Kafka's sample with a bad magic byte mid-segment, a CRC-corrupt batch and a zero-filled
    tail, each in its own segment; returns the data directory."""
    partition = kafka_sample(tmp_path / "logdir")
    log = partition / "00000000000000000105.log"
    data = bytearray(log.read_bytes())
    data[962 + 16] = 0xFF  # the magic byte of the batch at position 962
    log.write_bytes(bytes(data))
    log = partition / "00000000000000000211.log"
    data = bytearray(log.read_bytes())
    data[300] ^= 0x55  # inside the first batch's records
    log.write_bytes(bytes(data))
    with (partition / "00000000000000000633.log").open("ab") as f:
        f.write(bytes(500))
    return partition.parent


DAMAGE = [
    ("00000000000000000105.log", 962, "unknown magic 255"),
    ("00000000000000000211.log", 0, "batch CRC mismatch: stored 2254287576, computed 2432979512"),
    ("00000000000000000633.log", 13467, "Found record size 0 smaller than minimum record overhead (14)"),
]


def test_verify_names_each_damage_once_and_reads_on(damaged: Path):
    before = directory_digest(damaged)
    result = run("verify", str(damaged), cwd=damaged)
    assert result.returncode == 1
    partition = damaged / "plain-0"
    assert result.stdout.splitlines() == [
        f"{partition / DAMAGE[0][0]}: position 962: unreadable batch header: unknown magic 255",
        f"{partition / DAMAGE[1][0]}: position 0: {DAMAGE[1][2]}",
        f"{partition / DAMAGE[2][0]}: position 13467: {DAMAGE[2][2]}",
        "verified 33 files (240 batches) in 1 partition(s): 3 problem(s)",
    ]
    as_json = [json.loads(line) for line in run("verify", "--json", str(damaged), cwd=damaged).stdout.splitlines()]
    assert [(Path(o["file"]).name, o["position"]) for o in as_json[:-1]] == [d[:2] for d in DAMAGE]
    assert as_json[-1] == {"type": "summary", "partitions": 1, "files": 33, "batches": 240, "problems": 3,
                           "skipped": 0}
    assert directory_digest(damaged) == before


def test_stats_names_each_damage_and_still_prints_its_table(damaged: Path):
    before = directory_digest(damaged)
    result = run("stats", str(damaged), cwd=damaged)
    assert result.returncode == 1
    table = result.stdout.splitlines()
    assert table[0].split()[:6] == ["PARTITION", "SEGMENTS", "BYTES", "START", "END", "RECORDS"]
    assert table[1].split()[:6] == ["plain-0", "7", "110872", "0", "720", "714"]  # two bad batches of 3
    partition = damaged / "plain-0"
    assert result.stderr.splitlines() == [f"logstore: {partition / name}: position {position}: {message}"
                                          for name, position, message in DAMAGE]
    (row,) = [json.loads(line) for line in run("stats", "--json", str(damaged), cwd=damaged).stdout.splitlines()]
    assert row["records"] == 714 and row["batches"] == 238 and row["invalidBytes"] == 500
    assert [(Path(p["file"]).name, p["position"], p["message"]) for p in row["problems"]] == DAMAGE
    assert directory_digest(damaged) == before


def test_stats_reads_from_the_checkpointed_log_start(tmp_path: Path):
    partition = kafka_sample(tmp_path / "logdir")
    for path in partition.glob("00000000000000000000.*"):  # retention deleted the first segment
        path.unlink()
    (tmp_path / "logdir" / "log-start-offset-checkpoint").write_text("0\n1\nplain 0 130\n")
    (row,) = [json.loads(line) for line in run("stats", "--json", str(partition), cwd=tmp_path).stdout.splitlines()]
    assert (row["startOffset"], row["endOffset"], row["records"]) == (130, 720, 590)
    consumed = run("consume", str(tmp_path / "logdir"), "plain-0", cwd=tmp_path).stdout.splitlines()
    assert len(consumed) == 590 and json.loads(consumed[0])["offset"] == 130
    table = run("stats", str(partition), cwd=tmp_path).stdout.splitlines()
    assert table[1].split()[3:6] == ["130", "720", "590"]


def _consumed_offsets(data_dir: Path, *args: str) -> list[int]:
    result = run("consume", str(data_dir), "plain-0", *args, cwd=data_dir)
    assert result.returncode == 0, result.stderr
    return [json.loads(line)["offset"] for line in result.stdout.splitlines()]


def _kept_by_recovery(data_dir: Path, tmp_path: Path) -> list[int]:
    """The offsets a writable open (Kafka's recovery) keeps, on a copy of `data_dir`."""
    import shutil

    from logstore import Log

    copy = tmp_path / "recovered"
    shutil.copytree(data_dir, copy)
    with Log.open(copy / "plain-0") as log:
        return [r.offset for r in log.records()]


@pytest.mark.parametrize("damage", SAMPLE_DAMAGE)
def test_a_read_only_open_reads_what_recovery_keeps(tmp_path: Path, damage: str):
    partition = damaged_kafka_sample(tmp_path / "logdir", damage)
    before = directory_digest(partition.parent)
    kept = _kept_by_recovery(partition.parent, tmp_path)
    assert 633 < len(kept) < 720 and kept == list(range(len(kept)))
    assert _consumed_offsets(partition.parent) == kept
    end = len(kept)
    assert _consumed_offsets(partition.parent, "--from", str(end - 1)) == [end - 1]
    beyond = run("consume", str(partition.parent), "plain-0", "--from", str(end + 1), cwd=tmp_path)
    assert beyond.returncode == 2 and f"valid offsets are [0, {end}]" in beyond.stderr
    assert directory_digest(partition.parent) == before


def test_recover_finds_nothing_on_healthy_directories_and_changes_nothing(data_dir: Path, tmp_path: Path):
    kafka_sample(data_dir / "sample")
    alone = tmp_path / "alone"  # partition directories copied without their root checkpoints
    alone.mkdir()
    import shutil

    for name in ("replicated-0", "users-0"):
        shutil.copytree(data_dir / name, alone / name)
    shutil.copytree(data_dir / "sample" / "plain-0", alone / "plain-0")
    def unlocked(root: Path) -> dict[str, str]:
        return {k: v for k, v in directory_digest(root).items() if not k.endswith(".lock")}

    for root in (data_dir, data_dir / "sample", alone):
        before = unlocked(root)
        for options in ([], ["--full"], ["--in-place"], ["--in-place", "--full"]):
            result = run("recover", *options, str(root), cwd=tmp_path)
            assert result.returncode == 0, result.stdout
            assert all(line.endswith(": nothing to recover") for line in result.stdout.splitlines())
        assert unlocked(root) == before


def test_a_directory_our_recovery_just_rebuilt_needs_nothing(tmp_path: Path):
    from logstore import Log
    from logstore.log_loader import LoadState

    partition = kafka_sample(tmp_path / "logdir")
    with Log.open(partition, {"segment.bytes": 16384, "index.interval.bytes": 4096},
                  load_state=LoadState(recovery_point=0)) as log:
        assert log.log_end_offset == 720
    result = run("recover", "--full", str(partition), cwd=tmp_path)
    assert (result.returncode, result.stdout) == (0, f"{partition}: nothing to recover\n")


def test_recover_rebuilds_only_an_index_a_lookup_could_miss_through(data_dir: Path):
    partition = data_dir / "replicated-0"
    index = partition / "00000000000000000000.index"
    timeindex = partition / "00000000000000000000.timeindex"
    kept_time_index = timeindex.read_bytes()
    data = bytearray(index.read_bytes())
    struct.pack_into(">i", data, 2 * 8 + 4, struct.unpack_from(">i", data, 2 * 8 + 4)[0] + 1)
    index.write_bytes(bytes(data))
    before = directory_digest(data_dir)
    result = run("recover", str(partition), cwd=data_dir)
    assert result.returncode == 1 and result.stdout.startswith(f"{index}: would rebuild (now ")
    assert result.stdout.count("\n") == 1 and directory_digest(data_dir) == before
    applied = run("recover", "--in-place", str(partition), cwd=data_dir)
    assert applied.returncode == 1 and applied.stdout.startswith(f"{index}: rebuilt (now ")
    assert index.stat().st_size > 0 and timeindex.read_bytes() == kept_time_index
    assert run("verify", str(partition), cwd=data_dir).returncode == 0
    assert run("recover", str(partition), cwd=data_dir).stdout == f"{partition}: nothing to recover\n"


def test_recover_truncates_a_torn_tail_and_keeps_kafkas_indexes(tmp_path: Path):
    partition = kafka_sample(tmp_path / "logdir")
    log = partition / "00000000000000000633.log"
    log.write_bytes(log.read_bytes()[:9000])
    kept = {p.name: p.read_bytes() for p in partition.glob("*index") if not p.name.startswith("000000000000000006")}
    result = run("recover", "--in-place", "--json", str(partition), cwd=tmp_path)
    assert result.returncode == 1
    done = {(c["file"], c["action"]) for c in map(json.loads, result.stdout.splitlines())}
    assert ("00000000000000000633.log", "truncate") in done
    assert ("00000000000000000720.snapshot", "delete") in done
    assert all(name.startswith("00000000000000000633") or name.endswith(".snapshot") for name, _ in done)
    assert {p.name: p.read_bytes() for p in partition.glob("*index") if p.name in kept} == kept
    assert (partition / "00000000000000000633.index").stat().st_size > 0
    assert run("verify", str(partition), cwd=tmp_path).returncode == 0


@pytest.fixture
def broker(tmp_path: Path) -> Path:
    from tests.support.kafka_dirs import broker_dir

    return broker_dir(tmp_path / "kafka-logs")


SKIP_NOTES = ["orders-0/notes.txt: not a file Kafka's log layer writes; not checked",
              "orders-7.0123456789abcdef0123456789abcdef-delete: a partition Kafka is deleting"]


def test_every_command_reads_a_whole_broker_directory(broker: Path):
    before = directory_digest(broker)
    verified = run("verify", "--deep", str(broker), cwd=broker)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert verified.stdout == "verified 101 files (340 batches) in 8 partition(s), skipped 2: OK\n"
    assert verified.stderr == "".join(f"logstore: note: skipped {broker}/{note}\n" for note in SKIP_NOTES)
    as_json = [json.loads(line) for line in run("verify", "--json", str(broker), cwd=broker).stdout.splitlines()]
    assert [(Path(o["file"]).name, o["type"]) for o in as_json[:-1]] == [
        ("notes.txt", "skipped"), ("orders-7.0123456789abcdef0123456789abcdef-delete", "skipped")]

    stats = run("stats", "--json", str(broker), cwd=broker)
    assert stats.returncode == 0 and stats.stderr == f"logstore: note: skipped {broker}/{SKIP_NOTES[1]}\n"
    rows = {row["partition"]: row for row in map(json.loads, stats.stdout.splitlines())}
    assert sorted(rows) == ["__cluster_metadata-0", "__consumer_offsets-0", "__consumer_offsets-1",
                            "__consumer_offsets-2", "__transaction_state-0", "orders-0", "orders-1", "users-0"]
    assert rows["__consumer_offsets-1"]["records"] == 60 and rows["__cluster_metadata-0"]["controlBatches"] == 1
    assert rows["__cluster_metadata-0"]["records"] == 4

    for options in ([], ["--in-place"]):
        recovered = run("recover", *options, str(broker), cwd=broker)
        assert recovered.returncode == 0, recovered.stdout
        assert recovered.stdout.count(": nothing to recover\n") == 8

    consumed = run("consume", str(broker), "__consumer_offsets-0", cwd=broker)
    assert consumed.returncode == 0 and len(consumed.stdout.splitlines()) == 60
    for log in sorted(broker.glob("*-[0-9]/*.log")):
        dumped = run("dump", "--deep-iteration", str(log), cwd=broker)
        assert dumped.returncode == 0 and "Traceback" not in dumped.stderr, dumped.stderr
    assert directory_digest(broker) == before


def test_verify_names_damaged_broker_files(broker: Path):
    from logstore.records import iter_batches

    metadata = broker / "__cluster_metadata-0"
    snapshot = metadata / "00000000000000000005-0000000001.checkpoint"
    data = bytearray(snapshot.read_bytes())
    footer = [b.position for b in iter_batches(bytes(data))][-1]
    data[-3] ^= 0xFF  # inside the footer batch
    snapshot.write_bytes(bytes(data))
    (metadata / "quorum-state").write_text('{"leaderId":1')
    (broker / "orders-1" / "partition.metadata").write_text("version: 0\ntopic_id: nope")
    (broker / "meta.properties").write_text("version=1\ncluster.id=x\n")
    result = run("verify", "--json", str(broker), cwd=broker)
    assert result.returncode == 1
    problems = [(Path(o["file"]).name, o["position"], o["message"].split(":")[0])
                for o in map(json.loads, result.stdout.splitlines()) if o["type"] == "problem"]
    assert [p[0] for p in problems] == ["00000000000000000005-0000000001.checkpoint", "quorum-state",
                                        "partition.metadata", "meta.properties"]
    assert problems[0][1] == footer
    assert problems[1][2] == "not JSON" and problems[2][2].startswith("topic_id 'nope'")
    assert problems[3][2] == "version 1 without node.id"


@pytest.mark.parametrize("name, note", [
    ("00000000000000000005-0000000001.checkpoint", None),
    ("00000000000000000005-0000000001.checkpoint.part", "a KRaft snapshot still being written"),
    ("00000000000000000000.log.deleted", "a segment file awaiting deletion"),
    ("00000000000000000000.index.cleaned", "output of an interrupted clean"),
    ("00000000000000000000.log.swap", "a segment swap a crash interrupted"),
    ("partition.metadata", None), ("quorum-state", None), ("leader-epoch-checkpoint", None),
    ("core.1234", "not a file Kafka's log layer writes"),
])
def test_partition_file_notes(name: str, note: str | None):
    from logstore.cli.broker_files import partition_file_note

    found = partition_file_note(name)
    assert found == note if note is None else found.startswith(note)


def test_broker_file_checks_accept_what_kafka_writes():
    from logstore.cli import broker_files as bf

    assert bf.check_meta_properties(b"#\nbroker.id=0\nversion=0\ncluster.id=abc\n") is None
    assert bf.check_meta_properties(b"version=2\n") == "version '2' is not 0 or 1"
    assert bf.check_partition_metadata((SAMPLE_PARTITION / "partition.metadata").read_bytes()) is None
    assert bf.check_quorum_state(b'{"leaderId":-1,"leaderEpoch":0,"votedId":-1,"data_version":0}') is None
    assert bf.dir_note("orders-0.5f2e0000000000000000000000000000-future").startswith("a future replica")


def test_consume_prints_up_to_damage_kafka_recovery_does_not_look_at_and_names_it(damaged: Path):
    # the bad magic byte in segment 105 lies below the recovery point (720): Kafka's recovery
    # keeps it, and a consumer reads up to it and then fails
    result = run("consume", str(damaged), "plain-0", cwd=damaged)
    assert [json.loads(line)["offset"] for line in result.stdout.splitlines()] == list(range(111))
    assert result.returncode == 1
    assert result.stderr == (f"logstore: error: unknown magic 255 "
                             f"({damaged / 'plain-0' / '00000000000000000105.log'}, position 962)\n")


def test_segments_named_after_a_legacy_wrappers_last_offset_verify_clean(tmp_path: Path):
    from logstore.log_files import segment_file_name
    from tests.support.kafka_dirs import legacy_messages

    partition = tmp_path / "data" / "old-0"
    partition.mkdir(parents=True)
    first = legacy_messages(0, 4, magic=1, compression="gzip")  # offsets 0..3
    second = legacy_messages(4, 4, magic=1, compression="gzip")  # offsets 4..7, wrapper offset 7
    (partition / segment_file_name(0, ".log")).write_bytes(first)
    (partition / segment_file_name(7, ".log")).write_bytes(second)  # as Kafka before KAFKA-7385's fix
    result = run("verify", "--deep", str(partition), cwd=tmp_path)
    assert (result.returncode, result.stdout) == (0, "verified 2 files (2 batches) in 1 partition(s): OK\n")
    (partition / segment_file_name(8, ".log")).write_bytes(second)
    (partition / segment_file_name(7, ".log")).unlink()
    result = run("verify", str(partition), cwd=tmp_path)
    assert result.returncode == 1
    assert f"{segment_file_name(8, '.log')}: position 0: batch ends at offset 7, below the segment's base offset 8" \
        in result.stdout


def test_recover_rebuilds_an_index_with_the_topics_configs(data_dir: Path, tmp_path: Path):
    import shutil

    index = data_dir / "replicated-0" / "00000000000000000000.index"
    data = bytearray(index.read_bytes())
    struct.pack_into(">i", data, 4, 1)  # entry 0 one byte into a batch
    index.write_bytes(bytes(data))
    sizes = {}
    for name, options in (("default", []), ("given", ["--config", "index.interval.bytes=1"]),
                          ("stored", [])):
        copy = tmp_path / name
        shutil.copytree(data_dir, copy)
        if name == "stored":
            (copy / "logstore-topic-configs.json").write_text(
                '{"version": 1, "topics": {"replicated": {"index.interval.bytes": "1"}}}')
        result = run("recover", "--in-place", *options, str(copy / "replicated-0"), cwd=tmp_path)
        assert result.returncode == 1 and "00000000000000000000.index: rebuilt" in result.stdout
        sizes[name] = (copy / "replicated-0" / index.name).stat().st_size
    assert sizes["given"] == sizes["stored"] > sizes["default"]


def test_recover_reports_a_partition_it_cannot_recover_and_goes_on(tmp_path: Path):
    from logstore.records import Record, build_batch

    for name, offset in (("a-0", 2**32), ("b-0", 0)):  # a-0's batch does not fit its segment's index
        (tmp_path / name).mkdir()
        (tmp_path / name / "00000000000000000000.log").write_bytes(
            build_batch([Record(offset, 1, b"k", b"v")], base_offset=offset))
    before = directory_digest(tmp_path)
    result = run("recover", str(tmp_path), cwd=tmp_path)
    assert result.returncode == 3
    assert result.stderr == ("logstore: error: offset 4294967296 at position 0 does not fit relative to base "
                             f"offset 0 of {tmp_path}/a-0/00000000000000000000.log\n")
    assert result.stdout == f"{tmp_path}/b-0/00000000000000000000.timeindex: would create (now 12 bytes)\n"
    assert directory_digest(tmp_path) == before


def test_recover_names_every_damage_and_applies_only_what_kafka_recovers(damaged: Path):
    partition = damaged / "plain-0"
    before = directory_digest(damaged)
    result = run("recover", "--json", str(damaged), cwd=damaged)
    assert result.returncode == 1
    found = [(o["file"], o["action"], o["position"], o["applied"]) for o in map(json.loads, result.stdout.splitlines())]
    assert found == [("00000000000000000633.log", "truncate", 13467, False),
                     ("00000000000000000105.log", "damaged", 962, False),
                     ("00000000000000000211.log", "damaged", 0, False)]
    assert directory_digest(damaged) == before
    applied = run("recover", "--in-place", str(damaged), cwd=damaged)
    assert applied.stdout.splitlines()[0] == f"{partition}/00000000000000000633.log: truncated 500 bytes at position 13467"
    assert (partition / "00000000000000000633.log").stat().st_size == 13467
    assert (partition / "00000000000000000105.log").stat().st_size == 16106  # Kafka keeps it as it is


def test_verify_notes_a_cleans_leftovers_once_per_directory(tmp_path: Path):
    partition = kafka_sample(tmp_path / "logdir")
    for name in ("00000000000000000000.log", "00000000000000000000.index", "00000000000000000105.log"):
        (partition / f"{name}.deleted").write_bytes(b"")
    result = run("verify", str(partition), cwd=tmp_path)
    assert result.returncode == 0
    assert result.stderr == (f"logstore: note: skipped 3 files in {partition}: a segment file awaiting "
                             "deletion (Kafka removes it on open)\n")
    assert result.stdout == "verified 30 files (240 batches) in 1 partition(s), skipped 3: OK\n"


def test_recover_removes_pending_deletions_as_kafkas_loader_does_and_exits_0(tmp_path: Path):
    # a broker stopped during delayed deletion: retention moved the log start past segment 0 and
    # renamed its files, and file.delete.delay.ms had not passed
    partition = kafka_sample(tmp_path / "logdir")
    pending = sorted(p.name + ".deleted" for p in partition.glob("00000000000000000000.*"))
    for name in pending:
        (partition / name.removesuffix(".deleted")).rename(partition / name)
    (partition.parent / "log-start-offset-checkpoint").write_text("0\n1\nplain 0 105\n")
    before = directory_digest(partition.parent)
    note = f"logstore: note: {partition}: {{}} 3 files awaiting deletion (*.deleted), as Kafka's loader does on open\n"
    for options in ([], ["--full"], ["--json"]):
        result = run("recover", *options, str(partition.parent), cwd=tmp_path)
        assert (result.returncode, result.stderr) == (0, note.format("would remove")), result.stdout
        assert result.stdout == ("" if "--json" in options else f"{partition}: nothing to recover\n")
    assert directory_digest(partition.parent) == before
    result = run("recover", "--in-place", str(partition.parent), cwd=tmp_path)
    assert (result.returncode, result.stderr) == (0, note.format("removed"))
    assert result.stdout == f"{partition}: nothing to recover\n"
    after = {k: v for k, v in directory_digest(partition.parent).items() if not k.endswith(".lock")}
    assert after == {k: v for k, v in before.items() if not k.endswith(".deleted")}
    again = run("recover", "--in-place", str(partition.parent), cwd=tmp_path)
    assert (again.returncode, again.stderr, again.stdout) == (0, "", f"{partition}: nothing to recover\n")
