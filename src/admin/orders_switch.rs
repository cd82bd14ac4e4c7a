//! The order kill switch as the admin endpoint sees it: `POST /orders/halt`
//! (`?cancel=queued` also cancels every order not yet at a bridge) and
//! `POST /orders/resume`. The switch itself belongs to the order path
//! (`order/msg/halt.rs`); the endpoint holds it through
//! [`OrdersSwitch`], so `admin/` imports no stage.
//!
//! Answers: `200 halted` / `200 resumed` when the state changed; `409` with
//! one line when it was already so (nothing changes); `400` for an unknown
//! `cancel=` value; `404` when the engine runs no order path.

use std::fmt::Debug;

use super::http::{Request, Response};

/// Why a switch request changed nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SwitchError {
    /// `halt` while halted.
    #[error("already halted")]
    AlreadyHalted,
    /// `resume` while not halted.
    #[error("not halted")]
    NotHalted,
}

/// The order path's kill switch.
pub trait OrdersSwitch: Debug + Send + Sync {
    /// Stops order intake (every `NEW` is refused) and holds queued orders;
    /// with `cancel_queued`, the orders not yet at a bridge are cancelled.
    ///
    /// # Errors
    /// [`SwitchError::AlreadyHalted`]: nothing changed.
    fn halt(&self, cancel_queued: bool) -> Result<(), SwitchError>;
    /// Lets orders flow again.
    ///
    /// # Errors
    /// [`SwitchError::NotHalted`]: nothing changed.
    fn resume(&self) -> Result<(), SwitchError>;
    /// Is the order path halted now?
    fn is_halted(&self) -> bool;
}

/// Answers `POST /orders/halt` and `POST /orders/resume`.
pub(crate) fn answer(req: &Request, path: &str, switch: Option<&dyn OrdersSwitch>) -> Response {
    let Some(switch) = switch else {
        return Response::text(404, "not found: no order path\n");
    };
    let done = match path {
        "/orders/halt" => {
            let cancel = match req.query("cancel") {
                None => false,
                Some("queued") => true,
                Some(other) => {
                    let shown: String = other.chars().take(16).collect();
                    return Response::text(
                        400,
                        format!("bad cancel value '{shown}': the only one is cancel=queued\n"),
                    );
                }
            };
            switch.halt(cancel).map(|()| {
                if cancel {
                    "halted; orders not yet at a bridge are being cancelled\n"
                } else {
                    "halted\n"
                }
            })
        }
        _ => switch.resume().map(|()| "resumed\n"),
    };
    match done {
        Ok(text) => Response::text(200, text),
        Err(e) => Response::text(409, format!("{e}: nothing changed\n")),
    }
}
