//! The shipped Kubernetes base (`deploy/kubernetes/`), read as YAML the way the cluster
//! reads it:
//!
//! - it renders with `kubectl kustomize` into the objects it promises (where kubectl is
//!   installed; a kustomization naming a missing file fails the same render, so the check
//!   can fail);
//! - every workload runs as a non-root user on a read-only root with no privileges and
//!   resource bounds, and the servers have liveness and readiness probes;
//! - each pod is laid out as its container would see it (every volume mount's files from
//!   the ConfigMap and the Secrets, its environment with field and secret references
//!   resolved), and its own file passes `proxypool check-config` there: a mount the file
//!   needs and the pod lacks fails it;
//! - least privilege: a gateway pod can read only its own worker token, the admin token and
//!   the control API's CA (no store password, no client's API token); the database owner's
//!   URL reaches only the migration Job, the control API's key only the controllers;
//! - each gateway token of the controllers' file is good for exactly one gateway id, the
//!   StatefulSet's pod of that name, and checks out against that pod's key only;
//! - the gateways reach the controllers over `https` trusting the control API's CA, and
//!   the controllers serve the control API with its certificate;
//! - the gateways' admin listener is not on every address, and needs the admin token;
//! - the gateways are one fleet: each pod advertises its own stable name under the
//!   headless Service of the fleet port, which the clients' Service does not expose;
//! - a NetworkPolicy selects each workload for both directions: the controllers reach the
//!   stores, the gateways reach the controllers' control port, each other's fleet port
//!   (which only gateway pods may reach) and never a store, the Job reaches PostgreSQL
//!   only.

use crate::common::{Scratch, run};
use serde::Deserialize;
use serde_norway::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The address the test gives a pod (`status.podIP`).
const POD_IP: &str = "10.244.1.17";
/// The namespace the test gives a pod (`metadata.namespace`).
const NAMESPACE: &str = "scrapers";
/// The gateways' fleet port.
const FLEET_PORT: u64 = 7400;
/// Label of the stores' pods in the NetworkPolicies.
const STORES: [&str; 2] = ["redis", "postgres"];
/// The stores' ports.
const STORE_PORTS: [u64; 2] = [6379, 5432];

fn base() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../deploy/kubernetes")
}

