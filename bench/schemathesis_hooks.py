"""Schemathesis hooks for bench/schemathesis.sh: the shape of an /exec/stream reply.

Schemathesis validates each server-sent event against the document itself (the event schema, whose `data` holds a
StreamFrame as JSON). What a schema of single events cannot say, this check does: the stream is made of complete
`data:` events and `: keep-alive` comments only, and holds exactly one exit frame, the last one.
"""

import json

import schemathesis


@schemathesis.check
def sse_stream_shape(ctx, response, case):
    if not response.headers.get("content-type", [""])[0].startswith("text/event-stream"):
        return None
    text = response.content.decode("utf-8")
    assert text.endswith("\n\n"), f"the stream does not end with a complete event: {text[-200:]!r}"
    kinds = []
    for event in text[:-2].split("\n\n"):
        if event == ": keep-alive":
            continue
        assert event.startswith("data: ") and "\n" not in event, f"not a single `data:` line: {event!r}"
        kinds.append(json.loads(event[len("data: "):])["type"])
    assert kinds and kinds[-1] == "exit" and kinds.count("exit") == 1, f"frames {kinds}: one exit frame, last"
    return True
