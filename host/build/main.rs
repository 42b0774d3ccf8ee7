//! Builds the guest (`../guest`) for `wasm32-wasip1` so that `cargo build` alone produces a
//! complete host. The nested cargo gets its own target directory (two cargo processes on one
//! directory wait on each other's lock forever) and none of the host's compiler flags.
//!
//! The guest runs Boa with the small patches in `guest/patches/<crate>/` applied (see
//! `patched_boa.rs`), so the guest is built from a generated manifest that points at the
//! patched copies.
//!
//! A toolchain installed before `rust-toolchain.toml` named the `wasm32-wasip1` target does not
//! have it; the target is added with rustup (or the build stops at once with the command
//! that adds it), rather than failing deep inside the guest build with `can't find crate for
//! core`.
//!
//! Code that is only checked needs no guest: with `CODEMODE_GUEST_STUB=1` (for `cargo check`),
//! and under clippy while no guest has been built in this target directory yet, the host gets
//! an empty module instead (as javy does), and the next build that is not stubbed builds the
//! real one. A host built with the stub refuses to start a sandbox, saying why.

use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest, Sha256};

mod patched_boa;

/// The guest's Rust stack, in linear memory. Deeply nested programs and values need more than
/// the default 1 MiB; unused stack pages are never touched, so they cost nothing.
const GUEST_STACK_BYTES: u32 = 8 * 1024 * 1024;