fn shipped(name: &str) -> String {
    let path = base().join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every document of a YAML text.
fn documents(text: &str) -> Vec<Value> {
    serde_norway::Deserializer::from_str(text)
        .map(|document| Value::deserialize(document).unwrap())
        .filter(|value| !value.is_null())
        .collect()
}

fn text(value: &Value) -> &str {
    value.as_str().unwrap_or_default()
}

fn list(value: &Value) -> &[Value] {
    value.as_sequence().map_or(&[], Vec::as_slice)
}

/// `matchLabels` (or a pod template's `labels`) as a map.
fn labels(value: &Value) -> BTreeMap<String, String> {
    value
        .as_mapping()
        .into_iter()
        .flatten()
        .map(|(k, v)| (text(k).to_owned(), text(v).to_owned()))
        .collect()
}

/// The base as its kustomization lists it: the objects of its resources, the generated
/// ConfigMap's files and the Secrets' values.
struct Base {
    objects: Vec<Value>,
    resources: Vec<String>,
    config_map: String,
    config_files: BTreeMap<String, String>,
    secrets: BTreeMap<String, BTreeMap<String, String>>,
}

impl Base {
    fn load() -> Base {
        let kustomization = documents(&shipped("kustomization.yaml")).remove(0);
        let resources: Vec<String> = list(&kustomization["resources"])
            .iter()
            .map(|r| text(r).to_owned())
            .collect();
        let objects: Vec<Value> = resources
            .iter()
            .flat_map(|file| documents(&shipped(file)))
            .collect();
        let generator = &list(&kustomization["configMapGenerator"])[0];
        let config_files = list(&generator["files"])
            .iter()
            .map(|file| {
                let file = text(file);
                let key = file.rsplit('/').next().unwrap().to_owned();
                (key, shipped(file))
            })
            .collect();
        let secrets = objects
            .iter()
            .filter(|o| o["kind"] == "Secret")
            .map(|o| {
                let values = o["stringData"]
                    .as_mapping()
                    .expect("the Secrets hold stringData")
                    .iter()
                    .map(|(k, v)| (text(k).to_owned(), text(v).to_owned()))
                    .collect();
                (text(&o["metadata"]["name"]).to_owned(), values)
            })
            .collect();
        Base {
            objects,
            resources,
            config_map: text(&generator["name"]).to_owned(),
            config_files,
            secrets,
        }
    }

    fn of_kind(&self, kind: &str) -> Vec<&Value> {
        self.objects.iter().filter(|o| o["kind"] == kind).collect()
    }

    /// Deployments, StatefulSets and Jobs.
    fn workloads(&self) -> Vec<&Value> {
        self.objects
            .iter()
            .filter(|o| ["Deployment", "StatefulSet", "Job"].contains(&text(&o["kind"])))
            .collect()
    }

    fn workload(&self, name: &str) -> &Value {
        self.workloads()
            .into_iter()
            .find(|w| w["metadata"]["name"] == name)
            .unwrap_or_else(|| panic!("no workload {name}"))
    }

    fn secret(&self, name: &str) -> &BTreeMap<String, String> {
        self.secrets
            .get(name)
            .unwrap_or_else(|| panic!("no Secret {name}"))
    }

    /// The gateways' pod names, which are their worker ids: only a StatefulSet's are known
    /// before the pods exist.
    fn gateway_ids(&self) -> Vec<String> {
        let gateways = self.workload("proxypool-gateway");
        assert_eq!(
            gateways["kind"],
            "StatefulSet",
            "the gateways' pods need stable names (their worker ids, one token each): \
             a {} names them at random",
            text(&gateways["kind"])
        );
        let replicas = gateways["spec"]["replicas"].as_u64().unwrap();
        (0..replicas)
            .map(|i| format!("proxypool-gateway-{i}"))
            .collect()
    }

    /// A pod name of the workload: the StatefulSet's `index`-th, or one as a Deployment's or
    /// Job's would be.
    fn pod_name(&self, workload: &Value, index: usize) -> String {
        let name = text(&workload["metadata"]["name"]);
        match text(&workload["kind"]) {
            "StatefulSet" => format!("{name}-{index}"),
            "Deployment" => format!("{name}-7d9f8c6b5-x2k4q"),
            _ => format!("{name}-x2k4q"),
        }
    }

    /// The (key, content) pairs of the ConfigMap or Secret a volume source names, those of
    /// its `items` only (each at its `path`) when it lists some.
    fn source_files(&self, kind: &str, name: &str, source: &Value) -> Vec<VolumeFile> {
        let all: &BTreeMap<String, String> = if kind == "configMap" {
            assert_eq!(name, self.config_map, "a ConfigMap the base does not make");
            &self.config_files
        } else {
            self.secret(name)
        };
        let file = |path: &str, key: &str| {
            let content = all
                .get(key)
                .unwrap_or_else(|| panic!("{kind} {name} has no key {key}"))
                .clone();
            VolumeFile {
                path: path.to_owned(),
                content,
                secret: (kind == "secret").then(|| (name.to_owned(), key.to_owned())),
            }
        };
        let items = list(&source["items"]);
        if items.is_empty() {
            all.keys().map(|key| file(key, key)).collect()
        } else {
            items
                .iter()
                .map(|item| file(text(&item["path"]), text(&item["key"])))
                .collect()
        }
    }

    /// The files of a volume.
    fn volume_files(&self, volume: &Value) -> Vec<VolumeFile> {
        if volume["configMap"].is_mapping() {
            let source = &volume["configMap"];
            self.source_files("configMap", text(&source["name"]), source)
        } else if volume["secret"].is_mapping() {
            let source = &volume["secret"];
            self.source_files("secret", text(&source["secretName"]), source)
        } else if volume["projected"].is_mapping() {
            list(&volume["projected"]["sources"])
                .iter()
                .flat_map(|source| {
                    let (kind, source) = if source["secret"].is_mapping() {
                        ("secret", &source["secret"])
                    } else {
                        ("configMap", &source["configMap"])
                    };
                    self.source_files(kind, text(&source["name"]), source)
                })
                .collect()
        } else {
            panic!("a volume this test does not know: {volume:?}");
        }
    }

    /// One pod of `workload` laid out under `scratch` as its (one) container sees it.
    fn pod(&self, workload: &Value, pod_name: &str, scratch: &Scratch) -> Pod {
        let spec = &workload["spec"]["template"]["spec"];
        let containers = list(&spec["containers"]);
        assert_eq!(containers.len(), 1, "one container per pod");
        let container = &containers[0];
        let mut secrets = BTreeSet::new();
        let mut env: Vec<(String, String)> = Vec::new();
        assert!(
            container["envFrom"].is_null(),
            "envFrom hands over whole Secrets"
        );
        for variable in list(&container["env"]) {
            let name = text(&variable["name"]).to_owned();
            let from = &variable["valueFrom"];
            let value = if let Some(value) = variable["value"].as_str() {
                expand(value, &env)
            } else if let Some(field) = from["fieldRef"]["fieldPath"].as_str() {
                match field {
                    "metadata.name" => pod_name.to_owned(),
                    "metadata.namespace" => NAMESPACE.to_owned(),
                    "status.podIP" => POD_IP.to_owned(),
                    other => panic!("a field this test does not know: {other}"),
                }
            } else if from["secretKeyRef"].is_mapping() {
                let reference = &from["secretKeyRef"];
                let (secret, key) = (text(&reference["name"]), text(&reference["key"]));
                secrets.insert((secret.to_owned(), key.to_owned()));
                self.secret(secret)
                    .get(key)
                    .unwrap_or_else(|| panic!("Secret {secret} has no key {key}"))
                    .clone()
            } else {
                panic!("a variable this test does not know: {variable:?}");
            };
            env.push((name, value));
        }
        let root = scratch.file(pod_name);
        for mount in list(&container["volumeMounts"]) {
            let volume = list(&spec["volumes"])
                .iter()
                .find(|v| v["name"] == mount["name"])
                .unwrap_or_else(|| panic!("no volume for {mount:?}"));
            let at = root.join(text(&mount["mountPath"]).trim_start_matches('/'));
            let files = self.volume_files(volume);
            let sub_path = mount["subPath"]
                .as_str()
                .map(str::to_owned)
                .or_else(|| mount["subPathExpr"].as_str().map(|e| expand(e, &env)));
            let chosen: Vec<(PathBuf, VolumeFile)> = match &sub_path {
                // One file of the volume, at the mount path itself.
                Some(sub) => files
                    .into_iter()
                    .filter(|file| &file.path == sub)
                    .map(|file| (at.clone(), file))
                    .collect(),
                None => files
                    .into_iter()
                    .map(|file| (at.join(&file.path), file))
                    .collect(),
            };
            assert!(!chosen.is_empty(), "{pod_name}: {mount:?} mounts nothing");
            for (path, file) in chosen {
                std::fs::create_dir_all(path.parent().unwrap()).unwrap();
                std::fs::write(&path, file.content).unwrap();
                secrets.extend(file.secret);
            }
        }
        let config = env
            .iter()
            .find(|(k, _)| k == "PROXYPOOL_CONFIG")
            .map(|(_, v)| root.join(v.trim_start_matches('/')))
            .expect("PROXYPOOL_CONFIG names the pod's file");
        Pod {
            env,
            secrets,
            config,
        }
    }
}

/// A file of a volume.
struct VolumeFile {
    /// Its path in the volume.
    path: String,
    content: String,
    /// The (Secret, key) it holds, for a Secret's.
    secret: Option<(String, String)>,
}

/// `$(VAR)` references of a Kubernetes value, from the variables defined before it.
fn expand(value: &str, env: &[(String, String)]) -> String {
    let mut out = value.to_owned();
    for (name, v) in env {
        out = out.replace(&format!("$({name})"), v);
    }
    assert!(
        !out.contains("$("),
        "{value}: a variable not defined before it"
    );
    out
}

/// A pod as its container sees it.
struct Pod {
    /// Its environment, resolved.
    env: Vec<(String, String)>,
    /// (Secret, key) of every secret value it can read, as a file or a variable.
    secrets: BTreeSet<(String, String)>,
    /// Its configuration file, where `PROXYPOOL_CONFIG` names it.
    config: PathBuf,
}

impl Pod {
    fn env(&self) -> Vec<(&str, &str)> {
        self.env
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect()
    }

    /// The pod's file as the process loads it (environment overrides included).
    fn load(&self, role: proxypool_config::Role) -> proxypool_config::Config {
        let env = proxypool_config::Env::from_pairs(self.env.iter().cloned());
        proxypool_config::Config::load_with_env(&self.config, role, &env)
            .unwrap_or_else(|e| panic!("{}: {e}", self.config.display()))
    }
}

/// `kubectl kustomize DIR`: the rendered YAML, or the error; `None` without kubectl.
fn kustomize(dir: &Path) -> Option<Result<String, String>> {
    let output = Command::new("kubectl")
        .arg("kustomize")
        .arg(dir)
        .output()
        .ok()?;
    Some(if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    } else {
        Err(String::from_utf8_lossy(&output.stderr).into_owned())
    })
}

