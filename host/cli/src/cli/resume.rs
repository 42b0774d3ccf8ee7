//! `codemode resume`: a paused run continued through `run_code`, with the answers the flags
//! give; it prints what `run` prints (a result, a failure, or another pause).

use codemode_runtime::code::{Reply, Resume};
use codemode_runtime::json;
use codemode_sdk_gen::Language;

use super::run::{run_job, Job};
use super::session::Pausing;
use super::{ResumeArgs, EXIT_USAGE};

/// `CALL_ID=REST`, split at the first `=`.
fn split<'a>(flag: &str, text: &'a str) -> Result<(&'a str, &'a str), String> {
    match text.split_once('=') {
        Some((id, rest)) if !id.is_empty() => Ok((id, rest)),
        _ => Err(format!(
            "codemode: --{flag} {text:?}: expected CALL_ID=… (the call id a pause printed)"
        )),
    }
}

fn answers(args: &ResumeArgs) -> Result<Vec<(String, Reply)>, String> {
    let mut answers = Vec::new();
    for reply in &args.reply {
        let (id, text) = split("reply", reply)?;
        let value = json::parse(text.as_bytes())
            .map_err(|e| format!("codemode: --reply {id}=…: not JSON ({e}); quote strings, as in --reply {id}='\"yes\"'"))?;
        answers.push((id.to_owned(), Ok(value)));
    }
    for reject in &args.reject {
        let (id, message) = split("reject", reject)?;
        answers.push((id.to_owned(), Err(message.to_owned())));
    }
    Ok(answers)
}

pub async fn resume(args: ResumeArgs) -> u8 {
    let replies = match answers(&args) {
        Ok(replies) => replies,
        Err(message) => {
            eprintln!("{message}");
            return EXIT_USAGE;
        }
    };
    let pausing = match Pausing::open(&args.pause, &args.tools.ask) {
        Ok(pausing) => pausing,
        Err(message) => {
            eprintln!("{message}");
            return EXIT_USAGE;
        }
    };
    let mut args = args;
    if args.budget.lang.is_none() {
        // The record says which guest paused the run; a refusal is reported by the resume.
        if let Ok(sha256) = pausing.durability.guest_of(&args.run_id).await {
            args.budget.lang = match codemode_host::Guest::of_module(&sha256) {
                Some(codemode_host::Guest::Python) => Some(Language::Python),
                Some(codemode_host::Guest::JavaScript) => Some(Language::TypeScript),
                None => None,
            };
        }
    }
    let job = Job {
        // The record carries the program; run_code's own text is unused for a resume.
        program: String::new(),
        description: format!("Resume run {}", args.run_id),
        resume: Some(Resume {
            run_id: args.run_id.clone(),
            replies,
        }),
        json: args.json,
        verbose: false,
    };
    run_job(job, &args.tools, &args.budget, Some(pausing)).await
}
