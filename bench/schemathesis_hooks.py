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


# What schema-valid data the server rightly refuses, which no schema can rule out: a `cwd` outside the workspace
# (the schema cannot know where the workspace is: 400 naming the root) and a replay offset beyond what a stream holds
# (the schema cannot know its length: 416 `offset_beyond_end`). Each is told apart by what the server answers, not by
# its status alone, so a schema-valid request refused for any other reason still fails.
RIGHTLY_REFUSED = {
    400: lambda error: "outside the workspace root" in error.get("error", ""),
    416: lambda error: error.get("code") == "offset_beyond_end",
}


@schemathesis.check
def positive_data_acceptance_but_what_no_schema_can_say(ctx, response, case):
    """schemathesis' positive_data_acceptance (which bench/schemathesis.sh leaves out in its favour), but for
    RIGHTLY_REFUSED."""
    from schemathesis.specs.openapi.checks import positive_data_acceptance

    judge = RIGHTLY_REFUSED.get(response.status_code)
    if judge is not None:
        try:
            error = json.loads(response.content)
        except ValueError:
            error = {}
        if isinstance(error, dict) and judge(error):
            return True
    return positive_data_acceptance(ctx, response, case)
