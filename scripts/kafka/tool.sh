#!/usr/bin/env bash
# Run a Kafka tool class from the fetched jars, e.g.
#   scripts/kafka/tool.sh org.apache.kafka.tools.ConsoleProducer --bootstrap-server 127.0.0.1:19092 --topic t
#   scripts/kafka/tool.sh topics --bootstrap-server 127.0.0.1:19092 --list
#   scripts/kafka/tool.sh --kafka-version 3.9.2 api-versions --bootstrap-server 127.0.0.1:19092
#
# CLASS is a fully qualified class name or one of these short names (the
# first class the jars hold; older names in brackets):
#   console-producer  org.apache.kafka.tools.ConsoleProducer (kafka.tools.ConsoleProducer)
#   console-consumer  org.apache.kafka.tools.consumer.ConsoleConsumer
#   topics            org.apache.kafka.tools.TopicCommand
#   acls              org.apache.kafka.tools.AclCommand (kafka.admin.AclCommand)
#   configs           org.apache.kafka.tools.ConfigCommand (kafka.admin.ConfigCommand)
#   consumer-groups   org.apache.kafka.tools.consumer.group.ConsumerGroupCommand
#   delegation-tokens org.apache.kafka.tools.DelegationTokenCommand
#   transactions      org.apache.kafka.tools.TransactionsCommand
#   metadata-quorum   org.apache.kafka.tools.MetadataQuorumCommand
#   api-versions      org.apache.kafka.tools.BrokerApiVersionsCommand (kafka.admin.BrokerApiVersionsCommand)
#   producer-perf     org.apache.kafka.tools.ProducerPerformance
#   consumer-perf     org.apache.kafka.tools.ConsumerPerformance
#   verifiable-producer / verifiable-consumer  org.apache.kafka.tools.Verifiable{Producer,Consumer}
#   storage           kafka.tools.StorageTool
#
# Version: --kafka-version X (before CLASS), else $SLUICE_KAFKA_VERSION, else
# 4.4.0; with SLUICE_KAFKA_LIBS set, the version of those jars.
# Logging: tools-log4j2.properties (4.x) or tools-log4j.properties (3.9), on
# stderr. Environment:
#   SLUICE_KAFKA_LIBS               jar dir (default: the one fetch.sh gives)
#   SLUICE_TOOL_HEAP                default -Xmx768m
#   SLUICE_TOOL_LOG_LEVEL           default WARN
#   SLUICE_TOOL_NETWORK_LOG_LEVEL   NetworkClient level, default WARN (INFO shows "Node N disconnected.")
#   SLUICE_TOOL_JVM_OPTS            extra JVM options
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=versions.sh
source "$SCRIPT_DIR/versions.sh"

version="${SLUICE_KAFKA_VERSION:-$SLUICE_KAFKA_DEFAULT_VERSION}"
if [[ "${1:-}" == "--kafka-version" ]]; then
  version="${2:?--kafka-version needs a value}"
  shift 2
fi
if [[ $# -lt 1 || "$1" == "-h" || "$1" == "--help" ]]; then
  sed -n '2,33p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
  [[ $# -ge 1 ]] && exit 0 || exit 2
fi

libs="${SLUICE_KAFKA_LIBS:-}"
if [[ -z "$libs" ]]; then
  kafka_require_version "$version" tool.sh
  libs="$("$SCRIPT_DIR/fetch.sh" --kafka-version "$version" | tail -n 1)"
fi
[[ -d "$libs" ]] || { echo "tool.sh: no jar directory at $libs" >&2; exit 1; }
class="$(kafka_tool_class "$libs" "$1")"
shift

read -r -a heap <<< "${SLUICE_TOOL_HEAP:--Xmx768m}"
read -r -a extra <<< "${SLUICE_TOOL_JVM_OPTS:-}"
mapfile -t log_opts < <(kafka_log_opts "$(kafka_libs_logging "$libs")" tools \
  "${SLUICE_TOOL_LOG_LEVEL:-WARN}" stderr "${SLUICE_TOOL_NETWORK_LOG_LEVEL:-WARN}")
exec java "${heap[@]}" "${extra[@]}" \
  -Djava.awt.headless=true \
  "${log_opts[@]}" \
  -cp "$libs/*" "$class" "$@"
