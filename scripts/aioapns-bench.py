"""aioapns (the asyncio APNs client from PyPI) sending COUNT notifications to a local HTTP/2 + TLS server, for
scripts/bench-send: the same device token, body and server as our sender. Prints one JSON object."""
import argparse
import asyncio
import json
import resource
import ssl
import time
from importlib.metadata import version

import aioapns
from aioapns.connection import APNsTLSClientProtocol, APNsProductionClientProtocol

parser = argparse.ArgumentParser()
parser.add_argument("--port", type=int, required=True)
parser.add_argument("--count", type=int, default=100_000)
parser.add_argument("--token", required=True)
parser.add_argument("--credentials", required=True)
parser.add_argument("--body", required=True)
parser.add_argument("--in-flight", type=int, default=500)
args = parser.parse_args()

# aioapns names the server with a `host` header; the simulator (swift-nio-http2's validation) wants the HTTP/2
# pseudo-header `:authority`, which APNs accepts too. Rename it on the way out; nothing else changes.
import h2.connection
_send_headers = h2.connection.H2Connection.send_headers


def send_headers(self, stream_id, headers, *rest, **options):
    pseudo = [(k, v) for k, v in headers if k.startswith(":")]
    regular = [(k, v) for k, v in headers if not k.startswith(":")]
    authority = [(":authority", v) for k, v in regular if k == "host"]
    return _send_headers(self, stream_id, pseudo + authority + [(k, v) for k, v in regular if k != "host"], *rest, **options)


h2.connection.H2Connection.send_headers = send_headers

# Point the production endpoint at the local server; trust the simulator's certificate authority.
APNsProductionClientProtocol.APNS_SERVER = "127.0.0.1"
APNsTLSClientProtocol.APNS_PORT = args.port
context = ssl.create_default_context(cafile=f"{args.credentials}/ca.pem")
context.set_alpn_protocols(["h2"])
payload = json.load(open(args.body))


async def main():
    client = aioapns.APNs(key=open(f"{args.credentials}/apns-key.p8").read(), key_id="SIMKEY0001", team_id="SIMTEAM001",
                          topic="com.example.diary", ssl_context=context)
    request = lambda: aioapns.NotificationRequest(device_token=args.token, message=payload, priority=10,
                                                  collapse_key="diary_reminder:2026-11-21", time_to_live=3600,
                                                  push_type=aioapns.PushType.ALERT)
    await client.send_notification(request())   # warm up: connection, TLS, JWT
    semaphore = asyncio.Semaphore(args.in_flight)
    delivered = failed = 0

    async def send():
        nonlocal delivered, failed
        async with semaphore:
            try:
                result = await client.send_notification(request())
                delivered += result.is_successful
            except Exception:   # aioapns gives up after its connection attempts: counted, not fatal
                failed += 1

    cpu = time.process_time()
    start = time.perf_counter()
    await asyncio.gather(*(send() for _ in range(args.count)))
    seconds = time.perf_counter() - start
    cpu = time.process_time() - cpu
    print(json.dumps({"notifications": args.count, "delivered": delivered, "failed": failed, "seconds": round(seconds, 3),
                      "per_second": int(args.count / seconds), "cpu_us_per_notification": int(cpu / args.count * 1e6),
                      "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
                      "version": version("aioapns")}))


asyncio.run(main())
