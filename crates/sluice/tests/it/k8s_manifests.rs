//! The Kubernetes manifests under `deploy/k8s/` describe a deployment that
//! Sluice accepts, without a cluster: each Deployment's files, taken from
//! the ConfigMap that kustomize generates (`configMapGenerator`) as the pod
//! would see them mounted, pass the real `sluice validate-config` with the
//! pod's arguments; and the ports, Services, racks, probes, disruption
//! budget, memory limit and grace period agree with what those files say.
//! (`scripts/check-deploy` builds the kustomization and checks it against
//! Kubernetes' schemas.)

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::Deserialize;
use serde_yaml_ng::Value;
use sluice_config::{Config, KafkaSinkClusterConfig, SourceConfig, Topology, TransformConfig};

/// Seconds Sluice may take past `--leave-timeout-secs` and
/// `--drain-timeout-secs` to exit (main.rs).
const SHUTDOWN_GRACE_SECS: u64 = 5;

fn k8s_dir() -> PathBuf {
    sluice_testkit::repo_root().join("deploy/k8s")
}

/// Every document of every file the kustomization lists, and the
/// ConfigMaps it generates.
fn manifests() -> Vec<Value> {
    let dir = k8s_dir();
    let kustomization = read_yaml(&dir.join("kustomization.yaml")).remove(0);
    let listed: Vec<&str> = seq(&kustomization["resources"])
        .iter()
        .map(|r| r.as_str().unwrap())
        .collect();
    let mut on_disk: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".yaml") && n != "kustomization.yaml")
        .collect();
    on_disk.sort();
    let mut sorted = listed.clone();
    sorted.sort_unstable();
    assert_eq!(
        sorted, on_disk,
        "kustomization.yaml must list every manifest"
    );
    let mut docs: Vec<Value> = listed
        .iter()
        .flat_map(|name| read_yaml(&dir.join(name)))
        .collect();
    docs.extend(
        seq(&kustomization["configMapGenerator"])
            .iter()
            .map(|generator| generated(&dir, generator)),
    );
    docs
}

/// The ConfigMap a `configMapGenerator` entry makes (before kustomize adds
/// the hash to its name and to the volumes that name it): each
/// `key=path` of `files` becomes a key holding that file.
fn generated(dir: &Path, generator: &Value) -> Value {
    let mut data = serde_yaml_ng::Mapping::new();
    for file in seq(&generator["files"]) {
        let spec = str_of(file, "configMapGenerator file");
        let (key, path) = spec.split_once('=').unwrap_or((spec, spec));
        let text = std::fs::read_to_string(dir.join(path))
            .unwrap_or_else(|e| panic!("configMapGenerator file {path}: {e}"));
        data.insert(key.into(), text.into());
    }
    let mut metadata = serde_yaml_ng::Mapping::new();
    metadata.insert("name".into(), generator["name"].clone());
    metadata.insert("namespace".into(), generator["namespace"].clone());
    let mut map = serde_yaml_ng::Mapping::new();
    map.insert("kind".into(), "ConfigMap".into());
    map.insert("metadata".into(), Value::Mapping(metadata));
    map.insert("data".into(), Value::Mapping(data));
    Value::Mapping(map)
}

fn read_yaml(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap();
    serde_yaml_ng::Deserializer::from_str(&text)
        .map(|doc| Value::deserialize(doc).unwrap())
        .collect()
}

fn seq(v: &Value) -> &Vec<Value> {
    v.as_sequence()
        .unwrap_or_else(|| panic!("expected a list, found {v:?}"))
}

fn str_of<'a>(v: &'a Value, what: &str) -> &'a str {
    v.as_str()
        .unwrap_or_else(|| panic!("{what}: expected a string, found {v:?}"))
}

fn of_kind<'a>(docs: &'a [Value], kind: &str) -> Vec<&'a Value> {
    docs.iter().filter(|d| d["kind"] == kind).collect()
}

fn name(doc: &Value) -> &str {
    str_of(&doc["metadata"]["name"], "metadata.name")
}

/// The files of one Deployment's pod, as its volume mounts them, and the
/// arguments its container passes.
struct PodFiles {
    topology: String,
    config: String,
    args: Vec<String>,
}