#[test]
fn the_base_renders_into_the_objects_it_promises_or_fails_on_a_broken_file() {
    let Some(rendered) = kustomize(&base()) else {
        eprintln!(
            "SKIPPED (render only): kubectl is not installed; the structural checks still run"
        );
        return;
    };
    let rendered = rendered.unwrap_or_else(|e| panic!("the base does not render: {e}"));
    let objects = documents(&rendered);
    let mut kinds: Vec<&str> = objects.iter().map(|o| text(&o["kind"])).collect();
    kinds.sort_unstable();
    assert_eq!(
        kinds,
        [
            "ConfigMap",
            "Deployment",
            "Job",
            "NetworkPolicy",
            "NetworkPolicy",
            "NetworkPolicy",
            "Secret",
            "Secret",
            "Secret",
            "Secret",
            "Secret",
            "Service",
            "Service",
            "Service",
            "StatefulSet",
        ]
    );
    // The generated ConfigMap's hashed name is what every workload mounts.
    let config_map = objects
        .iter()
        .find(|o| o["kind"] == "ConfigMap")
        .map(|o| text(&o["metadata"]["name"]).to_owned())
        .unwrap();
    assert!(config_map.starts_with("proxypool-config-"), "{config_map}");
    for workload in objects
        .iter()
        .filter(|o| ["Deployment", "StatefulSet", "Job"].contains(&text(&o["kind"])))
    {
        let volumes = list(&workload["spec"]["template"]["spec"]["volumes"]);
        assert!(
            volumes
                .iter()
                .any(|v| v["configMap"]["name"] == config_map.as_str()),
            "{} mounts {config_map}",
            text(&workload["metadata"]["name"])
        );
    }

    let scratch = Scratch::new("kustomize-broken");
    let broken = shipped("kustomization.yaml").replace("- gateway.yaml", "- gateways.yaml");
    scratch.write("kustomization.yaml", &broken);
    std::fs::create_dir_all(scratch.file("config")).unwrap();
    let base = Base::load();
    for file in base.resources.iter().filter(|f| *f != "gateway.yaml") {
        scratch.write(file, &shipped(file));
    }
    for file in base.config_files.keys() {
        scratch.write(
            &format!("config/{file}"),
            &shipped(&format!("config/{file}")),
        );
    }
    let error = kustomize(&scratch.path).unwrap().unwrap_err();
    assert!(error.contains("gateways.yaml"), "{error}");
}

