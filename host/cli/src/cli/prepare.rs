//! `codemode prepare`: the sandbox built and cached before its first use, so that a container
//! image or a CI job pays the seconds once, ahead of any request.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::{EXIT_OK, EXIT_PROGRAM_FAILED};

/// How often the elapsed time is shown while the guest is being built.
const PROGRESS_EVERY: Duration = Duration::from_secs(2);

/// Prepares the sandbox, saying on stderr what it does while it builds, and on stdout where
/// the result is kept. Exit 0 when prepared (or already), 1 when it cannot be.
pub async fn prepare() -> u8 {
    let started = Instant::now();
    // Set when the disk cache has no module and the guest is built: only then is there
    // progress to show.
    let building: Arc<Mutex<Option<String>>> = Arc::default();
    let seen = building.clone();
    codemode_host::on_guest_preparation(move |cache| {
        let place = cache.map_or_else(
            || "nowhere: no cache directory".to_owned(),
            |p| p.display().to_string(),
        );
        eprintln!(
            "codemode: preparing the sandbox (about ten seconds; it will be cached under {place})"
        );
        *seen.lock().unwrap_or_else(|p| p.into_inner()) = Some(place);
    });
    let mut work = tokio::task::spawn_blocking(codemode_host::prepare);
    let mut ticks =
        tokio::time::interval_at(tokio::time::Instant::now() + PROGRESS_EVERY, PROGRESS_EVERY);
    let outcome = loop {
        tokio::select! {
            outcome = &mut work => break outcome,
            _ = ticks.tick() => {
                if building.lock().unwrap_or_else(|p| p.into_inner()).is_some() {
                    eprintln!("codemode: still preparing ({}s)", started.elapsed().as_secs());
                }
            }
        }
    };
    let prepared = match outcome {
        Ok(Ok(prepared)) => prepared,
        Ok(Err(error)) => {
            tracing::error!("the sandbox could not be prepared: {error}");
            return EXIT_PROGRAM_FAILED;
        }
        Err(error) => {
            tracing::error!("the preparation of the sandbox stopped: {error}");
            return EXIT_PROGRAM_FAILED;
        }
    };
    let place = prepared.cache_dir.as_ref().map_or_else(
        || "not cached: no cache directory (set CODEMODE_CACHE_DIR)".to_owned(),
        |dir| format!("cached under {}", dir.display()),
    );
    if prepared.from_cache {
        println!("the sandbox was already prepared ({place})");
    } else {
        println!(
            "the sandbox is prepared in {:.1}s ({place})",
            started.elapsed().as_secs_f64()
        );
    }
    EXIT_OK
}
