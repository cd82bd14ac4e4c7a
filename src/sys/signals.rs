//! Ctrl-C and SIGTERM as a flag the main thread polls.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// Registers SIGINT and SIGTERM to set the returned flag.
///
/// # Errors
/// When the OS refuses to install the handlers.
pub fn stop_flag() -> std::io::Result<Arc<AtomicBool>> {
    let flag = Arc::new(AtomicBool::new(false));
    signal_hook::flag::register(signal_hook::consts::SIGINT, Arc::clone(&flag))?;
    signal_hook::flag::register(signal_hook::consts::SIGTERM, Arc::clone(&flag))?;
    Ok(flag)
}
