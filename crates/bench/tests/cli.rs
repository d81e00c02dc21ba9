//! The `mpstack-bench` program as its users run it: `bench tcp` with tiny parameters
//! (JSON out, each in-process row in a child of its own), and the errors. `mpstack
//! bench`'s exec of this program is tested in crates/mpstack/tests/bench_command.rs.

use std::process::Command;

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