/// A file mode written `0440`: octal 440 to Kubernetes (YAML 1.1), whichever way the YAML
/// reader here takes the digits.
fn is_0440(mode: &Value) -> bool {
    mode.as_u64() == Some(0o440) || mode.as_u64() == Some(440) || mode.as_str() == Some("0440")
}

#[test]
fn every_workload_is_unprivileged_bounded_and_probed() {
    let base = Base::load();
    let workloads = base.workloads();
    assert_eq!(
        workloads.len(),
        3,
        "controllers, gateways and the migration Job"
    );
    for workload in workloads {
        let name = text(&workload["metadata"]["name"]);
        let spec = &workload["spec"]["template"]["spec"];
        assert_eq!(spec["automountServiceAccountToken"], false, "{name}");
        let pod = &spec["securityContext"];
        assert_eq!(pod["runAsNonRoot"], true, "{name}");
        assert_eq!(pod["fsGroup"], 65532, "{name}");
        assert_eq!(pod["seccompProfile"]["type"], "RuntimeDefault", "{name}");
        let container = &list(&spec["containers"])[0];
        let sandbox = &container["securityContext"];
        assert_eq!(sandbox["readOnlyRootFilesystem"], true, "{name}");
        assert_eq!(sandbox["allowPrivilegeEscalation"], false, "{name}");
        assert_eq!(list(&sandbox["capabilities"]["drop"]), ["ALL"], "{name}");
        assert!(
            container["resources"]["requests"]["cpu"].is_string(),
            "{name}"
        );
        assert!(
            container["resources"]["limits"]["memory"].is_string(),
            "{name}"
        );
        // Secret files are for the pod's group only: 0440.
        for volume in list(&spec["volumes"]) {
            for source in [&volume["secret"], &volume["projected"]] {
                if source.is_mapping() {
                    assert!(is_0440(&source["defaultMode"]), "{name}: {volume:?}");
                }
            }
        }
        let probes = match name {
            "proxypool-controller" => Some("api"),
            "proxypool-gateway" => Some("admin"),
            _ => None,
        };
        if let Some(port) = probes {
            for (probe, path) in [("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")] {
                let get = &container[probe]["httpGet"];
                assert_eq!(
                    (text(&get["path"]), text(&get["port"])),
                    (path, port),
                    "{name}"
                );
            }
        }
    }
}

