"""``python manage.py agentbus wait|pending|drain|open|append|close|request``.

One JSON object on stdout; exit 0 on success (a ``wait`` that times out included,
with ``timed_out: true``); an error is one JSON object on stderr (``{"error", "code",
...}``, see ``agentbus.cli.JsonCommand``) with a non-zero exit. Every subcommand
works on the local database and, with ``--hub URL`` (or MARKUS_HUB_URL) and
``--token`` (or MARKUS_TOKEN), against a remote server.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError, CommandParser

from agentbus import cli
from agentbus.selectors import DEFAULT_LIMIT, MAX_LIMIT
from agentbus.waiting import MAX_WAIT_SECONDS

KEY_HELP = "your own key for this message: run again with it, the message is sent once (Idempotency-Key)"


def _limit(raw: str) -> int:
    value = int(raw)
    if not 1 <= value <= MAX_LIMIT:
        raise ValueError(raw)
    return value


def _seconds(raw: str) -> float:
    value = float(raw)
    if not 0 <= value <= MAX_WAIT_SECONDS:
        raise ValueError(raw)
    return value


class Command(cli.JsonCommand):
    help = "The AgentBus from the command line: inbox (wait, pending, drain) and streams."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="subcommand", required=True, metavar="SUBCOMMAND")

        def add(name: str, help_text: str) -> CommandParser:
            p = sub.add_parser(name, help=help_text)
            cli.add_hub_arguments(p)
            return p

        p = add("wait", "block until a message arrives in AGENT's inbox or the timeout passes")
        p.add_argument("agent")
        p.add_argument("--timeout-seconds", type=_seconds, default=300.0)
        p.add_argument("--after-cursor", default=None)
        p.add_argument("--limit", type=_limit, default=DEFAULT_LIMIT)
        p = add("pending", "how many messages are waiting, at once")
        p.add_argument("agent")
        p = add("drain", "take what is waiting, at once, advancing the server-side cursor")
        p.add_argument("agent")
        p.add_argument("--peek", action="store_true", help="look without consuming")
        p.add_argument("--limit", type=_limit, default=DEFAULT_LIMIT)
        p = add("open", "open a direct stream from SENDER to RECIPIENT")
        p.add_argument("sender")
        p.add_argument("recipient")
        p.add_argument("--stream-id", default=None)
        p.add_argument("--topic", default=None)
        p.add_argument("--reply-to", default=None, help="the stream this one answers")
        p = add("append", "append a JSON payload to STREAM as SENDER")
        p.add_argument("stream")
        p.add_argument("sender")
        p.add_argument("--payload", required=True)
        p.add_argument("--topic", default=None)
        p.add_argument("--idempotency-key", default=None, help=KEY_HELP)
        p = add("close", "close STREAM (its sender only)")
        p.add_argument("stream")
        p.add_argument("sender")
        p = add("request", "open, append, wait for the reply and its close")
        p.add_argument("sender")
        p.add_argument("recipient")
        p.add_argument("text", nargs="?", default=None, help='the message, sent as {"text": TEXT}')
        p.add_argument("--payload", default=None, help="the message as a JSON object (instead of TEXT)")
        p.add_argument("--topic", default=None)
        p.add_argument("--timeout-seconds", type=_seconds, default=30.0)
        p.add_argument("--idempotency-key", default=None, help=KEY_HELP)

    def handle(self, *args: Any, **options: Any) -> None:
        bus = cli.backend(options)
        name = options["subcommand"]
        if name == "wait":
            data = cli.run(
                bus.wait,
                options["agent"],
                timeout=options["timeout_seconds"],
                after_cursor=options["after_cursor"],
                limit=options["limit"],
            )
        elif name == "pending":
            data = cli.run(bus.pending, options["agent"])
        elif name == "drain":
            data = cli.run(bus.drain, options["agent"], peek=options["peek"], limit=options["limit"])
        elif name == "open":
            data = cli.run(
                bus.open,
                options["sender"],
                options["recipient"],
                stream_id=options["stream_id"],
                topic=options["topic"],
                reply_to=options["reply_to"],
            )
        elif name == "append":
            data = cli.run(
                bus.append,
                options["stream"],
                options["sender"],
                payload=cli.parse_payload(options["payload"]),
                topic=options["topic"],
                key=options["idempotency_key"],
            )
        elif name == "close":
            data = cli.run(bus.close, options["stream"], options["sender"])
        elif name == "request":
            data = cli.run(
                bus.request,
                options["sender"],
                options["recipient"],
                payload=cli.request_payload(options["text"], options["payload"]),
                topic=options["topic"],
                timeout=options["timeout_seconds"],
                key=options["idempotency_key"],
            )
        else:  # argparse keeps us from getting here
            raise CommandError(f"unknown subcommand {name}")
        self.stdout.write(cli.dumps(data))
