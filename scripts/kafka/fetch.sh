#!/usr/bin/env bash
# Fetch the Apache Kafka jars of one version (broker, tools, clients and the
# slf4j binding that version logs through) from Maven Central into
# $SLUICE_CACHE/kafka-<version>/libs (default cache: ~/.cache/sluice). Skips
# the download when a completed fetch of the same version and pom.xml is
# already there. The last line on stdout is the libs directory.
#
# Usage: scripts/kafka/fetch.sh [--kafka-version X] [--force]
#   version: --kafka-version, else $SLUICE_KAFKA_VERSION, else 4.4.0 (3.9.x, 4.x)
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=versions.sh
source "$SCRIPT_DIR/versions.sh"
DEP_PLUGIN="org.apache.maven.plugins:maven-dependency-plugin:3.8.1"
KAFKA_VERSION="${SLUICE_KAFKA_VERSION:-$SLUICE_KAFKA_DEFAULT_VERSION}"

force=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --force) force=1; shift ;;
    --kafka-version) KAFKA_VERSION="${2:?--kafka-version needs a value}"; shift 2 ;;
    -h|--help) sed -n '2,9p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "fetch.sh: unknown argument: $1" >&2; exit 2 ;;
  esac
done
kafka_require_version "$KAFKA_VERSION" fetch.sh
LOGGING="$(kafka_logging "$KAFKA_VERSION")"
DEST="$(kafka_cache_dir "$KAFKA_VERSION")"
LIBS="$DEST/libs"
MARKER="$DEST/.fetch-complete"

pom_sum="$( { sha256sum "$SCRIPT_DIR/pom.xml" | cut -d' ' -f1; echo "$KAFKA_VERSION $LOGGING"; } | sha256sum | cut -d' ' -f1)"

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

echo "fetch.sh: fetching Kafka $KAFKA_VERSION jars ($LOGGING logging) into $LIBS" >&2
# Maven's own output goes to stderr (without colour codes) so that stdout
# stays clean; pipefail keeps mvn's exit status.
mvn -q -B -Dstyle.color=never -f "$SCRIPT_DIR/pom.xml" \
  "$DEP_PLUGIN:copy-dependencies" \
  -Dkafka.version="$KAFKA_VERSION" -Dsluice.kafka.logging="$LOGGING" \
  -DincludeScope=runtime \
  -DoutputDirectory="$tmp" 2>&1 | sed $'s/\e\\[[0-9;]*m//g' >&2

count="$(find "$tmp" -maxdepth 1 -name '*.jar' | wc -l)"
if [[ ! -f "$(find "$tmp" -maxdepth 1 -name "kafka_2.13-$KAFKA_VERSION.jar" -print -quit)" ]]; then
  echo "fetch.sh: kafka_2.13-$KAFKA_VERSION.jar missing after copy ($count jars)" >&2
  exit 1
fi
# Exactly one slf4j binding, the one this version's slf4j-api reads (a
# binding for another slf4j major would leave the brokers without logs).
bindings="$(find "$tmp" -maxdepth 1 \( -name 'slf4j-reload4j-*.jar' -o -name 'log4j-slf4j*-impl-*.jar' \
  -o -name 'slf4j-log4j12-*.jar' -o -name 'logback-classic-*.jar' \) -printf '%f\n' | sort | xargs)"
slf4j_api="$(find "$tmp" -maxdepth 1 -name 'slf4j-api-*.jar' -printf '%f\n' | xargs)"
case "$LOGGING:$slf4j_api:$bindings" in
  log4j2:slf4j-api-1.*:log4j-slf4j-impl-*) ;;
  reload4j:slf4j-api-1.*:slf4j-reload4j-*) ;;
  *)
    echo "fetch.sh: Kafka $KAFKA_VERSION resolved slf4j '$slf4j_api' with bindings '$bindings';" \
      "expected slf4j 1.x with one $LOGGING binding (see versions.sh and pom.xml)" >&2
    exit 1 ;;
esac
if [[ "$bindings" == *" "* ]]; then
  echo "fetch.sh: Kafka $KAFKA_VERSION has more than one slf4j binding: $bindings" >&2
  exit 1
fi

rm -rf "$LIBS"
mv "$tmp" "$LIBS"
trap - EXIT
echo "$pom_sum" > "$MARKER"
echo "fetch.sh: $count jars in $LIBS" >&2
echo "$LIBS"
