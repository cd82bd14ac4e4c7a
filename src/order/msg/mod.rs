//! The order path's floor: the messages its threads exchange and the
//! bounded links they travel on. The thread folders (`gateway/`, `lanes/`,
//! `journal/`, `fills/`) import this and never each other; only the wiring
//! (`order/wiring.rs`) connects them.
//!
//! ```text
//!  gateway ──Order (admission: lane queues)──▶ lanes ──FillMsg──▶ fills
//!     ▲ │                                       │ │                 │
//!     │ └──Record──▶ journal ◀──Record──────────┘ │                 │
//!     └──────────Event (EventSender) ◀────────────┴─────────────────┘
//! ```
//!
//! * [`order`]: the accepted [`order::Order`], owned by one stage at a time,
//!   and what a restart tells of it ([`order::Resumed`]);
//! * [`claim`]: the per-order atomic a worker and a `CANCEL` race on;
//! * [`admission`]: the lanes' bounded queues (producer: the gateway;
//!   consumers: the lane workers);
//! * [`event`]: what comes back to the gateway ([`event::Event`]) and the
//!   channel it comes through ([`event::EventSender`]);
//! * [`fill`]: what the workers tell the fill thread ([`fill::FillMsg`]);
//! * [`record`]: the journal's records and their payload codec;
//! * [`journal`]: the journal as the gateway and the workers append to it
//!   ([`journal::JournalLink`], implemented by the journal's handle);
//! * [`gauges`]: what the gateway publishes of the venue side's state
//!   ([`gauges::CallGauges`]);
//! * [`restore`]: a journaled order as the gateway takes it back at start
//!   ([`restore::Restore`], implemented by the gateway, called by recovery);
//! * [`halt`]: the kill switch the admin endpoint flips and the gateway and
//!   the workers read.
//!
//! A connection is named by [`crate::net::ConnId`] everywhere, the kit's
//! newtype, carried as it is.

pub(crate) mod admission;
pub(crate) mod claim;
pub(crate) mod event;
pub(crate) mod fill;
pub(crate) mod gauges;
pub mod halt;
pub mod journal;
pub(crate) mod order;
pub mod record;
pub(crate) mod restore;
