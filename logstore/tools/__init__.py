"""The operator tools' pure side: Kafka's DumpLogSegments text and JSON for decoded files, and
the record key/value decoders that dump and consume apply. Application layer: the engine never
imports it; `logstore.cli` does."""
