//! Boa as the guest runs it: the registry's Boa crates with the patches in
//! `guest/patches/<crate>/*.patch` applied, in order (today `boa_engine`, `boa_gc`, `boa_ast`,
//! `boa_string`, `boa_parser` and `boa_interner`).
//!
//! Each patch opens with a `Subject:` line and the why of the change, and an `Upstreamable:`
//! line (checked here) saying whether it could go upstream as it is; `guest/patches/README.md`
//! indexes them (what each changes and why, whether it could go upstream, what tests it). They
//! are applied at build time to a copy of the pristine source that cargo fetched for the
//! guest's lock file, so that the repository carries patches, never a fork: build machines
//! reach the package registries, not a git host.
//! The guest is then built from a generated manifest (the guest's, with absolute paths and a
//! `[patch.crates-io]` entry per patched crate) beside a copy of the guest's lock file; the
//! guest's own directory is never written to. After the build, the lock cargo wrote must name
//! exactly the packages the guest's lock pins, so the patches cannot move any other version.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest, Sha256};

/// Where the patched sources are, and the generated manifest to build the guest with.
pub struct Prepared {
    pub manifest: PathBuf,
    pub patches: PathBuf,
    /// The patched crates' names.
    pub crates: Vec<String>,
    /// Their copies' directory names (name, version and patches' hash), joined: the patch set.
    pub patch_set: String,
}

/// One patched crate: its name and where its patched copy is.
struct Patched {
    name: String,
    dir: PathBuf,
}

/// Prepares every patched crate and the manifest that uses them, under `work` (in the guest's
/// target directory). `cargo` is the cargo to ask for the pristine sources.
pub fn prepare(cargo: &Path, guest_dir: &Path, work: &Path) -> Prepared {
    let patches_root = guest_dir.join("patches");
    let sources = pristine_sources(cargo, guest_dir);
    let mut crates = Vec::new();
    for name in patched_crates(&patches_root) {
        let patches = read_patches(&patches_root.join(&name));
        let Some(pristine) = sources.iter().find(|s| s.name == name) else {
            panic!("guest/patches/{name} patches a crate the guest's lock does not have");
        };
        let version = &pristine.version;
        let dir = work.join(format!("{name}-{version}-{}", key(version, &patches)));
        if !dir.join(COMPLETE).is_file() {
            apply_all(&pristine.dir, &dir, &name, &patches);
        }
        crates.push(Patched { name, dir });
    }

    let manifest_dir = work.join("guest");
    fs::create_dir_all(&manifest_dir).expect("create the generated guest manifest's directory");
    let manifest = manifest_dir.join("Cargo.toml");
    write_if_changed(&manifest, &generated_manifest(guest_dir, &crates));
    // The guest's lock is the source of truth; cargo rewrites only the patched crates' entries.
    let lock = fs::read_to_string(guest_dir.join("Cargo.lock")).expect("read guest/Cargo.lock");
    write_if_changed(&manifest_dir.join("Cargo.lock"), &lock);
    let patch_set = crates
        .iter()
        .filter_map(|c| c.dir.file_name()?.to_str())
        .collect::<Vec<_>>()
        .join(" ");
    Prepared {
        manifest,
        patches: patches_root,
        crates: crates.into_iter().map(|c| c.name).collect(),
        patch_set,
    }
}

