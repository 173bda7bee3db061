#!/usr/bin/env python3
"""A TCP proxy for tests: forwards 127.0.0.1:<port> to --target, counts the bytes clients send
through it (request heads and bodies), and with --cut-at N cuts the connection that carries the Nth
byte (the first time only): the client's side is reset, the server sees the request end early.
With --cut-every N, every connection is cut so once it has carried N bytes from its client: a thin
link that drops again and again.

    python3 Tests/Servers/cut_proxy.py --target 127.0.0.1:9000 [--cut-at 40000000 | --cut-every 262144] [--rate 16777216]

Prints one line {"listening": PORT} when ready. A connection whose first bytes are "STATS\\n" gets
{"upstream_bytes": N, "cuts": C, "connections": K, "most_in_flight": M} and is closed; a request
is in flight on a connection from its first byte until the server's first byte back, and M is the
most in flight at once. With --flip MARKER, the first MARKER the clients send (within one read) has
its first byte's lowest bit flipped, once: the bytes are changed in transit, as by a bad proxy;
"flips" in the stats counts it. With --drop-answer REGEX, the first request whose bytes (within one
read) match REGEX reaches the server whole, and the server's answer to it is not passed on: when
its first bytes come back, the client's side is reset (the request was carried out, its answer
lost, as when a link drops at the worst moment); "dropped_answers" in the stats counts it. With
--replacement FILE as well, the client gets FILE's bytes (a whole HTTP response) instead of the
server's answer, and then the connection is closed.
"""
import argparse, json, os, re, signal, socket, struct, sys, threading, time

lock = threading.Lock()
stats = {"upstream_bytes": 0, "cuts": 0, "connections": 0, "most_in_flight": 0, "flips": 0, "dropped_answers": 0}
drop_answer = None  # the request (a compiled bytes regex) whose answer is not passed on, once
dropping = set()  # connections (their client sockets) whose next answer is dropped
drop_armed = False
replacement = None  # what the client gets instead of the dropped answer (a whole HTTP response)
flip = None  # the marker whose first byte is flipped, once
in_flight = set()  # connections (their client sockets) whose request awaits the server's answer
cut_at = None
cut_every = None  # every connection is cut once it has carried this many bytes from its client
carried = {}  # client socket -> bytes it has sent through, with --cut-every
rate = None  # upstream bytes per second per connection, when set


def cut(pair):
    """The client side is reset; the server sees its request end early (FIN), as when a client dies."""
    client, server = pair
    reset(client)
    try:
        server.shutdown(socket.SHUT_RDWR)
        server.close()
    except OSError:
        pass


def reset(sock):
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()
    except OSError:
        pass


def forward_upstream(data, sink, pair):
    """Counts and forwards client bytes; cuts the connection at the --cut-at byte. False once cut."""
    with lock:
        before = stats["upstream_bytes"]
        cutting = cut_at is not None and stats["cuts"] == 0 and before + len(data) >= cut_at
        if cutting:
            data = data[: max(0, cut_at - before)]
            stats["cuts"] += 1
        elif cut_every is not None:
            so_far = carried.get(pair[0], 0)
            cutting = so_far + len(data) >= cut_every
            if cutting:
                data = data[: max(0, cut_every - so_far)]
                stats["cuts"] += 1
                carried.pop(pair[0], None)
            else:
                carried[pair[0]] = so_far + len(data)
        stats["upstream_bytes"] += len(data)
        if flip and stats["flips"] == 0 and flip in data:
            at = data.index(flip)
            data = data[:at] + bytes([data[at] ^ 1]) + data[at + 1:]
            stats["flips"] += 1
        global drop_armed
        if drop_answer is not None and not drop_armed and drop_answer.search(data):
            drop_armed = True
            dropping.add(pair[0])
        if data and not cutting:
            in_flight.add(pair[0])
            stats["most_in_flight"] = max(stats["most_in_flight"], len(in_flight))
    if data:
        sink.sendall(data)
    if cutting:
        cut(pair)
        return False
    return True


