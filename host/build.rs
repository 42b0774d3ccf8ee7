//! Builds the guest (`../guest`) for `wasm32-wasip1` so that `cargo build` alone produces a
//! complete host. The nested cargo gets its own target directory (two cargo processes on one
//! directory wait on each other's lock forever) and none of the host's compiler flags.

use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest, Sha256};

/// The guest's Rust stack, in linear memory. Deeply nested programs and values need more than
/// the default 1 MiB; unused stack pages are never touched, so they cost nothing.
const GUEST_STACK_BYTES: u32 = 8 * 1024 * 1024;

fn main() {
    let manifest_dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let guest_dir = manifest_dir.join("..").join("guest");
    for path in ["src", "Cargo.toml", "Cargo.lock"] {
        println!("cargo:rerun-if-changed={}", guest_dir.join(path).display());
    }
    println!("cargo:rerun-if-env-changed=CODEMODE_GUEST_TARGET_DIR");

    let out_dir = PathBuf::from(env::var("OUT_DIR").expect("set by cargo"));
    let target_dir = env::var_os("CODEMODE_GUEST_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| shared_guest_target(&out_dir));

    let cargo = env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut command = Command::new(cargo);
    command
        .current_dir(&guest_dir)
        .args([
            "build",
            "--release",
            "--locked",
            "--target",
            "wasm32-wasip1",
        ])
        .arg("--target-dir")
        .arg(&target_dir);
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
    command.env(
        "CARGO_ENCODED_RUSTFLAGS",
        format!("-Clink-arg=-zstack-size={GUEST_STACK_BYTES}"),
    );
    let status = command
        .status()
        .expect("could not start cargo to build the guest");
    assert!(
        status.success(),
        "building the guest for wasm32-wasip1 failed"
    );

    let built = target_dir
        .join("wasm32-wasip1")
        .join("release")
        .join("codemode_guest.wasm");
    let bytes = fs::read(&built).expect("the guest build produced no module");
    let copy = out_dir.join("codemode_guest.wasm");
    fs::write(&copy, &bytes).expect("copy the guest module");
    let digest = Sha256::digest(&bytes);
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    println!("cargo:rustc-env=CODEMODE_GUEST_WASM={}", copy.display());
    println!("cargo:rustc-env=CODEMODE_GUEST_SHA256={hex}");
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
