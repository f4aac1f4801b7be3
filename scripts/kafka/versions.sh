# Sourced by the scripts in scripts/kafka: which Apache Kafka version they run,
# where its jars are cached, how it logs and what its tool classes are called.
#
# The version: `--kafka-version X` of each script, else $SLUICE_KAFKA_VERSION,
# else SLUICE_KAFKA_DEFAULT_VERSION (the suite's). Supported: 3.9.x and 4.x.
#
# Logging differs by major version:
#   4.x  slf4j 1.7 -> log4j2 (log4j-slf4j-impl): log4j2.properties (brokers),
#        tools-log4j2.properties (tools), -Dlog4j2.configurationFile=FILE
#   3.9  slf4j 1.7 -> reload4j (slf4j-reload4j, as Kafka 3.9 ships):
#        log4j.properties (brokers), tools-log4j.properties (tools),
#        -Dlog4j.configuration=file:FILE
# Both read -Dsluice.log.level, -Dsluice.log.target (stdout or stderr) and
# -Dsluice.log.network (the clients' NetworkClient logger).

SLUICE_KAFKA_DEFAULT_VERSION="4.4.0"
KAFKA_SCRIPTS_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

# kafka_version_ok VERSION: exit status 0 when the scripts support it.
kafka_version_ok() {
  [[ "$1" =~ ^(3\.9|4\.[0-9]+)\.[0-9]+$ ]]
}

# kafka_require_version VERSION PROGRAM: dies with a clear message unless supported.
kafka_require_version() {
  if ! kafka_version_ok "$1"; then
    echo "$2: unsupported Kafka version '$1' (supported: 3.9.x and 4.x, e.g. 3.9.2, 4.1.2, $SLUICE_KAFKA_DEFAULT_VERSION)" >&2
    exit 2
  fi
}

# kafka_cache_dir VERSION: where fetch.sh puts that version's jars (under libs/).
kafka_cache_dir() {
  echo "${SLUICE_CACHE:-$HOME/.cache/sluice}/kafka-$1"
}

# kafka_logging VERSION: log4j2 (4.x) or reload4j (3.9).
kafka_logging() {
  case "$1" in
    3.*) echo reload4j ;;
    *) echo log4j2 ;;
  esac
}

# kafka_libs_logging LIBS_DIR: the logging of a jar directory, from its slf4j
# binding (for jars given by SLUICE_KAFKA_LIBS, whose version is not named).
kafka_libs_logging() {
  if compgen -G "$1/slf4j-reload4j-*.jar" >/dev/null; then
    echo reload4j
  else
    echo log4j2
  fi
}

# kafka_libs_version LIBS_DIR: the version of the kafka_2.13 jar in LIBS_DIR.
kafka_libs_version() {
  local jar
  jar="$(compgen -G "$1/kafka_2.13-*.jar" | head -n 1)"
  jar="${jar##*/kafka_2.13-}"
  echo "${jar%.jar}"
}

# kafka_log_config LOGGING ROLE: the configuration file for brokers
# (ROLE=broker) or tools and Java clients (ROLE=tools).
kafka_log_config() {
  case "$1:$2" in
    log4j2:broker) echo "$KAFKA_SCRIPTS_DIR/log4j2.properties" ;;
    log4j2:tools) echo "$KAFKA_SCRIPTS_DIR/tools-log4j2.properties" ;;
    reload4j:broker) echo "$KAFKA_SCRIPTS_DIR/log4j.properties" ;;
    reload4j:tools) echo "$KAFKA_SCRIPTS_DIR/tools-log4j.properties" ;;
    *) echo "versions.sh: no log configuration for '$1' '$2'" >&2; return 1 ;;
  esac
}

