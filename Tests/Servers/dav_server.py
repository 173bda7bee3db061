#!/usr/bin/env python3
"""WsgiDAV (a WebDAV server written by others, RFC 4918) on 127.0.0.1, for Ferry's put tests.

    python3 Tests/Servers/dav_server.py --root DIRECTORY

Serves DIRECTORY read-write to anyone, through cheroot. As every RFC 4918 server does (nginx
without create_full_put_path, Apache mod_dav, Nextcloud's sabre/dav), it answers a PUT into a
collection that does not exist 409 Conflict; MKCOL creates a collection (201), or answers 405 when
it exists. Prints one line {"listening": "http://127.0.0.1:PORT"} when ready.
"""
import argparse, json, sys

from cheroot import wsgi
from wsgidav.wsgidav_app import WsgiDAVApp


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--root", required=True)
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
    server = wsgi.Server(("127.0.0.1", 0), app)
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
