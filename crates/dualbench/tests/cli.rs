//! The binary: bad input gives one line naming file:line and exit code 3; JSON output.

mod common;

use std::process::Command;

use common::{start, Behaviour};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_dualbench"))
}

/// A file in a directory of this test's own, removed by `cleanup`.
fn temp_file(test: &str, name: &str, text: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("dualbench-test-{}-{test}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

fn cleanup(path: &std::path::Path) {
    let _ = std::fs::remove_dir_all(path.parent().unwrap());
}

#[test]
fn bad_address_line_is_one_clear_error() {
    let path = temp_file("bad", "bad.txt", "::1\n# comment\n127.0.0.1\nwww.example.com\n");
    let out = bin().args(["anma", "--addresses"]).arg(&path).output().unwrap();
    assert_eq!(out.status.code(), Some(3));
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains(&format!("{}:4:", path.display())) && err.contains("www.example.com"), "{err}");
    let missing = bin().args(["anma", "--addresses", "/nonexistent/dualbench.txt"]).output().unwrap();
    assert_eq!(missing.status.code(), Some(3));
    let bad_url = bin().args(["load", "--url", "http://localhost/", "--rate", "1", "--fetches", "1"]).output().unwrap();
    assert_eq!(bad_url.status.code(), Some(3));
    let usage = bin().args(["load", "--url", "http://127.0.0.1/"]).output().unwrap();
    assert_eq!(usage.status.code(), Some(2), "neither --rate/--parallel nor a bound");
    cleanup(&path);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anma_json_has_per_family_counts() {
    let v6 = start("[::1]:0", Behaviour::Serve(4096)).await;
    let v4 = start("127.0.0.1:0", Behaviour::Serve(4096)).await;
    let addrs = temp_file("json", "ab.txt", &format!("[::1]:{}\n[::1]:{}\n127.0.0.1:{}\n", v6.addr.port(), v6.addr.port(), v4.addr.port()));
    let json = addrs.with_extension("json");
    let mut cmd = bin();
    cmd.args(["anma", "--path", "/x", "--requests", "90", "--concurrency", "9", "--threads", "1", "--addresses"])
        .arg(&addrs)
        .arg("--json")
        .arg(&json);
    let out = tokio::task::spawn_blocking(move || cmd.output().unwrap()).await.unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(doc["families"]["v6"]["normal"], 60);
    assert_eq!(doc["families"]["v4"]["normal"], 30);
    assert_eq!(doc["families"]["all"]["requests"], 90);
    assert_eq!(doc["config"]["entries_v6"], 2);
    assert!(doc["families"]["v6"]["connect_us"]["avg"].as_f64().unwrap() > 0.0);
    cleanup(&json);
    let table = String::from_utf8(out.stdout).unwrap();
    assert!(table.lines().any(|l| l.starts_with("v6") && l.contains(" 60 ")), "{table}");
}
