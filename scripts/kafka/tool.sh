#!/usr/bin/env bash
# Run a Kafka 4.1.1 tool class from the fetched jars, e.g.
#   scripts/kafka/tool.sh org.apache.kafka.tools.ConsoleProducer --bootstrap-server 127.0.0.1:19092 --topic t
#   scripts/kafka/tool.sh topics --bootstrap-server 127.0.0.1:19092 --list
#
# CLASS is a fully qualified class name or one of these short names:
#   console-producer  org.apache.kafka.tools.ConsoleProducer
#   console-consumer  org.apache.kafka.tools.consumer.ConsoleConsumer
#   topics            org.apache.kafka.tools.TopicCommand
#   acls              org.apache.kafka.tools.AclCommand
#   configs           kafka.admin.ConfigCommand
#   consumer-groups   org.apache.kafka.tools.consumer.group.ConsumerGroupCommand
#   delegation-tokens org.apache.kafka.tools.DelegationTokenCommand
#   transactions      org.apache.kafka.tools.TransactionsCommand
#   metadata-quorum   org.apache.kafka.tools.MetadataQuorumCommand
#   api-versions      org.apache.kafka.tools.BrokerApiVersionsCommand
#   producer-perf     org.apache.kafka.tools.ProducerPerformance
#   consumer-perf     org.apache.kafka.tools.ConsumerPerformance
#   verifiable-producer / verifiable-consumer  org.apache.kafka.tools.Verifiable{Producer,Consumer}
#   storage           kafka.tools.StorageTool
#
# Logging: tools-log4j2.properties, on stderr. Environment:
#   SLUICE_KAFKA_LIBS               jar dir (default: the one fetch.sh gives)
#   SLUICE_TOOL_HEAP                default -Xmx768m
#   SLUICE_TOOL_LOG_LEVEL           default WARN
#   SLUICE_TOOL_NETWORK_LOG_LEVEL   NetworkClient level, default WARN (INFO shows "Node N disconnected.")
#   SLUICE_TOOL_JVM_OPTS            extra JVM options
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

if [[ $# -lt 1 || "$1" == "-h" || "$1" == "--help" ]]; then
  sed -n '2,27p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
  [[ $# -ge 1 ]] && exit 0 || exit 2
fi

class="$1"
shift
case "$class" in
  console-producer) class=org.apache.kafka.tools.ConsoleProducer ;;
  console-consumer) class=org.apache.kafka.tools.consumer.ConsoleConsumer ;;
  topics) class=org.apache.kafka.tools.TopicCommand ;;
  acls) class=org.apache.kafka.tools.AclCommand ;;
  configs) class=kafka.admin.ConfigCommand ;;
  consumer-groups) class=org.apache.kafka.tools.consumer.group.ConsumerGroupCommand ;;
  delegation-tokens) class=org.apache.kafka.tools.DelegationTokenCommand ;;
  transactions) class=org.apache.kafka.tools.TransactionsCommand ;;
  metadata-quorum) class=org.apache.kafka.tools.MetadataQuorumCommand ;;
  api-versions) class=org.apache.kafka.tools.BrokerApiVersionsCommand ;;
  producer-perf) class=org.apache.kafka.tools.ProducerPerformance ;;
  consumer-perf) class=org.apache.kafka.tools.ConsumerPerformance ;;
  verifiable-producer) class=org.apache.kafka.tools.VerifiableProducer ;;
  verifiable-consumer) class=org.apache.kafka.tools.VerifiableConsumer ;;
  storage) class=kafka.tools.StorageTool ;;
esac

libs="${SLUICE_KAFKA_LIBS:-}"
if [[ -z "$libs" ]]; then
  libs="$("$SCRIPT_DIR/fetch.sh" | tail -n 1)"
fi
[[ -d "$libs" ]] || { echo "tool.sh: no jar directory at $libs" >&2; exit 1; }

read -r -a heap <<< "${SLUICE_TOOL_HEAP:--Xmx768m}"
read -r -a extra <<< "${SLUICE_TOOL_JVM_OPTS:-}"
exec java "${heap[@]}" "${extra[@]}" \
  -Djava.awt.headless=true \
  -Dlog4j2.configurationFile="$SCRIPT_DIR/tools-log4j2.properties" \
  -Dsluice.log.level="${SLUICE_TOOL_LOG_LEVEL:-WARN}" \
  -Dsluice.log.network="${SLUICE_TOOL_NETWORK_LOG_LEVEL:-WARN}" \
  -cp "$libs/*" "$class" "$@"