#[test]
fn each_pod_mounts_what_its_file_needs_and_the_file_checks_out() {
    let base = Base::load();
    let scratch = Scratch::new("kubernetes-pods");
    for workload in base.workloads() {
        let pods = match text(&workload["kind"]) {
            "StatefulSet" => workload["spec"]["replicas"].as_u64().unwrap() as usize,
            _ => 1,
        };
        for index in 0..pods {
            let name = base.pod_name(workload, index);
            let pod = base.pod(workload, &name, &scratch);
            let (code, stdout, stderr) =
                run(&["check-config", pod.config.to_str().unwrap()], &pod.env());
            assert_eq!(code, 0, "{name}: {stderr}");
            assert!(stdout.contains(": OK"), "{name}: {stdout}");
            if workload["metadata"]["name"] == "proxypool-gateway" {
                assert!(stdout.contains(&format!("worker {name},")), "{stdout}");
                assert!(stdout.contains(&format!("admin {POD_IP}:9090")), "{stdout}");
                // Each pod tells its peers its own stable name.
                let config = pod.load(proxypool_config::Role::Gateway);
                let fleet = config.gateway.unwrap().fleet.expect("[gateway.fleet]");
                assert_eq!(
                    fleet.advertise,
                    format!("{name}.proxypool-gateway-peers.{NAMESPACE}.svc:{FLEET_PORT}")
                );
                assert_eq!(u64::from(fleet.listen.port()), FLEET_PORT);
            }
        }
    }
    // The check can fail: the gateway's pod without its worker token's mount.
    let mut gateway = base.workload("proxypool-gateway").clone();
    let mounts = gateway["spec"]["template"]["spec"]["containers"][0]["volumeMounts"]
        .as_sequence_mut()
        .unwrap();
    mounts.retain(|m| m["mountPath"] != "/etc/proxypool/worker-token");
    let broken = Scratch::new("kubernetes-broken");
    let pod = base.pod(&gateway, "proxypool-gateway-0", &broken);
    let (code, _, stderr) = run(&["check-config", pod.config.to_str().unwrap()], &pod.env());
    assert_ne!(code, 0);
    assert!(stderr.contains("worker-token"), "{stderr}");
}

#[test]
fn a_gateway_pod_holds_only_its_own_token_the_admin_token_and_the_ca() {
    let base = Base::load();
    let scratch = Scratch::new("kubernetes-least-privilege");
    let services = base.secret("proxypool-secrets");
    for (index, id) in base.gateway_ids().iter().enumerate() {
        let gateway = base.workload("proxypool-gateway");
        let pod = base.pod(gateway, &base.pod_name(gateway, index), &scratch);
        for (secret, key) in &pod.secrets {
            assert!(
                !(secret == "proxypool-secrets" && services.contains_key(key)),
                "{id} can read {key} of {secret}: a store password or a client's secret"
            );
        }
        let expected: BTreeSet<(String, String)> = [
            ("proxypool-gateway-tokens", id.as_str()),
            ("proxypool-gateway-admin", "admin-token"),
            ("proxypool-control-tls", "ca.crt"),
        ]
        .iter()
        .map(|(s, k)| ((*s).to_owned(), (*k).to_owned()))
        .collect();
        assert_eq!(pod.secrets, expected, "{id}");
    }
    // The database owner's URL reaches the migration Job only, the control API's key the
    // controllers only.
    for workload in base.workloads() {
        let name = text(&workload["metadata"]["name"]);
        let pod = base.pod(workload, &base.pod_name(workload, 0), &scratch);
        let has =
            |secret: &str, key: &str| pod.secrets.contains(&(secret.to_owned(), key.to_owned()));
        assert_eq!(
            has("proxypool-migrate", "owner-url"),
            name == "proxypool-migrate",
            "{name}"
        );
        assert_eq!(
            has("proxypool-control-tls", "tls.key"),
            name == "proxypool-controller",
            "{name}"
        );
        if name == "proxypool-migrate" {
            // The runtime role's password, to create the role with it; nothing else of the
            // services'.
            let services: Vec<_> = pod
                .secrets
                .iter()
                .filter(|(s, _)| s == "proxypool-secrets")
                .collect();
            assert_eq!(
                services,
                [&(
                    "proxypool-secrets".to_owned(),
                    "postgres-password".to_owned()
                )],
                "{name}"
            );
        }
    }
}

