//! `proxypool init` as a person uses it: `--single` against a running `proxypool sim`
//! gives a file that checks out and that `serve` runs as written, routing with the
//! generated gateway password and extracting with the generated API token; `--split`
//! checks out with neither Redis nor PostgreSQL running; every file is mode 0600; a second
//! run refuses and changes nothing unless `--force`; bad input is refused before anything
//! is written.

use crate::common::sim::{banner_field, start_sim};
use crate::common::{
    Proc, Scratch, api, curl_or_skip, eventually, eventually_some, free_port, run, shell,
    try_exit_via,
};
use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .permissions()
        .mode()
        & 0o777
}

/// Every file under `dir` (recursively): its content and modification time.
fn contents(dir: &Path) -> BTreeMap<PathBuf, (Vec<u8>, SystemTime)> {
    let mut found = BTreeMap::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(next) = pending.pop() {
        for entry in std::fs::read_dir(&next).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                pending.push(path);
            } else {
                let modified = std::fs::metadata(&path).unwrap().modified().unwrap();
                found.insert(path.clone(), (std::fs::read(&path).unwrap(), modified));
            }
        }
    }
    found
}

/// A secret file's secret (without its newline).
fn secret(dir: &Path, name: &str) -> String {
    let text = std::fs::read_to_string(dir.join("secrets").join(name)).unwrap();
    text.strip_suffix('\n').unwrap().to_owned()
}

