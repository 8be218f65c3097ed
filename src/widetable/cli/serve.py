"""serve: the store over HTTP, speaking Tablestore's wire protocol (see widetable.server)."""

from __future__ import annotations

import os
import shlex
import signal
import threading
from typing import Annotated

import typer

from .. import db as _db
from ..storage import DEFAULT_CACHE_MB
from .app import DataOpt, NewStore, command, store_path
from .literals import CliError

# Per-partition capacity the server switches on: high enough that ordinary local use never
# meets it, low enough that a hot partition really throttles (OTSServerBusy, retried by SDKs).
DEFAULT_CAPACITY = 20000
# Microseconds the loop polls for the next request after an answer (wire/busypoll.py):
# long enough to catch a client that reads a 100-row page before it calls again.
DEFAULT_BUSY_POLL_US = 200
MAX_BUSY_POLL_US = 100_000  # wire/busypoll.py's MAX_WINDOW_US (not imported: the
# command line starts without loading the server)
DEFAULT_MAX_CONNECTIONS = 512  # server/core/dispatch.py's MAX_CONNECTIONS
DEFAULT_REQUEST_TIMEOUT = 30.0  # server/app.py's REQUEST_TIMEOUT


@command("serve")
def serve(
    ctx: typer.Context,
    data: DataOpt = None,
    host: Annotated[str, typer.Option(help="Address to bind; 0.0.0.0 exposes the server.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="Port; 0 picks a free one.")] = 8080,
    unix_socket: Annotated[
        str | None,
        typer.Option("--socket", help="Also listen on this unix socket (owner only), for "
                     "widetable.connect('unix://PATH') on this machine: no TCP cost."),
    ] = None,
    instance: Annotated[str, typer.Option(help="Instance name clients must send.")] = "widetable",
    keys: Annotated[
        str | None,
        typer.Option("--keys", help='TOML file of access keys: [access_keys] id = "secret", or '
                     'id = { secret = "...", read_only = true } for a key that may only read.'),
    ] = None,
    tls_cert: Annotated[str | None, typer.Option("--tls-cert", help="TLS certificate (PEM).")] = None,
    tls_key: Annotated[str | None, typer.Option("--tls-key", help="TLS private key (PEM).")] = None,
    sync: Annotated[bool, typer.Option("--sync", help="fsync every write (power-loss safe).")] = False,
    cache_mb: Annotated[
        int, typer.Option("--cache-mb", min=0, help="RocksDB block cache in MB (filled as data is read; 0 = off).")
    ] = DEFAULT_CACHE_MB,
    access_log: Annotated[bool, typer.Option("--access-log", help="Log every request.")] = False,
    capacity: Annotated[
        int,
        typer.Option(min=0, help="Operations per second per partition before OTSServerBusy; 0 = unlimited."),
    ] = DEFAULT_CAPACITY,
    grace: Annotated[
        float, typer.Option(min=0, help="Seconds in-flight requests get at shutdown.")
    ] = 30.0,
    busy_poll: Annotated[
        int,
        typer.Option("--busy-poll", min=0, max=MAX_BUSY_POLL_US, metavar="MICROSECONDS",
                     help="After each answer, poll for the next request this long before "
                     "sleeping: a client calling back to back is served sooner, for up to "
                     "this much CPU per answer (stops after idle windows); 0 = off."),
    ] = DEFAULT_BUSY_POLL_US,
    max_connections: Annotated[
        int,
        typer.Option("--max-connections", min=1,
                     help="Open client connections at most; one more is answered OTSServerBusy."),
    ] = DEFAULT_MAX_CONNECTIONS,
    request_timeout: Annotated[
        float,
        typer.Option("--request-timeout", min=0.001, metavar="SECONDS",
                     help="A request must arrive whole this long after its first byte, "
                     "or its connection is closed."),
    ] = DEFAULT_REQUEST_TIMEOUT,
    bigtable_port: Annotated[
        int | None,
        typer.Option("--bigtable-port", min=0, max=65535,
                     help="Also serve Bigtable's gRPC API on this port (0 picks a free one): "
                     "BIGTABLE_EMULATOR_HOST=host:port and the official google-cloud-bigtable "
                     "client works. Unauthenticated unless --bigtable-token-file is given."),
    ] = None,
    bigtable_host: Annotated[
        str, typer.Option("--bigtable-host", help="Address the Bigtable port binds (loopback "
                          "by default: emulator-mode clients send no credentials).")
    ] = "127.0.0.1",
    bigtable_tls_cert: Annotated[
        str | None, typer.Option("--bigtable-tls-cert", help="TLS certificate (PEM) of the Bigtable port.")
    ] = None,
    bigtable_tls_key: Annotated[
        str | None, typer.Option("--bigtable-tls-key", help="TLS private key (PEM) of the Bigtable port.")
    ] = None,
    bigtable_token_file: Annotated[
        str | None,
        typer.Option("--bigtable-token-file", help="File holding a shared token every Bigtable "
                     "call must carry as 'authorization: Bearer <token>' (or set "
                     "WIDETABLE_BIGTABLE_TOKEN); for a non-loopback port, with TLS."),
    ] = None,
) -> None:
    """Serve the store with Tablestore's protocol: the official SDKs and widetable.connect work.

    Access keys come from --keys and/or WIDETABLE_ACCESS_KEY_ID and
    WIDETABLE_ACCESS_KEY_SECRET; with neither, a key pair is made for this run.
    Every table gets --capacity operations per second per partition (existing
    tables at start-up, new ones when created); 0 turns throttling off.
    SIGTERM or Ctrl-C stops accepting, finishes in-flight requests and closes the store.
    """
    from ..server import WidetableServer, load_keys

    if (tls_cert is None) != (tls_key is None):
        raise CliError("TLS needs both --tls-cert and --tls-key")
    if (bigtable_tls_cert is None) != (bigtable_tls_key is None):
        raise CliError("TLS needs both --bigtable-tls-cert and --bigtable-tls-key")
    token = _bigtable_token(bigtable_token_file)
    try:
        store, generated = load_keys(keys)
    except (ValueError, OSError) as exc:
        raise CliError(f"cannot read access keys: {exc}") from None
    path = store_path(ctx, data)
    new = NewStore(path)
    database = _db.open(path, sync=sync, cache_mb=cache_mb)
    try:
        server = WidetableServer(database, store, host, port, instance, tls_cert, tls_key, access_log,
                                 capacity=capacity, unix_socket=unix_socket, busy_poll=busy_poll,
                                 max_connections=max_connections, request_timeout=request_timeout,
                                 bigtable_port=bigtable_port, bigtable_host=bigtable_host,
                                 bigtable_certfile=bigtable_tls_cert,
                                 bigtable_keyfile=bigtable_tls_key, bigtable_token=token)
    except BaseException:
        new.discard(database)  # a new store that could not be served: not left behind
        raise
    _banner(server, path, store, generated)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    worker = threading.Thread(target=server.serve_forever, name="widetable-serve", daemon=True)
    worker.start()
    while not stop.wait(0.5):
        if not worker.is_alive():
            break
    print("widetable: shutting down: finishing in-flight requests", flush=True)
    server.drain(grace)
    print("widetable: store closed", flush=True)


def _bigtable_token(path: str | None) -> str | None:
    """The shared token of the Bigtable port: the file's first line, else
    WIDETABLE_BIGTABLE_TOKEN, else None (unauthenticated)."""
    if path is not None:
        try:
            with open(path, encoding="utf-8") as f:
                token = f.readline().strip()
        except OSError as exc:
            raise CliError(f"cannot read the Bigtable token: {exc}") from None
        if not token:
            raise CliError(f"the Bigtable token file {path} is empty")
        return token
    return os.environ.get("WIDETABLE_BIGTABLE_TOKEN") or None


def _bigtable_banner(server) -> None:
    bt = server.bigtable
    if bt is None:
        return
    auth = "bearer token required" if bt.token else "UNAUTHENTICATED (emulator mode)"
    print(f"  bigtable:  {bt.endpoint}  (Bigtable's gRPC API{', TLS' if bt.tls else ''}; {auth})")
    if not bt.token and bt.host not in ("127.0.0.1", "localhost", "::1"):
        print("  WARNING:   the Bigtable port is open beyond this machine without a token: "
              "anyone who reaches it can read and write every table")
    reach = f"127.0.0.1:{bt.port}" if bt.host in ("0.0.0.0", "::", "") else bt.endpoint
    print(f"    official client: BIGTABLE_EMULATOR_HOST={reach}, then "
          "google.cloud.bigtable.data.BigtableDataClient(project=...)")


def _banner(server, path: str, store, generated: bool) -> None:
    key_id = store.ids[0]
    secret = store.secret(key_id) if generated else "<your secret>"
    print(f"widetable serving {path} (Tablestore protocol, and widetable's own for widetable.connect)",
          flush=False)
    print(f"  endpoint:  {server.endpoint}")
    if server.unix_endpoint:
        print(f"  socket:    {server.unix_endpoint}  (widetable.connect only)")
    print(f"  instance:  {server.instance}")
    _bigtable_banner(server)
    cap = server.capacity
    print(f"  capacity:  {f'{cap} operations/s per partition' if cap else 'unlimited'}")
    window = round(server.core.poll.window * 1e6)
    print(f"  busy poll: {f'{window} µs after each answer' if window else 'off'}")
    if generated:
        print("  access key (generated for this run; set WIDETABLE_ACCESS_KEY_ID / _SECRET "
              "or --keys to fix one):")
        print(f"    id:      {key_id}")
        print(f"    secret:  {secret}")
    else:
        print(f"  access key ids: "
              f"{', '.join(i + (' (read-only)' if i in store.read_only else '') for i in store.ids)}")
    print("  official SDK:")
    print("    from tablestore import OTSClient")
    print(f"    client = OTSClient('{server.endpoint}', '{key_id}', '{secret}', '{server.instance}')")
    print("  widetable:")
    print(f"    db = widetable.connect('{server.endpoint}', access_key_id='{key_id}',")
    print(f"                           access_key_secret='{secret}')")
    if server.unix_endpoint:
        print(f"    (or '{server.unix_endpoint}' on this machine)")
    print("  command line (the store is locked while served):")
    named = "" if server.instance == "widetable" else f" WIDETABLE_INSTANCE={shlex.quote(server.instance)}"
    print(f"    WIDETABLE_ACCESS_KEY_ID={shlex.quote(key_id)} "
          f"WIDETABLE_ACCESS_KEY_SECRET={shlex.quote(secret)}{named} \\")
    print(f"      widetable tables --endpoint {server.endpoint}")
    print("  Ctrl-C or SIGTERM stops it gracefully.", flush=True)
