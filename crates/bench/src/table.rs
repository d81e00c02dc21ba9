//! Where the benchmarks' BGP table comes from. `bench lpm`, `forward` and `router` route
//! on a full table of `prefix/len origin-AS` lines (`route::table` parses them); none is
//! part of this repository. The first of these that is given is used:
//!
//! 1. `--table PATH`;
//! 2. the environment variable `MPSTACK_BGP_TABLE`, a path (empty counts as unset);
//! 3. `benches/bgpas.lpm` of the crate iptrie 0.11.2 in cargo's registry sources,
//!    `$CARGO_HOME/registry/src/*/iptrie-0.11.2/benches/bgpas.lpm` (`CARGO_HOME` is
//!    `~/.cargo` unless set): 1,072,529 IPv4 and 176,388 IPv6 prefixes. mpstack-bench
//!    depends on iptrie for that file alone, so `cargo fetch` (or any build of the
//!    workspace) brings it. With several registries, the first in name order that
//!    has it.
//!
//! A path from 1 or 2 is used as given: if it cannot be read, the benchmark fails
//! rather than quietly measuring another table. With none of the three, the benchmarks
//! fall back to synthetic tables with a BGP-like mix of prefix lengths and say so,
//! with [`NotFound`]'s text: what was looked at and how to get the real table. The
//! benchmarks print the path and which of the three gave it.
//!
//! This module reads the environment and lists directories; it calls nothing else.

use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};

/// The environment variable naming a table (step 2).
pub const ENV: &str = "MPSTACK_BGP_TABLE";

/// The table iptrie 0.11.2 ships, relative to a registry's source folder (step 3).
pub const IN_REGISTRY: &str = "iptrie-0.11.2/benches/bgpas.lpm";

/// Which step found the table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    Flag,
    Env,
    Registry,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Origin::Flag => "--table",
            Origin::Env => "$MPSTACK_BGP_TABLE",
            Origin::Registry => "cargo's registry sources",
        })
    }
}

/// A table to read, and which step named it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Found {
    pub path: PathBuf,
    pub origin: Origin,
}

impl Found {
    /// The path as the benchmarks print and record it: as given for `--table` and the
    /// environment; for the registry, with the registry's own folder (which names the
    /// host it was fetched from) written as `*`, so that recorded results say which
    /// file without saying where cargo fetched it.
    pub fn shown(&self) -> String {
        match self.origin {
            Origin::Flag | Origin::Env => self.path.display().to_string(),
            Origin::Registry => format!("$CARGO_HOME/registry/src/*/{IN_REGISTRY}"),
        }
    }
}

/// No step gave a table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NotFound {
    /// The registry source folder searched (`$CARGO_HOME/registry/src`); `None` when
    /// neither `CARGO_HOME` nor `HOME` is set.
    pub registry: Option<PathBuf>,
}

impl fmt::Display for NotFound {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "no BGP table: no --table, {ENV} not set, and ")?;
        match &self.registry {
            Some(src) => write!(f, "no {IN_REGISTRY} under {}/*/", src.display())?,
            None => write!(
                f,
                "neither CARGO_HOME nor HOME set to find cargo's registry"
            )?,
        }
        write!(
            f,
            " (`cargo fetch` in the mpstack workspace brings it, or pass --table PATH)"
        )
    }
}

impl std::error::Error for NotFound {}

/// The table the benchmarks use: `flag` (`--table`), else the environment's, else the
/// registry's (see the module doc).
pub fn find(flag: Option<&Path>) -> Result<Found, NotFound> {
    find_with(flag, &|name| std::env::var_os(name))
}

