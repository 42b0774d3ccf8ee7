//! The two guard plugins, written as ordinary pipeline users: the per-call timeout policy (an
//! execute wrapper) and the repeat-tool reminder (a post-execute hook).

pub mod repeat_reminder;
pub mod timeout;