def pump(source, sink, upstream, pair):
    started, forwarded = time.monotonic(), 0
    try:
        while True:
            data = source.recv(65536)
            if upstream and rate and data:
                # A kept-alive connection that sat idle earns no credit: at most 0.1 s of it is kept,
                # so every request on it is held to the rate, not only the first.
                lag = time.monotonic() - started - forwarded / rate
                if lag > 0.1:
                    started += lag - 0.1
                forwarded += len(data)
                ahead = forwarded / rate - (time.monotonic() - started)
                if ahead > 0:
                    time.sleep(ahead)
            if not data:
                break
            if upstream:
                if not forward_upstream(data, sink, pair):
                    return
                continue
            with lock:
                in_flight.discard(pair[0])
                dropped = pair[0] in dropping
                if dropped:
                    dropping.discard(pair[0])
                    stats["dropped_answers"] += 1
            if dropped:
                if replacement is not None:
                    try:
                        sink.sendall(replacement)
                    except OSError:
                        pass
                # Shut down first: the thread reading the client is blocked in recv on this socket,
                # and a close alone would not end the connection until that recv returns.
                try:
                    pair[0].shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                if replacement is None:
                    cut(pair)
                else:
                    # An answer of its own, then an orderly close, as a load balancer's.
                    for sock in pair:
                        try:
                            sock.close()
                        except OSError:
                            pass
                return
            sink.sendall(data)
    except OSError:
        pass
    finally:
        with lock:
            in_flight.discard(pair[0])
        try:
            sink.shutdown(socket.SHUT_WR)
        except OSError:
            pass


def handle(client, target):
    first = b""
    try:
        client.settimeout(None)
        first = client.recv(65536)
    except OSError:
        client.close()
        return
    if first == b"STATS\n":
        with lock:
            client.sendall(json.dumps(stats).encode())
        client.close()
        return
    try:
        server = socket.create_connection(target)
    except OSError:
        reset(client)
        return
    with lock:
        stats["connections"] += 1
    pair = (client, server)
    # The first chunk counts like the rest (and may itself be cut).
    if first and not forward_upstream(first, server, pair):
        return
    threading.Thread(target=pump, args=(server, client, False, pair), daemon=True).start()
    pump(client, server, True, pair)


def main():
    global cut_at, cut_every
    parser = argparse.ArgumentParser()
    parser.add_argument("--target", required=True)
    parser.add_argument("--cut-at", type=int)
    parser.add_argument("--cut-every", type=int, help="cut every connection once it has carried this many bytes")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--rate", type=int, help="upstream bytes per second per connection")
    parser.add_argument("--flip", help="flip a bit of the first occurrence of this text, once")
    parser.add_argument("--drop-answer", help="a regex: the answer to the first request that matches it is lost, once")
    parser.add_argument("--replacement", help="a file holding the HTTP response sent instead of the dropped answer")
    args = parser.parse_args()
    global rate, flip, drop_answer, replacement
    if args.replacement:
        with open(args.replacement, "rb") as f:
            replacement = f.read()
    drop_answer = re.compile(args.drop_answer.encode()) if args.drop_answer else None
    flip = args.flip.encode() if args.flip else None
    cut_at = args.cut_at
    cut_every = args.cut_every
    rate = args.rate
    host, port = args.target.rsplit(":", 1)
    target = (host, int(port))
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", args.port))
    listener.listen(64)
    print(json.dumps({"listening": listener.getsockname()[1]}), flush=True)
    # A parent that blocks SIGTERM in its threads (a test runner) hands the mask down: unblock it.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGTERM, signal.SIGINT])
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    while True:
        client, _ = listener.accept()
        threading.Thread(target=handle, args=(client, target), daemon=True).start()


if __name__ == "__main__":
    main()
