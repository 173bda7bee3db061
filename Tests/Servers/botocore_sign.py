#!/usr/bin/env python3
"""Sign S3 requests with botocore's own SigV4 signer, as a reference for Ferry's signer.

Needs python3 and botocore only (written against botocore 1.43.11). Reads a JSON array on
stdin and prints a JSON array on stdout, one result per request, in the same order:

    python3 Tests/Servers/botocore_sign.py < requests.json > signed.json

Each input element:

    {"method": "PUT",
     "url": "http://127.0.0.1:9000/bucket/key%20x?partNumber=1&uploadId=abc",
     "headers": [["Host", "127.0.0.1:9000"], ["Content-Type", "text/plain"]],
     "payload_hash": "UNSIGNED-PAYLOAD",          # or 64 lowercase hex digits
     "region": "us-east-1", "service": "s3",
     "access_key": "AKID...", "secret_key": "...",
     "session_token": null,                       # or a token string
     "time": "20260102T030405Z"}

Each output element:

    {"authorization": "AWS4-HMAC-SHA256 Credential=..., SignedHeaders=..., Signature=...",
     "amz_date": "20260102T030405Z",
     "canonical_request": "PUT\\n/bucket/key%20x\\n...",
     "string_to_sign": "AWS4-HMAC-SHA256\\n20260102T030405Z\\n...",
     "headers": [[name, value], ...]}           # every header on the signed request, in order

or {"error": "..."} for an element that could not be signed (the exit status is then 1).

How it drives botocore (see botocore/auth.py, class S3SigV4Auth):
  * The signer is botocore.auth.S3SigV4Auth applied to a botocore.awsrequest.AWSRequest built
    from "method", "url" and "headers" (added one by one, so repeated names stay repeated).
    The URL is used exactly as given: S3SigV4Auth takes the path from urlsplit(url).path without
    normalizing or encoding it, and the query from the URL without re-encoding it, so give the
    URL already percent-encoded, the way botocore's S3 client builds it.
  * The clock: SigV4Auth.add_auth() reads the time from get_current_datetime(), which
    botocore.auth imports from botocore.compat (datetime.datetime.now(datetime.timezone.utc) with
    the tzinfo dropped). It is patched on botocore.auth for the duration of each signing to
    return "time". (Older botocore called datetime.datetime.utcnow() in botocore.auth; that is
    patched instead when get_current_datetime is absent.)
  * The payload hash: S3SigV4Auth._modify_request_before_signing() deletes any
    X-Amz-Content-SHA256 header it is given and sets a new one from self.payload(request), and
    the canonical request then takes its last line from that header. A header set beforehand
    is therefore NOT used. "UNSIGNED-PAYLOAD" goes through botocore's own switch: the request
    context gets client_config=Config(s3={"payload_signing_enabled": False}), and payload()
    answers UNSIGNED-PAYLOAD. A 64-hex hash (there is no body here to hash) is supplied by
    overriding payload() in a subclass to return it; nothing else is changed.
  * The session token: given as Credentials(token=...), so botocore adds X-Amz-Security-Token
    itself and signs it.
  * botocore replaces X-Amz-Date (or, if a Date header is given, rewrites Date and drops
    X-Amz-Date), X-Amz-Security-Token (when a token is given), X-Amz-Content-SHA256 and
    Authorization. It does not add Host to the request: it signs the Host header given, or one
    made from the URL (lowercased, default port dropped) when none is given.
  * canonical_request and string_to_sign are the strings botocore computed inside add_auth();
    amz_date is the timestamp it signed with (request.context["timestamp"]), which is "time".
"""
import datetime
import hashlib
import hmac
import json
import re
import sys
from unittest import mock

import botocore.auth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials

HEX64 = re.compile(r"^[0-9a-f]{64}$")
SIGV4_TIMESTAMP = "%Y%m%dT%H%M%SZ"


