#!/usr/bin/env bash
# The main job on the embedded default: ingest sample_corpus/, build the tree offline, explore it.
set -euo pipefail
cd "$(dirname "$0")/.."
KT=.venv/bin/kt
export LANCEDB_LOG=error LANCE_LOG=error
export KNOWTOLOGY_STORE="${KNOWTOLOGY_STORE:-$PWD/.knowtology}"
export KNOWTOLOGY_SESSION=demo

step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; }

step kt ingest sample_corpus/
$KT ingest sample_corpus/
step kt build --builder cluster
$KT build --builder cluster
step kt status
$KT status
step kt browse
$KT browse
first=$($KT browse --json | .venv/bin/python -c 'import json,sys; print(json.load(sys.stdin)["children"][0]["path"])')
step kt browse "$first" --depth 2
$KT browse "$first" --depth 2
step kt search "how long do I have to get a refund for spoiled groceries?" -k 3
$KT search "how long do I have to get a refund for spoiled groceries?" -k 3
step kt grep "PAY-502" -k 3
$KT grep "PAY-502" -k 3
step kt search "database replica promotion" --mode hybrid -k 3
$KT search "database replica promotion" --mode hybrid -k 3
id=$($KT search "refund spoiled groceries" -k 1 --json | .venv/bin/python -c 'import json,sys; print(json.load(sys.stdin)["hits"][0]["chunk_id"])')
$KT session reset demo >/dev/null
step kt read "$id"
$KT read "$id"
step kt read "$id"   "# second read in the same session"
$KT read "$id"
step kt search "minimum shelf life left on chilled deliveries from suppliers" -k 1 --json "# where the top hit comes from"
$KT search "minimum shelf life left on chilled deliveries from suppliers" -k 1 --json | .venv/bin/python -c '
import json, sys
hit = json.load(sys.stdin)["hits"][0]
unit, span = ("lines", hit["lines"]) if hit.get("lines") else ("pages", hit.get("pages") or [0, 0])
chunk, name, section = hit["chunk_id"], hit["file_name"], hit["section"]
print(f"[{chunk}] {name}, {unit} {span[0]}-{span[1]} — {section}")'
pdf=$($KT search "minimum shelf life left on chilled deliveries from suppliers" -k 1 --json | .venv/bin/python -c 'import json,sys; print(json.load(sys.stdin)["hits"][0]["chunk_id"])')
step kt read "$pdf"   "# the header cites the source: file:lines, or file:pPAGES for a PDF"
$KT read "$pdf"
printf '\nStore: %s — try: %s browse, %s repl, %s mcp\n' "$KNOWTOLOGY_STORE" "$KT" "$KT" "$KT"