#[test]
fn each_gateway_token_is_good_for_exactly_one_gateway_id() {
    let base = Base::load();
    let ids = base.gateway_ids();
    let tokens = base.secret("proxypool-gateway-tokens");
    let keys: Vec<&String> = tokens.keys().collect();
    assert_eq!(
        keys,
        ids.iter().collect::<Vec<_>>(),
        "a token per gateway pod"
    );
    let scratch = Scratch::new("kubernetes-tokens");
    let controller = base.workload("proxypool-controller");
    let config = base
        .pod(controller, &base.pod_name(controller, 0), &scratch)
        .load(proxypool_config::Role::Controller);
    assert_eq!(config.worker_tokens.len(), ids.len(), "a token per gateway");
    let mut covered = BTreeSet::new();
    for token in &config.worker_tokens {
        let workers: Vec<&str> = token.workers.iter().map(|w| w.as_str()).collect();
        let [id] = workers.as_slice() else {
            panic!(
                "worker token {} is good for {workers:?}: one gateway id each (none = any)",
                token.name
            );
        };
        assert!(ids.iter().any(|g| g == id), "{id} is no gateway pod");
        assert!(covered.insert(*id), "two tokens for {id}");
        // It is that gateway's key, and no other gateway's.
        let verifier = token.token.verifier().unwrap();
        for (gateway, value) in tokens {
            assert_eq!(
                verifier.verify(value),
                gateway == id,
                "{} vs {gateway}",
                token.name
            );
        }
    }
}

#[test]
fn the_gateways_reach_the_controllers_over_tls_trusting_the_control_ca() {
    let base = Base::load();
    let scratch = Scratch::new("kubernetes-tls");
    let tls = base.secret("proxypool-control-tls");
    let controller = base.workload("proxypool-controller");
    let config = base
        .pod(controller, &base.pod_name(controller, 0), &scratch)
        .load(proxypool_config::Role::Controller);
    let served = config
        .control
        .tls
        .expect("the controllers serve [control.tls]");
    assert_eq!(
        std::fs::read_to_string(&served.cert).unwrap(),
        tls["tls.crt"]
    );
    assert_eq!(
        std::fs::read_to_string(&served.key).unwrap(),
        tls["tls.key"]
    );
    let control_port = config.listen.control.port();

    let gateway = base.workload("proxypool-gateway");
    let config = base
        .pod(gateway, &base.pod_name(gateway, 0), &scratch)
        .load(proxypool_config::Role::Gateway);
    let section = config.gateway.unwrap();
    let urls = section.controller_url.unwrap().0;
    let service = base
        .of_kind("Service")
        .into_iter()
        .find(|s| s["metadata"]["name"] == "proxypool-controller")
        .expect("the controllers' Service");
    let service_port = list(&service["spec"]["ports"])
        .iter()
        .find(|p| p["name"] == "control")
        .and_then(|p| p["port"].as_u64())
        .unwrap();
    assert_eq!(service_port, u64::from(control_port));
    for url in &urls {
        assert_eq!(
            url,
            &format!("https://proxypool-controller:{service_port}"),
            "the gateways reach the controllers' Service over TLS"
        );
    }
    let trust = section
        .controller_tls
        .and_then(|t| t.ca)
        .expect("[gateway.controller_tls] ca: the control API's CA, not the public roots");
    assert_eq!(std::fs::read_to_string(trust).unwrap(), tls["ca.crt"]);
}

#[test]
fn admin_listeners_are_on_the_pod_address_and_need_the_admin_token() {
    let base = Base::load();
    let scratch = Scratch::new("kubernetes-admin");
    let gateway = base.workload("proxypool-gateway");
    let config = base
        .pod(gateway, &base.pod_name(gateway, 0), &scratch)
        .load(proxypool_config::Role::Gateway);
    let section = config.gateway.unwrap();
    let admin: SocketAddr = section.listeners.admin.expect("an admin listener");
    assert!(
        !admin.ip().is_unspecified() || section.admin_token.is_some(),
        "the admin listener is on every address ({admin}) with no admin_token"
    );
    assert!(
        admin.ip().is_loopback() || section.admin_token.is_some(),
        "the admin listener is reachable on {admin} with no admin_token"
    );
    assert_eq!(admin, format!("{POD_IP}:9090").parse().unwrap());
}

/// The ports of a NetworkPolicy rule (empty: every port).
fn ports(rule: &Value) -> Vec<u64> {
    list(&rule["ports"])
        .iter()
        .map(|p| p["port"].as_u64().unwrap())
        .collect()
}

