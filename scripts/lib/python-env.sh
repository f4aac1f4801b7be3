#!/usr/bin/env bash
# Ensure a Python virtualenv with the librdkafka client (confluent-kafka) used
# by the integration tests. Cached under ${SLUICE_CACHE:-~/.cache/sluice}/venv,
# rebuilt when tests/clients/python/requirements.txt changes. Prints the
# interpreter path as the last line.
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
CACHE="${SLUICE_CACHE:-$HOME/.cache/sluice}"
VENV="$CACHE/venv"
REQS="$REPO_ROOT/tests/clients/python/requirements.txt"
MARKER="$VENV/.requirements.sha256"
want="$(sha256sum "$REQS" | cut -d' ' -f1)"

if [[ ! -x "$VENV/bin/python" || ! -f "$MARKER" || "$(cat "$MARKER")" != "$want" ]]; then
  echo "python-env: installing $(tr '\n' ' ' < "$REQS")into $VENV" >&2
  rm -rf "$VENV"
  mkdir -p "$CACHE"
  python3 -m venv "$VENV"
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -r "$REQS" >&2
  echo "$want" > "$MARKER"
fi
"$VENV/bin/python" -c 'import confluent_kafka' \
  || { echo "python-env: confluent_kafka does not import from $VENV" >&2; exit 1; }
echo "$VENV/bin/python"