/// What names a patched copy: the version and every patch, so a change to either makes a new one.
fn key(version: &str, patches: &[(String, String)]) -> String {
    let mut digest = Sha256::new();
    digest.update(version.as_bytes());
    for (file, text) in patches {
        digest.update(file.as_bytes());
        digest.update([0]);
        digest.update(text.as_bytes());
        digest.update([0]);
    }
    digest.finalize()[..8]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The crates `guest/patches` has a directory of patches for, in name order.
fn patched_crates(root: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(root)
        .unwrap_or_else(|e| panic!("read {}: {e}", root.display()))
        .map(|entry| entry.expect("read a patch directory entry"))
        .filter(|entry| entry.file_type().is_ok_and(|kind| kind.is_dir()))
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// Marks a patched tree as whole: a build interrupted while copying or patching starts over.
const COMPLETE: &str = ".codemode-patched";

fn read_patches(dir: &Path) -> Vec<(String, String)> {
    let mut patches: Vec<(String, String)> = fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
        .map(|entry| entry.expect("read a patch directory entry").path())
        .filter(|path| path.extension().is_some_and(|x| x == "patch"))
        .map(|path| {
            let name = path
                .file_name()
                .expect("a listed file has a name")
                .to_string_lossy()
                .into_owned();
            let text = fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
            // Every patch says what it changes and whether it could go upstream, before its diff.
            let preamble = text.split("\ndiff --git").next().unwrap_or_default();
            for field in ["Subject:", "Upstreamable:"] {
                assert!(
                    preamble.lines().any(|line| line.starts_with(field)),
                    "{} has no `{field}` line before its diff (each patch states what it changes and whether it is upstreamable)",
                    path.display()
                );
            }
            (name, text)
        })
        .collect();
    patches.sort();
    patches
}

/// A registry package of the guest's lock, unpacked by cargo.
struct Pristine {
    name: String,
    version: String,
    dir: PathBuf,
}

/// Every registry package of the guest's lock and the directory cargo unpacked it to
/// (fetching it first when it is not there yet, as a build would).
fn pristine_sources(cargo: &Path, guest_dir: &Path) -> Vec<Pristine> {
    let metadata = |network: &[&str]| {
        Command::new(cargo)
            .args(["metadata", "--format-version", "1", "--locked"])
            .args(network)
            .args(["--filter-platform", "wasm32-wasip1"])
            .arg("--manifest-path")
            .arg(guest_dir.join("Cargo.toml"))
            .env_remove("CARGO_TARGET_DIR")
            .output()
            .expect("could not start cargo to locate the guest's dependencies")
    };
    // Offline first: once the sources are unpacked (every build after the first, and machines
    // that reach only a registry mirror) no index is consulted. The first build fetches them.
    let offline = metadata(&["--offline"]);
    let output = if offline.status.success() {
        offline
    } else {
        metadata(&[])
    };
    assert!(
        output.status.success(),
        "`cargo metadata` for the guest failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let metadata: serde_json::Value =
        serde_json::from_slice(&output.stdout).expect("`cargo metadata` prints JSON");
    metadata["packages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| p["source"].is_string())
        .filter_map(|p| {
            Some(Pristine {
                name: p["name"].as_str()?.to_owned(),
                version: p["version"].as_str()?.to_owned(),
                dir: PathBuf::from(p["manifest_path"].as_str()?)
                    .parent()?
                    .to_path_buf(),
            })
        })
        .collect()
}

fn apply_all(pristine: &Path, patched: &Path, krate: &str, patches: &[(String, String)]) {
    if patched.exists() {
        fs::remove_dir_all(patched)
            .unwrap_or_else(|e| panic!("remove the stale {}: {e}", patched.display()));
    }
    copy_tree(pristine, patched);
    for (name, text) in patches {
        apply(patched, krate, name, text);
    }
    fs::write(patched.join(COMPLETE), "").expect("mark the patched source complete");
}

fn copy_tree(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap_or_else(|e| panic!("create {}: {e}", to.display()));
    for entry in fs::read_dir(from).unwrap_or_else(|e| panic!("read {}: {e}", from.display())) {
        let entry = entry.expect("read a source directory entry");
        let kind = entry.file_type().expect("a directory entry has a type");
        let target = to.join(entry.file_name());
        if kind.is_dir() {
            copy_tree(&entry.path(), &target);
        } else if kind.is_file() {
            fs::copy(entry.path(), &target)
                .unwrap_or_else(|e| panic!("copy {}: {e}", entry.path().display()));
        }
    }
}

/// Applies one patch file (an optional description, then a `git diff`) to the tree at `root`,
/// a copy of `krate`.
fn apply(root: &Path, krate: &str, name: &str, text: &str) {
    use diffy::patch_set::{FileOperation, ParseOptions, PatchSet};

    let diff = text
        .find("diff --git ")
        .map(|start| &text[start..])
        .unwrap_or_else(|| panic!("patch {name} holds no `diff --git`"));
    let mut files = 0;
    for file in PatchSet::parse(diff, ParseOptions::gitdiff()) {
        let file = file.unwrap_or_else(|e| panic!("patch {name} does not parse: {e}"));
        let (path, created) = match file.operation().strip_prefix(1) {
            FileOperation::Modify { original, modified } if original == modified => {
                (original.into_owned(), false)
            }
            FileOperation::Create(path) => (path.into_owned(), true),
            _ => panic!("patch {name}: only in-place modifications and new files are supported"),
        };
        let Some(patch) = file.patch().as_text() else {
            panic!("patch {name}: {path} is a binary patch");
        };
        assert!(
            Path::new(&path)
                .components()
                .all(|c| matches!(c, std::path::Component::Normal(_))),
            "patch {name} names {path}, which is not a path inside the crate"
        );
        let target = root.join(&path);
        let base = if created {
            // A new file must be new: a patch that creates a file the crate already has was
            // written against another version of it.
            assert!(
                !target.exists(),
                "patch {name} creates {path}, which {krate} already has"
            );
            if let Some(parent) = target.parent() {
                fs::create_dir_all(parent)
                    .unwrap_or_else(|e| panic!("patch {name}: create {}: {e}", parent.display()));
            }
            String::new()
        } else {
            fs::read_to_string(&target).unwrap_or_else(|e| panic!("patch {name}: read {path}: {e}"))
        };
        let patched = diffy::apply(&base, patch).unwrap_or_else(|e| {
            panic!("patch {name} does not apply to {path} of the pristine {krate}: {e}")
        });
        fs::write(&target, patched).unwrap_or_else(|e| panic!("write {path}: {e}"));
        files += 1;
    }
    assert!(files > 0, "patch {name} changes no file");
}

/// The guest's manifest with its relative paths made absolute and the patched crates swapped in.
fn generated_manifest(guest_dir: &Path, crates: &[Patched]) -> String {
    let source = fs::read_to_string(guest_dir.join("Cargo.toml")).expect("read guest/Cargo.toml");
    let mut doc: toml_edit::DocumentMut = source.parse().expect("guest/Cargo.toml is TOML");
    let absolute = |relative: &str| path_text(&guest_dir.join(relative));

    if let Some(path) = doc
        .get_mut("lib")
        .and_then(|lib| lib.get_mut("path"))
        .and_then(|path| path.as_str().map(str::to_owned))
    {
        doc["lib"]["path"] = toml_edit::value(absolute(&path));
    }
    let dependencies = doc
        .get_mut("dependencies")
        .and_then(toml_edit::Item::as_table_like_mut)
        .expect("guest/Cargo.toml has dependencies");
    for (_, dependency) in dependencies.iter_mut() {
        let Some(table) = dependency.as_table_like_mut() else {
            continue;
        };
        let Some(path) = table
            .get("path")
            .and_then(|p| p.as_str())
            .map(str::to_owned)
        else {
            continue;
        };
        table.insert("path", toml_edit::value(absolute(&path)));
    }
    let mut patch_table = toml_edit::Table::new();
    patch_table.set_implicit(true);
    doc["patch"] = toml_edit::Item::Table(patch_table);
    doc["patch"]["crates-io"] = toml_edit::table();
    for patched in crates {
        let mut patch = toml_edit::InlineTable::new();
        patch.insert("path", path_text(&patched.dir).into());
        doc["patch"]["crates-io"][patched.name.as_str()] = toml_edit::Item::Value(patch.into());
    }
    format!(
        "# Generated by codemode-host's build script from guest/Cargo.toml: do not edit.\n{doc}"
    )
}

fn path_text(path: &Path) -> String {
    path.to_str()
        .unwrap_or_else(|| panic!("the path {} is not UTF-8", path.display()))
        .to_owned()
}

fn write_if_changed(path: &Path, text: &str) {
    if fs::read_to_string(path).is_ok_and(|old| old == text) {
        return;
    }
    fs::write(path, text).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
}

/// Takes `<work>/.lock` for as long as the returned file lives. Two builds can share one guest
/// target directory (a debug and a release build of the host, `--all-targets`, an editor's
/// checker beside a terminal): one at a time may patch the sources, clean, build and read the
/// module, or one could delete what the other is about to read, or record its patch set over
/// the other's build.
pub fn lock(work: &Path) -> fs::File {
    fs::create_dir_all(work).unwrap_or_else(|e| panic!("create {}: {e}", work.display()));
    let path = work.join(".lock");
    let file = fs::OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(false)
        .open(&path)
        .unwrap_or_else(|e| panic!("open {}: {e}", path.display()));
    file.lock()
        .unwrap_or_else(|e| panic!("lock {}: {e}", path.display()));
    file
}

/// Whether the patched crates and the guest must be cleaned before building this patch set.
///
/// Cargo names a path dependency's library without a hash (`libboa_engine.rlib`), so builds of
/// different patch sets write the same files, while each keeps its own fingerprint. Going back
/// to a patch set built before would find that fingerprint fresh and link the other set's
/// library: a stale guest. So when the patch set differs from the one the target directory last
/// built (or that is unknown), they are cleaned first, and the set is recorded once the build
/// succeeded ([`record_built`]).
pub fn built_set_differs(prepared: &Prepared, target_dir: &Path) -> bool {
    !fs::read_to_string(built_stamp(target_dir)).is_ok_and(|built| built == prepared.patch_set)
}

/// Forgets which patch set the target directory built, before cleaning it: a build interrupted
/// after the clean must clean again.
pub fn forget_built(target_dir: &Path) {
    let _ = fs::remove_file(built_stamp(target_dir));
}

/// Records that the target directory's guest was built with `prepared`'s patch set.
pub fn record_built(prepared: &Prepared, target_dir: &Path) {
    fs::write(built_stamp(target_dir), &prepared.patch_set)
        .expect("record the patch set the guest was built with");
}

fn built_stamp(target_dir: &Path) -> PathBuf {
    target_dir.join("patched").join("built-with")
}

/// Checks that the build's lock pins every package the guest's lock pins, at the same
/// version, and nothing else: the patches swap crates' sources, never a version.
pub fn check_lock(guest_dir: &Path, manifest: &Path) {
    let pinned = |path: &Path| -> BTreeSet<(String, String)> {
        let text =
            fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
        let doc: toml_edit::DocumentMut = text
            .parse()
            .unwrap_or_else(|e| panic!("{} is not TOML: {e}", path.display()));
        doc.get("package")
            .and_then(toml_edit::Item::as_array_of_tables)
            .into_iter()
            .flatten()
            .map(|p| {
                let field = |k: &str| p.get(k).and_then(|v| v.as_str()).unwrap_or("").to_owned();
                (field("name"), field("version"))
            })
            .collect()
    };
    let expected = pinned(&guest_dir.join("Cargo.lock"));
    let built = pinned(&manifest.with_file_name("Cargo.lock"));
    assert!(
        expected == built,
        "building the guest with patched Boa crates changed its locked packages: only in guest/Cargo.lock {:?}, only in the build's {:?}",
        expected.difference(&built).collect::<Vec<_>>(),
        built.difference(&expected).collect::<Vec<_>>()
    );
}