class RecordingS3SigV4Auth(botocore.auth.S3SigV4Auth):
    """botocore's S3 signer; records what it signs and, if asked, takes a given payload hash."""

    def __init__(self, credentials, service_name, region_name, payload_hash=None):
        super().__init__(credentials, service_name, region_name)
        self._given_payload_hash = payload_hash
        self.recorded_canonical_request = None
        self.recorded_string_to_sign = None

    def payload(self, request):
        if self._given_payload_hash is not None:
            return self._given_payload_hash
        return super().payload(request)

    def string_to_sign(self, request, canonical_request):
        sts = super().string_to_sign(request, canonical_request)
        self.recorded_canonical_request = canonical_request
        self.recorded_string_to_sign = sts
        return sts


def fixed_clock(when):
    """A patch making botocore.auth read `when` (a naive UTC datetime) as the current time."""
    if hasattr(botocore.auth, "get_current_datetime"):
        return mock.patch.object(
            botocore.auth, "get_current_datetime", lambda *args, **kwargs: when
        )

    class FrozenDatetime(datetime.datetime):  # botocore before get_current_datetime existed
        @classmethod
        def utcnow(cls):
            return when

        @classmethod
        def now(cls, tz=None):
            return when if tz is None else when.replace(tzinfo=datetime.timezone.utc)

    return mock.patch.object(botocore.auth.datetime, "datetime", FrozenDatetime)


def sign_one(spec):
    when = datetime.datetime.strptime(spec["time"], SIGV4_TIMESTAMP)
    payload_hash = spec.get("payload_hash", "UNSIGNED-PAYLOAD")
    if payload_hash != "UNSIGNED-PAYLOAD" and not HEX64.match(payload_hash):
        raise ValueError(f"payload_hash must be UNSIGNED-PAYLOAD or 64 lowercase hex: {payload_hash!r}")

    credentials = Credentials(spec["access_key"], spec["secret_key"], spec.get("session_token"))
    signer = RecordingS3SigV4Auth(
        credentials,
        spec.get("service", "s3"),
        spec.get("region", "us-east-1"),
        payload_hash=None if payload_hash == "UNSIGNED-PAYLOAD" else payload_hash,
    )

    request = AWSRequest(method=spec["method"], url=spec["url"])
    for name, value in spec.get("headers", []):
        request.headers[name] = value  # HTTPMessage: appends, so repeated names are kept
    if payload_hash == "UNSIGNED-PAYLOAD":
        request.context["client_config"] = Config(s3={"payload_signing_enabled": False})

    with fixed_clock(when):
        signer.add_auth(request)

    # botocore must have used the payload hash asked for, and signed at the time asked for.
    if request.headers.get("X-Amz-Content-SHA256") != payload_hash:
        raise RuntimeError(
            f"botocore set X-Amz-Content-SHA256 to {request.headers.get('X-Amz-Content-SHA256')!r}"
        )
    if request.context["timestamp"] != spec["time"]:
        raise RuntimeError(f"botocore signed at {request.context['timestamp']!r}")
    # The Authorization signature is HMAC(signing key, string_to_sign): check it independently.
    key = ("AWS4" + spec["secret_key"]).encode("utf-8")
    for part in (spec["time"][:8], signer._region_name, signer._service_name, "aws4_request"):
        key = hmac.new(key, part.encode("utf-8"), hashlib.sha256).digest()
    expected = hmac.new(
        key, signer.recorded_string_to_sign.encode("utf-8"), hashlib.sha256
    ).hexdigest()
    if not request.headers["Authorization"].endswith("Signature=" + expected):
        raise RuntimeError("Authorization does not carry HMAC(string_to_sign)")

    return {
        "authorization": request.headers["Authorization"],
        "amz_date": request.context["timestamp"],
        "canonical_request": signer.recorded_canonical_request,
        "string_to_sign": signer.recorded_string_to_sign,
        "headers": [[name, value] for name, value in request.headers.items()],
    }


def main():
    specs = json.load(sys.stdin)
    if not isinstance(specs, list):
        sys.exit("botocore_sign.py: stdin must be a JSON array")
    results, failed = [], False
    for spec in specs:
        try:
            results.append(sign_one(spec))
        except Exception as error:  # report per element, keep going
            failed = True
            results.append({"error": f"{type(error).__name__}: {error}"})
    json.dump(results, sys.stdout, ensure_ascii=False, indent=2)
    sys.stdout.write("\n")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