impl PodFiles {
    /// The value of `flag` in the container's arguments.
    fn arg(&self, flag: &str) -> Option<&str> {
        let at = self.args.iter().position(|a| a == flag)?;
        self.args.get(at + 1).map(String::as_str)
    }

    /// The topology as this pod's Sluice reads it: the file, then
    /// `--local-shotover-broker-id`.
    fn topology(&self, at: &str) -> Topology {
        let path = Path::new("topology.yaml");
        let mut topology = Topology::parse(&self.topology, path).unwrap();
        if let Some(id) = self.arg("--local-shotover-broker-id") {
            let id = id.parse().unwrap_or_else(|e| panic!("{at}: {id}: {e}"));
            topology.set_local_shotover_broker_id(id, path).unwrap();
        }
        topology
    }
}

fn pod_files(deployment: &Value, config_maps: &[&Value]) -> PodFiles {
    let pod = &deployment["spec"]["template"]["spec"];
    let container = &seq(&pod["containers"])[0];
    let mount = seq(&container["volumeMounts"])
        .iter()
        .find(|m| m["mountPath"] == "/etc/sluice")
        .expect("a volume mounted at /etc/sluice, where the image reads its files");
    let volume = seq(&pod["volumes"])
        .iter()
        .find(|v| v["name"] == mount["name"])
        .expect("the mounted volume");
    let config_map = config_maps
        .iter()
        .find(|c| c["metadata"]["name"] == volume["configMap"]["name"])
        .unwrap_or_else(|| panic!("{}: the ConfigMap its volume names", name(deployment)));
    // Without `items`, every key is a file of its name.
    let key_for = |path: &str| match volume["configMap"]["items"].as_sequence() {
        None => path.to_owned(),
        Some(items) => {
            let item = items
                .iter()
                .find(|i| i["path"] == path)
                .unwrap_or_else(|| panic!("{}: nothing mounted as {path}", name(deployment)));
            str_of(&item["key"], "configMap item key").to_owned()
        }
    };
    let data =
        |key: &str| str_of(&config_map["data"][key], &format!("ConfigMap key {key}")).to_owned();
    let args = container["args"]
        .as_sequence()
        .map(|args| args.iter().map(|a| str_of(a, "arg").to_owned()).collect())
        .unwrap_or_default();
    PodFiles {
        topology: data(&key_for("topology.yaml")),
        config: data(&key_for("config.yaml")),
        args,
    }
}

/// Runs the real binary's `validate-config` on one pod's files, with the
/// pod's arguments (they follow the image's `--topology-file` and
/// `--config-file`).
fn validate_config(files: &PodFiles, tag: &str) {
    let dir = std::env::temp_dir().join(format!("sluice-k8s-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let topology = dir.join("topology.yaml");
    let config = dir.join("config.yaml");
    std::fs::write(&topology, &files.topology).unwrap();
    std::fs::write(&config, &files.config).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .arg("--topology-file")
        .arg(&topology)
        .arg("--config-file")
        .arg(&config)
        .args(&files.args)
        .arg("validate-config")
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("configuration OK"),
        "{tag}: sluice validate-config {:?} failed ({}):\n{}{stdout}",
        files.args,
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

fn cluster_sink(
    topology: &Topology,
) -> (&sluice_config::KafkaSourceConfig, &KafkaSinkClusterConfig) {
    assert_eq!(topology.sources.len(), 1, "one source per node");
    let SourceConfig::Kafka(source) = &topology.sources[0];
    match source.sink() {
        Some(TransformConfig::KafkaSinkCluster(sink)) => (source, sink),
        other => panic!("the manifests' topology should end in KafkaSinkCluster, not {other:?}"),
    }
}

fn port_of(addr: &str) -> u16 {
    addr.rsplit_once(':').unwrap().1.parse().unwrap()
}

/// The container port named `name`.
fn container_port(container: &Value, name: &str) -> u16 {
    let port = seq(&container["ports"])
        .iter()
        .find(|p| p["name"] == name)
        .unwrap_or_else(|| panic!("no container port named {name}"));
    u16::try_from(port["containerPort"].as_u64().unwrap()).unwrap()
}

/// `512Mi` → bytes.
fn quantity_bytes(q: &str) -> u64 {
    let units = [("Ki", 1u64 << 10), ("Mi", 1 << 20), ("Gi", 1 << 30)];
    for (suffix, scale) in units {
        if let Some(n) = q.strip_suffix(suffix) {
            return n.parse::<u64>().unwrap() * scale;
        }
    }
    q.parse().unwrap()
}

/// The Service in front of `deployment`'s pods.
fn service_for<'a>(services: &[&'a Value], deployment: &Value) -> &'a Value {
    let labels = deployment["spec"]["template"]["metadata"]["labels"]
        .as_mapping()
        .unwrap();
    let matching: Vec<&Value> = services
        .iter()
        .copied()
        .filter(|s| {
            let selector = s["spec"]["selector"].as_mapping().unwrap();
            selector.iter().all(|(k, v)| labels.get(k) == Some(v))
        })
        .collect();
    assert_eq!(
        matching.len(),
        1,
        "{}: one Service per Sluice node",
        name(deployment)
    );
    matching[0]
}

