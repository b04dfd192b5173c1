"""`logstore serve`: run a single Kafka node over a data directory until SIGINT or SIGTERM."""

from __future__ import annotations

import argparse
import signal
import sys
import threading

from logstore.cli._common import ExitCode, UsageError, add_command

DEFAULT_LISTEN = ("127.0.0.1", 9092)


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = add_command(
        subparsers, "serve",
        help="serve a data directory over Kafka's wire protocol",
        description=(
            "Serve DATA_DIR as a one-node Kafka cluster: Kafka clients (librdkafka, kafka-python,\n"
            "aiokafka, the Java client) produce, fetch, commit offsets and run transactions on it.\n"
            "The directory keeps Kafka's format: dump, verify and Kafka's own tools read it.\n"
            "Retention and compaction run as the topic configs say."),
        example="logstore serve ./data --listen 127.0.0.1:9092 --config-file server.properties",
    )
    parser.add_argument("data_dir", metavar="DATA_DIR", help="the data directory (created if missing)")
    parser.add_argument("--listen", metavar="HOST:PORT",
                        help="address to listen on (default: `listeners` of --config-file, else 127.0.0.1:9092; "
                             "port 0 picks a free port)")
    parser.add_argument("--config-file", metavar="FILE",
                        help="a Kafka server.properties file (broker and log.* keys; process.roles, "
                             "controller.quorum.voters and the listeners to join a KRaft cluster)")
    parser.add_argument("--cluster-id", metavar="ID",
                        help="the cluster id a new data directory is formatted with, as kafka-storage "
                             "format --cluster-id does: every node of a cluster needs the same one "
                             "(write --cluster-id=ID when the id begins with -)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from compaction import LogCleaner
    from logstore.errors import InvalidConfigError
    from logstore.server import BrokerConfig, KafkaServer
    from logstore.server.broker_config import parse_listen
    from retention import apply_retention

    try:
        config = BrokerConfig.load(args.config_file)
        address = parse_listen(args.listen) if args.listen else config.listen_address() or DEFAULT_LISTEN
    except InvalidConfigError as exc:
        raise UsageError(str(exc)) from None
    server = KafkaServer(args.data_dir, host=address[0], port=address[1], config=config,
                         cleaner=LogCleaner, retention=apply_retention, cluster_id=args.cluster_id)
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    server.start()
    meta = server.context.meta
    roles = "" if config.quorum is None else f", process.roles {','.join(sorted(config.quorum.process_roles))}"
    if server.cluster is not None and server.cluster.controller_port is not None:
        listener = config.quorum.controller_listener
        roles += f", {listener.name} on {listener.host}:{server.cluster.controller_port}"
    print(f"logstore: serving {args.data_dir} on {server.bootstrap_servers} "
          f"(node.id {meta.node_id}, cluster.id {meta.cluster_id}{roles})", file=sys.stderr, flush=True)
    try:
        stop.wait()
    finally:
        server.stop()
    return ExitCode.OK