# kafka_log_opts LOGGING ROLE LEVEL TARGET NETWORK_LEVEL: the JVM options, one
# a line. TARGET: stdout or stderr.
kafka_log_opts() {
  local config target
  config="$(kafka_log_config "$1" "$2")" || return 1
  case "$1:$4" in
    log4j2:stdout) target=SYSTEM_OUT ;;
    log4j2:stderr) target=SYSTEM_ERR ;;
    reload4j:stdout) target=System.out ;;
    reload4j:stderr) target=System.err ;;
    *) echo "versions.sh: bad log target '$4'" >&2; return 1 ;;
  esac
  if [[ "$1" == log4j2 ]]; then
    echo "-Dlog4j2.configurationFile=$config"
  else
    echo "-Dlog4j.configuration=file:$config"
  fi
  printf '%s\n' "-Dsluice.log.level=$3" "-Dsluice.log.target=$target" "-Dsluice.log.network=$5"
}

# kafka_console_config_option VERSION producer|consumer: the console tools'
# option for a client properties file: --command-config since Kafka 4.2
# (KIP-1147; the older --producer.config and --consumer.config then print a
# deprecation notice on stdout, among the records), before that the old one.
kafka_console_config_option() {
  if [[ "$1" == 3.* || "$1" =~ ^4\.[01]\. ]]; then
    echo "--$2.config"
  else
    echo "--command-config"
  fi
}

# kafka_tool_class LIBS_DIR NAME: the class of a tool's short name in those
# jars (NAME itself when it is not a short name). Some tools moved from the
# Scala `kafka.*` packages to `org.apache.kafka.tools` (ConsoleProducer and
# AclCommand in 4.0, ConfigCommand after 4.1), so each short name has its
# candidates, newest first; the first class the jars hold wins.
kafka_tool_class() {
  local libs="$1" candidates c
  case "$2" in
    console-producer) candidates="org.apache.kafka.tools.ConsoleProducer kafka.tools.ConsoleProducer" ;;
    console-consumer) candidates="org.apache.kafka.tools.consumer.ConsoleConsumer" ;;
    topics) candidates="org.apache.kafka.tools.TopicCommand" ;;
    acls) candidates="org.apache.kafka.tools.AclCommand kafka.admin.AclCommand" ;;
    configs) candidates="org.apache.kafka.tools.ConfigCommand kafka.admin.ConfigCommand" ;;
    consumer-groups) candidates="org.apache.kafka.tools.consumer.group.ConsumerGroupCommand" ;;
    delegation-tokens) candidates="org.apache.kafka.tools.DelegationTokenCommand" ;;
    transactions) candidates="org.apache.kafka.tools.TransactionsCommand" ;;
    metadata-quorum) candidates="org.apache.kafka.tools.MetadataQuorumCommand" ;;
    api-versions) candidates="org.apache.kafka.tools.BrokerApiVersionsCommand kafka.admin.BrokerApiVersionsCommand" ;;
    producer-perf) candidates="org.apache.kafka.tools.ProducerPerformance" ;;
    consumer-perf) candidates="org.apache.kafka.tools.ConsumerPerformance" ;;
    verifiable-producer) candidates="org.apache.kafka.tools.VerifiableProducer" ;;
    verifiable-consumer) candidates="org.apache.kafka.tools.VerifiableConsumer" ;;
    storage) candidates="kafka.tools.StorageTool" ;;
    *) echo "$2"; return 0 ;;
  esac
  for c in $candidates; do
    if kafka_libs_have_class "$libs" "$c"; then
      echo "$c"
      return 0
    fi
  done
  echo "versions.sh: no class for '$2' in $libs (tried: $candidates)" >&2
  return 1
}

# kafka_libs_have_class LIBS_DIR CLASS: whether a Kafka jar there holds CLASS
# (a jar's directory names each entry in clear).
kafka_libs_have_class() {
  local entry="${2//.//}.class" jar
  for jar in "$1"/kafka_2.13-*.jar "$1"/kafka-tools-[0-9]*.jar; do
    [[ -f "$jar" ]] && grep -aqF "$entry" "$jar" && return 0
  done
  return 1
}
