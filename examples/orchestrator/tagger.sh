#!/bin/sh
# A photo tagger, in the spirit of the sidecar-driven guide's: for each photo, cheap local pre-processing, one LLM
# decision with a schema, persist it, clear the context; then the run result. The photos here are text stand-ins
# (a caption per file). Run it under `sidecar-ipc run`, which ends the run properly even if this script dies.
set -eu
ipc=${SIDECAR_IPC:-sidecar-ipc}

input_dir=$("$ipc" config inputDir)
output_dir=$("$ipc" config outputDir)
mkdir -p "$output_dir"

schema='{"type": "object",
         "properties": {"tags": {"type": "array", "items": {"type": "string"}, "minItems": 1},
                        "confidence": {"type": "number", "minimum": 0, "maximum": 1}},
         "required": ["tags"]}'

processed=0
failed=0
for photo in "$input_dir"/*.txt; do
    name=$(basename "$photo" .txt)
    # Local pre-processing, no LLM: candidate tags are the caption's longer words.
    candidates=$(tr -cs 'A-Za-z' '\n' <"$photo" | tr 'A-Z' 'a-z' | grep -E '^.{4,}$' | sort -u | tr '\n' ' ')
    # The decision: one prompt, answered as JSON that matches the schema, printed on one line.
    if answer=$("$ipc" prompt --timeout 30 --schema "$schema" \
        "Refine the candidate tags for photo $name. Drop any that do not apply, add obvious ones. Candidates: $candidates")
    then
        printf '%s\n' "$answer" >"$output_dir/$name.json"
        processed=$((processed + 1))
    else
        # One bad answer costs one photo, not the run.
        echo "tagger: no usable decision for $name; skipped" >&2
        failed=$((failed + 1))
    fi
    # Each photo is decided on its own: the next one must not inherit this one's conversation.
    "$ipc" clear-context --reason "after $name"
done

"$ipc" finish --result "{\"processed\": $processed, \"failed\": $failed}"