#[test]
fn init_single_then_serve_routes_and_extracts_with_the_generated_secrets() {
    if !curl_or_skip() {
        return;
    }
    let scratch = Scratch::new("init-single");
    let sim = start_sim(&scratch, 4);
    let list = banner_field(&sim.stdout, "vendor list").to_owned();
    let origin = banner_field(&sim.stdout, "origin").to_owned();

    let dir = scratch.file("proxypool");
    let dir_arg = dir.to_str().unwrap();
    let args = [
        "init",
        dir_arg,
        "--single",
        "--vendor-url",
        &list,
        "--sim-origin",
        &origin,
    ];
    let (code, stdout, stderr) = run(&args, &[]);
    assert_eq!(code, 0, "{stderr}");
    let config = dir.join("proxypool.toml");
    for file in [
        "proxypool.toml",
        "secrets/api-token",
        "secrets/gateway-password",
    ] {
        assert_eq!(mode(&dir.join(file)), 0o600, "{file}");
    }
    assert_eq!(mode(&dir), 0o700);
    assert_eq!(mode(&dir.join("secrets")), 0o700);
    let files = contents(&dir);
    assert_eq!(files.len(), 3, "nothing else is left behind: {files:?}");
    let (token, password) = (secret(&dir, "api-token"), secret(&dir, "gateway-password"));
    assert!(token.len() >= 16 && password.len() >= 16);
    let text = std::fs::read_to_string(&config).unwrap();
    assert!(
        !text.contains(&token) && !text.contains(&password),
        "{text}"
    );
    assert!(!stdout.contains(&token) && !stdout.contains(&password));

    // The printed check-config line works as printed, and names the sim's upstream.
    let check = stdout
        .lines()
        .map(str::trim)
        .find(|line| line.contains(" check-config "))
        .unwrap_or_else(|| panic!("no check-config line in {stdout}"));
    let (code, out) = shell(check);
    assert_eq!(code, 0, "{check}: {out}");
    assert!(
        out.contains(": OK") && out.contains("sim (http list"),
        "{out}"
    );
    assert!(stdout.contains(" serve --config "), "{stdout}");

    // `serve` runs the file as written; the ports are moved with overrides only, as an
    // operator moves them.
    let (api_port, http, socks5, admin) = (free_port(), free_port(), free_port(), free_port());
    let listen = |port: u16| format!("127.0.0.1:{port}");
    let env = [
        ("PROXYPOOL__LISTEN__API", listen(api_port)),
        ("PROXYPOOL__GATEWAY__LISTENERS__HTTP", listen(http)),
        ("PROXYPOOL__GATEWAY__LISTENERS__SOCKS5", listen(socks5)),
        ("PROXYPOOL__GATEWAY__LISTENERS__ADMIN", listen(admin)),
    ];
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let _serve = Proc::start(
        "serve",
        &["serve", "--config", config.to_str().unwrap()],
        &env,
        &scratch.path,
    );
    let proxy = format!("http://main:{password}@127.0.0.1:{http}");
    eventually(
        "serve routes through its gateway with the generated password",
        Duration::from_secs(40),
        || try_exit_via(&proxy, &origin).is_some(),
    );
    let wrong = format!("http://main:{password}x@127.0.0.1:{http}");
    assert_eq!(try_exit_via(&wrong, &origin), None, "another password");

    let url = format!("http://127.0.0.1:{api_port}/v1/extractions");
    let extracted = eventually_some(
        "an extraction with the generated API token",
        Duration::from_secs(30),
        || {
            let answer = api::call("POST", &url, Some(&token), Some(r#"{"count":1}"#));
            // Partial mode: 200, with no proxy until one is checked and unowned.
            assert_eq!(answer.status, 200, "the extraction: {answer:?}");
            let proxies = answer.json()["proxies"].as_array().cloned()?;
            (proxies.len() == 1).then_some(proxies)
        },
    );
    assert!(extracted[0]["port"].as_u64().is_some(), "{extracted:?}");

    // Again, without --force: refused, and not one file changed.
    let (code, _, stderr) = run(&args, &[]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("already there") && stderr.contains("--force"),
        "{stderr}"
    );
    assert!(stderr.contains("proxypool.toml"), "{stderr}");
    // (`serve` keeps its quota under data/ meanwhile: only init's own files are compared.)
    let beside_quota = |path: &PathBuf| path.starts_with(dir.join("data"));
    let now = contents(&dir);
    for (path, before) in &files {
        assert_eq!(
            now.get(path),
            Some(before),
            "a refused init changed {path:?}"
        );
    }
    assert!(
        now.keys()
            .all(|path| files.contains_key(path) || beside_quota(path)),
        "a refused init wrote nothing: {:?}",
        now.keys()
    );

    // With --force: the same files, new secrets, still 0600.
    let mut forced = args.to_vec();
    forced.push("--force");
    let (code, _, stderr) = run(&forced, &[]);
    assert_eq!(code, 0, "{stderr}");
    assert_ne!(secret(&dir, "api-token"), token);
    assert_eq!(mode(&dir.join("secrets/api-token")), 0o600);
    let now = contents(&dir);
    assert!(
        files.keys().all(|path| now.contains_key(path))
            && now
                .keys()
                .all(|path| files.contains_key(path) || beside_quota(path)),
        "the same files beside serve's quota: {:?}",
        now.keys()
    );
}

#[test]
fn init_split_checks_out_without_its_stores_running() {
    let scratch = Scratch::new("init-split");
    let dir = scratch.file("split");
    let (code, stdout, stderr) = run(&["init", dir.to_str().unwrap(), "--split"], &[]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains("No vendor yet") && stdout.contains("placeholder"),
        "{stdout}"
    );
    for file in [
        "proxypool.toml",
        "gateway.toml",
        "secrets/api-token",
        "secrets/gateway-password",
        "secrets/worker-token",
        "secrets/postgres-password",
    ] {
        assert_eq!(mode(&dir.join(file)), 0o600, "{file}");
    }
    // Redis and PostgreSQL on their usual ports on a machine that runs neither (or
    // whatever runs there): check-config connects to nothing either way.
    let controller = dir.join("proxypool.toml");
    let (code, out, err) = run(&["check-config", controller.to_str().unwrap()], &[]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("redis redis://127.0.0.1:6379/0"), "{out}");
    assert!(out.contains("postgres postgres://proxypool@"), "{out}");
    assert!(
        out.contains("upstreams   0"),
        "the placeholder is commented: {out}"
    );
    let gateway = dir.join("gateway.toml");
    let (code, out, err) = run(&["check-config", gateway.to_str().unwrap()], &[]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("worker gw-1, controller http://127.0.0.1:7070"),
        "{out}"
    );
    // The gateway's file reads the token whose hash the controller's file holds.
    let token = secret(&dir, "worker-token");
    let text = std::fs::read_to_string(&controller).unwrap();
    let hash = text
        .lines()
        .find_map(|line| line.strip_prefix("token = { hash = \""))
        .and_then(|rest| rest.split('"').next())
        .unwrap_or_else(|| panic!("no worker token hash in {text}"));
    assert!(
        proxypool_core::SecretHash::parse(hash)
            .unwrap()
            .verify(&token)
    );

    // Both files name the vendor with --vendor-url, and still check out.
    let listed = scratch.file("listed");
    let (code, _, stderr) = run(
        &[
            "init",
            listed.to_str().unwrap(),
            "--split",
            "--vendor-url",
            "https://vendor.example/api/proxies?format=json",
        ],
        &[],
    );
    assert_eq!(code, 0, "{stderr}");
    let (code, out, err) = run(
        &[
            "check-config",
            listed.join("proxypool.toml").to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("upstreams   1: vendor (http list"), "{out}");
}

#[test]
fn bad_input_is_refused_before_anything_is_written() {
    let scratch = Scratch::new("init-refusals");
    let dir = scratch.file("never");
    let dir_arg = dir.to_str().unwrap();
    for (args, expected) in [
        (
            vec!["--single", "--vendor-url", "http://vendor.example/list"],
            "https://",
        ),
        (
            vec!["--single", "--vendor-url", "vendor.example"],
            "not a URL",
        ),
        (
            vec![
                "--single",
                "--vendor-url",
                "http://127.0.0.1:1/list",
                "--sim-origin",
                "http://localhost:2/",
            ],
            "names no IP address",
        ),
        (vec!["--single", "--split"], "cannot be used with"),
        (vec![], "--single"),
        (
            vec!["--split", "--sim-origin", "http://127.0.0.1:2/"],
            "--vendor-url",
        ),
    ] {
        let mut full = vec!["init", dir_arg];
        full.extend(&args);
        let (code, stdout, stderr) = run(&full, &[]);
        assert_eq!(code, 2, "{args:?}: {stdout}{stderr}");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
        assert!(!dir.exists(), "{args:?} wrote {}", dir.display());
    }

    // A directory every user may write to is refused, and left empty.
    let open = scratch.file("open");
    std::fs::create_dir(&open).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
    let (code, _, stderr) = run(&["init", open.to_str().unwrap(), "--single"], &[]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("every user may write"), "{stderr}");
    assert_eq!(std::fs::read_dir(&open).unwrap().count(), 0);
}