/// The `app.kubernetes.io/name` of each pod selector a rule's peers name.
fn peer_names(rule: &Value, direction: &str) -> Vec<String> {
    list(&rule[direction])
        .iter()
        .filter_map(|peer| peer["podSelector"]["matchLabels"]["app.kubernetes.io/name"].as_str())
        .map(str::to_owned)
        .collect()
}

#[test]
fn a_network_policy_selects_every_workload_in_both_directions() {
    let base = Base::load();
    assert!(
        base.resources.iter().any(|r| r == "networkpolicy.yaml"),
        "the kustomization lists networkpolicy.yaml"
    );
    let policies = base.of_kind("NetworkPolicy");
    let policy_of = |workload: &Value| -> &Value {
        let pod_labels = labels(&workload["spec"]["template"]["metadata"]["labels"]);
        let name = text(&workload["metadata"]["name"]);
        let selecting: Vec<&&Value> = policies
            .iter()
            .filter(|p| {
                labels(&p["spec"]["podSelector"]["matchLabels"])
                    .iter()
                    .all(|(k, v)| pod_labels.get(k) == Some(v))
            })
            .collect();
        assert_eq!(selecting.len(), 1, "one NetworkPolicy selects {name}");
        let policy = *selecting[0];
        let types: Vec<&str> = list(&policy["spec"]["policyTypes"])
            .iter()
            .map(text)
            .collect();
        assert!(
            types.contains(&"Ingress") && types.contains(&"Egress"),
            "{name}: {types:?}: what is not listed is denied both ways"
        );
        policy
    };
    for workload in base.workloads() {
        policy_of(workload);
    }

    // Controllers: the stores; the control port only from the gateways.
    let controller = &policy_of(base.workload("proxypool-controller"))["spec"];
    for (store, port) in STORES.iter().zip(STORE_PORTS) {
        assert!(
            list(&controller["egress"])
                .iter()
                .any(|r| peer_names(r, "to") == [*store] && ports(r) == [port]),
            "the controllers reach {store} on {port}"
        );
    }
    for rule in list(&controller["ingress"]) {
        if ports(rule).contains(&7070) || ports(rule).is_empty() {
            assert_eq!(
                peer_names(rule, "from"),
                ["proxypool-gateway"],
                "only gateways reach the control port: {rule:?}"
            );
        }
    }
    // Gateways: the controllers' control port, the other gateways' fleet port, never a
    // store, nothing inside the cluster beyond DNS.
    let gateway = &policy_of(base.workload("proxypool-gateway"))["spec"];
    for rule in list(&gateway["egress"]) {
        let names = peer_names(rule, "to");
        assert!(
            names.iter().all(|n| n == "proxypool-controller"
                || n == "kube-dns"
                || (n == "proxypool-gateway" && ports(rule) == [FLEET_PORT])),
            "a gateway reaches {names:?} on {:?}",
            ports(rule)
        );
        assert!(
            !ports(rule).iter().any(|p| STORE_PORTS.contains(p)),
            "a gateway reaches a store's port: {rule:?}"
        );
        if names.is_empty() {
            for block in list(&rule["to"]) {
                let except: Vec<&str> =
                    list(&block["ipBlock"]["except"]).iter().map(text).collect();
                if block["ipBlock"]["cidr"] == "0.0.0.0/0" {
                    for private in [
                        "10.0.0.0/8",
                        "172.16.0.0/12",
                        "192.168.0.0/16",
                        "169.254.0.0/16",
                    ] {
                        assert!(except.contains(&private), "the gateways reach {private}");
                    }
                }
            }
        }
    }
    assert!(
        list(&gateway["egress"])
            .iter()
            .any(|r| peer_names(r, "to") == ["proxypool-controller"] && ports(r) == [7070]),
        "the gateways reach the control port"
    );
    // The migration Job: PostgreSQL and DNS, nothing else; nobody reaches it.
    let migrate = &policy_of(base.workload("proxypool-migrate"))["spec"];
    assert!(list(&migrate["ingress"]).is_empty());
    for rule in list(&migrate["egress"]) {
        assert!(
            !list(&rule["to"]).is_empty(),
            "the Job reaches anywhere: {rule:?}"
        );
        for peer in list(&rule["to"]) {
            assert!(
                peer["ipBlock"].is_null(),
                "the Job reaches addresses: {rule:?}"
            );
        }
    }
}

