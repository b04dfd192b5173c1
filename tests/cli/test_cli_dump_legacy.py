"""`logstore dump` on legacy (magic 0/1) data, decoded through the records package."""

from __future__ import annotations

from pathlib import Path

from kafka.record.legacy_records import LegacyRecordBatchBuilder

from logstore.records import COMPRESSION_NAMES, read_batch
from tests.cli.test_cli_dump import run_in_process
from tests.records.test_records_interop import kafka_codecs  # noqa: F401 - a fixture

LZ4 = COMPRESSION_NAMES.index("lz4")


def test_magic_0_lz4_with_kafka_3160_header_checksum_dumps(tmp_path: Path, kafka_codecs, capsys,  # noqa: F811
                                                          monkeypatch):
    builder = LegacyRecordBatchBuilder(magic=0, compression_type=LZ4, batch_size=1 << 20)
    for i in range(3):
        builder.append(i, timestamp=None, key=b"k%d" % i, value=b"value %d" % i)
    wrapper = (2).to_bytes(8, "big") + bytes(builder.build())[8:]  # the broker stamps the last offset
    # The old-Kafka frame's header checksum is over the wrong bytes, as KAFKA-3160 describes.
    frame_start = wrapper.index(b"\x04\x22\x4d\x18")
    assert wrapper[frame_start + 6] != 0x82  # the standard checksum of flag 0x60, block max 0x40
    (tmp_path / "00000000000000000000.log").write_bytes(wrapper)
    crcs = read_batch(wrapper).message_crcs()

    result = run_in_process("dump", "--deep-iteration", "--print-data-log", "00000000000000000000.log",
                            cwd=tmp_path, capsys=capsys, monkeypatch=monkeypatch)

    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[:2] == ["Dumping 00000000000000000000.log", "Log starting offset: 0"]
    assert lines[2].startswith("offset: 2 position: 0 NoTimestampType: -1 size: ")
    assert lines[2].endswith(f"magic: 0 compresscodec: lz4 crc: {read_batch(wrapper).crc} isvalid: true")
    assert lines[3:] == [
        f"| offset: {i} NoTimestampType: -1 keySize: 2 valueSize: 7 isValid: true crc: {crcs[i]}}}"
        f" key: k{i} payload: value {i}" for i in range(3)]