/// [`find`], with the environment read through `env` (so that tests need not change
/// the process's).
pub fn find_with(
    flag: Option<&Path>,
    env: &dyn Fn(&str) -> Option<OsString>,
) -> Result<Found, NotFound> {
    let set = |name: &str| env(name).filter(|v| !v.is_empty());
    if let Some(path) = flag {
        return Ok(Found {
            path: path.to_path_buf(),
            origin: Origin::Flag,
        });
    }
    if let Some(path) = set(ENV) {
        return Ok(Found {
            path: path.into(),
            origin: Origin::Env,
        });
    }
    let src = set("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| set("HOME").map(|h| Path::new(&h).join(".cargo")))
        .map(|home| home.join("registry").join("src"));
    let in_registry = src.as_deref().and_then(|src| {
        let mut registries: Vec<PathBuf> = std::fs::read_dir(src)
            .ok()?
            .flatten()
            .map(|d| d.path())
            .collect();
        registries.sort();
        registries
            .into_iter()
            .map(|r| r.join(IN_REGISTRY))
            .find(|p| p.is_file())
    });
    match in_registry {
        Some(path) => Ok(Found {
            path,
            origin: Origin::Registry,
        }),
        None => Err(NotFound { registry: src }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// A fresh, empty directory under the system's temporary one.
    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("mpstack-bench-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    /// A cargo home whose registry `index` holds the table.
    fn cargo_home_with_table(root: &Path, index: &str) -> PathBuf {
        let home = root.join("cargo");
        let file = home.join("registry/src").join(index).join(IN_REGISTRY);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(&file, "1.0.0.0/24 13335\n").unwrap();
        file
    }

    fn env_of(vars: &[(&str, &Path)]) -> impl Fn(&str) -> Option<OsString> {
        let m: HashMap<String, OsString> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.as_os_str().to_owned()))
            .collect();
        move |k| m.get(k).cloned()
    }

    #[test]
    fn the_flag_comes_before_the_environment_and_the_registry() {
        let root = scratch("flag");
        let in_registry = cargo_home_with_table(&root, "index.example-1");
        let env = env_of(&[
            (ENV, Path::new("/from/env.lpm")),
            ("CARGO_HOME", &root.join("cargo")),
        ]);
        let given = Path::new("/from/flag.lpm");
        let f = find_with(Some(given), &env).unwrap();
        assert_eq!((f.path.as_path(), f.origin), (given, Origin::Flag));
        let f = find_with(None, &env).unwrap();
        assert_eq!(
            (f.path.as_path(), f.origin),
            (Path::new("/from/env.lpm"), Origin::Env)
        );
        let env = env_of(&[("CARGO_HOME", &root.join("cargo"))]);
        let f = find_with(None, &env).unwrap();
        assert_eq!((&f.path, f.origin), (&in_registry, Origin::Registry));
        // Recorded results name the file, not the registry's folder (its host).
        assert_eq!(
            f.shown(),
            "$CARGO_HOME/registry/src/*/iptrie-0.11.2/benches/bgpas.lpm"
        );
        std::fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn a_named_path_is_taken_as_given_even_if_missing() {
        // A typo must fail the benchmark when it reads the file, not fall through.
        let root = scratch("missing");
        cargo_home_with_table(&root, "index.example-1");
        let missing = root.join("no-such.lpm");
        let env = env_of(&[(ENV, &missing), ("CARGO_HOME", &root.join("cargo"))]);
        let f = find_with(None, &env).unwrap();
        assert_eq!((f.path, f.origin), (missing, Origin::Env));
        std::fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn an_empty_variable_counts_as_unset() {
        let root = scratch("empty");
        let in_registry = cargo_home_with_table(&root, "index.example-1");
        let env = env_of(&[(ENV, Path::new("")), ("CARGO_HOME", &root.join("cargo"))]);
        let f = find_with(None, &env).unwrap();
        assert_eq!((f.path, f.origin), (in_registry, Origin::Registry));
        std::fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn cargo_home_defaults_to_dot_cargo_in_home() {
        let root = scratch("home");
        let home = root.join("user");
        let file = home
            .join(".cargo/registry/src/index.example-1")
            .join(IN_REGISTRY);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(&file, "1.0.0.0/24 13335\n").unwrap();
        let f = find_with(None, &env_of(&[("HOME", &home)])).unwrap();
        assert_eq!((f.path, f.origin), (file, Origin::Registry));
        // CARGO_HOME, when set, is where cargo looks, so it is where we look.
        let elsewhere = root.join("elsewhere");
        let e = find_with(
            None,
            &env_of(&[("HOME", &home), ("CARGO_HOME", &elsewhere)]),
        )
        .unwrap_err();
        assert_eq!(e.registry, Some(elsewhere.join("registry/src")));
        std::fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn of_several_registries_the_first_by_name_that_has_it() {
        let root = scratch("several");
        let b = cargo_home_with_table(&root, "index.b");
        std::fs::create_dir_all(root.join("cargo/registry/src/index.0-empty")).unwrap();
        let env = env_of(&[("CARGO_HOME", &root.join("cargo"))]);
        assert_eq!(find_with(None, &env).unwrap().path, b);
        let a = cargo_home_with_table(&root, "index.a");
        assert_eq!(find_with(None, &env).unwrap().path, a);
        std::fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn nothing_found_says_where_it_looked_and_what_to_do() {
        let root = scratch("none");
        let env = env_of(&[("CARGO_HOME", &root)]);
        let e = find_with(None, &env).unwrap_err();
        assert_eq!(e.registry, Some(root.join("registry/src")));
        let text = e.to_string();
        for want in [
            "no --table",
            ENV,
            IN_REGISTRY,
            &root.join("registry/src").display().to_string(),
            "cargo fetch",
        ] {
            assert!(text.contains(want), "{want:?} not in {text:?}");
        }
        let e = find_with(None, &|_| None).unwrap_err();
        assert_eq!(e.registry, None);
        assert!(e.to_string().contains("neither CARGO_HOME nor HOME"), "{e}");
        std::fs::remove_dir_all(root).unwrap();
    }

    /// Every fast structure against the radix tree on the real table, for every
    /// prefix's first, last and a middle address, and for random keys: the table the
    /// benchmarks time them on, so a wrong answer there is caught here first. Skipped,
    /// with a message, when no table is found (the only test here that reads the
    /// real environment and registry).
    #[test]
    fn fast_structures_agree_with_radix_on_the_real_table() {
        let _quiet = crate::bench::heap_quiet();
        use route::{table, Addr, Lookup, Poptrie4, Poptrie6, Radix};
        let found = match find(None) {
            Ok(f) => f,
            Err(e) => {
                eprintln!("SKIPPED: {e}");
                return;
            }
        };
        let path = found.path;
        let text = std::fs::read_to_string(&path).expect("read the table");
        let t = table::parse(&text).expect("parse the table");
        if found.origin == Origin::Registry {
            assert!(t.v4.len() > 1_000_000 && t.v6.len() > 170_000, "{path:?}");
        }

        fn check<L: Lookup>(radix: &Radix<L::Addr>, fast: &L, keys: &[L::Addr]) {
            for &k in keys {
                assert_eq!(fast.lookup(k), radix.lookup(k), "key {k:?}");
            }
            let mut out = vec![None; keys.len()];
            fast.lookup_batch(keys, &mut out);
            for (&k, &got) in keys.iter().zip(&out) {
                assert_eq!(got, radix.lookup(k), "key {k:?}, batched");
            }
        }
        let mut rng = 0x1234_5678_9abc_def0u64;
        let mut next = move || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        let radix = Radix::build(&t.v4);
        let mut k4: Vec<u32> = (0..200_000).map(|_| next() as u32).collect();
        for &(p, _) in &t.v4 {
            let host = !u32::MAX.masked(p.len);
            k4.extend([p.addr, p.addr | host, p.addr | (host & next() as u32)]);
        }
        check(&radix, &Poptrie4::build(&t.v4), &k4);

        let radix = Radix::build(&t.v6);
        let mut k6: Vec<u128> = (0..200_000)
            .map(|_| (1 << 125) | ((next() as u128) << 64 | next() as u128) >> 3)
            .collect();
        for &(p, _) in &t.v6 {
            let host = !u128::MAX.masked(p.len);
            let r = (next() as u128) << 64 | next() as u128;
            k6.extend([p.addr, p.addr | host, p.addr | (host & r)]);
        }
        check(&radix, &Poptrie6::build(&t.v6), &k6);
    }
}