/// A Service port, by name: (port, targetPort as a container port number).
fn service_port(service: &Value, port_name: &str, container: &Value) -> (u16, u16) {
    let port = seq(&service["spec"]["ports"])
        .iter()
        .find(|p| p["name"] == port_name)
        .unwrap_or_else(|| panic!("{}: no port named {port_name}", name(service)));
    let number = u16::try_from(port["port"].as_u64().unwrap()).unwrap();
    let target = match &port["targetPort"] {
        Value::String(named) => container_port(container, named),
        Value::Number(n) => u16::try_from(n.as_u64().unwrap()).unwrap(),
        Value::Null => number,
        other => panic!("targetPort {other:?}"),
    };
    (number, target)
}

#[test]
fn each_deployment_runs_a_topology_sluice_accepts() {
    let docs = manifests();
    let config_maps = of_kind(&docs, "ConfigMap");
    assert!(!config_maps.is_empty(), "the generated ConfigMap");
    let deployments = of_kind(&docs, "Deployment");
    assert!(deployments.len() >= 2, "several Sluice nodes");
    let mut local_ids = BTreeSet::new();
    for deployment in &deployments {
        let files = pod_files(deployment, &config_maps);
        validate_config(&files, name(deployment));
        let topology = files.topology(name(deployment));
        let local = cluster_sink(&topology).1.local_node().unwrap().broker_id;
        assert!(
            local_ids.insert(local),
            "{}: node {local} is also another Deployment's",
            name(deployment)
        );
    }
}

#[test]
fn services_and_deployments_agree_with_the_topologies() {
    let docs = manifests();
    let config_maps = of_kind(&docs, "ConfigMap");
    let services = of_kind(&docs, "Service");
    let (mut local_ids, mut all_ids) = (BTreeSet::new(), BTreeSet::new());
    let mut first_nodes: Option<String> = None;
    for deployment in of_kind(&docs, "Deployment") {
        let at = name(deployment);
        let files = pod_files(deployment, &config_maps);
        let topology = files.topology(at);
        let config = Config::parse(&files.config, Path::new("config.yaml")).unwrap();
        let (source, sink) = cluster_sink(&topology);
        let nodes = format!("{:?}", sink.shotover_nodes);
        let first = first_nodes.get_or_insert_with(|| nodes.clone());
        assert_eq!(
            *first, nodes,
            "{at}: every node's topology lists the same shotover_nodes"
        );
        all_ids.extend(sink.shotover_nodes.iter().map(|n| n.broker_id));
        let pod = &deployment["spec"]["template"]["spec"];
        let container = &seq(&pod["containers"])[0];
        let listen_port = port_of(&source.listen_addr);
        assert_eq!(container_port(container, "kafka"), listen_port, "{at}");
        let observability = config.observability_interface.as_deref().unwrap();
        assert_eq!(
            container_port(container, "observability"),
            port_of(observability),
            "{at}"
        );
        for (probe, path) in [("readinessProbe", "/ready"), ("livenessProbe", "/health")] {
            let get = &container[probe]["httpGet"];
            assert_eq!(get["path"], path, "{at}: {probe}");
            assert_eq!(get["port"], "observability", "{at}: {probe}");
        }

        let local = sink.local_node().unwrap();
        local_ids.insert(local.broker_id);
        let service = service_for(&services, deployment);
        let (port, target) = service_port(service, "kafka", container);
        assert_eq!(target, listen_port, "{at}: the Service's targetPort");
        let namespace = str_of(&service["metadata"]["namespace"], "namespace");
        let reached_at = format!("{}.{namespace}.svc.cluster.local:{port}", name(service));
        assert_eq!(
            local.address_for_clients, reached_at,
            "{at}: node {}",
            local.broker_id
        );
        assert_eq!(
            local.address_for_peers, reached_at,
            "{at}: node {}",
            local.broker_id
        );
        let zone = &pod["nodeSelector"]["topology.kubernetes.io/zone"];
        assert_eq!(
            *zone,
            local.rack.as_str(),
            "{at}: the pod runs in its node's rack"
        );
        check_limits(deployment, &topology, &files);
    }
    assert_eq!(
        local_ids, all_ids,
        "one Deployment per entry of shotover_nodes"
    );
}

