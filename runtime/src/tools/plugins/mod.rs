//! Guard plugins, written as ordinary pipeline users: the per-call timeout policy (an execute
//! wrapper), the repeat-tool reminder (a post-execute hook) and the name-based call policy
//! (a pre-execute hook).

pub mod policy;
pub mod repeat_reminder;
pub mod timeout;