fn main() {
    let manifest_dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let guest_dir = manifest_dir.join("..").join("guest");
    for path in [
        "src",
        "Cargo.toml",
        "Cargo.lock",
        "patches",
        "imports",
        "python/src",
        "python/Cargo.toml",
        "python/Cargo.lock",
        "python/patches",
        "../host/wire/src",
        "../host/wire/Cargo.toml",
    ] {
        println!("cargo:rerun-if-changed={}", guest_dir.join(path).display());
    }
    println!("cargo:rerun-if-env-changed=CODEMODE_GUEST_TARGET_DIR");
    println!("cargo:rerun-if-env-changed=CODEMODE_GUEST_STUB");
    // For the check of the documented limits against the code (src/documented_limits.rs).
    println!("cargo:rustc-env=CODEMODE_GUEST_STACK_BYTES={GUEST_STACK_BYTES}");

    let out_dir = PathBuf::from(env::var("OUT_DIR").expect("set by cargo"));
    let target_dir = env::var_os("CODEMODE_GUEST_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| shared_guest_target(&out_dir));
    let built = target_dir
        .join("wasm32-wasip1")
        .join("release")
        .join("codemode_guest.wasm");
    if stubbed(&built) {
        stub(&out_dir);
        return;
    }

    ensure_wasm_target();

    let cargo = PathBuf::from(env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    build_guest(&cargo, &guest_dir, &target_dir, &[]);
    let bytes = fs::read(&built).expect("the guest build produced no module");
    emit_guest(&out_dir, JS_GUEST, &bytes);

    // Monty declares a newer Rust than this toolchain; it builds on it (GUIDE.md).
    let python_dir = guest_dir.join("python");
    let python_target = target_dir.join("python");
    build_guest(
        &cargo,
        &python_dir,
        &python_target,
        &["--ignore-rust-version"],
    );
    let built = python_target
        .join("wasm32-wasip1")
        .join("release")
        .join("codemode_guest_python.wasm");
    let bytes = fs::read(&built).expect("the Python guest build produced no module");
    emit_guest(&out_dir, PYTHON_GUEST, &bytes);
}

/// The two guests: the file each is copied to and the variables naming it and its digest.
struct Guest {
    file: &'static str,
    path_var: &'static str,
    digest_var: &'static str,
}

const JS_GUEST: Guest = Guest {
    file: "codemode_guest.wasm",
    path_var: "CODEMODE_GUEST_WASM",
    digest_var: "CODEMODE_GUEST_SHA256",
};

const PYTHON_GUEST: Guest = Guest {
    file: "codemode_guest_python.wasm",
    path_var: "CODEMODE_PYTHON_GUEST_WASM",
    digest_var: "CODEMODE_PYTHON_GUEST_SHA256",
};

/// Builds the guest crate in `dir` (with its patched crates) into `target_dir`.
fn build_guest(cargo: &Path, dir: &Path, target_dir: &Path, extra: &[&str]) {
    let work = target_dir.join("patched");
    let _one_build_at_a_time = patched_boa::lock(&work);
    let prepared = patched_boa::prepare(cargo, dir, &work);
    println!("cargo:rerun-if-changed={}", prepared.patches.display());
    if patched_boa::built_set_differs(&prepared, target_dir) {
        patched_boa::forget_built(target_dir);
        let mut clean = guest_cargo(cargo, "clean", dir, &prepared, target_dir);
        clean.args(["-p", package_name(dir).as_str()]);
        for name in &prepared.crates {
            clean.args(["-p", name]);
        }
        succeed(clean, "clean the guest's patched crates");
    }
    // Not `--locked`: cargo rewrites the patched crate's lock entry (a path has no checksum);
    // `check_lock` below proves nothing else moved. Offline: `prepare` fetched everything.
    let mut command = guest_cargo(cargo, "build", dir, &prepared, target_dir);
    command.args(extra);
    // The stack's bounds are exported (as globals holding the addresses) so that the host can
    // give a waiting run's stack pages back to the kernel: nothing lives there between calls.
    let flags = [
        format!("-Clink-arg=-zstack-size={GUEST_STACK_BYTES}"),
        "-Clink-arg=--export=__stack_low".to_string(),
        "-Clink-arg=--export=__stack_high".to_string(),
    ];
    command.env("CARGO_ENCODED_RUSTFLAGS", flags.join("\x1f"));
    succeed(command, "build the guest for wasm32-wasip1");
    patched_boa::check_lock(dir, &prepared.manifest);
    patched_boa::record_built(&prepared, target_dir);
}

/// The package name in `dir`'s manifest.
fn package_name(dir: &Path) -> String {
    let manifest = fs::read_to_string(dir.join("Cargo.toml")).expect("read the guest's manifest");
    let doc: toml_edit::DocumentMut = manifest.parse().expect("the guest's manifest is TOML");
    doc["package"]["name"]
        .as_str()
        .expect("the guest's manifest names its package")
        .to_owned()
}

/// Whether this build gets the stub: asked for, or clippy with no guest built yet (a checkout
/// linted before it was ever built would otherwise wait for the whole guest).
fn stubbed(built: &Path) -> bool {
    if env::var_os("CODEMODE_GUEST_STUB").is_some_and(|v| v == "1") {
        return true;
    }
    let under_clippy = env::var_os("RUSTC_WORKSPACE_WRAPPER")
        .and_then(|w| {
            let name = Path::new(&w).file_stem()?.to_str()?.to_owned();
            Some(name.contains("clippy-driver"))
        })
        .unwrap_or(false);
    under_clippy && !built.exists()
}

/// The empty module a stubbed build embeds. The build script runs again on the next build
/// (the path it watches never exists), which builds the real guest unless stubbed again.
fn stub(out_dir: &Path) {
    println!(
        "cargo:rerun-if-changed={}",
        out_dir.join("the-real-guest-is-not-built").display()
    );
    println!("cargo:warning=the sandbox guest is a stub in this build (for checking only)");
    emit_guest(out_dir, JS_GUEST, STUB_GUEST);
    emit_guest(out_dir, PYTHON_GUEST, STUB_GUEST);
}

/// A module with nothing in it: the header alone.
const STUB_GUEST: &[u8] = b"\0asm\x01\0\0\0";

fn emit_guest(out_dir: &Path, guest: Guest, bytes: &[u8]) {
    let copy = out_dir.join(guest.file);
    fs::write(&copy, bytes).expect("copy the guest module");
    let digest = Sha256::digest(bytes);
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    println!("cargo:rustc-env={}={}", guest.path_var, copy.display());
    println!("cargo:rustc-env={}={hex}", guest.digest_var);
}

/// `cargo <subcommand>` on the generated guest manifest for `wasm32-wasip1` in release, in the
/// guest's own target directory, with none of the variables the host's build passes down that
/// would reach into the guest's build.
fn guest_cargo(
    cargo: &Path,
    subcommand: &str,
    guest_dir: &Path,
    prepared: &patched_boa::Prepared,
    target_dir: &Path,
) -> Command {
    let mut command = Command::new(cargo);
    command
        .current_dir(guest_dir)
        .args([
            subcommand,
            "--release",
            "--offline",
            "--target",
            GUEST_TARGET,
        ])
        .arg("--manifest-path")
        .arg(&prepared.manifest)
        .arg("--target-dir")
        .arg(target_dir);
    for var in [
        "RUSTFLAGS",
        "CARGO_ENCODED_RUSTFLAGS",
        "CARGO_BUILD_RUSTFLAGS",
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_TARGET",
        "RUSTC_WORKSPACE_WRAPPER",
        "CLIPPY_ARGS",
        "CARGO_PRIMARY_PACKAGE",
    ] {
        command.env_remove(var);
    }
    command
}

/// Runs `command`, which must succeed at `doing`.
fn succeed(mut command: Command, doing: &str) {
    let status = command
        .status()
        .unwrap_or_else(|e| panic!("could not start cargo to {doing}: {e}"));
    assert!(status.success(), "cargo could not {doing}");
}

const GUEST_TARGET: &str = "wasm32-wasip1";

/// Where the compiler keeps the guest target's standard library, if it has one.
fn target_sysroot() -> Option<PathBuf> {
    let rustc = env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let output = Command::new(rustc)
        .args(["--print", "sysroot"])
        .output()
        .ok()?;
    let sysroot = String::from_utf8(output.stdout).ok()?;
    Some(
        PathBuf::from(sysroot.trim())
            .join("lib")
            .join("rustlib")
            .join(GUEST_TARGET),
    )
}

/// Adds the guest's target to the toolchain when it lacks it, or stops with the fix.
fn ensure_wasm_target() {
    let Some(target_lib) = target_sysroot() else {
        return; // Not knowing the sysroot, let the guest build speak for itself.
    };
    if target_lib.is_dir() {
        return;
    }
    let toolchain = env::var("RUSTUP_TOOLCHAIN").ok();
    let mut add = vec!["target", "add", GUEST_TARGET];
    if let Some(toolchain) = toolchain.as_deref() {
        add.extend(["--toolchain", toolchain]);
    }
    let fix = format!("rustup {}", add.join(" "));
    let added = Command::new("rustup")
        .args(&add)
        .status()
        .is_ok_and(|status| status.success());
    if !added || !target_lib.is_dir() {
        panic!(
            "the sandbox guest is built for {GUEST_TARGET}, which this Rust toolchain does not have, and adding it failed; add it with:\n\n    {fix}\n"
        );
    }
    println!(
        "cargo:warning=added the {GUEST_TARGET} target the sandbox guest is built for to this toolchain (`{fix}`)"
    );
}

/// `<target>/[<triple>/]<profile>/build/<pkg>/out` → `<target>/guest`, shared by every profile.
fn shared_guest_target(out_dir: &Path) -> PathBuf {
    let mut dir = out_dir;
    while let Some(parent) = dir.parent() {
        if dir.file_name().is_some_and(|n| n == "build") {
            // parent is the profile directory; its parent is the target (or target/<triple>).
            if let Some(target) = parent.parent() {
                return target.join("guest");
            }
        }
        dir = parent;
    }
    out_dir.join("guest")
}