/// The memory limit holds the memory budget, and the grace period the
/// preStop pause, the leave, the drain and Sluice's own grace.
fn check_limits(deployment: &Value, topology: &Topology, files: &PodFiles) {
    let at = name(deployment);
    let pod = &deployment["spec"]["template"]["spec"];
    let container = &seq(&pod["containers"])[0];
    let limit = quantity_bytes(str_of(
        &container["resources"]["limits"]["memory"],
        "memory limit",
    ));
    let budget = u64::try_from(topology.memory_budget_bytes_or_default()).unwrap();
    assert!(
        budget < limit,
        "{at}: memory_budget_bytes {budget} must fit the memory limit {limit}"
    );
    let secs = |flag: &str, default: u64| files.arg(flag).map_or(default, |v| v.parse().unwrap());
    let drain = secs("--drain-timeout-secs", 30);
    let leave = secs("--leave-timeout-secs", 10);
    let pre_stop = container["lifecycle"]["preStop"]["sleep"]["seconds"]
        .as_u64()
        .unwrap_or(0);
    check_user(at, pod);
    let grace = pod["terminationGracePeriodSeconds"].as_u64().unwrap_or(30);
    assert!(
        grace > pre_stop + leave + drain + SHUTDOWN_GRACE_SECS,
        "{at}: terminationGracePeriodSeconds {grace} must exceed the preStop pause ({pre_stop} s), the leave ({leave} s), the drain ({drain} s) and {SHUTDOWN_GRACE_SECS} s"
    );
    // An evicted pod has no successor behind its Service while it stops:
    // only the leave moves its clients to the other nodes.
    assert!(
        leave > 0,
        "{at}: the leave is what moves clients off an evicted pod"
    );
}

/// One PodDisruptionBudget covers every Sluice pod and lets one go at a time.
#[test]
fn a_disruption_budget_covers_every_node() {
    let docs = manifests();
    let budgets = of_kind(&docs, "PodDisruptionBudget");
    assert_eq!(budgets.len(), 1, "one PodDisruptionBudget");
    let budget = budgets[0];
    assert_eq!(budget["spec"]["maxUnavailable"], 1, "{budget:?}");
    let selector = budget["spec"]["selector"]["matchLabels"]
        .as_mapping()
        .unwrap();
    for deployment in of_kind(&docs, "Deployment") {
        let labels = deployment["spec"]["template"]["metadata"]["labels"]
            .as_mapping()
            .unwrap();
        assert!(
            selector.iter().all(|(k, v)| labels.get(k) == Some(v)),
            "{}: its pods are not selected by the PodDisruptionBudget",
            name(deployment)
        );
        assert_eq!(
            deployment["metadata"]["namespace"],
            budget["metadata"]["namespace"],
            "{}",
            name(deployment)
        );
    }
}

/// `runAsNonRoot` comes with a numeric user: the kubelet cannot check that a
/// user given by name in the image is not root, and refuses to start it.
fn check_user(at: &str, pod: &Value) {
    let container = &seq(&pod["containers"])[0];
    let field = |key: &str| {
        container["securityContext"][key]
            .as_u64()
            .or_else(|| pod["securityContext"][key].as_u64())
    };
    let non_root = container["securityContext"]["runAsNonRoot"]
        .as_bool()
        .or_else(|| pod["securityContext"]["runAsNonRoot"].as_bool());
    if non_root == Some(true) {
        let user = field("runAsUser");
        assert!(
            user.is_some_and(|u| u > 0),
            "{at}: runAsNonRoot needs a numeric, non-zero runAsUser, found {user:?}"
        );
    }
}
