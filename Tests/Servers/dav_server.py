#!/usr/bin/env python3
"""WsgiDAV (a WebDAV server written by others, RFC 4918) on 127.0.0.1, for Ferry's put tests.

    python3 Tests/Servers/dav_server.py --root DIRECTORY

Serves DIRECTORY read-write to anyone, through cheroot. As every RFC 4918 server does (nginx
without create_full_put_path, Apache mod_dav, Nextcloud's sabre/dav), it answers a PUT into a
collection that does not exist 409 Conflict; MKCOL creates a collection (201), or answers 405 when
it exists. Prints one line {"listening": "http://127.0.0.1:PORT"} when ready.

    --mkcol-busy N   answer the first N MKCOL requests 503 with Retry-After: 1 (Nextcloud in
                     maintenance mode), before WsgiDAV sees them
"""
import argparse, json, sys

from cheroot import wsgi
from wsgidav.wsgidav_app import WsgiDAVApp


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--root", required=True)
    parser.add_argument("--mkcol-busy", type=int, default=0)
    options = parser.parse_args()
    # WsgiDAV logs to sys.stdout; the real stdout carries only the listening line (a pipe nobody
    # drains after it), so its log goes to stderr.
    listening_out, sys.stdout = sys.stdout, sys.stderr
    app = WsgiDAVApp({
        "host": "127.0.0.1", "port": 0,
        "provider_mapping": {"/": options.root},
        "simple_dc": {"user_mapping": {"*": True}},
        "dir_browser": {"enable": False},
        "logging": {"enable_loggers": []},
        "verbose": 3,
    })
    busy = [options.mkcol_busy]

    def maintenance(environ, start_response):
        if environ["REQUEST_METHOD"] == "MKCOL" and busy[0] > 0:
            busy[0] -= 1
            print("MKCOL %s answered 503 (busy)" % environ.get("PATH_INFO"), file=sys.stderr, flush=True)
            start_response("503 Service Unavailable", [("Retry-After", "1"), ("Content-Length", "0")])
            return [b""]
        return app(environ, start_response)

    server = wsgi.Server(("127.0.0.1", 0), maintenance)
    server.prepare()
    print(json.dumps({"listening": "http://127.0.0.1:%d" % server.bind_addr[1]}), file=listening_out, flush=True)
    try:
        server.serve()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()


if __name__ == "__main__":
    main()
