//! The `mpstack-bench` program as its users run it: `bench tcp` with tiny parameters
//! (JSON out, each in-process row in a child of its own), `bench lpm` on a small table
//! found by each step of the table search, and the errors. `mpstack bench`'s exec of
//! this program is tested in crates/mpstack/tests/bench_command.rs.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Runs `mpstack-bench ARGS`, asserts success, returns its standard output.
fn bench_ok(args: &[&str]) -> String {
    let o = Command::new(env!("CARGO_BIN_EXE_mpstack-bench"))
        .args(args)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        o.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    out
}

#[test]
fn bench_tcp_runs_and_prints_json() {
    let out = bench_ok(&[
        "tcp",
        "--mbytes",
        "4",
        "--rounds",
        "1",
        "--json",
        "--only",
        "mpstack,smoltcp,linux-loopback,linux-veth",
    ]);
    let lines: Vec<&str> = out.lines().collect();
    // One round: mpstack, smoltcp, linux-loopback, then linux-veth measured or skipped
    // (it needs root and iperf3), then a ratio per peer measured.
    assert!(
        lines[0].contains("\"impl\":\"mpstack\"") && lines[0].contains("\"bytes\":4194304"),
        "{out}"
    );
    assert!(
        lines[1].contains("\"impl\":\"smoltcp\"") && lines[1].contains("\"bytes\":4194304"),
        "{out}"
    );
    assert!(lines[2].contains("\"impl\":\"linux-loopback\""), "{out}");
    assert!(lines[3].contains("\"impl\":\"linux-veth\""), "{out}");
    let veth_ran = !lines[3].contains("\"skipped\"");
    assert_eq!(lines.len(), if veth_ran { 7 } else { 6 }, "{out}");
    assert!(out.contains("\"ratio_mpstack_to_smoltcp\""), "{out}");
    assert!(out.contains("\"ratio_mpstack_to_linux_loopback\""), "{out}");
    assert_eq!(
        out.contains("\"ratio_mpstack_to_linux_veth\""),
        veth_ran,
        "{out}"
    );
    // The connection figures, small.
    let out = bench_ok(&[
        "tcp",
        "--json",
        "--only",
        "conns,idle",
        "--conns-secs",
        "0.3",
        "--idle-conns",
        "300",
    ]);
    assert!(
        out.contains("\"what\":\"conns_per_s\",\"impl\":\"mpstack\""),
        "{out}"
    );
    assert!(out.contains("\"what\":\"idle_conn_bytes\""), "{out}");
    assert!(out.contains("\"connections\":300"), "{out}");
    // The rows above ran in child processes of their own; only those rows can.
    let o = Command::new(env!("CARGO_BIN_EXE_mpstack-bench"))
        .args(["tcp", "--child", "conns"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("not an in-process row"));
    let o = Command::new(env!("CARGO_BIN_EXE_mpstack-bench"))
        .args(["nonsense"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("unknown benchmark"));
}

/// A small table in the temporary directory: `n` IPv4 and `n / 4` IPv6 prefixes.
fn small_table(name: &str, n: u32) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("mpstack-bench-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    let mut text = String::new();
    for i in 0..n {
        text += &format!(
            "{}.{}.{}.0/24 {}\n",
            1 + i / 65536,
            i / 256 % 256,
            i % 256,
            64500 + i % 7
        );
    }
    for i in 0..n / 4 {
        text += &format!("2001:db8:{i:x}::/48 {}\n", 64500 + i % 7);
    }
    std::fs::write(&path, text).unwrap();
    path
}

/// `mpstack-bench lpm ARGS` (a small, quick run) with the environment `env` on top of
/// one without the table variable, and with an empty cargo home: the registry step
/// finds nothing, whatever this machine's registry holds.
fn lpm(args: &[&str], env: &[(&str, &Path)]) -> Output {
    let empty = std::env::temp_dir().join(format!("mpstack-bench-cli-{}-home", std::process::id()));
    std::fs::create_dir_all(&empty).unwrap();
    let mut c = Command::new(env!("CARGO_BIN_EXE_mpstack-bench"));
    c.arg("lpm")
        .args(["--lookups", "2000", "--rounds", "1"])
        .args(args)
        .env_remove("MPSTACK_BGP_TABLE")
        .env("CARGO_HOME", &empty)
        .env("HOME", &empty);
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap()
}

#[test]
fn bench_lpm_reads_the_table_each_step_names() {
    let from_env = small_table("env.lpm", 600);
    let from_flag = small_table("flag.lpm", 400);
    let env = [("MPSTACK_BGP_TABLE", from_env.as_path())];

    // The variable alone: its table, and the progress line says where it came from.
    let o = lpm(&[], &env);
    let (out, err) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    assert!(o.status.success(), "{out}{err}");
    assert!(
        err.contains(&format!(
            "reading {} (from $MPSTACK_BGP_TABLE)",
            from_env.display()
        )),
        "{err}"
    );
    assert!(out.contains("600 prefixes from"), "{out}");
    // The slow peers are left out by default, in the table, with the reason.
    assert!(out.contains("skipped (slow: "), "{out}");
    assert!(out.contains("; --slow-peers)"), "{out}");

    // --table before the variable; JSON names the file and lists the skipped peers.
    let flag = from_flag.to_str().unwrap();
    let o = lpm(&["--table", flag, "--json"], &env);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let lines: Vec<&str> = out.lines().collect();
    assert!(
        lines
            .iter()
            .all(|l| l.contains(&format!("\"table\":\"{flag}\""))),
        "{out}"
    );
    assert!(out.contains("\"prefixes\":400"), "{out}");
    let skipped: Vec<&&str> = lines.iter().filter(|l| l.contains("\"skipped\"")).collect();
    assert_eq!(skipped.len(), 2, "{out}");
    assert!(
        skipped[0].contains("\"skip_name\":\"poptrie-crate\""),
        "{out}"
    );
    assert!(
        skipped[1].contains("\"skip_name\":\"poptrie-crate6\""),
        "{out}"
    );

    // --slow-peers measures them (quick on a small table).
    let o = lpm(&["--table", flag, "--json", "--slow-peers"], &[]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{out}");
    assert!(!out.contains("\"skipped\""), "{out}");
    assert!(
        out.contains("\"skip_name\":\"poptrie-crate\",\"table\""),
        "{out}"
    );

    // A table named but missing is an error, not a fallback.
    let missing = from_env.with_file_name("missing.lpm");
    let o = lpm(&[], &[("MPSTACK_BGP_TABLE", missing.as_path())]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&format!("{} (from $MPSTACK_BGP_TABLE)", missing.display())),
        "{err}"
    );
}

#[test]
fn bench_lpm_without_a_table_says_so_and_uses_synthetic_ones() {
    // Both families skipped: the table is looked for and made, nothing timed.
    let o = lpm(&["--skip", "ipv4,ipv6"], &[]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("no BGP table: no --table, MPSTACK_BGP_TABLE not set"),
        "{err}"
    );
    assert!(err.contains("cargo fetch"), "{err}");
    assert!(err.contains("synthetic tables of 900000 IPv4"), "{err}");
}

#[test]
fn help_says_how_the_table_is_found_and_how_to_run() {
    let o = Command::new(env!("CARGO_BIN_EXE_mpstack-bench"))
        .arg("--help")
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{out}");
    for want in [
        "$MPSTACK_BGP_TABLE",
        "bgpas.lpm",
        "--slow-peers",
        "mpstack bench WHAT",
    ] {
        assert!(out.contains(want), "{want:?} not in {out}");
    }
}

/// `bench rfc2544` end to end, as short as it goes: one frame size, 50 ms trials.
/// Every device gives a throughput row, the devices a loss curve and a back-to-back
/// figure, the bridges RFC 2889's four results. Needs root (namespaces, veth) and
/// the `mpstack` program beside this one (`cargo test --workspace` builds both);
/// without them it says why and passes, except in CI, where it fails.
#[test]
fn bench_rfc2544_runs_every_device_end_to_end() {
    let exe = PathBuf::from(env!("CARGO_BIN_EXE_mpstack-bench"));
    let ci = std::env::var_os("CI").is_some();
    if !exe.with_file_name("mpstack").exists() {
        assert!(!ci, "the mpstack program is not built beside mpstack-bench");
        eprintln!("SKIPPED: no mpstack program beside mpstack-bench (cargo build --workspace)");
        return;
    }
    let out = bench_ok(&["rfc2544", "--sizes", "64", "--seconds", "0.05", "--json"]);
    if out.contains("\"skipped\"") {
        assert!(!ci, "bench rfc2544 could not run in CI: {out}");
        eprintln!("SKIPPED: {out}");
        return;
    }
    let has = |needle: &str| out.lines().filter(|l| l.contains(needle)).count();
    // The JSON object of `test` for `case`.
    let row = |test: &str, case: &str| {
        out.lines()
            .find(|l| {
                l.contains(&format!("\"test\":\"{test}\""))
                    && l.contains(&format!("\"case\":\"{case}\""))
            })
            .unwrap_or_else(|| panic!("no {test} row for {case}:\n{out}"))
    };
    for case in [
        "tester",
        "linux-router",
        "mpstack-router",
        "linux-bridge",
        "mpstack-bridge",
    ] {
        let row = row("throughput", case);
        assert!(
            !row.contains("\"throughput_fps\":0,"),
            "{case} forwarded nothing without loss: {row}"
        );
        if case != "tester" {
            assert!(
                has(&format!("\"test\":\"frame_loss\",\"case\":\"{case}\"")) >= 1,
                "{case}: no loss curve\n{out}"
            );
            assert_eq!(
                has(&format!("\"test\":\"back_to_back\",\"case\":\"{case}\"")),
                1,
                "{case}: no back-to-back figure\n{out}"
            );
        }
    }
    for case in ["linux-bridge", "mpstack-bridge"] {
        assert_eq!(
            has(&format!("\"bench\":\"rfc2889\",\"case\":\"{case}\"")),
            1,
            "{case}: no RFC 2889 results\n{out}"
        );
    }
    // The routers on one CPU, and the AF_PACKET device layer alone beside them:
    // each forwarded frames.
    for case in ["linux-router", "device-layer", "mpstack-router"] {
        let row = row("one_core", case);
        assert!(
            !row.contains("\"forwarded_fps\":0,"),
            "{case} forwarded nothing on one core: {row}"
        );
    }
}

#[test]
fn bench_loss_prints_a_json_object_per_point_and_plots_them() {
    let svg = std::env::temp_dir().join(format!("mpstack-loss-{}.svg", std::process::id()));
    let out = bench_ok(&[
        "loss",
        "--loss",
        "0,2",
        "--sim-secs",
        "0.3",
        "--rounds",
        "1",
        "--skip",
        "newreno",
        "--json",
        "--plot",
        svg.to_str().unwrap(),
    ]);
    let lines: Vec<&str> = out.lines().collect();
    // Two controls at two loss rates, then the model at each rate.
    assert_eq!(lines.len(), 6, "{out}");
    assert!(
        lines[0].contains("\"cc\":\"cubic\"") && lines[0].contains("\"loss_pct\":0,"),
        "{out}"
    );
    assert!(
        lines[3].contains("\"cc\":\"bbr\"") && lines[3].contains("\"mathis_mbps\":"),
        "{out}"
    );
    assert!(
        lines[5].contains("\"model\":\"mathis\"") && lines[5].contains("\"loss_pct\":2,"),
        "{out}"
    );
    let text = std::fs::read_to_string(&svg).unwrap();
    std::fs::remove_file(&svg).unwrap();
    assert!(text.trim_start().starts_with("<svg") && text.contains("mpstack bbr"));
}
