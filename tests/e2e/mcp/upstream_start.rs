//! Upstream servers never start from the workspace. codemode's current directory is usually
//! the workspace, which a program's commands can write: a program planted there (`./x`,
//! `node_modules/.bin/x`) must not run when a server is started, whether through a relative
//! entry of `PATH` or a launcher that looks in its current directory first, as `npx` does. A
//! server starts in a private directory of codemode's own, or in the `cwd` its configuration
//! names explicitly.

use std::os::unix::fs::PermissionsExt;

use super::*;

/// A shell script at `path`, executable.
fn script(path: &Path, body: &str) {
    std::fs::create_dir_all(path.parent().expect("a parent")).expect("its directory");
    std::fs::write(path, format!("#!/bin/sh\n{body}\n")).expect("write the script");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
}

/// `codemode run` from `workspace` with `PATH` set to `path` and `args`.
fn run_in(workspace: &Path, path: &str, args: &[&str]) -> Output {
    output_with_stdin(
        Command::new(binary())
            .args(["run", "--json"])
            .args(args)
            .current_dir(workspace)
            .env("PATH", path),
        "return 1",
    )
}

#[test]
fn a_program_planted_in_the_workspace_never_starts_as_a_server() {
    let dir = temp_dir("mcp-planted");
    let workspace = dir.join("workspace");
    let ran = dir.join("planted-ran");
    let planted = format!("touch {}; exit 1", ran.display());
    script(&workspace.join("x"), &planted);
    script(&workspace.join("node_modules/.bin/x"), &planted);
    // A launcher found on PATH that, like `npx`, runs what its current directory provides,
    // noting where that was.
    let bin = dir.join("bin");
    let launched_in = dir.join("launched-in");
    script(
        &bin.join("npxish"),
        &format!(
            "pwd > {}; exec ./node_modules/.bin/\"$1\"",
            launched_in.display()
        ),
    );
    let system = std::env::var("PATH").unwrap_or_default();
    let path = format!("node_modules/.bin:.::{}:{system}", bin.display());

    let bare = run_in(&workspace, &path, &["--mcp", "x=x"]);
    let stderr = String::from_utf8_lossy(&bare.stderr);
    assert_eq!(bare.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains(
            "mcp server \"x\" could not start `x`: not found in the absolute directories of PATH"
        ),
        "{stderr}"
    );

    let launched = run_in(&workspace, &path, &["--mcp", "x=npxish x"]);
    let stderr = String::from_utf8_lossy(&launched.stderr);
    assert!(
        stderr.contains("mcp server \"x\" did not start"),
        "{stderr}"
    );
    let started_in = std::fs::read_to_string(&launched_in).expect("the launcher ran");
    let started_in = Path::new(started_in.trim());
    assert!(
        started_in.ends_with("upstream/x"),
        "{}",
        started_in.display()
    );
    assert!(!started_in.starts_with(&workspace));
    let mode = std::fs::metadata(started_in)
        .expect("its directory")
        .permissions()
        .mode();
    assert_eq!(mode & 0o077, 0, "{mode:o}");

    let relative = run_in(&workspace, &path, &["--mcp", "x=./x"]);
    assert_eq!(relative.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&relative.stderr).contains("\"./x\" is a relative path"),
        "{}",
        String::from_utf8_lossy(&relative.stderr)
    );
    assert!(!ran.exists(), "the planted program ran");

    // Only a configuration that names the workspace as the server's directory starts it there.
    let config = dir.join("servers.json");
    let workspace_arg = workspace.display().to_string();
    std::fs::write(
        &config,
        json!({"mcpServers": {"x": {"command": "npxish", "args": ["x"], "cwd": workspace_arg}}})
            .to_string(),
    )
    .expect("write the configuration");
    let config_arg = config.display().to_string();
    run_in(&workspace, &path, &["--config", &config_arg]);
    assert!(ran.exists(), "an explicit cwd is honoured");
}
