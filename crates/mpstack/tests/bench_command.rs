//! `mpstack bench`: it runs the `mpstack-bench` beside it with the arguments unchanged
//! and takes its exit status; without one there, it says how to build it. A copy of
//! `mpstack` in a directory of its own stands in for target/release, with a shell
//! script as the bench program (the real one is tested in crates/bench/tests/cli.rs).

use std::path::PathBuf;
use std::process::Command;

/// A fresh directory holding a copy of the `mpstack` binary; returns it and the copy.
fn lone_mpstack() -> (PathBuf, PathBuf) {
    let dir = std::env::temp_dir().join(format!("mpstack-bench-command-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let exe = dir.join("mpstack");
    std::fs::copy(env!("CARGO_BIN_EXE_mpstack"), &exe).unwrap();
    (dir, exe)
}

// One test: a second one writing its script while this one forks could leave the
// script open for writing in a child, and exec would fail with ETXTBSY.
#[test]
fn bench_runs_mpstack_bench_beside_it_or_says_how_to_build_it() {
    let (dir, mpstack) = lone_mpstack();

    let o = Command::new(&mpstack)
        .args(["bench", "lpm"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    let want = format!("{} not found", dir.join("mpstack-bench").display());
    assert!(err.contains(&want), "{err}");
    assert!(
        err.contains("cargo build --release -p mpstack-bench"),
        "{err}"
    );

    // A stand-in that writes its arguments, one a line, and exits 7.
    let args = dir.join("args");
    let script = format!(
        "#!/bin/sh\nprintf '%s\\n' \"$@\" > '{}'\nexit 7\n",
        args.display()
    );
    let bench = dir.join("mpstack-bench");
    std::fs::write(&bench, script).unwrap();
    let mut perm = std::fs::metadata(&bench).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o755);
    std::fs::set_permissions(&bench, perm).unwrap();

    let given = ["lpm", "--skip", "a b,c", "--help", "-x", "--", "--json"];
    let o = Command::new(&mpstack)
        .arg("bench")
        .args(given)
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(7),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let passed = std::fs::read_to_string(&args).unwrap();
    assert_eq!(passed.lines().collect::<Vec<_>>(), given);

    // `--help` alone is the bench program's, not a summary of mpstack's own.
    let o = Command::new(&mpstack)
        .args(["bench", "--help"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(7));
    assert_eq!(std::fs::read_to_string(&args).unwrap(), "--help\n");
    std::fs::remove_dir_all(dir).unwrap();
}
