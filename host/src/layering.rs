//! The sandbox core's modules in layers: each imports only modules below it, so that none of
//! them can be understood only together with one that depends on it. A module that needs
//! something from a layer above wants that thing moved down (as the store's data was, into
//! `store`), not an import upwards.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Bottom first. The crate's re-exports of other crates (`config`, `durable`, `strip`, …) are
/// not modules of this crate and may be named from anywhere.
const LAYERS: &[&str] = &[
    "wire",
    "interruption",
    "store",
    "meter",
    "bridge",
    "preinit",
    "engine",
    "run",
    "runtime",
    "preparing",
    "builtins",
];

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read the sources") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The crate's own modules a file names (`crate::x`), outside comments and its tests.
fn named(text: &str) -> BTreeSet<String> {
    let code = text.split("#[cfg(test)]\nmod tests").next().unwrap_or(text);
    let mut found = BTreeSet::new();
    for line in code.lines().filter(|l| !l.trim_start().starts_with("//")) {
        for (at, _) in line.match_indices("crate::") {
            let rest = &line[at + "crate::".len()..];
            if let Some(group) = rest.strip_prefix('{') {
                let group = group.split('}').next().unwrap_or_default();
                found.extend(group.split(',').filter_map(|item| {
                    let head = item.trim().split("::").next()?;
                    Some(head.to_owned())
                }));
            } else {
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                    .collect();
                found.insert(name);
            }
        }
    }
    found
}

#[test]
fn each_module_imports_only_modules_below_it() {
    let root = crate::manifest_dir().join("src");
    let mut files = Vec::new();
    sources(&root, &mut files);
    let mut wrong = Vec::new();
    for file in files {
        let relative = file.strip_prefix(&root).expect("under src");
        let module = relative
            .components()
            .next()
            .and_then(|c| c.as_os_str().to_str())
            .map(|c| c.trim_end_matches(".rs").to_owned())
            .expect("a module name");
        let Some(level) = LAYERS.iter().position(|l| *l == module) else {
            continue;
        };
        let text = std::fs::read_to_string(&file).expect("read a source");
        for other in named(&text) {
            if let Some(other_level) = LAYERS.iter().position(|l| *l == other) {
                if other_level > level {
                    wrong.push(format!("{} imports {other}", relative.display()));
                }
            }
        }
    }
    assert!(wrong.is_empty(), "imports upwards: {wrong:#?}");
}

#[test]
fn every_module_of_the_core_has_a_layer() {
    let root = crate::manifest_dir().join("src");
    let lib = std::fs::read_to_string(root.join("lib.rs")).expect("read lib.rs");
    for line in lib.lines() {
        let Some(name) = line
            .trim_start_matches("pub ")
            .strip_prefix("mod ")
            .and_then(|rest| rest.strip_suffix(';'))
        else {
            continue;
        };
        if name == "documented_limits" || name == "layering" {
            continue;
        }
        assert!(
            LAYERS.contains(&name),
            "module {name} has no layer in LAYERS"
        );
    }
}
