//! Ctrl-C and SIGTERM as a flag the main thread polls; a second signal exits
//! at once. The binary bounds the graceful stop too ([`STOP_DEADLINE_EXIT`]).

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// Exit status when a second signal interrupts a graceful shutdown.
pub(crate) const FORCED_EXIT: i32 = 130;

/// Exit status when a graceful stop has not ended by its deadline
/// (`Config::stop_deadline`) and the process ends without it. What was
/// `ACK`ed is durable (an `ACK` follows its journal sync); what was still
/// waiting (an attempt at a venue, the last replies) is not waited for.
pub const STOP_DEADLINE_EXIT: i32 = 4;

/// Registers SIGINT and SIGTERM: the first sets the returned flag (the
/// engine then shuts down gracefully); a second one, while the flag is set,
/// exits the process at once with [`FORCED_EXIT`].
///
/// # Errors
/// When the OS refuses to install the handlers.
pub fn stop_flag() -> std::io::Result<Arc<AtomicBool>> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let flag = Arc::new(AtomicBool::new(false));
    for sig in [SIGINT, SIGTERM] {
        // Order matters: the conditional exit runs first and sees the flag
        // still false on the first signal.
        signal_hook::flag::register_conditional_shutdown(sig, FORCED_EXIT, Arc::clone(&flag))?;
        signal_hook::flag::register(sig, Arc::clone(&flag))?;
    }
    Ok(flag)
}
