#!/usr/bin/env bash
# Fetch the Apache Kafka 4.1.1 jars (broker, tools, clients, log4j2 binding)
# from Maven Central into $SLUICE_CACHE/kafka-4.1.1/libs (default cache:
# ~/.cache/sluice). Skips the download when a completed fetch of the same
# pom.xml is already there. The last line on stdout is the libs directory.
#
# Usage: scripts/kafka/fetch.sh [--force]
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
KAFKA_VERSION="4.1.1"
DEP_PLUGIN="org.apache.maven.plugins:maven-dependency-plugin:3.8.1"
CACHE="${SLUICE_CACHE:-$HOME/.cache/sluice}"
DEST="$CACHE/kafka-$KAFKA_VERSION"
LIBS="$DEST/libs"
MARKER="$DEST/.fetch-complete"

force=0
for arg in "$@"; do
  case "$arg" in
    --force) force=1 ;;
    -h|--help) sed -n '2,7p' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) echo "fetch.sh: unknown argument: $arg" >&2; exit 2 ;;
  esac
done

pom_sum="$(sha256sum "$SCRIPT_DIR/pom.xml" | cut -d' ' -f1)"

is_complete() {
  [[ -f "$MARKER" && -d "$LIBS" && "$(cat "$MARKER")" == "$pom_sum" ]]
}

if [[ $force -eq 0 ]] && is_complete; then
  echo "$LIBS"
  exit 0
fi

# Two clusters may start at once: one fetch at a time, the others wait
# (bounded) and then find the marker.
mkdir -p "$DEST"
exec 9>"$DEST/.fetch.lock"
if ! flock -w "${SLUICE_FETCH_LOCK_TIMEOUT:-900}" 9; then
  echo "fetch.sh: another fetch still holds $DEST/.fetch.lock" >&2
  exit 1
fi
if [[ $force -eq 0 ]] && is_complete; then
  echo "$LIBS"
  exit 0
fi

command -v mvn >/dev/null 2>&1 || { echo "fetch.sh: mvn not found (apt-get install maven)" >&2; exit 1; }
command -v java >/dev/null 2>&1 || { echo "fetch.sh: java not found (apt-get install openjdk-17-jre-headless)" >&2; exit 1; }

rm -f "$MARKER"
tmp="$(mktemp -d "$DEST/libs.tmp.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT

echo "fetch.sh: fetching Kafka $KAFKA_VERSION jars into $LIBS" >&2
# Maven's own output goes to stderr (without colour codes) so that stdout
# stays clean; pipefail keeps mvn's exit status.
mvn -q -B -Dstyle.color=never -f "$SCRIPT_DIR/pom.xml" \
  "$DEP_PLUGIN:copy-dependencies" \
  -DincludeScope=runtime \
  -DoutputDirectory="$tmp" 2>&1 | sed $'s/\e\\[[0-9;]*m//g' >&2

count="$(find "$tmp" -maxdepth 1 -name '*.jar' | wc -l)"
if [[ ! -f "$(find "$tmp" -maxdepth 1 -name "kafka_2.13-$KAFKA_VERSION.jar" -print -quit)" ]]; then
  echo "fetch.sh: kafka_2.13-$KAFKA_VERSION.jar missing after copy ($count jars)" >&2
  exit 1
fi

rm -rf "$LIBS"
mv "$tmp" "$LIBS"
trap - EXIT
echo "$pom_sum" > "$MARKER"
echo "fetch.sh: $count jars in $LIBS" >&2
echo "$LIBS"