#[test]
fn the_fleet_port_is_reached_by_gateway_pods_alone_at_each_pods_stable_name() {
    let base = Base::load();
    let gateway = base.workload("proxypool-gateway");
    let pod_labels = labels(&gateway["spec"]["template"]["metadata"]["labels"]);
    let container = &list(&gateway["spec"]["template"]["spec"]["containers"])[0];
    let fleet_port = list(&container["ports"])
        .iter()
        .find(|p| p["name"] == "fleet")
        .and_then(|p| p["containerPort"].as_u64());
    assert_eq!(fleet_port, Some(FLEET_PORT), "the container's fleet port");

    // The pods' DNS names come from the StatefulSet's headless Service, which lists every
    // pod with an address (a member the controllers list must resolve, ready or not) on
    // the fleet port.
    let peers = text(&gateway["spec"]["serviceName"]);
    let services = base.of_kind("Service");
    let headless = services
        .iter()
        .find(|s| s["metadata"]["name"] == peers)
        .unwrap_or_else(|| panic!("no Service {peers:?}, the StatefulSet's serviceName"));
    assert_eq!(headless["spec"]["clusterIP"], "None", "{peers} is headless");
    assert_eq!(headless["spec"]["publishNotReadyAddresses"], true);
    assert_eq!(labels(&headless["spec"]["selector"]), pod_labels);
    let peer_ports: Vec<u64> = list(&headless["spec"]["ports"])
        .iter()
        .filter_map(|p| p["port"].as_u64())
        .collect();
    assert_eq!(peer_ports, [FLEET_PORT]);
    // The advertised name is under that Service, and is the pod's own.
    let scratch = Scratch::new("kubernetes-fleet");
    let mut advertised = BTreeSet::new();
    for index in 0..base.gateway_ids().len() {
        let name = base.pod_name(gateway, index);
        let pod = base.pod(gateway, &name, &scratch);
        let fleet = pod
            .load(proxypool_config::Role::Gateway)
            .gateway
            .unwrap()
            .fleet
            .expect("[gateway.fleet]");
        let (host, port) = fleet.advertise.rsplit_once(':').unwrap();
        assert_eq!(port, FLEET_PORT.to_string());
        assert_eq!(host, format!("{name}.{peers}.{NAMESPACE}.svc"));
        advertised.insert(fleet.advertise);
    }
    assert_eq!(
        advertised.len(),
        base.gateway_ids().len(),
        "one address per pod"
    );

    // The clients' Service is one address for the proxy ports and never the fleet port.
    for service in &services {
        let name = text(&service["metadata"]["name"]);
        let exposes = list(&service["spec"]["ports"])
            .iter()
            .any(|p| p["port"].as_u64() == Some(FLEET_PORT) || p["targetPort"] == "fleet");
        assert_eq!(exposes, name == peers, "{name} and the fleet port");
    }
    let clients = services
        .iter()
        .find(|s| s["metadata"]["name"] == "proxypool-gateway")
        .expect("the clients' Service");
    assert!(
        clients["spec"]["clusterIP"].is_null(),
        "one balanced address"
    );

    // The gateways' policy: the fleet port from gateway pods of this namespace only, and a
    // gateway may dial it.
    let policy = base
        .of_kind("NetworkPolicy")
        .into_iter()
        .find(|p| p["metadata"]["name"] == "proxypool-gateway")
        .expect("the gateways' NetworkPolicy");
    let mut admitted = 0;
    for rule in list(&policy["spec"]["ingress"]) {
        if ports(rule).is_empty() || ports(rule).contains(&FLEET_PORT) {
            assert_eq!(
                peer_names(rule, "from"),
                ["proxypool-gateway"],
                "the fleet port is open to more than gateway pods: {rule:?}"
            );
            for peer in list(&rule["from"]) {
                assert!(
                    peer["namespaceSelector"].is_null() && peer["ipBlock"].is_null(),
                    "the fleet port is open beyond this namespace's gateways: {rule:?}"
                );
            }
            admitted += 1;
        }
    }
    assert_eq!(admitted, 1, "one ingress rule admits the fleet port");
    assert!(
        list(&policy["spec"]["egress"])
            .iter()
            .any(|r| peer_names(r, "to") == ["proxypool-gateway"] && ports(r) == [FLEET_PORT]),
        "the gateways reach each other's fleet port"
    );
    // No other workload's policy lets anything dial the fleet port.
    for other in base.of_kind("NetworkPolicy") {
        if other["metadata"]["name"] == "proxypool-gateway" {
            continue;
        }
        for rule in list(&other["spec"]["egress"]) {
            assert!(
                !peer_names(rule, "to").contains(&"proxypool-gateway".to_owned()),
                "{} reaches the gateways: {rule:?}",
                text(&other["metadata"]["name"])
            );
        }
    }
}
