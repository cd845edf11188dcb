"""A stand-in AWS STS endpoint for the twin (the real engine): ``python -m automation up`` checks
the caller's credentials with ``sts:GetCallerIdentity`` before anything else, and no AWS is reachable
here. boto3 sends STS calls to ``AWS_ENDPOINT_URL_STS`` when it is set (botocore's service-specific
endpoint variable), so ``running_sts()`` serves that one call on a loopback port, answering with the
account of the offline mocks (``deepseek_eks/testing/mocks.py`` ``ACCOUNT_ID``) and refusing every
other action.

The reply is shaped as botocore's STS model reads it (protocol ``query``, API 2011-06-15, result
wrapper ``GetCallerIdentityResult`` with UserId, Account, Arn: botocore/data/sts/2011-06-15/
service-2.json); tests parse it with botocore's own parser.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs
from xml.sax.saxutils import escape

from deepseek_eks.testing.mocks import ACCOUNT_ID

ENDPOINT_ENV = "AWS_ENDPOINT_URL_STS"
NAMESPACE = "https://sts.amazonaws.com/doc/2011-06-15/"
USER_ID = "AIDATWINSTANDIN000000"
ARN = f"arn:aws:iam::{ACCOUNT_ID}:user/twin-deployer"


def caller_identity_xml() -> str:
    """The GetCallerIdentity reply of the stand-in's one identity."""
    fields = {"UserId": USER_ID, "Account": ACCOUNT_ID, "Arn": ARN}
    body = "".join(f"<{k}>{escape(v)}</{k}>" for k, v in fields.items())
    return (
        f'<GetCallerIdentityResponse xmlns="{NAMESPACE}"><GetCallerIdentityResult>{body}'
        "</GetCallerIdentityResult><ResponseMetadata><RequestId>twin</RequestId></ResponseMetadata>"
        "</GetCallerIdentityResponse>"
    )


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        action = parse_qs(self.rfile.read(length).decode()).get("Action", [""])[0]
        if action == "GetCallerIdentity":
            status, body = 200, caller_identity_xml()
        else:  # a call the twin does not model is an error naming it, never a silent success
            status, body = (
                400,
                (
                    f'<ErrorResponse xmlns="{NAMESPACE}"><Error><Type>Sender</Type><Code>InvalidAction</Code>'
                    f"<Message>the twin's STS stand-in answers only GetCallerIdentity, not {escape(action)!s}"
                    "</Message></Error><RequestId>twin</RequestId></ErrorResponse>"
                ),
            )
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/xml")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:
        return  # quiet: the test output is the engine's


@contextlib.contextmanager
def running_sts() -> Iterator[str]:
    """Serve the stand-in on 127.0.0.1; yields its URL (the value for ``AWS_ENDPOINT_URL_STS``)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
